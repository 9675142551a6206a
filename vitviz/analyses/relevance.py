"""Class-specific relevance: attention weighted by its gradient for one class, rolled through the layers.

Plain attention rollout is the same whatever class you ask about. Chefer, Gur and
Wolf (2021, "Generic attention-model explainability") weight each layer's
attention A (H, T, T) by the gradient of the chosen class's logit with respect to
it, keep the positive part, average the heads, and accumulate through the layers:

    Ā_l = mean_h (∇A_l ⊙ A_l)⁺,   R ← R + Ā_l · R   (R starts as the identity, first layer first)

The class token's row of R, over the patches, is the relevance map. Neither map
proves what the model used: they are summaries of one forward and one backward
pass, and the tests show where they are right by construction, not in general.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core import attention
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.specs.registry import ModelSpec


@dataclass
class Relevance:
    """Relevance and plain rollout for one class.

    Attributes:
        target: class index.
        relevance: (T,) class token's row of R (all tokens, prefix first).
        rollout: (T,) class token's row of plain head-mean attention rollout (the same forward).
        logits: (classes,) the model's output.
    """

    target: int
    relevance: np.ndarray
    rollout: np.ndarray
    logits: np.ndarray


@dataclass(frozen=True)
class RelevanceProbe:
    """One forward and one backward pass for class ``target`` (or, when None, the class ranked ``rank``-th by the
    same forward), with every layer's attention recorded; autograd is asked for the gradients of the recorded
    attention only, so no parameter's ``.grad`` is touched."""

    target: int | None = None
    rank: int = 1
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("relevance", self.target, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        """Every layer's attention and its gradient, on top of the forward."""
        return budget.eager_bytes(spec, tokens) + 2 * spec.depth * spec.heads * tokens * tokens * 4

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> Relevance:
        attns: list[torch.Tensor] = []
        with hooks.record_attention(model, lambda _layer, a: attns.append(a)):
            logits, _ = forward(x)
        if logits is None:
            raise ValueError("This model has no classifier head: choose a classification model.")
        classes = logits.shape[-1]
        target = self.target
        if target is None:
            order = torch.argsort(logits[0].detach(), descending=True, stable=True)
            target = int(order[min(max(int(self.rank), 1), classes) - 1])
        if not 0 <= int(target) < classes:
            raise ValueError(f"This model has classes 0 to {classes - 1}; there is no class {target}.")
        grads = torch.autograd.grad(logits[0, int(target)], attns)
        with torch.no_grad():
            t = attns[0].shape[-1]
            r = torch.eye(t, dtype=torch.float64)
            for a, g in zip(attns, grads):
                cam = (g[0].double() * a[0].double()).clamp(min=0).mean(0)  # (T, T)
                r = r + cam @ r
            plain = attention.rollout_cls_mean([a[0].detach() for a in attns])
        return Relevance(int(target), r[0].numpy(), plain, logits[0].detach().numpy())

    def nbytes(self, r: Relevance) -> int:
        return r.relevance.nbytes + r.rollout.nbytes + r.logits.nbytes


def class_relevance(runner: Runner, x: torch.Tensor, target: int | None = None, rank: int = 1) -> Relevance:
    """Relevance for class ``target`` (or the class ranked ``rank``-th on this input) from one forward and one
    backward of the prepared input x (1, 3, H, W), through the runner (its lock; hooks gone on return)."""
    return runner.run(RelevanceProbe(target, rank), x)


# ---- every class map at once (the Classify tab's /relevance view) -------------------------------------------------

@dataclass
class ClassMaps:
    """Every map of :func:`vitviz.analyses.maps.class_maps` for one class of one picture.

    Attributes:
        target: the class explained.
        maps: name -> (N,) float64 over the patch tokens, in :data:`vitviz.analyses.maps.NAMES`' order (plain
            attention and rollout, which ignore the class, among them).
        logits: (C,) the model's output.
        left_out: name -> why, for a class map this model cannot have.
    """

    target: int
    maps: dict[str, np.ndarray]
    logits: np.ndarray
    left_out: dict[str, str]


@dataclass(frozen=True)
class ClassMapsProbe:
    """Every map for class ``target`` (or, when None, the class ranked ``rank``-th by the same forward) from one
    call of :func:`vitviz.analyses.maps.class_maps`: its eager forward with every layer's attention recorded, the
    backwards relevance and LeGrad need, AttnLRP's forward and backward. It switches the attention path and hooks
    AttnLRP's rules on, so it runs with the model alone (no ``shares``); autograd is asked for recorded tensors
    only, so no parameter's ``.grad`` is touched."""

    prefix: int
    target: int | None = None
    rank: int = 1
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("class maps", self.prefix, self.target, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        """:func:`vitviz.analyses.maps.maps_bytes`: the larger of the eager pass with its backwards and AttnLRP's
        forward and backward, which runs after the eager graph is let go (measured, not the bound
        :class:`RelevanceProbe` keeps for its one backward)."""
        from vitviz.analyses.maps import maps_bytes

        return maps_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> ClassMaps:
        from vitviz.analyses import maps

        m = maps.class_maps(model, x, forward, self.prefix, target=self.target, rank=self.rank)
        if m.logits is None:
            raise ValueError("This model has no classifier head: choose a classification model.")
        classes = m.logits.shape[-1]
        return ClassMaps(int(m.target), m.maps, m.logits.reshape(-1, classes)[0].numpy(), dict(m.left_out))

    def nbytes(self, c: ClassMaps) -> int:
        return sum(v.nbytes for v in c.maps.values()) + c.logits.nbytes


def top_patch(values: np.ndarray, grid: tuple[int, int]) -> tuple[int, int, float]:
    """(row, column, share) of a map's top patch on a (gh, gw) grid: the largest of ``values`` (N,) (the first of
    equal ones) and its share of the map's positive total, sum of max(v, 0) (0 when nothing is positive). For a
    map that is never negative (relevance, rollout, LeGrad) that is its share of the whole map; AttnLRP's negative
    patches (evidence against the class) do not count against it."""
    v = np.asarray(values, np.float64).reshape(-1)
    i = int(np.argmax(v))
    positive = float(np.clip(v, 0, None).sum())
    return i // grid[1], i % grid[1], (float(v[i]) / positive if positive > 0 and v[i] > 0 else 0.0)
