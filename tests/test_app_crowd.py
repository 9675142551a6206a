"""A class at once, through the running app: 16 clients × 5 mixed requests answer exactly as one client alone;
huge uploads cost bounded memory; a full queue says to try again. (Slow: run with ``-m slow``.)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import EXAMPLES, local_client
from gradio_client import handle_file
from PIL import Image

from vitviz.core import owned
from vitviz.embedded import scenes
from vitviz.specs import registry

pytestmark = pytest.mark.slow

CLIENTS, PER_CLIENT = 16, 5
SHAPES = [(64, 64), (64, 96), (96, 64), (80, 120)]


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> list[str]:
    """16 different pictures in four aspect ratios (four different token counts on the offline model)."""
    d = tmp_path_factory.mktemp("crowd")
    paths = []
    for i in range(16):
        h, w = SHAPES[i % 4]
        img = Image.fromarray(scenes.make_scene(100 + i).image).resize((w, h), Image.BICUBIC)
        path = d / f"pic{i:02d}.png"
        img.save(path)
        paths.append(str(path))
    return paths


def _request(i: int, j: int, pictures: list[str]) -> tuple[str, tuple]:
    pic = handle_file(pictures[(i * PER_CLIENT + j) % len(pictures)])
    kind = (i + j) % 4
    if kind == 0:
        return "/attention", (pic, "DINO ViT-S/8", 64, 4 - j % 4, j % 4 - 1, 0.5 + 0.1 * (j % 3), 0.6, "inferno",
                              None if j % 2 else "2,3")
    if kind == 1:
        return "/classify", (pic, registry.OFFLINE_KEY)
    if kind == 2:
        return "/shuffle", (pic, registry.OFFLINE_KEY, j)
    return "/patches", (pic, (8, 16)[j % 2], 64 + 16 * (i % 3), "crop", "ViT-S")


def _digest(value) -> object:
    """An answer in comparable form: pictures by their pixels, timings left out."""
    if isinstance(value, dict) and "path" in value:
        value = value["path"]
    if isinstance(value, str) and os.path.isfile(value):
        with Image.open(value) as im:
            return hashlib.sha1(np.asarray(im.convert("RGB")).tobytes()).hexdigest()
    if isinstance(value, str):
        return "\n".join(line for line in value.splitlines() if "this forward on this machine" not in line)
    if isinstance(value, (tuple, list)):
        return [_digest(v) for v in value]
    if isinstance(value, dict):
        return {k: _digest(v) for k, v in value.items()}
    return json.dumps(value, sort_keys=True, default=str)


def test_sixteen_clients_get_the_sequential_answers(app_url, pictures):
    plan = [[_request(i, j, pictures) for j in range(PER_CLIENT)] for i in range(CLIENTS)]
    one = local_client(app_url)
    alone = {}
    for requests in plan:
        for api, args in requests:
            key = (api, json.dumps(args, default=str))
            if key not in alone:
                alone[key] = _digest(one.predict(*args, api_name=api))
    assert len({k[0] for k in alone}) == 4 and len(alone) >= 50

    owned.reset("results")  # the class at once draws (and analyses) its answers itself, not from one client's
    clients = [local_client(app_url) for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS)
    errors: list[str] = []

    def run(i: int) -> list[tuple[tuple, object]]:
        barrier.wait()
        out = []
        for api, args in plan[i]:
            try:
                out.append(((api, json.dumps(args, default=str)), _digest(clients[i].predict(*args, api_name=api))))
            except Exception as err:  # counted, then asserted to be none
                errors.append(f"{api}: {err}")
        return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for chunk in pool.map(run, range(CLIENTS)) for a in chunk]
    assert errors == []
    wrong = [key[0] for key, answer in answers if answer != alone[key]]
    assert len(answers) == CLIENTS * PER_CLIENT and wrong == []


PEAK_MB_PER_HUGE_UPLOAD = 250
"""Stated bound: the server's extra resident memory for one 6320×6320 PNG upload (measured: about 160 MB)."""
RETAINED_MB, RETURNED_WITHIN_S = PEAK_MB_PER_HUGE_UPLOAD, 2.0
"""Stated bound: twelve such uploads at once leave the server holding less than one of them costs at its peak, this
long after the last answer (memory does not grow with the uploads: the memory watcher settles 0.3 s after large
work ends, trims, and collects when more than 8 MB is left). Measured: −2 to +18 MB when this module runs alone;
66 MB here and 126 MB on CI's machine after tests/test_added_models.py, of which a full collection and a trim in
the test give back only 10 MB (memory held, not garbage: not identified)."""


def test_a_huge_upload_costs_bounded_memory_and_memory_comes_back(app_url, tmp_path):
    """A 6320×6320 PNG (40 MP limit: accepted) is shrunk while decoding; 12 at once give their memory back."""
    big = Image.new("RGB", (6320, 6320), (40, 90, 200))
    big.paste((250, 200, 0), (1000, 1000, 5000, 3000))
    path = tmp_path / "big.png"
    big.save(path)
    assert path.stat().st_size < 200_000

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:  # the app runs in this process
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    clients = [local_client(app_url) for _ in range(12)]
    ask = lambda c: c.predict(handle_file(str(path)), 16, 224, "crop", "ViT-B", api_name="/patches")  # noqa: E731
    summary = ask(clients[0])["texts"]["summary"]  # warm
    assert "6320×6320 picture, read at 703×703 → 224×224" in summary  # decoded at 1/9 scale, its size still said
    peak, stop = [rss_mb()], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.003)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    before = rss_mb()
    ask(clients[0])
    one = peak[0] - before
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(ask, clients))
    done = time.monotonic()
    stop.set()
    watcher.join()
    after = rss_mb()
    while after - before >= RETAINED_MB and time.monotonic() - done < RETURNED_WITHIN_S:
        time.sleep(0.05)
        after = rss_mb()
    assert one < PEAK_MB_PER_HUGE_UPLOAD
    assert after - before < RETAINED_MB, (f"{before:.0f} MB before, {peak[0]:.0f} MB at peak, {after:.0f} MB "
                                          f"{RETURNED_WITHIN_S} s after")


def test_the_ten_to_one_picture_at_the_largest_side_gets_the_budget_message(app_url, dino_in_cache, tmp_path):
    path = tmp_path / "long.png"
    Image.new("RGB", (600, 60), (200, 100, 50)).save(path)
    client = local_client(app_url)
    with pytest.raises(Exception) as err:
        client.predict(handle_file(str(path)), "DINO ViT-S/8", 512, api_name="/attention")
    assert "64×640 = 40,960 patches for DINO ViT-S/8" in str(err.value) and "smaller short side" in str(err.value)
    r = client.predict(handle_file(str(path)), "DINO ViT-S/8", 64, api_name="/attention")
    assert r["model"] == "DINO ViT-S/8" and "Showing" not in r["notice"]  # answered by the real model


def test_a_full_queue_says_try_again_and_the_app_keeps_serving(monkeypatch):
    """Past the queue's size a request is told at once to try again (the page says the app is busy)."""
    from conftest import free_port
    from gradio_client.utils import QueueError

    from vitviz import app

    monkeypatch.setattr(app.serving, "QUEUE_SIZE", 1)
    demo = app.build_demo()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        clients = [local_client(url) for _ in range(8)]
        cat = str(EXAMPLES / "cat.png")

        def ask(client) -> str:
            try:
                client.predict(handle_file(cat), 4, 640, "crop", "ViT-B", api_name="/patches")
                return "answered"
            except QueueError as err:
                assert "try again" in str(err)
                return "busy"

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(ask, clients))
        assert "busy" in outcomes and "answered" in outcomes
        assert ask(clients[0]) == "answered"  # and afterwards it answers again
    finally:
        demo.close()
