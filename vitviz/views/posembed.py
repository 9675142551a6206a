"""What the Position-embeddings tab shows: the PE matrix, similarity, the ViT-paper mosaic, resampling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from vitviz.core import posembed
from vitviz.models import cache as models
from vitviz.render import browser, plotting
from vitviz.specs.state import settle
from vitviz.specs.views import LEARNED, RPB_FORMULA, SINUSOIDAL, TIMELINE, relative_bias_sources
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record


@dataclass
class PosEmbedView:
    matrix: Image.Image  # heatmap of the (N, D) embedding matrix
    sim: Image.Image  # (N, N) similarity heatmap
    mosaic: Image.Image  # tile (r, c): similarity of (r, c) to all positions (clickable)
    pitch: tuple[int, int]  # (row, column) display pixels per mosaic tile
    resampled: Image.Image  # mosaic of the resampled grid
    summary: str


def sinusoidal_grid(kind: str, rows: int, cols: int, dim: int) -> np.ndarray:
    """(rows, cols, dim) sinusoidal embeddings; 1D numbers positions row-major (t = r·cols + c)."""
    if kind == "2D sinusoidal":
        return posembed.sincos_2d(rows, cols, dim).reshape(rows, cols, dim)
    if kind == "1D sinusoidal":
        return posembed.sincos_1d(rows * cols, dim).reshape(rows, cols, dim)
    raise ValueError(f"Unknown position embedding {kind!r}.")


def grid_for(values: dict) -> tuple[np.ndarray, str, str]:
    """(rows, cols, D) grid, its name and a notice, for the Position-embeddings view's checked settings.

    Sinusoidal sources use rows, cols and D; ``TIMELINE`` uses the embedded model's checkpoint number ``step``;
    ``LEARNED + key`` a registry model's own table (with its notice when a stand-in answers).
    """
    source = values["source"]
    if source == TIMELINE:
        step, loaded = models.checkpoint_at(values["step"])
        return loaded.read(posembed.learned_grid), f"vitviz tiny after {step} training steps", ""
    if source.startswith(LEARNED):
        loaded = models.get_model(source[len(LEARNED):])
        return loaded.read(posembed.learned_grid), f"{loaded.spec.key} (learned)", loaded.notice
    return sinusoidal_grid(source, values["rows"], values["cols"], values["dim"]), source, ""


def tiles(grid: np.ndarray, kind: str) -> np.ndarray:
    """(R, C, R, C): tile (r, c) is the similarity of position (r, c) to every position."""
    r, c, d = grid.shape
    return posembed.similarity(grid.reshape(r * c, d), kind).reshape(r, c, r, c)


def tile_at(grid: np.ndarray, kind: str, x: int, y: int) -> tuple[int, int]:
    """(row, col) of the mosaic tile under display pixel (x, y)."""
    _, (row_pitch, col_pitch) = plotting.mosaic(tiles(grid, kind))
    return int(y) // row_pitch, int(x) // col_pitch


def tile_figure(grid: np.ndarray, kind: str, row: int, col: int, cmap: str = "viridis") -> Image.Image:
    """One enlarged tile with axes and a colorbar."""
    r, c, _ = grid.shape
    row, col = min(max(row, 0), r - 1), min(max(col, 0), c - 1)
    t = tiles(grid, kind)[row, col]
    return plotting.heatmap(t, f"{kind} similarity of position ({row}, {col}) to all", "patch column",
                            "patch row", f"{kind} similarity", cmap=cmap, size=(6.5, 5.5))


def render(grid: np.ndarray, name: str, kind: str = "cosine", resample_to: tuple[int, int] | None = None,
           cmap: str = "viridis", learned: bool = False) -> PosEmbedView:
    """All figures for one (rows, cols, D) embedding grid called ``name`` (``learned``: a model's table, not a
    formula's; the summary's sentence on what it codes says so)."""
    r, c, d = grid.shape
    flat = grid.reshape(r * c, d)
    matrix = plotting.heatmap(flat, f"{r * c} positions × {d} dimensions", "embedding dimension",
                              "position (row-major)", "value", signed=True, size=(7, 5))
    sim = plotting.heatmap(posembed.similarity(flat, kind), f"{kind} similarity, {r * c}×{r * c}",
                           "position (row-major)", "position (row-major)", f"{kind} similarity", cmap=cmap,
                           size=(6.5, 5.5))
    mosaic, pitch = plotting.mosaic(tiles(grid, kind), cmap)
    rr, rc = resample_to or (r, c)
    res = posembed.resample_grid(grid, rr, rc)
    resampled, _ = plotting.mosaic(tiles(res, kind), cmap)
    if resampled.height > 600 or resampled.width > 720:  # even one pixel per cell is too large: shown smaller
        k = min(600 / resampled.height, 720 / resampled.width)
        resampled = resampled.resize((max(1, round(resampled.width * k)), max(1, round(resampled.height * k))),
                                     Image.BOX)
    plotting.described(mosaic, f"Mosaic of {r}×{c} tiles for {name}: tile (r, c) shows the {kind} similarity of "
                               f"position (r, c) to all {r * c} positions, bright where alike ({cmap}).")
    plotting.described(resampled, f"The same mosaic after resampling the table bicubically to {rr}×{rc}.")
    summary = (f"**{name}**: a {r}×{c} grid of {d}-dimensional vectors. Tile (r, c) of the mosaic shows how "
               f"similar position (r, c) is to every other position ({kind}); click a tile to enlarge it. "
               f"Resampled bicubically to {rr}×{rc} (what timm does when the input resolution changes).")
    near = posembed.neighbourhood(grid)
    if near["next_door"] is not None and near["same_ring"] is not None:
        summary += (f"\n\nMean cosine similarity: next-door positions **{near['next_door']:.2f}**, all pairs "
                    f"**{near['all']:.2f}**, positions equally far from the centre (not next door) "
                    f"**{near['same_ring']:.2f}**. " + what_it_codes(grid, learned))
    return PosEmbedView(matrix, sim, mosaic, pitch, resampled, summary)


def what_it_codes(grid: np.ndarray, learned: bool) -> str:
    """One sentence, made from this (rows, cols, D) table's own similarities, on what it codes
    (:func:`vitviz.core.posembed.arrangement`): the grid, the distance from the centre, a mix, or nothing (yet).
    ``learned``: a model's table (what the model learned), else a formula's."""
    def _two(v: float) -> str:  # two decimals, and never "-0.00"
        return f"{round(v, 2) + 0.0:.2f}"

    near, rel = posembed.neighbourhood(grid), posembed.relations(grid)
    kind = posembed.arrangement(near, rel)
    d, s, f = near["next_door"], near["same_ring"], rel["farther"]
    n, k, ring = rel["positions"], rel["nearest_next_door"], rel["nearest_same_ring"]
    most = f"{k} of {n} positions have a next-door one as the position most like them"
    who = "this model learned" if learned else "this table codes"
    if kind == "none":
        farther = "" if f is None else f" ({_two(d)} against {_two(f)})"
        return (f"Next-door positions are hardly more alike than positions farther apart{farther}: "
                + ("this table has learned no arrangement of the positions (yet)." if learned else
                   "this table codes no arrangement of the positions."))
    if kind == "centre":
        return (f"Positions equally far from the centre are more alike than next-door ones ({_two(s)} against "
                f"{_two(d)}); only {most} ({ring} have one equally far from the centre): "
                f"{'this model mostly learned' if learned else 'this table mostly codes'} how far a patch is from "
                "the centre, not the grid.")
    if kind == "grid":
        ring_words = "" if s is None else f", against {_two(s)} for positions equally far from the centre"
        return f"Next-door positions are the most alike ({_two(d)}{ring_words}), and {most}: {who} the grid: " \
               "nearby patches get similar vectors."
    ring_words = "" if s is None else f"; positions equally far from the centre {_two(s)}"
    return (f"Next-door positions are more alike than positions farther apart ({_two(d)} against {_two(f)}"
            f"{ring_words}), and {most}: {who} some locality, but neither the grid nor the distance from the "
            "centre cleanly.")


def render_rotary(dim: int, reach: int, base: float = 100.0, cmap: str = "viridis") -> Image.Image:
    """The 2D rotary score table of :func:`vitviz.core.posembed.rope_offset_scores` as a heatmap over offsets."""
    table = posembed.rope_offset_scores(dim, reach, base)
    offsets = [str(o) for o in range(-reach, reach + 1)]
    ticks = offsets if len(offsets) <= 9 else [o if int(o) % 2 == 0 else "" for o in offsets]
    return plotting.heatmap(table, f"2D rotary: q·k of one vector, D = {dim}", "column offset of the key",
                            "row offset of the key", "q·k (1 at offset 0)", cmap=cmap, ticks=ticks, yticks=ticks,
                            annotate=len(offsets) <= 7)


def relative_bias_table(source: str, m: int, heads: int, block: int) -> tuple[np.ndarray, int, str, str]:
    """((2M−1)², H) table, M, its name, and a notice, for one of :func:`relative_bias_sources`.

    A Swin's table is block ``block`` (1 = first, clamped); when the Swin's weights cannot be had,
    the formula table with a notice saying so (never a stand-in model's numbers as a Swin's).
    """
    from vitviz.core import windows

    if source not in relative_bias_sources():
        raise ValueError(f"Unknown source {source!r}; choose one of the listed ones.")
    notice = ""
    if source != RPB_FORMULA:
        loaded = models.get_model(source)
        if not loaded.notice:
            tables = loaded.read(windows.bias_tables)
            block = int(np.clip(block, 1, len(tables)))
            name, table, window = tables[block - 1]
            return table, window, f"{source}, {name} of {len(tables)}", ""
        notice = (f"**{source}'s learned tables cannot be loaded here** (no connection to the model hub and not in "
                  "the local cache), so the formula table is shown instead.")
    return windows.distance_bias_table(m, heads), m, f"formula, {heads} heads", notice


def render_relative_bias(table: np.ndarray, m: int, name: str, head: int, row: int, col: int,
                         cmap: str = "viridis") -> tuple[Image.Image, str]:
    """One head of a relative position bias table ((2M−1)², H): the (2M−1)×(2M−1) map and the M×M bias of a query."""
    from matplotlib.ticker import MaxNLocator

    from vitviz.core import windows

    heads = table.shape[1]
    head = int(np.clip(head, 0, heads - 1))
    row, col = int(np.clip(row, 0, m - 1)), int(np.clip(col, 0, m - 1))
    column = table[:, head]
    square = column.reshape(2 * m - 1, 2 * m - 1)
    query = windows.bias_for_query(column, m, row, col)
    lo, hi = float(column.min()), float(column.max())
    offsets = np.arange(-(m - 1), m)
    with plotting.figure(1, 2, figsize=(plotting.fig_width(7.8), 4.6)) as (fig, axes):
        fig.set_layout_engine("constrained", w_pad=0.15)
        a, b = axes
        ext = (offsets[0] - 0.5, offsets[-1] + 0.5, offsets[-1] + 0.5, offsets[0] - 0.5)
        a.imshow(square, cmap=cmap, vmin=lo, vmax=hi, extent=ext, interpolation="nearest")
        a.set_title("the table")
        a.set_xlabel("Δ column")
        a.set_ylabel("Δ row")
        im = b.imshow(query, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
        b.plot([col], [row], marker="s", markersize=14, markerfacecolor="none", markeredgecolor="#00e5ff",
               markeredgewidth=3)
        b.set_title(f"query ({row}, {col})")
        b.set_xlabel("key column")
        b.set_ylabel("key row")
        for ax in axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
        fig.colorbar(im, ax=list(axes), label="bias added to q·k", shrink=0.9)
        fig.suptitle(f"Relative position bias, head {head} of {heads}, {m}×{m} window", fontweight="bold")
        image = plotting.to_image(fig)
    learned = not name.startswith("formula")
    text = (f"**{name}.** Inside a {m}×{m} window there are {(2 * m - 1) ** 2} possible offsets between a query and "
            f"a key, and the table holds one number per offset and head. Every query reads the same table, shifted "
            f"to its place: the right map is the left one cut out around query ({row}, {col}). "
            + ("These numbers were learned in training." if learned else
               "Here they are a formula (each head penalises distance with its own slope, like ALiBi); Swin "
               "learns them.")
            + " The bias is added to q·k before the softmax: it says where a head tends to look, whatever is there.")
    return image, text


# ---- the views of the Position-embeddings tab, from their declared settings ------------------------------------

@record(declared.POSITIONS, tab="positions", bundle=True, runs_model=False)
def show_position_embeddings(_rgb: None, values: dict, progress=None) -> Shown:
    """A position table's matrix, similarity, the ViT-paper mosaic, one enlarged tile and the table resampled."""
    grid, name, notice = grid_for(values)
    s = settle(values)
    if values["source"] not in SINUSOIDAL:  # a learned table brings its own grid and width
        r, c, d = grid.shape
        for key, used in (("rows", r), ("cols", c), ("dim", d)):
            s.use(key, used, f"{name} has a {r}×{c} grid of {d}-dimensional vectors (its own, not set here).")
    learned = values["source"] not in SINUSOIDAL
    v = render(grid, name, values["kind"], (values["new_rows"], values["new_cols"]), values["cmap"], learned)
    r, c, d = grid.shape
    tile = tile_figure(grid, values["kind"], r // 2, c // 2, values["cmap"])
    numbers = {"name": name, "notice": notice, "grid": [r, c], "dim": d, "similarity": values["kind"],
               "neighbourhood": posembed.neighbourhood(grid), "relations": posembed.relations(grid),
               "arrangement": posembed.arrangement(posembed.neighbourhood(grid), posembed.relations(grid))}
    figures = {"mosaic": v.mosaic, "tile": tile, "matrix": v.matrix, "similarity": v.sim, "resampled": v.resampled}
    data = {"similarity_map": browser.posembed_payload(grid, values["kind"], name, values["cmap"])}
    return Shown(figures, {"summary": v.summary}, numbers, s, None, notice, data)


@record(declared.ROTARY, tab="positions", runs_model=False)
def show_rotary(_rgb: None, values: dict, progress=None) -> Shown:
    """How q·k of one vector falls off with the row and column offset under 2D rotary encoding."""
    image = render_rotary(values["dim"], values["reach"], values["base"], values["cmap"])
    return Shown({"rotary": image}, {}, {}, settle(values))


@record(declared.RELATIVE_BIAS, tab="positions")
def show_relative_bias(_rgb: None, values: dict, progress=None) -> Shown:
    """One head of a relative position bias table and the bias one query gives its keys."""
    table, m, name, notice = relative_bias_table(values["source"], values["window"], values["heads"], values["block"])
    s = settle(values)
    s.use("window", m, f"{name} has {m}×{m} windows.")
    heads = table.shape[1]
    s.within("head", heads - 1, f"This table has {heads} heads.")
    s.within("row", m - 1, f"A window is {m}×{m} patches.")
    s.within("col", m - 1, f"A window is {m}×{m} patches.")
    v = s.values
    image, text = render_relative_bias(table, m, name, v["head"], v["row"], v["col"], values["cmap"])
    return Shown({"relative_bias": image}, {"text": text}, {"table": name, "window": m}, s, None, notice)
