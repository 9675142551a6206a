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
from vitviz.models.runner import LoadedModel


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


def class_relevance(loaded: LoadedModel, x: torch.Tensor, target: int | None = None, rank: int = 1) -> Relevance:
    """One forward and one backward pass of x (1, 3, H, W) for class ``target``, or, when ``target`` is None,
    for the class the model ranks ``rank``-th on this picture (1 = its top class; from the same forward).

    Runs under the model's lock with gradients on, but asks autograd for the gradients of the
    recorded attention only: no parameter's ``.grad`` is touched, and the attention hooks are
    gone when this returns (also on error).
    """
    attns: list[torch.Tensor] = []
    with loaded.lock, torch.inference_mode(False), torch.enable_grad():
        model = loaded.model
        model.eval()
        with attention.record_attention(model, lambda _layer, a: attns.append(a)):
            logits, _ = loaded.forward(x)
        if logits is None:
            raise ValueError(f"{loaded.spec.key} has no classifier head: choose a classification model.")
        classes = logits.shape[-1]
        if target is None:
            order = torch.argsort(logits[0].detach(), descending=True, stable=True)
            target = int(order[min(max(int(rank), 1), classes) - 1])
        target = int(target)
        if not 0 <= target < classes:
            raise ValueError(f"This model has classes 0 to {classes - 1}; there is no class {target}.")
        grads = torch.autograd.grad(logits[0, target], attns)
    with torch.no_grad():
        t = attns[0].shape[-1]
        r = torch.eye(t, dtype=torch.float64)
        for a, g in zip(attns, grads):
            cam = (g[0].double() * a[0].double()).clamp(min=0).mean(0)  # (T, T)
            r = r + cam @ r
        plain = attention.rollout_cls_mean([a[0].detach() for a in attns])
    return Relevance(target, r[0].numpy(), plain, logits[0].detach().numpy())
