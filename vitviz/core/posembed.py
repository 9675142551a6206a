"""Position embeddings: sinusoidal 1D / 2D, learned ones read from a model, similarity, resampling.

A position embedding matrix here is (N, D): one D-dimensional vector per
position; a grid of them is (rows, cols, D) in row-major order.
"""

from __future__ import annotations

import numpy as np
import torch


def sincos_1d(n_pos: int, dim: int, base: float = 10000.0) -> np.ndarray:
    """Transformer sinusoids, (n_pos, dim): column 2i is sin(t / base^(2i/dim)), 2i+1 its cos.

    ``dim`` must be even. Every row has squared norm dim / 2.
    """
    if dim % 2:
        raise ValueError(f"The embedding size must be even, not {dim}.")
    t = np.arange(n_pos, dtype=np.float64)[:, None]
    freq = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)[None, :]
    pe = np.zeros((n_pos, dim))
    pe[:, 0::2] = np.sin(t * freq)
    pe[:, 1::2] = np.cos(t * freq)
    return pe


def sincos_2d(rows: int, cols: int, dim: int, base: float = 10000.0) -> np.ndarray:
    """2D sinusoids, (rows·cols, dim) in row-major order.

    The first dim/2 columns are the 1D encoding of the row index, the last
    dim/2 that of the column index. ``dim`` must be a multiple of 4.
    """
    if dim % 4:
        raise ValueError(f"A 2D sinusoidal embedding needs a size divisible by 4, not {dim}.")
    half = dim // 2
    r = sincos_1d(rows, half, base)
    c = sincos_1d(cols, half, base)
    return np.concatenate([np.repeat(r, cols, axis=0), np.tile(c, (rows, 1))], axis=1)


def similarity(pe: np.ndarray, kind: str = "cosine") -> np.ndarray:
    """(N, N) similarity of the rows of an (N, D) matrix: ``dot`` or ``cosine``.

    A zero row has cosine similarity 0 to everything (no division by zero).
    """
    pe = np.asarray(pe, dtype=np.float64)
    if kind == "dot":
        return pe @ pe.T
    if kind != "cosine":
        raise ValueError(f"Unknown similarity {kind!r}; use 'dot' or 'cosine'.")
    norm = np.linalg.norm(pe, axis=1, keepdims=True)
    unit = np.divide(pe, norm, out=np.zeros_like(pe), where=norm > 0)
    return unit @ unit.T


def neighbourhood(grid: np.ndarray) -> dict[str, float | None]:
    """Mean cosine similarity of position pairs in a (rows, cols, D) grid, by how they relate.

    Returns ``next_door`` (pairs one step apart, up/down/left/right), ``all`` (every pair of
    distinct positions) and ``same_ring`` (pairs equally far from the grid's centre that are not
    next door). A grid-like table has next_door well above all; a table that only learned how
    far a patch is from the centre has same_ring highest. None where a grid has no such pair.
    """
    r, c, d = grid.shape
    sim = similarity(grid.reshape(r * c, d), "cosine")
    rows, cols = np.divmod(np.arange(r * c), c)
    steps = np.abs(rows[:, None] - rows[None]) + np.abs(cols[:, None] - cols[None])
    ring = np.hypot(rows - (r - 1) / 2, cols - (c - 1) / 2)
    same_ring = np.isclose(ring[:, None], ring[None]) & (steps > 1)

    def mean(sel: np.ndarray) -> float | None:
        return float(sim[sel].mean()) if sel.any() else None

    return {"next_door": mean(steps == 1), "all": mean(steps > 0), "same_ring": mean(same_ring)}


NO_ORDER = 0.1
"""Next-door positions at most this much more alike (mean cosine) than positions farther apart: no arrangement."""
CLEARLY = 0.05
"""Next-door pairs and pairs equally far from the centre this much apart (mean cosine): one of them clearly wins."""


def relations(grid: np.ndarray) -> dict[str, int | float | None]:
    """How the positions of a (rows, cols, D) grid relate to the ones most like them (cosine).

    Returns ``positions`` (rows·cols); ``nearest_next_door``: how many have a 4-neighbour as the position most
    like them; ``nearest_same_ring``: how many have one equally far from the grid's centre (next door or not);
    ``farther``: the mean cosine of the pairs more than one step apart (None if there is none).
    """
    r, c, d = grid.shape
    sim = similarity(grid.reshape(r * c, d), "cosine")
    rows, cols = np.divmod(np.arange(r * c), c)
    steps = np.abs(rows[:, None] - rows[None]) + np.abs(cols[:, None] - cols[None])
    farther = float(sim[steps > 1].mean()) if (steps > 1).any() else None
    np.fill_diagonal(sim, -np.inf)
    best = sim.argmax(1)
    ring = np.hypot(rows - (r - 1) / 2, cols - (c - 1) / 2)
    other = best != np.arange(r * c)
    return {"positions": r * c, "nearest_next_door": int((other & (steps[np.arange(r * c), best] == 1)).sum()),
            "nearest_same_ring": int((other & np.isclose(ring, ring[best])).sum()), "farther": farther}


def arrangement(near: dict[str, float | None], rel: dict[str, int | float | None]) -> str:
    """What a table's similarities say it codes, from :func:`neighbourhood` and :func:`relations`:

    - ``"none"``: next-door positions hardly more alike than positions farther apart (:data:`NO_ORDER`);
    - ``"centre"``: positions equally far from the centre clearly more alike than next-door ones (:data:`CLEARLY`):
      the table codes how far a patch is from the centre;
    - ``"grid"``: next-door positions clearly the most alike, and for at least half the positions the most similar
      one is a 4-neighbour: the table codes where a patch is;
    - ``"mixed"``: locality, but neither of those cleanly.
    """
    d, f, s = near["next_door"], rel["farther"], near["same_ring"]
    if d is None or f is None or d - f < NO_ORDER:
        return "none"
    if s is not None and s - d >= CLEARLY:
        return "centre"
    if (s is None or d - s >= CLEARLY) and 2 * rel["nearest_next_door"] >= rel["positions"]:
        return "grid"
    return "mixed"


def learned_grid(model: torch.nn.Module) -> np.ndarray:
    """A model's learned patch position embeddings as a (rows, cols, D) grid.

    Handles timm ViTs (``pos_embed`` (1, prefix + N, D), or N rows when
    ``no_embed_class``) and transformers ViT / DINOv2 (``embeddings.position_embeddings``
    (1, 1 + N, D); registers there carry no position). Rows for the class,
    distillation and register tokens are dropped.
    """
    if hasattr(model, "pos_embed") and isinstance(model.pos_embed, torch.Tensor):
        pos = model.pos_embed.detach()[0]
        prefix = 0 if getattr(model, "no_embed_class", False) else int(getattr(model, "num_prefix_tokens", 1))
        gh, gw = model.patch_embed.grid_size
    else:
        pos = getattr(model, "base_model", model).embeddings.position_embeddings.detach()[0]
        prefix = 1
        side = int(round((pos.shape[0] - prefix) ** 0.5))
        gh = gw = side
    patch_rows = pos[prefix:]
    if patch_rows.shape[0] != gh * gw:
        raise ValueError(f"Position table has {patch_rows.shape[0]} patch rows, expected {gh}×{gw}.")
    return patch_rows.float().reshape(gh, gw, -1).numpy()


def resample_grid(grid: np.ndarray, rows: int, cols: int, mode: str = "bicubic") -> np.ndarray:
    """Resample a (r, c, D) embedding grid to (rows, cols, D) the way timm does for a new resolution.

    Uses ``timm.layers.resample_abs_pos_embed`` (bicubic, antialiased when shrinking).
    """
    from timm.layers import resample_abs_pos_embed

    r, c, d = grid.shape
    pos = torch.from_numpy(np.ascontiguousarray(grid, dtype=np.float32)).reshape(1, r * c, d)
    out = resample_abs_pos_embed(pos, new_size=[rows, cols], old_size=[r, c], num_prefix_tokens=0,
                                 interpolation=mode, antialias=True)
    return out.reshape(rows, cols, d).numpy()


def rope_2d(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, base: float = 100.0) -> np.ndarray:
    """2D rotary position encoding: rotate each query or key by its row and column.

    Args:
        x: (N, D) vectors, D a multiple of 4. The first D/2 dimensions are rotated by the row,
            the last D/2 by the column, in pairs (2i, 2i+1) by angle pos·θᵢ with θᵢ = base^(−2i/(D/2)).
        rows, cols: (N,) positions.

    Returns:
        (N, D) rotated vectors. Their dot products depend on positions only through the offset.
    """
    n, d = x.shape
    if d % 4:
        raise ValueError(f"2D rotary encoding needs a size divisible by 4, not {d}.")
    half = d // 2
    theta = base ** (-np.arange(0, half, 2, dtype=np.float64) / half)  # (half/2,)
    out = np.array(x, dtype=np.float64)
    for start, pos in ((0, np.asarray(rows, np.float64)), (half, np.asarray(cols, np.float64))):
        angle = pos[:, None] * theta[None, :]  # (N, half/2)
        a, b = out[:, start:start + half:2].copy(), out[:, start + 1:start + half:2].copy()
        out[:, start:start + half:2] = a * np.cos(angle) - b * np.sin(angle)
        out[:, start + 1:start + half:2] = a * np.sin(angle) + b * np.cos(angle)
    return out


def rope_offset_scores(dim: int, reach: int, base: float = 100.0, seed: int | None = None) -> np.ndarray:
    """q·k of one vector placed at a query and at every key up to ``reach`` rows and columns away, (2R+1, 2R+1).

    Entry (R + dr, R + dc) is the key at offset (dr, dc). The vector is all ones / √dim (``seed``: a seeded
    random unit vector instead); the query sits at (reach, reach) of a grid, and any other place gives the same
    table, since rotary scores depend only on the offset.
    """
    x = np.ones(dim) if seed is None else np.random.default_rng(seed).standard_normal(dim)
    x = x / np.linalg.norm(x)
    side = 2 * reach + 1
    r, c = np.divmod(np.arange(side * side), side)
    keys = rope_2d(np.tile(x, (side * side, 1)), r, c, base)
    query = rope_2d(x[None, :], np.array([reach]), np.array([reach]), base)[0]
    return (keys @ query).reshape(side, side)
