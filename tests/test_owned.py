"""Everything the server keeps between requests is named in one place (vitviz.core.owned), with one reset."""

from __future__ import annotations

import importlib
import pkgutil
import threading
import weakref

import numpy as np
import pytest

import vitviz
from vitviz.core import owned
from vitviz.core.lru import LRU, Pool

KEPT_TYPES = (LRU, Pool, weakref.WeakKeyDictionary, weakref.WeakValueDictionary, threading.Event)


def _modules():
    for info in pkgutil.walk_packages(vitviz.__path__, "vitviz."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def _kept_here(module) -> list[tuple[str, object]]:
    """A module's module-level objects that keep state across requests: a cache, a budget, a signal, or a
    container whose lower-case name says it changes (upper-case names are constants)."""
    found = []
    for name, obj in vars(module).items():
        if name.startswith("__") or isinstance(obj, type):
            continue
        if isinstance(obj, KEPT_TYPES) or type(obj).__name__ in ("Gate", "Pictures"):
            found.append((name, obj))
        elif isinstance(obj, (dict, set, list)) and name.lstrip("_")[:1].islower():
            found.append((name, obj))
    return found


def test_every_module_level_cache_gate_and_registry_is_owned():
    """Imports every module of the package and finds each kept object in the one listing."""
    modules = [m for m in _modules() if m is not owned]  # imported first: each registers as it is made
    registered = {id(o.obj) for o in owned.listing()}
    missing = [f"{m.__name__}.{name}" for m in modules for name, obj in _kept_here(m) if id(obj) not in registered]
    assert missing == []
    names = {o.name for o in owned.listing()}
    assert {"runner.results", "cache.models", "uploads.files", "budget.server", "lru.kept", "added.entries",
            "files.pictures", "loaders.hub_reach"} <= names
    assert all(o.about and o.kind in owned.KINDS for o in owned.listing())


def test_the_scan_would_find_a_cache_made_without_the_registry(monkeypatch):
    """The scan above can fail: a module-level LRU, or a lower-case dict, made without :func:`owned.keep`."""
    from vitviz.models import runner

    monkeypatch.setattr(runner, "_stray", LRU(4), raising=False)
    monkeypatch.setattr(runner, "_remembered", {}, raising=False)
    monkeypatch.setattr(runner, "CONSTANT_TABLE", {}, raising=False)
    registered = {id(o.obj) for o in owned.listing()}
    stray = [name for name, obj in _kept_here(runner) if id(obj) not in registered]
    assert sorted(stray) == ["_remembered", "_stray"]


def test_one_reset_empties_the_caches_and_leaves_pages_operator_and_gates(tmp_path):
    from vitviz.app import files
    from vitviz.core.lru import KEPT

    class Held:  # weak references need an object that can have them
        pass

    anchors = []
    filled = []
    for o in owned.listing():
        if o.obj is None or o.kind == "gates":
            continue
        if isinstance(o.obj, LRU):
            o.obj.put(("test_owned", o.name), np.zeros(1, np.uint8))  # has a length and a size
        elif isinstance(o.obj, weakref.WeakKeyDictionary):
            anchors.append(Held())
            o.obj[anchors[-1]] = {}
        elif isinstance(o.obj, dict):
            o.obj[("test_owned", o.name)] = None
        else:
            continue
        filled.append(o)
    picture = tmp_path / "test-owned.png"
    picture.write_bytes(b"a picture's bytes")
    files.PICTURES.hold("test-owned-page", picture)
    held_before = KEPT.held
    try:
        emptied = owned.reset()
        for o in filled:
            if o.kind in owned.RESET_BY_DEFAULT:
                assert o.name in emptied and len(o.obj) == 0, o.name
            else:
                assert o.name not in emptied and len(o.obj) >= 1, o.name
        assert str(picture) in files.PICTURES.held()
        assert {"results", "pictures", "models"} == {o.kind for o in filled if o.name in emptied}
        assert KEPT.held <= held_before  # the budget is not reset: what was let go is counted out
    finally:
        files.PICTURES.release("test-owned-page")
        for o in filled:
            if o.kind not in owned.RESET_BY_DEFAULT and isinstance(o.obj, dict):
                o.obj.pop(("test_owned", o.name), None)


def test_a_reset_of_an_unknown_kind_says_which_exist():
    with pytest.raises(ValueError, match="kinds must be among results, pictures, models"):
        owned.reset("everything")
    with pytest.raises(ValueError, match="kind must be one of"):
        owned.keep("test.bad", "caches", {}, "a wrong kind")
