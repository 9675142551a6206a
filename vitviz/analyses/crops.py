"""Where the class token looks, for a batch of pictures at once: what ``vitviz crop`` needs from a forward.

:class:`ClassTokenProbe` keeps only the last layer's class-token row, averaged over heads, for every picture of a
(B, 3, H, W) batch (one forward, several pictures), and :func:`box_of` turns one row into DINO's mask and its box,
exactly as the Attention view's numbers do (:func:`vitviz.views.attention.numbers`).

Shapes: B pictures, H heads, T = prefix + N tokens, N = gh·gw patches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core import attention as att
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward
from vitviz.specs.registry import ModelSpec


@dataclass(frozen=True)
class ClassTokenProbe:
    """The last layer's head-mean class-token attention over patches, (B, N) float32, for a batch: one fused
    forward, the class token's row of each picture computed from the last layer's queries and keys."""

    prefix: int
    grad: bool = False
    own_size: bool = False
    shares: bool = True  # its hooks see its own thread only and it changes nothing on the module
    key: tuple = ("class-token rows",)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return budget.forward_bytes(spec, tokens) + 2 * tokens * spec.dim * 4

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> torch.Tensor:
        rows: dict[int, torch.Tensor] = {}
        last = len(hooks.attention_modules(model)) - 1

        def keep(layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:  # q, k (B, H, T, d)
            if layer == last:
                rows[layer] = torch.stack([att.class_rows(qb, kb, scale, self.prefix).mean(0)
                                           for qb, kb in zip(q.detach(), k.detach())])

        with hooks.record_keys(model, keep):
            forward(x)
        return rows[last]

    def nbytes(self, rows: torch.Tensor) -> int:
        return rows.numel() * 4


@dataclass(frozen=True)
class Box:
    """DINO's mask of one picture's head-mean map and the box around its largest part.

    Attributes:
        box: (left, top, right, bottom) on the fitted picture, in pixels (the whole picture when the mask is empty).
        mass_kept: share of the attention inside the mask; patches_kept: share of the patches in it.
    """

    box: tuple[int, int, int, int]
    mass_kept: float
    patches_kept: float


def box_of(row: np.ndarray, grid: tuple[int, int], patch: int, keep: float) -> Box:
    """The mask keeping ``keep`` of a (N,) head-mean class-token row on a (gh, gw) grid, and its pixel box."""
    gh, gw = grid
    mean = np.asarray(row, dtype=np.float32).reshape(gh, gw)
    mask, mass, frac = att.mass_mask(mean, keep)
    box = att.bounding_box(mask, patch) or (0, 0, gw * patch, gh * patch)
    return Box(tuple(int(v) for v in box), mass, frac)
