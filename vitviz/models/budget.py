"""What one request may cost, checked before the work, with a message that says what to change.

Three budgets, all checked before anything heavy runs:

- **intake**: uploads over ``images.MAX_PIXELS`` are refused from their header,
  and the rest are shrunk while decoding to what the largest view can use
  (``images.INTAKE_SHORT_SIDE``);
- **attention forwards**: the estimated peak memory of one forward with every
  layer's attention recorded must fit in ``REQUEST_BYTES``; that gives each
  model its own token limit (:func:`max_tokens`);
- **patch grids**: the Patches tab draws at most ``MAX_GRID_PATCHES`` patches.

And every number that arrives from outside (a slider, raw JSON) goes through
:func:`number`, so NaN, infinity and out-of-range values get a clear message.
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache

from vitviz.core import attention as att
from vitviz.specs.registry import ModelSpec

REQUEST_BYTES = 2 * 2**30
"""Peak memory one attention forward may take (estimate, checked before the forward)."""
ATTENTION_COPIES = 2
"""(H, T, T) float32 matrices alive at once inside one eager attention layer (scores and softmax). With it the
estimate is 1.41 GB for DINO ViT-S/8 at 3,601 tokens, where ``benchmarks/bench.py`` measured 1.00 GB."""
log = logging.getLogger("vitviz")
MAX_GRID_PATCHES = 25_600
"""The Patches tab's largest grid: 160×160 (4-pixel patches on a 640-pixel square)."""


def attention_bytes(spec: ModelSpec, tokens: int) -> int:
    """Estimated peak bytes of one forward of ``spec`` over ``tokens`` tokens with attention recorded.

    Transient: ``ATTENTION_COPIES`` (H, T, T) float32 matrices in the layer being
    computed, the (N, N) patch-distance matrix and one head's product with it,
    and the token activations (12 float32 (T, D) tensors is generous for a
    block with a 4·D MLP). Kept: what :func:`vitviz.core.attention.collect` keeps
    (every layer while it fits its budget, else the last layer plus head-fused
    float16 matrices for rollout).
    """
    t, n = tokens, tokens - spec.prefix
    layer = spec.heads * t * t * 4
    full = spec.depth * layer
    fused = 3 * spec.depth * t * t * 2  # float16 head-fused matrices: mean, max and min, or the mean alone
    fused = fused if fused <= att.FUSED_BUDGET_BYTES else fused // 3
    kept = full if full <= att.FULL_BUDGET_BYTES else layer + fused
    distance = 2 * n * n * 4
    activations = 12 * t * spec.dim * 4
    return ATTENTION_COPIES * layer + kept + distance + activations


@lru_cache(maxsize=64)
def max_tokens(spec: ModelSpec, limit: int = REQUEST_BYTES) -> int:
    """The largest token count whose :func:`attention_bytes` fits in ``limit``."""
    lo, hi = 1, 1 << 20
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if attention_bytes(spec, mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_attention(spec: ModelSpec, grid: tuple[int, int], resolution: int | None = None) -> None:
    """Raise ``ValueError`` if a (gh, gw) patch grid is over ``spec``'s token limit; says what to change."""
    gh, gw = grid
    tokens = gh * gw + spec.prefix
    limit = max_tokens(spec)
    if tokens > limit:
        side = f" at a short side of {resolution} pixels" if resolution else ""
        gb = attention_bytes(spec, tokens) / 2**30
        log.info("refused %s: %d×%d patches (%d tokens, limit %d)", spec.key, gh, gw, tokens, limit)
        raise ValueError(
            f"This picture{side} becomes {gh}×{gw} = {gh * gw:,} patches for {spec.key}: {tokens:,} tokens, "
            f"which would need about {gb:.1f} GB. The limit for this model is {limit:,} tokens. Choose a smaller "
            "short side, or crop the picture to a squarer shape (very long pictures make many patches).")


def check_grid(grid: tuple[int, int]) -> None:
    """Raise ``ValueError`` if a patch grid is too large to draw on the Patches tab."""
    gh, gw = grid
    if gh * gw > MAX_GRID_PATCHES:
        log.info("refused a %d×%d patch grid (limit %d patches)", gh, gw, MAX_GRID_PATCHES)
        raise ValueError(
            f"That makes {gh}×{gw} = {gh * gw:,} patches; the Patches tab draws at most {MAX_GRID_PATCHES:,}. "
            "Choose a larger patch size, a smaller resolution, or the crop policy.")


def number(value: object, name: str, lo: float, hi: float, integer: bool = False) -> float | int:
    """``value`` as a finite number in [lo, hi] (an int if ``integer``), else ``ValueError`` naming ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"The {name} must be a number, not {value!r}.")
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"The {name} must be a number, not {value!r}.") from None
    if not math.isfinite(v):
        raise ValueError(f"The {name} must be an ordinary number, not {value!r}.")
    if not lo <= v <= hi:
        raise ValueError(f"The {name} must be between {lo:g} and {hi:g}; {v:g} is outside.")
    if integer:
        if v != round(v):
            raise ValueError(f"The {name} must be a whole number, not {v:g}.")
        return int(round(v))
    return v
