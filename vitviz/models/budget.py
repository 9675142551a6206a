"""What one request may cost, checked before the work, with a message that says what to change.

- **intake**: uploads over ``images.MAX_PIXELS`` are refused from their header, and the rest are shrunk while
  decoding to what the largest view can use (``images.INTAKE_SHORT_SIDE``);
- **forwards**: the estimated peak memory of one forward with its probe's recording must fit in
  ``REQUEST_BYTES``; that gives each model and probe its own token limit (:func:`max_tokens`). Each probe
  states what it keeps (:meth:`vitviz.models.runner.Probe.estimate`); the part every recorded forward shares
  is :func:`forward_bytes`;
- **patch grids**: the Patches tab draws at most ``MAX_GRID_PATCHES`` patches.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import lru_cache

from vitviz.specs.registry import ModelSpec

REQUEST_BYTES = 2 * 2**30
"""Peak memory one forward may take (estimate, checked before the forward)."""
ATTENTION_COPIES = 2
"""(H, T, T) float32 matrices alive at once inside one eager attention layer (scores and softmax). With it the
estimate is 1.41 GB for DINO ViT-S/8 at 3,601 tokens, where ``benchmarks/bench.py`` measured 1.00 GB."""
MAX_GRID_PATCHES = 25_600
"""The Patches tab's largest grid: 160×160 (4-pixel patches on a 640-pixel square)."""
log = logging.getLogger("vitviz")

Estimate = Callable[[ModelSpec, int], int]
"""(model, tokens) -> estimated peak bytes of one forward with a probe's recording."""


def forward_bytes(spec: ModelSpec, tokens: int) -> int:
    """Peak bytes every recorded forward of ``spec`` over ``tokens`` tokens needs, whatever it keeps.

    ``ATTENTION_COPIES`` (H, T, T) float32 matrices in the layer being computed, and the token activations
    (12 float32 (T, D) tensors is generous for a block with a 4·D MLP).
    """
    return ATTENTION_COPIES * spec.heads * tokens * tokens * 4 + 12 * tokens * spec.dim * 4


def mib(n: float) -> str:
    """A byte count in binary units as people read them: '840 MiB', '1.9 GiB'."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


@lru_cache(maxsize=256)
def max_tokens(spec: ModelSpec, estimate: Estimate = forward_bytes, limit: int = REQUEST_BYTES) -> int:
    """The largest token count whose ``estimate`` fits in ``limit``."""
    lo, hi = 1, 1 << 20
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate(spec, mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_tokens(spec: ModelSpec, grid: tuple[int, int], side: int | None = None,
                 estimate: Estimate | None = None) -> None:
    """Raise ``ValueError`` if a (gh, gw) patch grid is over ``spec``'s token limit; the message says what to change."""
    estimate = estimate or forward_bytes
    gh, gw = grid
    tokens = gh * gw + spec.prefix
    limit = max_tokens(spec, estimate)
    if tokens > limit:
        at = f" at a short side of {side} pixels" if side else ""
        log.info("refused %s: %d×%d patches (%d tokens, limit %d)", spec.key, gh, gw, tokens, limit)
        raise ValueError(
            f"This picture{at} becomes {gh}×{gw} = {gh * gw:,} patches for {spec.key}: {tokens:,} tokens, which "
            f"would need about {mib(estimate(spec, tokens))}. The limit for this model is {limit:,} tokens. Choose a "
            "smaller short side, or crop the picture to a squarer shape (very long pictures make many patches).")


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
