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
