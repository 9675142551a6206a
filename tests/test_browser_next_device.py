"""Compute on this device on the page at /next (render/web/app/device.mjs), in Chromium: the device link opens with
no event reaching the server, what the device computes equals the server's answer for the same picture (Classify's
top 5, the Forward pass's residual numbers), and a picture chosen while the switch is on is never uploaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from browser_support import ARGS  # noqa: F401  (Chromium is present, or this module is skipped)

from vitviz.app import panels, uploads
from vitviz.views import RECORDS, show

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[1] / "vitviz" / "assets" / "examples"

DONE = "([tab, n]) => Number(document.querySelector(`#next-device-${tab} .vx-device-panel`)?.dataset.done || 0) >= n"
"""The tab's device panel has computed at least n pictures."""
LAST = """(tab) => { const P = document.querySelector(`#next-device-${tab} .vx-device-panel`).__device;
  const o = {}; for (const [k, v] of Object.entries(P.last.out)) o[k] = Array.from(v);
  return {out: o, from: P.last.from, grid: P.last.grid}; }"""
"""What the tab's device panel computed last: the graph's outputs, the picture's origin ("hand" or the example's
name), the grid."""
TOP5 = ("(tab) => [...document.querySelectorAll(`#next-device-${tab} .vx-dev-top5 li`)]"
        ".map((e) => [e.dataset.label, Number(e.dataset.p)])")


def _watch(page) -> list[tuple[str, str]]:
    """Every request the page sends from now on (gradio's heartbeat left out): (method, URL)."""
    sent: list[tuple[str, str]] = []
    page.on("request", lambda r: sent.append((r.method, r.url)) if "heartbeat" not in r.url else None)
    return sent


def _to_server(sent) -> list[str]:
    """The requests that reach the server's work: gradio's queue or an upload."""
    return [u for _, u in sent if "/gradio_api/queue" in u or "/upload" in u or "/vitviz/explorer/" in u]


def _open(browser, app_url: str, query: str, done: int = 1):
    """/next?QUERY in a fresh 1280×720 context, once the tab's device panel has computed ``done`` pictures:
    (context, page, the requests sent since the page was asked for)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    sent = _watch(page)
    page.goto(f"{app_url}{panels.ROUTE}?{query}")
    tab = dict(p.split("=") for p in query.split("&"))["tab"]
    page.wait_for_function(DONE, arg=[tab, done], timeout=180_000)
    return ctx, page, sent


def _server(view: str, picture: str, settings: dict) -> dict:
    """The server's answer (the API's numbers) of ``view`` for the example ``picture``."""
    r = RECORDS[view]
    rgb = uploads.picture(uploads.example_path(picture))
    return show(view, rgb, r.view.check(settings)).numbers


def test_the_device_link_opens_with_no_server_event_and_draws_the_explorer(app_url, browser):
    """Once the model's file is made (a first visit), ?tab=attention&device=1 sends gradio's queue nothing: the
    store has the switch on, the Attention panel asks nothing and the explorer is drawn from what the device
    computed; a picture put in the Attention panel's upload box is computed here and never uploaded."""
    ctx, page, _ = _open(browser, app_url, "tab=attention&device=1")  # the manifest made, if it was not yet
    ctx.close()
    ctx, page, sent = _open(browser, app_url, "tab=attention&device=1")
    try:
        page.wait_for_function("() => document.querySelector('#next-device-attention .vxb-explorer canvas')",
                               timeout=30_000)
        page.wait_for_timeout(1000)  # anything the page would send after drawing
        assert _to_server(sent) == [], _to_server(sent)
        assert any("/vitviz/device-manifest?tab=attention" in u for _, u in sent)
        assert page.locator("#vx-device-attention-switch").is_checked()
        assert "device=1" in page.evaluate("() => location.search")
        assert page.locator("#vx-page .vx-link-notice").is_hidden()  # no "not on this page yet"
        got = page.evaluate(LAST, "attention")
        assert got["from"] == panels.page_spec()["picture"] and got["grid"] == [8, 8]
        # the explorer drew the device's maps: its state holds the class token's maps of every layer
        layers = page.evaluate("() => document.querySelector('#next-device-attention .vxb-explorer').__vx.cls.length")
        assert layers == 4 * (3 + 1) * 64  # (layers, heads and their mean, patches) of the offline model
        assert page.locator("#panel-attention .vx-out").is_hidden()  # the server's answer is not shown meanwhile
        sent.clear()
        page.locator("#panel-attention input[data-upload]").set_input_files(str(EXAMPLES / "scene_ring.png"))
        page.wait_for_function(DONE, arg=["attention", 2], timeout=60_000)
        page.wait_for_timeout(800)
        assert page.evaluate(LAST, "attention")["from"] == "hand"
        assert _to_server(sent) == [], _to_server(sent)
    finally:
        ctx.close()


def test_classify_on_the_device_gives_the_servers_top5_and_never_sends_the_picture(app_url, browser):
    """Classify's switch from the tab: its top 5 for the page's picture, then for a picture chosen in the device
    panel, are the server's (the same classes in the same order, probabilities within 1e-4: float32 softmax of
    the same logits); the chosen picture reaches neither the queue nor the upload route."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    try:
        page.goto(f"{app_url}{panels.ROUTE}?tab=classify")
        page.locator("#vx-device-classify-switch").check(timeout=120_000)
        page.wait_for_function(DONE, arg=["classify", 1], timeout=180_000)
        assert "device=1" in page.evaluate("() => location.search")
        model = page.evaluate("() => new URLSearchParams(location.search).get('classifier')")
        spec = panels.page_spec()
        settings = {"model": model or spec["keys"]["classifier"]["default"]}
        for picture in (spec["picture"], "scene_ring"):
            if picture == "scene_ring":
                sent = _watch(page)
                page.locator("#vx-device-classify-picture").set_input_files(str(EXAMPLES / "scene_ring.png"))
                page.wait_for_function(DONE, arg=["classify", 2], timeout=60_000)
                page.wait_for_timeout(800)
                assert _to_server(sent) == [], _to_server(sent)
            top = page.evaluate(TOP5, "classify")
            server = _server("classify", picture, settings)["top5"]
            assert [label for label, _ in top] == list(server)[:5], (top, server)
            assert max(abs(p - server[label]) for label, p in top) < 1e-4
    finally:
        ctx.close()


def test_the_forward_pass_on_the_device_gives_the_servers_numbers(app_url, browser):
    """The Forward pass on the device: each block's attention and MLP updates and the class token's cosine to its
    last state equal the server's numbers.residual for the same picture within 1e-4 of their largest value (float32
    through the same graph), and the stages' table names the server's shapes."""
    ctx, page, sent = _open(browser, app_url, "tab=forward&device=1")
    try:
        got = page.evaluate(LAST, "forward")
        spec = panels.page_spec()
        server = _server("forward_pass", spec["picture"], {"model": spec["keys"]["fp_model"]["default"]})
        res = server["residual"]
        L = len(res["attention_update"])
        updates = np.array(got["out"]["updates"])
        for mine, theirs in ((updates[:L], res["attention_update"]), (updates[L:2 * L], res["mlp_update"]),
                             (np.array(got["out"]["cosine"]), res["cls_cosine_to_last"])):
            theirs = np.array(theirs)
            assert mine.shape == theirs.shape and np.abs(mine - theirs).max() <= 1e-4 * np.abs(theirs).max()
        shapes = page.locator("#next-device-forward .vx-dev-stages tbody tr td").all_inner_texts()
        assert shapes == [" × ".join(str(n) for n in st["shape"]) for st in server["stages"]], shapes
        page.wait_for_timeout(500)
        assert _to_server(sent) == [] or all("/queue/" in u for u in _to_server(sent))  # at most the file made
    finally:
        ctx.close()
