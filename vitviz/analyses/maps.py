"""The maps Test the map tests, from one call on a model the caller holds alone.

Every test of the map (deletion and insertion, the report card, randomised weights, predict-then-test) ranks the
patches by the same maps, made here in one place:

- ``attention``: the class token's last-layer attention, mean over heads;
- ``rollout``: attention rollout through every layer (head mean, Abnar and Zuidema 2020);
- ``relevance``: attention times its gradient, positive part, head mean, rolled through the layers (Chefer, Gur and
  Wolf 2021, :mod:`vitviz.analyses.relevance`);

with classes only (each needs a class to explain). The model's attention path is switched to its eager form for the
forward (:func:`vitviz.models.hooks.record_attention`), so the caller must hold the model alone
(:meth:`vitviz.models.runner.Runner.run` with a probe that does not share) or own a copy of it.

Shapes: T = prefix + N tokens of width D; the maps are (N,) float64 over the patch tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core import attention as att
from vitviz.models import hooks
from vitviz.models.parts import parts_of
from vitviz.models.runner import Forward

NAMES = ("attention", "rollout", "relevance")
"""Every map made here, in the order the views list them; the last ones need a class."""

NEED_A_CLASS = ("relevance",)
"""The maps that explain one class: a model without classes (DINO) has none of them."""


@dataclass
class Maps:
    """The maps of one picture.

    Attributes:
        maps: name -> (N,) float64, in :data:`NAMES`'s order (those needing a class only with one).
        logits: (1, C) the model's output, detached (None for a model without classes).
        stream: (1, T, D) the stream entering block 1 (patches embedded, prefix tokens in front, positions added).
        target: the class the class maps explain (None without classes).
    """

    maps: dict[str, np.ndarray]
    logits: torch.Tensor | None
    stream: torch.Tensor
    target: int | None


def target_of(logits: torch.Tensor, rank: int) -> int:
    """The class at place ``rank`` (1 = the top; clipped to the classes there are) of logits (1, C)."""
    order = torch.argsort(logits.detach().reshape(-1, logits.shape[-1])[0], descending=True, stable=True)
    return int(order[min(max(int(rank), 1), len(order)) - 1])


def class_maps(model: torch.nn.Module, x: torch.Tensor, forward: Forward, prefix: int, target: int | None = None,
               rank: int = 1) -> Maps:
    """Every map of :data:`NAMES` for the prepared input x (1, 3, H, W): one eager forward with every layer's
    attention (B, H, T, T) recorded and, with classes, the backward each class map needs, for class ``target`` (or
    the class at place ``rank`` of this forward when None). Gradients are asked for the recorded tensors only: no
    parameter's ``.grad`` is touched. Needs grad mode for the class maps (without it they are left out)."""
    p = parts_of(model)
    attns: list[torch.Tensor] = []
    with hooks.record_attention(model, lambda _layer, a: attns.append(a)), \
            hooks.capture({"in": (p.blocks[0], "input")}) as seen:
        logits, _ = forward(x)
    z = seen["in"].detach()
    z = z.reshape(z.shape[0], -1, z.shape[-1])[:1]
    out = {"attention": attns[-1][0].detach().double().mean(0)[0, prefix:].numpy(),
           "rollout": np.asarray(att.rollout_cls_mean([a[0].detach() for a in attns]), np.float64)[prefix:]}
    if logits is None:
        return Maps(out, None, z, None)
    target = target_of(logits, rank) if target is None else int(target)
    if logits.requires_grad:
        grads = torch.autograd.grad(logits.reshape(-1, logits.shape[-1])[0, target], attns)
        with torch.no_grad():
            r = torch.eye(attns[0].shape[-1], dtype=torch.float64)
            for a, g in zip(attns, grads):
                r = r + (g[0].double() * a[0].double()).clamp(min=0).mean(0) @ r
        out["relevance"] = r[0, prefix:].numpy()
    return Maps(out, logits.detach(), z, target)
