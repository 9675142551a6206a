"""The maths of attention maps: what one forward left behind, rollout, DINO's mass threshold, boxes.

Shapes: B images, H heads, L layers, T tokens = prefix + N patches (prefix: the class token plus any
distillation or register tokens), patch grid (gh, gw) with N = gh·gw. One attention matrix is (H, T, T), rows
are queries, and each row sums to 1 (post-softmax). Recording the matrices is :mod:`vitviz.models.hooks` and
:mod:`vitviz.analyses.attention`; nothing here touches a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.specs.views import FUSIONS


def patch_distances(gh: int, gw: int, patch: int) -> torch.Tensor:
    """(N, N) Euclidean distance in pixels between the centres of every two patches, row-major."""
    r, c = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    pos = torch.stack([r.flatten(), c.flatten()], 1).float() * patch
    return torch.cdist(pos, pos)


def fuse_heads(attn: torch.Tensor, fusion: str) -> torch.Tensor:
    """(H, T, T) -> (T, T) by mean, max or min over heads."""
    if fusion == "mean":
        return attn.mean(0)
    if fusion == "max":
        return attn.amax(0)
    if fusion == "min":
        return attn.amin(0)
    raise ValueError(f"Unknown head fusion {fusion!r}; choose from {FUSIONS}.")


@dataclass(frozen=True)
class LayerKeys:
    """One layer's queries and keys, as compact as the rows they give stay accurate (the explorer's data).

    Attributes:
        q: (H, T, d) queries, multiplied by the layer's scale (1/√d unless the model says otherwise).
        k: (H, T, d) keys minus their mean over the T tokens (per head and channel). A softmax row does not change
            when the same number is added to all its scores, and q·(k_j − k̄) = q·k_j − q·k̄ for every j: the
            rows are the model's, and the centred keys are smaller, so float16 rounds them less.
        scale: the scale already applied to ``q``.

    Row i of head h is softmax_j(q[h, i] · k[h, j]) over all T tokens (:meth:`rows`).
    """

    q: np.ndarray
    k: np.ndarray
    scale: float

    @classmethod
    def pack(cls, q: torch.Tensor, k: torch.Tensor, scale: float, exact_bytes: int) -> LayerKeys:
        """From the model's (H, T, d) q and k: float32 when both together are under ``exact_bytes`` in float32,
        else float16."""
        q32, k32 = (q.float() * scale), k.float()
        k32 = k32 - k32.mean(1, keepdim=True)
        dtype = np.float32 if 2 * q.numel() * 4 <= exact_bytes else np.float16
        return cls(q32.numpy().astype(dtype), k32.numpy().astype(dtype), float(scale))

    @property
    def nbytes(self) -> int:
        return self.q.nbytes + self.k.nbytes

    def rows(self, queries: np.ndarray | slice = slice(None)) -> np.ndarray:
        """(H, Q, T) float64 attention rows of the token indices ``queries``, computed from the kept q and k."""
        q, k = self.q[:, queries].astype(np.float64), self.k.astype(np.float64)
        s = q @ k.transpose(0, 2, 1)
        s -= s.max(-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(-1, keepdims=True)


@dataclass
class AttentionMaps:
    """What one forward pass leaves behind, enough to redraw every view without the model.

    Attributes:
        grid: (gh, gw) patch grid; N = gh·gw.
        patch: patch size in pixels.
        prefix: number of non-patch tokens at the start of the sequence.
        cls: (L, H, N) class-token attention to the patches (prefix keys dropped, not renormalised).
        distance: (L, H) mean attention distance in pixels: over every patch query, the
            attention-weighted distance to the patch keys (each row renormalised over them).
        full: layer -> (H, T, T) post-softmax matrices for the layers whose full matrices were kept
            (the model's own tensors, kept by reference: no copy).
        fused: fusion -> (L, T, T) float16 head-fused matrices, kept for rollout when ``full`` is not
            complete; for very long sequences only "mean" (max / min then need a lower resolution).
        keys: per layer, its queries and keys (:class:`LayerKeys`): any row of any head, for the explorer.
        norms: (T,) output-token norms of the last layer, or None.
        logits: (classes,) model output for classifiers, or None.
    """

    grid: tuple[int, int]
    patch: int
    prefix: int
    cls: np.ndarray
    distance: np.ndarray
    full: dict[int, torch.Tensor] = field(default_factory=dict)
    fused: dict[str, torch.Tensor] = field(default_factory=dict)
    keys: list[LayerKeys] = field(default_factory=list)
    norms: np.ndarray | None = None
    logits: np.ndarray | None = None
    _rollouts: dict = field(default_factory=dict, repr=False)

    @property
    def layers(self) -> int:
        return self.cls.shape[0]

    @property
    def nbytes(self) -> int:
        """Memory held by the stored matrices."""
        tensors = list(self.full.values()) + list(self.fused.values())
        return (self.cls.nbytes + sum(t.numel() * t.element_size() for t in tensors)
                + sum(k.nbytes for k in self.keys))

    @property
    def heads(self) -> int:
        return self.cls.shape[1]

    def cls_map(self, layer: int, head: int | None = None) -> np.ndarray:
        """(gh, gw) class-token attention of one head, or the head mean when ``head`` is None."""
        a = self.cls[layer]
        a = a.mean(0) if head is None else a[head]
        return a.reshape(self.grid)

    def query_maps(self, row: int, col: int, layer: int | None = None) -> tuple[int, np.ndarray]:
        """(layer used, (H, gh, gw)): where patch (row, col), as the query, looks, per head.

        Uses ``layer`` if its full matrices were kept, else the last layer.
        """
        layer = self.layers - 1 if layer is None else layer
        if layer not in self.full:
            layer = max(self.full)
        q = self.prefix + row * self.grid[1] + col
        rows = self.full[layer][:, q, self.prefix:].float().numpy()
        return layer, rows.reshape(-1, *self.grid)

    def query_rows(self, layer: int) -> np.ndarray | None:
        """(H + 1, N, N) float32: every patch as the query, to every patch key, per head and (last) the head mean.

        From the full matrices of ``layer`` when they were kept; else (1, N, N), the head mean from the
        fused float16 matrices; else None. Prefix keys dropped, rows not renormalised (like ``cls``).
        """
        p = self.prefix
        if layer in self.full:
            rows = self.full[layer][:, p:, p:].float().numpy()
            return np.concatenate([rows, rows.mean(0, keepdims=True)])
        if "mean" in self.fused:
            return self.fused["mean"][layer, p:, p:].float().numpy()[None]
        return None

    def fusions(self) -> tuple[str, ...]:
        """Head fusions available for rollout with what was kept."""
        return FUSIONS if len(self.full) == self.layers else tuple(self.fused)

    def _fused_layers(self, fusion: str) -> list[torch.Tensor]:
        if fusion in self.fused:
            return list(self.fused[fusion])
        if len(self.full) != self.layers:
            raise ValueError(f"At this resolution ({self.cls.shape[-1]:,} patches) only the head mean is kept "
                             f"for rollout, to save memory; lower the resolution for {fusion} fusion.")
        return [fuse_heads(self.full[i].float(), fusion) for i in range(self.layers)]

    def rollout(self, fusion: str = "mean", discard: float = 0.0) -> np.ndarray:
        """(gh, gw) class-token row of attention rollout (memoised per fusion and discard ratio)."""
        key = (fusion, round(float(discard), 4))
        if key not in self._rollouts:
            if fusion == "mean" and discard == 0 and len(self.full) == self.layers:
                cls_row = rollout_cls_mean([self.full[i] for i in range(self.layers)])
            else:
                cls_row = rollout_cls(self._fused_layers(fusion), discard)
            self._rollouts[key] = cls_row[self.prefix:].reshape(self.grid)
        return self._rollouts[key]


def rollout_cls(fused: list[torch.Tensor], discard: float = 0.0) -> np.ndarray:
    """Class-token row of attention rollout, (T,).

    For each layer's head-fused (T, T) matrix A (first layer first): optionally zero
    the ``discard`` fraction of smallest entries (never the class token's own
    entry), take Â = (A + I) / 2 and renormalise its rows; the rollout is
    Â_L ··· Â_1 and we return its row 0, computed right to left as a row vector.
    I is never built: v·Â = w·A + w with w = v / s and s the row sums of A + I.
    """
    if not 0.0 <= discard < 1.0:
        raise ValueError("The discard ratio must be at least 0 and below 1.")
    t = fused[0].shape[0]
    v = torch.zeros(t)
    v[0] = 1.0
    for a in reversed(fused):
        a = a.to(torch.float32, copy=discard > 0)  # never modify the caller's matrices
        if discard > 0:
            flat = a.view(-1)
            k = int(flat.numel() * discard)
            if k:
                idx = flat.topk(k, largest=False).indices
                flat[idx[idx != 0]] = 0
        w = v / (a.sum(-1) + 1.0).clamp_min(1e-12)
        v = w @ a + w
    return v.numpy()


def rollout_cls_mean(full: list[torch.Tensor]) -> np.ndarray:
    """:func:`rollout_cls` for head-mean fusion without discarding, from per-layer (H, T, T) matrices.

    Post-softmax rows sum to 1, so every row of (Ā + I) sums to 2 and one step is
    v ← (mean_h(v·A_h) + v) / 2: H vector-matrix products, no fused matrix built.
    """
    v = torch.zeros(full[0].shape[-1])
    v[0] = 1.0
    for a in reversed(full):
        v = 0.5 * (torch.matmul(v, a.float()).mean(0) + v)
    return v.numpy()


def mass_mask(att: np.ndarray, keep: float = 0.6) -> tuple[np.ndarray, float, float]:
    """DINO's threshold: the fewest patches that hold at least ``keep`` of the attention mass.

    Args:
        att: (...,) non-negative attention over patches (any shape; normalised here).
        keep: fraction of mass in (0, 1].

    Returns:
        (mask with att's shape, mass fraction actually kept, fraction of patches kept).
    """
    a = np.asarray(att, dtype=np.float64).ravel()
    order = np.argsort(-a, kind="stable")  # largest first, ties by index
    running = np.cumsum(a[order])
    total = running[-1]  # the sequential total, so the browser's explorer can reproduce every digit
    if not total > 0:
        return np.ones(np.shape(att), bool), 1.0, 1.0
    cum = running / total
    k = int(np.searchsorted(cum, keep - 1e-12) + 1)
    k = min(k, a.size)
    mask = np.zeros(a.size, bool)
    mask[order[:k]] = True
    return mask.reshape(np.shape(att)), float(cum[k - 1]), k / a.size


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 4-connected component of a (gh, gw) boolean mask."""
    seen = np.zeros_like(mask, bool)
    best: list[tuple[int, int]] = []
    gh, gw = mask.shape
    for r0 in range(gh):
        for c0 in range(gw):
            if not mask[r0, c0] or seen[r0, c0]:
                continue
            comp, stack = [], [(r0, c0)]
            seen[r0, c0] = True
            while stack:
                r, c = stack.pop()
                comp.append((r, c))
                for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if 0 <= rr < gh and 0 <= cc < gw and mask[rr, cc] and not seen[rr, cc]:
                        seen[rr, cc] = True
                        stack.append((rr, cc))
            if len(comp) > len(best):
                best = comp
    out = np.zeros_like(mask, bool)
    for r, c in best:
        out[r, c] = True
    return out


def bounding_box(mask: np.ndarray, patch: int) -> tuple[int, int, int, int] | None:
    """Pixel box (left, top, right, bottom) around the largest component of a (gh, gw) mask."""
    comp = largest_component(mask)
    if not comp.any():
        return None
    rows, cols = np.nonzero(comp)
    return int(cols.min() * patch), int(rows.min() * patch), int((cols.max() + 1) * patch), int((rows.max() + 1) * patch)
