"""How the app serves: the typed API made from the declared views, UI events, files it hands out, server settings.

Every public endpoint is ``/<view>``: a typed function (``gr.api``) whose parameters are the view's declared
settings, with their types, choices and defaults, so ``view_api()`` shows what the server accepts. It checks the
values through the declaration (a wrong one gets a message naming the parameter and what it accepts), decodes the
picture through vitviz's intake, and returns data only: one dict with the figures (PNG files), texts, numbers,
the settings actually used and why any differ. The page's own events are private and call the same views.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import inspect
import logging
import os
import re
import threading
import time
import typing
from pathlib import Path
from typing import Any, Callable, Sequence

import gradio as gr
import numpy as np
from gradio.data_classes import FileData

from vitviz.app import adapters, files
from vitviz.core import owned
from vitviz.render import png
from vitviz.specs.state import Field, View
from vitviz.tools import lesson as lessons
from vitviz.views import Shown, plain

MODEL_CONCURRENCY = int(os.environ.get("VITVIZ_MODEL_CONCURRENCY", "2"))
"""Events that run a model share one concurrency group of this size (benchmarks/load.py measured 1, 2, 4)."""
QUEUE_SIZE = int(os.environ.get("VITVIZ_QUEUE_SIZE", "128"))
"""Requests waiting at most; past that the page says the app is busy and to try again in a moment."""
SESSIONS = int(os.environ.get("VITVIZ_SESSIONS", "500"))
"""Sessions whose state the server keeps (the least recently used go first; a page whose session went simply
starts a fresh one). gradio keeps about 0.5 MiB per session (a copy of the page's configuration): 500 sessions
are at most about 260 MiB (gradio's default of 10,000 would be 5 GiB)."""
MODEL = dict(concurrency_id="model", concurrency_limit=MODEL_CONCURRENCY)
"""The concurrency group of everything that runs a model."""
LONG_CONCURRENCY = int(os.environ.get("VITVIZ_LONG_CONCURRENCY", "2"))
"""How many long requests (:data:`LONG`) run at once, on any model: 2, so that one student's long test does not
keep every other student's long test of the whole server queued behind it (with 1, a class's deletions on any
models ran one after the other), while the model group's places stay apart from them."""
LONG = dict(concurrency_id="long", concurrency_limit=LONG_CONCURRENCY)
"""The group of the views whose one request sends many forwards through the model (``Record.long``: Test the map's
deletion and randomised weights), :data:`LONG_CONCURRENCY` at a time: however many of them a class asks at once,
they never hold any place of :data:`MODEL`, and other students' requests keep theirs (the views' own slices let
their forwards in)."""


def queue_of(r) -> dict:
    """The concurrency group of view record ``r``'s events: :data:`LONG`, :data:`MODEL` or none."""
    return LONG if r.long else MODEL if r.runs_model else {}
log = logging.getLogger("vitviz")


def friendly(fn: Callable) -> Callable:
    """The library's ValueErrors (written for people) as gr.Error messages, logged in one line (no traceback).

    The message is raised on its own, outside the handler: the ValueError's traceback (whose frames hold the
    request's arguments, a 60 MB string say) is not chained to it, so nothing keeps the refused request alive."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        message = None
        try:
            return fn(*args, **kwargs)
        except ValueError as err:
            message = str(err)
            err.__traceback__ = None
        log.info("refused %s: %s", getattr(fn, "__name__", "a request"), message)
        REFUSED.set()  # a refused request may have been large: memory is looked at soon
        LOOK.set()
        raise gr.Error(message, title="Cannot use this", print_exception=False)
    return wrapper


# ---- the browser views' data --------------------------------------------------------------------------------------

IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
"""For what never changes under its name (the explorer's parts, the runtime, content-named graphs)."""
ZIPPED = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
"""A body sent as stored, gzip-compressed once (the compression middleware leaves an encoded body alone)."""


def data_routes() -> list:
    """HTTP routes the app adds to gradio's server: ``GET /vitviz/explorer/<token>/<part>``, the attention
    explorer's data (:func:`vitviz.render.browser.explorer_part`); ``GET /vitviz/ort/<file>``, ONNX Runtime Web;
    ``GET /vitviz/device/<hash>.onnx``, a model's graph for the device path (:mod:`vitviz.models.device`);
    ``GET /vitviz/device-manifest?tab=&model=&side=``, its manifest once made (204, no content, before: the page then
    asks the queue, which makes it); ``GET /vitviz/device-pos/<graph>/<gh>x<gw>``, the graph's position table for a
    grid (float32; the graph takes it as an input: one graph for every side).

    A part never changes under its name (the token names the weights, the picture and the short side), so it is
    served with a year-long, immutable cache: a browser that opens the same example again sends no request. 404 when
    the server does not hold the analysis (the explorer then sends its picture back through the queue), 503 when the
    server-wide memory budget stays full.
    """
    import re

    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from vitviz.render import browser

    token_ok = re.compile(r"^[0-9a-f]{16}$")

    async def part(request):
        token, name = request.path_params["token"], request.path_params["part"]
        if not token_ok.match(token) or not browser.PART.match(name):
            return JSONResponse({"missing": "no such part"}, status_code=404, headers={"Cache-Control": "no-store"})
        try:
            got = await run_in_threadpool(browser.explorer_part, token, name)
        except ValueError as err:
            return JSONResponse({"missing": str(err)}, status_code=503, headers={"Cache-Control": "no-store"})
        if got is None:
            return JSONResponse({"missing": "this server does not hold that analysis"}, status_code=404,
                                headers={"Cache-Control": "no-store"})
        body, media = got
        return Response(body, media_type=media, headers=IMMUTABLE)

    from starlette.responses import FileResponse

    from vitviz import assets
    from vitviz.models import device

    def gzipped(request) -> bool:
        return "gzip" in request.headers.get("accept-encoding", "")

    async def runtime(request):  # ONNX Runtime Web, from the package (no CDN: a classroom may have none)
        name = request.path_params["name"]
        path = assets.ORT / name
        if name not in assets.ORT_FILES or not path.is_file():
            return JSONResponse({"missing": "no such file"}, status_code=404)
        media = {"js": "text/javascript", "mjs": "text/javascript", "wasm": "application/wasm"}[name.rsplit(".", 1)[1]]
        if gzipped(request):  # compressed once, kept: 14.2 MB of WebAssembly travel as 3.7 MB, at no CPU per visit
            body = await run_in_threadpool(files.compressed, path)
            return Response(body, media_type=media, headers=IMMUTABLE | ZIPPED)
        return FileResponse(path, media_type=media, headers=IMMUTABLE | {"Vary": "Accept-Encoding"})

    async def graph(request):  # a model's graph for the device path: content-named, made before it is named
        path = device.find(request.path_params["name"])
        if path is None:
            return JSONResponse({"missing": "no such graph"}, status_code=404, headers={"Cache-Control": "no-store"})
        if gzipped(request):
            return FileResponse(await run_in_threadpool(files.compressed_file, path),
                                media_type="application/octet-stream", headers=IMMUTABLE | ZIPPED)
        return FileResponse(path, media_type="application/octet-stream",
                            headers=IMMUTABLE | {"Vary": "Accept-Encoding"})

    grid_ok = re.compile(r"^([1-9][0-9]{0,3})x([1-9][0-9]{0,3})$")

    async def positions(request):  # a model's position table for one grid, as its own forward resamples it
        name, grid = request.path_params["name"], grid_ok.match(request.path_params["grid"])
        body = None if grid is None else await run_in_threadpool(device.table_bytes, name,
                                                                 (int(grid[1]), int(grid[2])))
        if body is None:
            return JSONResponse({"missing": "no such table"}, status_code=404, headers={"Cache-Control": "no-store"})
        return Response(body, media_type="application/octet-stream", headers=IMMUTABLE)

    async def manifest(request):  # a device manifest already made: no work here (else the page asks the queue)
        from vitviz.app.manifests import SIDED, TABS, made_manifest

        q = request.query_params
        tab, model, side = q.get("tab", "attention"), q.get("model", ""), q.get("side", "")
        side = side.split(".")[0] if tab in SIDED else ""
        made = made_manifest(tab, model, side) if tab in TABS else None
        if made is None:  # not an error (a browser's console would say so): the page asks the queue instead
            return Response(status_code=204, headers={"Cache-Control": "no-store"})
        return JSONResponse(made, headers={"Cache-Control": "no-store"})

    return [Route(f"/{browser.ROUTE}/{{token}}/{{part}}", part, methods=["GET"]),
            Route("/vitviz/ort/{name}", runtime, methods=["GET"]),
            Route("/vitviz/device-manifest", manifest, methods=["GET"]),
            Route("/vitviz/device-pos/{name}/{grid}", positions, methods=["GET"]),
            Route("/vitviz/device/{name}", graph, methods=["GET"])]


MAX_BODY_BYTES = 4 * (50 * 2**20) // 3 + 2**20
"""The largest request body the server reads: a 50 MiB picture as a base64 data: URL (4/3 of its size) and the rest
of its JSON, or a 50 MiB upload and its multipart framing. Anything larger is refused before it is parsed."""


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes is answered 413 before anything parses it
    (declared length checked at once; a body sent without a length is counted as it arrives and cut off)."""

    class TooLarge(Exception):
        pass

    def __init__(self, app, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, int(limit)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(send)
        seen, started, over = 0, False, False

        async def counted():
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    over = True
                    raise BodyLimit.TooLarge
            return message

        async def sending(message):
            nonlocal started
            if over:  # whatever the app answers to a body cut off (a 400, say), the client is told why: 413
                if not started:
                    started = True
                    await self._refuse(send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyLimit.TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send) -> None:
        log.info("refused a request body over %d bytes", self.limit)
        body = (b'{"error": "This request is larger than the server accepts (%d MiB): send a picture of at most '
                b'50 MiB, as a file or a data: URL."}' % (self.limit // 2**20))
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class PageCache:
    """ASGI middleware: the page itself (``GET /``) and its configuration (``GET /config``, what every
    ``gradio_client`` asks for first: 0.67 s to build, 11–15 s when 32 clients start at once, past their 5 s) made
    once and sent as made.

    gradio renders the page for every visit: its configuration (about 1 MB of JSON: every component and event) and
    the API description, then the compression, about 60 ms of the server's CPU, the largest share of what a class
    opening the page at once costs it. The page is the same for every visitor of one address (vitviz has no
    logins; gradio reads only the address the page is served at, and its ``page`` and ``deep_link`` parameters,
    which are left to gradio), so it is kept per (host, forwarded host and protocol, root path, gzip or not). A
    request with gradio's login cookie is never answered from it."""

    FORWARDED = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-port")
    PATHS = ("/", "/config", "/config/")
    made = 0
    """How many times the page was re-made (:meth:`renew`): part of every key, so a page made before is not sent."""

    def __init__(self, app, size: int = 32) -> None:
        self.app, self.size, self.kept = app, size, {}

    @classmethod
    def renew(cls) -> None:
        """The page changed (its configuration re-made: a model became available): make it again on the next
        visit."""
        cls.made += 1

    def key(self, scope) -> tuple | None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.PATHS:
            return None
        query = scope.get("query_string", b"")
        if b"page=" in query or b"deep_link=" in query:
            return None
        headers = dict(scope.get("headers") or ())
        if b"access-token" in headers.get(b"cookie", b""):
            return None
        return (PageCache.made, scope["path"].rstrip("/"), scope.get("scheme"), scope.get("root_path", ""),
                b"gzip" in headers.get(b"accept-encoding", b""), *(headers.get(h) for h in self.FORWARDED))

    async def __call__(self, scope, receive, send):
        key = self.key(scope)
        if key is None:
            return await self.app(scope, receive, send)
        kept = self.kept.get(key)
        if kept is not None:
            start, body = kept
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        start, parts = None, []

        async def keeping(message):
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body") and start is not None and start["status"] == 200:
                    if len(self.kept) >= self.size:
                        self.kept.pop(next(iter(self.kept)))
                    self.kept[key] = (start, b"".join(parts))
            await send(message)

        await self.app(scope, receive, keeping)


class Lasting:
    """ASGI middleware: how long a browser may keep gradio's own files without asking again (gradio sends none, so a
    browser asks again for each of its ~90 scripts and styles on every visit). Content-named scripts and styles
    (``/assets/<name>-<hash>.js``) and the theme named by its hash (``/theme.css?v=``): a year, immutable; gradio's
    fonts (``/static/``): a day; a picture gradio serves from its files (``/gradio_api/file=``, in a folder named
    by its content's hash): a day, by this browser only. A response that says already is left alone."""

    NAMED = re.compile(rb"^/assets/.+-[A-Za-z0-9_-]{8,}\.(js|css|woff2?|svg|png)$")
    HASHED_FILE = re.compile(rb"^/gradio_api/file=.*/[0-9a-f]{64}/[^/]+$")

    def __init__(self, app) -> None:
        self.app = app

    def lasting(self, scope) -> bytes | None:
        path = scope.get("raw_path") or scope["path"].encode()
        path = path.split(b"?", 1)[0]
        if self.NAMED.match(path) or (path == b"/theme.css" and b"v=" in scope.get("query_string", b"")):
            return IMMUTABLE["Cache-Control"].encode()
        if path.startswith(b"/static/"):
            return b"public, max-age=86400"
        if self.HASHED_FILE.match(path):
            return b"private, max-age=86400"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        lasting = self.lasting(scope)
        if lasting is None:
            return await self.app(scope, receive, send)

        async def marking(message):
            if message["type"] == "http.response.start" and message["status"] == 200:
                headers = list(message.get("headers") or [])
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    message = {**message, "headers": headers + [(b"cache-control", lasting)]}
            await send(message)

        await self.app(scope, receive, marking)


class PageClosed:
    """ASGI middleware: ``closed(session)`` when a page's heartbeat stream ends (the page was closed or reloaded).

    gradio's own ``unload`` event would do it, but it runs as an event of the page's session, and a session's first
    event costs gradio a copy of the configuration of every component (about 30 ms here): a page that sent no event
    (the device link, opened in the browser) would pay it on closing. The stream is gradio's
    ``/gradio_api/heartbeat/<session>``, which stays open while the page is."""

    BEAT = re.compile(r"/heartbeat/([^/?]+)$")

    def __init__(self, app, closed: Callable[[str], None] = lambda session: None) -> None:
        self.app, self.closed = app, closed

    async def __call__(self, scope, receive, send):
        beat = self.BEAT.search(scope["path"]) if scope["type"] == "http" and scope["method"] == "GET" else None
        if beat is None:
            return await self.app(scope, receive, send)
        try:
            await self.app(scope, receive, send)
        finally:
            self.closed(beat.group(1))


class _Marking:
    """ASGI middleware that sets its :attr:`HEADERS` (lower-case names) on every response the app gives, replacing
    any the app set under those names."""

    HEADERS: list[tuple[bytes, bytes]] = []

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        names = {name for name, _ in self.HEADERS}

        async def marking(message):
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers") or [] if h[0].lower() not in names]
                message = {**message, "headers": headers + self.HEADERS}
            await send(message)

        await self.app(scope, receive, marking)


class Isolated(_Marking):
    """ASGI middleware: every response says the page may be cross-origin isolated (``Cross-Origin-Opener-Policy:
    same-origin``, ``Cross-Origin-Embedder-Policy: credentialless``), so that ONNX Runtime Web may run the device
    path on several threads (WebAssembly threads need ``SharedArrayBuffer``, which only an isolated page has).
    ``credentialless`` rather than ``require-corp``: a resource from elsewhere (a font a theme names) still loads,
    without cookies. Inside another site's frame (a Hugging Face Space) the page is not isolated whatever it says;
    the device path then runs on one thread and says so."""

    HEADERS = [(b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-embedder-policy", b"credentialless")]


class NoSniff(_Marking):
    """ASGI middleware: every response the app itself gives says ``X-Content-Type-Options: nosniff``, so a browser
    takes each file as the type the server names and never guesses another from its bytes (an uploaded file served
    back is never run as a script or a page). gradio sends it on none of its routes. Not marked: what never reaches
    the app's own middleware, that is a CORS preflight (gradio adds its ``CustomCORSMiddleware`` with
    ``add_middleware`` after building the app with this one, so it sits outside and answers ``OPTIONS`` itself) and
    uvicorn's own refusals of a request it cannot parse (its bare 400s); these carry no body a browser could run."""

    HEADERS = [(b"x-content-type-options", b"nosniff")]


MAX_LINK_CHARS = 2 * lessons.MAX_LINK
"""The longest address the server reads (path and query, in characters): twice the longest lesson link the page
makes (:data:`vitviz.tools.lesson.MAX_LINK`, 8,000), room for the settings a page adds to a lesson's link."""
LONG_HEAD_BYTES = 256 * 2**10
"""How much of a request's head uvicorn holds while it is still arriving (its own default, 16 KiB, answers a longer
head that comes in pieces with a bare "400 Invalid HTTP request received", before any of this server's code sees
it); a longer head still gets uvicorn's 400."""


class LinkLimit:
    """ASGI middleware: an address longer than :data:`MAX_LINK_CHARS` is answered 414 in words (the lesson limit's
    own) before gradio reads it: gradio makes the page's root address from it, and past about 64 KB that failed
    with an HTTP 500 (httpx: "URL too long")."""

    def __init__(self, app, limit: int | None = None) -> None:
        self.app, self.limit = app, MAX_LINK_CHARS if limit is None else int(limit)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("raw_path") or scope.get("path", "").encode()
        query = scope.get("query_string") or b""
        length = len(path) + (len(query) + 1 if query else 0)
        if length <= self.limit:
            return await self.app(scope, receive, send)
        log.info("refused an address of %d characters (at most %d)", length, self.limit)
        body = (f"This link is {length:,} characters long; this server opens links of at most {self.limit:,} "
                f"characters (a lesson link holds at most {lessons.MAX_LINK:,}). If it holds a lesson, open the "
                "lesson's file instead (\"Make a lesson from these views\", then \"or open a lesson file\"), or "
                "shorten the lesson's captions or split it into two lessons.\n").encode()
        await send({"type": "http.response.start", "status": 414,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def read_long_heads(demo) -> None:
    """Let uvicorn hold a request's head up to :data:`LONG_HEAD_BYTES` while it arrives (uvicorn's setting
    ``h11_max_incomplete_event_size``, on the server gradio started; read for each new connection), so an
    over-long link reaches :class:`LinkLimit` and is refused in words instead of with uvicorn's bare 400. Call after
    ``demo.launch``."""
    config = getattr(getattr(demo, "server", None), "config", None)
    if config is not None:
        config.h11_max_incomplete_event_size = LONG_HEAD_BYTES


class UploadBudget:
    """ASGI middleware: gradio's upload route (``POST .../gradio_api/upload``) within the uploads' own disk budget
    (:data:`vitviz.app.uploads.UPLOAD_BYTES`). Before the body is read its size is reserved (declared, else the
    largest body the server reads), the oldest uploads no open page holds making room; an upload that cannot fit
    is answered 507 in words (gradio's page shows the text). Once gradio has stored it, its files are counted and
    listed as this server's (:meth:`vitviz.app.uploads.Received.received`)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/gradio_api/upload"):
            return await self.app(scope, receive, send)
        import json

        from starlette.concurrency import run_in_threadpool

        from vitviz.app import uploads

        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        nbytes = int(declared) if declared.isdigit() else MAX_BODY_BYTES
        refused = await run_in_threadpool(uploads.RECEIVED.make_room, nbytes)
        if refused is not None:
            body = refused.encode()
            await send({"type": "http.response.start", "status": 507,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        status, parts, counted = 0, [], False

        async def reading(message):
            nonlocal status, counted
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                parts.append(message.get("body", b""))
                if not message.get("more_body"):  # counted before the client hears it is stored
                    stored: list = []
                    with contextlib.suppress(ValueError, UnicodeDecodeError):
                        got = json.loads(b"".join(parts))
                        stored = [p for p in got if isinstance(p, str)] if isinstance(got, list) else []
                    counted = True
                    await run_in_threadpool(uploads.RECEIVED.received, stored, nbytes)
            await send(message)

        try:
            await self.app(scope, receive, reading)
        finally:
            if not counted:
                uploads.RECEIVED.ended(nbytes)


def upload_budget() -> list:
    """The :class:`UploadBudget` middleware (inside :class:`BodyLimit`: a body over the limit never reserves)."""
    from starlette.middleware import Middleware

    return [Middleware(UploadBudget)]


def guards() -> list:
    """:class:`NoSniff` and :class:`LinkLimit`, the outermost of the app's own middleware (gradio's CORS and Brotli
    middleware sit outside them): every response the app gives is marked, and an over-long address is refused
    before the app reads it."""
    from starlette.middleware import Middleware

    return [Middleware(NoSniff), Middleware(LinkLimit)]


def page_files(closed: Callable[[str], None] = lambda session: None) -> list:
    """:class:`PageCache` and :class:`Lasting`, outermost: the page and gradio's files cost a visit next to
    nothing; :class:`Isolated` lets the device path use threads; :class:`PageClosed` calls ``closed(session)`` as a
    page goes."""
    from starlette.middleware import Middleware

    return [Middleware(Isolated), Middleware(PageCache), Middleware(Lasting), Middleware(PageClosed, closed=closed)]


def body_limit() -> list:
    """The :class:`BodyLimit` middleware for the app's server (first: it sees a request before anything else)."""
    from starlette.middleware import Middleware

    return [Middleware(BodyLimit, limit=MAX_BODY_BYTES)]


def compression() -> list:
    """gzip for what gradio leaves uncompressed: the page itself (its HTML holds the app's configuration, about
    650 kB), API answers and, for plain-http visitors, scripts and styles. Event streams, pictures, fonts and the
    explorer's binary parts are left alone (they would not shrink or must not be held back); a response already
    compressed keeps its encoding."""
    from starlette.middleware import Middleware
    from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

    skip = tuple(DEFAULT_EXCLUDED_CONTENT_TYPES) + ("application/octet-stream",)
    return [Middleware(GZipMiddleware, minimum_size=1024, compresslevel=6, exclude_content_types=skip)]


# ---- files handed out ----------------------------------------------------------------------------------------------

def figure_file(image) -> FileData:
    """A figure as a PNG file among this server's outputs (served, swept after it is last handed out, removed when
    the server stops: :mod:`vitviz.app.files`), with its recorded text size."""
    return FileData(path=str(png_file(image)), orig_name="figure.png", mime_type="image/png")


def png_file(image) -> Path:
    """A figure as a PNG file among this server's outputs, named by its content (:mod:`vitviz.app.files`): the
    page's figures and the API's are the same files, written whole before anyone can read them. Encoded quickly
    (:func:`vitviz.render.png.encode`), its text entries (the smallest text size, the text alternative) kept."""
    return files.outputs().figure(png.encode(image))


def bundle_file(view: str, values: dict, rgb: np.ndarray | None) -> FileData:
    """A view's ZIP (figures, numbers, params.json, the picture) in a folder of its own among this server's outputs
    (swept with them, the folder too)."""
    from vitviz.tools import bundle

    path = bundle.write(view, values, rgb, files.outputs().folder())
    return FileData(path=str(path), orig_name=path.name, mime_type="application/zip")


def answer(shown: Shown) -> dict:
    """What an endpoint returns for one view: data only (no UI updates)."""
    s = shown.settled
    return {"model": shown.model, "notice": shown.note(), "settings": plain(s.values if s else {}),
            "adjusted": plain(s.adjusted() if s else {}), "texts": shown.texts,
            "figures": {name: figure_file(image) for name, image in shown.figures.items()},
            "numbers": plain(shown.numbers)}


# ---- the typed API, from the declarations ---------------------------------------------------------------------

def python_type(field: Field) -> Any:
    """The type hint that makes ``view_api()`` describe ``field`` (gradio reads it into the endpoint's schema)."""
    if field.kind == "image":
        return FileData
    if field.kind == "int":
        return int
    if field.kind == "float":
        return float
    if field.kind == "bool":
        return bool
    if field.kind == "cell":
        return typing.Optional[str]
    if field.kind == "cells":
        return str
    return typing.Literal[tuple(field.options())]


def signature(view: View, extra: Sequence[Field] = ()) -> inspect.Signature:
    """The endpoint's parameters: the view's settings, named, typed and with their defaults (the picture first),
    then ``extra``'s."""
    params = []
    for f in (*view.fields, *extra):
        default = inspect.Parameter.empty if f.kind == "image" else f.default
        if f.kind == "cells":
            default = f.to_link(default) or ""
        elif isinstance(default, tuple):
            default = ",".join(map(str, default))
        params.append(inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=python_type(f)))
    return inspect.Signature(params, return_annotation=dict)


_LATER: contextvars.ContextVar[list | None] = contextvars.ContextVar("vitviz_endpoints_later", default=None)


@contextlib.contextmanager
def endpoints_last():
    """The endpoints registered inside are made when it ends, where it ends (the page's root, after everything
    else). gradio puts an endpoint's typed parameters (232 of them) in the page's layout where the endpoint is made,
    and the page looks every component an event updates up in that layout from its top: inside the tabs, they
    would lengthen every look-up of the components after them."""
    later: list = []
    token = _LATER.set(later)
    try:
        yield
    finally:
        _LATER.reset(token)
    for make in later:
        make()


FIGURES = Field("figures", "bool", True, "draw the view's figures (false: its numbers and texts alone)")
"""An answer's last parameter, after the view's settings: false sends the numbers and texts without drawing the
figures (``"figures": {}``), for a client that draws its own (the page's explorer, a notebook plotting the
numbers). Not a setting of the view (no control, link or flag): it changes nothing the answer says, only what it
carries. Checked as every declared setting is."""


def endpoint(view: View, respond: Callable[..., Any], *, name: str | None = None, doc: str = "",
             runs_model: bool = True, figures_switch: bool = False, queue: dict | None = None) -> None:
    """Register ``/<name or view.name>``: ``respond(picture as sent, checked settings)`` behind the view's typed
    signature; with ``figures_switch``, the signature ends with :data:`FIGURES` and ``respond`` gets its checked
    value as a third argument; ``queue``: its concurrency group (else :data:`MODEL` when it ``runs_model``).
    ValueErrors become messages. Inside :func:`endpoints_last`, made when it ends."""
    later = _LATER.get()
    if later is not None:
        later.append(functools.partial(endpoint, view, respond, name=name, doc=doc, runs_model=runs_model,
                                       figures_switch=figures_switch, queue=queue))
        return
    extra = [FIGURES] if figures_switch else []
    sig = signature(view, extra)
    sig = sig.replace(parameters=[*sig.parameters.values(), inspect.Parameter(
        "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request)])

    def call(request=None, image=None, **settings):
        # gradio keeps a copy of every input per session: drop this call's now that it has them (adapters.py)
        adapters.forget_api_values(adapters.blocks_of(request), getattr(request, "session_hash", None))
        switches = [f.check(settings.pop(f.name)) for f in extra]
        return respond(image, view.check(settings), *switches)

    doc = doc or f"The {view.title} view: " + "; ".join(
        f"{f.name}: {f.label}, {f.accepts()}" for f in (*view.settings(), *extra))
    call = adapters.typed(call, sig, name or view.name, doc)
    group = queue if queue is not None else MODEL if runs_model else {}
    gr.api(friendly(call), api_name=name or view.name, **group)


def endpoints(records) -> None:
    """Each record's endpoint ``/<name>`` (its answer: :func:`answer`) and, for a view with a download,
    ``/bundle_<name>`` (its ZIP): the API is made from the records, nothing else names a view's endpoint."""
    from vitviz.app import uploads
    from vitviz.views import show

    for r in records:
        if not r.api:
            continue

        def respond(pic, values, figures, r=r):
            return answer(show(r.name, uploads.picture(pic) if r.needs_picture else None, values, reuse=True,
                               only=None if figures else frozenset()))

        def bundle(pic, values, r=r):
            return bundle_file(r.name, values, uploads.picture(pic) if r.needs_picture else None)

        endpoint(r.view, respond, name=r.name, doc=r.doc, runs_model=r.runs_model, figures_switch=True,
                 queue=queue_of(r))
        if r.bundle:
            endpoint(r.view, bundle, name=f"bundle_{r.name}", runs_model=r.runs_model, queue=queue_of(r),
                     doc=f"The {r.view.title} view as files: a ZIP of its figures (PNG and PDF), numbers and "
                         "settings.")


# ---- the page's own events ------------------------------------------------------------------------------------

USER_ONLY = ("release", "input")
"""The events only a person's hand fires (a slider let go, a value typed): a value a script puts in fires ``change``."""
_BY_HAND: contextvars.ContextVar[list[dict] | None] = contextvars.ContextVar("vitviz_by_hand", default=None)


@contextlib.contextmanager
def by_hand_doors():
    """Collect, while the page is built, the events a link opened within the page must ask itself (:func:`by_hand`):
    yields the list, one ``{"door", "when", "user", "change"}`` per event (components, not yet indices)."""
    token = _BY_HAND.set([])
    try:
        yield _BY_HAND.get()
    finally:
        _BY_HAND.reset(token)


def by_hand(door_id: str, triggers: list, when: str | None = None) -> bool:
    """Note that the event behind door ``door_id`` is asked by a person's hand on some of its ``triggers``
    (:data:`USER_ONLY`): a link's settings, put in by a script, fire none of those, so the page opens the door itself
    when the link changes one of those controls and none of the event's ``change`` triggers (which ask it anyway,
    with every setting as the link set it). ``when``: the page's condition for asking (a section that is open)."""
    found = _BY_HAND.get()
    hand = [t.__self__ for t in triggers if getattr(t, "event_name", None) in USER_ONLY and hasattr(t, "__self__")]
    if found is None or not hand:
        return False
    changes = [t.__self__ for t in triggers if getattr(t, "event_name", None) == "change" and hasattr(t, "__self__")]
    found.append({"door": door_id, "when": when, "user": list(dict.fromkeys(hand)), "change": changes})
    return True


PROGRESS_KINDS = (gr.Image, gr.HTML, gr.Markdown, gr.Plot, gr.Gallery, gr.Dataframe, gr.File, gr.Label, gr.JSON)
"""What an event's progress is shown on: what a person sees being made."""


def progress_on(outputs) -> list:
    """The outputs of an event that its progress is shown on (gradio's ``show_progress_on``): what a person sees
    being made (figures, browser views, texts, tables, files, shown now or later), never its controls, states or
    hidden carriers.

    gradio's page keeps a status for every component any event ever showed progress on, and at every status message
    of every later event sets each of them again, each found by a walk through the page's whole layout (709
    components). With every output shown working that was about 290 components after a tour (106 now), and most of
    a tour step's main-thread time went to it (docs/performance.md, "Progress shown only on what is being made")."""
    if outputs is None:
        return []
    outputs = [outputs] if isinstance(outputs, gr.components.Component) else list(outputs)
    return [o for o in outputs if isinstance(o, PROGRESS_KINDS) and o.visible != "hidden"]


def on(triggers, fn: Callable, inputs, outputs, **kwargs):
    """A private page event: raw inputs (vitviz's declarations check them), never part of the API; its progress is
    shown on the outputs :func:`progress_on` chooses."""
    kwargs.setdefault("api_visibility", "private")
    kwargs.setdefault("preprocess", False)
    if fn is not None:
        kwargs.setdefault("show_progress_on", progress_on(outputs))
    if isinstance(triggers, list):
        return gr.on(triggers, fn, inputs, outputs, **kwargs)
    return triggers(fn, inputs, outputs, **kwargs)


TRIM_BYTES = 64 * 2**20
"""Work that reserved at least this much of the budget and ends with the server idle has the freed memory given back
to the system a moment later (:data:`SETTLE_S`)."""
MMAP_BYTES = 64 * 2**20
"""Buffers at least this large are mapped from the system, and given back the moment they are freed. Every buffer of
a registry model's forward is smaller (DINO ViT-S/8 at 480 px: 22 MB for an MLP's hidden layer), so they are reused
from the heap, not mapped and zeroed anew in every layer."""
TRIM_AT_FREE_BYTES = 2 * MMAP_BYTES
"""free() gives the heap's top back by itself only when this much is free there (glibc's own rule, twice the mmap
threshold, which a fixed threshold switches off, leaving 128 kB): the watcher's ``malloc_trim`` gives it back."""
REFUSED = owned.keep("serving.refused", "gates", threading.Event(), "a request was refused: look at memory")
"""Set when a request is refused (:func:`friendly`): the memory watcher looks at once."""
SETTLE = owned.keep("serving.settle", "gates", threading.Event(), "large work ended with the server idle")
"""Set when work that reserved at least :data:`TRIM_BYTES` ends with nothing else running: the watcher settles."""
SETTLE_BYTES = 8 * 2**20
"""After large work, a full collection runs only when trimming leaves the process this much above its low (a
collection of a large heap costs more than the few megabytes it would find)."""
SETTLE_S = 0.3
"""How long the watcher lets an answer finish being sent before it collects what the request left."""
LOOK = owned.keep("serving.look", "gates", threading.Event(), "wakes the memory watcher")
"""Wakes the memory watcher: a refusal, or the end of large work that leaves the server idle."""
WATCH_BYTES = 32 * 2**20
"""The process grown by this much since it last gave memory back: the watcher gives back what is free."""
_trimmer: threading.Thread | None = None
_malloc_trim: Callable[[int], int] = lambda pad: 0
"""glibc's ``malloc_trim`` once :func:`return_freed_memory` has found it."""


def trim(pad: int = 0) -> int:
    """Give the heap's free pages back to the system (``malloc_trim(pad)``); 0 when there were none to give."""
    return _malloc_trim(pad)


def freeze_what_lasts() -> None:
    """Take what the server made before its first request (gradio, torch, the app's blocks: alive as long as the
    process) out of the cycle collector's sight (``gc.freeze``): a full collection then looks only at what requests
    made. Measured here: a full collection of a started server took about 0.4 s and held every thread meanwhile,
    the next student's upload included. For a server process only: a test that builds and drops apps keeps them."""
    gc.collect()
    gc.freeze()


def return_freed_memory() -> bool:
    """Give freed memory back to the system (a server setting, not the library's).

    By default glibc raises its mmap threshold after the first large free, so the next big buffers (decoded
    uploads, request bodies) come from the heap and stay with the process after the request. A fixed 1 MiB
    threshold once kept them mapped, but then every buffer of every forward over 1 MiB was mapped and zeroed anew:
    the same fused forward took 30% longer on one server (0.44 → 0.59 s for DINO ViT-S/8 at 224 px; 4–8% here).
    Now the threshold is fixed at :data:`MMAP_BYTES` (a forward's activations stay on the fast heap; a decoded
    40-megapixel picture, 120 MB, is mapped and given back when freed), free() trims the heap's top only
    past :data:`TRIM_AT_FREE_BYTES` (a fixed mmap threshold had left glibc's 128 kB, and a forward at 480 px paged in
    about 200,000 pages, 800 MB, again each time; 60,000 now, most of them the analysis kept), and ``malloc_trim``
    returns the heap's free pages once no work is running: :data:`SETTLE_S` after work that reserved at least
    :data:`TRIM_BYTES` of the server's budget ends with the server idle (the answer is still being sent when the
    budget is released, so its garbage appears after), trimmed, then collected and trimmed again when more than
    :data:`SETTLE_BYTES` is left; and, from a watcher thread, within a second of the idle process growing by
    :data:`WATCH_BYTES`. Python's reference cycles are collected first: a refused 60 MB request reserves nothing,
    and its arguments can sit in a cycle (an exception's frames) until the collector runs; a refusal is collected
    at once, work running or not. Nothing is trimmed or collected while work runs: trimming after every request
    made the next forward fault in every page of its buffers again (0.36 → 0.45 s for DINO ViT-S/8 at 224 px in
    the server), and a full collection holds every thread (0.2–0.4 s before :func:`freeze_what_lasts`).
    tests/test_files.py and tests/test_app_crowd.py hold the memory goals. Returns whether glibc is there."""
    import ctypes
    import ctypes.util

    from vitviz.models import budget

    global _trimmer, _malloc_trim
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, MMAP_BYTES)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, TRIM_AT_FREE_BYTES)  # M_TRIM_THRESHOLD
        _malloc_trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        return False

    def released(nbytes: int) -> None:
        if nbytes >= TRIM_BYTES and budget.SERVER.used == 0:  # the server idle: the watcher settles in a moment
            SETTLE.set()
            LOOK.set()

    def rss() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def watch() -> None:  # grown by WATCH_BYTES since the last trim (or the lowest since): trim
        low = rss()
        while True:
            LOOK.wait(1.0)
            LOOK.clear()
            refused, ended = REFUSED.is_set(), SETTLE.is_set()
            if refused or ended:  # a refusal, or large work ended: its garbage exists once gradio has answered
                REFUSED.clear()
                SETTLE.clear()
                time.sleep(SETTLE_S)
            if budget.SERVER.used and not refused:
                # work is running: it reuses what is free, and its end wakes the watcher. A collection would hold
                # the interpreter, and a trim makes the next forward fault in its buffers' pages again (0.08 s of a
                # 0.3 s forward at 224 px: a class that never lets the server idle never pays either)
                continue
            if ended and not refused:  # what trimming alone gives back first; a collection only if much is left
                trim(0)
                now = rss()
                if now <= low + SETTLE_BYTES:
                    low = min(low, now)
                    continue
            now = rss()
            if refused or ended or now > low + WATCH_BYTES:
                # garbage can sit in reference cycles (a refusal's arguments in an exception's frames, a request's
                # buffers) until the collector runs
                gc.collect()
                trim(0)
                low = rss()
            else:
                low = min(low, now)

    budget.SERVER.released = released
    if _trimmer is None:
        _trimmer = threading.Thread(target=watch, name="vitviz-trim", daemon=True)
        _trimmer.start()
    return True
