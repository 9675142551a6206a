"""Everything the server keeps between requests, named in one place, with one reset.

A module that keeps state across requests registers the object where it makes it::

    _results: LRU[Run] = owned.keep("runner.results", "results", LRU(...), "analyses made, for the next request")

Kinds, and what :func:`reset` does with each:

- ``results``: made from requests (analyses, figures drawn, device tables and manifests, precisions measured);
  emptied by :func:`reset`, made again when next asked.
- ``pictures``: the pictures the server has (decoded, and each address's file); emptied by :func:`reset` (a page
  then sends its picture again).
- ``models``: loaded models and what was learnt about loading them (failures, availability, the hub's reach);
  emptied by :func:`reset` (the next request loads again).
- ``pages``: what open pages hold (their pictures); emptied only when asked by name.
- ``operator``: what the server's operator configured (models added from a models file); emptied only when asked.
- ``gates``: the byte budget and the signals between threads; never emptied (a reset while a request runs
  would lose its accounting).

:func:`listing` names every object (``tests/test_owned.py`` imports every module of the package and fails on a
module-level cache, registry or signal not registered here).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

KINDS = ("results", "pictures", "models", "pages", "operator", "gates")
RESET_BY_DEFAULT = ("results", "pictures", "models")


@dataclass(frozen=True)
class Owned:
    """One object the server keeps: its name (``module.what``), kind (:data:`KINDS`), the object, how it is
    emptied, and what it holds (one line)."""

    name: str
    kind: str
    obj: object
    empty: Callable[[], None] | None
    about: str


_owned: dict[str, Owned] = {}
_lock = threading.Lock()


def keep(name: str, kind: str, obj: T, about: str, empty: Callable[[], None] | None = None) -> T:
    """Register ``obj`` under ``name`` and return it. ``empty`` empties it (default: its ``clear()``; gates have
    none). Registering a name again (a module reloaded) replaces the entry."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if empty is None and kind != "gates":
        empty = obj.clear  # type: ignore[attr-defined]
    with _lock:
        _owned[name] = Owned(name, kind, obj, empty, about)
    return obj


def cleared_under(lock: threading.Lock, *objs) -> Callable[[], None]:
    """An ``empty`` for containers guarded by ``lock``: each cleared while holding it."""

    def empty() -> None:
        with lock:
            for o in objs:
                o.clear()

    return empty


def listing() -> list[Owned]:
    """Every registered object, by name."""
    with _lock:
        return sorted(_owned.values(), key=lambda o: o.name)


def reset(*kinds: str, names: Iterable[str] = ()) -> list[str]:
    """Empty every object of ``kinds`` (default :data:`RESET_BY_DEFAULT`) and those named in ``names``; returns
    the names emptied. Gates are never emptied."""
    kinds = kinds or RESET_BY_DEFAULT
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"kinds must be among {', '.join(KINDS)}; got {sorted(unknown)}")
    wanted = set(names)
    done = []
    for o in listing():
        if o.empty is not None and (o.kind in kinds or o.name in wanted):
            o.empty()
            done.append(o.name)
    return done
