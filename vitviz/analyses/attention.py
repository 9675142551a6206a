"""Attention over every layer of one forward: what the Attention tab, the command line and the bundles draw from.

:class:`AttentionProbe` is what the forward is asked to record (through :meth:`vitviz.models.runner.Runner.analyse`:
fitted, budget-checked, under the model's lock, kept in the one cache of results), and :func:`analyse` the call
everything else makes: moving a slider redraws from the kept result without a forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core.attention import FUSIONS, AttentionMaps, LayerKeys, fuse_heads, patch_distances
from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.models.runner import find as find_run
from vitviz.specs.registry import ModelSpec

FULL_BUDGET_BYTES = 192 * 2**20
"""Keep every layer's full per-head float32 matrices only while they fit in this (DINO ViT-S/8 at 224 px does)."""
FUSED_BUDGET_BYTES = 256 * 2**20
"""Otherwise keep head-fused float16 matrices for rollout: mean, max and min while they fit, else mean only."""
KEYS_EXACT_BYTES = 512 * 2**10
"""A layer's queries and keys under this many float32 bytes are kept (and travel) as float32; above, float16."""


def keys_bytes(spec: ModelSpec, tokens: int) -> int:
    """Bytes of every layer's queries and keys as :func:`collect` keeps them (float32 while small, else float16)."""
    layer = 2 * tokens * spec.dim * 4
    return spec.depth * (layer if layer <= KEYS_EXACT_BYTES else layer // 2)


def kept_bytes(spec: ModelSpec, tokens: int) -> int:
    """Bytes :func:`collect` keeps for ``tokens`` tokens of ``spec`` (every layer while they fit, else the last
    layer plus head-fused float16 matrices), plus the (N, N) patch-distance matrix and one head's product with it."""
    t, n = tokens, tokens - spec.prefix
    layer = spec.heads * t * t * 4
    full = spec.depth * layer
    fused = 3 * spec.depth * t * t * 2
    fused = fused if fused <= FUSED_BUDGET_BYTES else fused // 3
    kept = full if full <= FULL_BUDGET_BYTES else layer + fused
    return kept + 2 * n * n * 4 + keys_bytes(spec, tokens)


def attention_bytes(spec: ModelSpec, tokens: int) -> int:
    """Estimated peak bytes of one forward of ``spec`` over ``tokens`` tokens with every layer's attention recorded."""
    return budget.forward_bytes(spec, tokens) + kept_bytes(spec, tokens)


def collect(model: torch.nn.Module, x: torch.Tensor, forward: Forward, patch: int, prefix: int,
            full_budget: int = FULL_BUDGET_BYTES, fused_budget: int = FUSED_BUDGET_BYTES) -> AttentionMaps:
    """Run ``forward(x)`` once (x: (1, 3, H, W)) and keep what the views need.

    ``forward`` returns (logits or None, last-layer tokens (T, D)). Every layer's queries and keys are kept as
    :class:`~vitviz.core.attention.LayerKeys` (what the explorer computes any row from). Full (H, T, T) matrices of
    every layer are
    kept (the model's own float32 tensors, by reference) when they fit in ``full_budget`` bytes; otherwise only
    the last layer's, plus head-fused float16 matrices for rollout (mean, max and min while they fit in
    ``fused_budget``, else the mean only). Nothing of size L·H·T² is held in that case.
    """
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    n = gh * gw
    t = n + prefix
    layers = len(hooks.attention_modules(model))
    dist = patch_distances(gh, gw, patch)  # (N, N) pixels; exact mean distance needs every query
    cls_rows: dict[int, torch.Tensor] = {}
    distance: dict[int, torch.Tensor] = {}
    full: dict[int, torch.Tensor] = {}
    fused: dict[str, torch.Tensor] = {}
    plan: dict[str, bool] = {}
    keys: dict[int, LayerKeys] = {}

    def on_qk(layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:
        keys[layer] = LayerKeys.pack(q.detach(), k.detach(), scale, KEYS_EXACT_BYTES)

    def on_attention(layer: int, attn: torch.Tensor) -> None:
        a = attn[0].detach()  # (H, T, T), float32
        if a.shape[-1] != t:
            raise RuntimeError(f"expected {t} tokens, the model used {a.shape[-1]}")
        if not plan:  # the first layer shows the real head count: choose what to keep
            plan["all"] = layers * a.shape[0] * t * t * 4 <= full_budget
            if not plan["all"]:
                kept = FUSIONS if 3 * layers * t * t * 2 <= fused_budget else ("mean",)
                fused.update({f: torch.empty(layers, t, t, dtype=torch.float16) for f in kept})
        cls_rows[layer] = a[:, 0, prefix:].clone()
        pp = a[:, prefix:, prefix:]  # (H, N, N) patch queries to patch keys, a view
        per_query = torch.einsum("hqk,qk->hq", pp, dist) / pp.sum(-1).clamp_min(1e-12)  # no (H, N, N) temporary
        distance[layer] = per_query.mean(-1)
        if plan["all"] or layer == layers - 1:
            full[layer] = a  # the model never writes to it again: a reference, not a copy
        for f, buf in fused.items():
            buf[layer] = fuse_heads(a, f)

    with hooks.record_attention(model, on_attention), hooks.record_keys(model, on_qk):
        logits, tokens = forward(x)
    if len(cls_rows) != layers:
        raise RuntimeError(f"recorded {len(cls_rows)} of {layers} attention layers")
    return AttentionMaps(
        grid=(gh, gw), patch=patch, prefix=prefix,
        cls=torch.stack([cls_rows[i] for i in range(layers)]).numpy(),
        distance=torch.stack([distance[i] for i in range(layers)]).numpy(),
        full=full,
        fused=fused,
        keys=[keys[i] for i in range(layers)] if len(keys) == layers else [],
        norms=None if tokens is None else tokens.float().norm(dim=-1).numpy(),
        logits=None if logits is None else logits.float().numpy(),
    )


@dataclass(frozen=True)
class AttentionProbe:
    """Every layer's attention of one forward (:func:`collect`), for :meth:`Runner.analyse`.

    ``checkpoint_input`` fits the picture with the checkpoint's own preprocessing (the classifier's resize and
    crop) instead of the Attention tab's aspect-keeping fit.
    """

    patch: int
    prefix: int
    checkpoint_input: bool = False
    full_budget: int = FULL_BUDGET_BYTES
    fused_budget: int = FUSED_BUDGET_BYTES
    grad: bool = False

    @property
    def key(self) -> tuple:
        return ("attention", self.checkpoint_input, self.full_budget, self.fused_budget)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return attention_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> AttentionMaps:
        return collect(model, x, forward, self.patch, self.prefix, self.full_budget, self.fused_budget)

    def nbytes(self, maps: AttentionMaps) -> int:
        return maps.nbytes


def probe_for(runner: Runner, checkpoint_input: bool = False, **budgets: int) -> AttentionProbe:
    return AttentionProbe(runner.spec.patch, runner.spec.prefix, checkpoint_input, **budgets)


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


def analyse(runner: Runner, rgb: np.ndarray, resolution: int | None = None, checkpoint_input: bool = False,
            **budgets: int) -> Analysis:
    """Every layer's attention of one forward of ``rgb`` (short side ``resolution``, aspect kept), kept.

    The embedded model always runs at its own 64 px: it was trained at that size only. With
    ``checkpoint_input`` the picture is preprocessed as the checkpoint expects (the Classify tab).

    Raises:
        ValueError: when the fitted picture would be over the model's token budget (checked from the shapes
            alone, before resizing or any forward).
    """
    run = runner.analyse(probe_for(runner, checkpoint_input, **budgets), rgb, resolution)
    return Analysis(run.runner, run.fitted, run.value, run.resolution, run.token, run.seconds)


def find(token: str) -> Analysis | None:
    """The kept analysis named ``token``, or None when it has left the cache."""
    run = find_run(token)
    if run is None or not isinstance(run.value, AttentionMaps):
        return None
    return Analysis(run.runner, run.fitted, run.value, run.resolution, run.token, run.seconds)

