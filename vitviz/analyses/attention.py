"""Attention over every layer of one forward: what the Attention tab, the command line and the bundles draw from.

:class:`AttentionProbe` is what the forward is asked to record (through :meth:`vitviz.models.runner.Runner.analyse`:
fitted, budget-checked, under the model's lock, kept in the one cache of results), and :func:`analyse` the call
everything else makes: moving a slider redraws from the kept result without a forward.

The forward runs on the model's fused attention path (it never builds an (H, T, T) matrix). Hooks on the query and
key projections record each layer's q and k; the class token's rows (one per head) are computed from them at once.
Everything that needs every row (rollout, the mean attention distance) is computed from the kept q and k when a
view asks for it (:func:`rollout`, :func:`distance`), a chunk of rows at a time, within the server's budget, and
kept with the analysis: a panel opened later runs no second forward.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core import owned
from vitviz.core.attention import EXACT_BYTES, F16_TOLERANCE, AttentionMaps, LayerKeys, class_rows
from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.models.runner import find as find_run
from vitviz.specs.registry import ModelSpec


def keys_bytes(spec: ModelSpec, tokens: int) -> int:
    """Bytes of every layer's queries and keys as :func:`collect` may keep them (float32: the most)."""
    return spec.depth * 2 * tokens * spec.dim * 4


def attention_bytes(spec: ModelSpec, tokens: int) -> int:
    """Estimated peak bytes of one recorded forward of ``spec`` over ``tokens`` tokens: the fused forward, every
    layer's float32 queries and keys while they are packed, and what is kept."""
    n = tokens - spec.prefix
    return budget.forward_bytes(spec, tokens) + 2 * keys_bytes(spec, tokens) + spec.depth * spec.heads * n * 4


_PRECISION: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = owned.keep(
    "attention.precision", "results", weakref.WeakKeyDictionary(), "each model's keys precision per layer")
"""Per model (while it lives) and layer: the float16 error of its keys measured on its first picture, or infinity
for float32 (decided once: :meth:`LayerKeys.pack` then skips its trial softmax)."""


def collect(model: torch.nn.Module, x: torch.Tensor, forward: Forward, patch: int, prefix: int) -> AttentionMaps:
    """Run ``forward(x)`` once (x: (1, 3, H, W)) on the fused path and keep what the views need: every layer's
    queries and keys (:class:`~vitviz.core.attention.LayerKeys`) and the class token's rows computed from them.

    ``forward`` returns (logits or None, last-layer tokens (T, D)).
    """
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    t = gh * gw + prefix
    cls_rows: dict[int, torch.Tensor] = {}
    keys: dict[int, LayerKeys] = {}
    precision = _PRECISION.setdefault(model, {})

    aside = getattr(forward, "aside", None)  # a timed forward (Runner.run): the ms spent here are not the model's

    def on_qk(layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:
        t0 = time.perf_counter()
        try:
            keep(layer, q, k, scale)
        finally:
            if aside is not None:
                aside.append((time.perf_counter() - t0) * 1000)

    def keep(layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:
        q, k = q[0].detach(), k[0].detach()  # (H, T, d), the first image
        if q.shape[1] != t:
            raise RuntimeError(f"expected {t} tokens, the model used {q.shape[1]}")
        cls_rows[layer] = class_rows(q, k, scale, prefix)
        known = precision.get(layer)
        packed = keys[layer] = LayerKeys.pack(q, k, scale, decided=known)
        if known is None and 2 * q.numel() * 4 > EXACT_BYTES:  # measured once per model and layer: float16
            # stays only with a margin of 4 (another picture may be a little sharper), else float32 from now on
            err = packed.error if packed.q.dtype == np.float16 else math.inf
            precision[layer] = err if err <= F16_TOLERANCE / 4 else math.inf

    with hooks.record_keys(model, on_qk) as layers:
        logits, tokens = forward(x)
    if len(keys) != layers:
        raise RuntimeError(f"recorded {len(keys)} of {layers} attention layers")
    return AttentionMaps(
        grid=(gh, gw), patch=patch, prefix=prefix,
        cls=torch.stack([cls_rows[i] for i in range(layers)]).numpy(),
        keys=[keys[i] for i in range(layers)],
        norms=None if tokens is None else tokens.float().norm(dim=-1).numpy(),
        logits=None if logits is None else logits.float().numpy(),
    )


@dataclass(frozen=True)
class AttentionProbe:
    """Every layer's queries and keys of one fused forward (:func:`collect`), for :meth:`Runner.analyse`.

    ``own_size`` runs it at the checkpoint's own size whatever side was asked (the Classify tab); the picture is
    fitted by the model's one input policy either way (:attr:`vitviz.models.runner.Runner.input_policy`).
    """

    patch: int
    prefix: int
    own_size: bool = False
    grad: bool = False
    shares: bool = True  # its hooks see its own thread only and it changes nothing on the module
    timed: bool = True  # one forward and its records: its time is the server's forward time (runner.note_forward)

    @property
    def key(self) -> tuple:
        return ("attention",)  # the same input at the same side is the same analysis, whichever tab asked

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return attention_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> AttentionMaps:
        return collect(model, x, forward, self.patch, self.prefix)

    def nbytes(self, maps: AttentionMaps) -> int:
        return maps.nbytes


def probe_for(runner: Runner, own_size: bool = False) -> AttentionProbe:
    return AttentionProbe(runner.spec.patch, runner.spec.prefix, own_size)


@dataclass
class Analysis:
    """One forward pass and everything needed to redraw it: the model, the fitted picture, the maps.

    Attributes:
        runner: the model that ran (its ``notice`` says when it stands in for the one asked for).
        fitted: the picture as the model saw it.
        maps: what the forward left behind.
        resolution: the short side used (the embedded model's own 64 px whatever was asked).
        token: names this analysis (a digest of model, picture and resolution).
        seconds: how long the forward took.
    """

    runner: Runner
    fitted: Fitted
    maps: AttentionMaps
    resolution: int = 0
    token: str = ""
    seconds: float = 0.0


def analyse(runner: Runner, rgb: np.ndarray, resolution: int | None = None,
            own_size: bool = False) -> Analysis:
    """Every layer's attention of one forward of ``rgb`` at the short side ``resolution``, fitted by the model's
    one input policy (a classifier's own eval transform; the whole picture for a model without classes), kept.

    The embedded model always runs at its own 64 px: it was trained at that size only. With ``own_size`` at the
    checkpoint's own size whatever was asked (the Classify tab).

    Raises:
        ValueError: when the fitted picture would be over the model's token budget (checked from the shapes
            alone, before resizing or any forward).
    """
    run = runner.analyse(probe_for(runner, own_size), rgb, resolution)
    return Analysis(run.runner, run.fitted, run.value, run.resolution, run.token, run.seconds)


def find(token: str) -> Analysis | None:
    """The kept analysis named ``token``, or None when it has left the cache."""
    run = find_run(token)
    if run is None or not isinstance(run.value, AttentionMaps):
        return None
    return Analysis(run.runner, run.fitted, run.value, run.resolution, run.token, run.seconds)



def distance(a: Analysis) -> np.ndarray:
    """(L, H) mean attention distance in pixels of every head of every layer, computed from the kept queries and
    keys the first time it is asked for (within the server's budget) and kept with the analysis."""
    with budget.reserve(a.maps.every_row_bytes(), "the mean attention distance over every query"):
        return a.maps.distance()


def rollout(a: Analysis, fusion: str = "mean", discard: float = 0.0) -> np.ndarray:
    """(gh, gw) attention rollout, computed from the kept queries and keys the first time it is asked for with
    this fusion and discard ratio (within the server's budget) and kept with the analysis."""
    with budget.reserve(a.maps.every_row_bytes(), "attention rollout through every layer"):
        return a.maps.rollout(fusion, discard)
