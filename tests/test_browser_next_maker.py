"""The lesson maker on /next (render/web/app/maker.mjs) in Chromium: a teacher adds the views on screen as steps,
reorders them and downloads the lesson, whose Markdown vitviz.tools.lesson.parse reads back with the captions and
links the page showed; a step made on an uploaded picture carries that picture in the file, and opening the file
starts the lesson in the page; axe-core finds no serious or critical violation in the open maker."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from browser_support import ARGS  # noqa: F401  (Chromium is present, or this module is skipped)

from vitviz.app import panels
from vitviz.tools import lesson

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("VITVIZ_SHOTS", "/tmp/shots"))

DRAWN = """(view) => { const p = document.getElementById('panel-' + view);
  const img = p && [...p.querySelectorAll('.vx-figures img')].find((i) => i.offsetParent !== null);
  return !!img && img.complete && img.naturalWidth > 0 && !p.querySelector('[aria-busy=true]'); }"""
"""Whether ``view``'s panel shows a loaded figure and asks nothing."""


def open_next(browser, url: str, query: str, size=(1280, 720)):
    """A fresh context (its own localStorage: an empty lesson) on ``/next?QUERY`` once its main view is drawn,
    with the maker opened: (the context, the page)."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, accept_downloads=True)
    page = ctx.new_page()
    page.goto(f"{url}{panels.ROUTE}?{query}")
    page.wait_for_selector("#vx-maker-toggle", timeout=120_000)
    tab = page.evaluate("() => document.body.dataset.vxTab")
    drawn(page, next(t["views"][0] for t in panels.page_spec()["tabs"] if t["id"] == tab))
    assert page.get_attribute("#vx-maker-toggle", "aria-expanded") == "false"
    assert not page.is_visible("#vx-maker-body")  # collapsed until a teacher opens it
    page.click("#vx-maker-toggle")
    assert page.get_attribute("#vx-maker-toggle", "aria-expanded") == "true" and page.is_visible("#vx-maker-body")
    return ctx, page


def drawn(page, view: str) -> None:
    page.wait_for_function(DRAWN, arg=view, timeout=120_000)


def search(page) -> str:
    return page.evaluate("() => location.search")


def add_step(page, caption: str) -> None:
    """Type ``caption`` and add the view on screen as the lesson's next step."""
    before = page.locator(".vx-maker-steps li").count()
    page.fill("#vx-maker-caption", caption)
    page.click("#vx-maker [data-do=add]")
    page.wait_for_function("(n) => document.querySelectorAll('.vx-maker-steps li').length === n", arg=before + 1)


def shown_captions(page) -> list[str]:
    return page.locator(".vx-maker-steps .vx-step-caption").all_inner_texts()


def download(page, tmp_path) -> Path:
    """The lesson the maker's download button gives, saved under ``tmp_path``."""
    with page.expect_download(timeout=60_000) as got:
        page.click("#vx-maker [data-do=download]")
    path = tmp_path / got.value.suggested_filename
    got.value.save_as(path)
    return path


def own_png(tmp_path) -> Path:
    """A picture no example is (a colour ramp, 160×112) as a PNG file."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:112, 0:160]
    rgb = np.stack([x * 255 // 159, y * 255 // 111, (x + y) * 255 // 270], -1).astype("uint8")
    path = tmp_path / "ramp.png"
    Image.fromarray(rgb).save(path)
    return path


def test_two_views_become_steps_reordered_and_downloaded_as_the_page_showed_them(browser, app_url, tmp_path):
    ctx, page = open_next(browser, app_url, "tab=patches")
    try:
        page.select_option("#panel-patches select[data-key=patch]", "32")
        page.wait_for_function("() => new URLSearchParams(location.search).get('patch') === '32'")
        first = search(page)
        add_step(page, "Big patches: 32 pixels a side.")

        page.click("#vx-tab-attention")
        drawn(page, "attention")
        page.select_option("#panel-attention select[data-key=cmap]", "viridis")
        page.wait_for_function("() => new URLSearchParams(location.search).get('cmap') === 'viridis'")
        second = search(page)
        add_step(page, "Where the class token looks (a [bracket] too).")
        assert shown_captions(page) == ["Big patches: 32 pixels a side.",
                                        "Where the class token looks (a [bracket] too)."]
        assert "attention" in page.inner_text(".vx-maker-steps li:nth-child(2) .vx-step-where")

        page.click(".vx-maker-steps [aria-label='Move down step 1']")
        page.wait_for_function("() => document.querySelector('.vx-maker-steps .vx-step-caption').textContent"
                               ".startsWith('Where')")
        on_screen = shown_captions(page)
        assert on_screen == ["Where the class token looks (a [bracket] too).", "Big patches: 32 pixels a side."]
        assert page.is_disabled(".vx-maker-steps [aria-label='Move up step 1']")
        page.fill("#vx-maker-title", "Patches, then attention")
        page.press("#vx-maker-title", "Tab")  # the title is kept when the box is left
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#vx-maker").screenshot(path=str(SHOTS / "h5-maker-1280.png"))

        path = download(page, tmp_path)
        assert path.name == "patches-then-attention.md"
        got = lesson.parse(path.read_text())
        assert got.title == "Patches, then attention" and got.picture is None
        assert [s.caption for s in got.steps] == on_screen
        assert [s.link for s in got.steps] == [second, first]
        assert got.steps[1].query["patch"] == "32" and got.steps[0].query["tab"] == "attention"
        assert got.steps[0].query["cmap"] == "viridis" and "lesson" not in got.steps[0].query

        page.click(".vx-maker-steps [aria-label='Remove step 2']")  # and removing one
        page.wait_for_function("() => document.querySelectorAll('.vx-maker-steps li').length === 1")
        assert shown_captions(page) == [on_screen[0]]
    finally:
        ctx.close()


def test_a_step_on_an_uploaded_picture_carries_it_and_the_file_opens_the_lesson_on_it(browser, app_url, tmp_path):
    png = own_png(tmp_path)
    ctx, page = open_next(browser, app_url, "tab=patches")
    try:
        page.set_input_files("#panel-patches input[data-upload]", str(png))
        page.wait_for_function("() => /[?&]image=upload-[0-9a-f]+/.test(location.search)", timeout=60_000)
        page.click("#vx-tab-attention")  # the upload follows to Attention: the step is made on it there
        drawn(page, "attention")
        upload = dict(parse_qsl(search(page).lstrip("?")))["image"]
        assert upload.startswith("upload-")
        add_step(page, "Where the class token looks on my picture.")
        assert "your picture" in page.inner_text(".vx-maker-steps li .vx-step-where")

        path = download(page, tmp_path)
        text = path.read_text()
        assert upload not in text  # the server's name for the upload does not travel; the picture does
        got = lesson.parse(text)
        assert got.picture == png.read_bytes()
        assert [s.caption for s in got.steps] == ["Where the class token looks on my picture."]
        assert got.steps[0].query["image"] == lesson.OWN and got.steps[0].query["tab"] == "attention"

    finally:
        ctx.close()
    # another browser (an empty maker) opens the file: the lesson starts in the page, on its own picture
    ctx, other = open_next(browser, app_url, "tab=patches")
    try:
        assert other.locator(".vx-maker-steps li").count() == 0
        other.evaluate("() => { window.vxSamePage = 1; }")
        other.set_input_files("#vx-maker-file", str(path))
        other.wait_for_function("() => new URLSearchParams(location.search).get('lesson')?.startsWith('md:')",
                                timeout=60_000)
        q = dict(parse_qsl(other.evaluate("() => location.search").lstrip("?")))
        assert q["tab"] == "attention" and q["step"] == "1" and q["image"].startswith("upload-")
        text_in_link = base64.urlsafe_b64decode(q["lesson"][3:] + "=" * (-len(q["lesson"][3:]) % 4)).decode()
        assert lesson.parse(text_in_link).steps[0].caption == "Where the class token looks on my picture."
        drawn(other, "attention")
        assert other.evaluate("() => window.vxSamePage") == 1  # started without a reload
        bar = other.inner_text("#vx-page nav.vx-lesson")
        assert "Where the class token looks on my picture." in bar and "step 1 of 1" in bar
        assert other.eval_on_selector("#panel-attention select[data-picture]", "s => s.value") == q["image"]
        assert "Opened" in other.inner_text(".vx-maker-said")
        assert shown_captions(other) == ["Where the class token looks on my picture."]  # in the list to edit
    finally:
        ctx.close()


WCAG = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
        "resultTypes": ["violations"]}


@pytest.mark.parametrize("size,query", [((1280, 720), "tab=attention&projector=1"), ((390, 844), "tab=attention")],
                         ids=["1280x720-projector", "390x844"])
def test_axe_finds_no_serious_or_critical_violation_in_the_open_maker(browser, app_url, size, query):
    axe_sync = pytest.importorskip("axe_playwright_python.sync_playwright")
    ctx, page = open_next(browser, app_url, query, size)
    try:
        add_step(page, "One step.")
        add_step(page, "Another step.")
        page.click(".vx-maker-steps [aria-label='Edit step 2']")  # the editing row too
        page.wait_for_selector(".vx-maker-steps .vx-step-edit")
        page.locator("#vx-maker").scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"h5-maker-{size[0]}x{size[1]}.png"))
        found = [f"{v['id']} ({v['impact']}) at {n['target']}"
                 for v in axe_sync.Axe().run(page, context="#vx-maker", options=WCAG).response["violations"]
                 if v["impact"] in ("serious", "critical") for n in v["nodes"]]
        assert not found, "\n".join(found)
    finally:
        ctx.close()
