"""The shared LRU: eviction by count and bytes, and one make() for simultaneous requests, also after a failure."""

from __future__ import annotations

import threading
import time

import pytest

from vitviz.core.lru import LRU


def test_evicts_the_oldest_by_count_and_by_bytes_but_keeps_the_newest():
    c = LRU(2)
    c.put("a", 1), c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the newest
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    sized = LRU(10, nbytes=100, size=len)
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
    runner.clear_results()
    rng = np.random.default_rng(0)
    made = [analysis.analyse(tiny_runner, rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), 64)
            for _ in range(40)]
    assert all(runner.find(a.token) is not None for a in made)
    weight = runner.results_bytes() // 40
    small = LRU(runner.RESULTS_ITEMS, 5 * weight + 1, lambda r: r.nbytes)
    for a in made:
        small.put(a.token, runner.find(a.token))
    assert len(small) == 5 and small.held <= 5 * weight + 1
    runner.clear_results()


def test_simultaneous_requests_make_once_and_a_failure_is_not_remembered():
    c, calls = LRU(4), []

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
    runner.clear_results()
    calls = []
    real = runner.fit_to_patches
    monkeypatch.setattr(runner, "fit_to_patches", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = analysis.analyse(tiny, rgb, 64)
    again = analysis.analyse(tiny, rgb, 64)
    assert len(calls) == 1 and again.token == first.token and again.maps is first.maps
    runner.clear_results()
