"""What the data-efficiency sweep's accuracies say: Wilson intervals and, per training-set size, who leads.

An accuracy p measured on n scenes is uncertain; the 95% Wilson score interval is the range of true accuracies the
measurement is compatible with. Unlike the textbook normal interval it stays inside [0, 1] and is not of zero width
at 100% (999 of 1,000 right is not proof of a perfect model). It is not symmetric around p near 0 or 1, so it is
kept as two bounds, never as p ± a half-width.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile: two-sided 95% intervals."""


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """(low, high) of the Wilson score interval of an accuracy ``p`` measured on ``n`` scenes."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if p <= 0 else max(0.0, min(p, centre - half))  # exact at the ends (rounding would leave 1 - 2e-16)
    hi = 1.0 if p >= 1 else min(1.0, max(p, centre + half))
    return lo, hi


def wilson_half_width(p: float, n: int, z: float = Z95) -> float:
    """Half the width of :func:`wilson`'s interval (for the uncertainty of a difference of two accuracies)."""
    lo, hi = wilson(p, n, z)
    return (hi - lo) / 2


def difference_noise(a: float, b: float, n: int) -> float:
    """How far apart two accuracies measured on ``n`` scenes each may be by chance alone (95%): the two
    intervals' half-widths added in quadrature (the scenes of the two models are drawn independently)."""
    return math.hypot(wilson_half_width(a, n), wilson_half_width(b, n))


def leads(res: dict) -> list[dict]:
    """Per training-set size: both accuracies on new scenes, their difference (ViT − CNN), the noise of that
    difference, and who leads by more than the noise ("CNN", "ViT" or "neither")."""
    n = res["test_scenes"]
    by = {(r["model"], r["scenes"]): r for r in res["runs"]}
    rows = []
    for size in sorted({r["scenes"] for r in res["runs"]}):
        c, v = by[("cnn", size)]["test_accuracy"], by[("vit", size)]["test_accuracy"]
        noise = difference_noise(c, v, n)
        lead = "ViT" if v - c > noise else "CNN" if c - v > noise else "neither"
        rows.append(dict(scenes=size, cnn=c, vit=v, gap=v - c, noise=noise, leads=lead))
    return rows
