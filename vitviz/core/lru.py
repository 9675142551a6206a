"""The one cache abstraction: a small thread-safe least-recently-used cache, and one byte budget for all of them.

Requests run in threads: ``get_or_make`` lets the first request for a key do the work
while others asking for the same key at the same moment wait for it and share the
answer (one forward for a class that opens the same view at once, not thirty).

Every cache that keeps something between requests (loaded models, analyses, decoded pictures, encoded PNGs,
charts) is an :class:`LRU` in the one :data:`KEPT` pool: what they hold together stays within one byte budget,
``VITVIZ_KEPT_MB`` (2 GiB by default; loaded models count against it but are never let go), and when it is passed
the least recently used entry among them all goes, whichever cache holds it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from vitviz.core import owned

V = TypeVar("V")


def weigh(value: object, depth: int = 4) -> int:
    """Roughly what ``value`` holds in bytes: arrays, tensors, bytes, strings and pictures, found inside tuples,
    lists, dicts and dataclasses (``depth`` levels down); anything else counts nothing."""
    if depth < 0 or value is None:
        return 0
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    nbytes = getattr(value, "nbytes", None)  # numpy arrays, torch tensors
    if isinstance(nbytes, int):
        return nbytes
    if hasattr(value, "getbands") and hasattr(value, "size"):  # a PIL image
        w, h = value.size
        return w * h * len(value.getbands())
    if isinstance(value, dict):
        return sum(weigh(v, depth - 1) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(weigh(v, depth - 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(weigh(getattr(value, f.name), depth - 1) for f in dataclasses.fields(value))
    return 0


class Pool:
    """One byte budget shared by several :class:`LRU` caches (one lock for them all: their operations are a few
    dictionary steps). Over budget, the least recently used entry among the members goes; the newest entry of
    each cache always stays, and a member made with ``evict=False`` (the loaded models) only counts."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.lock = threading.RLock()
        self.members: weakref.WeakSet[LRU] = weakref.WeakSet()
        self.clock = itertools.count()

    @property
    def held(self) -> int:
        """Bytes held by all the members now."""
        with self.lock:
            return sum(m._held for m in list(self.members))

    def forget(self) -> None:
        """Empty every member that lets entries go (all but the loaded models)."""
        with self.lock:
            for m in list(self.members):
                if m.evict:
                    m.clear()

    def trim(self) -> None:
        """Let the least recently used entries go until the members are within the budget (under ``lock``)."""
        while self.held > self.nbytes:
            members = [m for m in list(self.members) if m.evict and len(m._data) > 1]
            if not members:
                return
            min(members, key=lambda m: m._ticks[next(iter(m._data))])._drop_oldest()


def _megabytes(*names: str, default: float) -> int:
    for name in names:
        if os.environ.get(name):
            return int(float(os.environ[name]) * 2**20)
    return int(default * 2**20)


KEPT = owned.keep("lru.kept", "gates", Pool(_megabytes("VITVIZ_KEPT_MB", "VITVIZ_RESULTS_MB", default=2048)),
                  "the byte budget of everything kept")
"""Everything kept between requests, in one byte budget (``VITVIZ_KEPT_MB``; ``VITVIZ_RESULTS_MB``, its old name,
is read too)."""


class LRU(Generic[V]):
    """The newest entries within ``items`` entries and, with ``size``, ``nbytes`` bytes of its own and the budget of
    its ``pool`` (:data:`KEPT` by default; the newest always stays); ``size`` is :func:`weigh` unless given. ``evict=False``: entries stay until cleared
    (they count against the pool)."""

    def __init__(self, items: int, nbytes: int | None = None, size: Callable[[V], int] | None = weigh,
                 pool: Pool | None = KEPT, evict: bool = True) -> None:
        self.items, self.nbytes, self.size, self.pool, self.evict = items, nbytes, size, pool, evict
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._ticks: dict[Hashable, int] = {}  # when each entry was last used (the pool compares caches by it)
        self._held = 0  # bytes of the values held (with ``size``)
        self._lock = pool.lock if pool is not None else threading.RLock()
        self._pending: dict[Hashable, threading.Lock] = {}
        if pool is not None:
            with pool.lock:
                pool.members.add(self)

    def _touch(self, key: Hashable) -> None:
        self._data.move_to_end(key)
        self._ticks[key] = next(self.pool.clock) if self.pool is not None else 0

    def _drop_oldest(self) -> None:
        key, value = self._data.popitem(last=False)
        self._ticks.pop(key, None)
        self._held -= self._size(value)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._touch(key)
            return self._data[key]

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            if key in self._data:
                self._held -= self._size(self._data[key])
            self._data[key] = value
            self._held += self._size(value)
            self._touch(key)
            while self.evict and len(self._data) > 1 and (len(self._data) > self.items or self._over_bytes()):
                self._drop_oldest()
            if self.pool is not None:
                self.pool.trim()
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The cached value, or ``make()``'s, made once even when several threads ask at the same moment."""
        hit = self.get(key)
        if hit is not None:
            return hit
        with self._lock:
            pending = self._pending.setdefault(key, threading.Lock())
        with pending:
            hit = self.get(key)
            if hit is not None:
                return hit
            try:
                return self.put(key, make())
            finally:
                with self._lock:
                    self._pending.pop(key, None)

    def values(self) -> Iterator[V]:
        with self._lock:
            return iter(list(self._data.values()))

    def pop(self, key: Hashable) -> V | None:
        """Forget ``key``; its value, or None."""
        with self._lock:
            if key not in self._data:
                return None
            value = self._data.pop(key)
            self._ticks.pop(key, None)
            self._held -= self._size(value)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._ticks.clear()
            self._held = 0

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is held (without making it the newest)."""
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    @property
    def held(self) -> int:
        """Bytes of the values held (as ``size`` weighs them)."""
        return self._held

    def _size(self, value: V) -> int:
        return self.size(value) if self.size is not None else 0

    def _over_bytes(self) -> bool:
        return self.nbytes is not None and self._held > self.nbytes
