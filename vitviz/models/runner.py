"""A loaded model and the one door to it: every forward runs here, under the model's lock.

Gradio runs callbacks in threads, so two requests can reach the same model at
once. Recording attention puts hooks on the model and switches timm's fused
attention off for the duration; a plain forward from another request during
that time would feed its attention into the first request's hooks. So nothing
runs a model except through :meth:`LoadedModel.exclusive` (or :meth:`capture`,
built on it), which holds a lock that belongs to that model and is shared by every
``LoadedModel`` that wraps it (a fallback copy carries the same lock).

Why a lock rather than lock-free capture: on two cores one forward already
keeps both busy (torch's intra-op threads), so two forwards side by side are no
faster than one after the other; ``benchmarks/load.py --forwards`` measures it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from vitviz.core import attention as att
from vitviz.specs.registry import ModelSpec


@dataclass
class LoadedModel:
    """A model ready to run.

    ``forward(x)`` takes (1, 3, H, W) normalised pixels and returns (logits (1, K)
    or None, last-layer tokens (T, D)); call it only inside :meth:`exclusive`.
    ``notice`` is non-empty when this is a stand-in for the model that was asked for.
    """

    spec: ModelSpec
    model: torch.nn.Module
    mean: tuple[float, ...]
    std: tuple[float, ...]
    resolution: int
    origin: str
    forward: Callable[[torch.Tensor], tuple[torch.Tensor | None, torch.Tensor]]
    labels: list[str] | None = None
    data_config: dict = field(default_factory=dict)
    notice: str = ""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def depth(self) -> int:
        """Number of attention layers."""
        return len(att.attention_modules(self.model))

    def normalise(self, rgb: np.ndarray) -> torch.Tensor:
        """(H, W, 3) uint8 -> (1, 3, H, W) float normalised with the checkpoint's mean / std."""
        x = torch.tensor(rgb, dtype=torch.uint8).permute(2, 0, 1)[None].float() / 255.0
        mean = torch.tensor(self.mean).view(1, 3, 1, 1)
        std = torch.tensor(self.std).view(1, 3, 1, 1)
        return (x - mean) / std

    @contextmanager
    def exclusive(self) -> Iterator[torch.nn.Module]:
        """The model, in eval mode under ``torch.inference_mode``, for this thread alone until exit."""
        with self.lock, torch.inference_mode():
            self.model.eval()
            yield self.model

    def capture(self, x: torch.Tensor, grid: tuple[int, int], **budgets) -> att.AttentionMaps:
        """One forward of x (1, 3, H, W) with every layer's attention recorded, for this request only.

        ``grid`` is the (gh, gw) patch grid of x; ``budgets`` go to :func:`vitviz.core.attention.collect`.
        """
        with self.exclusive() as model:
            return att.collect(model, x, grid, self.spec.patch, self.spec.prefix,
                               lambda _m, inp: self.forward(inp), **budgets)
