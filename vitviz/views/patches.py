"""What the Patches tab shows: the grid, the token counts, the cost table, one patch's vectors, the toy."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

from vitviz.core import images, patches
from vitviz.core.images import Fitted
from vitviz.core.posembed import similarity
from vitviz.models import budget
from vitviz.models import cache as models
from vitviz.render import browser, plotting
from vitviz.specs import registry
from vitviz.specs.state import Settled, settle
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record

EMBED_DIM = 64
"""Width of the illustrative projection on this tab (random weights, seeded)."""


@dataclass
class PatchesView:
    grid: Image.Image  # the image with its labelled patch grid (clickable)
    scale: int  # display pixels per image pixel
    summary: str  # markdown: counts and the fitting note
    costs: str  # markdown table of MACs per ViT size
    cost_chart: Image.Image  # bar chart for one size
    equivalence: str  # markdown: flatten+Linear vs Conv2d


def fit(rgb: np.ndarray, resolution: int, patch: int, policy: str) -> Fitted:
    """:func:`vitviz.core.images.fit_to_patches`, after checking from the shapes alone that the grid is drawable."""
    h, w = images.fitted_shape(*rgb.shape[:2], resolution, patch, policy)
    budget.check_grid((h // patch, w // patch))
    return images.fit_to_patches(rgb, resolution, patch, policy)


def slip_sentence(size_name: str, patch: int, parts: dict[str, int]) -> str:
    """What counting T²·D per head (instead of T²·D/H) would claim for the attention of ``size_name``."""
    heads = registry.VIT_SIZES[size_name].heads
    scores = parts["attention scores QKᵀ"]
    attn = scores + parts["attention × V"]
    return (f"(A common slip counts T²·D per head instead of T²·D/H. For {size_name}/{patch} that makes the QKᵀ "
            f"scores alone {_fmt(scores * heads)} ({heads}× the real {_fmt(scores)}), and scores plus weighted sum "
            f"{_fmt(attn * heads)} instead of {_fmt(attn)}.)")


def projection(patch: int, channels: int = 3, dim: int = EMBED_DIM, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random patch projection: weight (D, C, P, P) and bias (D,)."""
    g = torch.Generator().manual_seed(seed + patch)
    fan_in = channels * patch * patch
    weight = torch.randn(dim, channels, patch, patch, generator=g) / fan_in ** 0.5
    return weight, torch.randn(dim, generator=g) * 0.02


def to_chw(rgb: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (1, 3, H, W) float in [0, 1]."""
    return torch.tensor(rgb, dtype=torch.uint8).permute(2, 0, 1)[None].float() / 255.0


def _fmt(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f}"


def cost_table(patch: int, h: int, w: int) -> tuple[str, dict[str, dict[str, int]]]:
    """Markdown table of MACs (components as rows, standard sizes as columns), and the raw numbers."""
    rows = {name: patches.vit_macs(size, patch, h, w) for name, size in registry.VIT_SIZES.items()}
    names = list(rows)
    out = ["| component | " + " | ".join(f"{n}/{patch}" for n in names) + " |",
           "|---" * (len(names) + 1) + "|"]
    for part in patches.COST_PARTS:
        out.append(f"| {part} | " + " | ".join(_fmt(rows[n][part]) for n in names) + " |")
    totals = {n: sum(rows[n].values()) for n in names}
    out.append("| **total** | " + " | ".join(f"**{_fmt(totals[n])}**" for n in names) + " |")
    out.append("| attention share | " + " | ".join(
        f"{(rows[n]['attention scores QKᵀ'] + rows[n]['attention × V']) / totals[n]:.1%}" for n in names) + " |")
    return "\n".join(out), rows


def scale_of(fitted: Fitted) -> int:
    """Display pixels per image pixel of the grid view (an integer, so patch edges stay exact; the long side at
    most the style's figure height, 660 px in projector mode)."""
    return plotting.display_scale(*fitted.image.shape[:2], plotting.style().max_height)


def grid_image(fitted: Fitted, highlight: tuple[int, int] | None = None) -> tuple[Image.Image, int]:
    """(the labelled patch grid, display scale); ``highlight`` outlines patch (row, col)."""
    scale = scale_of(fitted)
    return plotting.patch_grid(fitted.image, fitted.patch, scale, highlight=highlight), scale


def halving_line(n: int, patch: int) -> str:
    """What halving the patch side does to N patches: 4N patches, and the attention entries with the class token,
    (4N + 1)² against (N + 1)², a little under 16 times (exactly 16 times for the N² patch pairs alone)."""
    if patch < 2 or patch % 2:
        return ""
    before, after = (n + 1) ** 2, (4 * n + 1) ** 2
    return (f"- halve the patch to {patch // 2}: **4N = {4 * n:,}** patches and (4N + 1)² = {after:,} entries, "
            f"**{after / before:.2f}×** as many (exactly 16× for the patch pairs alone, N² → 16N²)\n")


def render(fitted: Fitted, size_name: str = "ViT-B") -> PatchesView:
    """Everything the tab shows for one fitted image."""
    rgb, p = fitted.image, fitted.patch
    h, w = rgb.shape[:2]
    grid, scale = grid_image(fitted)
    size = registry.VIT_SIZES[size_name]
    counts = patches.token_counts(h, w, p, size.heads, size.depth)
    summary = (
        f"{fitted.note}\n\n"
        f"- patches **N = ({h}/{p})·({w}/{p}) = {counts['rows']}·{counts['cols']} = {counts['patches']:,}**\n"
        f"- sequence with the class token **N + 1 = {counts['sequence']:,}**\n"
        f"- one attention matrix: **(N + 1)² = {counts['attention entries']:,}** entries per head per layer; "
        f"{size_name} ({size.heads} heads × {size.depth} layers) computes "
        f"**{counts['all attention entries']:,}** of them per image\n"
        f"- each patch is **{p}·{p}·3 = {p * p * 3:,}** numbers before the projection\n"
        + halving_line(counts["patches"], p)
        + "\nPoint at a patch in the inspector to see its vectors."
    )
    table, raw = cost_table(p, h, w)
    parts = raw[size_name]
    total = sum(parts.values())
    attn = parts["attention scores QKᵀ"] + parts["attention × V"]
    costs = (f"Multiply-accumulates (MACs) of one forward pass at {w}×{h} with {p}×{p} patches. "
             f"Attention itself (scores and weighted sum) is **{attn / total:.1%}** of {size_name}/{p}; "
             "the linear layers (QKV, projection, MLP) dominate until the sequence gets long. "
             + slip_sentence(size_name, p, parts) + "\n\n" + table)
    chart = plotting.bars({k: float(v) for k, v in parts.items()}, f"{size_name}/{p} at {w}×{h}: where the MACs go",
                          "multiply-accumulates", highlight=("attention scores QKᵀ", "attention × V"))
    weight, bias = projection(p)
    diff = patches.linear_vs_conv(to_chw(rgb), weight, bias)
    equivalence = (f"Flatten each patch and apply one Linear layer, or run a Conv2d with kernel = stride = {p} "
                   f"using the same {EMBED_DIM}×3×{p}×{p} weights: the largest difference over all "
                   f"{counts['patches']:,}×{EMBED_DIM} outputs is **{diff:.2e}** (float32 rounding). "
                   "They are the same operation.")
    return PatchesView(grid, scale, summary, costs, chart, equivalence)


def patch_vectors(fitted: Fitted, row: int, col: int) -> Image.Image:
    """Figure of patch (row, col): its P·P·C flattened pixels and its D-dim embedding."""
    p = fitted.patch
    gh, gw = fitted.grid
    row, col = min(max(row, 0), gh - 1), min(max(col, 0), gw - 1)
    x = to_chw(fitted.image)
    flat = patches.patchify(x, p)[0, row * gw + col]
    weight, bias = projection(p)
    emb = patches.embed_linear(flat[None], weight, bias)[0]
    return plotting.vector_strip(
        [flat.numpy(), emb.numpy()],
        [f"flattened patch p{row},{col}: {flat.numel()} = {p}·{p}·3 values (R, then G, then B, row by row)",
         f"its embedding: {EMBED_DIM} values = flattened · Wᵀ + b (seeded random W, as before training)"],
        f"Patch p{row},{col}",
    )


def click_to_patch(x: int, y: int, patch: int, scale: int) -> tuple[int, int]:
    """Display pixel (x, y) on the grid image -> (row, col)."""
    step = patch * scale
    return int(y) // step, int(x) // step


def toy_figures() -> tuple[tuple[Image.Image, str], ...]:
    """The 8×8 toy walk-through as labelled figures (computed once per figure style)."""
    return _toy_figures(plotting.style())


@lru_cache(maxsize=2)
def _toy_figures(style: plotting.Style) -> tuple[tuple[Image.Image, str], ...]:
    t = patches.toy_walkthrough()
    names = ["p00", "p01", "p10", "p11"]
    dims = [str(i) for i in range(t["E"].shape[1])]
    hm = plotting.heatmap
    figs = [
        (hm(t["image"], "1. Toy image, 8×8 pixels", "x (pixel)", "y (pixel)", "grey level", cmap="gray",
            annotate=False), "8×8 grey image; four 4×4 patches"),
        (hm(t["flat"], "2. Patches flattened: 4 × 16", "pixel in patch", "patch", "grey level", cmap="gray",
            yticks=names), "each patch becomes a 16-vector"),
        (hm(t["E"], "3. Embeddings E = flat · W (4 × 8)", "embedding dimension", "patch", "value", signed=True,
            ticks=dims, yticks=names, annotate=True), "projected to d_model = 8 (W: seed 42, scale 0.3)"),
        (hm(t["PE"], "4. 2D sinusoidal PE (row | column)", "dimension (0-3 row, 4-7 column)", "patch", "value",
            signed=True, ticks=dims, yticks=names, annotate=True), "position code added to each token"),
        (hm(t["E_pe"], "5. E + PE", "embedding dimension", "patch", "value", signed=True, ticks=dims, yticks=names,
            annotate=True), "tokens now know where they came from"),
        (hm(t["tokens"], "6. [CLS] prepended: 5 × 8", "embedding dimension", "token", "value", signed=True,
            ticks=dims, yticks=["CLS"] + names, annotate=True), "the sequence the transformer reads"),
        (hm(similarity(t["PE"], "dot"), "7. PE · PE (dot product)", "patch", "patch", "dot product",
            ticks=names, annotate=True), "4.00 self, 3.54 one coordinate apart, 3.08 diagonal"),
    ]
    return tuple(figs)


def render_filters(loaded, k: int = 8) -> tuple[Image.Image, str]:
    """The first ``k`` principal components of a model's patch filters as P×P colour pictures, and a summary.

    Each component is stretched to its own range (mid-grey is zero when its entries are balanced).
    """
    weight = loaded.read(patches.embedding_weight)
    comps, share = patches.filter_components(weight, k)
    pictures = []
    for c in comps:  # (C, P, P) -> (P, P, 3) uint8, enlarged with sharp pixel edges
        rgb = (plotting.normalise(np.transpose(c, (1, 2, 0))) * 255).round().astype(np.uint8)
        pictures.append(np.asarray(plotting.upscale(rgb, plotting.display_scale(*rgb.shape[:2], 120))))
    d, _, p, _ = weight.shape
    titles = [f"PC{i + 1}\n{s:.1%}" for i, s in enumerate(share)]
    figure = plotting.panels(pictures, titles, f"{loaded.spec.key}: what its {d} patch filters have in common",
                             cols=4, panel_px=140)
    text = (f"The patch projection is {d} filters of {p}×{p}×3 numbers, one per embedding dimension. Their first "
            f"{len(share)} principal components explain **{share.sum():.0%}** of how the filters differ "
            f"(PC1 alone {share[0]:.0%}). In the ViT paper, trained filters look like smooth colour blobs and "
            "stripes at several frequencies, much like a CNN's first layer; random filters look like noise.")
    return figure, text


# ---- the views of the Patches tab, from their declared settings -----------------------------------------------

def fitted_for(rgb: np.ndarray, values: dict) -> tuple[Fitted, Settled]:
    """The picture fitted as the Patches view's settings ask, and the settings as used (the resolution rounded
    down to whole patches)."""
    s = settle(values)
    p, res = values["patch"], values["resolution"]
    used = max(res // p * p, p)
    s.use("resolution", used, f"The resolution is {used} px: {res} rounded down to a whole number of {p}-px patches.")
    return fit(rgb, used, p, values["policy"]), s


@record(declared.PATCHES, tab="patches", bundle=True, runs_model=False)
def show_patches(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The patch grid, the token counts, the cost table and chart, and flatten + Linear = a stride-P convolution."""
    fitted, s = fitted_for(rgb, values)
    v = render(fitted, values["model_size"])
    h, w = fitted.image.shape[:2]
    size = registry.VIT_SIZES[values["model_size"]]
    numbers = {"input": fitted.note, **patches.token_counts(h, w, fitted.patch, size.heads, size.depth),
               "macs": patches.vit_macs(size, fitted.patch, h, w)}
    weight, bias = projection(fitted.patch)
    return Shown({"grid": v.grid, "costs": v.cost_chart}, {"summary": v.summary, "costs": v.costs,
                                                           "equivalence": v.equivalence}, numbers, s,
                 data={"inspector": browser.patches_payload(fitted, weight.numpy(), bias.numpy())})


@record(declared.TOY, tab="patches", runs_model=False)
def show_toy(_rgb: None, values: dict, progress=None) -> Shown:
    """One step of the 8×8 toy walk-through: its figure and a sentence."""
    figures = toy_figures()
    step = values["step"]
    image, caption = figures[step - 1]
    return Shown({"toy": image}, {"caption": f"**Step {step} of {len(figures)}.** {caption}"}, {}, settle(values))


@record(declared.FILTERS, tab="patches")
def show_patch_filters(_rgb: None, values: dict, progress=None) -> Shown:
    """The principal components of a model's patch filters (the embedded model's when the asked one is away)."""
    runner = models.get_model(values["model"], progress)
    image, text = render_filters(runner)
    return Shown({"filters": image}, {"text": text}, {"model": runner.spec.key}, settle(values), runner.spec.key,
                 runner.notice)
