"""Screenshot every tab of a running vitviz in headless Chromium (for the README and for looking).

    python app.py &                      # or any running instance
    python scripts/screenshots.py [URL] [OUT_DIR]

Each tab at 1280×720 (a common projector) in projector mode: open its link, wait for the example it opens on,
point at a patch in the view drawn in the browser, save the whole page; then the attention explorer alone, as
the viewport shows it with a hovered patch; then each view inside an accordion (the views beyond the four ideas),
opened, as the viewport shows it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
TABS = {  # tab name -> (its link, what must appear, the browser view to point at)
    "Patches": ("tab=patches&image=cat", "#patch-grid img", "#patch-inspector canvas"),
    "Position embeddings": ("tab=positions", "#pe-mosaic img", "#pe-explorer canvas"),
    "Attention": ("tab=attention&image=scene_star", "#attention-explorer .vx-big canvas",
                  "#attention-explorer .vx-big canvas"),
    "Classify": ("tab=classify&image=scene_star", "#classify-maps img", None),
    "ViT vs CNN": ("tab=vitcnn&image=scene_star", "#vitcnn-reach img", None),
}

VIEWS = {  # file name -> (link, accordion to open, the figure it draws)
    "6_windows": ("tab=patches&image=cat", "Windowed attention (Swin)", "#swin-windows"),
    "7_relative_bias": ("tab=positions", "Relative positions: Swin's relative position bias", "#pe-relative-bias"),
    "8_inside_head": ("tab=attention&image=cat", "Inside one head", "#inside-head"),
    "9_feature_pca": ("tab=attention&image=scene_star", "Patch-feature PCA", "#feature-pca"),
    "10_two_models": ("tab=attention&image=scene_star", "Two models side by side", "#attn-pair"),
    "11_relevance": ("tab=classify&image=scene_star", "Class-specific relevance", "#classify-relevance"),
    "13_shift": ("tab=vitcnn&image=scene_star", "Shift the picture", "#vitcnn-shift-errors"),
    "14_data_efficiency": ("tab=vitcnn&image=scene_star", "Data efficiency", "#vitcnn-sweep"),
    "15_hybrid_stages": ("tab=vitcnn&image=scene_star", "Hybrid stages", "#vitcnn-stages"),
}


def point_at(page, selector: str, fx: float, fy: float) -> None:
    """Move the mouse to a fraction (fx, fy) of the element, after scrolling it into view."""
    target = page.locator(selector).first
    target.scroll_into_view_if_needed()
    box = target.bounding_box()
    page.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
    page.wait_for_timeout(400)


def shoot(url: str, out: Path, timeout_ms: int = 120_000) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        for i, (tab, (link, shown, view)) in enumerate(TABS.items()):
            page.goto(url.rstrip("/") + "/?" + link + "&projector=1")
            page.locator(shown).first.wait_for(state="visible", timeout=timeout_ms)
            idle = "() => !document.body.innerText.includes('processing |')"
            for _ in range(3):  # a burst of changes can queue one more run right after the first
                page.wait_for_function(idle, timeout=timeout_ms)
                page.wait_for_timeout(1500)
            if view:
                point_at(page, view, 0.62, 0.3)
            number = i + 1 if i < 4 else 12  # 5 to 11 are the explorer and the accordions of the first four tabs
            path = out / f"{number}_{tab.lower().replace(' ', '_')}.png"
            page.screenshot(path=str(path), full_page=True)
            saved.append(path)
            if tab == "Attention":  # the explorer as a projector shows it: viewport only, a patch pointed at
                page.locator("#attention-explorer .vx-bar").scroll_into_view_if_needed()
                page.evaluate("window.scrollBy(0, document.querySelector('#attention-explorer')"
                              ".getBoundingClientRect().top - 8)")
                point_at(page, view, 0.62, 0.3)
                path = out / "5_attention_explorer.png"
                page.screenshot(path=str(path))
                saved.append(path)
        idle = "() => !document.body.innerText.includes('processing |')"
        for name, (link, accordion, fig) in VIEWS.items():
            page.goto(url.rstrip("/") + "/?" + link + "&projector=1")
            page.locator(".tabitem:visible").first.wait_for(state="visible", timeout=timeout_ms)
            page.wait_for_function(idle, timeout=timeout_ms)
            header = page.locator(".tabitem:visible").get_by_text(accordion).first
            header.click()
            page.locator(f"{fig} img").first.wait_for(state="attached", timeout=timeout_ms)
            page.locator(fig).scroll_into_view_if_needed()  # figures load lazily: only once they are in view
            page.locator(f"{fig} img").first.wait_for(state="visible", timeout=timeout_ms)
            page.wait_for_function(idle, timeout=timeout_ms)
            page.wait_for_timeout(800)
            header.scroll_into_view_if_needed()
            page.evaluate("(y) => window.scrollBy(0, y)", header.bounding_box()["y"] - 8)
            path = out / f"{name}.png"
            page.screenshot(path=str(path))
            saved.append(path)
        browser.close()
    return saved


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7860/"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent / "docs"
    for path in shoot(url, out):
        print(path)
