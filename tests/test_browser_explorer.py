"""The attention explorer in a real Chromium: it answers pointing and keys with no server call, with the library's numbers."""

from __future__ import annotations

import numpy as np
import pytest
from browser_support import idle, open_tab, sync_api
from conftest import EXAMPLES

from vitviz.analyses import attention as analysis
from vitviz.core import attention, images
from vitviz.models import cache as models

pytestmark = pytest.mark.browser

SIGNATURE = """(cv) => { const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  let h = 0; for (let i = 0; i < d.length; i += 3) h = (h * 31 + d[i]) >>> 0; return h; }"""
CAPTION = "#attention-explorer .vx-big figcaption"


@pytest.fixture(scope="module")
def explorer(app_url, browser):
    """The Attention tab after clicking the star scene (offline: the embedded model, an 8×8 grid)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url)
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.locator(".tabitem:visible").first.locator(".gallery-item, tr.tr-body").nth(0).click()
    page.locator("#attention-explorer .vx-big canvas").wait_for(state="visible", timeout=120_000)
    page.wait_for_function(f"() => document.querySelector('{CAPTION}').dataset.count > 0", timeout=60_000)
    idle(page)
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "heartbeat" not in r.url else None)
    yield page, calls
    page.close()


@pytest.fixture(scope="module")
def library():
    """The same analysis, from the library: the app runs in this process and caches it under the same key."""
    rgb = images.load_rgb(EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    return analysis.analyse(models.get_model("DINO ViT-S/8"), rgb, 224)


def _shown(page) -> dict:
    d = page.locator(CAPTION).evaluate("el => ({...el.dataset})")
    return {"mass": float(d["mass"]), "frac": float(d["frac"]), "count": int(d["count"]), "head": int(d["head"]),
            "layer": int(d["layer"]), "query": d["query"]}


def _expected(a, shown: dict, keep: float) -> tuple[float, float, int]:
    """The library's (mass, fraction, count) for what the caption says is shown: the class token's maps digit for
    digit; a patch's row is computed in the browser from q and k, so its mass is compared to 1e-5 (see _same)."""
    layer = shown["layer"] - 1
    if shown["query"] == "cls":
        m = a.maps.cls_map(layer, None if shown["head"] < 0 else shown["head"])
    else:
        r, c = map(int, shown["query"].split(","))
        q = a.maps.prefix + r * a.maps.grid[1] + c
        rows = a.maps.keys[layer].rows(np.array([q]))[:, 0, a.maps.prefix:]  # (H, N), as the browser makes it
        m = (rows.mean(0) if shown["head"] < 0 else rows[shown["head"]]).reshape(a.maps.grid)
    mask, mass, frac = attention.mass_mask(m, keep)
    return mass, frac, int(mask.sum())


def _same(shown: dict, expected: tuple[float, float, int]) -> bool:
    got = (shown["mass"], shown["frac"], shown["count"])
    if shown["query"] == "cls":
        return got == expected
    return got[2] == expected[2] and abs(got[0] - expected[0]) < 1e-5 and abs(got[1] - expected[1]) < 1e-12


def _canvas(page) -> int:
    return page.locator("#attention-explorer .vx-big canvas").evaluate(SIGNATURE)


def _wait(page, key: str, value) -> None:
    page.wait_for_function(f"(v) => document.querySelector('{CAPTION}').dataset.{key} === String(v)", arg=value,
                           timeout=5_000)


def test_pointing_at_twenty_patches_redraws_with_the_librarys_numbers(explorer, library):
    page, calls = explorer
    calls.clear()
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    gh, gw = library.maps.grid
    assert (gh, gw) == (8, 8)
    before = _canvas(page)
    patches = [(r, c) for r in range(gh) for c in range(gw)][::3][:20]
    for r, c in patches:
        page.mouse.move(box["x"] + (c + 0.5) * box["width"] / gw, box["y"] + (r + 0.5) * box["height"] / gh)
        _wait(page, "query", f"{r},{c}")
        now = _canvas(page)
        assert now != before, f"the map did not change for patch ({r}, {c})"
        before = now
        shown = _shown(page)
        assert _same(shown, _expected(library, shown, 0.6)), (r, c)
    assert len(patches) == 20 and calls == []


def test_layer_head_threshold_by_mouse_and_keyboard_are_drawn_in_the_browser(explorer, library):
    page, calls = explorer
    calls.clear()
    sent = []  # what each queued event carried: the figures' refresh carries the explorer's settings
    page.on("request", lambda r: sent.append(r.post_data or "") if "/queue/join" in r.url else None)
    vx = page.locator("#attention-explorer .vx")
    page.keyboard.press("Escape") if vx.evaluate("el => el.contains(document.activeElement)") else None
    page.mouse.move(0, 0)  # off the canvases: the class token is the query
    _wait(page, "query", "cls")
    published = int(vx.evaluate("el => el.dataset.published") or 0)  # settings the explorer told the page so far
    keep = 0.6
    steps = []

    def check(what: str) -> None:
        shown = _shown(page)
        assert _same(shown, _expected(library, shown, keep)), what
        sig = _canvas(page)
        assert not steps or sig != steps[-1], f"{what}: the map did not change"
        steps.append(sig)

    check("start")
    page.locator("#attention-explorer .vx-step").nth(1).click()  # mouse: layer 2 in the strip
    _wait(page, "layer", 2)
    check("layer 2 by mouse")
    page.locator("#attention-explorer .vx-head").nth(2).click()  # mouse: head 1 (the first panel is the mean)
    _wait(page, "head", 1)
    check("head 1 by mouse")
    vx.focus()
    page.keyboard.press("2")
    _wait(page, "head", 2)
    check("head 2 by key")
    page.keyboard.press("]")
    _wait(page, "layer", 3)
    check("layer 3 by key")
    page.keyboard.press("m")
    _wait(page, "head", -1)
    check("head mean by key")
    slider = page.locator("#attention-explorer .vx-keep")
    slider.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    keep = 0.75
    page.wait_for_function("() => document.querySelector('#attention-explorer .vx-keep-out').textContent"
                           ".startsWith('75%')", timeout=5_000)
    check("threshold 75% by keys")
    b = slider.bounding_box()
    page.mouse.click(b["x"] + b["width"] * (0.3 - 0.1) / 0.85, b["y"] + b["height"] / 2)  # mouse: about 30%
    keep = float(slider.input_value())
    assert 0.2 <= keep <= 0.4
    page.wait_for_function(f"() => document.querySelector('#attention-explorer .vx-keep-out').textContent"
                           f".startsWith('{round(keep * 100)}%')", timeout=5_000)
    check("threshold by mouse")
    layer = page.locator("#attention-explorer .vx-layer")
    layer.focus()
    page.keyboard.press("ArrowRight")
    _wait(page, "layer", 4)
    check("layer 4 by the slider's keys")
    vx.focus()
    page.keyboard.press("ArrowUp")  # the arrows move a query patch, starting from the centre
    _wait(page, "query", "4,4")
    page.keyboard.press("ArrowLeft")
    _wait(page, "query", "4,3")
    check("patch (4, 3) by arrow keys")
    # Every map above was drawn in the browser from the data sent once. The server only hears, after a burst of
    # changes settles, the explorer's new settings, so its own figures and the download follow them: one queued
    # event per change at most, and never a fetch of explorer data.
    page.wait_for_timeout(500)  # the last burst settles
    changes = int(vx.evaluate("el => el.dataset.published") or 0) - published
    refreshes = [s for s in sent if '\\"layer\\"' in s or '"layer"' in s]
    assert 1 <= len(refreshes) == len(sent) <= changes and not any("explorer" in c for c in calls)
    focus = vx.evaluate("el => getComputedStyle(el).outlineStyle")
    assert focus != "none"  # focus is visible


def test_explorer_colours_are_matplotlibs(explorer):
    from vitviz.render import browser as ex

    page, _ = explorer
    lut = page.locator("#attention-explorer .vx").evaluate("el => Array.from(el.__vx.luts['viridis'].slice(0, 6))")
    import base64

    import numpy as np

    table = np.frombuffer(base64.b64decode(ex.colormaps()["viridis"]), np.uint8)
    assert lut == table[:6].tolist() == [68, 1, 84, 68, 2, 86]  # viridis' first two entries, as matplotlib has them


def test_the_class_map_cells_bring_the_librarys_maps_for_the_top_class(explorer, library):
    """Offline (the embedded model on the star): the strip's class-map cells name the class they explain; clicking
    two of them and pressing Enter on the third fetches each map once as a part, drawn in its cell, equal to the
    library's class maps for the analysis's top class, and its caption's top patch and share are the library's."""
    from vitviz.analyses import maps, relevance

    page, calls = explorer
    cells = page.locator("#attention-explorer .vx-class")
    assert cells.count() == len(maps.NEED_A_CLASS)
    runner = library.runner
    target = int(np.argmax(library.maps.logits.reshape(-1)))
    name = runner.labels[target]
    help_text = page.locator("#attention-explorer .vx-help").inner_text()
    assert f"the class maps for class “{name}” (the model's top class here)" in help_text, help_text
    strip = page.locator("#attention-explorer .vx-strip").get_attribute("aria-label")
    assert f"class maps for class “{name}”" in strip and "keys [ and ] change the layer" in strip
    want = runner.run(relevance.ClassMapsProbe(runner.spec.prefix, target=target),
                      runner.normalise(library.fitted.image)).maps  # the library's, for the same class and input
    gh, gw = library.maps.grid
    calls.clear()
    for i, key in enumerate(maps.NEED_A_CLASS):
        cell = cells.nth(i)
        label = {"attnlrp": "AttnLRP", "legrad": "LeGrad"}.get(key, key)
        assert cell.locator("figcaption").inner_text() == f"{label}: click"
        assert f"{label} for class “{name}”" in cell.get_attribute("aria-label") and cell.get_attribute("role") == "button"
        if i < 2:
            cell.click()
        else:
            cell.focus()
            page.keyboard.press("Enter")  # the keyboard asks for it too
        page.wait_for_function("(i) => document.querySelectorAll('#attention-explorer .vx-class figcaption')[i]"
                               ".dataset.share !== undefined", arg=i, timeout=60_000)
        got = np.array(page.evaluate("(k) => Array.from(document.querySelector('#attention-explorer .vx').__vx"
                                     ".classMaps[k])", key), np.float64)
        ref = want[key].astype(np.float32).astype(np.float64)
        assert np.abs(got - ref).max() <= 4 * 2.0 ** -24 * np.abs(ref).max(), key  # float32's rounding at most
        r, c, share = relevance.top_patch(want[key], (gh, gw))
        d = cell.locator("figcaption").evaluate("el => ({...el.dataset, text: el.textContent})")
        assert d["top"] == f"{r},{c}" and abs(float(d["share"]) - share) <= 1e-6 * max(share, 1e-12), (key, d)
        assert d["text"].startswith(label) and f"({r}, {c})" in cell.get_attribute("title")
        assert cell.locator("canvas").evaluate(SIGNATURE) != 0
    fetched = [u.rsplit("/", 1)[1] for u in calls if "/vitviz/explorer/" in u]
    assert fetched == [f"class-{k}.f4" for k in maps.NEED_A_CLASS], calls  # each once, nothing else asked
    page.locator("#attention-explorer .vx").focus()
    layer = int(page.locator(CAPTION).evaluate("el => el.dataset.layer"))
    page.keyboard.press("[" if layer > 1 else "]")  # the strip's keys still change the layer
    _wait(page, "layer", layer - 1 if layer > 1 else layer + 1)


def test_a_model_without_classes_says_there_is_no_class_to_explain(app_url, browser, dino_in_cache):
    """DINO ViT-S/8 shape: the strip keeps its layers and rollout and ends with one cell that says there is no
    class to explain (not a silent gap), with nothing to fetch."""
    page = _open_scene(browser, app_url, 1)  # the ring scene
    cells = page.locator("#attention-explorer .vx-class")
    assert cells.count() == 1 and page.locator("#attention-explorer .vx-step[data-l]").count() == 13
    assert cells.first.inner_text() == "no class to explain" and cells.first.locator("canvas").count() == 0
    assert "has no classes" in cells.first.get_attribute("title")
    assert "class maps for class" not in page.locator("#attention-explorer .vx-help").inner_text()
    page.close()


def _open(page, app_url: str, tab: str, example: int, selector: str):
    page.goto(app_url)
    page.get_by_role("tab", name=tab, exact=True).click()
    page.locator(".tabitem:visible").first.locator(".gallery-item, tr.tr-body").nth(example).click()
    cv = page.locator(selector).first
    cv.wait_for(state="visible", timeout=60_000)
    idle(page)
    cv.scroll_into_view_if_needed()
    return cv.bounding_box()


def _point(page, box: dict, rows: int, cols: int, r: int, c: int, caption: str, key: str) -> dict:
    page.mouse.move(box["x"] + (c + 0.5) * box["width"] / cols, box["y"] + (r + 0.5) * box["height"] / rows)
    page.wait_for_function(f"(v) => document.querySelector('{caption}')?.dataset.{key} === v", arg=f"{r},{c}",
                           timeout=5_000)
    return page.locator(caption).evaluate("el => ({...el.dataset})")


def test_position_similarity_follows_the_pointer_with_the_tables_numbers(app_url, browser):
    import numpy as np

    from vitviz.core import posembed

    table = posembed.similarity(posembed.sincos_2d(14, 14, 64), "cosine").astype(np.float32)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    box = _open(page, app_url, "Position embeddings", 1, "#pe-explorer canvas")  # 2D sinusoidal, 14×14, D=64
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "heartbeat" not in r.url else None)
    for r, c in [(0, 0), (3, 7), (7, 7), (13, 12), (10, 2)]:
        d = _point(page, box, 14, 14, r, c, "#pe-explorer figcaption", "pos")
        row = table[r * 14 + c]
        assert float(d["self"]) == float(row[r * 14 + c]) and float(d["low"]) == float(row.min())
        assert float(d["right"]) == float(row[r * 14 + c + 1])
    page.close()
    assert calls == []


def test_patch_inspector_cuts_and_embeds_like_the_library(app_url, browser):
    import json

    import numpy as np

    from vitviz.core import patches
    from vitviz.views import patches as view

    fitted = view.fit(images.load_rgb(EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE), 224, 16, "crop")
    flat = patches.patchify(view.to_chw(fitted.image), 16)[0]
    weight, bias = view.projection(16)
    emb = patches.embed_linear(flat, weight, bias).numpy()
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    box = _open(page, app_url, "Patches", 0, "#patch-inspector canvas")  # the cat, P = 16, 224 px, crop
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "heartbeat" not in r.url else None)
    for r, c in [(0, 0), (5, 9), (13, 13), (8, 2)]:
        d = _point(page, box, 14, 14, r, c, "#patch-inspector .vx-cap", "patch")
        assert int(d["flat"]) == 16 * 16 * 3
        np.testing.assert_allclose(json.loads(d["emb"]), emb[r * 14 + c], atol=1e-5)
    page.close()
    assert calls == []


def _open_scene(browser, app_url, nth: int):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url)
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.wait_for_selector("#attention-explorer .vx-big canvas", state="attached", timeout=120_000)
    idle(page)  # the tab's own example has answered: a later answer for it cannot replace the scene clicked next
    page.locator(".tabitem:visible").first.locator(".gallery-item, tr.tr-body").nth(nth).click()
    page.wait_for_function("() => { const s = document.querySelector('#attention-explorer .vx')?.__vx; return s && "
                           "s.p?.grid.join() === '28,28' && s.cls; }", timeout=120_000)  # the scene's own analysis
    idle(page)
    return page


def test_another_layers_keys_are_fetched_once_and_kept(app_url, browser, dino_in_cache):
    """DINO ViT-S/8 shape at 224 px: the first answer brings the last layer's q and k; layer 11's come once, when a
    patch is first the query there, as a part the browser may cache."""
    import numpy as np

    page = _open_scene(browser, app_url, 1)  # the ring scene
    p = page.evaluate("() => document.querySelector('#attention-explorer .vx').__vx.p")
    assert p["first"] == [11] and p["parts"]["keys"][10] == "keys-10.f2" and p["bytes"] < 4 * 2**20
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "heartbeat" not in r.url else None)
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    page.mouse.click(box["x"] + 10.5 * box["width"] / 28, box["y"] + 6.5 * box["height"] / 28)  # pin patch (6, 10)
    _wait(page, "query", "6,10")
    assert not [c for c in calls if "/vitviz/explorer/" in c]  # the last layer's keys came with the analysis
    page.locator("#attention-explorer .vx").focus()
    page.keyboard.press("[")
    page.wait_for_function(f"() => document.querySelector('{CAPTION}').dataset.layer === '11' && "
                           f"document.querySelector('{CAPTION}').dataset.count > 0", timeout=30_000)
    fetched = lambda: [c for c in calls if "/vitviz/explorer/" in c]  # noqa: E731
    assert [c.rsplit("/", 2)[1:] for c in fetched()] == [[p["token"], "keys-10.f2"]]
    for key in "][][":  # back and forth: nothing more is fetched
        page.keyboard.press(key)
        page.wait_for_timeout(150)
    _wait(page, "layer", 11)
    assert len(fetched()) == 1
    shown = _shown(page)
    rgb = images.load_rgb(EXAMPLES / "scene_ring.png", images.INTAKE_SHORT_SIDE)
    a = analysis.analyse(dino_in_cache, rgb, 224)
    row = a.maps.keys[10].rows(np.array([1 + 6 * 28 + 10]))[:, 0, 1:].mean(0)  # the head mean of patch (6, 10)
    mask, mass, frac = attention.mass_mask(row, 0.6)
    assert shown["count"] == int(mask.sum()) and abs(shown["mass"] - mass) < 1e-5
    page.close()


def test_browser_rows_equal_the_librarys_for_every_head_of_two_layers(app_url, browser, dino_in_cache):
    """Every head of layers 6 and 12, 30 query patches each: the rows the browser computes from float16 q and k
    equal numpy's from the same numbers (1e-6) and the model's own attention within the stated tolerance."""
    import numpy as np
    from test_explorer_keys import F16_TOLERANCE, true_attention

    page = _open_scene(browser, app_url, 3)  # the cross scene
    rgb = images.load_rgb(EXAMPLES / "scene_cross.png", images.INTAKE_SHORT_SIDE)
    a = analysis.analyse(dino_in_cache, rgb, 224)
    assert page.evaluate("() => document.querySelector('#attention-explorer .vx').__vx.p.token") == a.token
    queries = list(range(0, 784, 27))
    for layer in (5, 11):
        got = np.array(page.evaluate("""async ([layer, queries]) => {
            const S = document.querySelector('#attention-explorer .vx').__vx;
            await ensureKeysFor(S, layer);
            return queries.map((q) => Array.from(S.rowsFor(layer, q)));
          }""".replace("ensureKeysFor(S, layer)", "S.ensureKeys(layer)"), [layer, queries]))
        h, n = a.maps.heads, 784
        got = got.reshape(len(queries), h + 1, n)
        ours = a.maps.keys[layer].rows(np.array(queries) + 1)[:, :, 1:]  # (H, Q, N) from the same float16 numbers
        model = true_attention(a)[layer][:, np.array(queries) + 1, 1:]  # the model's own, eager
        for head in range(h):
            assert np.abs(got[:, head] - ours[head]).max() < 1e-6, (layer, head)
            assert np.abs(got[:, head] - model[head]).max() < F16_TOLERANCE, (layer, head)
        assert np.abs(got[:, h] - ours.mean(0)).max() < 1e-6  # the head mean
    page.close()


def test_a_failed_keys_fetch_says_so_and_is_asked_again_later(app_url, browser, dino_in_cache):
    page = _open_scene(browser, app_url, 2)  # the triangle
    page.route("**/vitviz/explorer/**/keys-10.f2", lambda route: route.abort())  # the network fails
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.locator("#attention-explorer .vx").focus()
    page.keyboard.press("[")
    sync_api.expect(page.locator(CAPTION)).to_contain_text("did not send", timeout=10_000)
    page.unroute("**/vitviz/explorer/**/keys-10.f2")
    page.wait_for_timeout(3_300)  # the pause before asking again
    page.keyboard.press("]")
    page.keyboard.press("[")  # back on layer 11: asked again, answered
    page.wait_for_function(f"() => document.querySelector('{CAPTION}').dataset.layer === '11' && "
                           f"document.querySelector('{CAPTION}').dataset.count > 0", timeout=30_000)
    page.close()


def _forget_and_continue(app_url, browser, forget):
    """The star scene, a pinned patch, then ``forget()`` on the server and a layer change: (the explorer's state
    before, after, what the page sent to the queue in between)."""
    page = _open_scene(browser, app_url, 0)  # the star
    state = "() => { const s = document.querySelector('#attention-explorer .vx').__vx; return {token: s.p.token, " \
            "cls: Array.from(s.cls), layer: s.layer}; }"
    before = page.evaluate(state)
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    page.mouse.click(box["x"] + 14.5 * box["width"] / 28, box["y"] + 9.5 * box["height"] / 28)  # pin (9, 14)
    _wait(page, "query", "9,14")
    sent = []
    page.on("request", lambda r: sent.append(r.post_data or "") if "/queue/join" in r.url else None)
    forget()
    page.locator("#attention-explorer .vx").focus()
    page.keyboard.press("[")
    page.wait_for_function(f"() => {{ const d = document.querySelector('{CAPTION}')?.dataset; return "
                           "d && d.layer === '11' && d.query === '9,14' && d.count > 0; }", timeout=60_000)
    after = page.evaluate(state)
    page.close()
    return before, after, sent


def test_when_the_server_no_longer_holds_the_analysis_it_makes_it_again_from_its_own_copy_of_the_picture(
        app_url, browser, dino_in_cache):
    """The analysis left the result store: the explorer asks by its token, the server makes the same analysis
    again from the picture's file it still has, and the explorer continues; the picture is not uploaded again."""
    from vitviz.core import owned

    before, after, sent = _forget_and_continue(app_url, browser, lambda: owned.reset("results"))
    assert not any("data:image" in s for s in sent)
    assert after["token"] == before["token"]  # the same analysis, made again
    assert after["cls"] == before["cls"] and after["layer"] == 10
    assert not any("data:image" in s for s in sent), [s[:200] for s in sent]
    assert any(before["token"] in s for s in sent)  # asked by its picture's content address, through the queue


def test_when_the_server_has_no_copy_of_the_picture_either_the_picture_comes_back_and_the_explorer_continues(
        app_url, browser, dino_in_cache, monkeypatch):
    """Another process answers (or a restart): it holds neither the analysis nor the picture, so it asks for the
    picture; the explorer sends the fitted picture back through the queue and gets a new analysis of it, with the
    same numbers."""
    from vitviz.app import uploads
    from vitviz.core import owned

    def forget():  # as another process (or a restarted server) would be: no analysis, no file of the picture
        owned.reset("results")
        monkeypatch.setattr(uploads, "file_of", lambda key: None)

    before, after, sent = _forget_and_continue(app_url, browser, forget)
    assert after["token"] != before["token"]  # a new analysis: of the picture the browser sent back
    assert after["cls"] == before["cls"] and after["layer"] == 10
    assert any("data:image/png;base64," in s for s in sent)  # through the queue, like every picture


def test_inside_one_head_redoes_any_querys_arithmetic_in_the_browser_like_the_library(app_url, browser):
    """Offline (the embedded model on the star scene): pointing at patches in 'inside one head' computes the
    scores, softmax and weighted sum in the browser; they equal vitviz.analyses.heads.trace's, and the sum equals
    the model's own output (no server call while pointing)."""
    import numpy as np

    from vitviz.analyses import heads
    from vitviz.specs import registry

    from urllib.parse import quote

    ctx, page = open_tab(browser, app_url, "attention", query=f"image=scene_star&model={quote(registry.OFFLINE_KEY)}")
    page.wait_for_function(f"() => document.querySelector('{CAPTION}')?.dataset.count > 0", timeout=120_000)
    idle(page)
    page.get_by_text("Inside one head: q·k, softmax, weighted sum").click()
    caption = "#inside-head-view .vx-in-caption"
    page.wait_for_function(f"() => document.querySelector('{caption}')?.dataset.query", timeout=60_000)
    idle(page)
    p = page.evaluate("() => { const s = document.querySelector('#inside-head-view .vx').__vx; "
                      "return {layer: s.p.layer, head: s.p.head, grid: s.p.grid, prefix: s.p.prefix}; }")
    rgb = images.load_rgb(EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    _, record = heads.layer_record(models.get_model(registry.OFFLINE_KEY), rgb, 64, p["layer"] + 1)
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "heartbeat" not in r.url else None)
    cv = page.locator("#inside-head-view .vx-in-weights canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    gh, gw = p["grid"]
    for r, c in [(0, 0), (3, 5), (7, 7), (5, 1)]:
        page.mouse.move(box["x"] + (c + 0.5) * box["width"] / gw, box["y"] + (r + 0.5) * box["height"] / gh)
        token = p["prefix"] + r * gw + c
        page.wait_for_function(f"() => document.querySelector('{caption}').dataset.query === '{token}'",
                               timeout=5_000)
        got = page.evaluate(f"""() => {{ const t = document.querySelector('#inside-head-view .vx').__vx.trace({token});
            return {{scores: Array.from(t.scores), weights: Array.from(t.weights), mixed: Array.from(t.mixed),
                     error: t.error}}; }}""")
        ref = heads.trace(record, p["head"], token)
        assert np.abs(np.array(got["scores"]) - ref.scores).max() < 1e-9
        assert np.abs(np.array(got["weights"]) - ref.weights).max() < 1e-12
        assert np.abs(np.array(got["mixed"]) - ref.mixed).max() < 1e-9
        assert abs(got["error"] - ref.output_error) < 1e-9 and got["error"] < 1e-5  # the model's own output
        shown = float(page.locator(caption).evaluate("el => el.dataset.error"))
        assert shown == got["error"]
    assert calls == []
    ctx.close()


def test_the_explorer_uses_the_screen_and_goes_full_screen(app_url, browser, dino_in_cache):
    """DINO ViT-S/8 shape on the cat at 224 px: at 1920×1080 the whole map is on the first screen (nothing cut at
    its bottom) and at least 30% of the page's width; at 1280×720 in projector mode the bar, the map and the 13-step
    layer strip fit one screen, and every slider keeps its label and value on its line; the full-screen button
    shows the explorer alone."""
    link = "image=cat&model=DINO%20ViT-S%2F8&side=224"
    ctx, page = open_tab(browser, app_url, "attention", 1920, 1080, query=link)
    page.wait_for_function(f"() => document.querySelector('{CAPTION}')?.dataset.count > 0", timeout=120_000)
    page.evaluate("() => window.scrollTo(0, 0)")
    big = page.locator("#attention-explorer .vx-big canvas").bounding_box()
    assert big["width"] >= 0.3 * 1920 and big["y"] + big["height"] <= 1080, big
    ctx.close()
    ctx, page = open_tab(browser, app_url, "attention", 1280, 720, query=link + "&projector=1")
    page.wait_for_function(f"() => document.querySelector('{CAPTION}')?.dataset.count > 0", timeout=120_000)
    page.evaluate("() => document.querySelector('#attention-explorer').scrollIntoView()")
    bar = page.locator("#attention-explorer .vx-bar").bounding_box()
    strip = page.locator("#attention-explorer .vx-strip").bounding_box()
    assert page.locator("#attention-explorer .vx-step[data-l]").count() == 13  # 12 layers and the rollout
    assert page.locator("#attention-explorer .vx-class").count() == 1  # and the cell that says DINO has no class
    assert strip["y"] + strip["height"] - bar["y"] <= 720 and strip["y"] + strip["height"] <= 720
    for label in page.locator("#attention-explorer .vx-bar label").all():  # one line each: label, control, value
        parts = label.evaluate("el => [...el.querySelectorAll('input, output, select')].map((c) => "
                               "c.getBoundingClientRect().top)")
        top = label.bounding_box()["y"]
        assert all(abs(p - top) < 20 for p in parts), label.inner_text()
    button = page.get_by_role("button", name="Full screen")
    button.click()
    page.wait_for_function("() => document.fullscreenElement === document.querySelector('#attention-explorer .vx')",
                           timeout=5_000)
    sync_api.expect(page.locator("#attention-explorer .vx-full")).to_have_text("Leave full screen")
    page.locator("#attention-explorer .vx-full").click()
    page.wait_for_function("() => document.fullscreenElement === null", timeout=5_000)
    ctx.close()
