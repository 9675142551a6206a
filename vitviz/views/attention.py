"""What the Attention tab shows, drawn from an :class:`~vitviz.analyses.attention.Analysis` only.

Every ``render_*`` works from one cached forward (:func:`vitviz.analyses.attention.analyse`),
so moving a slider never runs the model again. Layers are numbered from 1 here,
as the UI shows them, and clamped to the model's depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from vitviz.core import owned
from vitviz import assets
from vitviz.analyses.attention import Analysis, analyse, distance
from vitviz.analyses.attention import rollout as attention_rollout
from vitviz.core import attention as att
from vitviz.core.lru import LRU
from vitviz.models import cache as models
from vitviz.models.runner import picture_address
from vitviz.render import plotting
from vitviz.specs import registry
from vitviz.specs.state import Settled, clamp, settle
from vitviz.specs.views import comparison_choices
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record


def layer_index(a: Analysis, layer: int) -> int:
    """The 0-based index of layer number ``layer`` (1 = first), clamped to the model's depth."""
    return int(np.clip(int(layer), 1, a.maps.layers)) - 1


def map_grid(rgb: np.ndarray, maps: list[np.ndarray], titles: list[str], suptitle: str, cmap: str,
             alpha: float, masks: list[np.ndarray | None] | None = None,
             bar_label: str = "attention (each map scaled to its own range)") -> Image.Image:
    """Attention maps overlaid on the image, one panel each, with optional threshold outlines."""
    masks = masks or [None] * len(maps)
    # drawn at the size the grid shows them (a heads grid's panels are about 180 px, not 300: half the time)
    tile = plotting.grid_layout(rgb.shape[:2], titles, suptitle, cmap, bar_label).tile
    small = np.asarray(Image.fromarray(rgb).resize(tile, Image.BILINEAR))
    images = [plotting.heat_overlay(small, m, cmap, alpha, k) for m, k in zip(maps, masks)]
    return plotting.panels(images, titles, suptitle, cmap, bar_label)


@dataclass
class HeadsView:
    heads: Image.Image | None
    table: str
    box: Image.Image | None
    crop: Image.Image | None


def render_heads(a: Analysis, layer: int, keep: float = 0.6, cmap: str = "inferno", alpha: float = 0.6,
                 grid: bool = True, box: bool = True) -> HeadsView:
    """Per-head class-token attention of layer number ``layer`` (plus head mean), with DINO's mass threshold, and
    the box around the head mean's mask; without ``grid`` the per-head figure is not drawn (``heads`` None), without
    ``box`` neither the boxed picture nor its crop (``box`` and ``crop`` None). The table is always made."""
    maps = a.maps
    layer = layer_index(a, layer)
    rgb = a.fitted.image
    panels, titles, masks, rows = [], [], [], []
    for h in list(range(maps.heads)) + [None]:
        m = maps.cls_map(layer, h)
        mask, mass, frac = att.mass_mask(m, keep)
        name = "head mean" if h is None else f"head {h}"
        panels.append(m)
        masks.append(mask)
        titles.append(f"{name}\n{frac:.0%} of patches")
        rows.append(f"| {name} | {mass:.1%} | {frac:.1%} | {int(mask.sum())} |")
    table = (f"Class-token attention, layer {layer + 1} of {maps.layers}. The contour keeps the fewest patches "
             f"holding {keep:.0%} of each map's attention mass.\n\n"
             "| map | mass kept | patches kept | patches |\n|---|---|---|---|\n" + "\n".join(rows))
    heads = (map_grid(rgb, panels, titles, f"{a.runner.spec.key}: [CLS] attention per head, layer {layer + 1}", cmap,
                      alpha, masks) if grid else None)
    if not box:
        return HeadsView(heads, table, None, None)
    k = box_scale(a)
    boxed = plotting.upscale(rgb, k)
    crop = boxed
    box_px = att.bounding_box(masks[-1], maps.patch)
    if box_px:
        box_px = tuple(v * k for v in box_px)
        crop = boxed.crop(box_px)
        boxed = boxed.copy()
        ImageDraw.Draw(boxed).rectangle(box_px, outline=(0, 229, 255), width=max(2, boxed.width // 150))
    where = (f"from pixel ({box_px[0]}, {box_px[1]}) to ({box_px[2]}, {box_px[3]})" if box_px else "(no box)")
    plotting.described(boxed, f"The picture with a box around the patches holding {keep:.0%} of the head-mean "
                              f"attention of layer {layer + 1}, {where}.")
    plotting.described(crop, f"The picture cropped to that box, {crop.width}×{crop.height} px.")
    return HeadsView(heads, table, boxed, crop)


def numbers(a: Analysis, layer: int, keep: float) -> dict:
    """Mass kept, patches kept and patch count per head and for the head mean, and the head-mean mask's box."""
    index = layer_index(a, layer)
    maps = []
    for h in list(range(a.maps.heads)) + [None]:
        mask, mass, frac = att.mass_mask(a.maps.cls_map(index, h), keep)
        maps.append({"map": "head mean" if h is None else f"head {h}", "mass_kept": mass, "patches_kept": frac,
                     "patches": int(mask.sum())})
    box = att.bounding_box(att.mass_mask(a.maps.cls_map(index), keep)[0], a.maps.patch)
    return {"layer": index + 1, "layers": a.maps.layers, "threshold": keep, "grid": list(a.maps.grid),
            "maps": maps, "box": list(box) if box else None}


def box_scale(a: Analysis) -> int:
    """Integer upscaling of the clickable box view, so small inputs are shown at a usable size."""
    return plotting.display_scale(*a.fitted.image.shape[:2], 384)


def render_rollout(a: Analysis, fusion: str = "mean", discard: float = 0.0, cmap: str = "inferno",
                   alpha: float = 0.6) -> Image.Image:
    """Attention rollout through all layers (compare with the last layer's head mean in the heads view)."""
    roll = attention_rollout(a, fusion, discard)
    return map_grid(a.fitted.image, [roll], [f"heads fused by {fusion}, discard {discard:.0%}"],
                    f"{a.runner.spec.key}: attention rollout through all layers", cmap, alpha)


def render_query(a: Analysis, row: int, col: int, layer: int, cmap: str = "inferno", alpha: float = 0.6) -> Image.Image:
    """Where patch (row, col) looks, per head, as the query, in layer number ``layer``."""
    gh, gw = a.maps.grid
    row, col = int(np.clip(row, 0, gh - 1)), int(np.clip(col, 0, gw - 1))
    layer = layer_index(a, layer)
    used, maps = a.maps.query_maps(row, col, layer)
    p = a.maps.patch
    rgb = a.fitted.image.copy()
    rgb[row * p:(row + 1) * p, col * p:(col + 1) * p] = (0, 229, 255)
    return map_grid(rgb, list(maps), [f"head {h}" for h in range(len(maps))],
                    f"{a.runner.spec.key}: patch ({row}, {col}) as the query, layer {used + 1}", cmap, alpha)


def distance_table(a: Analysis) -> list[tuple[int, str, float]]:
    """(layer, head, mean attention distance in pixels) rows, layers counted from 1 (the ViT paper's scatter)."""
    d = distance(a)
    return [(layer + 1, f"head {h}", float(d[layer, h])) for layer in range(d.shape[0]) for h in range(d.shape[1])]


_distance_charts: LRU[Image.Image] = owned.keep("attention.distance_charts", "results", LRU(16),
                                                "mean attention distance charts drawn")


def render_distance(a: Analysis) -> Image.Image:
    """Mean attention distance of every head in every layer (the ViT paper's scatter), in pixels of the input.

    Each head keeps one colour and marker through the layers; the black line is the layer's head mean.
    The chart depends on the analysis and the figure style only, so the last few are kept: a class
    asking for the same picture gets it without matplotlib (~130 ms a chart).
    """
    if not a.token:
        return _draw_distance(a)
    return _distance_charts.get_or_make((a.token, plotting.style(), plotting.keeping_vectors()),
                                        lambda: _draw_distance(a))


def _draw_distance(a: Analysis) -> Image.Image:
    d = distance(a)  # (layers, heads)
    layers = np.arange(1, d.shape[0] + 1)
    colours = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"]
    markers = "osD^v<>p"
    with plotting.figure(figsize=(plotting.fig_width(6.4), 5.2)) as (fig, ax):
        for h in range(d.shape[1]):
            ax.scatter(layers, d[:, h], s=60, color=colours[h % 8], marker=markers[(h // 8) % 8], alpha=0.85,
                       label=f"head {h}" if d.shape[1] <= 6 else None)
        ax.plot(layers, d.mean(axis=1), color="black", linewidth=2, label="head mean")
        ax.set_xticks(layers if len(layers) <= 12 else layers[::2])
        ax.set_xlabel("layer")
        ax.set_ylabel("distance (px)")
        ax.set_ylim(0, max(float(d.max()), 1e-9) * 1.08)  # from 0: a 3-px difference looks like one
        ax.set_title("Mean attention distance per head")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, ncol=4, columnspacing=1,
                  handletextpad=0.2)
        ax.grid(alpha=0.3)
        return plotting.to_image(fig)


def click_to_patch(a: Analysis, x: int, y: int) -> tuple[int, int]:
    """Pixel (x, y) on the box view (see :func:`box_scale`) -> (row, col) of the patch grid."""
    step = a.maps.patch * box_scale(a)
    return int(y) // step, int(x) // step


def outlier_tokens(norms: np.ndarray) -> np.ndarray:
    """Boolean mask of high-norm tokens: above Q3 + 3·IQR of the patch-token norms."""
    q1, q3 = np.percentile(norms, [25, 75])
    return norms > q3 + 3 * max(q3 - q1, 1e-6)


REGISTER_PAIR = ("DINOv2 ViT-S/14", "DINOv2 ViT-S/14 + 4 registers")
REGISTERS_UNAVAILABLE = (
    "Not available here: the registers comparison needs the two DINOv2 models, and their weights cannot be loaded here (no "
    "connection to the model hub and nothing in the local cache). Nothing is shown rather than a stand-in: "
    "a model without registers cannot demonstrate them.")


def render_registers(pair: list[Analysis], cmap: str = "inferno", alpha: float = 0.6) -> tuple[str, Image.Image]:
    """Two models side by side: last-layer head-mean map and the patch-token norm histogram.

    Returns (markdown summary, figure). High-norm tokens are circled on the maps.
    """
    counts = []
    with plotting.figure(2, len(pair), figsize=(plotting.fig_width(6.5 * len(pair)), 10 if plotting.style() is plotting.COMPACT else 6.4), squeeze=False) as (fig, axes):
        for j, a in enumerate(pair):
            maps = a.maps
            norms = maps.norms[maps.prefix:]
            out = outlier_tokens(norms)
            counts.append(int(out.sum()))
            ax = axes[0, j]
            ax.imshow(plotting.overlay(a.fitted.image, maps.cls_map(maps.layers - 1), cmap, alpha))
            ys, xs = np.nonzero(out.reshape(maps.grid))
            p = maps.patch
            ax.scatter((xs + 0.5) * p, (ys + 0.5) * p, s=80, facecolors="none", edgecolors="#00e5ff", linewidths=2)
            ax.set_title(f"{a.runner.spec.key}\n[CLS] attention, head mean")
            ax.axis("off")
            hx = axes[1, j]
            hx.hist(norms, bins=40, color="#0072b2")
            if out.any():
                hx.hist(norms[out], bins=40, color="#e69f00", label=f"{int(out.sum())} high-norm tokens")
                hx.legend()
            hx.set_xlabel("output-token norm (patch tokens)")
            hx.set_ylabel("tokens")
            hx.set_title("token norms")
        image = plotting.to_image(fig)
    note = (f"High-norm patch tokens (above Q3 + 3·IQR, circled): **{counts[0]}** in {pair[0].runner.spec.key}, "
            f"**{counts[-1]}** in {pair[-1].runner.spec.key}. Registers give the model scratch space of its own, "
            "so it stops parking global information in background patches.")
    return note, image


def compare_registers(rgb: np.ndarray, resolution: int, cmap: str = "inferno", alpha: float = 0.6,
                      progress=None) -> tuple[str, Image.Image | None]:
    """The registers comparison of :data:`REGISTER_PAIR` on ``rgb``, or (why not, None) without both real models.

    A stand-in cannot demonstrate registers, so nothing is drawn when either model is unavailable; when that is
    known beforehand (offline, nothing in the cache) nothing is loaded or announced either.
    """
    available = models.available_now()
    if not all(available.get(key, False) for key in REGISTER_PAIR):
        return REGISTERS_UNAVAILABLE, None
    pair = [models.get_model(key, progress) for key in REGISTER_PAIR]
    if any(loaded.notice for loaded in pair):
        return REGISTERS_UNAVAILABLE, None
    return render_registers([analyse(m, rgb, resolution) for m in pair], cmap, alpha)


def render_timeline(rgb: np.ndarray, step_index: int, cmap: str = "inferno",
                    alpha: float = 0.6) -> tuple[Image.Image, Image.Image]:
    """The embedded model's last-layer attention at every shipped checkpoint, and one checkpoint per head.

    The strip shares one colour scale (0 to the largest patch share at any step), so a random
    model's near-uniform attention looks flat instead of being stretched to full contrast; each
    title says how many of the patches hold 60% of the attention.
    """
    steps = assets.tiny_checkpoints()
    runs = [(step, analyse(models.get_checkpoint(step), rgb, 64)) for step, _ in steps]
    maps = [a.maps.cls_map(a.maps.layers - 1) for _, a in runs]
    top = max(float(m.max()) for m in maps)
    strip = [plotting.heat_overlay(a.fitted.image, m, cmap, alpha, vmin=0.0, vmax=top) for (_, a), m in zip(runs, maps)]
    titles = [f"step {step}" + (" (random)" if step == 0 else "") + f"\n60% in {int(att.mass_mask(m, 0.6)[0].sum())} of {m.size}"
              for (step, _), m in zip(runs, maps)]
    overview = plotting.panels(strip, titles, "vitviz tiny: last-layer [CLS] attention (head mean) through training",
                               cmap, "share of attention (one scale for all steps)", cols=len(strip), panel_px=180)
    _, chosen = runs[min(max(step_index, 0), len(runs) - 1)]
    heads = render_heads(chosen, chosen.maps.layers, 0.6, cmap, alpha)
    return overview, heads.heads


def comparison_model(choice: str, progress=None):
    """The loaded model for one of :func:`comparison_choices` (``ValueError`` for anything else)."""
    if choice in registry.keys("attention"):
        return models.get_model(choice, progress)
    prefix = f"{registry.OFFLINE_KEY} @ step "
    if choice.startswith(prefix) and choice in comparison_choices():
        return models.get_checkpoint(int(choice[len(prefix):]))
    raise ValueError(f"Unknown model {choice!r}; choose one of the listed models.")


def render_pair(pair: list[tuple[str, Analysis]], fraction: float, keep: float = 0.6, cmap: str = "inferno",
                alpha: float = 0.6) -> tuple[Image.Image, str]:
    """Two models' head-mean [CLS] attention at the same depth fraction, on one colour scale.

    Models with different patch sizes have different patch counts, so each map is drawn as
    attention relative to an even spread (1 = every patch the same share): comparable across grids.
    """
    maps, titles, masks, rows = [], [], [], []
    for name, a in pair:
        layer = int(np.clip(round(fraction * a.maps.layers), 1, a.maps.layers))
        m = a.maps.cls_map(layer - 1)
        rel = m / max(float(m.sum()), 1e-12) * m.size
        mask, _, frac = att.mass_mask(m, keep)
        maps.append(rel)
        masks.append(mask)
        titles.append(f"{name}\nlayer {layer} of {a.maps.layers}, {frac:.0%} of patches")
        rows.append(f"| {name} | {layer} of {a.maps.layers} | {a.maps.grid[0]}×{a.maps.grid[1]} | {rel.max():.1f}× | "
                    f"{frac:.1%} |")
    top = max(float(m.max()) for m in maps)
    size = plotting.panel_size(*pair[0][1].fitted.image.shape[:2], 300)
    images = []
    for (_, a), m, k in zip(pair, maps, masks):
        small = np.asarray(Image.fromarray(a.fitted.image).resize(size, Image.BILINEAR))
        images.append(plotting.heat_overlay(small, m, cmap, alpha, k, vmin=0.0, vmax=top))
    image = plotting.panels(images, titles, f"[CLS] attention (head mean) at {fraction:.0%} of the depth", cmap,
                            f"attention ÷ an even spread (0 to {top:.1f}, one scale for both)", cols=2, panel_px=300)
    text = ("Both maps share one colour scale: attention divided by what each patch would get if attention were "
            "spread evenly, so models with different patch sizes compare fairly. The contour keeps the fewest "
            f"patches holding {keep:.0%} of the attention.\n\n| model | layer | patches | peak | patches for "
            f"{keep:.0%} |\n|---|---|---|---|---|\n" + "\n".join(rows))
    return image, text


# ---- the views of the Attention tab, from their declared settings -------------------------------------------

def _model_line(a: Analysis) -> str:
    return f"**{a.runner.spec.key}** ({a.runner.origin}); {a.fitted.note}"


def analysis_for(rgb: np.ndarray, values: dict, progress=None) -> tuple[Analysis, Settled]:
    """The analysis the Attention view's settings ask for, and the settings as used (side, layer, head, query)."""
    runner = models.get_model(values["model"], progress)
    s = settle(values)
    if runner.embedded:  # trained at one size: the short side is that size, whatever was asked
        s.only("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"], always=True))
    else:
        s.use("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"]))
    a = analyse(runner, rgb, values["resolution"])
    maps = a.maps
    if "layer" in values:
        s.within("layer", maps.layers, f"{runner.spec.key} has {maps.layers} layers.", lo=1)
    if "head" in values and values["head"] != -1:
        s.within("head", maps.heads - 1, f"{runner.spec.key} has {maps.heads} heads per layer.")
    if values.get("query") is not None:
        gh, gw = maps.grid
        r, c = values["query"]
        s.use("query", (clamp(r, gh - 1), clamp(c, gw - 1)), f"The picture is {gh}×{gw} patches.")
    return a, s


ATTENTION_DOC = ("The Attention view: per-head class-token maps with DINO's threshold, box, crop and the pinned "
                 "patch's maps, for the given layer, head, threshold, opacity, colormap and query (one fused "
                 "forward; rollout and the mean attention distance are /rollout and /attention_distance).")


@record(declared.ATTENTION, tab="attention", bundle=True, doc=ATTENTION_DOC)
def show_attention(rgb: np.ndarray, values: dict, progress=None, only: frozenset[str] | None = None) -> Shown:
    """The Attention view: per-head class-token maps with DINO's threshold, box and crop, and the pinned query's
    maps, for the explorer's layer, head, threshold, opacity and colormap: all from the class token's rows and the
    kept queries and keys (no every-row work: rollout and the mean distance are views of their own). ``only``
    names the figures to draw (the page's first screen shows the box and the crop)."""
    a, s = analysis_for(rgb, values, progress)
    v = s.values
    wanted = only if only is not None else frozenset(("heads", "box", "crop", "query"))
    heads = render_heads(a, v["layer"], v["keep"], v["cmap"], v["alpha"], grid="heads" in wanted,
                         box=bool(wanted & {"box", "crop"}))
    figures = {name: fig for name, fig in (("heads", heads.heads), ("box", heads.box), ("crop", heads.crop))
               if name in wanted and fig is not None}
    if v["query"] is not None and "query" in wanted:
        figures["query"] = render_query(a, *v["query"], v["layer"], v["cmap"], v["alpha"])
    numbers_ = {"model": a.runner.spec.key, "notice": a.runner.notice, "input": a.fitted.note,
                **numbers(a, v["layer"], v["keep"])}
    texts = {"info": _model_line(a), "table": heads.table}
    return Shown(figures, texts, numbers_, s, a.runner.spec.key, a.runner.notice)


@record(declared.ROLLOUT, tab="attention")
def show_rollout(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Attention rollout through every layer, with the chosen head fusion and discard ratio: every row of every
    layer, computed from the kept queries and keys of the Attention view's forward (no second forward)."""
    a, s = analysis_for(rgb, values, progress)
    v = s.values
    figure = render_rollout(a, v["fusion"], v["discard"], v["cmap"], v["alpha"])
    roll = attention_rollout(a, v["fusion"], v["discard"])
    peak = np.unravel_index(int(np.argmax(roll)), roll.shape)
    text = (f"Rollout multiplies every layer's attention (each averaged with the identity for the skip connection) "
            f"from the last layer down: where the class token's information came from, through all "
            f"{a.maps.layers} layers. Heads fused by {v['fusion']}, the weakest {v['discard']:.0%} of each layer's "
            f"entries discarded. Its largest share, {roll.max() / max(roll.sum(), 1e-12):.1%}, is on patch "
            f"({peak[0]}, {peak[1]}).")
    numbers_ = {"model": a.runner.spec.key, "grid": list(a.maps.grid), "fusion": v["fusion"],
                "discard": v["discard"], "rollout": roll}
    return Shown({"rollout": figure}, {"text": text}, numbers_, s, a.runner.spec.key, a.runner.notice)


@record(declared.DISTANCE, tab="attention")
def show_attention_distance(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The mean attention distance of every head in every layer (the ViT paper's scatter), in pixels: every row of
    every layer, computed from the kept queries and keys of the Attention view's forward (no second forward)."""
    a, s = analysis_for(rgb, values, progress)
    d = distance(a)
    text = (f"For every patch as the query, the attention-weighted distance in pixels to the patches it attends "
            f"to (each row renormalised over the patches), averaged over all {a.maps.cls.shape[-1]:,} queries. The "
            f"head mean runs from {d[0].mean():.1f} px in layer 1 to {d[-1].mean():.1f} px in layer {d.shape[0]}; "
            "a head that looks far in an early layer is something a convolution cannot do.")
    numbers_ = {"model": a.runner.spec.key, "mean_attention_distance_px": [
        {"layer": layer, "head": head, "distance": dist} for layer, head, dist in distance_table(a)]}
    return Shown({"distance": render_distance(a)}, {"text": text}, numbers_, s, a.runner.spec.key, a.runner.notice)


@record(declared.ATTENTION, tab="attention", name="explorer", api=False)
def show_explorer(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """What the attention explorer draws in the browser (``data["explorer"]``: sent once per picture), with the
    model shown, the settings as used and the notice; no server figure is drawn."""
    from vitviz.render import browser

    a, s = analysis_for(rgb, values, progress)
    held = {n: declared.ATTENTION[n] for n in ("layer", "head", "keep", "alpha", "cmap", "query")}
    # the picture's content address: the analysis can be made again from it while the server holds the picture
    data = {"explorer": browser.attention_payload(a, s.values, held) | {"picture": picture_address(rgb)}}
    return Shown({}, {"info": _model_line(a)}, {"model": a.runner.spec.key, "grid": list(a.maps.grid),
                                                 "layers": a.maps.layers, "heads": a.maps.heads},
                 s, a.runner.spec.key, a.runner.notice, data)


@record(declared.REGISTERS, tab="attention")
def show_registers(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """DINOv2 with and without registers on one picture (nothing is drawn without both real models)."""
    note, image = compare_registers(rgb, values["resolution"], values["cmap"], values["alpha"], progress)
    return Shown({} if image is None else {"registers": image}, {"note": note}, {}, settle(values))


@record(declared.TIMELINE_VIEW, tab="attention")
def show_timeline(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The embedded model's last-layer attention at every shipped training step, and one step's heads."""
    steps = assets.tiny_checkpoints()
    s = settle(values)
    index = s.within("step", len(steps) - 1, f"There are {len(steps)} checkpoints.")
    strip, heads = render_timeline(rgb, index, values["cmap"], values["alpha"])
    return Shown({"strip": strip, "heads": heads}, {}, {"steps": [step for step, _ in steps]}, s,
                 registry.OFFLINE_KEY)


@record(declared.COMPARE, tab="attention")
def show_compare_models(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Two models on the same picture, at the same share of their depth, on one colour scale."""
    pair, notes = [], []
    s = settle(values)
    for name in ("model_a", "model_b"):
        choice = values[name]
        runner = comparison_model(choice, progress)
        label = choice if not runner.notice else f"{runner.spec.key} (for {choice})"
        if runner.notice:
            notes.append(runner.notice)
        pair.append((label, analyse(runner, rgb, values["resolution"])))
    image, text = render_pair(pair, values["fraction"], values["keep"], values["cmap"])
    return Shown({"pair": image}, {"table": text}, {}, s, None, "\n\n".join(dict.fromkeys(notes)))
