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

from vitviz.analyses import attention as analysis
from vitviz.core import attention
from vitviz.models import hooks as probes
from vitviz.core.images import Fitted
from vitviz.models.runner import LoadedModel
from vitviz.core.lru import LRU


@dataclass
class LayerRecord:
    """One layer of one forward: (H, T, d) q, k, v; (H, T, T) the model's attention; (H, T, d) each head's output."""

    fitted: Fitted
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


def record_layer(loaded: LoadedModel, fitted: Fitted, layer: int) -> LayerRecord:
    """One forward of the fitted picture, keeping layer ``layer`` (0-based) taken apart."""
    parts = probes.attention_parts(loaded.model, layer)
    kept: dict[str, torch.Tensor] = {}

    def on_attention(i: int, attn: torch.Tensor) -> None:
        if i == layer:
            kept["attn"] = attn[0].detach().clone()

    x = loaded.normalise(fitted.image)
    with loaded.exclusive():
        with probes.capture(parts.targets) as seen, attention.record_attention(loaded.model, on_attention):
            loaded.forward(x)
        q, k, v = (t.detach().clone() for t in parts.split(seen))
        out = seen["heads_out"][0].detach()
        t = out.shape[0]
        heads_out = out.reshape(t, parts.heads, parts.head_dim).transpose(0, 1).clone()
    return LayerRecord(fitted, loaded.spec.prefix, layer, parts.scale, q, k, v, kept["attn"], heads_out)


_cache: LRU[LayerRecord] = LRU(4)
"""The last few layers taken apart: another head or query of the same layer runs no forward."""


def layer_record(loaded: LoadedModel, rgb: np.ndarray, resolution: int, layer: int) -> LayerRecord:
    """:func:`record_layer` for a picture fitted as the Attention tab fits it (budget checked first); the
    last few are cached, so choosing another head or query does not run the model again.

    ``layer`` is 1-based and clamped to the model's depth.
    """
    fitted, resolution = analysis.prepare(loaded, rgb, resolution)
    depth = loaded.depth
    layer = int(np.clip(int(layer), 1, depth)) - 1
    key = (loaded.model, analysis.image_key(rgb), resolution, layer)  # the key keeps its model alive
    return _cache.get_or_make(key, lambda: record_layer(loaded, fitted, layer))


def trace(record: LayerRecord, head: int, query: int) -> HeadTrace:
    """Redo head ``head``'s arithmetic for token ``query`` (both clamped to what exists)."""
    head = int(np.clip(head, 0, record.heads - 1))
    query = int(np.clip(query, 0, record.q.shape[1] - 1))
    q = record.q[head, query].double()
    k, v = record.k[head].double(), record.v[head].double()
    scores = (k @ q) * record.scale  # (T,)
    weights = torch.softmax(scores, 0)
    mixed = weights @ v  # (d,)
    fitted = record.fitted
    return HeadTrace(record.layer, head, query, record.prefix, fitted.grid, q.numpy(),
                     scores.numpy(), weights.numpy(), record.attn[head, query].double().numpy(), mixed.numpy(),
                     record.heads_out[head, query].double().numpy())
