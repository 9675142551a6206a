"""One gate for every request: the server-wide memory budget, and every path that takes much memory going through it
(forwards, decoding, packing the explorer's data, a layer's rows, figures)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor


import numpy as np
import pytest
import torch
from conftest import EXAMPLES, module_of
from PIL import Image

from vitviz.analyses import attention as analysis
from vitviz.app import uploads
from vitviz.core import images
from vitviz.models import budget, hooks
from vitviz.models import cache as models
from vitviz.models.runner import Call
from vitviz.render import browser
from vitviz.specs import registry

MiB = 2**20


class Recording(budget.Gate):
    """A gate that also records how much was reserved each time something was let through."""

    def __init__(self, total: int, wait: float = 30) -> None:
        super().__init__(total, wait)
        self.seen: list[tuple[str, int]] = []

    def reserve(self, nbytes, what, covers=False):
        self.seen.append((what, int(nbytes)))
        return super().reserve(nbytes, what, covers)


@pytest.fixture
def gate(monkeypatch):
    """The server's budget replaced by a recording one of the same size (every caller looks it up at call time)."""
    g = Recording(budget.SERVER.total)
    monkeypatch.setattr(budget, "SERVER", g)
    return g


def test_reservations_from_many_threads_never_add_up_past_the_total():
    g = budget.Gate(100 * MiB)
    inside, most = [0], [0]
    lock = threading.Lock()

    def work(_):
        with g.reserve(40 * MiB, "work"):
            with lock:
                inside[0] += 40
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 40

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(32)))
    assert most[0] == 80 and g.peak == 80 * MiB and g.used == 0  # two at a time: 40 + 40 fit, a third does not
    assert g.waited > 0 and g.refused == 0


def test_work_that_waits_too_long_is_refused_with_a_message_and_the_budget_recovers():
    g = budget.Gate(100 * MiB, wait=0.2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with g.reserve(80 * MiB, "a forward"):
            held.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    with pytest.raises(ValueError, match=r"The server is busy: decoding needs about 40 MiB .* try again in a minute"):
        with g.reserve(40 * MiB, "decoding"):
            pass
    release.set()
    t.join()
    with g.reserve(40 * MiB, "decoding"):
        assert g.used == 40 * MiB
    assert g.used == 0 and g.refused == 1


def test_work_larger_than_the_whole_budget_is_refused_at_once():
    g = budget.Gate(100 * MiB, wait=60)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"Decoding this picture would need about 200 MiB, more than this server "
                                         r"allows for all work at once \(100 MiB\)"):
        with g.reserve(200 * MiB, "decoding this picture"):
            pass
    assert time.perf_counter() - t0 < 1 and g.used == 0


def test_a_thread_never_waits_for_memory_it_holds_itself():
    g = budget.Gate(100 * MiB, wait=0.2)
    with g.reserve(80 * MiB, "a bundle"):
        with g.reserve(40 * MiB, "a figure inside it"):
            assert g.used == 120 * MiB
    assert g.used == 0 and g.refused == 0


def test_a_reservation_is_returned_when_the_work_fails():
    g = budget.Gate(100 * MiB)
    with pytest.raises(RuntimeError):
        with g.reserve(60 * MiB, "work"):
            raise RuntimeError("boom")
    assert g.used == 0


def test_a_forward_holds_its_estimate_while_it_runs(gate):
    runner = models.get_model(registry.OFFLINE_KEY)
    x = runner.normalise(np.zeros((64, 64, 3), np.uint8)).repeat(3, 1, 1, 1)
    during = runner.run(Call(lambda model, x, fwd: budget.SERVER.used), x)
    one = budget.forward_bytes(runner.spec, 8 * 8 + 1)
    assert during == 3 * one == runner.forward_estimate(Call(lambda *a: None), x)
    assert budget.SERVER.used == 0 and ("a forward of " + registry.OFFLINE_KEY, 3 * one) in gate.seen


def test_forwards_from_eight_threads_stay_inside_a_small_budget_and_equal_sequential_ones(monkeypatch):
    runner = models.get_model(registry.OFFLINE_KEY)
    rng = np.random.default_rng(0)
    xs = [runner.normalise(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(8)]
    probe = Call(lambda model, x, fwd: fwd(x)[0].numpy().copy())
    sequential = [runner.run(probe, x) for x in xs]
    one = runner.forward_estimate(probe, xs[0])
    monkeypatch.setattr(budget, "SERVER", budget.Gate(int(one * 1.5)))  # room for one forward at a time
    with ThreadPoolExecutor(8) as pool:
        crowd = list(pool.map(lambda x: runner.run(probe, x), xs))
    assert all(np.array_equal(a, b) for a, b in zip(sequential, crowd))
    assert budget.SERVER.peak == one and budget.SERVER.used == 0


def _big_png(path, w, h, seed) -> str:
    """A w×h PNG that compresses well (a gradient with a little noise): a large picture in a small file."""
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 255 // w), (y * 255 // h), np.full_like(x, seed * 40 % 256)], -1).astype(np.uint8)
    Image.fromarray(rgb).save(path, compress_level=1)
    return str(path)


def test_decoding_reserves_the_estimate_read_from_the_header(gate, tmp_path):
    path = _big_png(tmp_path / "big.png", 2000, 1500, 1)
    assert images.decode_bytes(path) == 8 * 2000 * 1500
    Image.open(path).convert("RGB").save(tmp_path / "big.jpg")
    assert images.decode_bytes(tmp_path / "big.jpg", 640) == 8 * 1000 * 750  # decoded at 1/2 scale (draft mode)
    assert uploads.picture(open(path, "rb").read()).shape == (750, 1000, 3)  # shrunk by a whole factor while decoding
    assert ("decoding this picture", 8 * 2000 * 1500) in gate.seen and gate.used == 0


def test_a_picture_larger_than_the_budget_is_refused_before_decoding(monkeypatch, tmp_path):
    path = _big_png(tmp_path / "big2.png", 2000, 1500, 2)
    monkeypatch.setattr(budget, "SERVER", budget.Gate(16 * MiB))
    with pytest.raises(ValueError, match=r"Decoding this picture would need about 23 MiB, more than this server "
                                         r"allows for all work at once \(16 MiB\)"):
        uploads.picture(open(path, "rb").read())


def test_many_large_pictures_at_once_decode_inside_the_budget(monkeypatch, tmp_path):
    paths = [open(_big_png(tmp_path / f"p{i}.png", 1500, 1000, i), "rb").read() for i in range(8)]
    one = images.decode_bytes(paths[0], images.INTAKE_SHORT_SIDE)
    monkeypatch.setattr(budget, "SERVER", budget.Gate(int(2.5 * one)))
    with ThreadPoolExecutor(8) as pool:
        shapes = list(pool.map(lambda p: uploads.picture(p).shape, paths))
    assert shapes == [(1000, 1500, 3)] * 8
    assert budget.SERVER.peak == 2 * one and budget.SERVER.waited > 0


def test_the_decode_cache_is_keyed_by_a_hash_and_bounded_in_bytes(tmp_path):
    import base64

    data = (EXAMPLES / "scene_star.png").read_bytes()
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    a = uploads.picture(url)
    b = uploads.picture({"url": url, "meta": {"_type": "gradio.FileData"}})
    assert a is b  # the same bytes, one decode
    assert all(k.startswith(("sha:", "file:")) and len(k) < 300 for k in uploads._decoded._data)
    assert uploads._decoded.nbytes == uploads.DECODED_BYTES


def test_a_data_url_over_the_upload_limit_is_refused_before_decoding():
    url = "data:image/png;base64," + "A" * (uploads.MAX_UPLOAD_BYTES * 4 // 3 + 8)
    with pytest.raises(ValueError, match="larger than 50 MiB, the limit for any upload"):
        uploads.picture(url)


@pytest.fixture(scope="module")
def analysed():
    runner = models.get_model(registry.OFFLINE_KEY)
    return analysis.analyse(runner, np.asarray(Image.open(EXAMPLES / "scene_star.png").convert("RGB")), 64)


def test_a_layers_keys_are_made_from_the_kept_analysis_with_the_librarys_numbers(gate, analysed):
    a = analysed
    name = browser.key_parts(a)[2]
    with ThreadPoolExecutor(24) as pool:  # a class switching to layer 3 together
        answers = list(pool.map(lambda _: browser.explorer_part(a.token, name), range(24)))
    assert all(r == answers[0] for r in answers) and answers[0][1] == "application/octet-stream"
    assert name == "keys-2.f4"  # the embedded model's are small: float32
    q, k = np.frombuffer(answers[0][0], "<f4").reshape(2, a.maps.heads, a.maps.prefix + a.maps.cls.shape[-1], -1)
    keys = a.maps.keys[2]
    assert np.array_equal(q, keys.q) and np.array_equal(k, keys.k)
    full = {}  # (H, T, T): the model's own attention, on its eager path
    with hooks.record_attention(module_of(a.runner), lambda i, t: full.__setitem__(i, t[0])), torch.inference_mode():
        module_of(a.runner)(a.runner.normalise(a.fitted.image))
    assert np.abs(keys.rows() - full[2].double().numpy()).max() < 1e-6
    reserved = [n_ for what, n_ in gate.seen if what == "a part of the explorer's data"]
    assert len(reserved) == 24 and gate.used == 0


def test_parts_the_server_does_not_hold_are_none(analysed):
    """An analysis it no longer holds, a name that is no part, a part this analysis does not have: all None (404)."""
    assert browser.explorer_part("0" * 16, "keys-1.f4") is None
    for name in ("../etc/passwd", "keys-1.f8", "cls.f2", "image.jpg"):
        assert browser.explorer_part(analysed.token, name) is None
    assert browser.explorer_part(analysed.token, "keys-1.f2") is None  # the embedded model's keys are float32
    assert browser.explorer_part(analysed.token, "keys-99.f4") is None  # a layer it does not have
    assert browser.explorer_part(analysed.token, "keys-1.f4") is not None


def test_packing_the_explorers_data_and_drawing_figures_reserve_from_the_budget(gate, analysed, monkeypatch):
    from vitviz.specs import views as declared

    fields = {n: declared.ATTENTION[n] for n in ("layer", "head", "keep", "alpha", "cmap", "query")}
    values = declared.ATTENTION.check({"model": registry.OFFLINE_KEY})
    with monkeypatch.context() as m:
        m.setattr(browser, "INLINE_BYTES", 0)  # a first map over the page's inline limit: the parts' names only
        browser.attention_payload(analysed, values, fields)
    from contextlib import nullcontext

    from vitviz.render import plotting

    before = plotting.gate_drawing(lambda _n, _what: nullcontext())  # the library alone, as in a notebook (an app
    try:  # built by an earlier test has set the server's gate)
        plotting.bars({"circle": 0.25, "ring": 0.75}, "a figure drawn without the server's gate", "share")
        assert "drawing a figure" not in {what for what, _ in gate.seen}
        plotting.gate_drawing(budget.reserve)  # what the app does as it starts
        plotting.bars({"circle": 0.25, "ring": 0.75}, "a figure drawn with matplotlib", "share")
    finally:
        plotting.gate_drawing(before)
    whats = {what for what, _ in gate.seen}
    assert {"packing the explorer's data", "drawing a figure"} <= whats
    packed = next(n for what, n in gate.seen if what == "packing the explorer's data")
    assert packed == browser.payload_bytes(analysed, 0) == 3 * analysed.fitted.image.nbytes and gate.used == 0
    browser.attention_payload(analysed, values, fields, inline=True)  # the API's answer holds every layer's keys
    packed = [n for what, n in gate.seen if what == "packing the explorer's data"][-1]
    assert packed == browser.payload_bytes(analysed, analysed.maps.layers) > 3 * analysed.fitted.image.nbytes
    browser.attention_payload(analysed, values, fields)  # the page's, small enough to hold its data: as much
    assert [n for what, n in gate.seen if what == "packing the explorer's data"][-1] == packed


def test_a_reservation_that_covers_the_work_inside_it_counts_that_work_once():
    # a probe in stages reserves its whole estimate, covering its stages' own reservations: they neither wait nor
    # count again (twice over, they kept other students' requests waiting for memory nobody used)
    g = budget.Gate(100 * MiB, wait=0.2)
    with g.reserve(60 * MiB, "a probe in stages", covers=True):
        for stage in (60, 35):
            with g.reserve(stage * MiB, "a stage"):
                assert g.used == 60 * MiB
                with g.reserve(10 * MiB, "work inside the stage"):  # only what the stage left of the cover
                    assert g.used == (60 + max(0, 10 - (60 - stage))) * MiB
        with g.reserve(70 * MiB, "a stage larger than the cover"):
            assert g.used == 70 * MiB  # counts what it asks beyond
        with g.reserve(60 * MiB, "a stage"):  # another request fits beside it: nothing is counted twice
            def other() -> None:
                with g.reserve(40 * MiB, "another student's forward"):
                    pass

            t = threading.Thread(target=other)
            t.start()
            t.join()
    assert g.used == 0 and g.waited == 0 and g.refused == 0
    with g.reserve(60 * MiB, "a bundle"):  # without covers, work inside counts on top (a decode in a bundle)
        with g.reserve(30 * MiB, "a decode inside it"):
            assert g.used == 90 * MiB
