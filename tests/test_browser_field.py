"""What a class hit when it tried the page (the field defects), each checked in Chromium as a person does it:
refused settings and pictures, the registers panel offline, a pinned patch that moved the page, a model list that
stayed open, links that pinned every tab's model, the offline reason said first, honest controls, phone tables."""

from __future__ import annotations

import re

import numpy as np
import pytest
from browser_support import idle, open_tab
from PIL import Image

pytestmark = pytest.mark.browser

EXPLORER = "#attention-explorer"


def slider(page, maximum: str):
    """The visible range input of the open tab whose maximum is ``maximum``."""
    return page.locator(f".tabitem:visible input[type=range][max='{maximum}']").first


def set_slider(page, maximum: str, value: int) -> None:
    """Move a slider as a person does: its value, then the release gradio listens to."""
    page.evaluate("""([m, v]) => { const s = [...document.querySelectorAll('.tabitem input[type=range]')]
        .find(e => e.max == m && e.offsetParent); s.value = v;
        s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true}));
        s.dispatchEvent(new PointerEvent('pointerup', {bubbles: true})); }""", [maximum, value])


def toasts(page) -> list[str]:
    return page.locator(".toast-body").all_inner_texts()


def test_a_refused_setting_shows_one_message_and_leaves_a_consistent_view(browser, app_url, tmp_path):
    """The 3000×600 panorama with keep, P = 4, then 640 px: 128,000 patches are refused once, nothing shows an
    error badge, the slider goes back to the 224 px the summary, the grid and the inspector were made with."""
    pano = tmp_path / "panorama.png"
    Image.fromarray((np.random.default_rng(0).random((600, 3000, 3)) * 255).astype(np.uint8)).save(pano)
    ctx, page = open_tab(browser, app_url, "patches")
    try:
        page.locator(".tabitem:visible input[type=file]").first.set_input_files(str(pano))
        page.wait_for_function("() => document.querySelector('#patch-summary').innerText.includes('3000×600')",
                               timeout=60_000)
        idle(page)
        page.get_by_label("keep").check()
        idle(page)
        page.get_by_label("4", exact=True).first.check()
        idle(page)
        set_slider(page, "640", 640)
        page.wait_for_timeout(1500)
        idle(page)
        said = toasts(page)
        assert len(said) == 1 and "128,000 patches" in said[0] and said[0].count("128,000") == 1, said
        assert page.locator(".tabitem:visible .error").count() == 0  # no "Error" badge on any figure
        assert slider(page, "640").input_value() == "224"
        summary = page.locator("#patch-summary").inner_text()
        assert "→ 1120×224" in summary and "patches of 4×4" in summary
        assert "48 = 4·4·3" in page.locator("#patch-inspector").inner_text()
        assert "res=640" not in page.url and "patch=4" in page.url  # the link holds the view on screen
    finally:
        ctx.close()


def test_a_link_with_a_refused_setting_opens_on_the_defaults_and_says_so_once(browser, app_url):
    ctx, page = open_tab(browser, app_url, "patches", query="patch=4&res=640&fit=keep")
    try:
        said = toasts(page)
        assert len(said) == 1 and "38,400 patches" in said[0] and "default settings" in said[0], said
        assert "14×14 = 196 patches of 16×16" in page.locator("#patch-summary").inner_text()
        assert "res=" not in page.url and "patch=" not in page.url
    finally:
        ctx.close()


def test_a_file_that_is_no_picture_is_refused_once_and_the_picture_before_it_stays(browser, app_url, tmp_path):
    notes = tmp_path / "notes.jpg"
    notes.write_text("this is not a picture")
    ctx, page = open_tab(browser, app_url, "patches")
    try:
        before = page.locator("#patch-summary").inner_text()
        page.locator(".tabitem:visible input[type=file]").first.set_input_files(str(notes))
        page.wait_for_timeout(2500)
        idle(page)
        said = toasts(page)
        assert len(said) == 1 and said[0].count("not an image vitviz can read") == 1, said
        assert page.locator(".tabitem:visible [data-testid=image] img, .tabitem:visible .image-frame img").count() >= 1
        assert page.locator("#patch-summary").inner_text() == before and "image=cat" in page.url
    finally:
        ctx.close()


def test_the_registers_panel_offline_says_why_without_pretending_to_load(browser, app_url):
    """At 390×844: the note under the button (not squeezed into a column), and no "loading … from the local cache"
    while nothing is cached."""
    ctx, page = open_tab(browser, app_url, "attention", 390, 844)
    try:
        page.get_by_text("Registers: DINOv2 with and without").click()
        seen = []
        for _ in range(15):
            page.wait_for_timeout(200)
            seen.append(page.locator(".tabitem:visible").first.inner_text())
        assert not any(re.search(r"loading DINOv2|looking for DINOv2", text) for text in seen)
        note = page.get_by_text("Not available here:")
        box = note.bounding_box()
        assert box["width"] >= 250 and box["height"] < 400, box
    finally:
        ctx.close()


def test_pinning_a_patch_does_not_move_the_explorer(browser, app_url):
    """Scrolled so the explorer's bar is at the top of the window (as a teacher projects it): a click pins a patch
    and the server's figures follow, but nothing above the explorer changes its height."""
    ctx, page = open_tab(browser, app_url, "attention")
    try:
        bar = page.locator(f"{EXPLORER} .vx-bar")
        page.evaluate(f"() => window.scrollBy(0, document.querySelector('{EXPLORER} .vx-bar')"
                      ".getBoundingClientRect().top)")
        page.wait_for_timeout(300)
        box = page.locator(f"{EXPLORER} .vx-big canvas").bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.4)
        tops = []
        for _ in range(10):
            page.wait_for_timeout(250)
            tops.append(bar.evaluate("e => e.getBoundingClientRect().top"))
        assert max(abs(t) for t in tops) < 2, tops
        assert "query=" in page.url  # the pin happened (and the link holds it)
    finally:
        ctx.close()


def test_a_model_list_reached_by_tab_closes_when_focus_moves_on(browser, app_url):
    ctx, page = open_tab(browser, app_url, "attention")
    try:
        model = page.get_by_label("model", exact=True)
        model.focus()
        page.wait_for_timeout(300)
        assert page.locator("[role=option]").count() >= 1  # gradio opens it on focus
        page.keyboard.press("Tab")
        page.wait_for_timeout(500)
        assert page.locator("[role=option]:visible").count() == 0
        assert model.input_value() == "vitviz tiny (shapes only)"  # and nothing was picked on the way
    finally:
        ctx.close()


def test_a_link_holds_the_settings_of_what_it_shows_and_no_fallback(browser, app_url):
    ctx, page = open_tab(browser, app_url, "positions")
    try:
        keys = lambda: set(re.findall(r"[?&]([a-z_]+)=", page.url))  # noqa: E731
        assert keys() <= {"tab"}, page.url  # no model of another tab, no stand-in
        page.locator("button[role=tab]", has_text="Attention").click()
        page.wait_for_selector(f"{EXPLORER} .vx-big canvas", state="attached", timeout=120_000)
        idle(page)
        assert keys() <= {"tab", "image"}, page.url  # offline: the stand-in, its 64 px and 4 layers not pinned
        model = page.get_by_label("model", exact=True)
        model.click()
        page.get_by_role("option", name="DINO ViT-S/16: needs download").click()
        idle(page)
        assert "model=DINO+ViT-S%2F16" in page.url  # what a person picks is pinned
        page.locator("button[role=tab]", has_text="Position embeddings").click()
        page.wait_for_function("() => location.search.includes('tab=positions')", timeout=10_000)
        assert "model=" not in page.url, page.url
        page.locator("button[role=tab]", has_text="Attention").click()
        page.wait_for_function("() => location.search.includes('tab=attention')", timeout=10_000)
        assert "model=DINO+ViT-S%2F16" in page.url  # back on the tab: its settings again
    finally:
        ctx.close()


def test_offline_the_reason_for_the_stand_in_comes_first(browser, app_url):
    ctx, page = open_tab(browser, app_url, "attention")
    try:
        first = page.locator("#attention-notice").inner_text().strip()
        assert first.startswith("Offline here: DINO ViT-S/8 cannot be had"), first[:200]
        assert first.index("Offline here") < first.find("has 4 layers") or "has 4 layers" not in first
    finally:
        ctx.close()


def test_the_vit_vs_cnn_short_side_shows_the_size_both_models_run_at(browser, app_url):
    ctx, page = open_tab(browser, app_url, "vitcnn")
    try:
        side = slider(page, "384")
        assert side.input_value() == "64" and side.is_disabled()
        assert "64 px only" in page.locator(".tabitem:visible").first.inner_text()
    finally:
        ctx.close()


def test_the_toy_step_and_its_figure_fit_one_projector_screen(browser, app_url):
    ctx, page = open_tab(browser, app_url, "patches", query="projector=1")
    try:
        page.get_by_text("The 8×8 toy, step by step").click()
        page.wait_for_selector("#toy-step img", timeout=60_000)
        idle(page)
        page.evaluate("() => { const s = [...document.querySelectorAll('input[type=range]')].find(e => e.max == '7');"
                      " const f = document.querySelector('#toy-step img');"
                      " const top = Math.min(s.getBoundingClientRect().top, f.getBoundingClientRect().top);"
                      " window.scrollBy(0, top - 8); }")  # the higher of the two at the top of the window
        page.wait_for_timeout(300)
        fig = page.locator("#toy-step img").bounding_box()
        step = slider(page, "7").bounding_box()
        assert 0 <= step["y"] and step["y"] + step["height"] <= 720 and 0 <= fig["y"] and fig["y"] + fig["height"] <= 720
    finally:
        ctx.close()


def test_on_a_phone_table_headers_keep_their_words_and_names_end_before_the_arrow(browser, app_url):
    ctx, page = open_tab(browser, app_url, "vitcnn", 390, 844)
    try:
        page.get_by_text("Shift the picture: equivariance by construction, or not").click()
        table = page.locator("table").filter(has_text="largest change").first
        table.wait_for(timeout=60_000)
        for th in table.locator("th").all():  # a word is never split: the table scrolls sideways instead
            style = th.evaluate("e => { const s = getComputedStyle(e); return [s.wordBreak, s.overflowWrap]; }")
            assert style == ["normal", "normal"], style
        assert table.evaluate("e => getComputedStyle(e.closest('.vx-table')).overflowX") == "auto"
        model = page.get_by_label("ViT (attention distance)")
        ends = model.evaluate("""e => { const icon = e.closest('.wrap').querySelector('.icon-wrap');
            return [e.getBoundingClientRect().right - parseFloat(getComputedStyle(e).paddingRight),
                    icon.getBoundingClientRect().left]; }""")
        assert ends[0] <= ends[1] + 0.5, ends
    finally:
        ctx.close()
