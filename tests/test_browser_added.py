"""A server started with a models file: its models answer through the API and in Chromium; the broken entries are
reported in its log and do not stop it; a link naming a model it does not have says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from browser_support import idle, sync_api
from conftest import free_port, local_client
from test_added_models import LAB, XRAY, build_checkpoints

pytestmark = [pytest.mark.browser, pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[1] / "vitviz" / "assets" / "examples"


@pytest.fixture(scope="module")
def operator_server(tmp_path_factory):
    """``python -m vitviz.app --models FILE`` in its own process: (its URL, a function reading its log so far)."""
    folder = tmp_path_factory.mktemp("operator-server")
    models_file = build_checkpoints(folder)
    port = free_port()
    log = folder / "server.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(port), "--models",
                                 str(models_file)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=Path(__file__).resolve().parents[1])
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"the server stopped: {log.read_text()[-2000:]}")
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield url, log.read_text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_server_reports_the_broken_entries_and_serves_the_added_models_through_the_api(operator_server):
    from gradio_client import handle_file

    url, read_log = operator_server
    text = read_log()
    assert "2 model(s) added, 3 left out" in text and "left out Pickled: weights:" in text, text[-3000:]
    client = local_client(url)
    schema = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    enum = next(p for p in schema["/attention"]["parameters"] if p["parameter_name"] == "model")["type"]["enum"]
    assert enum[-2:] == [LAB, XRAY]
    picture = handle_file(str(EXAMPLES / "cat.png"))
    for api in ("/attention", "/rollout", "/inside_head", "/feature_pca", "/relevance", "/classify",
                "/forward_pass"):
        for key in (LAB, XRAY):
            got = client.predict(image=picture, model=key, api_name=api)
            assert got["model"] == key and got["figures"], (api, key, got.get("notice"))
    top = client.predict(image=picture, model=XRAY, api_name="/classify")["numbers"]["top5"]
    assert set(top) == {"normal", "nodule", "effusion"}
    pair = client.predict(image=picture, model_a=LAB, model_b=XRAY, api_name="/compare_models")
    assert pair["figures"], pair.get("notice")


@contextmanager
def attention_page(browser, url: str, query: str = ""):
    """The Attention tab at ``url`` (with ``query``), once its explorer has answered; closed afterwards."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{url}?tab=attention{query}")
        page.wait_for_selector("#attention-explorer .vx-big canvas", state="attached", timeout=120_000)
        idle(page)
        yield page
    finally:
        page.close()


def test_the_attention_list_offers_the_added_model_and_the_explorer_draws_it(operator_server, browser, tmp_path):
    url, _ = operator_server
    with attention_page(browser, url) as page:
        page.get_by_label("model", exact=True).first.click()
        option = page.get_by_role("option", name=f"{LAB} (added by this server)")
        sync_api.expect(option).to_be_visible()
        option.click()
        page.wait_for_function("(m) => document.querySelector('#attention-explorer .vx')?.__vx?.p?.model === m",
                               arg=LAB, timeout=120_000)
        idle(page)
        state = page.locator("#attention-explorer .vx").evaluate(
            "el => ({grid: el.__vx.p.grid, layers: el.__vx.p.layers, heads: el.__vx.p.heads})")
        side = int(page.get_by_label("short side (pixels, rounded to the patch size)").first.input_value())
        assert state["layers"] == 12 and state["heads"] == 6 and state["grid"][0] == side // 16, (state, side)
        drawn = page.locator("#attention-explorer .vx-big canvas").evaluate(
            "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0; "
            "for (let i = 0; i < d.length; i += 4) if (d[i] || d[i + 1] || d[i + 2]) n++; return n / (d.length / 4); }")
        assert drawn > 0.5, drawn  # the picture and its map, not an empty canvas
        assert f"model={quote(LAB)}" in page.url or "model=Lab" in page.url
        page.screenshot(path=str(tmp_path / "added_model.png"))  # looked at by hand: docs/19_added_model.png


def test_a_link_naming_a_model_this_server_does_not_have_says_so_and_opens_the_usual_model(operator_server,
                                                                                          browser):
    url, _ = operator_server
    with attention_page(browser, url, f"&model={quote('Somebody else ViT')}") as page:
        sync_api.expect(page.locator("#link-notice")).to_contain_text("Somebody else ViT")
        sync_api.expect(page.locator("#link-notice")).to_contain_text("which this server does not have")
        assert page.get_by_label("model", exact=True).first.input_value() != "Somebody else ViT"
