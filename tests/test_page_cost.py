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
    config = [client.get("/config") for _ in range(3)]  # what every gradio_client asks for first: made once too
    assert calls.count("/config") == 1 and config[0].content == config[2].content
    assert client.get("/config?deep_link=x").status_code == 200 and calls.count("/config") == 2


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
    from vitviz.app import manifests as attention

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


def test_a_renewed_page_is_made_again():
    calls: list = []
    client = TestClient(_app(calls))
    client.get("/")
    client.get("/")
    serving.PageCache.renew()  # the server's models changed: the page's lists are labelled again
    third = client.get("/")
    assert calls == ["/", "/"] and third.text.startswith("page 2")


def test_a_page_closing_is_heard_from_its_heartbeat_stream_ending_only():
    """A page that closes (its heartbeat stream ends, even by an error) lets its pictures go; nothing else does."""
    closed: list = []

    async def beat(request):
        if request.path_params["session"] == "broken":
            raise RuntimeError("the stream broke")
        return PlainTextResponse("data: ALIVE\n\n")

    async def other(request):
        return PlainTextResponse("x")

    from starlette.middleware import Middleware

    app = Starlette(routes=[Route("/gradio_api/heartbeat/{session}", beat), Route("/gradio_api/{rest:path}", other)],
                    middleware=[Middleware(serving.PageClosed, closed=closed.append)])
    client = TestClient(app, raise_server_exceptions=False)
    client.get("/gradio_api/heartbeat/page-1")
    client.get("/gradio_api/queue/data", params={"session_hash": "page-2"})
    client.post("/gradio_api/heartbeat/page-3")
    client.get("/gradio_api/heartbeat/broken")
    assert closed == ["page-1", "broken"]


def test_the_page_as_built_says_what_a_load_would_and_a_load_changes_only_what_changed(monkeypatch):
    """The page is labelled as it is built (model lists, the photos notes, the registers button), so a load of a
    link that sets nothing returns nothing for them; when a model becomes available, the load sends the new labels
    and the page is made again."""
    import gradio as gr

    from vitviz.app import build_demo
    from vitviz.models import cache as models

    demo = build_demo()
    load = next(f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_load")
    from starlette.requests import Request

    request = gr.Request(request=Request({"type": "http", "method": "GET", "path": "/", "headers": [],
                                          "query_string": b"tab=classify"}))
    out = load.fn({c: "" for c in load.inputs}, request)
    dropdowns = [c for c, v in out.items() if isinstance(v, gr.Dropdown)]
    notes = [c for c in out if (getattr(c, "elem_id", None) or "").endswith("photos-note")]
    assert dropdowns == [] and notes == [] and out, out
    available = models.available_now()
    assert any(not ok for ok in available.values())  # offline here: the photos' models need a download
    made = serving.PageCache.made
    monkeypatch.setattr(models, "available_now", lambda: {k: True for k in available})
    out = load.fn({c: "" for c in load.inputs}, request)
    assert any(isinstance(v, gr.Dropdown) for v in out.values()) and serving.PageCache.made == made + 1
    assert all("needs download" not in str(choice) for c in demo.blocks.values() if isinstance(c, gr.Dropdown)
               for choice in (c.choices or []))
    notes = [c for c in demo.blocks.values() if (getattr(c, "elem_id", None) or "").endswith("photos-note")]
    assert notes and not any(n.visible for n in notes)  # the page as made again: no photo needs a download
