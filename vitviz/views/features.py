"""The patch-feature PCA view: the picture, its tokens' first three components as colour, and the foreground."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from vitviz.analyses import features
from vitviz.core.images import Fitted
from vitviz.models import cache as models
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.specs.state import settle
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record


def render(loaded: Runner, fitted: Fitted, streams: torch.Tensor, layer: int) -> tuple[Image.Image, str]:
    """Figure and summary for the patch tokens after layer number ``layer`` (1 = first; clamped to the depth),
    from the (L, T, D) token streams of :func:`vitviz.analyses.features.tokens_for`."""
    depth = streams.shape[0]
    layer = int(np.clip(int(layer), 1, depth))
    tokens = streams[layer - 1]
    patches = tokens[loaded.spec.prefix:]
    gh, gw = fitted.grid
    r = features.oriented(features.pca(patches, 3), (gh, gw))
    rgb = fitted.image
    size = plotting.panel_size(*rgb.shape[:2], 300)
    picture = np.asarray(Image.fromarray(rgb).resize(size, Image.BILINEAR))
    colour = np.asarray(Image.fromarray(features.to_rgb(r.projections, (gh, gw))).resize(size, Image.NEAREST))
    fg = r.projections[:, 0].reshape(gh, gw) > 0
    shown = picture.copy()
    dim = np.asarray(Image.fromarray((~fg).astype(np.uint8) * 255).resize(size, Image.NEAREST)) > 0
    shown[dim] = (shown[dim] * 0.25).astype(np.uint8)  # background darkened
    titles = ["the picture", f"PC1-3 as red, green, blue\n{r.share.sum():.0%} of the variance",
              f"PC1 > 0: foreground\n{fg.mean():.0%} of the patches"]
    image = plotting.panels([picture, colour, shown], titles,
                            f"{loaded.spec.key}: patch tokens after layer {layer} of {depth}", cols=3, panel_px=240)
    text = (f"Each of the {gh * gw} patch tokens ({tokens.shape[1]} numbers each) is placed on the three directions "
            f"in which the tokens of this picture differ most: PC1 {r.share[0]:.0%}, PC2 {r.share[1]:.0%}, PC3 "
            f"{r.share[2]:.0%} of their variance. Patches with alike colours are represented alike, wherever they "
            "are. The sign of a component is arbitrary; PC1 is oriented so the picture's border is mostly "
            "negative (in the colours, the red side is the inside), and its positive side is called foreground (a "
            "guess that works when the object is not at the border). "
            + ("These are the last block's output tokens, before the model's final LayerNorm."
               if layer == depth else f"These are block {layer}'s output tokens."))
    return image, text


@record(declared.FEATURE_PCA, tab="attention")
def show_feature_pca(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """A layer's patch tokens on their first three principal components, as colour, and PC1 as the foreground."""
    runner = models.get_model(values["model"], progress)
    s = settle(values)
    s.use("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"]))
    fitted, streams = features.tokens_for(runner, rgb, values["resolution"])
    layer = s.within("layer", streams.shape[0], f"{runner.spec.key} has {streams.shape[0]} layers.", lo=1)
    image, text = render(runner, fitted, streams, layer)
    numbers = {"model": runner.spec.key, "layer": layer, "grid": list(fitted.grid)}
    return Shown({"feature_pca": image}, {"text": text}, numbers, s, runner.spec.key, runner.notice)
