"""Figures for the tabs: matplotlib figures rendered to PIL images, with no global state.

Figures are ``matplotlib.figure.Figure`` objects drawn on their own Agg canvas:
no pyplot, no backend switch, nothing registered with a figure manager, so
threads can draw at once and importing vitviz changes nothing for a notebook.

Everything here is sized for a projector by default (:data:`PROJECTOR`: no text
under 20 px, no figure wider than 790 px or taller than 660 px, so it is shown
unscaled at 1280×720): large type, high contrast and colour-blind-safe colormaps (viridis family for magnitudes, PuOr for signed
values). Functions return ``PIL.Image.Image`` so the UI can show them in an
image component and map clicks back to pixels.
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import EngFormatter
from matplotlib.transforms import Bbox
from PIL import Image, ImageDraw, ImageFont


DIVERGING = "PuOr_r"
DPI = 100
TEXT_PX_KEY = "vitviz:text_px"
ALT_KEY = "vitviz:alt"
"""``image.info`` key holding a figure's text alternative (what it shows, in words and its own numbers)."""
"""``image.info`` key (kept as a PNG text chunk) holding the smallest text in a figure, in its own pixels."""


@dataclass(frozen=True)
class Style:
    """How large figures are drawn. Sizes are pixels of the figure itself (at 100 dpi, 1 pt = 100/72 px).

    A figure shown no smaller than it was drawn keeps these sizes on screen: the page's
    figure boxes are at least ``max_width`` wide at 1280×720, and never upscale.
    """

    name: str
    text_px: int  # the smallest text: ticks, captions, numbers in cells
    label_px: int  # axis labels, colour-bar labels
    title_px: int
    max_width: int  # a figure wider than this is scaled down (and its text with it)
    max_height: int

    def pt(self, px: float) -> float:
        """Pixels at :data:`DPI` as matplotlib points."""
        return px * 72 / DPI


PROJECTOR = Style("projector", text_px=20, label_px=21, title_px=25, max_width=790, max_height=660)
"""The default: every text in a figure at least 20 px, figures no wider than the app's figure column at
1280×720 (about 800 px) and no taller than that viewport, so they read from the back of a lecture hall."""
COMPACT = Style("compact", text_px=14, label_px=16, title_px=19, max_width=1100, max_height=900)
"""Smaller text and larger figures, for print or a close screen (``with styled(compact=True)``)."""
_style: ContextVar[Style] = ContextVar("vitviz_style", default=PROJECTOR)


def style() -> Style:
    """The style figures are drawn in here (this thread or task)."""
    return _style.get()


@contextmanager
def styled(compact: bool = False) -> Iterator[Style]:
    """Draw the figures of this block (this thread or task only) in the compact or the projector style."""
    token = _style.set(COMPACT if compact else PROJECTOR)
    try:
        yield _style.get()
    finally:
        _style.reset(token)


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
    """The style's sizes on every text of ``fig``: bold axes titles, labels, ticks, and a floor for the rest."""
    st = style()
    for ax in fig.axes:
        ax.title.set_fontsize(st.pt(st.title_px))  # (side titles, set with loc=, get the floor below)
        ax.title.set_fontweight("bold")
        ax.xaxis.label.set_fontsize(st.pt(st.label_px))
        ax.yaxis.label.set_fontsize(st.pt(st.label_px))
        ax.tick_params(labelsize=st.pt(st.text_px))
        ax.xaxis.get_offset_text().set_fontsize(st.pt(st.text_px))
        ax.yaxis.get_offset_text().set_fontsize(st.pt(st.text_px))
    for text in fig.findobj(matplotlib.text.Text):
        if text.get_fontsize() < st.pt(st.text_px):
            text.set_fontsize(st.pt(st.text_px))


def smallest_text_px(fig: Figure) -> float | None:
    """The smallest font size, in pixels at :data:`DPI`, among the texts ``fig`` draws (None without text)."""
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0]
    return min(sizes) * DPI / 72 if sizes else None


def fit_image(image: Image.Image, text_px: float | None) -> Image.Image:
    """Scale ``image`` down to the style's largest size and record its smallest text (scaled too)."""
    st = style()
    s = min(1.0, st.max_width / image.width, st.max_height / image.height)
    if s < 1:
        pdf = image.info.get("pdf")
        image = image.resize((max(1, round(image.width * s)), max(1, round(image.height * s))), Image.LANCZOS)
        if pdf is not None:
            image.info["pdf"] = pdf
    if text_px is not None:
        image.info[TEXT_PX_KEY] = f"{text_px * s:.2f}"
    return image


def text_px_of(image: Image.Image) -> float | None:
    """The smallest text of a figure made here, in its pixels (None: no text), as recorded by :func:`fit_image`."""
    value = image.info.get(TEXT_PX_KEY)
    return None if value is None else float(value)


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


def keeping_vectors() -> bool:
    """Whether figures drawn here now also keep a vector PDF (inside :func:`keep_vectors`)."""
    return _vectors.get()


_drawing_gate: Callable[[int, str], ContextManager] = lambda _n, _what: nullcontext()


def gate_drawing(reserve: Callable[[int, str], ContextManager]) -> Callable[[int, str], ContextManager]:
    """Make every figure drawn in this process first reserve its estimated bytes with ``reserve(nbytes, what)``:
    a server's policy (the app passes its memory budget); a notebook draws without one. Returns the gate before."""
    global _drawing_gate
    before, _drawing_gate = _drawing_gate, reserve
    return before


def to_image(fig: Figure, dpi: int = DPI) -> Image.Image:
    """Render a figure to an RGB PIL image (tight bounding box) in the projector style."""
    projector_style(fig)
    w, h = fig.get_size_inches() * dpi
    st = style()
    with _drawing_gate(int(w * h) * 4 * 4, "drawing a figure"):  # the canvas, its PNG, the decoded copy, RGB
        box = fit_tight_box(fig, st.max_width / DPI, st.max_height / DPI)
        if box is None or dpi != DPI or fig.get_layout_engine() is not None:
            # savefig measures it: a box that never fitted, text measured at another dpi, or axes a layout engine
            # places only as the figure is drawn
            box = "tight"
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches=box, facecolor="white")
        buf.seek(0)
        image = Image.open(buf).convert("RGB")
        image.info.clear()
        if _vectors.get():
            pdf = io.BytesIO()
            fig.savefig(pdf, format="pdf", bbox_inches="tight", facecolor="white")
            image.info["pdf"] = pdf.getvalue()
    text = smallest_text_px(fig)
    return described(fit_image(image, None if text is None else text * dpi / DPI), words_of(fig))


def fit_tight_box(fig: Figure, max_w: float, max_h: float, pad: float = 0.1) -> Bbox | None:
    """Shrink ``fig`` until its tight bounding box (what ``savefig(bbox_inches="tight")`` keeps, ``pad`` inches
    around it) fits ``max_w`` × ``max_h`` inches: labels spilling past the axes can make it wider than the figure,
    and scaling the picture down afterwards would shrink its text. Measured, not rendered to PNG. Returns the box
    that fits, padded, in inches (``savefig(bbox_inches=box)`` then keeps it without measuring it again), or None
    when six shrinks did not make it fit."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    for _ in range(6):
        box = fig.get_tightbbox(renderer)
        over_w, over_h = box.width + 2 * pad - max_w, box.height + 2 * pad - max_h
        if over_w <= 0 and over_h <= 0:
            return box.padded(pad)
        fw, fh = fig.get_size_inches()  # narrower (or shorter) axes, the text unchanged
        fig.set_size_inches(max(1.0, fw - max(0.0, over_w + 0.04) * 1.5),
                            max(1.0, fh - max(0.0, over_h + 0.04) * 1.5))
    return None


def words_of(fig: Figure, limit: int = 600) -> str:
    """A text alternative made from what a figure writes: its title, then each panel's title, axis labels, legend
    and the numbers printed on it (repeated words once; tick labels left out), at most ``limit`` characters."""
    texts = [t for t in fig.texts if t.get_text() == fig.get_suptitle()][:1]  # the title first (Figure.suptitle)
    for ax in fig.axes:
        texts += [Text(text=ax.get_title(loc)) for loc in ("left", "center", "right")]
        texts += [ax.xaxis.label, ax.yaxis.label]
        legend = ax.get_legend()
        texts += list(legend.get_texts()) if legend is not None else []
        texts += list(ax.texts)
    texts += list(fig.texts)
    for ax in fig.axes:  # category names on an axis (bar names, heads) say what the numbers belong to
        texts += [t for t in (*ax.get_xticklabels(), *ax.get_yticklabels()) if re.search(r"[A-Za-z]{2}", t.get_text())]
    seen: list[str] = []
    for t in texts:
        words = " ".join(t.get_text().split())
        if t.get_visible() and words and words not in seen:
            seen.append(words)
    text = "Figure: " + "; ".join(seen) + "."
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


def described(image: Image.Image, text: str) -> Image.Image:
    """``image`` with ``text`` as its text alternative (screen readers get it as the picture's alt text)."""
    image.info[ALT_KEY] = text
    return image


def alt_of(image: Image.Image | None) -> str | None:
    """The text alternative recorded by :func:`described` (None: none recorded)."""
    return None if image is None else image.info.get(ALT_KEY)


@lru_cache(maxsize=32)
def font(size: int) -> ImageFont.FreeTypeFont:
    """Matplotlib's bundled DejaVu Sans at ``size`` px (always available offline; loaded once)."""
    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)


@lru_cache(maxsize=8192)
def text_width(size: int, text: str) -> float:
    """The width in px of one line of ``text`` in :func:`font` ``(size)``, measured once per (size, text): a
    panel grid measures its captions' words and lines again at every panel size it tries (FreeType's layout was
    a fifth of the Attention view's heads figure)."""
    return font(size).getlength(text)


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
    """The image with its patch grid drawn over it and each patch labelled p_rc (row-major) where it fits.

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
    name = (lambda r, c: f"p{r},{c}") if max(gh, gw) > 10 else (lambda r, c: f"p{r}{c}")
    size = min(28, max(style().text_px, step // 4))
    f = font(size)
    labelled = labels and f.getlength(name(gh - 1, gw - 1)) + 10 <= step and size + 8 <= step
    if labelled:  # only where the style's smallest text fits inside a patch (else the inspector names patches)
        for r in range(gh):
            for c in range(gw):
                draw.text((c * step + 4, r * step + 3), name(r, c), fill=(255, 255, 255), font=f, stroke_width=2,
                          stroke_fill=(0, 0, 0))
    if highlight is not None:
        r, c = highlight
        draw.rectangle([c * step, r * step, (c + 1) * step, (r + 1) * step], outline=(255, 200, 0),
                       width=max(3, width * 3))
    if labelled:
        img.info[TEXT_PX_KEY] = f"{size:.2f}"
    where = f"; patch ({highlight[0]}, {highlight[1]}) outlined" if highlight is not None else ""
    return described(img, f"The picture, {rgb.shape[1]}×{rgb.shape[0]} px, cut into a {gh}×{gw} grid of "
                          f"{patch}×{patch}-px patches, {gh * gw} in all, numbered row by row{where}.")


def fig_width(inches: float) -> float:
    """``inches`` at most, so that a figure (with its tight margins) fits the style's width."""
    return min(inches, (style().max_width - 40) / DPI)


def _ink_is_light(rgb: Sequence[float]) -> bool:
    """Whether text on a cell of this colour (0..1 RGB) should be black (the cell is light)."""
    return 0.3 * rgb[0] + 0.6 * rgb[1] + 0.1 * rgb[2] > 0.55


def heatmap(m: np.ndarray, title: str, xlabel: str, ylabel: str, cbar: str, cmap: str = "viridis",
            ticks: Sequence[str] | None = None, yticks: Sequence[str] | None = None,
            annotate: bool | None = None, signed: bool = False, size: tuple[float, float] = (6.5, 5.5)) -> Image.Image:
    """A titled heatmap with labelled axes and a colorbar; ``signed`` centres a diverging map on 0.

    Axes without named ticks get whole-number ticks (cell indices, never ±0.5). ``annotate``
    prints each cell's value; by default it does when the cells are large enough for the
    style's text (up to 8 columns and 12 rows).
    """
    from matplotlib.ticker import MaxNLocator

    m = np.asarray(m, dtype=np.float64)
    st = style()
    if annotate is None:
        annotate = m.ndim == 2 and m.shape[1] <= 8 and m.shape[0] <= 12
    with figure(figsize=(fig_width(size[0]), size[1])) as (fig, ax):
        kw = {}
        lim = float(np.abs(m).max()) or 1.0
        if signed:
            kw = dict(vmin=-lim, vmax=lim)
        im = ax.imshow(m, cmap=DIVERGING if signed else cmap, interpolation="nearest", aspect="auto", **kw)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
        if ticks is not None:
            ax.set_xticks(range(len(ticks)), ticks, rotation=0 if len(ticks) <= 8 else 90)
        yt = yticks if yticks is not None else ticks
        if yt is not None and len(yt) == m.shape[0]:
            ax.set_yticks(range(len(yt)), yt)
        if annotate:
            for (i, j), v in np.ndenumerate(m):
                rgb = im.cmap(im.norm(v))[:3]
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=st.pt(st.text_px),
                        color="black" if _ink_is_light(rgb) else "white")
        fig.colorbar(im, ax=ax, label=cbar)
        return to_image(fig)


def bars(values: dict[str, float], title: str, xlabel: str, highlight: Sequence[str] = ()) -> Image.Image:
    """Horizontal bar chart with the value's share of the total printed on each bar."""
    names = list(values)
    v = np.array([values[k] for k in names], dtype=np.float64)
    total = v.sum() or 1.0
    st = style()
    with figure(figsize=(fig_width(8), (0.6 + 0.15 * (st is not COMPACT)) * len(names) + 1.6)) as (fig, ax):
        colours = ["#e69f00" if n in highlight else "#0072b2" for n in names]
        ax.barh(names[::-1], v[::-1], color=colours[::-1])
        for i, val in enumerate(v[::-1]):
            ax.text(val, i, f"  {val / total:.1%}", va="center", fontsize=st.pt(st.text_px))
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_xlim(0, v.max() * 1.3 if v.max() > 0 else 1)
        ax.xaxis.set_major_formatter(EngFormatter(sep=" "))  # 5 G, not a "1e10" multiplier at the axis' end
        image = to_image(fig)
    eng = EngFormatter(places=2, sep=" ")
    parts = "; ".join(f"{n}: {eng(float(val))} ({val / total:.1%})" for n, val in zip(names, v))
    return described(image, f"Bar chart: {title}. {xlabel}: {parts}.")


def vector_strip(vectors: Sequence[np.ndarray], names: Sequence[str], title: str) -> Image.Image:
    """Each vector as a one-row heatmap strip (signed colormap), stacked, with a colorbar."""
    st = style()
    rows = 1.3 + 0.7 * (st is not COMPACT)
    width = min(9.0, (st.max_width - 240) / DPI)  # room for the colour bars' labels inside the style's width
    with figure(len(vectors), 1, figsize=(width, 1.5 + rows * len(vectors)), squeeze=False) as (fig, axes):
        for ax, vec, name in zip(axes[:, 0], vectors, names):
            vec = np.asarray(vec, dtype=np.float64).ravel()
            lim = float(np.abs(vec).max()) or 1.0
            im = ax.imshow(vec[None, :], cmap=DIVERGING, vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
            ax.set_yticks([])
            ax.set_title(textwrap.fill(name, int(width * DPI / (0.56 * st.label_px))), loc="left",
                         fontsize=st.pt(st.label_px))  # wrapped to the figure's width
            ax.set_xlabel("vector index")
            fig.colorbar(im, ax=ax, label="value", fraction=0.04, pad=0.01)
        fig.suptitle(title, fontweight="bold", fontsize=st.pt(st.title_px))
        projector_style(fig)
        fig.tight_layout()
        return to_image(fig)


def mosaic(tiles: np.ndarray, cmap: str = "viridis", tile_px: int = 0, gap: int = 2) -> tuple[Image.Image, tuple[int, int]]:
    """The ViT-paper grid: tile (r, c) is the (rows, cols) map ``tiles[r, c]``.

    Args:
        tiles: (R, C, rows, cols) similarity maps, all on one shared colour scale.
        tile_px: pixels per map cell (0 picks one so the mosaic fits 720×600 px).

    Returns:
        (image, (row_pitch, col_pitch)): a click at pixel (x, y) is tile (y // row_pitch, x // col_pitch).
    """
    gr, gc, h, w = tiles.shape
    cell = tile_px or max(1, min(720 // (gc * (w + gap)), 600 // (gr * (h + gap))))  # fits 720×600
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
def colorbar_strip(cmap: str, width: int, label: str, text_px: int = 16, height: int = 18) -> Image.Image:
    """A horizontal colour bar from low to high, 'low' and 'high' at its ends and ``label`` centred underneath
    (text ``text_px`` high; the label wraps to ``width``), as a PIL image."""
    f = font(text_px)
    low, high = text_width(text_px, "low") + 8, text_width(text_px, "high") + 8
    bar_w = max(40, int(width - low - high))
    lines = _wrap(label, text_px, width).split("\n")
    line_h = round(text_px * 1.25)
    top = max(height, line_h)
    out = Image.new("RGB", (width, top + 6 + line_h * len(lines)), "white")
    bar = colorize(np.tile(np.linspace(0, 1, bar_w), (height, 1)), cmap, 0.0, 1.0)
    out.paste(Image.fromarray(bar), (int(low), (top - height) // 2))
    d = ImageDraw.Draw(out)
    d.text((0, top // 2), "low", fill="black", font=f, anchor="lm")
    d.text((width, top // 2), "high", fill="black", font=f, anchor="rm")
    for i, line in enumerate(lines):
        d.text((width // 2, top + 6 + i * line_h), line, fill="black", font=f, anchor="ma")
    return out


def panel_size(h: int, w: int, panel_px: int = 300) -> tuple[int, int]:
    """(width, height) of a panel whose long side is ``panel_px``."""
    s = panel_px / max(h, w)
    return max(1, round(w * s)), max(1, round(h * s))


def _wrap(text: str, size: int, width: int) -> str:
    """``text`` with each of its lines broken at spaces into lines no wider than ``width`` px in :func:`font`
    ``(size)`` (a longer word stays)."""
    out = []
    for line in text.split("\n"):
        cur = ""
        for word in line.split():
            if cur and text_width(size, f"{cur} {word}") > width:
                out.append(cur)
                cur = word
            else:
                cur = f"{cur} {word}".strip()
        out.append(cur)
    return "\n".join(out)


PAD = 12  # px between panels and around the grid


@dataclass(frozen=True)
class GridLayout:
    """Where :func:`panels` puts its panels: each panel's (width, height) ``tile``, the columns and their width,
    the canvas, the title's and the captions' heights (px), and the title as wrapped."""

    tile: tuple[int, int]
    cols: int
    col_w: int
    grid_w: int
    width: int
    height: int
    head: int
    cap: int
    title: str


def grid_layout(shape: tuple[int, int], titles: Sequence[str], title: str, cmap: str | None = None,
                bar_label: str = "", cols: int = 4, panel_px: int = 300) -> GridLayout:
    """The layout of :func:`panels` for ``len(titles)`` pictures of (H, W) ``shape``: the largest panels (long side
    ``panel_px`` or less, in steps of 10 px) whose grid, captions, title and colour bar fit the style's box. A
    caller that draws its panels can draw them at ``tile`` (nothing is then resized)."""
    st = style()
    n, pad, line_h = len(titles), PAD, round(st.text_px * 1.25)
    longest_word = max((text_width(st.text_px, w) for t in titles for w in t.replace("\n", " ").split()), default=0)
    widest_line = max((text_width(st.text_px, line) for t in titles for line in t.split("\n")), default=0)
    h0, w0 = shape
    bar_h = (colorbar_strip(cmap, min(st.max_width - 2 * pad, 560), bar_label, st.text_px).height + pad) if cmap else 0
    for size in range(panel_px, 59, -10):  # the largest panels whose grid fits the style's box
        pw, ph = panel_size(h0, w0, size)
        c = max(1, min(cols, n, (st.max_width - pad) // (pw + pad)))
        # a column is as wide as its panel, or as its captions' lines if they fit; long captions wrap at spaces
        col_w = int(max(pw, longest_word + 4, min(widest_line + 4, (st.max_width - pad) // c - pad)))
        c = max(1, min(c, (st.max_width - pad) // (col_w + pad)))
        rows = (n + c - 1) // c
        grid_w = c * (col_w + pad) + pad
        width = max(grid_w, min(st.max_width, int(text_width(st.title_px, title)) + 2 * pad),
                    min(st.max_width, 560 + 2 * pad) if cmap else 0)
        wrapped_title = _wrap(title, st.title_px, width - 2 * pad)
        head = 14 + (wrapped_title.count("\n") + 1) * round(st.title_px * 1.25)
        lines = max((_wrap(t, st.text_px, col_w).count("\n") + 1 for t in titles), default=1)
        cap = 6 + line_h * lines
        height = head + rows * (ph + cap + pad) + bar_h
        if height <= st.max_height:
            break
    return GridLayout((pw, ph), c, col_w, grid_w, width, height, head, cap, wrapped_title)


def panels(images: Sequence[np.ndarray], titles: Sequence[str], title: str, cmap: str | None = None,
           bar_label: str = "", cols: int = 4, panel_px: int = 300) -> Image.Image:
    """Lay (H, W, 3) uint8 images out in a titled grid (pure PIL: fast enough for slider re-renders).

    Each panel is scaled to ``panel_px`` on its long side (less if the grid would not fit the
    style's width and height: :func:`grid_layout`); captions wrap onto as many lines as the panel's column needs,
    so neighbouring captions never run into each other; an optional colour bar for ``cmap``
    goes underneath. The style's text sizes are kept, and recorded in the image.
    """
    st = style()
    pad, line_h = PAD, round(st.text_px * 1.25)
    g = grid_layout(images[0].shape[:2], titles, title, cmap, bar_label, cols, panel_px)
    (pw, ph), c = g.tile, g.cols
    x_off = (g.width - g.grid_w) // 2  # centre the panels on a wider canvas
    bar = colorbar_strip(cmap, min(st.max_width - 2 * pad, 560), bar_label, st.text_px) if cmap else None
    out = Image.new("RGB", (g.width, g.height), "white")
    draw = ImageDraw.Draw(out)
    draw.multiline_text((g.width // 2, 10), g.title, fill="black", font=font(st.title_px), anchor="ma",
                        align="center", spacing=round(st.title_px * 0.25))
    for i, img in enumerate(images):
        r, k = divmod(i, c)
        x0, y0 = x_off + pad + k * (g.col_w + pad), g.head + r * (ph + g.cap + pad)
        draw.multiline_text((x0 + g.col_w // 2, y0 + 2), _wrap(titles[i], st.text_px, g.col_w), fill="black",
                            font=font(st.text_px), anchor="ma", align="center", spacing=line_h - st.text_px)
        tile = Image.fromarray(img)
        out.paste(tile if tile.size == (pw, ph) else tile.resize((pw, ph), Image.BILINEAR),
                  (x0 + (g.col_w - pw) // 2, y0 + g.cap))
    if bar:
        out.paste(bar, ((g.width - bar.width) // 2, g.height - bar.height - pad))
    words = "; ".join(" ".join(t.split()) for t in titles)
    scale = f" Colour scale: {bar_label or 'low to high'} ({cmap})." if cmap else ""
    return described(fit_image(out, float(st.text_px)), f"Figure: {' '.join(title.split())}. Panels: {words}.{scale}")


def heat_overlay(rgb: np.ndarray, heat: np.ndarray, cmap: str, alpha: float,
                 mask: np.ndarray | None = None, edge_colour: tuple[int, int, int] = (0, 229, 255),
                 vmin: float | None = None, vmax: float | None = None) -> np.ndarray:
    """:func:`overlay` (optionally on a shared ``vmin``..``vmax`` scale) plus the outline of a (gh, gw)
    ``mask`` drawn in ``edge_colour``."""
    out = overlay(rgb, heat, cmap, alpha, vmin, vmax)
    if mask is not None:
        out[mask_edges(mask, *rgb.shape[:2], thickness=max(1, rgb.shape[0] // 150))] = edge_colour
    return out
