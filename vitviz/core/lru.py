"""A small thread-safe least-recently-used cache, shared by everything that keeps a request's costly result.

Requests run in threads: ``get_or_make`` lets the first request for a key do the work
while others asking for the same key at the same moment wait for it and share the
answer (one forward for a class that opens the same view at once, not thirty).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

V = TypeVar("V")


class LRU(Generic[V]):
    """The newest entries within ``items`` entries and, with ``size``, ``nbytes`` bytes (the newest always stays)."""

    def __init__(self, items: int, nbytes: int | None = None, size: Callable[[V], int] | None = None) -> None:
        self.items, self.nbytes, self.size = items, nbytes, size
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._held = 0  # bytes of the values held (with ``size``)
        self._lock = threading.Lock()
        self._pending: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            if key in self._data:
                self._held -= self._size(self._data[key])
            self._data[key] = value
            self._held += self._size(value)
            self._data.move_to_end(key)
            while len(self._data) > 1 and (len(self._data) > self.items or self._over_bytes()):
                self._held -= self._size(self._data.popitem(last=False)[1])
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

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._held = 0

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is held (without making it the newest)."""
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    @property
    def held(self) -> int:
        """Bytes of the values held (0 without ``size``)."""
        return self._held

    def _size(self, value: V) -> int:
        return self.size(value) if self.size is not None else 0

    def _over_bytes(self) -> bool:
        return self.nbytes is not None and self._held > self.nbytes
