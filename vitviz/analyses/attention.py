"""One forward per (model, image, resolution): checked against the budget, run under the model's lock, cached.

``analyse`` is what the Attention tab (and anything else that wants a model's
attention over a picture) calls. It fits the picture, refuses it with a clear
message when it would be over the model's token limit, runs the forward
through :meth:`vitviz.models.runner.LoadedModel.capture` (the model's lock: no other
request can touch the model meanwhile) and keeps the result in a small
thread-safe LRU cache, so that moving a slider redraws without a forward.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from vitviz.models import budget
from vitviz.core.attention import AttentionMaps
from vitviz.core.images import Fitted, fit_to_patches, fitted_shape
from vitviz.models.runner import LoadedModel
from vitviz.core.lru import LRU

CACHE_ITEMS = 12
CACHE_BYTES = 1536 * 2**20
"""The cache keeps the newest analyses within both limits (the newest one always stays)."""


@dataclass
class Analysis:
    """One forward pass and everything needed to redraw it: the model, the fitted picture, the maps."""

    loaded: LoadedModel
    fitted: Fitted
    maps: AttentionMaps
    resolution: int = 0
    """The short side the picture was fitted to (the embedded model's own size for the embedded model)."""
    token: str = ""
    """Names this analysis for :func:`find` (a digest of model, picture and resolution)."""


_cache: LRU[Analysis] = LRU(CACHE_ITEMS, CACHE_BYTES, lambda a: a.maps.nbytes)


def image_key(rgb: np.ndarray) -> str:
    """A digest of an (H, W, 3) array's pixels and shape."""
    return hashlib.sha1(np.ascontiguousarray(rgb).tobytes() + str(rgb.shape).encode()).hexdigest()


def find(token: str) -> Analysis | None:
    """The cached analysis named ``token``, or None when it has left the cache."""
    return next((a for a in _cache.values() if a.token == token), None)


def clear_cache() -> None:
    _cache.clear()


def _resolution(loaded: LoadedModel, resolution: int, shape: tuple[int, int]) -> int:
    """The short side the picture will be fitted to, after checking the token budget from the shapes alone."""
    if loaded.spec.family == "embedded":
        resolution = loaded.resolution
    p = loaded.spec.patch
    resolution = max(int(resolution), p)
    h, w = fitted_shape(*shape, resolution, p, "keep")
    budget.check_attention(loaded.spec, (h // p, w // p), resolution)
    return resolution


def prepare(loaded: LoadedModel, rgb: np.ndarray, resolution: int) -> tuple[Fitted, int]:
    """The picture fitted as :func:`analyse` fits it, and the short side used; ``ValueError`` over the budget."""
    resolution = _resolution(loaded, resolution, rgb.shape[:2])
    return fit_to_patches(rgb, resolution, loaded.spec.patch, "keep"), resolution


def analyse(loaded: LoadedModel, rgb: np.ndarray, resolution: int) -> Analysis:
    """Fit ``rgb`` (short side ``resolution``, aspect kept) and run ``loaded`` once; cached.

    The embedded model always runs at its own 64 px: it was trained at that size only.

    Raises:
        ValueError: when the fitted picture would be over the model's token budget
            (checked from the shapes alone, before resizing or any forward).
    """
    resolution = _resolution(loaded, resolution, rgb.shape[:2])
    key = (id(loaded.model), image_key(rgb), resolution)  # cached entries keep their model alive

    def run() -> Analysis:  # the same request twice at once runs one forward; the other waits for it
        fitted = fit_to_patches(rgb, resolution, loaded.spec.patch, "keep")
        token = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
        maps = loaded.capture(loaded.normalise(fitted.image), fitted.grid)
        return Analysis(loaded, fitted, maps, resolution, token)

    return _cache.get_or_make(key, run)
