"""The views drawn in the browser on the page at /next (vitviz/render/web/app/views/), in a real Chromium: the
attention explorer, the position-similarity hover and the patch inspector answer pointing and keys with the
library's numbers and no request; an arrow burst asks the server-drawn panels that share its settings once, after
it ends; predict's marks are in the address and reopen."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from browser_support import sync_api  # noqa: F401  (skips without Chromium or Playwright)
from conftest import EXAMPLES

from vitviz.analyses import attention as analysis
from vitviz.core import attention, images
from vitviz.models import cache as models

pytestmark = pytest.mark.browser

CAPTION = ".vxb-explorer .vxb-big figcaption"
BIG = ".vxb-explorer .vxb-big canvas"
COUNT_ASKS = """() => { window.__asked = []; document.addEventListener('vx-asked',
  (e) => window.__asked.push(e.detail.view)); }"""


def _next(app_url: str, query: str) -> str:
    return f"{app_url}next?{query}"


@pytest.fixture(scope="module")
def explorer(app_url, browser):
    """/next's Attention tab with the explorer's section open on the star scene (offline: the embedded model, an
    8×8 grid); the page and the requests to gradio's queue it makes from now on."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(_next(app_url, "tab=attention&open=explorer&image=scene_star"))
    page.wait_for_function(f"() => document.querySelector('{CAPTION}')?.dataset.count > 0", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[aria-busy=true]')", timeout=120_000)
    page.evaluate(COUNT_ASKS)
    queued: list[str] = []
    page.on("request", lambda r: queued.append(r.url) if "gradio_api/queue" in r.url else None)
    yield page, queued
    page.close()


@pytest.fixture(scope="module")
def library():
    """The same analysis from the library (the app runs in this process: the same model and picture)."""
    rgb = images.load_rgb(EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    return analysis.analyse(models.get_model("DINO ViT-S/8"), rgb, 224)


def _shown(page) -> dict:
    d = page.locator(CAPTION).evaluate("el => ({...el.dataset})")
    return {"mass": float(d["mass"]), "frac": float(d["frac"]), "count": int(d["count"]), "head": int(d["head"]),
            "layer": int(d["layer"]), "query": d["query"]}


def _expected(a, shown: dict, keep: float) -> tuple[float, float, int]:
    """The library's (mass, fraction, count) for what the caption says is shown (the class token's maps digit for
    digit; a patch's row is computed in the browser from q and k, so its mass is compared to 1e-5)."""
    layer = shown["layer"] - 1
    if shown["query"] == "cls":
        m = a.maps.cls_map(layer, None if shown["head"] < 0 else shown["head"])
    else:
        r, c = map(int, shown["query"].split(","))
        q = a.maps.prefix + r * a.maps.grid[1] + c
        rows = a.maps.keys[layer].rows(np.array([q]))[:, 0, a.maps.prefix:]
        m = (rows.mean(0) if shown["head"] < 0 else rows[shown["head"]]).reshape(a.maps.grid)
    mask, mass, frac = attention.mass_mask(m, keep)
    return mass, frac, int(mask.sum())


def _same(shown: dict, expected: tuple[float, float, int]) -> bool:
    got = (shown["mass"], shown["frac"], shown["count"])
    if shown["query"] == "cls":
        return got == expected
    return got[2] == expected[2] and abs(got[0] - expected[0]) < 1e-5 and abs(got[1] - expected[1]) < 1e-12


def _latency(page, sel: str) -> float:
    return float(page.locator(sel).get_attribute("data-latency"))


def test_pointing_at_twenty_patches_draws_the_librarys_numbers_with_no_request(explorer, library):
    page, queued = explorer
    queued.clear()
    page.evaluate("() => { window.__asked.length = 0; }")
    cv = page.locator(BIG)
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    gh, gw = library.maps.grid
    assert (gh, gw) == (8, 8)
    times = []
    for r, c in [(r, c) for r in range(gh) for c in range(gw)][::3][:20]:
        page.mouse.move(box["x"] + (c + 0.5) * box["width"] / gw, box["y"] + (r + 0.5) * box["height"] / gh)
        page.wait_for_function(f"(v) => document.querySelector('{CAPTION}').dataset.query === v", arg=f"{r},{c}",
                               timeout=5_000)
        shown = _shown(page)
        assert _same(shown, _expected(library, shown, 0.6)), (r, c, shown)
        times.append(_latency(page, ".vxb-explorer"))
    page.mouse.move(0, 0)
    page.wait_for_timeout(600)
    assert queued == [] and page.evaluate("() => window.__asked") == []
    assert statistics.median(times) < 50, times  # drawn in the event's own task (8-11 ms on a quiet machine)


def test_an_arrow_burst_asks_nothing_until_it_ends_then_the_panels_sharing_the_query_ask_once(explorer, library):
    page, queued = explorer
    page.mouse.move(0, 0)
    page.wait_for_timeout(600)
    queued.clear()
    page.evaluate("() => { window.__asked.length = 0; }")
    page.locator(".vxb-explorer").focus()
    presses = ["ArrowRight"] * 3 + ["ArrowDown"] * 2 + ["ArrowLeft"]
    times = []
    for key in presses:
        page.keyboard.press(key)
        page.wait_for_timeout(80)  # a student's pace: each press well within the 400 ms the explorer waits
        times.append(_latency(page, ".vxb-explorer"))
    during = (list(queued), page.evaluate("() => [...window.__asked]"))
    shown = _shown(page)
    assert shown["query"] == "6,5"  # the first arrow picks the centre (4, 4); then right 2, down 2, left 1
    assert _same(shown, _expected(library, shown, 0.6))
    assert during == ([], []), during
    assert "query=" not in page.url  # the store hears of the burst once it ends
    page.wait_for_function("() => new URL(location.href).searchParams.get('query') === '6,5'", timeout=3_000)
    page.wait_for_timeout(800)
    asked = page.evaluate("() => [...window.__asked]")
    assert asked.count("attention") == 1, asked  # the server-drawn Attention panel asks once for the burst
    assert all(asked.count(v) == 1 for v in asked), asked
    assert statistics.median(times) < 50, times
    page.wait_for_function("() => !document.querySelector('[aria-busy=true]')", timeout=60_000)


def test_the_explorer_follows_the_stores_layer_head_and_keep_from_the_attention_panels_controls(explorer, library):
    page, queued = explorer
    page.keyboard.press("Escape")  # the class token again
    page.wait_for_function(f"() => document.querySelector('{CAPTION}').dataset.query === 'cls'", timeout=5_000)
    for name, value, key in (("layer", "2", "layer"), ("head", "1", "head"), ("keep", "0.8", None)):
        slider = page.locator(f"#vx-attention-{name}")
        slider.evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true}));"
                        " el.dispatchEvent(new Event('change', {bubbles: true})); }", value)
        if key:
            page.wait_for_function(f"(v) => document.querySelector('{CAPTION}').dataset.{key} === v", arg=value,
                                   timeout=5_000)
    page.wait_for_function(f"() => document.querySelector('{CAPTION}').textContent.includes('layer 2 of')",
                           timeout=5_000)
    page.wait_for_timeout(200)
    shown = _shown(page)
    assert (shown["layer"], shown["head"]) == (2, 1)
    assert _same(shown, _expected(library, shown, 0.8)), shown
    assert "keep=0.8" in page.url and "layer=2" in page.url


def _point(page, sel: str, caption: str, rows: int, cols: int, r: int, c: int, key: str) -> dict:
    box = page.locator(sel).bounding_box()
    page.mouse.move(box["x"] + (c + 0.5) * box["width"] / cols, box["y"] + (r + 0.5) * box["height"] / rows)
    page.wait_for_function(f"(v) => document.querySelector('{caption}')?.dataset.{key} === v", arg=f"{r},{c}",
                           timeout=5_000)
    return page.locator(caption).evaluate("el => ({...el.dataset})")


def test_the_similarity_map_follows_the_pointer_and_keys_with_the_tables_numbers(app_url, browser):
    from vitviz.core import posembed

    table = posembed.similarity(posembed.sincos_2d(14, 14, 64), "cosine").astype(np.float32)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(_next(app_url, "tab=positions"))
    cv = page.locator(".vxb-similarity figure canvas")
    cv.wait_for(state="visible", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[aria-busy=true]')", timeout=60_000)
    cv.scroll_into_view_if_needed()
    page.evaluate(COUNT_ASKS)
    queued: list[str] = []
    page.on("request", lambda r: queued.append(r.url) if "gradio_api/queue" in r.url else None)
    caption = ".vxb-similarity figcaption"
    for r, c in [(0, 0), (3, 7), (7, 7), (13, 12), (10, 2)]:
        d = _point(page, ".vxb-similarity figure canvas", caption, 14, 14, r, c, "pos")
        row = table[r * 14 + c]
        assert float(d["self"]) == float(row[r * 14 + c]) and float(d["low"]) == float(row.min())
        assert float(d["right"]) == float(row[r * 14 + c + 1])
    page.locator(".vxb-similarity").focus()
    page.keyboard.press("ArrowUp")
    d = page.locator(caption).evaluate("el => ({...el.dataset})")
    assert d["pos"] == "9,2" and float(d["self"]) == float(table[9 * 14 + 2][9 * 14 + 2])
    page.wait_for_timeout(500)
    assert queued == [] and page.evaluate("() => window.__asked") == []
    page.close()


def test_the_patch_inspector_cuts_and_embeds_like_the_library(app_url, browser):
    from vitviz.core import patches
    from vitviz.views import patches as view

    fitted = view.fit(images.load_rgb(EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE), 224, 16, "crop")
    flat = patches.patchify(view.to_chw(fitted.image), 16)[0]
    weight, bias = view.projection(16)
    emb = patches.embed_linear(flat, weight, bias).numpy()
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(_next(app_url, "tab=patches&image=cat"))
    cv = page.locator(".vxb-inspector canvas.vxb-pic")
    cv.wait_for(state="visible", timeout=120_000)
    page.wait_for_function("() => document.querySelector('.vxb-inspector .vxb-cap')?.dataset.patch", timeout=30_000)
    cv.scroll_into_view_if_needed()
    page.evaluate(COUNT_ASKS)
    queued: list[str] = []
    page.on("request", lambda r: queued.append(r.url) if "gradio_api/queue" in r.url else None)
    for r, c in [(0, 0), (5, 9), (13, 13), (8, 2)]:
        d = _point(page, ".vxb-inspector canvas.vxb-pic", ".vxb-inspector .vxb-cap", 14, 14, r, c, "patch")
        assert int(d["flat"]) == 16 * 16 * 3
        np.testing.assert_allclose(json.loads(d["emb"]), emb[r * 14 + c], atol=1e-5)
    page.wait_for_timeout(500)
    assert queued == [] and page.evaluate("() => window.__asked") == []
    page.close()


def test_inside_one_head_redoes_any_querys_arithmetic_like_the_library(app_url, browser):
    from urllib.parse import quote

    from vitviz.analyses import heads
    from vitviz.specs import registry

    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(_next(app_url, f"tab=attention&open=inside_head&image=scene_star&model={quote(registry.OFFLINE_KEY)}"))
    caption = ".vxb-inside .vxb-in-caption"
    page.wait_for_function(f"() => document.querySelector('{caption}')?.dataset.query", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[aria-busy=true]')", timeout=60_000)
    layer = int(page.locator(caption).inner_text().split(",")[0].split()[-1])
    head = int(page.locator(caption).inner_text().split(",")[1].split()[-1])
    rgb = images.load_rgb(EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    _, record = heads.layer_record(models.get_model(registry.OFFLINE_KEY), rgb, 64, layer)
    gh, gw = record.grid
    prefix = record.prefix
    page.evaluate(COUNT_ASKS)
    queued: list[str] = []
    page.on("request", lambda r: queued.append(r.url) if "gradio_api/queue" in r.url else None)
    cv = page.locator(".vxb-inside .vxb-in-weights canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    for r, c in [(0, 0), (3, 5), (7, 7), (5, 1)]:
        page.mouse.move(box["x"] + (c + 0.5) * box["width"] / gw, box["y"] + (r + 0.5) * box["height"] / gh)
        token = prefix + r * gw + c
        page.wait_for_function(f"() => document.querySelector('{caption}').dataset.query === '{token}'", timeout=5_000)
        got = page.evaluate(f"""() => {{ const t = document.querySelector('.vxb-inside').__vx.trace({token});
            return {{scores: Array.from(t.scores), weights: Array.from(t.weights), mixed: Array.from(t.mixed),
                     error: t.error}}; }}""")
        ref = heads.trace(record, head, token)
        assert np.abs(np.array(got["scores"]) - ref.scores).max() < 1e-9
        assert np.abs(np.array(got["weights"]) - ref.weights).max() < 1e-12
        assert np.abs(np.array(got["mixed"]) - ref.mixed).max() < 1e-9
        assert abs(got["error"] - ref.output_error) < 1e-9 and got["error"] < 1e-5
    assert queued == [] and page.evaluate("() => window.__asked") == []
    page.close()


def _picker_marks(page) -> str:
    return page.locator(".vxb-picker .vxb-cap").get_attribute("data-patches")


def test_predicts_marks_are_in_the_address_and_reopen_with_the_section_open(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(_next(app_url, "tab=classify&open=predict&tm_patches=1,2;3,4"))
    panel = page.locator("[data-view=predict]")
    test = panel.get_by_role("button", name="Test my choice")
    test.wait_for(state="visible", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-view=predict][aria-busy=true]')", timeout=60_000)
    if not page.locator(".vxb-picker canvas").count():  # no preview before a test: the test brings the picture
        test.click()
    cv = page.locator(".vxb-picker canvas")
    cv.wait_for(state="visible", timeout=180_000)
    assert _picker_marks(page) == "1,2;3,4"
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    gh, gw = (int(v) for v in page.locator(".vxb-picker").get_attribute("data-grid").split(","))
    page.mouse.click(box["x"] + (0 + 0.5) * box["width"] / gw, box["y"] + (0 + 0.5) * box["height"] / gh)
    page.wait_for_function("() => new URL(location.href).searchParams.get('tm_patches') === '0,0;1,2;3,4'",
                           timeout=3_000)
    assert _picker_marks(page) == "0,0;1,2;3,4"
    page.locator(".vxb-picker").focus()
    for key in ("ArrowRight", "ArrowRight", " "):  # the keyboard's patch starts at the centre
        page.keyboard.press(key)
    page.wait_for_function("() => new URL(location.href).searchParams.get('tm_patches').split(';').length === 4",
                           timeout=3_000)
    link = page.url
    assert "open=predict" in link
    again = browser.new_page(viewport={"width": 1280, "height": 720})
    again.goto(link)
    body = again.locator("[data-view=predict] .vx-body")
    body.wait_for(state="visible", timeout=120_000)  # the section reopens open
    if not again.locator(".vxb-picker canvas").count():
        again.locator("[data-view=predict]").get_by_role("button", name="Test my choice").click()
    again.locator(".vxb-picker canvas").wait_for(state="visible", timeout=180_000)
    marks = again.locator(".vxb-picker .vxb-cap").get_attribute("data-patches")
    assert marks == new_marks(link) and len(marks.split(";")) == 4
    page.close()
    again.close()


def new_marks(link: str) -> str:
    from urllib.parse import parse_qs, urlparse

    return parse_qs(urlparse(link).query)["tm_patches"][0]
