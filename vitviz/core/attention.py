"""The maths of attention maps: rows from queries and keys, rollout, mean attention distance, DINO's mass threshold,
boxes.

Shapes: B images, H heads, L layers, T tokens = prefix + N patches (prefix: the class token plus any
distillation or register tokens), patch grid (gh, gw) with N = gh·gw, d = D / H per head. One attention matrix is
(H, T, T), rows are queries, and each row sums to 1 (post-softmax). A forward on the fused path never builds those
matrices; it leaves each layer's queries and keys (:class:`LayerKeys`, recorded by :mod:`vitviz.models.hooks`),
from which any row is softmax(q_i · Kᵀ): one row per head for the class token's maps at once, every row, a chunk
of queries at a time, only when a view asks for them (rollout, the mean attention distance). Nothing here touches
a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

FUSIONS = ("mean", "max", "min")
"""Ways to fuse the heads of a layer for rollout."""
EXACT_BYTES = 512 * 2**10
"""A layer whose queries and keys together are under this many float32 bytes is kept as float32 whatever its
rows (a small model's: nothing to save)."""
F16_TOLERANCE = 2e-5
"""A layer's queries and keys are kept as float16 only when the attention rows they give differ from the float32
ones by at most this much (measured on sampled rows when packed); sharp heads (weights near 1) need float32."""
_F16_MAX = 65504.0
"""The largest finite float16."""
CHUNK_BYTES = 64 * 2**20
"""Rows computed at once for every-row work (rollout, distance): (H, chunk, T) float32 within this many bytes."""


def patch_distances(gh: int, gw: int, patch: int) -> torch.Tensor:
    """(N, N) Euclidean distance in pixels between the centres of every two patches, row-major."""
    r, c = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    pos = torch.stack([r.flatten(), c.flatten()], 1).float() * patch
    return torch.cdist(pos, pos)


def fuse_heads(attn: torch.Tensor, fusion: str) -> torch.Tensor:
    """(H, ..., T) -> (..., T) by mean, max or min over heads."""
    if fusion == "mean":
        return attn.mean(0)
    if fusion == "max":
        return attn.amax(0)
    if fusion == "min":
        return attn.amin(0)
    raise ValueError(f"Unknown head fusion {fusion!r}; choose from {FUSIONS}.")


def _softmax_rows(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(H, Q, d) queries (already scaled), (H, T, d) keys -> (H, Q, T) float32 softmax rows."""
    return torch.softmax(q.float() @ k.float().transpose(1, 2), -1)


@dataclass(frozen=True)
class LayerKeys:
    """One layer's queries and keys, as compact as the rows they give stay accurate (what every row is made from).

    Attributes:
        q: (H, T, d) queries, multiplied by the layer's scale (1/√d unless the model says otherwise).
        k: (H, T, d) keys minus their mean over the T tokens (per head and channel). A softmax row does not change
            when the same number is added to all its scores, and q·(k_j − k̄) = q·k_j − q·k̄ for every j: the
            rows are the model's, and the centred keys are smaller, so float16 rounds them less.
        scale: the scale already applied to ``q``.
        error: the largest difference between rows from these (float16) numbers and from float32 ones, on the
            sampled rows measured when packed (0 when kept as float32).

    Row i of head h is softmax_j(q[h, i] · k[h, j]) over all T tokens (:meth:`rows`).
    """

    q: np.ndarray
    k: np.ndarray
    scale: float
    error: float = 0.0

    @classmethod
    def pack(cls, q: torch.Tensor, k: torch.Tensor, scale: float, tolerance: float = F16_TOLERANCE,
             samples: int = 64, exact_bytes: int = EXACT_BYTES, decided: float | None = None) -> LayerKeys:
        """From the model's (H, T, d) q and k: float32 under ``exact_bytes``; else float16 when rows from float16
        differ from rows from float32 by at most ``tolerance`` on ``samples`` query rows spread over the tokens (the
        class token first), else float32. ``decided`` (the error measured once before for this model and layer,
        or infinity for float32) skips the measuring: the trial softmax costs as much as a tenth of a forward."""
        q32, k32 = q.float() * scale, k.float()
        k32 = k32 - k32.mean(1, keepdim=True)
        exact = cls(q32.numpy(), k32.numpy(), float(scale), 0.0)
        if 2 * q32.numel() * 4 <= exact_bytes or (decided is not None and not decided <= tolerance):
            return exact
        # float16 holds every number finitely when all are below its largest, 65504 (a NaN compares false); read on
        # the float32 numbers: CPUs have no fast float16 comparisons (isfinite on float16 was most of the packing)
        if not (float(q32.abs().amax()) < _F16_MAX and float(k32.abs().amax()) < _F16_MAX):
            return exact
        q16, k16 = q32.half(), k32.half()
        if decided is not None:
            err = decided
        else:
            t = q32.shape[1]
            pick = torch.unique(torch.linspace(0, t - 1, min(samples, t)).round().long())
            err = float((_softmax_rows(q16[:, pick], k16) - _softmax_rows(q32[:, pick], k32)).abs().max())
        return cls(q16.numpy(), k16.numpy(), float(scale), err) if err <= tolerance else exact

    @property
    def nbytes(self) -> int:
        return self.q.nbytes + self.k.nbytes

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    @property
    def tokens(self) -> int:
        return self.q.shape[1]

    def rows(self, queries: np.ndarray | slice = slice(None)) -> np.ndarray:
        """(H, Q, T) float64 attention rows of the token indices ``queries``, computed from the kept q and k."""
        q, k = self.q[:, queries].astype(np.float64), self.k.astype(np.float64)
        s = q @ k.transpose(0, 2, 1)
        s -= s.max(-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(-1, keepdims=True)

    def row_chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[slice, torch.Tensor]]:
        """Every row, a chunk of queries at a time: (the query slice, (H, chunk, T) float32 rows)."""
        h, t = self.heads, self.tokens
        step = max(1, int(chunk_bytes // (4 * h * t * 3)))  # the scores, their softmax and a product alive at once
        q, k = torch.from_numpy(self.q), torch.from_numpy(self.k)
        for start in range(0, t, step):
            part = slice(start, min(start + step, t))
            yield part, _softmax_rows(q[:, part], k)


def class_rows(q: torch.Tensor, k: torch.Tensor, scale: float, prefix: int) -> torch.Tensor:
    """(H, N) float32: the class token's attention to the patches (prefix keys dropped, rows not renormalised),
    from one layer's (H, T, d) queries and keys, exactly as the model's softmax of its scores."""
    return _softmax_rows(q[:, :1].float() * scale, k.float())[:, 0, prefix:]


def mean_distance(keys: LayerKeys, dist: torch.Tensor, prefix: int) -> np.ndarray:
    """(H,) mean attention distance of one layer in pixels: over every patch query, the attention-weighted distance
    to the patch keys (each row renormalised over them). ``dist`` is the (N, N) patch distance matrix."""
    total = torch.zeros(keys.heads, dtype=torch.float64)
    for part, rows in keys.row_chunks():
        lo = max(part.start, prefix)
        if lo >= part.stop:
            continue
        pp = rows[:, lo - part.start:, prefix:]  # (H, c, N) patch queries to patch keys
        d = dist[lo - prefix:part.stop - prefix]  # (c, N)
        total += (torch.einsum("hqk,qk->hq", pp, d) / pp.sum(-1).clamp_min(1e-12)).double().sum(-1)
    return (total / dist.shape[0]).numpy()


def rollout_from_keys(keys: list[LayerKeys], fusion: str = "mean", discard: float = 0.0) -> np.ndarray:
    """(T,) class-token row of attention rollout through every layer, computed from each layer's queries and keys a
    chunk of rows at a time (never L·H·T² numbers at once; at most one (T, T) fused matrix, when discarding).

    Head-mean fusion without discarding needs no matrix at all: rows sum to 1, so one step is
    v ← (mean_h(v·A_h) + v) / 2. Otherwise each layer's head-fused (T, T) matrix is built and handed to
    :func:`rollout_cls`'s step.
    """
    if fusion not in FUSIONS:
        raise ValueError(f"Unknown head fusion {fusion!r}; choose from {FUSIONS}.")
    if not 0.0 <= discard < 1.0:
        raise ValueError("The discard ratio must be at least 0 and below 1.")
    t = keys[0].tokens
    v = torch.zeros(t)
    v[0] = 1.0
    for layer in reversed(keys):
        if fusion == "mean" and discard == 0:
            acc = torch.zeros(t)
            for part, rows in layer.row_chunks():
                acc += torch.einsum("c,hct->t", v[part], rows) / layer.heads
            v = 0.5 * (acc + v)
            continue
        fused = torch.empty(t, t)
        for part, rows in layer.row_chunks():
            fused[part] = fuse_heads(rows, fusion)
        v = _rollout_step(v, fused, discard)
    return v.numpy()


def _rollout_step(v: torch.Tensor, a: torch.Tensor, discard: float) -> torch.Tensor:
    """One step of :func:`rollout_cls` (right to left): v · Â for a head-fused (T, T) matrix A (modified in place
    when discarding: pass a matrix of your own)."""
    if discard > 0:
        flat = a.view(-1)
        k = int(flat.numel() * discard)
        if k:
            idx = flat.topk(k, largest=False).indices
            flat[idx[idx != 0]] = 0
    w = v / (a.sum(-1) + 1.0).clamp_min(1e-12)
    return w @ a + w


@dataclass
class AttentionMaps:
    """What one forward pass leaves behind, enough to redraw every view without the model.

    Attributes:
        grid: (gh, gw) patch grid; N = gh·gw.
        patch: patch size in pixels.
        prefix: number of non-patch tokens at the start of the sequence.
        cls: (L, H, N) class-token attention to the patches (prefix keys dropped, not renormalised), computed when
            recorded, in float32, from the model's own queries and keys.
        keys: per layer, its queries and keys (:class:`LayerKeys`): any row of any head.
        norms: (T,) output-token norms of the last layer, or None.
        logits: (classes,) model output for classifiers, or None.

    Every-row results (the mean attention distance, rollout) are computed from ``keys`` when first asked for
    (:meth:`distance`, :meth:`rollout`) and kept with the maps.
    """

    grid: tuple[int, int]
    patch: int
    prefix: int
    cls: np.ndarray
    keys: list[LayerKeys] = field(default_factory=list)
    norms: np.ndarray | None = None
    logits: np.ndarray | None = None
    _kept: dict = field(default_factory=dict, repr=False)

    @property
    def layers(self) -> int:
        return self.cls.shape[0]

    @property
    def heads(self) -> int:
        return self.cls.shape[1]

    @property
    def tokens(self) -> int:
        return self.prefix + self.cls.shape[-1]

    @property
    def nbytes(self) -> int:
        """Memory held: the class token's rows, every layer's queries and keys, what was computed from them."""
        return (self.cls.nbytes + sum(k.nbytes for k in self.keys)
                + sum(getattr(v, "nbytes", 0) for v in self._kept.values()))

    def cls_map(self, layer: int, head: int | None = None) -> np.ndarray:
        """(gh, gw) class-token attention of one head, or the head mean when ``head`` is None."""
        a = self.cls[layer]
        a = a.mean(0) if head is None else a[head]
        return a.reshape(self.grid)

    def query_maps(self, row: int, col: int, layer: int | None = None) -> tuple[int, np.ndarray]:
        """(layer, (H, gh, gw)): where patch (row, col), as the query, looks in each head of ``layer`` (the last
        by default): its row, prefix keys dropped, not renormalised (like ``cls``)."""
        layer = self.layers - 1 if layer is None else int(layer)
        q = self.prefix + row * self.grid[1] + col
        rows = self.keys[layer].rows(np.array([q]))[:, 0, self.prefix:]
        return layer, rows.astype(np.float32).reshape(-1, *self.grid)

    def fusions(self) -> tuple[str, ...]:
        """Head fusions rollout can use (all of them: every row can be made from the keys)."""
        return FUSIONS

    def remembered(self, key: tuple, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``'s result, computed once and kept with the maps under ``key``."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    def distance(self) -> np.ndarray:
        """(L, H) mean attention distance in pixels (:func:`mean_distance`, every layer), computed once."""
        def make() -> np.ndarray:
            dist = patch_distances(*self.grid, self.patch)
            return np.stack([mean_distance(k, dist, self.prefix) for k in self.keys])
        return self.remembered(("distance",), make)

    def rollout(self, fusion: str = "mean", discard: float = 0.0) -> np.ndarray:
        """(gh, gw) class-token row of attention rollout (:func:`rollout_from_keys`), computed once per fusion
        and discard ratio."""
        key = ("rollout", fusion, round(float(discard), 4))
        return self.remembered(key, lambda: rollout_from_keys(self.keys, fusion, discard)[self.prefix:]
                               .reshape(self.grid))

    def every_row_bytes(self) -> int:
        """Peak bytes of an every-row computation (rollout with a fused matrix, or the distance) on these maps."""
        t, n = self.tokens, self.cls.shape[-1]
        return CHUNK_BYTES + max(4 * t * t, 4 * n * n)


def rollout_cls(fused: list[torch.Tensor], discard: float = 0.0) -> np.ndarray:
    """Class-token row of attention rollout, (T,), from every layer's head-fused (T, T) matrix (first layer first).

    For each layer's matrix A: optionally zero the ``discard`` fraction of smallest entries (never the class
    token's own entry), take Â = (A + I) / 2 and renormalise its rows; the rollout is Â_L ··· Â_1 and we return
    its row 0, computed right to left as a row vector. I is never built: v·Â = w·A + w with w = v / s and s the
    row sums of A + I.
    """
    if not 0.0 <= discard < 1.0:
        raise ValueError("The discard ratio must be at least 0 and below 1.")
    t = fused[0].shape[0]
    v = torch.zeros(t)
    v[0] = 1.0
    for a in reversed(fused):
        v = _rollout_step(v, a.to(torch.float32, copy=discard > 0), discard)  # never the caller's matrices
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
