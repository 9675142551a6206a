"""Figures for the tabs: matplotlib figures rendered to PIL images, with no global state.

Figures are ``matplotlib.figure.Figure`` objects drawn on their own Agg canvas:
no pyplot, no backend switch, nothing registered with a figure manager, so
threads can draw at once and importing vitviz changes nothing for a notebook.

Everything here is sized for a projector: large type, high contrast and
colour-blind-safe colormaps (viridis family for magnitudes, PuOr for signed
values). Functions return ``PIL.Image.Image`` so the UI can show them in an
image component and map clicks back to pixels.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Iterator, Sequence

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.figure import Figure
from PIL import Image, ImageDraw, ImageFont

SEQUENTIAL = ("viridis", "cividis", "magma", "inferno", "plasma")
"""Colour-blind-safe sequential colormaps offered in the UI."""
DIVERGING = "PuOr_r"
TITLE_PT, LABEL_PT, TICK_PT = 16, 14, 12
"""Projector sizes (points at 100 dpi) given to every figure's axes titles, axis labels and ticks."""
DPI = 100


@contextmanager
def figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] | None = None,
           squeeze: bool = True) -> Iterator[tuple[Figure, object]]:
    """A ``Figure`` and its axes, like ``plt.subplots`` but without pyplot or rcParams.

    The projector sizes are applied to every axes when the figure is rendered
    (:func:`to_image`); the figure is cleared on exit, even on error.
    """
    fig = Figure(figsize=figsize, dpi=DPI, facecolor="white")
    axes = fig.subplots(nrows, ncols, squeeze=squeeze)
    try:
        yield fig, axes
    finally:
        fig.clear()


def projector_style(fig: Figure) -> None:
    """Large, bold axes titles and large labels and ticks on every axes of ``fig`` (colour bars too)."""
    for ax in fig.axes:
        ax.title.set_fontsize(TITLE_PT)
        ax.title.set_fontweight("bold")
        ax.xaxis.label.set_fontsize(LABEL_PT)
        ax.yaxis.label.set_fontsize(LABEL_PT)
        ax.tick_params(labelsize=TICK_PT)


_vectors: ContextVar[bool] = ContextVar("vitviz_vectors", default=False)


@contextmanager
def keep_vectors() -> Iterator[None]:
    """Inside this block (this thread or task only), figures drawn by matplotlib also keep a vector PDF of
    themselves in ``image.info["pdf"]`` (for figure bundles)."""
    token = _vectors.set(True)
    try:
        yield
    finally:
        _vectors.reset(token)


def to_image(fig: Figure, dpi: int = DPI) -> Image.Image:
    """Render a figure to an RGB PIL image (tight bounding box) in the projector style."""
    projector_style(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    buf.seek(0)
    image = Image.open(buf).convert("RGB")
    if _vectors.get():
        pdf = io.BytesIO()
        fig.savefig(pdf, format="pdf", bbox_inches="tight", facecolor="white")
        image.info["pdf"] = pdf.getvalue()
    return image


@lru_cache(maxsize=32)
def font(size: int) -> ImageFont.FreeTypeFont:
    """Matplotlib's bundled DejaVu Sans at ``size`` px (always available offline; loaded once)."""
    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)


def normalise(a: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant array becomes all zeros (no division by zero)."""
    a = np.asarray(a, dtype=np.float64)
    lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    return np.zeros_like(a) if hi - lo <= 1e-12 else (a - lo) / (hi - lo)


def colorize(a: np.ndarray, cmap: str = "viridis", vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """(H, W) values -> (H, W, 3) uint8 through ``cmap`` (min..max unless vmin/vmax given)."""
    a = np.asarray(a, dtype=np.float64)
    if vmin is not None and vmax is not None:
        t = np.zeros_like(a) if vmax - vmin <= 1e-12 else np.clip((a - vmin) / (vmax - vmin), 0, 1)
    else:
        t = normalise(a)
    return (matplotlib.colormaps[cmap](t)[..., :3] * 255).round().astype(np.uint8)


def display_scale(h: int, w: int, target: int = 640) -> int:
    """Integer upscaling factor so the long side is about ``target`` pixels (at least 1)."""
    return max(1, target // max(h, w))


def upscale(rgb: np.ndarray, scale: int) -> Image.Image:
    """Nearest-neighbour integer upscaling keeps patch edges exact."""
    img = Image.fromarray(rgb)
    return img if scale == 1 else img.resize((rgb.shape[1] * scale, rgb.shape[0] * scale), Image.NEAREST)


def patch_grid(rgb: np.ndarray, patch: int, scale: int, labels: bool = True,
               highlight: tuple[int, int] | None = None) -> Image.Image:
    """The image with its patch grid drawn over it and each patch labelled p_rc (row-major).

    Args:
        rgb: (H, W, 3) uint8, H and W multiples of ``patch``.
        scale: integer display upscaling; a click at display pixel (x, y) is patch
            (y // (patch·scale), x // (patch·scale)).
        highlight: (row, col) of a patch to outline.
    """
    img = upscale(rgb, scale)
    draw = ImageDraw.Draw(img)
    gh, gw = rgb.shape[0] // patch, rgb.shape[1] // patch
    step = patch * scale
    width = max(1, step // 24)
    for r in range(gh + 1):
        draw.line([(0, r * step), (gw * step, r * step)], fill=(255, 255, 255), width=width)
    for c in range(gw + 1):
        draw.line([(c * step, 0), (c * step, gh * step)], fill=(255, 255, 255), width=width)
    if labels and step >= 22:
        f = font(max(9, min(28, step // 4)))
        for r in range(gh):
            for c in range(gw):
                draw.text((c * step + 3, r * step + 2), f"p{r},{c}" if max(gh, gw) > 10 else f"p{r}{c}",
                          fill=(255, 255, 255), font=f, stroke_width=2, stroke_fill=(0, 0, 0))
    if highlight is not None:
        r, c = highlight
        draw.rectangle([c * step, r * step, (c + 1) * step, (r + 1) * step], outline=(255, 200, 0),
                       width=max(3, width * 3))
    return img


def heatmap(m: np.ndarray, title: str, xlabel: str, ylabel: str, cbar: str, cmap: str = "viridis",
            ticks: Sequence[str] | None = None, yticks: Sequence[str] | None = None,
            annotate: bool = False, signed: bool = False, size: tuple[float, float] = (6.5, 5.5)) -> Image.Image:
    """A titled heatmap with labelled axes and a colorbar; ``signed`` centres a diverging map on 0."""
    m = np.asarray(m, dtype=np.float64)
    with figure(figsize=size) as (fig, ax):
        kw = {}
        if signed:
            lim = float(np.abs(m).max()) or 1.0
            kw = dict(vmin=-lim, vmax=lim)
        im = ax.imshow(m, cmap=DIVERGING if signed else cmap, interpolation="nearest", aspect="auto", **kw)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if ticks is not None:
            ax.set_xticks(range(len(ticks)), ticks, rotation=0 if len(ticks) <= 8 else 90)
        yt = yticks if yticks is not None else ticks
        if yt is not None and len(yt) == m.shape[0]:
            ax.set_yticks(range(len(yt)), yt)
        if annotate:
            lo, hi = float(m.min()), float(m.max())
            for (i, j), v in np.ndenumerate(m):
                light = (v - lo) / (hi - lo) < 0.5 if hi > lo else True
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=12,
                        color="white" if light and not signed else "black")
        fig.colorbar(im, ax=ax, label=cbar)
        return to_image(fig)


def bars(values: dict[str, float], title: str, xlabel: str, highlight: Sequence[str] = ()) -> Image.Image:
    """Horizontal bar chart with the value's share of the total printed on each bar."""
    names = list(values)
    v = np.array([values[k] for k in names], dtype=np.float64)
    total = v.sum() or 1.0
    with figure(figsize=(8, 0.6 * len(names) + 1.6)) as (fig, ax):
        colours = ["#e69f00" if n in highlight else "#0072b2" for n in names]
        ax.barh(names[::-1], v[::-1], color=colours[::-1])
        for i, val in enumerate(v[::-1]):
            ax.text(val, i, f"  {val / total:.1%}", va="center", fontsize=12)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_xlim(0, v.max() * 1.25 if v.max() > 0 else 1)
        return to_image(fig)


def vector_strip(vectors: Sequence[np.ndarray], names: Sequence[str], title: str) -> Image.Image:
    """Each vector as a one-row heatmap strip (signed colormap), stacked, with a colorbar."""
    with figure(len(vectors), 1, figsize=(9, 1.5 + 1.3 * len(vectors)), squeeze=False) as (fig, axes):
        for ax, vec, name in zip(axes[:, 0], vectors, names):
            vec = np.asarray(vec, dtype=np.float64).ravel()
            lim = float(np.abs(vec).max()) or 1.0
            im = ax.imshow(vec[None, :], cmap=DIVERGING, vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
            ax.set_yticks([])
            ax.set_title(name, fontsize=13, loc="left")
            ax.set_xlabel("vector index")
            fig.colorbar(im, ax=ax, label="value", fraction=0.04, pad=0.01)
        fig.suptitle(title, fontsize=16, fontweight="bold")
        fig.tight_layout()
        return to_image(fig)


def mosaic(tiles: np.ndarray, cmap: str = "viridis", tile_px: int = 0, gap: int = 2) -> tuple[Image.Image, tuple[int, int]]:
    """The ViT-paper grid: tile (r, c) is the (rows, cols) map ``tiles[r, c]``.

    Args:
        tiles: (R, C, rows, cols) similarity maps, all on one shared colour scale.
        tile_px: pixels per map cell (0 picks one so the mosaic is ~720 px wide).

    Returns:
        (image, (row_pitch, col_pitch)): a click at pixel (x, y) is tile (y // row_pitch, x // col_pitch).
    """
    gr, gc, h, w = tiles.shape
    cell = tile_px or max(1, 720 // (gc * w + gap))
    pitch = w * cell + gap
    row_pitch = h * cell + gap
    rgb = colorize(tiles, cmap, float(tiles.min()), float(tiles.max()))  # (R, C, h, w, 3), one shared scale
    big = rgb.repeat(cell, axis=2).repeat(cell, axis=3)  # (R, C, h·cell, w·cell, 3)
    padded = np.full((gr, gc, row_pitch, pitch, 3), 255, np.uint8)
    padded[:, :, :h * cell, :w * cell] = big
    out = padded.transpose(0, 2, 1, 3, 4).reshape(gr * row_pitch, gc * pitch, 3)
    return Image.fromarray(out), (row_pitch, pitch)


def overlay(rgb: np.ndarray, heat: np.ndarray, cmap: str = "inferno", alpha: float = 0.6,
            vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """Blend a (h, w) map, stretched to the image size, over an (H, W, 3) image; returns uint8.

    The map's colours span its own min..max unless ``vmin`` and ``vmax`` fix a shared scale.
    """
    h, w = rgb.shape[:2]
    colour = colorize(heat, cmap, vmin, vmax)
    big = np.asarray(Image.fromarray(colour).resize((w, h), Image.NEAREST), dtype=np.float32)
    out = (1 - alpha) * rgb.astype(np.float32) + alpha * big
    return out.round().clip(0, 255).astype(np.uint8)


def mask_edges(mask: np.ndarray, h: int, w: int, thickness: int = 2) -> np.ndarray:
    """Boundary pixels of a (gh, gw) patch mask stretched to (h, w): (h, w) bool."""
    big = np.asarray(Image.fromarray(mask.astype(np.uint8) * 255).resize((w, h), Image.NEAREST)) > 0
    edge = np.zeros_like(big)
    for _ in range(thickness):
        inner = big.copy()
        inner[1:, :] &= big[:-1, :]
        inner[:-1, :] &= big[1:, :]
        inner[:, 1:] &= big[:, :-1]
        inner[:, :-1] &= big[:, 1:]
        edge |= big & ~inner
        big = inner
    return edge


@lru_cache(maxsize=16)
def colorbar_strip(cmap: str, width: int, label: str, height: int = 18) -> Image.Image:
    """A horizontal colour bar from low to high with its label, as a PIL image."""
    f = font(16)
    bar = colorize(np.tile(np.linspace(0, 1, width), (height, 1)), cmap, 0.0, 1.0)
    out = Image.new("RGB", (width, height + 26), "white")
    out.paste(Image.fromarray(bar), (0, 0))
    d = ImageDraw.Draw(out)
    d.text((0, height + 4), "low", fill="black", font=f)
    d.text((width // 2, height + 4), label, fill="black", font=f, anchor="ma")
    d.text((width, height + 4), "high", fill="black", font=f, anchor="ra")
    return out


def panel_size(h: int, w: int, panel_px: int = 300) -> tuple[int, int]:
    """(width, height) of a panel whose long side is ``panel_px``."""
    s = panel_px / max(h, w)
    return max(1, round(w * s)), max(1, round(h * s))


def panels(images: Sequence[np.ndarray], titles: Sequence[str], title: str, cmap: str | None = None,
           bar_label: str = "", cols: int = 4, panel_px: int = 300) -> Image.Image:
    """Lay (H, W, 3) uint8 images out in a titled grid (pure PIL: fast enough for slider re-renders).

    Each panel is scaled to ``panel_px`` on its long side; captions may have several
    lines; an optional colour bar for ``cmap`` goes underneath.
    """
    n = len(images)
    cols = max(1, min(cols, n))
    rows = (n + cols - 1) // cols
    pw, ph = panel_size(*images[0].shape[:2], panel_px)
    lines = max((t.count("\n") + 1 for t in titles), default=1)
    pad, head, cap = 10, 44, 8 + 22 * lines
    grid_w = cols * (pw + pad) + pad
    title_w = int(font(24).getlength(title)) + 2 * pad
    caption_w = max(int(font(17).getlength(line)) for t in titles for line in t.split("\n")) + pad if titles else 0
    width = max(grid_w, title_w, caption_w * cols if cols == 1 else 0, 500 if cmap else 0)
    x_off = (width - grid_w) // 2  # centre the panels on a wider canvas
    bar = colorbar_strip(cmap, min(width - 2 * pad, 480), bar_label) if cmap else None
    height = head + rows * (ph + cap + pad) + (bar.height + pad if bar else 0)
    out = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(out)
    draw.text((width // 2, 10), title, fill="black", font=font(24), anchor="ma")
    f = font(17)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        x0, y0 = x_off + pad + c * (pw + pad), head + r * (ph + cap + pad)
        draw.multiline_text((x0 + pw // 2, y0 + 4), titles[i], fill="black", font=f, anchor="ma", align="center")
        tile = Image.fromarray(img)
        out.paste(tile if tile.size == (pw, ph) else tile.resize((pw, ph), Image.BILINEAR), (x0, y0 + cap))
    if bar:
        out.paste(bar, ((width - bar.width) // 2, height - bar.height - pad))
    return out


def heat_overlay(rgb: np.ndarray, heat: np.ndarray, cmap: str, alpha: float,
                 mask: np.ndarray | None = None, edge_colour: tuple[int, int, int] = (0, 229, 255),
                 vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """:func:`overlay` (optionally on a shared ``vmin``..``vmax`` scale) plus the outline of a (gh, gw)
    ``mask`` drawn in ``edge_colour``."""
    out = overlay(rgb, heat, cmap, alpha, vmin, vmax)
    if mask is not None:
        out[mask_edges(mask, *rgb.shape[:2], thickness=max(1, rgb.shape[0] // 150))] = edge_colour
    return out
