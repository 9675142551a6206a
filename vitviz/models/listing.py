"""The models put on the lists while the server runs: an operator's models file (:mod:`vitviz.models.added`) or
a model given in Python (:func:`vitviz.views.use_model`). The registry's run-time part: ``vitviz.specs.registry``
lists vitviz's own models and reads these through the function this module hands it when imported.
"""

from __future__ import annotations

import threading

from vitviz.core import owned
from vitviz.specs import registry
from vitviz.specs.registry import ModelSpec

_added: dict[str, ModelSpec] = {}
_lock = threading.Lock()
owned.keep("listing.added", "operator", _added, "models put on the lists at run time",
           owned.cleared_under(_lock, _added))
registry.listed_with(lambda: _added)


def add(entry: ModelSpec) -> None:
    """Put ``entry`` on the lists after vitviz's own models (again under its key: the newer one)."""
    if entry.key in registry.OWN:
        raise ValueError(f"{entry.key!r} is already one of vitviz's own models; give the added one another name.")
    with _lock:
        _added[entry.key] = entry


def remove(key: str) -> None:
    """Take the added model ``key`` off the lists (nothing when it is not there)."""
    with _lock:
        _added.pop(key, None)


def remove_added() -> None:
    """Take every added model off the lists."""
    with _lock:
        _added.clear()
