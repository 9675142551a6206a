"""Inside one attention head: the real q, k, v of an image, the scores, the softmax and the weighted sum.

For one layer we record what the model computes (its projected queries, keys and
values, its own attention matrix, and every head's output before the output
projection) in one forward, then redo the head's arithmetic step by step:

    scores_j = q · k_j / √d,   a = softmax(scores),   out = Σ_j a_j v_j

and put it next to what the model produced. Shapes: H heads, T tokens (prefix +
N patches), d = D / H per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.specs.registry import ModelSpec


@dataclass
class LayerRecord:
    """One layer of one forward: (H, T, d) q, k, v; (H, T, T) the model's attention; (H, T, d) each head's output.

    ``grid`` is the (gh, gw) patch grid; T = prefix + gh·gw.
    """

    grid: tuple[int, int]
    prefix: int
    layer: int
    scale: float
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attn: torch.Tensor
    heads_out: torch.Tensor

    @property
    def heads(self) -> int:
        return self.q.shape[0]


@dataclass
class HeadTrace:
    """One query through one head, as numpy arrays (T keys, d per head).

    Attributes:
        query: token index of the query (0 = [CLS]; patches start at ``prefix``).
        q: (d,) the query vector.
        scores: (T,) q·k_j·scale before the softmax.
        weights: (T,) our softmax of ``scores``.
        captured: (T,) the attention row the model computed itself.
        mixed: (d,) our Σ_j weights_j v_j.
        model_out: (d,) the head's output in the model, before the output projection.
    """

    layer: int
    head: int
    query: int
    prefix: int
    grid: tuple[int, int]
    q: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    captured: np.ndarray
    mixed: np.ndarray
    model_out: np.ndarray

    @property
    def softmax_error(self) -> float:
        return float(np.abs(self.weights - self.captured).max())

    @property
    def output_error(self) -> float:
        return float(np.abs(self.mixed - self.model_out).max())


@dataclass(frozen=True)
class LayerProbe:
    """One layer taken apart in one forward: its projected q, k, v, its attention and every head's output."""

    layer: int
    prefix: int
    patch: int
    grad: bool = False
    own_size: bool = False

    @property
    def key(self) -> tuple:
        return ("layer", self.layer)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        """The forward, the layer's (H, T, T) attention kept, and q, k, v and the heads' output (4 × (T, D))."""
        return budget.eager_bytes(spec, tokens) + spec.heads * tokens * tokens * 4 + 4 * tokens * spec.dim * 4

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> LayerRecord:
        parts = hooks.attention_parts(model, self.layer)
        kept: dict[str, torch.Tensor] = {}

        def on_attention(i: int, attn: torch.Tensor) -> None:
            if i == self.layer:
                kept["attn"] = attn[0].detach().clone()

        with hooks.capture(parts.targets) as seen, hooks.record_attention(model, on_attention):
            forward(x)
        q, k, v = (t.detach().clone() for t in parts.split(seen))
        out = seen["heads_out"][0].detach()
        t = out.shape[0]
        heads_out = out.reshape(t, parts.heads, parts.head_dim).transpose(0, 1).clone()
        grid = (x.shape[-2] // self.patch, x.shape[-1] // self.patch)
        return LayerRecord(grid, self.prefix, self.layer, parts.scale, q, k, v, kept["attn"], heads_out)

    def nbytes(self, r: LayerRecord) -> int:
        return sum(t.numel() * t.element_size() for t in (r.q, r.k, r.v, r.attn, r.heads_out))


def layer_record(runner: Runner, rgb: np.ndarray, resolution: int, layer: int) -> tuple[Fitted, LayerRecord]:
    """The picture fitted as the Attention tab fits it and layer number ``layer`` (1 = first; clamped to the
    model's depth) of its forward taken apart; kept, so another head or query of the layer runs no forward."""
    layer = int(np.clip(int(layer), 1, runner.depth)) - 1
    run = runner.analyse(LayerProbe(layer, runner.spec.prefix, runner.spec.patch), rgb, resolution)
    return run.fitted, run.value


def trace(record: LayerRecord, head: int, query: int) -> HeadTrace:
    """Redo head ``head``'s arithmetic for token ``query`` (both clamped to what exists)."""
    head = int(np.clip(head, 0, record.heads - 1))
    query = int(np.clip(query, 0, record.q.shape[1] - 1))
    q = record.q[head, query].double()
    k, v = record.k[head].double(), record.v[head].double()
    scores = (k @ q) * record.scale  # (T,)
    weights = torch.softmax(scores, 0)
    mixed = weights @ v  # (d,)
    return HeadTrace(record.layer, head, query, record.prefix, record.grid, q.numpy(),
                     scores.numpy(), weights.numpy(), record.attn[head, query].double().numpy(), mixed.numpy(),
                     record.heads_out[head, query].double().numpy())
