"""What opening the page costs the server (issue 35: a class of 100 on one 2-core server): the page made once
(PageCache), gradio's content-named files kept by the browser (Lasting), the device manifest answered without work
once made (``GET /vitviz/device-manifest``)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from vitviz.app import serving


def _app(calls: list) -> Starlette:
    async def page(request):
        calls.append(request.url.path)
        return PlainTextResponse(f"page {len(calls)} for {request.headers.get('host')} " + "x" * 2000)

    async def other(request):
        calls.append(request.url.path)
        return PlainTextResponse("file")

    routes = [Route("/", page), Route("/config", other), Route("/assets/{name}", other), Route("/static/{name}", other),
              Route("/theme.css", other), Route("/gradio_api/{rest:path}", other)]
    return Starlette(routes=routes, middleware=serving.page_files() + serving.compression())


def test_the_page_is_made_once_per_address_and_sent_as_made():
    calls: list = []
    client = TestClient(_app(calls))
    first = client.get("/?tab=attention&device=1")
    again = client.get("/?tab=classify")  # the page does not depend on vitviz's own link keys
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert first.headers["content-encoding"] == "gzip" and calls == ["/"]
    other_host = client.get("/", headers={"host": "school.example"})
    assert b"school.example" in other_host.content and calls == ["/", "/"]
    plain = client.get("/", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text.startswith("page 3")
    client.get("/?deep_link=abc")  # gradio reads these: left to gradio every time
    client.get("/", cookies={"access-token-unsecure-x": "y"})
    assert len(calls) == 5
    client.get("/")
    assert len(calls) == 5


def test_gradios_content_named_files_are_kept_by_the_browser_and_nothing_else():
    client = TestClient(_app([]))
    year = "public, max-age=31536000, immutable"
    assert client.get("/assets/Index-DAx5Uzyn2.js").headers["cache-control"] == year
    assert client.get("/theme.css?v=a02397b6").headers["cache-control"] == year
    assert client.get("/static/SourceSansPro-Regular.woff2").headers["cache-control"] == "public, max-age=86400"
    hashed = "/gradio_api/file=/tmp/gradio/" + "ab" * 32 + "/cat.jpg"
    assert client.get(hashed).headers["cache-control"] == "private, max-age=86400"
    for path in ("/config", "/theme.css", "/assets/index.js", "/gradio_api/file=/tmp/gradio/x/cat.jpg",
                 "/gradio_api/info"):
        assert "cache-control" not in client.get(path).headers, path


def test_a_device_manifest_is_answered_without_work_once_made_and_not_before(monkeypatch):
    from vitviz.app import attention

    from vitviz.core.lru import LRU

    monkeypatch.setattr(attention, "MADE", LRU(4))
    client = TestClient(Starlette(routes=serving.data_routes()))
    asked = {"tab": "attention", "model": "DINO ViT-S/8", "side": "224"}
    missing = client.get("/vitviz/device-manifest", params=asked)
    assert missing.status_code == 204 and missing.headers["cache-control"] == "no-store"
    attention.MADE.put(("attention", "DINO ViT-S/8", "224"), {"file": "f.onnx", "bytes": 5, "layers": 12})
    got = client.get("/vitviz/device-manifest", params=asked)
    assert got.status_code == 200 and got.json()["file"] == "f.onnx"
    assert got.json()["state"]["layer"] == attention.A["layer"].default  # the explorer's defaults (the page's over)
    assert set(got.json()["fields"]) == {f.name for f in attention.HELD}
    assert client.get("/vitviz/device-manifest", params=asked | {"side": "480"}).status_code == 204
    assert client.get("/vitviz/device-manifest", params=asked | {"tab": "classify"}).status_code == 204
    assert client.get("/vitviz/device-manifest", params=asked | {"tab": "other"}).status_code == 204
