"""Compute on this device, in Chromium: a picture chosen in #device-picture runs through the model in the browser
(ONNX Runtime Web, served by the app) and is never sent; what the browser computes agrees with the server's."""

from __future__ import annotations

import base64
import contextlib
import copy
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from browser_support import idle, sync_api

from vitviz.models import listing
from vitviz.core import attention as att
from vitviz.core import images
from vitviz.models import cache, device
from vitviz.specs import registry

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[1] / "vitviz" / "assets" / "examples"
SHARP = "vitviz tiny, sharpened (q ×8)"


def _device_page(browser, app_url, picture: Path, model: str | None = None):
    """The Attention tab opened with device=1 (and ``model``), ``picture`` chosen in #device-picture: (page, what
    the page sent to the server after the choice, the browser's numbers)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    query = "?tab=attention&device=1" + (f"&model={quote(model)}" if model else "")
    opening = []
    page.on("request", lambda r: opening.append((r.method, r.url)) if "heartbeat" not in r.url else None)
    page.goto(app_url + query)
    page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent.includes('MB')",
                           timeout=120_000)
    idle(page)
    # opening the page on the device path asks the server for no analysis: no explorer data, no server picture
    assert not [u for _, u in opening if "/vitviz/explorer/" in u or "/upload" in u], opening
    assert any("/vitviz/device-manifest" in u for _, u in opening), opening
    posts = [u for m, u in opening if m == "POST"]
    if model is None:  # the page opened in the browser: at most the model's file made, when it was not yet
        assert len(posts) <= 1 and all("/queue/join" in u for u in posts), posts
    if model:
        page.wait_for_function("(m) => document.querySelector('#device-panel .vx-dev-what').textContent.startsWith(m)",
                               arg=model, timeout=60_000)
    sent = []
    page.on("request", lambda r: sent.append((r.method, r.url, r.post_data_buffer or b""))
            if "heartbeat" not in r.url else None)
    page.locator("#device-picture").set_input_files(str(picture))
    page.wait_for_function("() => Number(document.querySelector('#device-panel .vx-device').dataset.done) > 0",
                           timeout=120_000)
    page.wait_for_function("() => document.querySelector('#attention-explorer .vx').__vx.p?.local && "
                           "document.querySelector('#attention-explorer .vx').__vx.cls", timeout=30_000)
    page.wait_for_timeout(800)  # anything the page would send after drawing
    got = page.evaluate("""() => { const d = document.querySelector('#device-panel').querySelector('.vx-device');
        const s = document.querySelector('#attention-explorer .vx').__vx;
        return {token: s.p.token, grid: s.p.grid, layers: s.p.layers, heads: s.p.heads, ms: Number(d.dataset.ms)}; }""")
    last = page.evaluate("""() => { const L = window.vitvizDevice.last; const o = {};
        for (const [k, v] of Object.entries(L.out)) o[k] = Array.from(v);
        return {input: Array.from(L.input), out: o}; }""")
    top = page.locator("#device-panel .vx-dev-top5 li").evaluate_all(
        "els => els.map((e) => [e.dataset.label, Number(e.dataset.p)])")
    return page, sent, got, last, top


def test_a_picture_chosen_on_the_device_is_drawn_and_never_sent(app_url, browser):
    picture = EXAMPLES / "scene_star.png"
    page, sent, got, last, top = _device_page(browser, app_url, picture)
    try:
        assert got["token"].startswith("device-") and got["grid"] == [8, 8] and got["layers"] == 4
        sync_api.expect(page.locator("#device-panel .vx-dev-top5 li").first).to_be_visible()
        assert len(top) == 5 and top[0][0] == "star", top
        caption = page.locator("#attention-explorer .vx-big figcaption")
        sync_api.expect(caption).to_contain_text("computed on this device")
        data = picture.read_bytes()
        uploads = [u for m, u, _ in sent if "/upload" in u]
        queued = [u for m, u, _ in sent if "/queue/join" in u]
        carrying = [u for _, u, body in sent if data[100:160] in body or base64.b64encode(data[:300])[:200] in body]
        assert uploads == [] and queued == [] and carrying == [], (uploads, queued, carrying)
        fetched = {u.rsplit("/", 1)[-1] for m, u, _ in sent if "/vitviz/" in u}
        assert fetched <= {"ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm",
                           device.graph_name(cache.get_model(registry.OFFLINE_KEY)), "8x8"}, fetched
    finally:
        page.close()


def test_the_device_link_opens_in_the_browser_and_the_explorer_still_reaches_the_server(app_url, browser):
    """A device link is opened by the page itself: once the model's file is made, opening it sends the server no
    event at all (gradio's select of the first tab as the page mounts included), yet the page is as the link says
    (the tab, the switch, the short side, contrast) and, the switch turned off, the explorer's settings reach the
    server's figures as after any load."""
    first = browser.new_page(viewport={"width": 1280, "height": 900})
    first.goto(app_url + "?tab=attention&device=1&side=96")  # the model's file made, if it was not yet
    first.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent.includes('MB')",
                            timeout=120_000)
    first.close()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    sent, addresses = [], []
    page.on("request", lambda r: sent.append((r.method, r.url, r.post_data or "")) if "heartbeat" not in r.url
            else None)
    page.on("framenavigated", lambda f: addresses.append(f.url) if f == page.main_frame else None)
    try:
        page.goto(app_url + "?tab=attention&device=1&side=96&contrast=1")
        page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        idle(page)
        page.wait_for_timeout(1000)
        assert [(m, u) for m, u, _ in sent if m == "POST"] == [], sent
        assert [u.split("?")[1] for _, u, _ in sent if "/vitviz/device-manifest" in u][-1].endswith("&side=96")
        side = page.locator(".tabitem:visible input[aria-label^='number input for short side']").first
        assert side.input_value() == "96", side.input_value()
        assert page.locator("#device-switch input").is_checked() and page.locator("#contrast input").is_checked()
        assert page.get_by_role("tab", name="Attention", exact=True).get_attribute("aria-selected") == "true"
        assert page.evaluate("() => location.search") == "?tab=attention&device=1&side=96&contrast=1"
        assert page.evaluate("() => document.body.classList.contains('vx-device-on')")
        # the switch off, an example: the server's explorer; a layer changed in it reaches the server's figures
        page.locator("#device-switch input").uncheck()
        page.locator(".tabitem:visible").first.locator(".gallery-item, tr.tr-body").nth(0).click()
        page.locator("#attention-explorer .vx-big canvas").wait_for(state="visible", timeout=120_000)
        idle(page)
        sent.clear()
        page.locator("#attention-explorer .vx-step").nth(1).click()  # layer 2
        page.wait_for_timeout(1500)  # the carrier's burst settles (300 ms), then the event
        carried = [b for m, u, b in sent if "/queue/join" in u and ('\\"layer\\": 2' in b or '\\"layer\\":2' in b)]
        assert carried, [b[:300] for _, u, b in sent if "/queue/join" in u]
    finally:
        page.close()


def test_what_the_device_computes_agrees_with_the_server(app_url, browser):
    """The same picture on the server's checkpoint path: the prepared input is the same to the bit (Pillow's
    resampling redone in the browser), the class-token maps and every layer's queries within 1e-5, the top 5 the
    same classes in the same order with probabilities within 1e-3."""
    picture = EXAMPLES / "scene_ring.png"
    page, _, got, last, top = _device_page(browser, app_url, picture)
    page.close()
    runner = cache.get_model(registry.OFFLINE_KEY)
    rgb = images.load_rgb(picture, images.INTAKE_SHORT_SIDE)
    want_x = device.reference_input(runner, rgb, 64)
    x = np.array(last["input"], np.float32).reshape(want_x.shape)
    assert np.array_equal(x, want_x), float(np.abs(x - want_x).max())
    _agrees_with_the_server(runner, rgb, last, top, 1e-5)  # the manifest's agreement, and then some


def _agrees_with_the_server(runner, rgb: np.ndarray, last: dict, top: list, within: float) -> None:
    """The device's class-token maps and every layer's queries within ``within`` of their largest value of the
    server's own forward (the checkpoint's own size); its top 5 the same classes, probabilities within 1e-3."""
    from vitviz.analyses.attention import analyse
    from vitviz.analyses.classify import top_k

    a = analyse(runner, rgb, own_size=True)
    cls = np.array(last["out"]["cls"], np.float32).reshape(a.maps.cls.shape)
    assert np.abs(cls - a.maps.cls).max() <= within * a.maps.cls.max()
    for layer, keys in enumerate(a.maps.keys):
        q = np.array(last["out"][f"q{layer}"], np.float32).reshape(keys.q.shape)
        assert np.abs(q - keys.q).max() <= within * np.abs(keys.q).max(), layer
    server = top_k(a.maps.logits[0], runner.labels)
    assert [label for label, _ in top] == list(server)
    assert max(abs(p - server[label]) for label, p in top) < 1e-3


def test_on_a_sharpened_model_the_device_and_the_server_draw_the_same_contours(app_url, browser):
    """The offline model with its queries ×8 (sharper attention, where a small difference moves a contour most):
    the mass-threshold contour of every layer's head mean from the device's numbers equals the server's."""
    import torch

    from vitviz.analyses.attention import probe_for
    from vitviz.views import use_model

    tiny = cache.get_model(registry.OFFLINE_KEY)
    module = copy.deepcopy(tiny.trace(lambda m, _f: m))
    with torch.no_grad():
        for block in module.blocks:
            dim = block.attn.qkv.weight.shape[1]
            block.attn.qkv.weight[:dim] *= 8
            block.attn.qkv.bias[:dim] *= 8
    key = use_model(module, SHARP, labels=tiny.labels, mean=tiny.mean, std=tiny.std, resolution=64)
    try:
        sharp = cache.get_model(key)
        picture = EXAMPLES / "scene_star.png"
        page, _, got, last, _ = _device_page(browser, app_url, picture, model=SHARP)
        page.close()
        rgb = images.load_rgb(picture, images.INTAKE_SHORT_SIDE)
        side = got["grid"][0] * sharp.spec.patch  # the page's short side, as the device ran it
        maps = sharp.run(probe_for(sharp, own_size=True),
                         torch.from_numpy(device.reference_input(sharp, rgb, side)))  # the server's own forward
        cls = np.array(last["out"]["cls"], np.float32).reshape(maps.cls.shape)
        assert np.abs(cls - maps.cls).max() < 1e-3 * maps.cls.max()
        for layer in range(maps.layers):
            mine = att.mass_mask(cls[layer].mean(0).reshape(maps.grid), 0.6)[0]
            theirs = att.mass_mask(maps.cls[layer].mean(0).reshape(maps.grid), 0.6)[0]
            assert np.array_equal(mine, theirs), layer
            assert mine.sum() < mine.size / 2, layer  # a contour, not the whole picture
    finally:
        listing.remove(SHARP)
        cache.forget(SHARP)


def test_classify_computes_its_top5_on_the_device_as_the_server_does(app_url, browser):
    """The Classify tab's switch: the picture chosen there is classified in the browser at the checkpoint's own size
    (this tab's server path): the same five classes in the same order, probabilities within 1e-3, nothing sent."""
    from vitviz.analyses.attention import analyse
    from vitviz.analyses.classify import top_k

    picture = EXAMPLES / "scene_ring.png"
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(app_url + "?tab=classify")
        page.wait_for_selector("#classify-maps img", state="attached", timeout=120_000)
        idle(page)
        page.locator("#classify-device-switch input").check()
        page.wait_for_function("() => document.querySelector('#classify-device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        sent = []
        page.on("request", lambda r: sent.append(r.url) if "/upload" in r.url or "/queue/join" in r.url else None)
        page.locator("#classify-device-picture").set_input_files(str(picture))
        # (the switch computed the tab's own example on the device first: the page's one picture until a hand
        # chooses one)
        page.wait_for_function("() => document.querySelector('#classify-device-panel .vx-device')"
                               ".dataset.from === 'hand'", timeout=120_000)
        top = page.locator("#classify-device-panel .vx-dev-top5 li").evaluate_all(
            "els => els.map((e) => [e.dataset.label, Number(e.dataset.p)])")
        page.wait_for_timeout(500)
        assert sent == []
    finally:
        page.close()
    runner = cache.get_model(registry.OFFLINE_KEY)
    a = analyse(runner, images.load_rgb(picture, images.INTAKE_SHORT_SIDE), own_size=True)
    server = top_k(a.maps.logits[0], runner.labels)
    assert [label for label, _ in top] == list(server)
    assert max(abs(p - server[label]) for label, p in top) < 1e-3


WHOLE = "a DINO-shaped ViT (no classes)"


@contextlib.contextmanager
def _whole_model():
    """A small DINO-shaped ViT (no classes, 8-px patches, 112 px) offered as :data:`WHOLE` while the block runs."""
    import torch
    from transformers import ViTConfig, ViTModel

    from vitviz.views import use_model

    torch.manual_seed(0)
    module = ViTModel(ViTConfig(image_size=112, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=128), add_pooling_layer=False).eval()
    use_model(module, WHOLE, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), resolution=112)
    try:
        yield
    finally:
        listing.remove(WHOLE)
        cache.forget(WHOLE)


SERVER_ANSWERED = ("() => { const s = document.querySelector('#attention-explorer .vx')?.__vx;"
                   " return s?.p && !s.p.local && s.cls && s.img; }")
"""The explorer shows the server's answer (not one computed on the device), with its class row and picture."""

DONE = "(n) => Number(document.querySelector('#device-panel .vx-device')?.dataset.done) >= n"
"""The device panel has computed at least n pictures."""


def _whole_page(browser, app_url: str, side: int):
    """The Attention tab on the device with :data:`WHOLE` at ``side``, the cat (451×300) chosen and computed once."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(app_url + f"?tab=attention&device=1&side={side}&model={quote(WHOLE)}")
    page.wait_for_function("(m) => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                           ".startsWith(m)", arg=WHOLE, timeout=120_000)
    page.locator("#device-picture").set_input_files(str(EXAMPLES / "cat.png"))
    page.wait_for_function(DONE, arg=1, timeout=120_000)
    return page


def test_a_model_without_classes_sees_the_whole_picture_on_the_device_as_on_the_server(app_url, browser):
    """One input per model: a model without classes sees the whole picture (short side at the side asked, aspect
    kept, whole patches) in every view, the device included. The device's input equals the server's to the bit
    (Pillow's bicubic redone in the browser), its grid is the server's 14×21, and its maps agree with the server's
    within the agreement the manifest states."""
    from vitviz.analyses.attention import analyse

    with _whole_model():
        picture = EXAMPLES / "cat.png"  # 451×300: not square
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(app_url + f"?tab=attention&device=1&side=112&model={quote(WHOLE)}")
        page.wait_for_function("(m) => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".startsWith(m)", arg=WHOLE, timeout=120_000)
        page.locator("#device-picture").set_input_files(str(picture))
        page.wait_for_function("() => Number(document.querySelector('#device-panel .vx-device').dataset.done) > 0",
                               timeout=120_000)
        got = page.evaluate("""() => { const L = window.vitvizDevice.last;
            const s = document.querySelector('#attention-explorer .vx').__vx;
            return {input: Array.from(L.input), cls: Array.from(L.out.cls), grid: s.p.grid,
                    status: document.querySelector('#device-panel .vx-dev-status').textContent}; }""")
        page.close()
        runner = cache.get_model(WHOLE)
        assert runner.input_policy == "keep"
        rgb = images.load_rgb(picture)  # the browser reads the file at full size, as this does
        a = analyse(runner, rgb, 112)
        assert got["grid"] == list(a.maps.grid) == [14, 21]
        want = device.reference_input(runner, rgb, 112)
        x = np.array(got["input"], np.float32).reshape(want.shape)
        assert np.array_equal(x, want), float(np.abs(x - want).max())
        cls = np.array(got["cls"], np.float32).reshape(a.maps.cls.shape)
        assert (np.abs(cls - a.maps.cls).max(-1) / a.maps.cls.max(-1)).max() <= device.AGREEMENT
        assert "168×112 px" in got["status"]


def test_a_link_within_the_page_that_changes_only_the_side_computes_the_devices_picture_again(app_url, browser):
    """A link opened within the page (a lesson step, Back, a pasted link) sets the short side by a script, which
    fires no slider release: the device's own event has a door the page opens then (``Tab.by_hand``), so the
    picture is computed again at the side the link says (it was not: the panel kept the old side's maps). No
    reload, and nothing uploaded."""
    with _whole_model():
        page = _whole_page(browser, app_url, 96)
        idle(page)
        state = """() => { const D = window.vitvizDevice, s = document.querySelector('#attention-explorer .vx').__vx;
            return {side: D.last.side, grid: s.p.grid,
                    done: Number(document.querySelector('#device-panel .vx-device').dataset.done),
                    marker: window.__stay === 1, link: window.location.search}; }"""
        first = page.evaluate(state)
        assert first["side"] == 96 and first["grid"] == [12, 18], first
        sent = []
        page.on("request", lambda r: sent.append(r.url) if "/upload" in r.url else None)
        page.evaluate("() => { window.__stay = 1; }")
        page.evaluate("(q) => window.vitvizLink.go(q)", f"?tab=attention&device=1&side=128&model={quote(WHOLE)}")
        page.wait_for_function(DONE, arg=2, timeout=120_000)
        page.wait_for_timeout(1000)  # a run that would follow (none should)
        second = page.evaluate(state)
        page.close()
        assert second["side"] == 128 and second["grid"] == [16, 24] and second["done"] == 2, second
        assert second["marker"] and "side=128" in second["link"] and not sent, (second, sent)


def test_the_shapes_model_answering_a_photo_on_the_device_says_so_as_the_server_does(app_url, browser):
    """The offline model on a photo: its top 5 are its nearest shapes, said so, with the server's warning; the side
    asked (224) is not the side it runs at (64), said so; a shape scene gets plain labels."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(app_url + "?tab=attention&device=1&side=224")
        page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        done = "(n) => Number(document.querySelector('#device-panel .vx-device').dataset.done) >= n"
        page.locator("#device-picture").set_input_files(str(EXAMPLES / "cat.png"))
        page.wait_for_function(done, arg=1, timeout=120_000)
        labels = page.locator("#device-panel .vx-dev-top5 li").evaluate_all("els => els.map((e) => e.dataset.label)")
        assert len(labels) == 5 and all(label.startswith("nearest shape: ") for label in labels), labels
        warning = page.locator("#device-panel .vx-dev-warning")
        sync_api.expect(warning).to_be_visible()
        sync_api.expect(warning).to_contain_text("trained only on generated shape scenes")
        sync_api.expect(page.locator("#device-panel .vx-dev-status")).to_contain_text("runs at 64 px only")
        page.locator("#device-picture").set_input_files(str(EXAMPLES / "scene_ring.png"))
        page.wait_for_function(DONE, arg=2, timeout=120_000)
        labels = page.locator("#device-panel .vx-dev-top5 li").evaluate_all("els => els.map((e) => e.dataset.label)")
        assert labels[0] == "ring" and not any(label.startswith("nearest") for label in labels), labels
        sync_api.expect(warning).to_be_hidden()
    finally:
        page.close()


def test_the_classify_device_link_turns_its_switch_on_and_the_switch_writes_the_link(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(app_url + "?tab=classify&device=1")
        page.wait_for_function("() => document.querySelector('#classify-device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        assert page.locator("#classify-device-switch input").is_checked()
        assert page.evaluate("() => document.body.classList.contains('vx-classify-device-on')")
        page.locator("#classify-device-switch input").uncheck()
        page.wait_for_function("() => !location.search.includes('device=1')", timeout=10_000)
        page.locator("#classify-device-switch input").check()
        page.wait_for_function("() => location.search.includes('device=1')", timeout=10_000)
    finally:
        page.close()


def test_on_a_device_page_the_other_device_tabs_compute_the_picture_chosen_there_when_selected(app_url, browser):
    """A device page's Forward pass and Classify tabs, selected by hand, turn their switches on and compute the
    picture chosen in the Attention tab: the link keeps device=1, nothing is uploaded or queued. (Their switch clicked
    by the page as the tab was still being drawn came back unchecked and took device=1 out of the link.)"""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(app_url + "?tab=attention&device=1")
        page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        page.locator("#device-picture").set_input_files(str(EXAMPLES / "cat.png"))
        page.wait_for_function("() => window.vitvizDevice?.done > 0", timeout=120_000)
        sent = []
        page.on("request", lambda r: sent.append((r.url, r.post_data or "")) if "/upload" in r.url or "/queue/join"
                in r.url else None)
        seen = {}
        for name, tab, panel in (("Forward pass", "forward", "vitvizForwardDevice"),
                                 ("Classify", "classify", "vitvizClassifyDevice")):
            page.get_by_role("tab", name=name).click()
            page.wait_for_function(f"() => window.{panel}?.done > 0", timeout=120_000)
            page.wait_for_timeout(1500)  # a switch turned back off would show by now
            seen[tab] = page.evaluate(f"""() => [location.search, window.{panel}.from,
                document.querySelector('#{tab}-device-switch input').checked]""")
    finally:
        page.close()
    assert seen == {"forward": ["?tab=forward&device=1", "hand", True],
                    "classify": ["?tab=classify&device=1", "hand", True]}, seen
    # the server may be asked for a tab's graph description (its manifest, made once per model and side), never
    # the picture
    assert [u for u, _ in sent if "/upload" in u] == [], sent
    assert all('"data":["vitviz tiny' in body and "path" not in body for _, body in sent), sent


GPU_ARGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking", "--disable-component-update"]
"""Chromium with WebGPU on SwiftShader (a CPU Vulkan): an adapter, so the page loads ONNX Runtime's WebGPU build."""


def test_webgpu_runs_where_the_browser_has_an_adapter_and_webassembly_where_not(app_url, browser):
    """The tests' Chromium (--disable-gpu) has no WebGPU adapter: WebAssembly runs and says so. Chromium with
    SwiftShader's WebGPU: the page loads the WebGPU build, the graph runs there, the page says "WebGPU", and what it
    computes agrees with the server's forward (the class token's maps within 1e-4 of their largest value, each
    layer's queries within 1e-4 of theirs: a GPU's float32 sums in another order; the top 5 the same classes)."""
    from browser_support import CHROMIUM

    picture = EXAMPLES / "scene_ring.png"
    backend = "() => document.querySelector('#device-panel .vx-device').dataset.backend"
    page, sent, _, _, _ = _device_page(browser, app_url, picture)
    try:
        assert page.evaluate(backend) == "wasm"
        assert "WebAssembly" in page.locator("#device-panel .vx-dev-status").inner_text()
        assert not [u for _, u, _ in sent if "webgpu" in u or "asyncify" in u]  # one build downloaded, not both
    finally:
        page.close()
    gpu = browser.browser_type.launch(executable_path=CHROMIUM, args=GPU_ARGS)
    try:
        page, sent, got, last, top = _device_page(gpu, app_url, picture)
        status = page.locator("#device-panel .vx-dev-status").inner_text()
        ran = page.evaluate(backend)
        page.close()
        assert ran == "webgpu", status
        assert "WebGPU" in status and "WebAssembly" not in status, status
        fetched = {u.rsplit("/", 1)[-1] for _, u, _ in sent if "/vitviz/ort/" in u}
        assert fetched <= {"ort.webgpu.min.js", "ort-wasm-simd-threaded.asyncify.mjs",
                           "ort-wasm-simd-threaded.asyncify.wasm"}, fetched
        runner = cache.get_model(registry.OFFLINE_KEY)
        _agrees_with_the_server(runner, images.load_rgb(picture, images.INTAKE_SHORT_SIDE), last, top, 1e-4)
    finally:
        gpu.close()


def test_a_side_the_device_cannot_afford_runs_at_the_largest_it_can_and_says_so(app_url, browser):
    """The probe: asked for 320 px, a device that has not run the graph measures itself first on a blank 224-px
    picture, and runs the side asked when it affords it. Made ten times slower than allowed at 320 px, the next
    picture runs at the largest whole-patch side it affords (the page's largestSide, tested under Node), and the
    panel says which side and why; the explorer's grid is that side's."""
    with _whole_model():
        page = _whole_page(browser, app_url, 320)
        first = page.evaluate("""() => { const D = window.vitvizDevice;
            return {probed: D.probed, side: D.last.side, asked: D.last.asked, speed: D.speed.get(D.m.file),
                    status: document.querySelector('#device-panel .vx-dev-status').textContent}; }""")
        assert first["probed"]["side"] == 224 and first["probed"]["ms"] > 0, first
        assert first["side"] == first["asked"] == 320 and first["speed"] > 0, first
        assert "480×320 px" in first["status"] and "largest side" not in first["status"], first["status"]
        # ten times slower than a 320-px forward may take (5 s here: the server's is far less)
        page.evaluate("""() => { const D = window.vitvizDevice, m = D.m;
            const macs = m.cost.token * (1 + 40 * 60) + m.cost.pair * (1 + 40 * 60) ** 2;
            D.speed.set(m.file, 10 * 5000 / macs); }""")
        speed = page.evaluate("() => window.vitvizDevice.speed.get(window.vitvizDevice.m.file)")  # the run remeasures
        page.locator("#device-picture").set_input_files(str(EXAMPLES / "scene_star.png"))
        page.wait_for_function(DONE, arg=2, timeout=120_000)
        second = page.evaluate("""() => { const D = window.vitvizDevice, s = document.querySelector('#attention-explorer .vx').__vx;
            return {side: D.last.side, asked: D.last.asked, afford: D.last.afford, grid: s.p.grid, m: D.m,
                    panel: document.querySelector('#device-panel .vx-device').dataset.side,
                    status: document.querySelector('#device-panel .vx-dev-status').textContent}; }""")
        page.close()
        side = second["side"]
        assert second["asked"] == 320 and 64 <= side < 320 and side % 8 == 0 and second["panel"] == str(side), second
        from PIL import Image

        w, h = Image.open(EXAMPLES / "scene_star.png").size
        m = second["m"]

        def macs(s: int) -> float:  # the picture's tokens at short side s (the whole picture, whole patches)
            rh, rw = max(s, round(h * s / min(w, h))), max(s, round(w * s / min(w, h)))
            t = m["prefix"] + (rh // 8) * (rw // 8)
            return m["cost"]["token"] * t + m["cost"]["pair"] * t * t

        def affords(s: int) -> bool:
            return speed * macs(s) <= max(3 * m["server_ms"] * macs(s) / macs(320), 5000)

        assert not affords(320) and next(s for s in range(320, 63, -8) if affords(s)) == side, second
        assert second["afford"]["ms"] <= second["afford"]["allowed"] == 5000, second
        assert second["grid"] == [round(h * side / min(w, h)) // 8, round(w * side / min(w, h)) // 8], second
        status = second["status"]
        assert f"{second['grid'][1] * 8}×{second['grid'][0] * 8} px: the largest side expected to run here within 5.0 s" \
            in status and "the picture was not sent" in status, status
        ms = speed * macs(320)  # said as device.js's seconds() says it
        said = f"{ms / 1000:.1f} s" if ms < 10_000 else f"{int(ms / 1000 + 0.5)} s"
        assert f"at 320 px it would take about {said}, so switch this off and upload the picture" in status, status


def test_the_forward_pass_is_computed_and_drawn_on_the_device_as_the_server_shows_it(app_url, browser):
    """The Forward pass's switch: the picture chosen there runs through the graph in the browser, and the view is
    drawn from its outputs as the server draws it for the same picture: the same first sentence, the same stages
    and shapes, the residual stream's numbers within float32's reach, the lens table's classes and percentages and
    the lens map's own words; the lens's layer moved in the page redraws the map with no new forward and nothing
    sent, and the link follows it."""
    from vitviz.analyses.forward import forward_pass
    from vitviz.render.plotting import alt_of
    from vitviz.specs import views as declared
    from vitviz.views.forward import lens_classes, show_forward_pass

    picture = EXAMPLES / "scene_ring.png"
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(app_url + "?tab=forward&device=1")
        page.wait_for_function("() => document.querySelector('#forward-device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", timeout=120_000)
        idle(page)
        sent = []
        page.on("request", lambda r: sent.append(r.url) if r.method == "POST" or "/upload" in r.url else None)
        page.locator("#forward-device-picture").set_input_files(str(picture))
        page.wait_for_function("() => Number(document.querySelector('#forward-device-panel .vx-device')"
                               ".dataset.drawn) > 0", timeout=120_000)
        drawn = page.evaluate("""() => ({
            summary: document.querySelector('#forward-device-diagram .vx-fd-summary').textContent,
            stages: [...document.querySelectorAll('#forward-device-diagram .vx-stage strong')]
                .map((e) => e.textContent),
            shapes: [...document.querySelectorAll('#forward-device-diagram .vx-stage code')].map((e) => e.textContent),
            maps: document.querySelectorAll('#forward-device-residual .vx-fd-maps canvas').length,
            heads: [...document.querySelectorAll('#forward-device-lens th[scope=col]')].slice(1).map((e) => e.title),
            cells: [...document.querySelectorAll('#forward-device-lens tr')].slice(1).map((r) =>
                [...r.querySelectorAll('td')].map((d) => d.textContent)),
            map: document.querySelector('#forward-device-lens .vx-fd-lensmap canvas').getAttribute('aria-label'),
            server: getComputedStyle(document.querySelector('#forward-residual')).display,
            download: getComputedStyle(document.querySelector('#forward-bundle-button')).display,
            out: Object.fromEntries(['updates', 'cosine', 'norms'].map((k) =>
                [k, Array.from(window.vitvizForwardDevice.last.out[k])])),
            done: window.vitvizForwardDevice.done})""")
        page.evaluate("""() => { const r = document.querySelector('#forward-device-lens input[type=range]');
            r.value = '2'; r.dispatchEvent(new Event('input', { bubbles: true })); }""")
        page.wait_for_timeout(700)
        after = page.evaluate("""() => ({map: document.querySelector('#forward-device-lens .vx-fd-lensmap canvas')
            .getAttribute('aria-label'), done: window.vitvizForwardDevice.done, link: location.search})""")
    finally:
        page.close()
    assert [u for u in sent if "/upload" in u or "/queue/join" in u] == [], sent
    runner = cache.get_model(registry.OFFLINE_KEY)
    rgb = images.load_rgb(picture, images.INTAKE_SHORT_SIDE)
    values = {"model": runner.spec.key, "resolution": 224, "layer": declared.FORWARD["layer"].default,
              "cmap": "viridis"}
    shown = show_forward_pass(rgb, values)
    assert drawn["summary"] == shown.texts["text"] + " Computed on this device."
    assert drawn["stages"] == [s["name"] for s in shown.numbers["stages"]]
    assert drawn["shapes"] == [" × ".join(f"{n:,}" for n in s["shape"]) for s in shown.numbers["stages"]]
    assert drawn["server"] == "none" and drawn["maps"] == runner.depth + 1
    assert drawn["download"] == "none"  # it would hold the server's view of another picture
    res = shown.numbers["residual"]
    for got, want in ((drawn["out"]["updates"][:runner.depth], res["attention_update"]),
                      (drawn["out"]["updates"][runner.depth:], res["mlp_update"]),
                      (drawn["out"]["cosine"], res["cls_cosine_to_last"])):
        assert np.abs(np.array(got) - want).max() <= 1e-5 * np.abs(want).max(), (got, want)
    _fitted, fp = forward_pass(runner, rgb, 224)
    chosen = lens_classes(fp.lens, fp.probs)
    assert drawn["heads"] == [runner.labels[c] for c in chosen]
    assert drawn["cells"] == [[f"{fp.lens[i, c]:.1%}" for c in chosen] for i in range(runner.depth)]
    assert drawn["map"] == alt_of(shown.figures["lens_map"]) and "after block 4" in drawn["map"]
    assert after["map"] == alt_of(show_forward_pass(rgb, values | {"layer": 2}).figures["lens_map"])
    assert after["done"] == drawn["done"] and "fp_layer=2" in after["link"]


def test_the_guided_tour_on_a_device_page_computes_its_forward_pass_steps_on_the_device(app_url, browser):
    """A device page stays one through the tour (the lesson keeps device=1): the Forward-pass steps are computed in
    the browser on the tour's own picture (the example its links name, fetched as any page shows it), the residual
    step shows the device's maps in the first screen at 1280×720, the lens step reads the layer its link sets, the
    Attention steps draw the same picture, and nothing reloads."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(app_url + "?lesson=tour&step=5&device=1")
        page.wait_for_function("() => Number(document.querySelector('#forward-device-panel .vx-device')"
                               "?.dataset.drawn) > 0", timeout=120_000)
        page.evaluate("() => { window.__stayed = 'this page'; }")
        page.wait_for_timeout(1500)  # the step's section brought up
        maps = page.evaluate("""() => [...document.querySelectorAll('#forward-device-residual .vx-fd-maps canvas')]
            .map((c) => { const r = c.getBoundingClientRect(); return [r.top, r.bottom]; })""")
        assert maps and all(0 <= top and bottom <= 720 for top, bottom in maps), maps
        assert page.evaluate("() => window.vitvizForwardDevice.from") == "scene_star"
        page.keyboard.press("ArrowRight")  # step 6: the Attention tab, on the device
        page.wait_for_function("() => window.vitvizDevice?.done > 0", timeout=120_000)
        assert page.evaluate("() => window.vitvizDevice.from") == "scene_star"
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => document.querySelector('#lesson-bar')?.textContent.includes('step 7 of')")
        page.keyboard.press("ArrowRight")  # step 8: the lens after block 3
        page.wait_for_function("() => document.querySelector('#forward-device-lens .vx-fd-lensmap canvas')"
                               "?.getAttribute('aria-label').includes('after block 3')", timeout=60_000)
        assert "device=1" in page.evaluate("() => location.search")
        assert page.evaluate("() => window.__stayed") == "this page"
        assert page.evaluate("() => window.vitvizForwardDevice.done") == 1  # the same picture: not run again
    finally:
        page.close()


WATCH = """window.__long = []; window.__said = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]); })
  .observe({ type: 'longtask', buffered: true });
document.addEventListener('DOMContentLoaded', () => new MutationObserver(() => {
  const s = document.querySelector('#device-panel .vx-dev-status')?.textContent;
  if (s && s !== window.__said[window.__said.length - 1]) window.__said.push(s);
}).observe(document.body, { childList: true, characterData: true, subtree: true }));"""
"""An init script: the page's long tasks ([start, duration] in ms, Chromium's PerformanceObserver) and every text the
device panel's status showed, in order."""
READY = "() => document.querySelector('#device-panel .vx-dev-what')?.textContent.includes('MB')"


def _compute_watched(page, app_url: str, picture: Path) -> dict:
    """The device link opened, ``picture`` chosen in the device's box and computed: the longest main-thread task
    from the choice until it is drawn (ms), every status said meanwhile, the page's uncaught errors."""
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app_url + "?tab=attention&device=1")
    page.wait_for_function(READY, timeout=120_000)
    idle(page)
    since = page.evaluate("() => { window.__said.length = 0; return performance.now(); }")
    page.locator("#device-picture").set_input_files(str(picture))
    page.wait_for_function(DONE, arg=1, timeout=120_000)
    page.wait_for_function("() => document.querySelector('#attention-explorer .vx').__vx.p?.local && "
                           "document.querySelector('#attention-explorer .vx-big canvas')", timeout=30_000)
    page.wait_for_timeout(500)  # the explorer's drawing after the answer, and its long tasks' reports
    got = page.evaluate("""(t) => ({ ran: window.vitvizDevice.ranAt ?? Infinity, long: window.__long.filter(([s]) => s >= t),
        said: window.__said, status: document.querySelector('#device-panel .vx-dev-status').textContent })""", since)
    working = [d for s, d in got["long"] if s < got["ran"]]  # begun while the device prepared and computed
    drawing = [d for s, d in got["long"] if s >= got["ran"]]  # the explorer drawing what it computed
    return got | {"longest": max(working, default=0.0), "drawing": max(drawing, default=0.0), "errors": errors}


def test_the_page_answers_while_the_device_prepares_and_computes(app_url, browser):
    """A first visit (nothing in the browser's cache): ONNX Runtime's WebAssembly build prepares the model and runs it
    in its proxy worker (ort.env.wasm.proxy; the worker is the runtime's own script), not on the page's main thread
    (which was blocked 1.4 s with the offline model, 25 s with DINO ViT-S/8's shape), and nothing is thrown. How long
    the main thread's tasks take is measured by benchmarks/device_main_thread.py, not here (a loaded machine)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.add_init_script(WATCH)
    try:
        page = ctx.new_page()
        got = _compute_watched(page, app_url, EXAMPLES / "scene_star.png")
        ran = page.evaluate("() => [window.ort.env.wasm.proxy, window.vitvizDevice.backend, window.vitvizDevice.gpu]")
        workers = [w.url.split("/vitviz/", 1)[-1] for w in page.workers]
    finally:
        ctx.close()
    assert "computed on this device" in got["status"], got["status"]
    assert ran == [True, "wasm", False], ran
    assert "ort/ort.wasm.min.js" in workers, workers  # ONNX Runtime's proxy worker: its session and forward
    assert got["errors"] == [], got["errors"]


def test_the_status_says_what_is_happening_and_a_second_visit_downloads_nothing(app_url, browser):
    """The panel's status says each step as it happens: a first visit downloads ONNX Runtime and the model (so
    much of so much), a second (the same browser: its cache holds both) reads the model from the cache, prepares
    and computes, and never says it is downloading (it said "downloading the model (1.2 MB, once)…" on every visit,
    while the runtime was being prepared)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.add_init_script(WATCH)
    try:
        first = _compute_watched(ctx.new_page(), app_url, EXAMPLES / "scene_star.png")
        second = _compute_watched(ctx.new_page(), app_url, EXAMPLES / "scene_ring.png")
    finally:
        ctx.close()
    said = first["said"]
    assert any(s.startswith("downloading ONNX Runtime: ") and " of 14.2 MB" in s for s in said), said
    assert any(s.startswith("downloading the model: ") for s in said), said
    assert [s for s in said if s.startswith("preparing ONNX Runtime and the model")], said
    said = second["said"]
    assert not [s for s in said if "downloading" in s], said
    steps = [next((i for i, s in enumerate(said) if s.startswith(start)), None)
             for start in ("reading the model from this browser's cache", "preparing ONNX Runtime and the model",
                           "computing the picture on this device")]
    assert None not in steps and steps == sorted(steps), said
    assert "computed on this device" in said[-1], said


def test_a_device_slower_than_the_server_says_so_on_the_first_screen_and_the_server_answers(app_url, browser):
    """A device slower than the server (standing in: a server forward of 0.5 ms, no 5-s floor): the switch turns
    off, the panel's words say why at the top of the first screen (they were hidden with the panel), the link's
    example is then the server's to answer and the explorer draws the server's maps (the first screen showed empty
    boxes); a picture chosen by hand is not sent: the words ask for its upload, in the box right under them. No
    uncaught error (explorer.js threw "Cannot read properties of null (reading 'fields')")."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.add_init_script("window.vitvizDeviceServer = { ms: 0.5, floor: 0 };")
    errors, sent = [], []
    in_view = """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""
    try:
        page = ctx.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(app_url + "?tab=attention&device=1&image=scene_star")
        page.wait_for_function(DONE, arg=1, timeout=120_000)
        status = page.locator("#device-panel .vx-dev-status")
        sync_api.expect(status).to_contain_text("more than three times the server's", timeout=10_000)
        sync_api.expect(status).to_contain_text("the server answers instead, for the example scene_star")
        page.wait_for_function(SERVER_ANSWERED, timeout=120_000)
        idle(page)
        assert not page.locator("#device-switch input").is_checked()
        assert page.evaluate("() => location.search") == "?tab=attention&image=scene_star"
        assert page.evaluate(in_view, "#device-panel .vx-dev-status"), "the words are not on the first screen"
        assert page.evaluate(in_view, "#attention-explorer .vx-big canvas")
        page.screenshot(path=str(Path(__import__("tempfile").gettempdir()) / "vitviz-device-fallback.png"))
        page.close()
        page = ctx.new_page()  # a picture chosen by hand: asked for, never sent
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: sent.append(r.url) if "/upload" in r.url or "/queue/join" in r.url else None)
        page.goto(app_url + "?tab=attention&device=1")
        page.wait_for_function(READY, timeout=120_000)
        page.locator("#device-picture").set_input_files(str(EXAMPLES / "scene_ring.png"))
        page.wait_for_function(DONE, arg=1, timeout=120_000)
        status = page.locator("#device-panel .vx-dev-status")
        sync_api.expect(status).to_contain_text("upload the picture in the box below")
        page.wait_for_timeout(1000)
        assert page.evaluate(in_view, "#device-panel .vx-dev-status")
        below = page.evaluate("""() => { const s = document.querySelector('#device-panel').getBoundingClientRect(),
            b = document.querySelector('.tabitem:has(#device-panel) .vx-picture').getBoundingClientRect();
            return b.height > 100 && b.top >= s.bottom - 1 && b.top < innerHeight; }""")
        assert below, "the picture box is not under the words"
        # no empty boxes where the server's figures will be, and no device box offered while the switch is off
        assert page.locator("#attn-crops").is_hidden() and page.locator("#device-panel .vx-dev-pick").is_hidden()
        page.screenshot(path=str(Path(__import__("tempfile").gettempdir()) / "vitviz-device-fallback-hand.png"))
        page.close()
    finally:
        ctx.close()
    assert errors == [] and sent == [], (errors, sent)


def test_while_the_switch_is_on_no_picture_leaves_through_the_tabs_own_box(app_url, browser):
    """With "Compute on this device" on, the device's own picture box is on the first screen (1280×720), and a
    photo given to the tab's own picture box (it was uploaded: POST /gradio_api/upload, then queue/join) is computed
    on the device instead: Chromium's request log shows no upload and no queued event."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    sent = []
    try:
        page.goto(app_url + "?tab=attention&device=1")
        page.wait_for_function(READY, timeout=120_000)
        idle(page)
        pick = page.evaluate("() => { const r = document.querySelector('#device-picture').getBoundingClientRect();"
                             " return [r.top, r.bottom, r.height]; }")
        page.on("request", lambda r: sent.append((r.method, r.url)) if "heartbeat" not in r.url else None)
        own = page.locator(".tabitem:has(#device-panel) input[type=file]:not(#device-picture)").first
        own.set_input_files(str(EXAMPLES / "scene_ring.png"))
        with contextlib.suppress(sync_api.TimeoutError):
            page.wait_for_function(DONE, arg=1, timeout=60_000)
        page.wait_for_timeout(1500)  # an upload, and the event after it, would be sent by now
        got = page.evaluate("() => [window.vitvizDevice.done, window.vitvizDevice.from, window.vitvizDevicePicture?.name]")
    finally:
        page.close()
    assert [u for _, u in sent if "/upload" in u or "/queue/join" in u] == [], sent
    assert got == [1, "hand", "scene_ring.png"], got
    assert pick[2] > 0 and 0 <= pick[0] and pick[1] <= 720, pick


def test_while_the_switch_is_on_a_lesson_files_picture_stays_on_the_device(app_url, browser, tmp_path):
    """A lesson file carrying its own picture, opened in the lesson maker while "Compute on this device" is on: the
    page asks first (the picture was sent through keep_picture whatever the switch said); declined, the picture is
    not sent (Chromium's request log: no keep_picture, upload or queued event) and the device panel computes it, as a
    picture dropped in its box."""
    body = base64.b64encode((EXAMPLES / "scene_ring.png").read_bytes()).decode()
    path = tmp_path / "mine.md"
    path.write_text(f"# Mine\n\n![the lesson's picture](data:image/png;base64,{body})\n\n"
                    "1. [Look where it looks.](?tab=attention&image=lesson)\n")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    sent, asked = [], []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    try:
        page.goto(app_url + "?tab=attention&device=1")
        page.wait_for_function(READY, timeout=120_000)
        idle(page)
        page.on("request", lambda r: sent.append((r.url, r.post_data or "")) if "heartbeat" not in r.url else None)
        page.get_by_text("Make a lesson from these views").first.click()
        page.locator("#lesson-file").set_input_files(str(path))
        sync_api.expect(page.locator("#lesson-said")).to_contain_text("its picture stayed on this device")
        page.wait_for_function(DONE, arg=1, timeout=120_000)
        page.wait_for_timeout(1000)  # a picture sent, and the event after it, would be sent by now
        got = page.evaluate("() => [window.vitvizDevice.from, window.vitvizDevicePicture?.name, "
                            "window.vitvizDevicePicture?.type, location.search]")
    finally:
        page.close()
    assert len(asked) == 1 and '"Compute on this device" is on' in asked[0], asked
    assert [u for u, d in sent if "keep_picture" in d or "/upload" in u or "/queue/join" in u] == [], sent
    assert got == ["hand", "mine.png", "image/png", "?tab=attention&device=1"], got


def test_a_device_link_whose_manifest_fails_has_the_server_answer_its_example(app_url, browser):
    """A fallback before anything ran here (a manifest's error: a model that cannot become a graph, say): the link's
    example is the server's to answer (it said "upload the picture in the box below" and the server's boxes stayed
    empty: only a run set the picture's name), and the link is opened again without device=1, once."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    errors, opened = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: opened.append(r.url) if "/vitviz/device-manifest" in r.url else None)
    page.route("**/vitviz/device-manifest*", lambda route: route.fulfill(
        status=200, content_type="application/json",
        body='{"error": "this model cannot become a graph here", "model": "vitviz-tiny"}'))
    try:
        page.goto(app_url + "?tab=attention&device=1&image=scene_star")
        status = page.locator("#device-panel .vx-dev-status")
        sync_api.expect(status).to_contain_text("This model cannot become a graph here", timeout=120_000)
        sync_api.expect(status).to_contain_text("the server answers instead, for the example scene_star")
        page.wait_for_function(SERVER_ANSWERED, timeout=120_000)
        idle(page)
        page.wait_for_timeout(1000)
        got = [page.evaluate("() => location.search"), page.locator("#device-switch input").is_checked()]
    finally:
        page.close()
    assert got == ["?tab=attention&image=scene_star", False], got
    assert len(opened) == 1 and errors == [], (opened, errors)
