"""The page remembers and explains itself: permalinks, a cleared bad upload, results brought into view on a phone,
model lists that say what needs a download, the registers button disabled offline with its reason, and the layout
audit itself (it must catch overlapping and small text, or the layout tests prove nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_support import idle, open_tab, sync_api

from vitviz.core import owned
from vitviz.specs import registry

pytestmark = pytest.mark.browser


AUDIT = (Path(__file__).parent / "js" / "audit.js").read_text()
EXPLORER = "#attention-explorer .vx"
STATE = f"""() => {{ const S = document.querySelector('{EXPLORER}').__vx, c = document.querySelector('{EXPLORER} .vx-big figcaption');
  return {{ layer: S.layer, head: S.head, keep: S.keep, query: S.query, pinned: S.pinned, grid: S.p.grid,
           caption: c.textContent, mass: c.dataset.mass, count: c.dataset.count,
           picture: document.querySelector('{EXPLORER} .vx-big canvas').toDataURL() }}; }}"""


@pytest.fixture
def page(browser):
    """A page of its own at 1280×720 (a fresh browser context: no link, storage or cache from another test)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    yield ctx.new_page()
    ctx.close()


def test_a_permalink_restores_the_view_in_a_fresh_browser(browser, app_url):
    """Open a link, change five things, copy the address, open it in a new context: same settings, same picture."""
    first, page = open_tab(browser, app_url, "attention")
    page.locator(".tabitem:visible").first.locator(".gallery-item").nth(2).click()  # 1. the triangle scene
    idle(page)
    page.get_by_label("Projector mode (large text)").check()  # 2. projector mode
    page.locator(EXPLORER).focus()
    page.keyboard.press("[")  # 3. layer 3 of 4
    page.keyboard.press("1")  # 4. head 1
    page.locator(f"{EXPLORER} .vx-keep").evaluate("el => { el.value = 0.8; el.dispatchEvent(new Event('input')); }")  # 5.
    cv = page.locator(f"{EXPLORER} .vx-big canvas")
    box = cv.bounding_box()
    page.mouse.click(box["x"] + 5.5 * box["width"] / 8, box["y"] + 2.5 * box["height"] / 8)  # 6. pin patch (2, 5)
    page.wait_for_function(f"() => document.querySelector('{EXPLORER} .vx-big figcaption').dataset.query === '2,5'")
    page.wait_for_timeout(300)
    before, link = page.evaluate(STATE), page.url
    first.close()
    assert "image=scene_triangle" in link and "projector=1" in link and "tab=attention" in link
    assert before["layer"] == 2 and before["head"] == 1 and before["keep"] == 0.8 and before["query"] == [2, 5]

    fresh = browser.new_context(viewport={"width": 1280, "height": 720})
    page = fresh.new_page()
    page.goto(link)
    page.locator(f"{EXPLORER} .vx-big canvas").wait_for(state="visible", timeout=120_000)
    idle(page)
    page.wait_for_timeout(500)
    after = page.evaluate(STATE)
    try:
        assert page.evaluate("document.body.classList.contains('vx-projector')")
        assert page.get_by_label("Projector mode (large text)").is_checked()
        for key in ("layer", "head", "keep", "query", "pinned", "grid", "caption", "mass", "count"):
            assert after[key] == before[key], key
        assert after["picture"] == before["picture"]  # the same image, drawn the same way
    finally:
        fresh.close()


def test_a_link_to_an_upload_says_the_picture_cannot_travel(page, app_url):
    page.goto(f"{app_url}?tab=classify&image=upload-0123456789ab")
    sync_api.expect(page.locator("#link-notice")).to_contain_text("cannot travel in a link", timeout=60_000)
    page.locator("#classify-maps img").wait_for(state="visible", timeout=120_000)  # the rest still opens


def test_a_bad_upload_is_refused_with_a_message_and_the_picture_before_it_stays(page, app_url, tmp_path):
    junk = tmp_path / "notes.png"
    junk.write_bytes(b"this is not a picture")
    page.goto(f"{app_url}?tab=patches")
    page.locator("#patch-grid img").wait_for(state="visible", timeout=120_000)
    idle(page)
    upload = page.locator(".tabitem:visible").first.locator("input[type=file]").first
    upload.set_input_files(str(junk))
    sync_api.expect(page.locator(".toast-body").first).to_contain_text("not", timeout=30_000)
    idle(page)
    picture = page.locator(".tabitem:visible").first.locator("[data-testid=image]").first
    assert picture.locator("img").count() == 1  # the picture before it, beside its answers: no broken picture
    assert "notes" not in (picture.locator("img").get_attribute("src") or "")
    assert page.locator(".tabitem:visible .error").count() == 0  # and no "Error" badge
    assert "image=cat" in page.url


def test_on_a_phone_the_result_comes_into_view(browser, app_url):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.goto(f"{app_url}?tab=patches")
    page.locator("#patch-grid img").wait_for(state="attached", timeout=120_000)
    idle(page)
    try:
        example = page.locator(".tabitem:visible").first.locator(".gallery-item").nth(2)  # far below the results
        example.scroll_into_view_if_needed()
        example.tap()
        idle(page)
        top = page.locator("#patch-summary").evaluate("el => el.getBoundingClientRect().top")
        assert -2 <= top < 844 / 2, f"the answer is {top:.0f} px from the top of an 844 px screen"
        assert "image=astronaut" in page.url
    finally:
        ctx.close()


def test_model_lists_say_what_needs_a_download_and_registers_explain_themselves(page, app_url):
    """Offline (HF_HUB_OFFLINE=1 in the tests), only the embedded model can be had: the lists say so before a click."""
    owned.reset("models")
    page.goto(f"{app_url}?tab=attention")
    page.locator(f"{EXPLORER} .vx-big canvas").wait_for(state="visible", timeout=120_000)
    idle(page)
    model = page.get_by_label("model", exact=True)
    assert model.input_value() == registry.OFFLINE_KEY  # opens on the model that can answer
    model.click()
    options = page.locator("[role=option]").all_inner_texts()
    assert "DINO ViT-S/8: needs download" in options
    assert [o for o in options if registry.OFFLINE_KEY in o and "needs" not in o], options
    page.keyboard.press("Escape")
    page.get_by_text("Registers: DINOv2 with and without").click()
    button = page.get_by_role("button", name="Compare on this image")
    assert button.is_disabled()
    sync_api.expect(page.get_by_text("Not available here:")).to_be_visible()
    assert "scene_star" in page.url  # a generated scene it knows, not the cat


def test_the_audit_catches_overlapping_small_text_and_text_over_figures(page, app_url):
    """Plant two overlapping 10 px labels, one of them over a figure: the audit must report all three problems."""
    page.goto(f"{app_url}?tab=patches")
    page.locator("#patch-grid img").wait_for(state="visible", timeout=120_000)
    idle(page)
    clean = page.evaluate(AUDIT)
    assert clean["overlaps"] == [] and clean["onFigures"] == []
    page.evaluate("""() => {
      const img = document.querySelector('#patch-grid img'), b = img.getBoundingClientRect();
      const panel = document.querySelector('#patch-grid');
      for (const [t, dx] of [['planted one', 0], ['planted two', 20]]) {
        const s = document.createElement('span');
        s.textContent = t;
        Object.assign(s.style, { position: 'absolute', left: (b.width / 2 + dx) + 'px', top: '60px', fontSize: '10px' });
        panel.style.position = 'relative';
        panel.append(s);
      } }""")
    report = page.evaluate(AUDIT)
    assert ["planted one", "planted two"] == report["overlaps"][0][:2]
    assert ["planted one", "patch-grid"] in report["onFigures"]
    assert {"text": "planted one", "px": 10} in report["texts"]


def test_controls_that_do_not_apply_are_hidden_and_cost_numbers_stay_whole(page, app_url):
    page.goto(f"{app_url}?tab=positions&pe=learned: vitviz tiny, training timeline")
    page.locator("#pe-mosaic img").wait_for(state="visible", timeout=120_000)
    idle(page)
    panel = page.locator(".tabitem:visible").first
    label = lambda text: panel.locator("[data-testid=block-info]", has_text=text).first  # noqa: E731
    assert label("training timeline: checkpoint").is_visible()
    for hidden in ("grid rows", "grid columns", "embedding size D (sinusoidal)"):
        assert label(hidden).count() == 0 or not label(hidden).is_visible(), hidden
    page.goto(f"{app_url}?tab=patches&patch=4")  # the widest cost table: numbers once broke mid-way
    page.locator("#patch-grid img").wait_for(state="visible", timeout=120_000)
    idle(page)
    lines = page.locator("#cost-table td, #cost-table th").evaluate_all(
        "cells => cells.slice(1).map((c) => { const r = document.createRange(); r.selectNodeContents(c);"
        " return [c.textContent.trim(), new Set([...r.getClientRects()].map((q) => Math.round(q.top))).size]; })")
    assert "ViT-B/4" in page.locator("#cost-table").inner_text()
    numbers = [(t, n) for t, n in lines if t[:1].isdigit()]
    assert numbers and all(n == 1 for _, n in numbers), [x for x in numbers if x[1] != 1]


def test_a_tab_without_a_picture_opened_by_its_link_is_answered_once(browser, app_url):
    """The Position-embeddings tab (no picture) opened by its link: computed once, whether its link sets a setting
    (that setting's change asks) or none (the page asks once the link is open); within the page, a step onto the
    tab that shows its answer already asks nothing more."""
    for query, answers in (("tab=positions", 1), ("tab=positions&pe=learned%3A+vitviz+tiny+%28shapes+only%29", 1)):
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        page = ctx.new_page()
        try:
            sent: list[int] = []
            page.on("request", lambda r: sent.append(json.loads(r.post_data or "{}").get("fn_index"))  # queued, or not
                    if r.method == "POST" and ("/queue/join" in r.url or "/run/predict" in r.url) else None)
            page.goto(f"{app_url}?{query}")
            page.locator("#pe-mosaic img").wait_for(state="visible", timeout=120_000)
            idle(page)
            page.wait_for_timeout(500)
            names = dict(page.evaluate("() => window.gradio_config.dependencies.map((d) => [d.id, d.api_name])"))
            asked = [names.get(i) for i in sent if names.get(i) in ("when_opened", "answer_position_embeddings")]
            assert len(asked) == answers, (query, [names.get(i) for i in sent])
            sent.clear()  # the same link again within the page: it shows that answer already
            page.evaluate("(u) => window.vitvizLink.go(u)", f"?{query}")
            page.wait_for_timeout(1500)
            idle(page)
            assert [names.get(i) for i in sent] == ["on_load"], [names.get(i) for i in sent]
        finally:
            ctx.close()


def test_an_upload_past_the_servers_room_for_uploads_is_refused_in_words_on_the_page(page, app_url, tmp_path,
                                                                                    monkeypatch):
    """The uploads' disk budget (``VITVIZ_UPLOADS_MB``; 100 kB here) refuses with a sentence gradio's page shows."""
    import os

    from vitviz.app import uploads

    monkeypatch.setattr(uploads, "UPLOAD_BYTES", 100_000)
    monkeypatch.setattr(uploads, "RECEIVED", uploads.Received())
    large = tmp_path / "large.png"
    large.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(300_000))
    page.goto(f"{app_url}?tab=patches")
    page.locator("#patch-grid img").wait_for(state="visible", timeout=120_000)
    idle(page)
    page.locator(".tabitem:visible").first.locator("input[type=file]").first.set_input_files(str(large))
    sync_api.expect(page.locator(".toast-body").first).to_contain_text("this server keeps at most", timeout=30_000)
