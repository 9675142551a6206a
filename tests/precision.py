"""Tolerances derived from float32's precision and the size of the values compared, never tuned on one CPU.

Two float32 computations of the same quantity (the model's fused kernel and our recomputation, torch and ONNX
Runtime, one CPU's vector width and another's) may round differently; how much is bounded by the unit roundoff
u = 2⁻²⁴ times the size of what was summed. The classic bounds (Higham, *Accuracy and Stability of Numerical
Algorithms*, §3.1): a sum or dot product of n terms is off by at most γₙ·Σ|terms|, γₙ = n·u / (1 − n·u); a
softmax row p with scores each off by at most δ is off by at most p·2δ (relative to each entry), plus the rounding
of its own sum over T terms, γ_T·p. These bounds hold on every CPU: a test that uses them fails only when the
numbers are wrong, not when the machine is another one.
"""

from __future__ import annotations

import numpy as np

U = 2.0 ** -24
"""float32's unit roundoff (half the distance from 1 to the next float32)."""


def gamma(n: int) -> float:
    """γₙ: the relative error bound of a float32 sum of n terms."""
    return n * U / (1 - n * U)


def dot_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bound on the float32 rounding of every product ``a @ b`` (last axis of ``a`` with the second-to-last of
    ``b``): γ_d · (|a| @ |b|), computed in float64."""
    a, b = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    return gamma(a.shape[-1] + 2) * (a @ b)  # + 2: the scale multiplied in and the keys' centring


def softmax_bound(p: np.ndarray, score_bound: np.ndarray) -> np.ndarray:
    """Bound on the difference of two float32 softmax rows ``p`` (…, T) whose scores differ by at most
    ``score_bound`` (…, T) each: p·(δ_j + Σₗ pₗδₗ) ≤ p·2·max δ, plus γ_T·p for the row's own sum."""
    p = np.asarray(p, np.float64)
    worst = np.asarray(score_bound, np.float64).max(-1, keepdims=True)
    return p * (2 * worst + gamma(p.shape[-1])) + 4 * U * np.finfo(np.float32).tiny


def rows_bound(q: np.ndarray, k: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Bound on two float32 computations of the attention rows p = softmax(q·kᵀ) from the (H, Q, d) queries and
    (H, T, d) keys: the scores' rounding (:func:`dot_bound`) carried through the softmax (:func:`softmax_bound`)."""
    return softmax_bound(p, dot_bound(q, np.swapaxes(k, -1, -2)))


def values_bound(terms: int, magnitude: float) -> float:
    """Bound on two float32 computations of a value reached by summing ``terms`` terms whose absolute values add
    up to at most ``magnitude`` (a matrix product's entry, a norm, a logit)."""
    return gamma(terms) * magnitude


def linear_bound(weight: np.ndarray, bias: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """Bound on two float32 computations of a linear layer's outputs ``x @ weightᵀ + bias`` for (…, D) inputs:
    γ_{D+1} · (|x| @ |weight|ᵀ + |bias|)."""
    w = np.abs(np.asarray(weight, np.float64))
    b = 0.0 if bias is None else np.abs(np.asarray(bias, np.float64))
    return gamma(w.shape[-1] + 1) * (np.abs(np.asarray(x, np.float64)) @ w.T + b)
