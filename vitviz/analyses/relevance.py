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
