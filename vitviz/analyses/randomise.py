"""Randomised weights: does a map change when the weights that made the prediction are gone?

The model parameter randomisation test (Adebayo et al. 2018): re-draw the model's weights from their initial
distribution, from the top down, one more part at each step, and compare each step's map with the trained model's.
A map that stays alike is not about what the model learned. The shared model is never changed: the test copies it
(with the model alone, briefly) and runs the copy outside the lock.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from vitviz.analyses.maps import class_maps
from vitviz.models import budget
from vitviz.models.parts import parts_of
from vitviz.models.runner import Forward
from vitviz.specs.registry import ModelSpec


# ---- randomised weights: the cascade ------------------------------------------------------------------------------------------

def reinitialise(block: torch.nn.Module, seed: int) -> None:
    """Draw ``block``'s weights anew, as a ViT is initialised before training: every linear layer from a truncated
    normal (``torch.nn.init.trunc_normal_``: std 0.02, cut at two standard deviations, ±0.04) with zero bias, every
    norm reset to the identity (seeded: the same draw every time). Every value falls inside the cut with the
    normal's shape there, none piled on the cut as clamping would; how torch draws them depends on its version: the
    pinned torch 2.14 draws from the normal and draws again those beyond the cut (for a cut that keeps over 30% of
    the normal, as this one's 95%), older versions map uniform draws between the cut's two cumulative
    probabilities through the normal's inverse CDF (``erfinv``)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in block.modules():
            if isinstance(m, torch.nn.Linear):
                w = torch.empty(m.weight.shape)
                torch.nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04, generator=g)
                m.weight.copy_(w)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, torch.nn.LayerNorm):
                if m.weight is not None:
                    m.weight.fill_(1.0)
                if m.bias is not None:
                    m.bias.zero_()


@dataclass
class Cascade:
    """Maps and predictions with the top ``k`` blocks re-initialised, for k = 0 (trained) … L (all random).

    Attributes:
        maps: map name -> (L + 1, N) the map at each step (attention: last layer's head mean; rollout; relevance).
        probs: (L + 1,) the trained model's class's probability at each step (None without classes).
        top: (L + 1,) the class each step predicts (None without classes).
        target: the trained model's class.
    """

    maps: dict[str, np.ndarray]
    probs: np.ndarray | None
    top: np.ndarray | None
    target: int | None
    layers: int = 0


def _maps_of(model: torch.nn.Module, x: torch.Tensor, forward: Forward, prefix: int,
             target: int | None) -> tuple[dict[str, np.ndarray], torch.Tensor | None, int | None]:
    """Every map of ``model`` (:func:`vitviz.analyses.maps.class_maps`) for ``target`` (the model's own top class
    when None); the logits; the target."""
    m = class_maps(model, x, forward, prefix, target)
    return m.maps, m.logits, m.target


@dataclass(frozen=True)
class _Copy:
    """A copy of the model and its forward, made with the model alone (nobody's hooks or switches on it then): the
    randomisation check's own, which it changes and runs outside the lock."""

    key: str = "copy"
    grad: bool = True  # the copy's parameters are ordinary tensors (made in inference mode they could not be used
    own_size: bool = True  # for the backward of relevance)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return int(spec.params_m * 1e6 * 4)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> tuple:
        from vitviz.models import loaders

        twin = copy.deepcopy(model).eval()
        return twin, loaders.forward_of(twin)

    def nbytes(self, got: tuple) -> int:
        return 0


@dataclass(frozen=True)
class CascadeProbe:
    """The maps of the trained model and of copies whose top k blocks are re-initialised, k = 1 … L (one copy,
    re-initialised one more block at each step; the shared model is never changed). The copy is made with the
    model alone, a moment; its L + 1 forwards and backwards run outside the model's lock (:meth:`staged`)."""

    prefix: int
    seed: int = 0
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("cascade", self.seed)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        weights = int(spec.params_m * 1e6 * 4)  # the copy
        return weights + budget.eager_bytes(spec, tokens) + 2 * spec.depth * spec.heads * tokens * tokens * 4

    def staged(self, x: torch.Tensor, run: Callable) -> Cascade:
        # the runner holds this probe's whole estimate (the copy's weights with the steps') from before the copy
        # is made until the last step ends: the copy is never alive uncounted, and nothing here waits for memory
        twin, twin_forward = run(_Copy())  # the shared model is never changed
        with torch.inference_mode(False), torch.enable_grad():
            return self.steps(twin, x, twin_forward)

    def steps(self, twin: torch.nn.Module, x: torch.Tensor, twin_forward: Forward) -> Cascade:
        """Every step on ``twin``, the probe's own copy (re-initialised block by block from the top)."""
        blocks = parts_of(twin).blocks
        steps, probs, top, target = [], [], [], None
        for k in range(len(blocks) + 1):
            if k:
                reinitialise(blocks[len(blocks) - k], self.seed * 1000 + k)
            got, lg, target = _maps_of(twin, x, twin_forward, self.prefix, target)
            steps.append(got)
            if lg is not None:
                p = torch.softmax(lg.double().reshape(-1, lg.shape[-1])[0], -1)
                probs.append(float(p[target]))
                top.append(int(torch.argmax(p)))
        names = list(steps[0])
        return Cascade({n: np.stack([s[n] for s in steps]) for n in names},
                       np.array(probs) if probs else None, np.array(top) if top else None, target, len(blocks))

    def nbytes(self, c: Cascade) -> int:
        return sum(v.nbytes for v in c.maps.values())


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two maps (ties take their average rank): 1 = the same order of patches."""
    def ranks(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, np.float64).ravel()
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=np.float64)
        _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=r)
        return sums[inverse] / counts[inverse]

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra ** 2).sum() * (rb ** 2).sum())
    return float((ra * rb).sum() / den) if den > 0 else 0.0
