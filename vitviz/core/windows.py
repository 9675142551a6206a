"""Windowed attention as in Swin: which patches a query may look at, what it costs, and relative position bias.

A ViT's attention lets every one of the N patches look at all N: N² scores per
head and layer, so the cost grows with the fourth power of the image side.
Swin cuts the patch grid into M×M windows and lets a patch attend only inside
its window (N·M² scores: linear in N); every other block shifts the windows by
M/2 so that information crosses the window borders. Inside a window a learned
table adds a bias that depends only on the offset between query and key
(``relative_position_index``), not on where the window is.

Shapes: patch grid (gh, gw), N = gh·gw; window side M; width D.
"""

from __future__ import annotations

import numpy as np
import torch


def swin_window(side: int, m: int, shift: int) -> tuple[int, int]:
    """(window, shift) along one axis of ``side`` patches as Swin (and timm) use them: a window that covers the whole
    axis shrinks to it and is not shifted (shifting would only move patches around inside one window)."""
    return (side, 0) if side <= m else (m, shift)


def window_labels(gh: int, gw: int, m: int, shift: int = 0) -> np.ndarray:
    """(gh, gw) int: which attention group each patch is in, for M×M windows shifted by ``shift`` patches.

    The groups are timm's (whose Swin-T the app loads), in its order of steps: along each axis (see
    :func:`swin_window`) the grid is rolled back by ``shift`` (cyclically: the first ``shift`` rows go to the
    bottom), then padded at the bottom and right to whole windows, then cut into M×M windows; a mask keeps apart
    the patches that the roll brought together from opposite edges (the last window's three regions: before the
    last M, the strip up to the rolled-in part, and the rolled-in part). Two patches attend to each other when they
    share a window and a region. With ``shift = 0``: plain M×M windows from the top left, partial ones at the
    bottom and right when M does not divide the grid.
    """
    if m < 1 or not 0 <= shift < m:
        raise ValueError(f"A window of {m} patches can be shifted by 0 to {m - 1} patches, not {shift}.")

    def axis(side: int) -> np.ndarray:
        mm, s = swin_window(side, m, shift)
        padded = -(-side // mm) * mm
        rolled = (np.arange(side) - s) % side  # where each patch lands after the roll
        region = np.where(rolled < padded - mm, 0, np.where(rolled < padded - s, 1, 2)) if s else 0
        return (rolled // mm) * 3 + region

    rows, cols = axis(gh), axis(gw)
    codes = (rows[:, None] * (cols.max() + 1) + cols[None, :]).ravel()
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse].reshape(gh, gw)  # numbered as met from the top left


def allowed_keys(labels: np.ndarray, row: int, col: int) -> np.ndarray:
    """(gh, gw) bool: the keys query patch (row, col) may attend to (its own window)."""
    return labels == labels[row, col]


def attention_macs(tokens: int, dim: int, window_tokens: int | None = None) -> dict[str, int]:
    """Multiply-accumulates of one multi-head self-attention layer over ``tokens`` tokens of width ``dim``.

    ``window_tokens`` (M²) limits each query to that many keys (windowed attention, N a multiple
    of M²); None is global attention. Heads split D, so their count does not change the total.

    Returns:
        dict with "projections" (q, k, v and output: 4·N·D²), "scores" (q·k for each allowed pair:
        N·span·D), "weighted_sum" (the same count) and "total".
    """
    span = tokens if window_tokens is None else window_tokens
    if window_tokens is not None and tokens % window_tokens:
        raise ValueError(f"{tokens} tokens do not split into windows of {window_tokens}.")
    out = {"projections": 4 * tokens * dim * dim, "scores": tokens * span * dim, "weighted_sum": tokens * span * dim}
    out["total"] = sum(out.values())
    return out


def cost_curve(sides: list[int], patch: int, dim: int, window: int) -> dict[str, np.ndarray]:
    """Attention MACs of one layer against the input side in pixels (square inputs).

    Global attention runs on the (side // patch)² tokens; windowed attention on the grid padded up
    to whole windows, as Swin pads. Returns "side" (pixels), "tokens", "padded" (tokens after
    padding), "global" and "windowed" (MACs), each an array of ``len(sides)``.
    """
    side = np.asarray(sides, dtype=np.int64)
    grid = side // patch
    padded = -(-grid // window) * window
    glob = np.array([attention_macs(int(g * g), dim)["total"] for g in grid], dtype=np.float64)
    win = np.array([attention_macs(int(g * g), dim, window * window)["total"] for g in padded], dtype=np.float64)
    return {"side": side, "tokens": grid * grid, "padded": padded * padded, "global": glob, "windowed": win}


def windowed_attention(x: torch.Tensor, qkv: torch.nn.Linear, proj: torch.nn.Linear, heads: int, grid: tuple[int, int],
                       m: int) -> torch.Tensor:
    """One windowed self-attention layer as Swin computes it: (N, D) tokens -> (N, D), N = gh·gw.

    The grid is cut into (gh/M)·(gw/M) windows of M² tokens and each window attends within itself
    (no shift, no relative bias: the cost is what matters here).
    """
    gh, gw = grid
    n, d = x.shape
    win = x.view(gh // m, m, gw // m, m, d).permute(0, 2, 1, 3, 4).reshape(-1, m * m, d)  # (W, M², D)
    out = _attend(win, qkv, proj, heads)
    return out.view(gh // m, gw // m, m, m, d).permute(0, 2, 1, 3, 4).reshape(n, d)


def global_attention(x: torch.Tensor, qkv: torch.nn.Linear, proj: torch.nn.Linear, heads: int,
                     allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Plain multi-head self-attention over all N tokens, (N, D) -> (N, D); ``allowed`` (N, N) bool masks pairs."""
    return _attend(x[None], qkv, proj, heads, allowed)[0]


def _attend(x: torch.Tensor, qkv: torch.nn.Linear, proj: torch.nn.Linear, heads: int,
            allowed: torch.Tensor | None = None) -> torch.Tensor:
    b, t, d = x.shape
    q, k, v = qkv(x).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # each (B, H, T, d)
    scores = q @ k.transpose(-1, -2) / (d // heads) ** 0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = scores.softmax(-1) @ v  # (B, H, T, d)
    return proj(out.transpose(1, 2).reshape(b, t, d))


def relative_position_index(m: int) -> np.ndarray:
    """(M², M²) int: for query i and key j of an M×M window (row-major), the row of the bias table they use.

    The table has (2M−1)² rows, one per offset (Δrow, Δcol) = query − key, each in −(M−1)..M−1;
    row (Δrow + M − 1)·(2M − 1) + (Δcol + M − 1).
    """
    r, c = np.divmod(np.arange(m * m), m)
    dr = r[:, None] - r[None, :] + m - 1
    dc = c[:, None] - c[None, :] + m - 1
    return dr * (2 * m - 1) + dc


def bias_for_query(table: np.ndarray, m: int, row: int, col: int) -> np.ndarray:
    """(M, M): the bias query (row, col) of a window adds to each key's score, from a ((2M−1)², ) table of one head."""
    idx = relative_position_index(m)[row * m + col]
    return np.asarray(table)[idx].reshape(m, m)


def distance_bias_table(m: int, heads: int) -> np.ndarray:
    """((2M−1)², H) an illustrative bias table (not learned): each head penalises distance with its own slope.

    Head h has slope 2^−(h+1)·4 per patch of Euclidean offset (ALiBi's geometric slopes, in 2D),
    so head 0 looks close by and the last head almost anywhere in the window.
    """
    d = np.arange(-(m - 1), m)
    dist = np.sqrt(d[:, None] ** 2 + d[None, :] ** 2).ravel()
    slopes = 4.0 * 2.0 ** -(np.arange(heads) + 1.0)
    return -dist[:, None] * slopes[None, :]


def bias_tables(model: torch.nn.Module) -> list[tuple[str, np.ndarray, int]]:
    """Every learned relative position bias table of a timm Swin: (name, ((2M−1)², H) float array, M) per block.

    Names say where the block is ("stage 1, block 2"); blocks are in order, first stage first.
    """
    out = []
    for s, stage in enumerate(getattr(model, "layers", [])):
        for b, block in enumerate(getattr(stage, "blocks", [])):
            attn = getattr(block, "attn", None)
            table = getattr(attn, "relative_position_bias_table", None)
            if table is not None:
                out.append((f"stage {s + 1}, block {b + 1}", table.detach().float().numpy().copy(),
                            int(attn.window_size[0])))
    if not out:
        raise ValueError(f"{type(model).__name__} has no relative position bias tables.")
    return out
