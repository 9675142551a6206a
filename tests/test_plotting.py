"""Figures for the back row: text sizes recorded and kept, sizes bounded, captions that never touch."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from vitviz.render import plotting


def ink_runs(band: np.ndarray, gap: int = 12) -> int:
    """How many groups of inked columns an (h, w, 3) band of text holds, groups split by more than ``gap`` white
    columns (a word space at 20 px is about 6 px; two captions are at least 12 px apart)."""
    ink = np.flatnonzero(band.min(axis=(0, 2)) < 200)
    return 0 if ink.size == 0 else 1 + int((np.diff(ink) > gap).sum())


def bands(a: np.ndarray, blank: int = 10) -> list[np.ndarray]:
    """The image cut into bands of text rows, split where more than ``blank`` rows hold no ink."""
    inked = np.flatnonzero(a.min(axis=(1, 2)) < 200)
    cuts = np.flatnonzero(np.diff(inked) > blank)
    starts, ends = np.r_[inked[0], inked[cuts + 1]], np.r_[inked[cuts], inked[-1]]
    return [a[s:e + 1] for s, e in zip(starts, ends)]


@pytest.mark.parametrize("shape", [(300, 120), (120, 300), (200, 200)], ids=["portrait", "landscape", "square"])
def test_panel_captions_never_run_into_each_other(shape):
    """Seven white panels (only the text is ink) captioned like the heads view: each caption line is its own group."""
    tiles = [np.full((*shape, 3), 255, np.uint8)] * 7
    titles = [f"head {h}\n{10 + h}% of patches" if h < 6 else "head mean\n34% of patches" for h in range(7)]
    img = plotting.panels(tiles, titles, "[CLS] attention per head, layer 12")
    title, *captions = bands(np.asarray(img))
    per_row = [ink_runs(b) for b in captions]  # captions of each row of panels
    assert sum(per_row) == 7 and len(per_row) >= 2  # seven separate captions: none ran into its neighbour
    assert img.width <= plotting.PROJECTOR.max_width and img.height <= plotting.PROJECTOR.max_height
    assert plotting.text_px_of(img) == plotting.PROJECTOR.text_px


def test_old_captions_would_have_collided():
    """The check above can fail: two captions drawn closer than their width merge into one group."""
    from PIL import ImageDraw

    canvas = Image.new("RGB", (300, 40), "white")
    d = ImageDraw.Draw(canvas)
    d.text((0, 5), "head 0: 50% of patches", fill="black", font=plotting.font(17))
    d.text((150, 5), "head 1: 25% of patches", fill="black", font=plotting.font(17))
    assert ink_runs(np.asarray(canvas)) == 1


def test_matplotlib_figures_record_their_smallest_text_and_fit_the_projector():
    img = plotting.heatmap(np.arange(4.0).reshape(2, 2), "2×2 map", "patch column", "patch row", "value")
    assert img.width <= 790 and img.height <= 660
    assert plotting.text_px_of(img) == pytest.approx(20, abs=0.01)  # the cells' numbers and the ticks: 20 px
    buf = io.BytesIO()
    img.save(buf, "png", pnginfo=__import__("gradio").processing_utils.get_pil_metadata(img))  # as gradio sends it
    assert Image.open(io.BytesIO(buf.getvalue())).info["vitviz:text_px"] == "20.00"
    with plotting.styled(compact=True):
        small = plotting.heatmap(np.arange(4.0).reshape(2, 2), "2×2 map", "patch column", "patch row", "value")
    assert plotting.text_px_of(small) == pytest.approx(14, abs=0.01)


def test_small_heatmaps_have_whole_number_ticks_and_numbers_in_cells(monkeypatch):
    """The 2×2 position map once had ±0.5 ticks and no numbers: capture the figure's texts as drawn."""
    seen: list[list[str]] = []
    original = plotting.smallest_text_px

    def spy(fig):
        seen.append([t.get_text() for t in fig.findobj(__import__("matplotlib").text.Text) if t.get_visible()])
        return original(fig)

    monkeypatch.setattr(plotting, "smallest_text_px", spy)
    plotting.heatmap(np.array([[1.0, 0.5], [0.25, 0.0]]), "t", "x", "y", "v")
    texts = seen[-1]
    assert {"1.00", "0.50", "0.25", "0.00"} <= set(texts)
    assert not any(t in texts for t in ("−0.5", "0.5", "-0.5", "1.5")), texts  # cell indices only
    assert {"0", "1"} <= set(texts)


def test_a_figure_too_large_is_shrunk_and_says_its_text_shrank():
    img = plotting.fit_image(Image.new("RGB", (1580, 400), "white"), 20.0)
    assert img.size == (790, 200) and plotting.text_px_of(img) == 10.0


def test_colour_bar_words_stay_apart():
    """'low', the bar and 'high' on one line, the label under it: the classify figure once printed them on top of
    each other."""
    strip = np.asarray(plotting.colorbar_strip("inferno", 560, "attention (each map scaled to its own range)", 20))
    bar_line, label = bands(strip, blank=2)
    assert ink_runs(bar_line, gap=5) == 3 and ink_runs(label) == 1


def test_a_tall_resampled_table_stays_within_a_projector_screen():
    """Resampling a position table to 30×12 once made a 3,600 px tall mosaic (a 4,800 px page)."""
    from vitviz.core import posembed
    from vitviz.views import posembed as view

    v = view.render(posembed.sincos_2d(14, 14, 64).reshape(14, 14, 64), "2D sinusoidal", resample_to=(30, 12))
    assert v.resampled.height <= 720 and v.mosaic.height <= 720


@pytest.mark.parametrize("wide", [False, True], ids=["fits", "shrunk"])
def test_a_figure_is_cut_to_the_box_savefig_would_measure(wide):
    """to_image hands savefig the box fit_tight_box measured last, instead of "tight" (a second measurement after a
    dry draw): the picture is pixel for pixel what "tight" gives, also for a figure its labels made too wide."""
    def make():
        fig = Figure(figsize=(12.0 if wide else 6.0, 4.0), dpi=plotting.DPI, facecolor="white")
        ax = fig.subplots()
        ax.plot(np.arange(10), np.arange(10) ** 2, "o-")
        ax.set_title("a title " + "that runs on " * (3 if wide else 1))
        ax.set_xlabel("block")
        ax.set_ylabel("a long label on the left")
        ax.legend(["squares"], loc="upper left")
        return fig

    fig = make()
    got = plotting.to_image(fig)
    ref = make()
    plotting.projector_style(ref)
    st = plotting.style()
    assert plotting.fit_tight_box(ref, st.max_width / plotting.DPI, st.max_height / plotting.DPI) is not None
    buf = io.BytesIO()
    ref.savefig(buf, format="png", dpi=plotting.DPI, bbox_inches="tight", facecolor="white")
    want = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    assert got.size == want.size and np.array_equal(np.asarray(got), np.asarray(want))
