"""The page as a lecture hall and a phone see it: every tab at 1280×720, 1920×1080 and 390×844, in normal and
projector mode, in headless Chromium. A tab opens on a computed example; no two texts overlap, nothing is drawn
over a figure, no figure is taller than the window, and text is large enough: at least 18 px for every figure's
text (its recorded size × the scale it is shown at) and 20 px for the page's text in projector mode."""

from __future__ import annotations

import io
import time
from pathlib import Path

import httpx
import pytest
from browser_support import idle, sync_api
from PIL import Image

pytestmark = pytest.mark.browser


AUDIT = (Path(__file__).parent / "js" / "audit.js").read_text()
VIEWPORTS = {"projector": (1280, 720), "desktop": (1920, 1080), "phone": (390, 844)}
OPENS_WITH = {  # tab id -> what its computed example shows
    "patches": "#patch-grid img", "forward": "#forward-diagram details", "positions": "#pe-mosaic img",
    "attention": "#attention-explorer .vx-big canvas", "classify": "#classify-maps img",
    "vitcnn": "#vitcnn-reach img"}
FIGURE_MIN_PX = {"projector": 18, "desktop": 18, "phone": 8}
"""Smallest figure text on screen: 18 px where a class reads it; a phone shrinks figures to its width (tap the
fullscreen button to read them at full size)."""
PAGE_MIN_PX = {True: 20, False: 14}
"""Smallest page text in projector mode and in normal mode (slider end labels excepted: they repeat the range)."""
EXEMPT = {"Use via API", "Built with Gradio", "Settings", "·"}


SCROLL_THROUGH = """async () => {  // pictures load lazily: pass every one once, then back to the top
  for (let y = 0; y < document.documentElement.scrollHeight; y += innerHeight / 2) {
    scrollTo(0, y); await new Promise((r) => setTimeout(r, 80)); }
  scrollTo(0, 0);
  // (a picture in a closed panel is never loaded lazily: only the ones that can be seen are waited for)
  await Promise.all([...document.images].filter((i) => i.offsetParent !== null)
    .map((i) => i.complete ? 0 : new Promise((r) => { i.onload = i.onerror = r; })));
}"""


def settle(page):
    """Wait until no event is processing and the page has drawn the answer (every picture loaded)."""
    idle(page)
    page.evaluate(SCROLL_THROUGH)


def open_page(browser, url, viewport, **context):
    ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, **context)
    page = ctx.new_page()
    page.goto(url)
    return ctx, page


def figure_text_px(src: str) -> float | None:
    """The smallest text a server figure records (PNG text chunk written by vitviz.render.plotting)."""
    with Image.open(io.BytesIO(httpx.get(src, timeout=30).content)) as im:
        value = im.info.get("vitviz:text_px")
    return None if value is None else float(value)


def audit(page, tab: str, projector: bool, size: str, shots) -> None:
    """Audit the page as it stands (its tab, mode and viewport): overlaps, text over figures, sizes."""
    w, h = VIEWPORTS[size]
    shown = page.locator(OPENS_WITH[tab]).first
    shown.wait_for(state="attached", timeout=120_000)  # a computed example on open
    shown.scroll_into_view_if_needed(timeout=120_000)
    shown.wait_for(state="visible", timeout=120_000)
    settle(page)
    report = page.evaluate(AUDIT)
    page.screenshot(path=str(shots / f"{tab}-{size}-{projector}.png"), full_page=True)
    where = f"{tab}, {size}, {'projector' if projector else 'normal'} mode"
    assert page.evaluate("document.body.classList.contains('vx-projector')") is projector, where
    tabs = ["Patches", "Forward pass", "Position embeddings", "Attention", "Classify", "ViT vs CNN"]
    assert report["tabs"] == tabs, where  # one tap each
    assert report["overlaps"] == [], where
    assert report["onFigures"] == [], where
    assert report["figures"], f"no figure on screen: {where}"
    for f in report["figures"]:
        assert f["shownH"] <= h + 0.5, f"{where}: {f['id']} is {f['shownH']:.0f} px tall in a {h} px window"
        px = figure_text_px(f["src"])
        if px is not None:
            assert px * f["scale"] >= FIGURE_MIN_PX[size] - 0.05, (
                f"{where}: {f['id']}: text {px:.1f} px drawn, shown at {px * f['scale']:.1f} px")
    for c in report["canvases"]:
        assert c["px"] >= FIGURE_MIN_PX[size] - 0.05, (where, c)
    small = [t for t in report["texts"] if t["px"] < PAGE_MIN_PX[projector] and t["text"] not in EXEMPT]
    assert small == [], (where, small[:8])


@pytest.mark.parametrize("tab", list(OPENS_WITH))
def test_layout(browser, app_url, tab, tmp_path):
    """One page per tab: every viewport in normal mode, then projector mode switched on in place, every viewport."""
    ctx, page = open_page(browser, f"{app_url}?tab={tab}", VIEWPORTS["projector"])
    try:
        for projector in (False, True):
            if projector:
                page.get_by_label("Projector mode (large text)").check()
            for size, (w, h) in VIEWPORTS.items():
                page.set_viewport_size({"width": w, "height": h})
                page.evaluate("() => window.scrollTo(0, 0)")
                audit(page, tab, projector, size, tmp_path)
    finally:
        ctx.close()


OPEN_UP = {  # tab -> (accordions to open, buttons to press) so that every figure a tab can show is audited
    "patches": (["The 8×8 toy, step by step", "The clicked patch, drawn on the server",
                 "What a trained patch projection learned", "Windowed attention (Swin)"], []),
    "forward": ([], []),  # its panels are open from the start
    "positions": (["Relative positions: 2D rotary encoding", "Relative positions: Swin's relative position bias"], []),
    "attention": (["Figures drawn on the server", "Rollout: attention followed", "Mean attention distance per head",
                   "Training timeline of the offline model", "Inside one head", "Patch-feature PCA",
                   "Two models side by side"], []),
    "classify": (["Experiment: patch size trade-off", "Class maps: which patches", "Experiment: shuffle the patches"],
                 []),
    "vitcnn": (["Shift the picture", "Data efficiency", "Hybrid stages"], []),
}
"""An accordion opened shows its answer (computed on open): no button has to be pressed."""


@pytest.mark.parametrize("tab", list(OPEN_UP))
def test_figures_inside_accordions_fit_the_projector(browser, app_url, tab, tmp_path):
    """At 1280×720 in projector mode, with every accordion of the tab open and its figures drawn."""
    ctx, page = open_page(browser, f"{app_url}?tab={tab}&projector=1", VIEWPORTS["projector"])
    try:
        page.locator(OPENS_WITH[tab]).first.wait_for(state="visible", timeout=120_000)
        settle(page)
        panel = page.locator(".tabitem:visible").first
        accordions, buttons = OPEN_UP[tab]
        for name in accordions:  # each opened before the next: a click can miss while an answer above moves the
            # page (a slow machine: the panel clicked before it was still drawing), and then the panel stays shut
            label = panel.get_by_text(name).first
            for _ in range(3):
                label.click()
                try:
                    label.page.wait_for_function("(e) => e.closest('.label-wrap')?.classList.contains('open')",
                                                 arg=label.element_handle(), timeout=10_000)
                    break
                except sync_api.TimeoutError:
                    continue
        for name in buttons:
            panel.get_by_role("button", name=name).click()
        if tab == "patches":  # a patch clicked in the grid draws its vectors
            page.locator("#patch-grid img").click(position={"x": 40, "y": 40})
        expected = {"patches": {"toy-step", "patch-vectors", "patch-filters", "swin-windows", "swin-cost"},
                    "classify": {"shuffled", "classify-relevance"},
                    "positions": {"pe-rotary", "pe-relative-bias"},
                    "forward": {"forward-residual", "forward-updates", "forward-lens", "forward-lens-map"},
                    "vitcnn": {"vitcnn-reach", "vitcnn-erf", "vitcnn-shift-errors", "vitcnn-shift-stability",
                               "vitcnn-sweep", "vitcnn-stages"},
                    "attention": {"attn-heads", "attn-rollout", "attn-distance", "timeline-strip", "timeline-heads",
                                  "inside-head", "feature-pca", "attn-pair"}}[tab]
        # an answer asked by the last click can still be queued when the page first looks idle (a slow machine):
        # settled again (idle, scrolled through so every picture loads) until each expected figure is drawn
        deadline = time.monotonic() + 120
        while True:
            settle(page)
            report = page.evaluate(AUDIT)
            ids = {f["id"] for f in report["figures"]}
            if expected <= ids or time.monotonic() > deadline:
                break
            page.wait_for_timeout(1000)
        page.screenshot(path=str(tmp_path / f"{tab}-open.png"), full_page=True)
        assert expected <= ids, ids
        if tab == "attention":  # the inside-one-head layer slider follows the model shown (offline: 4 layers)
            assert page.locator("#inside-layer input[type=range]").get_attribute("max") == "4"
        assert report["overlaps"] == [] and report["onFigures"] == []
        for f in report["figures"]:
            assert f["shownH"] <= 720.5, f"{f['id']} is {f['shownH']:.0f} px tall"
            px = figure_text_px(f["src"])
            if px is not None:
                assert px * f["scale"] >= 18 - 0.05, f"{f['id']}: text shown at {px * f['scale']:.1f} px"
            if f["id"] == "shuffled":
                assert f["shownH"] >= 200  # it once showed 64 px tall
        small = [t for t in report["texts"] if t["px"] < PAGE_MIN_PX[True] and t["text"] not in EXEMPT]
        assert small == [], small[:8]
    finally:
        ctx.close()
