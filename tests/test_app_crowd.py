"""A class at once, through the running app: 16 clients × 5 mixed requests answer exactly as one client alone.

Also the API contract: endpoints return data (no UI updates), the schema says what
the server accepts, and odd numbers sent as raw JSON get a clear message.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import EXAMPLES
from gradio_client import Client, handle_file
from PIL import Image

from vitviz.specs import registry
from vitviz.embedded import scenes


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
        return "/attention", (pic, "DINO ViT-S/8", 64, 4 - j % 4, 0.5 + 0.1 * (j % 3), 0.6, "inferno", "mean", 0.0)
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
    return json.dumps(value, sort_keys=True, default=str)


def test_sixteen_clients_get_the_sequential_answers(app_url, pictures):
    plan = [[_request(i, j, pictures) for j in range(PER_CLIENT)] for i in range(CLIENTS)]
    one = Client(app_url, verbose=False)
    alone = {}
    for requests in plan:
        for api, args in requests:
            key = (api, json.dumps(args, default=str))
            if key not in alone:
                alone[key] = _digest(one.predict(*args, api_name=api))
    assert len({k[0] for k in alone}) == 4 and len(alone) >= 50

    clients = [Client(app_url, verbose=False) for _ in range(CLIENTS)]
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

    t0 = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for chunk in pool.map(run, range(CLIENTS)) for a in chunk]
    seconds = time.perf_counter() - t0
    assert errors == []
    wrong = [key[0] for key, answer in answers if answer != alone[key]]
    assert len(answers) == CLIENTS * PER_CLIENT and wrong == []
    assert seconds < 120


def test_api_returns_data_and_the_schema_matches_the_server(app_url, pictures):
    client = Client(app_url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    patch = api["/patches"]["parameters"][1]
    assert patch["type"] == {"type": "integer", "enum": [4, 8, 14, 16, 32], "title": "Radio"}
    assert len(api["/attention"]["returns"]) == 7
    assert all(r["component"] != "Slider" for r in api["/attention"]["returns"])
    pic = handle_file(pictures[0])
    by_int = client.predict(pic, 16, 64, "crop", "ViT-B", api_name="/patches")[1]
    by_str = client.predict(pic, "16", 64, "crop", "ViT-B", api_name="/patches")[1]
    assert by_int == by_str and "(64/16)·(64/16) = 4·4 = 16" in by_int
    with pytest.raises(Exception, match="not in the list of choices"):
        client.predict(pic, 12, 64, "crop", "ViT-B", api_name="/patches")


def _raw_call(app_url: str, api: str, data_json: str) -> str:
    """POST ``{"data": [...]}`` as raw text (NaN and Infinity allowed, as any JSON library may send) and
    return the event stream's answer."""
    import httpx

    r = httpx.post(f"{app_url}gradio_api/call/{api}", content='{"data": [%s]}' % data_json,
                   headers={"content-type": "application/json"}, timeout=30)
    r.raise_for_status()
    return httpx.get(f"{app_url}gradio_api/call/{api}/{r.json()['event_id']}", timeout=60).text


@pytest.fixture(scope="module")
def uploaded(app_url, pictures) -> str:
    import httpx

    with open(pictures[1], "rb") as f:
        path = httpx.post(f"{app_url}gradio_api/upload", files={"files": ("p.png", f, "image/png")}).json()[0]
    return json.dumps({"path": path, "meta": {"_type": "gradio.FileData"}})


@pytest.mark.parametrize("numbers, words", [
    ("64, 4, NaN, 0.6", "The share of mass must be an ordinary number"),
    ("64, 4, 0.6, Infinity", "Value inf is greater than maximum value 1."),
    ("NaN, 4, 0.6, 0.6", "The short side must be an ordinary number"),
    ("64, 2.5, 0.6, 0.6", "The layer must be a whole number"),
    ("64, 4, 5.0, 0.6", "Value 5.0 is greater than maximum value 0.95"),
])
def test_odd_numbers_in_raw_json_get_a_clear_message(app_url, uploaded, numbers, words):
    answer = _raw_call(app_url, "attention",
                       f'{uploaded}, "{registry.OFFLINE_KEY}", {numbers}, "inferno", "mean", 0.0')
    assert "event: error" in answer and words in answer
    answer = _raw_call(app_url, "shuffle", f'{uploaded}, "{registry.OFFLINE_KEY}", NaN')
    assert "event: error" in answer and "The shuffle seed must be an ordinary number" in answer


def test_the_patch_cost_sentence_comes_from_the_calculator(app_url, pictures):
    client = Client(app_url, verbose=False)
    costs = client.predict(handle_file(pictures[0]), 16, 224, "crop", "ViT-B", api_name="/patches")[2]
    assert "the QKᵀ scores alone 4.29 G (12× the real 357.66 M)" in costs and "8.58 G instead of 715.33 M" in costs
    costs = client.predict(handle_file(pictures[0]), 16, 224, "crop", "ViT-S", api_name="/patches")[2]
    scores = 12 * 6 * 197 * 197 * 64  # layers × heads × T² × head width, by hand
    assert f"scores alone {scores * 6 / 1e9:.2f} G (6× the real {scores / 1e6:.2f} M)" in costs


PEAK_MB_PER_HUGE_UPLOAD = 250
"""Stated bound: the server's extra resident memory for one 6320×6320 PNG upload (measured: about 160 MB)."""


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

    clients = [Client(app_url, verbose=False) for _ in range(12)]
    ask = lambda c: c.predict(handle_file(str(path)), 16, 224, "crop", "ViT-B", api_name="/patches")  # noqa: E731
    summary = ask(clients[0])[1]  # warm
    assert "703×703 input → 224×224" in summary  # decoded at 1/9 scale
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
    time.sleep(0.5)
    after = rss_mb()
    stop.set()
    watcher.join()
    assert one < PEAK_MB_PER_HUGE_UPLOAD
    assert after - before < 100, f"{before:.0f} MB before, {peak[0]:.0f} MB at peak, {after:.0f} MB after"


def test_the_ten_to_one_picture_at_the_largest_side_gets_the_budget_message(app_url, dino_in_cache, tmp_path):
    path = tmp_path / "long.png"
    Image.new("RGB", (600, 60), (200, 100, 50)).save(path)
    client = Client(app_url, verbose=False)
    t0 = time.perf_counter()
    with pytest.raises(Exception) as err:
        client.predict(handle_file(str(path)), "DINO ViT-S/8", 512, 12, 0.6, 0.6, "inferno", "mean", 0.0,
                       api_name="/attention")
    assert time.perf_counter() - t0 < 1.0
    assert "64×640 = 40,960 patches for DINO ViT-S/8" in str(err.value) and "smaller short side" in str(err.value)
    notice, *_ = client.predict(handle_file(str(path)), "DINO ViT-S/8", 64, 12, 0.6, 0.6, "inferno", "mean", 0.0,
                                api_name="/attention")  # a smaller short side is answered by the real model
    assert "Showing" not in notice and "DINO ViT-S/8" in notice


def test_identical_figures_written_at_once_are_never_read_half_written(app_url):
    """Many requests giving the same picture at once: a reader sees the whole file or none, never part of it."""
    from gradio import processing_utils

    from vitviz import app

    assert processing_utils.save_pil_to_cache is app._save_pil_atomically  # build_demo installed it
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8))
    cache = tempfile.mkdtemp()
    whole = len(processing_utils.encode_pil_to_bytes(img, "webp"))
    path = processing_utils.save_pil_to_cache(img, cache)
    sizes: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            with open(path, "rb") as f:
                sizes.append(len(f.read()))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: processing_utils.save_pil_to_cache(img, cache), range(400))) == {path}
    stop.set()
    for t in readers:
        t.join()
    assert len(sizes) > 100 and set(sizes) == {whole}
    assert sorted(os.listdir(os.path.dirname(path))) == ["image.webp"]  # no temporary files left


def test_a_full_queue_says_try_again_and_the_app_keeps_serving(monkeypatch):
    """Past the queue's size a request is told at once to try again (the page says the app is busy)."""
    from conftest import free_port
    from gradio_client.utils import QueueError

    from vitviz import app

    monkeypatch.setattr(app, "QUEUE_SIZE", 1)
    demo = app.build_demo()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        clients = [Client(url, verbose=False) for _ in range(8)]
        cat = str(EXAMPLES / "cat.png")

        def ask(client) -> str:
            try:
                client.predict(handle_file(cat), 8, 640, "crop", "ViT-B", api_name="/patches")
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
