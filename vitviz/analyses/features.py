"""Patch-feature PCA: a layer's patch tokens on their first three principal components, shown as colour.

Tokens that the model represents alike get alike colours, so parts of one object
often share a colour across the picture (the view the DINOv2 paper made
famous). The first component often separates object from background; its sign
is arbitrary, so we orient it so that the picture's border is mostly negative
and call the positive side the foreground.

Shapes: N patches of a (gh, gw) grid, D the token width, k components.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.specs.registry import ModelSpec


@dataclass(frozen=True)
class TokensProbe:
    """The token stream after every block of one forward, (L, T, D) float32 (each block's output, so the last
    one is before the model's final LayerNorm)."""

    grad: bool = False
    own_size: bool = False
    shares: bool = True  # its hooks see its own thread only and it changes nothing on the module
    key: tuple = ("tokens",)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return budget.forward_bytes(spec, tokens) + spec.depth * tokens * spec.dim * 4

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> torch.Tensor:
        blocks = hooks.blocks(model)
        with hooks.capture({str(i): (b, "output") for i, b in enumerate(blocks)}) as seen:
            forward(x)
        return torch.stack([seen[str(i)][0].detach().float() for i in range(len(blocks))])

    def nbytes(self, streams: torch.Tensor) -> int:
        return streams.numel() * streams.element_size()


def tokens_for(runner: Runner, rgb: np.ndarray, resolution: int) -> tuple[Fitted, torch.Tensor]:
    """The picture fitted as the Attention tab fits it (budget checked first) and its (L, T, D) token streams;
    kept, so moving to another layer runs no forward."""
    run = runner.analyse(TokensProbe(), rgb, resolution)
    return run.fitted, run.value


@dataclass
class FeaturePCA:
    """Principal components of N patch tokens.

    Attributes:
        components: (k, D) unit principal directions, largest variance first.
        projections: (N, k) each patch's coordinates on them (tokens centred first).
        share: (k,) fraction of the total variance each explains.
    """

    components: np.ndarray
    projections: np.ndarray
    share: np.ndarray


def pca(tokens: torch.Tensor | np.ndarray, k: int = 3) -> FeaturePCA:
    """The first ``k`` principal components of (N, D) tokens, by SVD of the centred matrix (float64)."""
    x = torch.as_tensor(np.asarray(tokens), dtype=torch.float64)
    k = min(k, *x.shape)
    centred = x - x.mean(0, keepdim=True)
    u, s, vh = torch.linalg.svd(centred, full_matrices=False)
    total = float((s ** 2).sum())
    share = (s[:k] ** 2 / total).numpy() if total > 0 else np.zeros(k)
    return FeaturePCA(vh[:k].numpy(), (u[:, :k] * s[:k]).numpy(), share)


def orient_foreground(first: np.ndarray) -> np.ndarray:
    """A (gh, gw) first-component map with its sign chosen so the border patches average below the inside ones."""
    g = np.asarray(first, dtype=np.float64)
    border = np.ones(g.shape, bool)
    if g.shape[0] > 2 and g.shape[1] > 2:
        border[1:-1, 1:-1] = False
    inside = g[~border] if (~border).any() else g
    return -g if g[border].mean() > inside.mean() else g


def oriented(r: FeaturePCA, grid: tuple[int, int]) -> FeaturePCA:
    """``r`` with PC1's sign chosen by :func:`orient_foreground` on the (gh, gw) grid, in both its direction and
    the patches' coordinates, so the colour panel and the foreground mask use the same orientation."""
    first = r.projections[:, 0].reshape(grid)
    if np.array_equal(orient_foreground(first), first):
        return r
    sign = np.ones(r.projections.shape[1])
    sign[0] = -1.0
    return FeaturePCA(r.components * sign[:, None], r.projections * sign, r.share)


def to_rgb(projections: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """(gh, gw, 3) uint8: components 1-3 as red, green and blue, each stretched to its own range (constant: black)."""
    gh, gw = grid
    chans = []
    for i in range(3):
        c = projections[:, i] if i < projections.shape[1] else np.zeros(projections.shape[0])
        lo, hi = float(c.min()), float(c.max())
        chans.append(np.zeros_like(c) if hi - lo <= 1e-12 else (c - lo) / (hi - lo))
    return (np.stack(chans, -1).reshape(gh, gw, 3) * 255).round().astype(np.uint8)
