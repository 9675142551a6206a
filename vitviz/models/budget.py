"""What one request may cost, checked before the work, with a message that says what to change.

- **intake**: uploads over ``images.MAX_PIXELS`` are refused from their header, and the rest are shrunk while
  decoding to what the largest view can use (``images.INTAKE_SHORT_SIDE``);
- **forwards**: the estimated peak memory of one forward with its probe's recording must fit in
  ``REQUEST_BYTES``; that gives each model and probe its own token limit (:func:`max_tokens`). Each probe
  states what it keeps (:meth:`vitviz.models.runner.Probe.estimate`); the part every recorded forward shares
  is :func:`forward_bytes`;
- **patch grids**: the Patches tab draws at most ``MAX_GRID_PATCHES`` patches;
- **the server as a whole**: everything that takes much memory while it runs (decoding a picture, a forward,
  packing the explorer's data, a layer's rows) first reserves its estimate from one server-wide budget
  (:data:`SERVER`, ``VITVIZ_MEMORY_BUDGET`` bytes, 2 GiB unless set). Work that would pass it waits until others
  finish, and is refused with a message after ``VITVIZ_MEMORY_WAIT`` seconds, so a class doing the same thing at the
  same moment queues instead of taking the server's memory.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

from vitviz.core import owned
from vitviz.specs.registry import ModelSpec

SERVER_BYTES = int(float(os.environ.get("VITVIZ_MEMORY_BUDGET", str(2 * 2**30))))
"""What all running work together may reserve (estimates), on top of the loaded models and the bounded caches."""
WAIT_SECONDS = float(os.environ.get("VITVIZ_MEMORY_WAIT", "120"))
"""How long work waits for others to free the server's budget before it is refused."""
REQUEST_BYTES = min(2 * 2**30, SERVER_BYTES)
"""Peak memory one forward may take (estimate, checked before the forward); never more than the server's budget."""
ATTENTION_COPIES = 2
"""(H, T, T) float32 matrices alive at once inside one eager attention layer (scores and softmax)."""
FUSED_ACTIVATIONS = 24
"""(T, D) float32 tensors a fused forward holds at its peak: 111 MiB measured for DINO ViT-S/8 at 3,601 tokens
(resource.getrusage, the forward alone), where 24 such tensors are 127 MiB; no (H, T, T) matrix is ever built."""
MAX_GRID_PATCHES = 25_600
"""The Patches tab's largest grid: 160×160 (4-pixel patches on a 640-pixel square)."""
log = logging.getLogger("vitviz")

Estimate = Callable[[ModelSpec, int], int]
"""(model, tokens) -> estimated peak bytes of one forward with a probe's recording."""


def forward_bytes(spec: ModelSpec, tokens: int) -> int:
    """Peak bytes of one forward of ``spec`` over ``tokens`` tokens on its fused attention path, whatever a probe
    keeps: :data:`FUSED_ACTIVATIONS` float32 (T, D) token tensors (linear in the tokens)."""
    return FUSED_ACTIVATIONS * tokens * spec.dim * 4


def eager_bytes(spec: ModelSpec, tokens: int) -> int:
    """Peak bytes of one forward on the eager attention path (a probe that needs the (H, T, T) matrices, e.g. a
    backward through them): :func:`forward_bytes` plus :data:`ATTENTION_COPIES` (H, T, T) float32 matrices in the
    layer being computed."""
    return forward_bytes(spec, tokens) + ATTENTION_COPIES * spec.heads * tokens * tokens * 4


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
            f"That makes {gh}×{gw} = {gh * gw:,} patches; vitviz draws a patch grid of at most {MAX_GRID_PATCHES:,}. "
            "Choose a larger patch size, a smaller resolution, or the crop policy.")


class Gate:
    """A server-wide memory budget: the estimates of the work running now add up to at most ``total`` bytes.

    :meth:`reserve` holds an estimate for the length of a ``with`` block; work that would pass the total waits for
    others to finish (first come, first served as the condition wakes them) and is refused with a message after
    ``wait`` seconds. One thread's reservations inside its own (a decode inside a bundle, say) never wait: a thread
    never waits for memory it holds itself. They count on top of it, unless the outer one ``covers`` them: a
    reservation made with ``covers=True`` (a probe in stages: its estimate is the largest of its stages') already
    holds what the work inside it reserves, so a reservation nested in it counts only what it asks beyond what is
    left of the cover (the cover's part it takes is not left for a reservation nested in it in turn).
    """

    def __init__(self, total: int, wait: float = WAIT_SECONDS) -> None:
        self.total, self.wait = int(total), float(wait)
        self.used = 0
        """Bytes reserved now."""
        self.peak = 0
        """The most ever reserved at once."""
        self.waited = 0
        """Reservations that had to wait."""
        self.refused = 0
        self.released: Callable[[int], None] | None = None
        """Called with the bytes of each outermost reservation as it ends (a server gives freed memory back to the
        system there: :func:`vitviz.app.serving.return_freed_memory`); None: nothing."""
        self._cond = threading.Condition()
        self._held = threading.local()

    @contextmanager
    def reserve(self, nbytes: int, what: str, covers: bool = False) -> Iterator[None]:
        """Hold ``nbytes`` (an estimate) of the budget while the block runs; ``what`` names the work for messages;
        ``covers``: the reservations this thread makes inside the block are part of it (see the class)."""
        n = max(0, int(nbytes))
        if n > self.total:
            self.refused += 1
            log.info("refused %s: %s over the server's %s", what, mib(n), mib(self.total))
            raise ValueError(f"{what.capitalize()} would need about {mib(n)}, more than this server allows for all "
                             f"work at once ({mib(self.total)}). Choose a smaller short side or a smaller picture.")
        nested = getattr(self._held, "depth", 0) > 0
        cover = getattr(self._held, "cover", 0) if nested else 0
        covered = min(n, cover)
        n -= covered  # what this reservation adds to the total
        with self._cond:
            if not nested and self.used + n > self.total:
                self.waited += 1
                deadline = time.monotonic() + self.wait
                while self.used + n > self.total:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self.refused += 1
                        log.info("refused %s: %s waited %.0f s for the server's memory", what, mib(n), self.wait)
                        raise ValueError(f"The server is busy: {what} needs about {mib(n)} of its memory and other "
                                         "work running now is using it. Please try again in a minute.")
                    self._cond.wait(left)
            self.used += n
            self.peak = max(self.peak, self.used)
        self._held.depth = getattr(self._held, "depth", 0) + 1
        self._held.cover = n + covered if covers else cover - covered
        try:
            yield
        finally:
            self._held.cover = cover
            self._held.depth -= 1
            with self._cond:
                self.used -= n
                self._cond.notify_all()
            if not nested and self.released is not None:
                self.released(n)


SERVER = owned.keep("budget.server", "gates", Gate(SERVER_BYTES), "the server-wide memory budget")
"""The one server-wide budget (the app, the command line and the library all reserve from it)."""


def reserve(nbytes: int, what: str, covers: bool = False):
    """Reserve ``nbytes`` of the server-wide budget :data:`SERVER` for a ``with`` block (see :class:`Gate`)."""
    return SERVER.reserve(nbytes, what, covers)
