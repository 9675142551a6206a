"""A tab's sections (accordions) in a real Chromium: a closed one sends the server nothing when what it would follow
changes; an open one is asked again, and draws the new answer."""

from __future__ import annotations

import json

import pytest
from browser_support import idle, open_tab

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_closed_section_sends_nothing_and_an_open_one_follows_the_picture(browser, app_url):
    ctx, page = open_tab(browser, app_url, "classify", query="image=scene_star")
    try:
        names = dict(page.evaluate("() => window.gradio_config.dependencies.map((d) => [d.id, d.api_name])"))
        sent: list[str] = []

        def joined(request) -> None:
            if request.method == "POST" and "/queue/join" in request.url:
                sent.append(str(names.get(json.loads(request.post_data or "{}").get("fn_index"))))

        page.on("request", joined)
        pick = lambda label: page.locator(f".tabitem:visible .gallery-item[aria-label='{label}']").first.click()
        pick("example: ring shape scene")
        page.wait_for_function("() => location.search.includes('image=scene_ring')", timeout=60_000)
        idle(page)
        assert any(n.startswith("answer_classify") for n in sent), sent  # the tab's own view follows the picture
        assert not any("randomise" in n for n in sent), sent  # the closed section: nothing
        page.locator("#randomise-box > .label-wrap").click()
        page.wait_for_selector("#randomise-box img", timeout=120_000)
        idle(page)
        before = page.locator("#randomise-box img").first.get_attribute("src")
        sent.clear()
        pick("example: cross shape scene")
        page.wait_for_function("(b) => { const i = document.querySelector('#randomise-box img'); "
                               "return i && i.getAttribute('src') !== b; }", arg=before, timeout=120_000)
        idle(page)
        assert sum("randomise" in n for n in sent) == 1, sent  # open: asked once, and drawn anew
    finally:
        ctx.close()
