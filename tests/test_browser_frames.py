"""No open empty frame: at 1280×720 in projector mode, every tab opened and every accordion in it opened, each
figure box that can be seen holds a picture (computed on open) and each open panel says something; a range
slider that follows the picture's grid ends at the grid's last row and column."""

from __future__ import annotations

import pytest
from browser_support import OPENS_WITH as TABS
from browser_support import idle, open_tab

pytestmark = pytest.mark.browser

EMPTY_FRAMES = """() => [...document.querySelectorAll('.vx-fig')]
  .filter((el) => el.offsetParent !== null && el.getBoundingClientRect().height > 0)
  .filter((el) => { const img = el.querySelector('img'); return !img || !img.getAttribute('src'); })
  .map((el) => el.id || el.className)"""

OPEN_ALL = """() => { let n = 0;
  for (const acc of document.querySelectorAll('.block .label-wrap')) {
    if (acc.offsetParent === null || acc.classList.contains('open')) continue;
    acc.click(); n += 1; }
  return n; }"""


@pytest.mark.parametrize("tab", list(TABS))
def test_every_open_panel_shows_an_answer(browser, app_url, tab):
    ctx, page = open_tab(browser, app_url, tab, query="projector=1")
    try:
        assert page.evaluate(EMPTY_FRAMES) == [], "a frame is empty before any accordion is opened"
        opened = page.evaluate(OPEN_ALL)
        assert opened >= 1
        idle(page, rounds=3)
        page.evaluate("async () => { for (let y = 0; y < document.documentElement.scrollHeight; y += innerHeight / 2)"
                      " { scrollTo(0, y); await new Promise((r) => setTimeout(r, 60)); } }")
        page.wait_for_timeout(500)
        assert page.evaluate(EMPTY_FRAMES) == []
    finally:
        ctx.close()


def test_the_swin_query_sliders_follow_the_grid(browser, app_url):
    ctx, page = open_tab(browser, app_url, "patches")
    try:
        page.get_by_text("Windowed attention (Swin)").click()
        page.wait_for_selector("#swin-windows img", timeout=60_000)
        idle(page)
        ranges = page.evaluate("""() => [...document.querySelectorAll('input[type=range]')]
            .filter((i) => /query (row|column)/.test(i.getAttribute('aria-label') || '') && i.offsetParent !== null)
            .map((i) => [i.getAttribute('aria-label'), Number(i.max)])""")
        assert ranges and all(hi == 13 for _, hi in ranges), ranges  # the cat at 224 px in 16-px patches: 14×14
    finally:
        ctx.close()
