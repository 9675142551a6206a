"""The shared LRU: eviction by count and bytes, and one make() for simultaneous requests, also after a failure."""

from __future__ import annotations

import threading
import time

import pytest

from vitviz.core import owned
from vitviz.core.lru import LRU, Pool, weigh


def test_evicts_the_oldest_by_count_and_by_bytes_but_keeps_the_newest():
    c = LRU(2, pool=None)
    c.put("a", 1), c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the newest
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    sized = LRU(10, nbytes=100, size=len, pool=None)
    sized.put("x", b"1" * 60), sized.put("y", b"2" * 60)
    assert sized.get("x") is None and len(sized) == 1
    sized.put("z", b"3" * 500)  # over the limit alone: the newest always stays
    assert sized.get("z") is not None and len(sized) == 1
    assert sized.held == 500
    sized.put("z", b"4" * 30), sized.put("w", b"5" * 30)  # a replaced value is counted once
    assert sized.held == 60 and len(sized) == 2
    sized.clear()
    assert sized.held == 0


def test_the_result_store_is_bounded_by_bytes_not_by_a_count_of_analyses():
    """Forty pictures (a class, each with its own): all forty analyses are kept, where the store once held the
    newest 24 and the explorer's data of the rest answered 404; a store of a few analyses' bytes keeps only those."""
    import numpy as np

    from vitviz.analyses import attention as analysis
    from vitviz.models import cache, runner
    from vitviz.specs import registry

    tiny_runner = cache.get_model(registry.OFFLINE_KEY)
    owned.reset("results")
    rng = np.random.default_rng(0)
    made = [analysis.analyse(tiny_runner, rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), 64)
            for _ in range(40)]
    assert all(runner.find(a.token) is not None for a in made)
    weight = runner.results_bytes() // 40
    small = LRU(runner.RESULTS_ITEMS, 5 * weight + 1, lambda r: r.nbytes, pool=None)
    for a in made:
        small.put(a.token, runner.find(a.token))
    assert len(small) == 5 and small.held <= 5 * weight + 1
    owned.reset("results")


def test_caches_in_one_pool_share_one_byte_budget_and_the_least_recently_used_entry_goes_first():
    """One budget for everything a server keeps: over it, the entry used longest ago goes, whichever cache holds
    it; the newest of each cache stays; a cache that never lets go (the loaded models) only counts."""
    pool = Pool(100)
    models = LRU(10, size=len, pool=pool, evict=False)
    a, b = LRU(10, size=len, pool=pool), LRU(10, size=len, pool=pool)
    models.put("m", b"m" * 40)
    a.put("a1", b"1" * 20), b.put("b1", b"2" * 20), a.put("a2", b"3" * 20)
    assert pool.held == 100 and len(a) == 2 and len(b) == 1
    assert a.get("a1") is not None  # a1 read again: now the newest of all
    b.put("b2", b"4" * 20)  # 120 > 100: b1 goes (used longest ago; a2 is newer, a1 newer still)
    assert pool.held <= 100 and "m" in models
    assert "b1" not in b and "a2" in a and "a1" in a, (list(a._data), list(b._data))
    models.put("n", b"n" * 70)  # the models alone pass the budget: every cache keeps only its newest
    assert len(a) == 1 and len(b) == 1 and len(models) == 2 and pool.held == 150
    pool.forget()
    assert len(a) == len(b) == 0 and len(models) == 2


def test_weigh_finds_the_bytes_inside_containers_and_dataclasses():
    import dataclasses

    import numpy as np
    import torch
    from PIL import Image

    @dataclasses.dataclass
    class Held:
        arr: np.ndarray
        parts: tuple
        name: str

    held = Held(np.zeros((10, 10), np.float32), (torch.zeros(5, dtype=torch.float64), {"x": b"12345"}), "ab")
    assert weigh(held) == 400 + 40 + 5 + 2
    assert weigh(Image.new("RGB", (4, 3))) == 36 and weigh(object()) == 0 and weigh(None) == 0


def test_the_servers_caches_are_all_in_the_one_pool():
    """Loaded models, analyses, decoded pictures, explorer PNGs and charts: every cache of the server counts
    against the one budget (``KEPT``)."""
    from vitviz.app import uploads
    from vitviz.core.lru import KEPT
    from vitviz.models import cache, runner
    from vitviz.render import browser
    from vitviz.views import attention, vitcnn

    members = set(map(id, KEPT.members))
    for held in (cache._models, runner._results, uploads._decoded, browser._PNGS, attention._distance_charts,
                 vitcnn._shift_cache):
        assert id(held) in members
    assert not cache._models.evict


def test_simultaneous_requests_make_once_and_a_failure_is_not_remembered():
    c, calls = LRU(4, pool=None), []

    def make():
        calls.append(1)
        time.sleep(0.2)
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(c.get_or_make("k", make))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(g is got[0] for g in got)

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        c.get_or_make("bad", broken)
    assert c.get_or_make("bad", lambda: 7) == 7 and not c._pending


def test_a_kept_analysis_is_found_before_the_picture_is_resized(monkeypatch):
    """The second event of a click (the figures after the explorer's data) finds the analysis the first made:
    the picture is not fitted again, and no forward runs."""
    import numpy as np

    from vitviz.analyses import attention as analysis
    from vitviz.models import cache, runner
    from vitviz.specs import registry

    tiny = cache.get_model(registry.OFFLINE_KEY)
    rgb = np.random.default_rng(1).integers(0, 256, (70, 90, 3), dtype=np.uint8)
    owned.reset("results")
    calls = []
    real = runner.Runner.fit_at
    monkeypatch.setattr(runner.Runner, "fit_at", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = analysis.analyse(tiny, rgb, 64)
    again = analysis.analyse(tiny, rgb, 64)
    assert len(calls) == 1 and again.token == first.token and again.maps is first.maps
    owned.reset("results")


def test_a_shared_picture_is_hashed_once_for_every_event_of_a_click(monkeypatch):
    """A decoded upload is shared (read-only, hashed when decoded): the events after the first find its analysis
    without hashing its pixels again; a private copy is hashed as before, and gets the same key."""
    import numpy as np

    from vitviz.analyses import attention as analysis
    from vitviz.models import cache, runner
    from vitviz.specs import registry

    tiny = cache.get_model(registry.OFFLINE_KEY)
    rgb = runner.shared_picture(np.random.default_rng(2).integers(0, 256, (64, 80, 3), dtype=np.uint8))
    assert not rgb.flags.writeable
    owned.reset("results")
    first = analysis.analyse(tiny, rgb, 64)
    hashed, real = [], runner._digest
    monkeypatch.setattr(runner, "_digest", lambda a: hashed.append(1) or real(a))
    again = analysis.analyse(tiny, rgb, 64)
    assert again.token == first.token and hashed == []
    copy = analysis.analyse(tiny, rgb.copy(), 64)
    assert copy.token == first.token and len(hashed) == 1
    monkeypatch.undo()
    assert runner.image_key(rgb) == runner.image_key(rgb.copy())
    owned.reset("results")
