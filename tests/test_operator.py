"""An operator's server (issue 68): every response marked nosniff, over-long links refused in words, uploads kept
within their own disk budget."""

from __future__ import annotations

import re
import socket

import httpx

from conftest import EXAMPLES
from vitviz.app import serving
from vitviz.tools import lesson


def _raw_get(app_url: str, target: bytes, host: bytes = b"new-host.example") -> tuple[int, bytes]:
    """(status, body) for ``GET target`` sent in one write over a socket (httpx refuses URLs over 64 KB itself)."""
    host_port = app_url.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host_port[0], int(host_port[1])), timeout=30) as s:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_every_route_says_nosniff(app_url):
    page = httpx.get(app_url, timeout=30)
    asset = re.search(r'(?:src|href)="\.?/?(assets/[^"]+\.js)"', page.text)
    assert asset, "no script of gradio's named in the page"
    upload = httpx.post(f"{app_url}gradio_api/upload", timeout=30,
                        files={"files": ("star.png", (EXAMPLES / "scene_star.png").read_bytes(), "image/png")})
    answers = {"the page": page, "a static asset": httpx.get(app_url + asset[1], timeout=30),
               "gradio's configuration": httpx.get(f"{app_url}config", timeout=30),
               "the API's description": httpx.get(f"{app_url}gradio_api/info", timeout=30),
               "an upload": upload,
               "a file": httpx.get(f"{app_url}gradio_api/file={upload.json()[0]}", timeout=30),
               "an example": httpx.get(f"{app_url}gradio_api/file={EXAMPLES / 'scene_star.png'}", timeout=30),
               "the runtime": httpx.get(f"{app_url}vitviz/ort/ort.wasm.min.js", timeout=30),
               "a missing page": httpx.get(f"{app_url}no-such-page", timeout=30)}
    assert answers["a file"].status_code == 200 and answers["a static asset"].status_code == 200
    for what, r in answers.items():
        assert r.headers.get("x-content-type-options") == "nosniff", (what, r.status_code, dict(r.headers))
        # the same marking middleware says the page may be cross-origin isolated, on every answer too
        assert (r.headers.get("cross-origin-opener-policy"), r.headers.get("cross-origin-embedder-policy")) \
            == ("same-origin", "credentialless"), (what, dict(r.headers))


def test_an_over_long_link_is_refused_in_words_at_both_sizes(app_url):
    """Past about 64 KB gradio failed with a 500 (httpx's "URL too long" while it made the page's root address
    for a new Host); past about 128 KB uvicorn answered a bare 400 before any of the app's code ran."""
    for size in (70_000, 130_000):
        status, body = _raw_get(app_url, b"/?tab=attention&lesson=md:" + b"a" * size)
        text = body.decode()
        assert status == 414, (size, status, text[:200])
        assert f"at most {serving.MAX_LINK_CHARS:,} characters" in text and f"{lesson.MAX_LINK:,}" in text
        assert "open the lesson's file instead" in text
    status, body = _raw_get(app_url, b"/?tab=attention&x=" + b"a" * (serving.MAX_LINK_CHARS - 100))
    assert status == 200 and b"<html" in body.lower()  # a long link within the limit still opens the page


# ---- uploads within their own disk budget -------------------------------------------------------------------------

def _upload(app_url: str, data: bytes, name: str = "photo.png") -> httpx.Response:
    return httpx.post(f"{app_url}gradio_api/upload", files={"files": (name, data, "image/png")}, timeout=30)


def test_uploads_stay_within_their_budget_the_oldest_going_first(app_url, monkeypatch):
    """40 distinct 49 MB uploads from one client were all kept (1.96 GiB): now the uploads a server keeps stay
    within ``VITVIZ_UPLOADS_MB`` (1 MiB here), the oldest that no open page holds removed first, and what cannot
    fit is refused in words."""
    import os

    from vitviz.app import files, uploads

    monkeypatch.setattr(uploads, "UPLOAD_BYTES", 2**20)
    monkeypatch.setattr(uploads, "RECEIVED", uploads.Received())  # this test's uploads only
    paths = []
    for i in range(6):
        r = _upload(app_url, os.urandom(300_000))
        assert r.status_code == 200, r.text
        paths.append(r.json()[0])
        on_disk = [p for p in paths if os.path.isfile(p)]
        assert sum(os.path.getsize(p) for p in on_disk) <= 2**20
    assert [os.path.isfile(p) for p in paths] == [False] * 3 + [True] * 3  # the oldest went first
    assert uploads.RECEIVED.held() == 900_000
    try:
        files.PICTURES.hold("page-budget", paths[3])  # an open page uses the oldest left: kept
        r = _upload(app_url, os.urandom(300_000))
        assert r.status_code == 200 and os.path.isfile(paths[3]) and not os.path.isfile(paths[4])
        paths.append(r.json()[0])
        for p in paths[5:]:
            files.PICTURES.hold("page-budget", p)
        full = _upload(app_url, os.urandom(300_000))  # every upload kept is in use: no room
        assert full.status_code == 507 and "open pages use fill it now" in full.text, full.text
        assert all(os.path.isfile(p) for p in (paths[3], *paths[5:]))
    finally:
        files.PICTURES.release("page-budget")
    large = _upload(app_url, os.urandom(1_200_000))
    assert large.status_code == 507 and "1.1 MiB" in large.text and "at most 1 MiB" in large.text, large.text
    for p in paths:
        if os.path.isfile(p):
            os.unlink(p)
