"""The 'inside one head' view: a query's scores, its softmax and the weighted sum, beside the model's own numbers."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator
from PIL import Image, ImageDraw

from vitviz.analyses import heads
from vitviz.analyses.heads import HeadTrace, LayerRecord
from vitviz.core.images import Fitted
from vitviz.models import cache as models
from vitviz.render import browser, plotting
from vitviz.specs.state import settle
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record


def query_token(record: LayerRecord, row: int, col: int, cls: bool = False) -> tuple[int, tuple[int, int] | None]:
    """(token index, (row, col) or None for [CLS]): patch (row, col) clamped to the grid, or the class token."""
    if cls:
        return 0, None
    gh, gw = record.grid
    row, col = int(np.clip(row, 0, gh - 1)), int(np.clip(col, 0, gw - 1))
    return record.prefix + row * gw + col, (row, col)


def render(fitted: Fitted, tr: HeadTrace, where: tuple[int, int] | None, cmap: str = "inferno") -> tuple[Image.Image, str]:
    """Four steps in one figure: the query patch, its scores over the keys, the softmax, the weighted sum.

    Returns (figure, markdown with the numbers and how far ours are from the model's).
    """
    gh, gw = tr.grid
    p = tr.prefix
    rgb = fitted.image
    patch = rgb.shape[0] // gh
    shown = Image.fromarray(rgb)
    if where is not None:
        r, c = where
        ImageDraw.Draw(shown).rectangle([c * patch, r * patch, (c + 1) * patch - 1, (r + 1) * patch - 1],
                                        outline=(0, 229, 255), width=max(1, patch // 5))
    scores = tr.scores[p:].reshape(gh, gw)
    weights = tr.weights[p:].reshape(gh, gw)
    name = "[CLS]" if where is None else f"patch ({where[0]}, {where[1]})"
    d = tr.q.shape[0]
    with plotting.figure(2, 2, figsize=(plotting.fig_width(7.8), 6.3)) as (fig, axes):
        ax = axes[0, 0]
        ax.imshow(shown)
        ax.set_title(f"1. query: {name}")
        ax.axis("off")
        for ax, m, title, label in ((axes[0, 1], scores, "2. scores q·k/√d", "score"),
                                    (axes[1, 0], weights, "3. softmax", "weight")):
            im = ax.imshow(m, cmap=cmap, interpolation="nearest")
            ax.set_title(title)
            ax.axis("off")
            bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
            bar.locator = MaxNLocator(3)
            bar.update_ticks()
        ax = axes[1, 1]
        dims = np.arange(d)
        ax.bar(dims, tr.model_out, color="#0072b2", width=1.0)  # the model's (bars) and ours (dots)
        ax.plot(dims, tr.mixed, "o", color="#e69f00", markersize=3 if d > 32 else 5)
        ax.set_title("4. Σ aⱼvⱼ vs model")
        ax.set_xlabel(f"dimension (d = {d})")
        ax.yaxis.set_major_locator(MaxNLocator(3))
        fig.suptitle(f"Layer {tr.layer + 1}, head {tr.head}: {name} as the query", fontweight="bold")
        fig.tight_layout(w_pad=2.5)
        image = plotting.to_image(fig)
    top = int(np.argmax(tr.weights))
    top_name = "[CLS]" if top == 0 else ("a register" if top < p else f"patch {divmod(top - p, gw)}")
    text = (
        f"**q** has {d} numbers (length {np.linalg.norm(tr.q):.2f}). Its scores with the {tr.scores.size} keys run "
        f"from {tr.scores.min():.2f} to {tr.scores.max():.2f}; the softmax turns them into weights that sum to 1, "
        f"the largest **{tr.weights[top]:.1%}** on {top_name}"
        + ("" if p == 0 else f", {tr.weights[:p].sum():.1%} on the [CLS]{' and register' if p > 1 else ''} "
           f"token{'s' if p > 1 else ''} (not drawn on the image)")
        + f". The output is the weighted sum of the {tr.scores.size} value vectors (bars: what the model "
        "computed; dots: our sum).\n\n"
        f"Checked against the model: |our softmax − its attention| ≤ **{tr.softmax_error:.1e}**, "
        f"|our sum − its output| ≤ **{tr.output_error:.1e}** (float32 rounding).")
    return image, text


@record(declared.INSIDE_HEAD, tab="attention")
def show_inside_head(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """One head of one layer for one query, with this picture's real numbers, checked against the model's own."""
    runner = models.get_model(values["model"], progress)
    s = settle(values)
    s.use("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"]))
    layer = s.within("layer", runner.depth, f"{runner.spec.key} has {runner.depth} layers.", lo=1)
    fitted, record = heads.layer_record(runner, rgb, values["resolution"], layer)
    s.within("head", record.heads - 1, f"{runner.spec.key} has {record.heads} heads per layer.")
    gh, gw = record.grid
    if not values["cls"]:
        s.within("row", gh - 1, f"The picture is {gh}×{gw} patches.")
        s.within("col", gw - 1, f"The picture is {gh}×{gw} patches.")
    token, where = query_token(record, s.values["row"], s.values["col"], values["cls"])
    tr = heads.trace(record, s.values["head"], token)
    image, text = render(fitted, tr, where, values["cmap"])
    numbers = {"model": runner.spec.key, "layer": layer, "head": tr.head, "query": token,
               "softmax_error": tr.softmax_error, "output_error": tr.output_error}
    data = {"inside": browser.inside_payload(fitted, record, tr.head, token, values["cmap"])}
    return Shown({"inside_head": image}, {"text": text}, numbers, s, runner.spec.key, runner.notice, data)
