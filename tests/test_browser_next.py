"""The page at /next (issue 69) against the ten defects two students and a teacher met on the page at /: each is a
check of the new page in Chromium, at 1280×720 in projector mode and at 390×844 (a phone). Also axe-core on every
tab of /next at both sizes: no serious or critical violation."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import Counter
from urllib.parse import parse_qs, urlsplit

import pytest
from browser_support import ARGS  # noqa: F401  (Chromium is present, or this module is skipped)

from vitviz.app import panels
from vitviz.views import RECORDS

pytestmark = pytest.mark.browser

SPEC = panels.page_spec()
TABS = [t["id"] for t in SPEC["tabs"]]
MAIN = {t["id"]: t["views"][0] for t in SPEC["tabs"]}
WIDE, PHONE = (1280, 720), (390, 844)

STORE = """async () => { const l = document.querySelector('link[data-vx-page]');
  const m = await import(l.href.replace('page.css', 'main.mjs')); return m.whenStore(); }"""
"""The page's one store (the same module URL the panels import: one copy of it)."""
STATE = f"async () => JSON.parse(JSON.stringify((await ({STORE})()).get()))"
"""The store's state now."""

FIRST_FIGURE = """(p) => { const open = new URLSearchParams(location.search).get('open');
  const part = (open && p.querySelector('[data-section="' + open + '"]')) || p;
  return [...part.querySelectorAll('.vx-out img, .vx-out canvas, .vx-out .vx-diagram, .vx-part img')]
    .find((i) => i.offsetParent !== null && i.getBoundingClientRect().height > 40); }"""
"""A panel's first figure on screen (in the section the link opens, when it opens one of the panel's parts): a
picture from the server, a drawing the browser made (a canvas), or the forward pass's diagram of stages (what the
tour's first step shows, as on the page at /)."""
DRAWN = f"""(view) => {{ const p = document.getElementById('panel-' + view), img = p && ({FIRST_FIGURE})(p);
  return !!img && (img.tagName !== 'IMG' || (img.complete && img.naturalWidth > 0))
    && !p.querySelector('[aria-busy=true]') && p.getAttribute('aria-busy') !== 'true'; }}"""
"""Whether ``view``'s panel shows a loaded figure and asks nothing."""


def query_of(page) -> dict[str, str]:
    """The page's address as {key: value}."""
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query, keep_blank_values=True).items()}


def open_next(browser, url: str, query: str = "", size=WIDE, view: str | None = None, **context):
    """A fresh context at ``size`` on ``/next?QUERY``, once ``view`` (the opened tab's main view when None) has drawn
    its figure: (the context, to close; the page)."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, **context)
    page = ctx.new_page()
    page.goto(f"{url}{panels.ROUTE}" + (f"?{query}" if query else ""))
    page.wait_for_selector("#vx-page .vx-tabs [role=tab]", timeout=120_000)
    tab = page.evaluate("() => document.body.dataset.vxTab")
    drawn(page, view or MAIN[tab])
    return ctx, page


def drawn(page, view: str, timeout: int = 120_000) -> None:
    """Wait until ``view``'s panel shows its figure."""
    page.wait_for_function(DRAWN, arg=view, timeout=timeout)


def step_view(link: str) -> str:
    """The view a lesson step's link shows: its open section when its tab has it, else the tab's main view."""
    q = {k: v[-1] for k, v in parse_qs(link.lstrip("?")).items()}
    tab = q.get("tab", SPEC["first"])
    views = next(t["views"] for t in SPEC["tabs"] if t["id"] == tab)
    return q["open"] if q.get("open") in views else views[0]


def own_png(tmp_path) -> str:
    """A picture no example is (a diagonal colour ramp, 180×120), saved as PNG: its path."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:120, 0:180]
    rgb = np.stack([x * 255 // 179, y * 255 // 119, (x + y) * 255 // 298], -1).astype("uint8")
    path = tmp_path / "ramp.png"
    Image.fromarray(rgb).save(path)
    return str(path)


# ---- 1. the page's picture follows across tabs and through a lesson's steps --------------------------------------

def md_lesson(steps: list[tuple[str, str]]) -> str:
    """A teacher's lesson as a link's ``lesson=`` value (``md:`` and its Markdown in base64url)."""
    import base64

    text = "# My rocket\n\n" + "".join(f"{k}. [{c}]({link})\n" for k, (c, link) in enumerate(steps, 1))
    return "md:" + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_an_uploaded_picture_follows_to_every_tab_and_through_a_lessons_steps(browser, app_url, tmp_path):
    lesson = md_lesson([("The patches of my picture.", "?tab=patches"),
                        ("Where the class token looks on my picture.", "?tab=attention&layer=2")])
    ctx, page = open_next(browser, app_url, f"tab=patches&lesson={lesson}&step=1")
    try:
        page.set_input_files("#panel-patches input[data-upload]", own_png(tmp_path))
        page.wait_for_function("() => /[?&]image=upload-[0-9a-f]+/.test(location.search)", timeout=60_000)
        name = query_of(page)["image"]
        drawn(page, "patches")
        assert page.eval_on_selector("#panel-patches select[data-picture]", "s => s.value") == name

        page.click("#vx-tab-attention")
        drawn(page, "attention")
        assert query_of(page)["image"] == name and query_of(page)["tab"] == "attention"
        assert page.eval_on_selector("#panel-attention select[data-picture]", "s => s.value") == name

        page.click("#vx-tab-patches")  # back to the lesson's step 1, then its Next (a step naming no picture)
        page.click("nav.vx-lesson [data-go=next]")
        page.wait_for_function("() => new URLSearchParams(location.search).get('step') === '2'")
        drawn(page, "attention")
        got = query_of(page)
        assert got["image"] == name and got["tab"] == "attention" and got.get("layer") == "2", got
        assert page.eval_on_selector("#panel-attention select[data-picture]", "s => s.value") == name
    finally:
        ctx.close()


# ---- 2. a step showing its lesson's own picture, opened without its lesson ---------------------------------------

@pytest.mark.parametrize("size", [WIDE, PHONE], ids=["1280x720", "390x844"])
def test_an_own_picture_step_without_its_lesson_says_so_and_offers_the_lesson(browser, app_url, size):
    ctx, page = open_next(browser, app_url, "tab=attention&image=lesson&layer=3", size)
    try:
        said = page.locator("#vx-page [role=status]:visible, #vx-page nav.vx-lesson:visible").filter(
            has_text=re.compile("own picture", re.I))
        assert said.count() >= 1, page.locator("#vx-page").inner_text()
        offer = said.first.locator("a[href]")
        assert offer.count() >= 1 and "lesson=" in offer.first.get_attribute("href")
        assert "lesson" not in page.eval_on_selector("#panel-attention select[data-picture]", "s => s.value")
        assert page.locator("#panel-attention .vx-error").count() == 0  # the view is shown, on the page's picture
    finally:
        ctx.close()


# ---- 3. projector mode survives every way into the tour, in the same browser tab --------------------------------

CAPTION_PX = "() => parseFloat(getComputedStyle(document.querySelector('nav.vx-lesson .vx-caption')).fontSize)"


def test_projector_mode_survives_the_tour_and_its_link_stays_in_the_tab(browser, app_url):
    ctx, page = open_next(browser, app_url, "projector=1")
    try:
        link = page.locator("#vx-page a.vx-tour")
        assert "projector=1" in link.get_attribute("href") and link.get_attribute("target") in (None, "_self")
        page.evaluate("() => { window.vxSamePage = 1; }")
        link.click()
        page.wait_for_selector("nav.vx-lesson:not([hidden])")
        for go in (None, "next", "next", "back"):
            if go:
                page.click(f"nav.vx-lesson [data-go={go}]")
                page.wait_for_timeout(300)
            assert len(ctx.pages) == 1 and page.evaluate("() => window.vxSamePage") == 1  # no reload, no new tab
            assert page.evaluate("() => document.body.classList.contains('vx-projector')")
            assert query_of(page).get("projector") == "1" and query_of(page).get("lesson") == "tour"
            assert page.is_checked("#vx-page [data-mode=projector]")
            assert page.evaluate(CAPTION_PX) >= 20
        assert query_of(page)["step"] == "2"
    finally:
        ctx.close()


# ---- 4. a phone opens the page at its top --------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "tab=attention"], ids=["first-tab", "attention"])
def test_a_phone_opens_the_page_at_its_top(browser, app_url, query):
    ctx, page = open_next(browser, app_url, query, PHONE)
    try:
        page.wait_for_timeout(500)
        assert page.evaluate("() => scrollY") == 0
        top = page.evaluate("() => [document.querySelector('#vx-page h1'), document.querySelector('a.vx-tour'),"
                            " document.querySelector('[role=tab]')].map((e) => e.getBoundingClientRect().bottom)")
        assert all(0 < b <= 844 for b in top), top
    finally:
        ctx.close()


# ---- 5. a section opened by hand is in the address; predict's marks too ----------------------------------------

def test_a_section_opened_by_hand_is_in_the_address_and_reopens_after_a_reload(browser, app_url):
    ctx, page = open_next(browser, app_url, "tab=attention")
    try:
        page.click("#panel-rollout .vx-section-head button")
        page.wait_for_function("() => new URLSearchParams(location.search).get('open') === 'rollout'")
        drawn(page, "rollout")
        page.reload()
        drawn(page, "rollout")
        assert query_of(page)["open"] == "rollout"
        assert page.get_attribute("#panel-rollout .vx-section-head button", "aria-expanded") == "true"
        assert page.is_visible("#panel-rollout .vx-body")
    finally:
        ctx.close()


def test_predicts_marks_are_in_the_address_and_reopen_with_its_section_open(browser, app_url):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(f"{app_url}{panels.ROUTE}?tab=classify&open=predict")
        box = page.locator("#panel-predict input[data-key=tm_patches]")
        box.wait_for(timeout=120_000)
        box.fill("1,1;2,3")
        box.dispatch_event("change")
        page.wait_for_function("() => new URLSearchParams(location.search).get('tm_patches') === '1,1;2,3'")
        page.reload()
        page.locator("#panel-predict input[data-key=tm_patches]").wait_for(timeout=120_000)
        assert query_of(page)["open"] == "predict" and query_of(page)["tm_patches"] == "1,1;2,3"
        assert page.input_value("#panel-predict input[data-key=tm_patches]") == "1,1;2,3"
        assert page.is_visible("#panel-predict .vx-body")
    finally:
        ctx.close()


# ---- 6/7. every tour step: its figure under the lesson bar on the first screen; its caption readable on a phone --

TOUR = SPEC["lessons"]["tour"]["steps"]

FIGURE_ON_SCREEN = f"""(view) => {{ const bar = document.querySelector('nav.vx-lesson').getBoundingClientRect();
  const fig = ({FIRST_FIGURE})(document.getElementById('panel-' + view));
  // the diagram of stages is a list a student reads down: its first three stages on the first screen
  const cards = fig.classList.contains('vx-diagram') ? fig.querySelectorAll('li') : [];
  const r = {{ top: fig.getBoundingClientRect().top,
              bottom: (cards.length ? cards[Math.min(2, cards.length - 1)] : fig).getBoundingClientRect().bottom }};
  return {{ bar: bar.height, barTop: bar.top, barBottom: bar.bottom, top: r.top, bottom: r.bottom, height: innerHeight }}; }}"""

CAPTION = """() => { const c = document.querySelector('nav.vx-lesson .vx-caption'), s = getComputedStyle(c);
  const r = c.getBoundingClientRect();
  return { px: parseFloat(s.fontSize), fits: c.scrollHeight <= c.clientHeight + 1,
           scrolls: ['auto', 'scroll'].includes(s.overflowY) && c.clientHeight >= 2.5 * parseFloat(s.lineHeight || s.fontSize),
           top: r.top, bottom: r.bottom, height: innerHeight }; }"""


def walk_the_tour(page):
    """Yield (k, the step's view, whether it drew a figure) for each step of the tour, from its link on the page, by Next (no reload)."""
    page.click("#vx-page a.vx-tour")
    for k, step in enumerate(TOUR, 1):
        if k > 1:
            page.click("nav.vx-lesson [data-go=next]")
        page.wait_for_function("(k) => new URLSearchParams(location.search).get('step') === String(k)", arg=k)
        view = step_view(step["link"])
        try:
            drawn(page, view, 60_000)
        except Exception:  # noqa: BLE001 - a step whose view shows no figure: said, and the walk goes on
            yield k, view, False
            continue
        page.wait_for_timeout(300)
        yield k, view, True


def test_every_tour_step_shows_its_figure_under_the_lesson_bar_at_1280x720_projector(browser, app_url):
    ctx, page = open_next(browser, app_url, "projector=1")
    wrong = []
    try:
        for k, view, shown in walk_the_tour(page):
            if not shown:
                wrong.append((k, view, "no figure on screen"))
                continue
            got = page.evaluate(FIGURE_ON_SCREEN, view)
            if not (got["bar"] <= 0.25 * got["height"] and got["barTop"] >= -1 and
                    got["top"] >= got["barBottom"] - 2 and got["bottom"] <= got["height"] + 1):
                wrong.append((k, view, " ".join(f"{n}={round(v)}" for n, v in got.items())))
    finally:
        ctx.close()
    assert not wrong, wrong


def test_every_tour_caption_is_readable_on_a_phone(browser, app_url):
    ctx, page = open_next(browser, app_url, "", PHONE)
    wrong = []
    try:
        for k, view, _ in walk_the_tour(page):
            got = page.evaluate(CAPTION)
            if not (got["px"] >= 16 and (got["fits"] or got["scrolls"]) and got["top"] >= -1
                    and got["bottom"] <= got["height"]):
                wrong.append((k, view, got))
    finally:
        ctx.close()
    assert not wrong, wrong


# ---- 8. the focus moves to the lesson bar on start, to the step's content after Next ------------------------------

def test_the_focus_moves_to_the_lesson_bar_then_to_the_steps_content(browser, app_url):
    ctx, page = open_next(browser, app_url)
    try:
        page.focus("#vx-page a.vx-tour")
        page.keyboard.press("Enter")
        page.wait_for_selector("nav.vx-lesson:not([hidden])")
        page.wait_for_function("() => !!document.activeElement.closest('nav.vx-lesson')")
        page.click("nav.vx-lesson [data-go=next]")
        view = step_view(TOUR[1]["link"])
        page.wait_for_function("(v) => document.activeElement.matches(`[data-view='${v}'] .vx-panel-title`)",
                               arg=view, timeout=10_000)
        assert page.evaluate("() => { const r = document.activeElement.getBoundingClientRect();"
                             " return r.bottom > 0 && r.top < innerHeight; }")
    finally:
        ctx.close()


# ---- 9. unknown link values get a one-line notice and leave the address; one click downloads what is shown ---------

@pytest.mark.parametrize("query,key", [("source=learned", "source"), ("patch=13", "patch"), ("foo=1", "foo")])
def test_an_unknown_link_value_gets_a_one_line_notice_and_leaves_the_address(browser, app_url, query, key):
    ctx, page = open_next(browser, app_url, f"tab=patches&{query}")
    try:
        notice = page.locator("#vx-page .vx-link-notice")
        assert notice.is_visible()
        text = notice.inner_text().strip()
        assert f"{key}=" in text and "\n" not in text and len(text) <= 200, text
        assert key not in query_of(page), page.url
    finally:
        ctx.close()


def test_one_click_downloads_a_zip_of_what_is_on_screen(browser, app_url):
    ctx, page = open_next(browser, app_url, "tab=patches", accept_downloads=True)
    try:
        page.select_option("#panel-patches select[data-key=patch]", "8")
        page.wait_for_function("() => new URLSearchParams(location.search).get('patch') === '8'")
        drawn(page, "patches")
        with page.expect_download(timeout=120_000) as got:
            page.click("#panel-patches [data-download]")
        data = open(got.value.path(), "rb").read()
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            params = json.loads(z.read("params.json"))
        shown = page.evaluate(STATE)
        assert params["view"] == "patches" and params["patch"] == 8, params
        for f in panels.view_spec(RECORDS["patches"])["fields"]:  # the settings on screen are the zip's
            text = shown["settings"].get(f["link"], f["default"])
            assert str(params[f["name"]]) == text, (f["name"], params[f["name"]], text)
    finally:
        ctx.close()


# ---- 10. predict has a Test button ----------------------------------------------------------------------------

def test_predict_waits_for_its_test_button(browser, app_url):
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(f"{app_url}{panels.ROUTE}?tab=classify&open=predict")
        button = page.get_by_role("button", name="Test my choice")
        button.wait_for(timeout=120_000)
        page.wait_for_timeout(1500)
        assert page.locator("#panel-predict .vx-figures img").count() == 0  # nothing revealed before the test
        box = page.locator("#panel-predict input[data-key=tm_patches]")
        box.fill("2,2;2,3;3,2")
        box.dispatch_event("change")
        page.wait_for_timeout(1500)
        assert page.locator("#panel-predict .vx-figures img").count() == 0  # marking is not testing
        page.get_by_role("button", name="Test my choice").click()
        page.wait_for_function(f"() => ({DRAWN})('predict') || !!document.querySelector('#panel-predict .vx-error')",
                               timeout=180_000)
        assert page.locator("#panel-predict .vx-error").count() == 0, page.inner_text("#panel-predict .vx-error")
    finally:
        ctx.close()


# ---- axe-core on every tab of /next ------------------------------------------------------------------------------

WCAG = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
        "resultTypes": ["violations"]}


@pytest.mark.parametrize("size,query", [(WIDE, "projector=1"), (PHONE, "")], ids=["1280x720-projector", "390x844"])
def test_axe_finds_no_serious_or_critical_violation_on_any_tab_of_next(browser, app_url, size, query):
    axe_sync = pytest.importorskip("axe_playwright_python.sync_playwright")
    axe = axe_sync.Axe()  # axe-core as the package ships it (axe.min.js inside axe_playwright_python)
    found: Counter = Counter()
    where: list[str] = []
    for tab in TABS:
        ctx, page = open_next(browser, app_url, f"tab={tab}" + (f"&{query}" if query else ""), size)
        try:
            for v in axe.run(page, options=WCAG).response["violations"]:
                if v["impact"] in ("serious", "critical"):
                    found[v["id"]] += len(v["nodes"])
                    where += [f"{tab}: {v['id']} at {n['target']}" for n in v["nodes"][:2]]
        finally:
            ctx.close()
    assert not found, f"{dict(found)}\n" + "\n".join(where)
