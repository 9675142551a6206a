"""WCAG 2.1 AA in headless Chromium: axe-core on every tab at 1280×720 and 390×844, normal and projector mode
(16 pages), failing on any serious or critical violation; a keyboard-only walk through the Attention tab and its
explorer; the page at 200% zoom and 320 CSS px wide, with nothing cut off."""

from __future__ import annotations

from collections import Counter

import pytest
from browser_support import OPENS_WITH as TABS
from browser_support import idle, open_tab

pytestmark = pytest.mark.browser
axe_sync = pytest.importorskip("axe_playwright_python.sync_playwright", reason="pip install -r requirements-dev.txt")

WCAG = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
        "resultTypes": ["violations"]}


@pytest.mark.parametrize("size", [(1280, 720), (390, 844)], ids=["1280x720", "390x844"])
@pytest.mark.parametrize("projector", [False, True], ids=["normal", "projector"])
def test_axe_finds_no_serious_or_critical_violation_on_any_tab(browser, app_url, size, projector):
    axe = axe_sync.Axe()
    found: Counter = Counter()
    where: list[str] = []
    for tab in TABS:
        ctx, page = open_tab(browser, app_url, tab, *size, query="projector=1" if projector else "")
        try:
            for v in axe.run(page, options=WCAG).response["violations"]:
                if v["impact"] in ("serious", "critical"):
                    found[v["id"]] += len(v["nodes"])
                    where += [f"{tab}: {v['id']} at {n['target']}" for n in v["nodes"][:2]]
        finally:
            ctx.close()
    assert not found, f"{dict(found)}\n" + "\n".join(where)


FOCUSED = """() => { const e = document.activeElement, s = getComputedStyle(e);
  return { tag: e.tagName, cls: String(e.className || ''), type: e.type || '',
           label: e.getAttribute('aria-label') || '',
           text: (e.innerText || e.value || '').trim().slice(0, 40), inExplorer: !!e.closest('#attention-explorer'),
           ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== 'none' }; }"""


def test_the_attention_tab_and_its_explorer_work_by_keyboard_alone(browser, app_url):
    ctx, page = open_tab(browser, app_url, "attention", 1280, 720)
    try:
        page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
        seen = []
        for _ in range(160):  # Tab through the page: every control is reached, each shows where the focus is
            page.keyboard.press("Tab")
            seen.append(page.evaluate(FOCUSED))
            if len(seen) > 5 and seen[-1] == seen[0]:
                break
        reached = {(s["tag"], s["cls"].split(" ")[0], s["label"]) for s in seen}
        explorer = [s for s in seen if s["inExplorer"]]
        assert any(s["tag"] == "BUTTON" and s["text"] == "Show attention" for s in seen)
        assert sum(1 for s in seen if "gallery-item" in s["cls"] and s["label"].startswith("example")) >= 8
        assert {s["cls"] for s in explorer if s["tag"] == "INPUT"} >= {"vx-layer", "vx-keep", "vx-alpha"}
        assert any(s["cls"] == "vx-cmap" for s in explorer) and any(s["cls"].startswith("vx") and
                                                                     s["label"].startswith("attention explorer")
                                                                     for s in explorer)
        assert any(s["tag"] == "INPUT" and s["label"] == "model" for s in seen)  # (offline the side is fixed: 64 px)
        assert any(s["cls"].startswith("vx-strip") for s in explorer)  # the layer strip scrolls on a phone
        missing = [s for s in seen if not s["ring"] and s["tag"] != "BODY"]
        assert not missing, f"focused without a visible ring: {missing[:5]}"
        assert len(reached) >= 20

        # operate the explorer by keys: the spoken caption follows
        page.focus("#attention-explorer .vx")
        caption = page.locator("#attention-explorer .vx-big figcaption")
        start = caption.inner_text()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("(s) => document.querySelector('#attention-explorer .vx-big figcaption')"
                               ".innerText !== s", arg=start)
        assert "query patch (" in caption.inner_text() and "pinned" in caption.inner_text()
        assert caption.get_attribute("aria-live") == "polite"
        page.keyboard.press("[")
        page.wait_for_timeout(200)
        assert caption.get_attribute("data-layer") == str(int(page.eval_on_selector(
            "#attention-explorer .vx-layer", "e => e.max")) - 1)
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
        assert "the class token" in caption.inner_text()
        page.focus("#attention-explorer .vx-cmap")
        page.keyboard.press("ArrowDown")
        page.wait_for_timeout(200)
        assert page.eval_on_selector("#attention-explorer .vx-cmap", "e => e.value") != "inferno"

        # operate the tab by keys: an example by Enter, then the button
        page.locator(".gallery-item[aria-label*='ring shape scene']:visible").first.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("() => location.search.includes('image=scene_ring')", timeout=60_000)
        idle(page)
        page.get_by_role("button", name="Show attention").focus()
        page.keyboard.press("Enter")
        idle(page)
        assert "scene_ring" in page.url
    finally:
        ctx.close()


OVERFLOW = """() => { const w = document.documentElement.clientWidth;
  const scrolls = (e) => {  // inside a box that scrolls sideways and itself fits: reachable, not cut off
    for (let a = e.parentElement; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if ((o === 'auto' || o === 'scroll') && a.getBoundingClientRect().right <= w + 1) return true;
    }
    return false;
  };
  return [...document.querySelectorAll('.gradio-container *')].filter((e) => {
    if (!e.offsetParent) return false;
    const b = e.getBoundingClientRect();
    return b.width > 0 && b.right > w + 1 && getComputedStyle(e).position !== 'fixed' && !scrolls(e);
  }).map((e) => e.tagName + '.' + String(e.className).split(' ')[0]).slice(0, 8); }"""


@pytest.mark.parametrize("case", ["zoom200", "reflow320"])
def test_nothing_is_cut_off_at_200_percent_zoom_or_320_px(browser, app_url, case, tmp_path):
    """200% zoom of a 1280×720 window is a 640×360 CSS-px viewport at device scale 2; WCAG's reflow case is
    320 CSS px wide. Wide tables and the layer strip scroll inside themselves (reachable by keyboard)."""
    size, scale = ((640, 360), 2) if case == "zoom200" else ((320, 800), 1)
    for tab in TABS:
        ctx, page = open_tab(browser, app_url, tab, *size, device_scale_factor=scale)
        try:
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= size[0] + 1, f"{tab}: the page is {width} px wide in a {size[0]} px window"
            assert page.evaluate(OVERFLOW) == [], tab
            page.screenshot(path=str(tmp_path / f"{case}-{tab}.png"), full_page=True)
        finally:
            ctx.close()


def test_high_contrast_mode_comes_from_the_link_and_keeps_axe_clean(browser, app_url):
    ctx, page = open_tab(browser, app_url, "classify", query="contrast=1&projector=1")
    try:
        assert page.evaluate("() => document.body.classList.contains('vx-contrast')")
        assert page.is_checked("#contrast input")
        colour = page.evaluate("() => getComputedStyle(document.querySelector('#classify-notice, .prose p') || "
                               "document.body).color")
        assert colour in ("rgb(0, 0, 0)", "rgba(0, 0, 0, 1)")
        bad = [v["id"] for v in axe_sync.Axe().run(page, options=WCAG).response["violations"]
               if v["impact"] in ("serious", "critical")]
        assert bad == []
        page.uncheck("#contrast input")
        page.wait_for_function("() => !location.search.includes('contrast=1')")
        assert not page.evaluate("() => document.body.classList.contains('vx-contrast')")
    finally:
        ctx.close()
