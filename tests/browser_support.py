"""What the browser tests share: Debian's Chromium through Playwright (skipped without it, required in CI)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
HOW = "Install Debian's chromium (sudo apt-get install chromium) to run the browser tests."

if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
    if os.environ.get("CI"):
        pytest.fail(f"browser tests must run in CI, but {CHROMIUM} is missing. {HOW}", pytrace=False)
    pytest.skip(f"no Chromium at {CHROMIUM}. {HOW}", allow_module_level=True)

from vitviz.specs.tabs import TABS  # noqa: E402

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-dev.txt")


OPENS_WITH = {t.id: t.shows for t in TABS.values()}
"""What each tab shows once its example is computed (each tab's declaration says)."""


def open_tab(browser, url: str, tab: str, width: int = 1280, height: int = 720, query: str = "", **context):
    """A new page at ``url?tab=TAB&QUERY`` in a ``width``×``height`` window, once the tab shows its answer and the
    page is idle: (its browser context, to close; the page)."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, **context)
    page = ctx.new_page()
    page.goto(f"{url}?tab={tab}" + (f"&{query}" if query else ""))
    page.wait_for_selector(OPENS_WITH[tab], state="attached", timeout=120_000)
    idle(page)
    return ctx, page


def idle(page, rounds: int = 2) -> None:
    """Wait until the page has no event in progress (an answer can queue one more run right after it)."""
    for _ in range(rounds):
        page.wait_for_function("() => !document.body.innerText.includes('processing |') && "
                               "!document.querySelector('.pending')", timeout=120_000)
        page.wait_for_timeout(600)


ON_FIRST_SCREEN = """(sel) => {  // the first picture or drawing of some size in `sel` (or `sel` itself when it holds
  // none: Classify's top 5), under the lesson's bar (which stays on screen, at most half of it), and as much of it
  // in view as the screen below the bar can hold
  const box = document.querySelector(sel), bar = document.getElementById('lesson-bar')?.getBoundingClientRect();
  const fig = box && (box.matches('img, canvas') || box.querySelector('img, canvas') ? [box, ...box.querySelectorAll(
    'img, canvas')].find((e) => e.matches('img, canvas') && e.getBoundingClientRect().height > 60)
    : box.getBoundingClientRect().height > 60 && box);
  if (!fig || !bar || bar.top < 0 || bar.bottom > innerHeight / 2) return false;
  const r = fig.getBoundingClientRect(), seen = Math.min(innerHeight, r.bottom) - r.top;
  return r.top >= bar.bottom - 2 && seen >= 0.9 * Math.min(r.height, innerHeight - bar.bottom - 20); }"""
