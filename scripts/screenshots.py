"""Screenshot every tab of a running vitviz in headless Chromium (for the README and for looking).

    python app.py &                      # or any running instance
    python scripts/screenshots.py [URL] [OUT_DIR]

Each tab: open it, click its first example, wait for the main figure, save a PNG.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
TABS = {  # tab name -> (example index to click, elem_id of the image that must appear)
    "Patches": (0, "patch-grid"),
    "Position embeddings": (3, "pe-mosaic"),
    "Attention": (0, "attn-heads"),
    "Classify": (0, "classify-maps"),
}


def shoot(url: str, out: Path, timeout_ms: int = 120_000) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url + ("&" if "?" in url else "?") + "__theme=light")
        for i, (tab, (example, elem_id)) in enumerate(TABS.items()):
            page.get_by_role("tab", name=tab, exact=True).click()
            panel = page.locator(".tabitem:visible").first
            panel.locator(".gallery-item, tr.tr-body").nth(example).click()
            img = page.locator(f"#{elem_id} img").first
            img.wait_for(state="visible", timeout=timeout_ms)
            idle = "() => !document.body.innerText.includes('processing |')"
            for _ in range(3):  # a burst of changes can queue one more run right after the first
                page.wait_for_function(idle, timeout=timeout_ms)
                page.wait_for_timeout(1500)
            path = out / f"{i + 1}_{tab.lower().replace(' ', '_')}.png"
            page.screenshot(path=str(path), full_page=True)
            saved.append(path)
        browser.close()
    return saved


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7860/"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent / "docs"
    for path in shoot(url, out):
        print(path)
