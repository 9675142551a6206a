"""The Forward-pass tab, the guided tour and a teacher's lesson in a real Chromium."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from benchmarks.tour import view_of  # what a step is about: its section, its show= figure, else TabSpec.shows
from browser_support import sync_api, ON_FIRST_SCREEN, OPENS_WITH, idle, open_tab

from vitviz.specs import registry
from vitviz.tools import lesson

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_diagram_shows_every_stage_and_opens_by_keyboard(browser, app_url):
    ctx, page = open_tab(browser, app_url, "forward", query="image=scene_star")
    try:
        cards = page.locator("#forward-diagram details")
        names = page.locator("#forward-diagram summary strong").all_inner_texts()
        assert names[:4] == ["image", "patches, flattened", "patch embeddings", "tokens entering block 1"]
        assert names[-2:] == ["head: logits", "softmax: probabilities"] and len(names) == cards.count() == 4 + 4 + 3
        shapes = page.locator("#forward-diagram summary code").all_inner_texts()
        assert shapes[1].replace(" ", "") == "64×192" and shapes[3].replace(" ", "") == "65×96"
        page.locator("#forward-diagram summary").nth(2).focus()
        page.keyboard.press("Enter")  # a stage opens from the keyboard
        assert cards.nth(2).get_attribute("open") is not None
        link = cards.nth(2).locator("a")
        assert "tab=patches" in link.get_attribute("href") and "image=scene_star" in link.get_attribute("href")
        for fig in ("#forward-residual img", "#forward-updates img", "#forward-lens img", "#forward-lens-map img"):
            assert page.locator(fig).count() == 1, fig
    finally:
        ctx.close()


def test_a_cards_link_opens_this_models_own_view_within_the_page(browser, app_url):
    """Card 4 ("tokens entering block 1") opens the Position embeddings tab on this model's own learned table, and
    card 3 ("patch embeddings") the Patches tab with this model's filters open; no reload (a marker set on window
    stays), and the browser's Back returns to the forward pass."""
    ctx, page = open_tab(browser, app_url, "forward", query="image=scene_star")
    try:
        page.evaluate("() => { window.__stayed = 'this page'; }")
        model = page.evaluate("() => new URL(location.href).searchParams.get('fp_model')") or registry.OFFLINE_KEY
        cards = page.locator("#forward-diagram details")
        cards.nth(3).locator("summary").click()
        cards.nth(3).locator("a").click()
        page.wait_for_function("() => new URL(location.href).searchParams.get('tab') === 'positions'", timeout=30_000)
        page.wait_for_selector(OPENS_WITH["positions"], state="attached", timeout=120_000)
        idle(page)
        assert parse_qs(urlparse(page.url).query)["pe"] == [f"learned: {model}"]
        chosen = page.locator(".tabitem:visible input[role=combobox]").first.input_value()
        assert chosen == f"learned: {model}"
        page.go_back()  # the history within the page: back on the forward pass
        page.wait_for_function("() => new URL(location.href).searchParams.get('tab') === 'forward'", timeout=30_000)
        page.wait_for_selector(OPENS_WITH["forward"], state="visible", timeout=120_000)
        idle(page)
        cards.nth(2).locator("summary").click()
        cards.nth(2).locator("a").click()
        page.wait_for_function(
            "() => document.getElementById('patch_filters-box')?.querySelector(':scope > .label-wrap')"
            "?.classList.contains('open')", timeout=120_000)
        idle(page)  # the address settles as the tab's picture is set
        page.wait_for_function("() => new URL(location.href).searchParams.get('image') === 'scene_star'",
                               timeout=30_000)
        q = parse_qs(urlparse(page.url).query)
        assert q["tab"] == ["patches"] and q["open"] == ["patch_filters"] and q["filters"] == [model]
        assert page.evaluate("() => window.__stayed") == "this page"  # no reload on the way
    finally:
        ctx.close()


def test_the_tour_goes_through_every_step_and_back_and_a_link_opens_a_step(browser, app_url):
    tour = lesson.tour()
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(app_url + "?tab=forward&image=scene_star")
        page.locator("#start-tour").wait_for(timeout=120_000)
        page.locator("#start-tour").click()  # the tour's first step: a page of its own (the button is a link)
        for k, step in enumerate(tour.steps, 1):
            page.wait_for_function(f"() => document.querySelector('#lesson-bar')?.innerText.includes('step {k} of "
                                   f"{len(tour.steps)}')", timeout=120_000)
            if k == 1:
                page.evaluate("() => { window.__stayed = 'this page'; }")  # gone if a later step reloads the page
            tab = step.query["tab"]
            page.wait_for_selector(OPENS_WITH[tab], state="attached", timeout=120_000)  # its view is computed
            page.wait_for_function("(t) => new URL(location.href).searchParams.get('tab') === t", arg=tab,
                                   timeout=30_000)  # the address settles on the step's tab as the page opens
            q = parse_qs(urlparse(page.url).query)
            assert q["lesson"] == ["tour"] and q["step"] == [str(k)] and q["tab"] == [tab]
            assert step.caption[:40] in page.locator("#lesson-bar").inner_text()
            if "open" in step.query:  # the step's section is opened
                page.wait_for_function("(s) => document.getElementById(s + '-box')?.querySelector(':scope > "
                                       ".label-wrap')?.classList.contains('open')", arg=step.query["open"],
                                       timeout=60_000)
            # and what the step is about (its section's figure, else its tab's) on the first screen, under the bar
            page.wait_for_function(ON_FIRST_SCREEN, arg=view_of(step), timeout=60_000)
            if k < len(tour.steps):
                page.locator("#lesson-bar a", has_text="Next").click()
        assert page.evaluate("() => window.__stayed") == "this page"  # ten steps, no reload
        assert page.evaluate("() => window.vitvizLink.moves") >= len(tour.steps) - 1
        page.locator("#lesson-bar a", has_text="Back").click()  # back one step
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 9 of')",
                               timeout=120_000)
        page.goto(app_url + "?" + tour.steps[5].link.lstrip("?") + "&lesson=tour&step=6")  # a link opens step 6
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 6 of')",
                               timeout=120_000)
        page.wait_for_selector(OPENS_WITH["attention"], state="attached", timeout=120_000)
        idle(page)
        page.keyboard.press("ArrowRight")  # the arrow keys move through the lesson
        page.wait_for_url("**step=7**", timeout=60_000)
    finally:
        ctx.close()


def test_a_lesson_link_that_names_only_its_step_opens_that_steps_view(browser, app_url):
    """``?lesson=tour&step=7``, as a teacher writes it on the board: the bar's caption and the view agree (the step's
    own link replaces the address; no history entry is added)."""
    step = lesson.tour().steps[6]
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(app_url + "?lesson=tour&step=7&projector=1")
        entries = page.evaluate("() => history.length")  # (the new page's blank entry and this one)
        page.wait_for_function("(t) => new URL(location.href).searchParams.get('tab') === t", arg=step.query["tab"],
                               timeout=120_000)
        q = parse_qs(urlparse(page.url).query)
        said = step.query | {"lesson": "tour", "step": "7", "projector": "1"}
        assert {k: q[k][0] for k in ("tab", "image", "open", "lesson", "step", "projector")} == \
            {k: said[k] for k in ("tab", "image", "open", "lesson", "step", "projector")}
        page.wait_for_function(f"() => document.querySelector('[role=tab][aria-selected=true]')?.dataset.tabId === "
                               f"'{step.query['tab']}'", timeout=60_000)
        page.wait_for_function("(s) => document.querySelector('#' + s + '-box > .label-wrap')?.classList"
                               ".contains('open')", arg=step.query["open"], timeout=120_000)
        assert step.caption[:40] in page.locator("#lesson-bar").inner_text()
        assert page.evaluate("() => history.length") == entries  # replaced, not added
    finally:
        ctx.close()


def test_a_lesson_made_in_the_page_round_trips_through_its_file(browser, app_url, tmp_path):
    ctx, page = open_tab(browser, app_url, "patches", query="image=cat&patch=32")
    try:
        page.get_by_text("Make a lesson from these views").click()
        page.locator("#lesson-caption").fill("Big patches: few tokens.")
        page.locator("#lesson-add").click()
        page.goto(app_url + "?tab=positions")
        page.wait_for_selector(OPENS_WITH["positions"], state="attached", timeout=120_000)
        page.get_by_text("Make a lesson from these views").click()
        page.locator("#lesson-caption").fill("The learned position embeddings.")
        page.locator("#lesson-add").click()
        assert page.locator("#lesson-steps .vx-step-caption").all_inner_texts() == [
            "Big patches: few tokens.", "The learned position embeddings."]
        with page.expect_download() as got:
            page.locator("#lesson-download").click()
        path = tmp_path / "lesson.md"
        got.value.save_as(path)
        made = lesson.parse(path.read_text())
        assert [s.caption for s in made.steps] == ["Big patches: few tokens.", "The learned position embeddings."]
        assert made.steps[0].query["patch"] == "32" and made.steps[1].query["tab"] == "positions"
        page.locator("#lesson-file").set_input_files(str(path))  # the file opens as a lesson
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 1 of 2')",
                               timeout=120_000)
        page.wait_for_selector(OPENS_WITH["patches"], state="attached", timeout=120_000)
        assert "Big patches: few tokens." in page.locator("#lesson-bar").inner_text()
        assert parse_qs(urlparse(page.url).query)["patch"] == ["32"]
    finally:
        ctx.close()


def _upload(page, path) -> str:
    """Upload ``path`` in the open tab; the name the link gives it (upload-<fingerprint>)."""
    page.locator(".tabitem:visible input[type=file]").first.set_input_files(str(path))
    page.wait_for_function("() => location.search.includes('image=upload-')", timeout=60_000)
    idle(page)
    return parse_qs(urlparse(page.url).query)["image"][0]


def _add_step(page, caption: str) -> None:
    maker = page.locator("#lesson-maker")
    if not maker.is_visible():
        page.get_by_text("Make a lesson from these views").click()
    page.locator("#lesson-caption").fill(caption)
    page.locator("#lesson-add").click()


def test_the_lesson_maker_holds_one_own_picture_and_refuses_an_over_long_lesson_in_words(browser, app_url, tmp_path):
    """A step made on an upload is kept (the lesson will carry the picture); a step on a second, different upload is
    refused, said. A lesson file over the bound once went to about:blank#blocked, and a link over ~120,000
    characters reset the connection: both refused in words, the page stays."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(3)
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    Image.fromarray((rng.random((90, 120, 3)) * 255).astype(np.uint8)).save(one)
    Image.fromarray((rng.random((90, 120, 3)) * 255).astype(np.uint8)).save(two)
    ctx, page = open_tab(browser, app_url, "patches", query="patch=32")
    try:
        _upload(page, one)
        _add_step(page, "My own photo.")
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("It shows your picture")
        assert page.locator("#lesson-steps li").count() == 1
        assert "your picture" in page.locator("#lesson-steps li").first.inner_text()
        _upload(page, two)
        _add_step(page, "Another photo.")
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("one picture of its own")
        assert page.locator("#lesson-steps li").count() == 1
        big = tmp_path / "big.md"
        big.write_text("# Big\n1. [" + "a" * (lesson.MAX_FILE_BYTES + 10) + "](?tab=patches)\n")
        page.locator("#lesson-file").set_input_files(str(big))
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("holds at most 32 KiB of text")
        long = tmp_path / "long.md"  # under the file bound, over the link's
        long.write_text("# Long\n" + "".join(f"{i}. [{'b' * 500}](?tab=patches&patch=16)\n" for i in range(1, 21)))
        page.locator("#lesson-file").set_input_files(str(long))
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("a lesson link holds at most 8,000")
        assert "lesson=" not in page.url and page.url.startswith(app_url)
    finally:
        ctx.close()


def test_the_pages_lesson_reader_refuses_what_the_bar_would_refuse_in_the_libraries_words(browser, app_url, tmp_path):
    """issue 68 item 15: the reader said "Opened steps41.md: 41 steps" and the bar then "at most 40 steps" (the same for
    a 601-character caption, an SVG picture line, a javascript: step). The reader runs the library's one check (its
    twin, lib/lessons.mjs) and says lesson.parse's message itself; nothing opens, no picture is sent."""
    step = "1. [Cut into patches.](?tab=patches&patch=16)"
    cases = {"steps41.md": "# Many\n" + "".join(f"{i}. [A step.](?tab=patches&step={i})\n" for i in range(1, 42)),
             "caption.md": "# Long\n1. [" + "c" * 601 + "](?tab=patches)\n",
             "svg.md": "# Drawn\n\n![p](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+)\n" + step + "\n",
             "prank.md": "# Prank\n1. [Click me](javascript:alert(document.cookie))\n"}
    ctx, page = open_tab(browser, app_url, "patches")
    sent = []
    page.on("request", lambda r: sent.append(r.url) if "keep_picture" in (r.post_data or "") else None)
    try:
        page.get_by_text("Make a lesson from these views").click()
        for name, text in cases.items():
            path = tmp_path / name
            path.write_text(text)
            with pytest.raises(ValueError) as err:
                lesson.parse(text)
            page.locator("#lesson-file").set_input_files(str(path))
            sync_api.expect(page.locator("#lesson-said")).to_have_text(f"{name}: {err.value}")
            # the page was opened without a lesson, and a refused file opens none: no lesson bar, no step in one
            assert "lesson=" not in page.url and page.locator("#lesson-bar").count() == 0
            assert page.locator(".vx-lesson-where").count() == 0
            assert "Opened" not in page.locator("#lesson-said").inner_text()
        assert not sent
    finally:
        ctx.close()


def test_a_lesson_with_a_teachers_own_picture_is_made_edited_reordered_carried_and_printed(browser, app_url,
                                                                                               tmp_path):
    """The whole path of a teacher's lesson: steps made on her upload and on an example, one caption edited, one
    step moved and one removed; downloaded (the file carries her picture), opened from the file in a fresh browser
    (the picture goes to the server and every step shows it), opened from its link in another fresh browser, and
    printed by ``vitviz lesson`` with a QR code per step that reads back as the step's absolute link."""
    import re
    from pathlib import Path

    import numpy as np
    import zxingcpp
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    from vitviz.core import images
    from vitviz.tools import cli

    y, x = np.mgrid[:180, :240]
    own = tmp_path / "garden.png"
    Image.fromarray(np.stack([x % 256, y * 255 // 180, (x * y) % 256], -1).astype(np.uint8)).save(own)
    ctx, page = open_tab(browser, app_url, "patches", query="patch=32")
    try:
        name = _upload(page, own)
        _add_step(page, "Your garden, cut into patches.")
        page.goto(app_url + "?tab=positions")
        page.wait_for_selector(OPENS_WITH["positions"], state="attached", timeout=120_000)
        _add_step(page, "Positions (to be edited).")
        page.goto(app_url + f"?tab=forward&image={name}&fp_layer=2&open=lens")  # the server still holds it
        page.wait_for_selector(OPENS_WITH["forward"], state="attached", timeout=120_000)
        idle(page)
        assert page.locator("#link-notice").is_hidden()  # no "pictures cannot travel": it opened on the upload
        _add_step(page, "How the answer forms on your garden.")
        _add_step(page, "A step to remove.")
        steps = page.locator("#lesson-steps li")
        assert steps.count() == 4
        page.get_by_role("button", name="Edit step 2").click()
        page.get_by_role("textbox", name="caption of step 2").fill("Where each patch sits: the position table.")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Move up step 3").click()
        page.get_by_role("button", name="Remove step 4").click()
        page.locator("#lesson-title").fill("My garden through a ViT")
        page.locator("#lesson-title").press("Tab")
        assert page.locator("#lesson-steps .vx-step-caption").all_inner_texts() == [
            "Your garden, cut into patches.", "How the answer forms on your garden.",
            "Where each patch sits: the position table."]
        with page.expect_download() as got:
            page.locator("#lesson-download").click()
        path = tmp_path / "garden.md"
        got.value.save_as(path)
        assert got.value.suggested_filename == "my-garden-through-a-vit.md"
        with page.expect_download(timeout=240_000) as printed:  # printed by the server, links from this page
            page.locator("#lesson-handout").click()
        pdf = Path(printed.value.path()).read_bytes()
        assert printed.value.suggested_filename == "my-garden-through-a-vit.pdf"
        assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", pdf)) == 3
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("a page per step")
    finally:
        ctx.close()
    made = lesson.parse(path.read_text())
    assert made.title == "My garden through a ViT" and len(made.steps) == 3
    assert [s.query.get("image") for s in made.steps] == ["lesson", "lesson", None]
    assert made.steps[1].query["open"] == "lens" and made.steps[0].query["patch"] == "32"
    assert np.array_equal(images.load_rgb(made.picture), images.load_rgb(own))  # her picture, pixel for pixel

    ctx, page = open_tab(browser, app_url, "patches")  # another browser: nothing in its storage
    try:
        page.get_by_text("Make a lesson from these views").click()
        page.locator("#lesson-file").set_input_files(str(path))
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 1 of 3')",
                               timeout=120_000)
        page.wait_for_selector(OPENS_WITH["patches"], state="attached", timeout=120_000)
        idle(page)
        assert parse_qs(urlparse(page.url).query)["image"] == [name]  # her picture, as the server names it
        assert page.locator("#link-notice").is_hidden()
        assert page.locator("#lesson-steps li").count() == 3  # and in the maker, to edit
        page.locator("#lesson-bar a", has_text="Next").click()
        page.wait_for_url("**step=2**", timeout=60_000)
        page.wait_for_selector(OPENS_WITH["forward"], state="attached", timeout=120_000)
        idle(page)
        assert parse_qs(urlparse(page.url).query)["image"] == [name]
        link = page.url
    finally:
        ctx.close()
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})  # its link, in a third browser
    try:
        page = ctx.new_page()
        page.goto(link)
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 2 of 3')",
                               timeout=120_000)
        page.wait_for_selector(OPENS_WITH["forward"], state="attached", timeout=120_000)
        idle(page)
        assert page.locator("#link-notice").is_hidden()
    finally:
        ctx.close()

    out = tmp_path / "garden.pdf"
    assert cli.main(["lesson", str(path), "--out", str(out), "--base-url", app_url]) == 0
    assert len(re.findall(rb"/Type\s*/Page[^s]", out.read_bytes())) == 3
    for i in (1, 2, 3):
        fig, _ = lesson.page(made, i, app_url)
        fig.set_dpi(150)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        pixels = np.asarray(canvas.buffer_rgba())[..., :3].mean(-1).astype(np.uint8)
        assert [r.text for r in zxingcpp.read_barcodes(pixels)] == [app_url + made.steps[i - 1].link]


def test_the_screen_the_link_and_the_download_hold_the_same_settings(browser, app_url):
    """A colormap picked redraws the figures; the download's params.json holds what the screen shows (the layer
    and short side as used), the link what was asked."""
    import json
    import zipfile

    ctx, page = open_tab(browser, app_url, "forward", query="image=scene_star&fp_layer=3")
    try:
        before = page.locator("#forward-residual img").get_attribute("src")
        page.locator("input[type=radio][value=magma]").first.check()
        page.wait_for_function("(b) => document.querySelector('#forward-residual img')?.src !== b", arg=before,
                               timeout=60_000)  # the figures follow the colormap
        idle(page)
        page.get_by_role("button", name="Download this view (figures as PNG and PDF, numbers, settings)") \
            .locator("visible=true").first.click()
        page.wait_for_selector("#forward-bundle a", timeout=120_000)
        with page.expect_download() as got:
            page.locator("#forward-bundle a").first.click()
        params = json.loads(zipfile.ZipFile(got.value.path()).read("params.json"))
        shown_side = page.locator("#forward-diagram summary code").first.inner_text().split("×")[-1].strip()
        assert params["cmap"] == "magma" and params["layer"] == 3 and str(params["resolution"]) == shown_side
        q = parse_qs(urlparse(page.url).query)
        assert q["fp_cmap"] == ["magma"] and q["fp_layer"] == ["3"] and q["image"] == ["scene_star"]
    finally:
        ctx.close()


def test_a_lesson_step_shows_what_its_link_says_whatever_the_step_before_set(browser, app_url):
    """Steps move within the page (no reload), and a setting the next step's link leaves out is its default there,
    not what the step before set; the browser's Back returns to the step before, with its setting."""
    from vitviz.app.lessons import encode
    from vitviz.tools.lesson import parse

    text = ("# Two steps\n\n1. [Big patches.](?tab=patches&image=scene_star&patch=32)\n"
            "2. [The same picture, the usual patches.](?tab=patches&image=scene_star)\n")
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    patch = ("() => [...document.querySelectorAll('.tabitem input[type=radio]:checked')].filter((e) => e.offsetParent)"
             ".map((e) => e.value).find((v) => ['4', '8', '14', '16', '32'].includes(v))")
    try:
        page.goto(app_url + "?tab=patches&image=scene_star&patch=32&lesson=" + encode(parse(text)) + "&step=1")
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 1 of 2')",
                               timeout=120_000)
        page.wait_for_function(patch + " === '32'", timeout=60_000)
        page.evaluate("() => { window.__stayed = 'this page'; }")
        page.locator("#lesson-bar a", has_text="Next").click()
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 2 of 2')",
                               timeout=60_000)
        page.wait_for_function(patch + " === '16'", timeout=60_000)
        assert "patch=" not in page.evaluate("() => location.search")
        assert page.evaluate("() => window.__stayed") == "this page"
        page.go_back()
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 1 of 2')",
                               timeout=60_000)
        page.wait_for_function(patch + " === '32'", timeout=60_000)
        assert page.evaluate("() => window.__stayed") == "this page"
    finally:
        ctx.close()


def test_a_step_that_leaves_the_model_out_shows_the_model_that_answers_not_the_one_a_step_before_chose(browser,
                                                                                                      app_url):
    """Offline, step 1 names a hub model (the view answers with the stand-in and says so); step 2 leaves the model
    out: its list shows the stand-in that answers, not step 1's choice nor the unavailable default."""
    from urllib.parse import quote_plus

    from vitviz.app.lessons import encode
    from vitviz.specs import views as declared
    from vitviz.tools.lesson import parse

    vit = declared.RECEPTIVE_FIELD["vit"]
    asked = next(k for k in vit.options() if k not in (registry.OFFLINE_KEY, vit.default))
    text = (f"# Two steps\n\n1. [A hub model.](?tab=vitcnn&image=scene_star&{vit.link}={quote_plus(asked)})\n"
            "2. [The usual model.](?tab=vitcnn&image=scene_star)\n")
    shown = ("() => [...document.querySelectorAll('.tabitem input[role=combobox]')].filter((e) => e.offsetParent)"
             ".map((e) => e.value)")
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(app_url + f"?tab=vitcnn&image=scene_star&{vit.link}={quote_plus(asked)}&lesson="
                  + encode(parse(text)) + "&step=1")
        page.wait_for_selector(OPENS_WITH["vitcnn"], state="attached", timeout=120_000)
        idle(page)
        assert any(v.startswith(asked) for v in page.evaluate(shown)), page.evaluate(shown)
        page.locator("#lesson-bar a", has_text="Next").click()
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 2 of 2')",
                               timeout=60_000)
        idle(page)
        values = page.evaluate(shown)
        assert any(v.startswith(registry.OFFLINE_KEY) for v in values), values
        assert not any(v.startswith(asked) or v.startswith(vit.default) for v in values), values
    finally:
        ctx.close()


@pytest.mark.parametrize("k", [2, 3, 7, 9])
@pytest.mark.parametrize("screen", ["projector", "phone"])
def test_a_steps_own_link_opens_with_its_figure_on_the_first_screen(browser, app_url, k, screen):
    """A tour step's own link opened in a new page, projected (1280×720, large text) or on a phone: what the step is
    about is drawn and in view under the lesson's bar. Step 2 is a tab's figure far down the page, step 3 a section
    whose figure comes after its explanation and controls, step 7 a section whose panel could open before the page's
    picture was set (it then drew nothing, as no later event asked again), step 9 a figure the step names
    (``show=top5``: the probabilities its caption speaks of, above the tab's maps)."""
    step = lesson.tour().steps[k - 1]
    size, mode = ((1280, 720), "&projector=1") if screen == "projector" else ((390, 844), "")
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = ctx.new_page()
    try:
        page.goto(app_url + "?" + step.link.lstrip("?") + f"&lesson=tour&step={k}{mode}")
        page.wait_for_function(ON_FIRST_SCREEN, arg=view_of(step), timeout=120_000)
        assert step.caption[:40] in page.locator("#lesson-bar").inner_text()
        if k == 7:  # the browser's own view of the head, drawn from the page's picture
            assert page.locator("#inside-head-view canvas").first.evaluate("(c) => c.width") > 0
    finally:
        ctx.close()
