"""The one process-wide cache of loaded models, keyed by the registry.

``get_model(key)`` loads a registry model once per process (one loader per key,
other threads wait and reuse it). When the real weights cannot be had it returns
the embedded model with ``notice`` saying why, and remembers the failure for
``FAILURE_TTL`` seconds so that a slider move does not retry the load. Random
weights are never shown as a pretrained model.

Where things live: the list of models is :mod:`vitviz.specs.registry`, how they are
loaded is :mod:`vitviz.models.loaders`, and the object that owns a loaded model and
runs every forward under its lock is :class:`vitviz.models.runner.Runner`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Iterator
from typing import Callable

from vitviz import assets
from vitviz.core import owned
from vitviz.core.lru import LRU
from vitviz.models import loaders
from vitviz.models.runner import Runner
from vitviz.specs.registry import ADDED_ABOUT, CNN_OFFLINE_KEY, OFFLINE_KEY, REGISTRY
from vitviz.specs.registry import spec as registry_spec

FAILURE_TTL = 300.0
"""Seconds a failed load is remembered before it is tried again."""
log = logging.getLogger("vitviz")

_models: LRU[Runner] = owned.keep("cache.models", "models", LRU(10_000, size=lambda r: r.nbytes, evict=False),
                                  "loaded models by registry key")
"""Loaded models by cache key (the registry's key; ``key@step`` for the timeline's checkpoints): counted against
the server's one byte budget (``core.lru.KEPT``), never let go."""
_failures: dict[str, tuple[float, str]] = {}
_cache_lock = threading.Lock()
owned.keep("cache.failures", "models", _failures, "failed loads, remembered for a while",
           owned.cleared_under(_cache_lock, _failures))


def _cached(cache_key: str, make: Callable[[], Runner]) -> Runner:
    """The model loaded once per key: one loader, the others wait and then reuse it."""
    def load() -> Runner:
        t0 = time.perf_counter()
        loaded = make()
        log.info("loaded %s from %s in %.1f s", cache_key, loaded.origin, time.perf_counter() - t0)
        return loaded
    return _models.get_or_make(cache_key, load)


def adopt(key: str, runner: Runner) -> None:
    """Keep a model loaded elsewhere (an added model, checked when its file was read) under ``key``."""
    _models.put(key, runner)


def forget(key: str) -> None:
    """Let the model ``key`` go (an added model taken off the list)."""
    _models.pop(key)


_asked: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("vitviz_models_asked", default=None)


@contextlib.contextmanager
def asked() -> Iterator[dict[str, str]]:
    """Collects, inside the ``with``, each model asked for (``get_model``, ``get_checkpoint``) in this thread's
    context: cache key -> the weights id of the model that answered (a stand-in's when the model could not be had)."""
    seen: dict[str, str] = {}
    token = _asked.set(seen)
    try:
        yield seen
    finally:
        _asked.reset(token)


def _answered(key: str, runner: Runner) -> Runner:
    seen = _asked.get()
    if seen is not None:
        seen[key] = runner.weights_id
    return runner


def still(seen: dict[str, str]) -> bool:
    """Whether each model in ``seen`` (from :func:`asked`) would answer as it did: the same weights loaded, or, for
    a model that could not be had, its failure still remembered and the same stand-in (else it may load now)."""
    for key, weights in seen.items():
        loaded_now = _models.get(key)
        if loaded_now is not None:
            if loaded_now.weights_id != weights:
                return False
            continue
        with _cache_lock:
            failed = _failures.get(key)
        if not failed or time.monotonic() - failed[0] >= FAILURE_TTL:
            return False
        stand_in = _models.get(CNN_OFFLINE_KEY if registry_spec(key).task == "cnn" else OFFLINE_KEY)
        if stand_in is None or stand_in.weights_id != weights:
            return False
    return True


def loaded(key: str) -> bool:
    """Whether the model ``key`` is loaded in this process."""
    return key in _models


def get_checkpoint(step: int) -> Runner:
    """A training-timeline checkpoint of the embedded model, by training step (cached)."""
    files = dict(assets.tiny_checkpoints())
    if step not in files:
        raise ValueError(f"No checkpoint at step {step}; there are {sorted(files)}.")
    key = f"{OFFLINE_KEY}@{step}"
    return _answered(key, _cached(key, lambda: loaders.load_embedded(files[step])))


def checkpoint_at(index: int) -> tuple[int, Runner]:
    """(training step, model) of the ``index``-th shipped checkpoint, clamped to the ones there are."""
    steps = [s for s, _ in assets.tiny_checkpoints()]
    step = steps[min(max(int(index), 0), len(steps) - 1)]
    return step, get_checkpoint(step)


def _fallback(key: str, reason: str) -> Runner:
    if registry_spec(key).task == "cnn":
        small = _cached(CNN_OFFLINE_KEY, loaders.load_embedded_cnn)
        return small.standing_in((
            f"**Showing {CNN_OFFLINE_KEY}, not {key}:** {reason}. The offline CNN is a small ResNet that vitviz "
            "trained itself on generated shapes; it only knows the shape scenes in the examples, and on a photo it "
            "still picks one of its shape classes."))
    embedded = _cached(OFFLINE_KEY, loaders.load_embedded)
    return embedded.standing_in((
        f"**Showing {OFFLINE_KEY}, not {key}:** {reason}. The offline model is a tiny ViT that vitviz "
        "trained itself on generated shapes (with labels, not DINO); its attention is real but it only "
        "knows the shape scenes in the examples. On a photo it still picks one of its shape classes, however "
        "sure it looks."))


def get_model(key: str, progress: Callable[[float, str], None] | None = None) -> Runner:
    """The loaded model for registry ``key``, loading it once per process.

    When the real weights cannot be had (hub unreachable and not cached, or a
    failed download) this returns the embedded model with ``notice`` saying why.
    """
    return _answered(key, _get_model(key, progress))


def _get_model(key: str, progress: Callable[[float, str], None] | None) -> Runner:
    spec = registry_spec(key)
    if spec.loader is not None:  # added by this server's operator: checked at start, loaded again after a clear
        return _cached(key, spec.loader)
    if spec.family == "embedded":
        return _cached(key, loaders.load_embedded_cnn if spec.task == "cnn" else loaders.load_embedded)
    hit = _models.get(key)
    if hit is not None:
        return hit
    with _cache_lock:
        failed = _failures.get(key)
    if failed and time.monotonic() - failed[0] < FAILURE_TTL:
        return _fallback(key, failed[1])
    if progress:
        progress(0.1, f"checking whether the model hub is reachable for {key}")
    online = loaders.hub_reachable()
    if progress:
        progress(0.3, f"loading {key} from the hub" if online else f"looking for {key} in the local cache")
    try:
        if spec.family == "hf":
            return _cached(key, lambda: loaders.load_hf(spec.source, local_only=not online, spec=spec))
        return _cached(key, lambda: loaders.load_timm(spec.source, local_only=not online, spec=spec))
    except Exception as err:  # offline and not cached, or the download failed
        reason = ("the model hub cannot be reached and the weights are not in the local cache" if not online
                  else f"loading failed ({type(err).__name__})")
        log.warning("cannot load %s (%s: %s); showing %s for the next %.0f s", key, type(err).__name__, err,
                    CNN_OFFLINE_KEY if spec.task == "cnn" else OFFLINE_KEY, FAILURE_TTL)
        with _cache_lock:
            _failures[key] = (time.monotonic(), reason)
        return _fallback(key, reason)


_availability: dict[str, bool] = {}
_availability_lock = threading.Lock()
owned.keep("cache.availability", "models", _availability, "which models can be loaded here",
           owned.cleared_under(_availability_lock, _availability))


def available_now() -> dict[str, bool]:
    """Registry key -> can its real weights be had without waiting (loaded, cached, or the hub reachable)?

    The files and the hub are looked at once per process, without downloading anything, within
    about two seconds (one reachability probe); a model loaded since counts as available.
    For labelling the model lists before anyone clicks.
    """
    with _availability_lock:
        if not _availability:
            reachable = loaders.hub_reachable(timeout=1.2)
            for key, spec in REGISTRY.items():
                _availability[key] = reachable or not loaders.availability(spec).startswith("needs")
        found = dict(_availability)
    return {key: ok or key in _models for key, ok in found.items()}


def choice_label(key: str) -> str:
    """How a model list shows ``key``: its name, and ': needs download' when it cannot be had now, or
    '(added by this server)' for a model of the server's models file."""
    if key in REGISTRY and REGISTRY[key].added:
        return f"{key} ({ADDED_ABOUT})"
    return key if available_now().get(key, True) else f"{key}: needs download"
