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
