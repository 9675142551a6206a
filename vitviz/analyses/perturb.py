"""Pixel perturbation: the second test of a map, beside token dropping, and the report card that puts them together.

Token dropping (:mod:`vitviz.analyses.faithful`) takes patch tokens out of the sequence. Pixel perturbation keeps the
whole sequence and changes the picture instead: the patches a map ranks highest (aligned with the model's own patch
grid, on the model's prepared input x (1, 3, H, W), in its normalised units) are replaced by a baseline, and the
whole picture goes through the model again. Two baselines:

- ``mean``: quantus 0.6.0's ``RegionPerturbation(perturb_baseline="mean")``, exactly: the patches are replaced one
  after the other in the order, each by **one number, the mean over every channel and pixel of the picture as it is
  at that moment** (the patches replaced before it included; quantus's ``batch_baseline_replacement_by_indices`` on
  the current picture, ``get_baseline_value`` with ``batched=True``: no per-channel mean). Each order thus ends on
  its own all-replaced picture (the patches got different numbers on the way), so the end point is scored per order.
- ``road``: the noisy linear imputation of ROAD (Rong et al. 2022) as pytorch-grad-cam 1.5.7's ``NoisyLinearImputer``
  defines it: each removed pixel is the weighted mean of its eight neighbours (1/6 side by side, 1/12 diagonally;
  neighbours outside the picture left out: a pixel's own weight is the sum of the weights of its neighbours inside
  the picture, so at a border or corner the equation is the mean over the neighbours it has), removed or not, solved
  as one linear system per channel, then ``noise`` (0.01 in the input's units) times a standard normal draw added to every
  removed pixel (seeded here). vitviz solves the system by conjugate gradients in torch (the matrix is the graph
  Laplacian of the removed pixels: symmetric and positive definite whenever a pixel is left) instead of scipy's
  sparse LU. With every patch removed the system has no known pixel and every constant picture solves it: vitviz
  uses the picture's own per-channel mean there (plus the noise), the same end for every order.

**The report card's scores** (:class:`Report`): a curve's area is the trapezoid rule over 0…1 removed, on the raw
scores; a map's **gain** is 1 − A_map / A_random, A_random the random orders' mean area: 0 = no faster than random,
1 = the score gone at once, negative = slower than random. It is bounded above by 1 and has no units (a probability
and a cosine compare). When A_random is not above :data:`TINY_AREA` of the whole picture's score (nothing left to
lose at random) the gain is undefined (NaN) and the areas are what the page gives. A map is **better (worse) than
random** only when its area is below (above) every random order's; the ranks order the areas (1 = smallest).

**Slices.** The whole-picture forwards are batched (at most :data:`PICTURES_PER_BATCH` pictures at once) and each
batch is a slice of its own with the model shared (a fused forward with only this thread's own hook, as
:class:`vitviz.analyses.faithful.RowsProbe`); the pictures are made outside the lock.

Shapes: N = gh·gw patches of P×P pixels; x (1, 3, H, W) with H = gh·P, W = gw·P; F points of a curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.analyses import faithful
from vitviz.analyses import maps as made
from vitviz.models import budget, hooks
from vitviz.models.parts import parts_of
from vitviz.models.runner import Forward
from vitviz.specs.registry import ModelSpec

BASELINES = {"mean": "each patch replaced by the mean of the whole picture as it is then (quantus's RegionPerturbation "
                     "'mean' baseline)",
             "road": "each removed pixel filled in from its neighbours with a little noise (ROAD's noisy linear "
                     "imputation)"}
"""The pixel baselines, in words (the view says the one used)."""

PICTURES_PER_BATCH = faithful.TOKENS_PER_BATCH
"""A batch of whole pictures holds at most this many (the same memory as a batch of token subsets)."""

ROAD_NOISE = 0.01
"""pytorch-grad-cam's ``NoisyLinearImputer`` default noise (absolute, in the input's units)."""

ROAD_MACS_PER_PIXEL = 1.05e6
"""ROAD's imputation in the work bound, as multiply-adds per pixel of each imputed picture (it scales with H·W):
three fused forwards of ViT-B/16's shape at 224 px (3 × 1.74e10 / 224²). Measured on two laptop cores: 256–634 ms
per 224 px picture (the review's run, patch 8 and 16) and 85–170 ms in a quiet run, against 235 ms for a ViT-B/16
forward; the bound takes the slowest."""

ROAD_COPIES = 40
"""The ROAD solver's peak memory in float32 copies of its batch of pictures (B·3·H·W·4 bytes each): the levels'
masks and diagonals, the unknowns, residual, direction and preconditioned residual and the V-cycle's temporaries;
measured about 160 MiB for 8 pictures of 224 px, some 35 copies."""

NEIGHBOURS = ((1 / 6, ((-1, 0), (1, 0), (0, -1), (0, 1))), (1 / 12, ((-1, -1), (-1, 1), (1, -1), (1, 1))))
"""ROAD's weights of a pixel's eight neighbours (grad-cam's ``neighbors_weights``): 1/6 side by side, 1/12
diagonally."""


# ---- the pictures ---------------------------------------------------------------------------------------------

def patch_mask(grid: tuple[int, int], patch: int, removed: np.ndarray) -> torch.Tensor:
    """(H, W) bool: True on the pixels of the ``removed`` patch indices of a (gh, gw) grid of ``patch`` px."""
    cells = torch.zeros(grid[0] * grid[1], dtype=torch.bool)
    cells[torch.as_tensor(np.asarray(removed, np.int64), dtype=torch.long)] = True
    return cells.reshape(grid).repeat_interleave(patch, 0).repeat_interleave(patch, 1)


def mean_values(x: torch.Tensor, order: np.ndarray, patch: int, grid: tuple[int, int]) -> np.ndarray:
    """(N,) float64: the number each patch of ``order`` gets under quantus's progressive mean baseline: patch
    ``order[j]`` gets the mean over all channels and pixels of x (1, 3, H, W) with patches ``order[:j]`` already
    replaced by theirs (a running sum, no picture rebuilt)."""
    img = x[0].double()
    per = img.reshape(3, grid[0], patch, grid[1], patch).sum((0, 2, 4)).reshape(-1).numpy()  # (N,) each patch's sum
    size, cell = float(img.numel()), 3.0 * patch * patch
    total, values = float(img.sum()), np.empty(len(order))
    for j, i in enumerate(np.asarray(order)):
        values[j] = total / size
        total += values[j] * cell - per[i]
    return values


def mean_picture(x: torch.Tensor, order: np.ndarray, values: np.ndarray, k: int, patch: int,
                 grid: tuple[int, int]) -> torch.Tensor:
    """(3, H, W): x (1, 3, H, W) with the first ``k`` patches of ``order`` set to their ``values``
    (:func:`mean_values`)."""
    cells = torch.zeros(grid[0] * grid[1], dtype=x.dtype)
    hit = torch.zeros(grid[0] * grid[1], dtype=torch.bool)
    o = torch.as_tensor(np.asarray(order[:k], np.int64))
    cells[o] = torch.as_tensor(values[:k], dtype=x.dtype)
    hit[o] = True
    up = lambda t: t.reshape(grid).repeat_interleave(patch, 0).repeat_interleave(patch, 1)  # noqa: E731
    return torch.where(up(hit)[None], up(cells)[None].expand(3, -1, -1), x[0])


def _neighbours(t: torch.Tensor) -> torch.Tensor:
    """(B, H, W) -> (B, H, W): each pixel's weighted sum of its eight neighbours (:data:`NEIGHBOURS`; outside the
    picture: nothing)."""
    h, w = t.shape[-2:]
    q = torch.nn.functional.pad(t, (1, 1, 1, 1))
    side = q[:, :h, 1:w + 1] + q[:, 2:, 1:w + 1] + q[:, 1:h + 1, :w] + q[:, 1:h + 1, 2:]
    corner = q[:, :h, :w] + q[:, :h, 2:] + q[:, 2:, :w] + q[:, 2:, 2:]
    return side / 6 + corner / 12


ROAD_TOLERANCE = {torch.float32: 1e-6, torch.float64: 1e-10}
"""The conjugate gradients stop when the residual's norm is below this share of the right-hand side's (by the
precision solved in: float32 on the page, about 2.5× faster than float64). Measured against grad-cam's float64
solution: 2–4e-6 in the input's units at patch 8 and 16, 1.5e-5 at patch 14 (the error is the residual times the
system's condition, which grows with the removed regions' size)."""


class NotConverged(RuntimeError):
    """The ROAD solver stopped at ``max_steps`` with a residual above :data:`ROAD_TOLERANCE` (never silent)."""


@dataclass
class _Level:
    """One level of the multigrid: the unknowns' mask m (B, h, w) float (1 = removed) and the diagonal d (1, h, w)."""

    m: torch.Tensor
    d: torch.Tensor

    def apply(self, v: torch.Tensor) -> torch.Tensor:
        """The system's matrix on the unknowns: (d·v − Σ neighbours of the unknowns' v), zero on known pixels."""
        return (self.d * v - _neighbours(v * self.m)) * self.m


def _levels(m: torch.Tensor) -> list[_Level]:
    """The multigrid's levels from the finest mask (B, H, W): each coarser one halves the sides while both are even
    and above 8 pixels; a coarse pixel is unknown only when its four fine pixels are (the domain shrinks, so every
    level's known pixels hold it in)."""
    out = []
    while True:
        h, w = m.shape[-2:]
        out.append(_Level(m, _neighbours(torch.ones(1, h, w, dtype=m.dtype))))
        if h % 2 or w % 2 or min(h, w) <= 8:
            return out
        m = -torch.nn.functional.max_pool2d(-m[:, None], 2)[:, 0]


def _vcycle(levels: list[_Level], r: torch.Tensor, at: int = 0, smooth: int = 2, weight: float = 0.8) -> torch.Tensor:
    """One symmetric V-cycle from zero for the residual r on level ``at``: weighted Jacobi before and after, the
    residual summed over 2×2 pixels to the next level and its correction copied back (restriction = the
    prolongation's transpose); the coarsest level by 8 Jacobi sweeps (30 saved no step of the gradients). A
    symmetric positive definite preconditioner of the conjugate gradients."""
    lv = levels[at]
    steps = 8 if at == len(levels) - 1 else smooth
    e = weight * r / lv.d * lv.m
    for _ in range(steps - 1):
        e = e + weight * (r - lv.apply(e)) / lv.d * lv.m
    if at == len(levels) - 1:
        return e
    down = torch.nn.functional.avg_pool2d((r - lv.apply(e))[:, None], 2)[:, 0] * 4 * levels[at + 1].m
    up = _vcycle(levels, down, at + 1, smooth, weight)
    e = e + up.repeat_interleave(2, -2).repeat_interleave(2, -1) * lv.m
    for _ in range(steps):
        e = e + weight * (r - lv.apply(e)) / lv.d * lv.m
    return e


def road_solve(x: torch.Tensor, missing: torch.Tensor, max_steps: int = 200,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, 3, H, W) in ``dtype``: the noiseless ROAD imputation of pictures x (B, 3, H, W) on the pixels ``missing``
    (B, H, W) bool (the others as in x): for every missing pixel i, w_i·v_i − Σ_{j missing} w_ij·v_j =
    Σ_{j known} w_ij·x_j, with w_ij the neighbour weights and w_i their sum inside the picture (grad-cam's system,
    negated). Solved by conjugate gradients preconditioned by a multigrid V-cycle (:func:`_vcycle`), every picture
    and channel at once, until the residual is :data:`ROAD_TOLERANCE` of the right-hand side (25–31 steps measured
    at 224 px; :class:`NotConverged` when ``max_steps`` pass without it). A picture with no known pixel gets its
    per-channel mean (every constant solves it): vitviz's own choice, grad-cam's system is singular there."""
    b_, c, h, w = x.shape
    x = x.to(dtype)
    m = missing.to(dtype)[:, None].expand(b_, c, h, w).reshape(b_ * c, h, w)  # (BC, H, W) 1 = unknown
    flat = x.reshape(b_ * c, h, w)
    levels = _levels(m)
    top = levels[0]
    rhs = _neighbours(flat * (1 - m)) * m
    v = torch.zeros_like(rhs)
    r = rhs.clone()
    z = _vcycle(levels, r)
    p = z.clone()
    rz = (r * z).sum((1, 2))
    tiny = torch.finfo(dtype).tiny  # a channel with nothing to solve (no pixel removed) divides by it, never by 0
    scale = rhs.square().sum((1, 2)).sqrt().clamp_min(tiny)
    for step in range(max_steps + 1):
        if bool(((r.square().sum((1, 2)).sqrt() / scale) <= ROAD_TOLERANCE[dtype]).all()):
            break
        if step == max_steps:
            worst = float((r.square().sum((1, 2)).sqrt() / scale).max())
            raise NotConverged(f"ROAD's imputation did not converge in {max_steps} steps (relative residual "
                               f"{worst:.1e}, asked {ROAD_TOLERANCE[dtype]:.0e}).")
        ap = top.apply(p)
        alpha = rz / (p * ap).sum((1, 2)).clamp_min(tiny)
        v = v + alpha[:, None, None] * p
        r = r - alpha[:, None, None] * ap
        z = _vcycle(levels, r)
        rz_new = (r * z).sum((1, 2))
        p = z + (rz_new / rz.clamp_min(tiny))[:, None, None] * p
        rz = rz_new
    out = torch.where(m > 0, v, flat).reshape(b_, c, h, w)
    empty = missing.reshape(b_, -1).all(1)
    if bool(empty.any()):
        out[empty] = x[empty].mean((2, 3), keepdim=True).expand(-1, -1, h, w).clone()
    return out


def road_pictures(x: torch.Tensor, masks: torch.Tensor, seed: int, noise: float = ROAD_NOISE) -> torch.Tensor:
    """(B, 3, H, W) float32: x (1, 3, H, W) imputed by ROAD on each of ``masks`` (B, H, W) bool, plus ``noise`` times
    a standard normal draw on the removed pixels: picture b's (3, H, W) draw from a torch generator seeded with
    ``seed + b`` (a picture's noise does not depend on the pictures batched with it)."""
    filled = road_solve(x.expand(len(masks), -1, -1, -1), masks)
    if noise:
        draws = torch.stack([torch.randn(filled.shape[1:], generator=torch.Generator().manual_seed(int(seed) + b),
                                         dtype=filled.dtype) for b in range(len(masks))])
        filled = filled + noise * draws * masks[:, None]
    return filled.to(x.dtype)


# ---- scoring whole pictures ----------------------------------------------------------------------------------

def score_pictures(model: torch.nn.Module, pictures: torch.Tensor, forward: Forward, s: faithful.Scored,
                   prefix: int) -> np.ndarray:
    """(B,) float64 scores of ``pictures`` (B, 3, H, W): one fused forward, the tokens after the final norm read by
    this thread's own hook and scored as token dropping scores its sequences (:func:`faithful.score`)."""
    p = parts_of(model)
    with hooks.capture({"final": (p.norm, "output")}) as seen:
        forward(pictures)
    return faithful.score(p, seen["final"], s.target, s.reference, prefix).numpy()


@dataclass(frozen=True, eq=False)
class PicturesProbe(faithful.SharedSlice):
    """One slice of pixel perturbation: a batch of whole pictures (at most :data:`PICTURES_PER_BATCH`, the same as
    a batch of token subsets) through the model. A fused forward with this thread's own hook only: it changes
    nothing on the module, so it shares the model with other forwards."""

    pictures: torch.Tensor  # (B, 3, H, W)
    scored: faithful.Scored
    prefix: int
    key: str = "pictures"

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> np.ndarray:
        return score_pictures(model, self.pictures, forward, self.scored, self.prefix)


def pixel_curves(run: Callable, x: torch.Tensor, s: faithful.Scored, prefix: int,
                 orders: list[tuple[str, np.ndarray]], points: int, grid: tuple[int, int], patch: int, baseline: str,
                 seed: int = 0) -> tuple[faithful.Curves, int]:
    """Deletion curves (most relevant first) by pixel perturbation of each order at ``points`` shares, on x
    (1, 3, H, W) scored ``s`` (the first point, every order's); ``run`` sends each batch of pictures to the model as
    a slice (:class:`PicturesProbe`). The all-removed end: per order for ``mean``, one picture for ``road``; ROAD's
    noise of the j-th picture made (orders in turn, each's points in turn, then the end) is seeded ``seed + j``.
    Returns the curves and the number of whole-picture forwards."""
    if baseline not in BASELINES:
        raise ValueError(f"`baseline` must be one of {', '.join(BASELINES)}, not {baseline!r}.")
    n = grid[0] * grid[1]
    fr = faithful.fractions(points)
    counts = [int(round(f * n)) for f in fr]
    jobs: list[tuple[str, int, np.ndarray]] = []  # (order, point, the patches removed)
    for name, order in orders:
        o = np.asarray(order)
        for i, k in enumerate(counts):
            if 0 < k < n or (k == n and baseline == "mean"):
                jobs.append((name, i, o[:k]))
    if baseline == "road" and n in counts:
        jobs.append(("", counts.index(n), np.arange(n)))
    means = {name: mean_values(x, np.asarray(o), patch, grid) for name, o in orders} if baseline == "mean" else {}
    got: dict[tuple[str, int], float] = {}
    for start in range(0, len(jobs), PICTURES_PER_BATCH):
        batch = jobs[start:start + PICTURES_PER_BATCH]
        if baseline == "mean":
            pics = torch.stack([mean_picture(x, dict(orders)[name], means[name], len(removed), patch, grid)
                                for name, _, removed in batch])
        else:
            masks = torch.stack([patch_mask(grid, patch, removed) for _, _, removed in batch])
            pics = road_pictures(x, masks, seed + start)
        for (name, i, _), v in zip(batch, run(PicturesProbe(pics, s, prefix))):
            got[(name, i)] = float(v)
    deletion = {}
    for name, _ in orders:
        deletion[name] = np.array([s.full if k == 0 else got[("" if (k == n and baseline == "road") else name, i)]
                                   for i, k in enumerate(counts)])
    return faithful.Curves(fr, deletion, {}, s.full, s.target, 0, True), len(jobs)


# ---- areas, gains, ranks ---------------------------------------------------------------------------------------

TINY_AREA = 1e-6
"""A gain is defined only when the random orders' mean area is above this share of the whole picture's score
(|score|): below it nothing is left to lose at random and 1 − A_map / A_random would divide by about zero."""


def normalised(c: faithful.Curves) -> faithful.Curves:
    """The deletion curves divided by the whole picture's score (each starts at 1; drawn only when that score is
    positive)."""
    return faithful.Curves(c.fractions, {k: v / c.full for k, v in c.deletion.items()}, {}, 1.0, c.target,
                           c.tokens, c.ends)


def areas(c: faithful.Curves) -> dict[str, float]:
    """Every order's deletion area on the raw curves ``c`` (trapezoid rule; without the end a model cannot score)."""
    return {k: c.area("deletion", k) for k in c.deletion}


def gains(c: faithful.Curves, names: list[str], randoms: list[str]) -> dict[str, float]:
    """Each map's gain 1 − A_map / A_random on raw deletion curves ``c`` (A_random: the random orders' mean area):
    0 = as random, 1 = the score gone at once, negative = slower than random; NaN for every map when A_random is
    not above :data:`TINY_AREA` × |the whole picture's score|."""
    a = areas(c)
    floor = float(np.mean([a[r] for r in randoms]))
    if not floor > TINY_AREA * abs(c.full):
        return {k: float("nan") for k in names}
    return {k: 1.0 - a[k] / floor for k in names}


def verdicts(c: faithful.Curves, names: list[str], randoms: list[str]) -> dict[str, str]:
    """Each map against the random orders' spread: "better" when its area is below every random order's, "worse"
    when above every one's, else "within" (inside the random orders' range: not told apart from chance)."""
    a = areas(c)
    low, high = min(a[r] for r in randoms), max(a[r] for r in randoms)
    return {k: "better" if a[k] < low else "worse" if a[k] > high else "within" for k in names}


def ranks(values: dict[str, float]) -> dict[str, float]:
    """1 = the smallest area (the fastest fall); tied values share the mean of their places."""
    v = np.array(list(values.values()))
    return {k: int((v < x).sum()) + (int((v == x).sum()) + 1) / 2 for k, x in values.items()}


# ---- the report card -----------------------------------------------------------------------------------------

REGIONS = 3
"""Occlusion's regions per side on the report card (about 3×3, as the deletion view's default)."""


@dataclass
class Report:
    """The report card of one picture: every map under token dropping and pixel perturbation.

    Attributes:
        maps: name -> (N,) the map (occlusion among them); names: the maps, in order; randoms: the random orders.
        tests: test name ("token dropping", "pixels (mean)") -> its raw deletion curves (:class:`faithful.Curves`).
        scaled: the same, divided by the whole picture's score (for the figure); areas: test -> order -> raw area
        (the random orders' too); gains: test -> map -> 1 − A_map / A_random; ranks: test -> map -> place by area
        (1 = smallest); verdicts: test -> map -> "better" / "worse" / "within" the random orders' range.
        forwards: whole-picture forwards (fused) of the pixel test; tokens: tokens of the token test and occlusion.
        left_out: name -> why, for a map this model could not have (:attr:`vitviz.analyses.maps.Maps.left_out`).
    """

    maps: dict[str, np.ndarray]
    names: list[str]
    randoms: list[str]
    tests: dict[str, faithful.Curves]
    scaled: dict[str, faithful.Curves] = field(default_factory=dict)
    gains: dict[str, dict[str, float]] = field(default_factory=dict)
    ranks: dict[str, dict[str, float]] = field(default_factory=dict)
    areas: dict[str, dict[str, float]] = field(default_factory=dict)
    verdicts: dict[str, dict[str, str]] = field(default_factory=dict)
    forwards: int = 0
    tokens: int = 0
    occlusion_regions: int = 0
    left_out: dict[str, str] = field(default_factory=dict)  # name -> why, for a map the model could not have


def scored_report(maps: dict[str, np.ndarray], randoms: list[str], tests: dict[str, faithful.Curves],
                  forwards: int = 0, tokens: int = 0, regions: int = 0) -> Report:
    """A :class:`Report` with its normalised curves, areas, gains, ranks and verdicts computed from raw ``tests``."""
    names = list(maps)
    scaled = {t: normalised(c) for t, c in tests.items()}
    a = {t: areas(c) for t, c in tests.items()}
    return Report(maps, names, randoms, tests, scaled, {t: gains(c, names, randoms) for t, c in tests.items()},
                  {t: ranks({k: a[t][k] for k in names}) for t in tests}, a,
                  {t: verdicts(c, names, randoms) for t, c in tests.items()}, forwards, tokens, regions)


def test_name(baseline: str) -> str:
    return f"pixels ({baseline})"


TOKENS = "token dropping"


@dataclass(frozen=True)
class ReportProbe:
    """The report card: the maps (one eager forward and backwards, the model alone), occlusion, then every order's
    token-dropping deletion curve and pixel-perturbation deletion curve, each batch a slice with the model shared."""

    grid: tuple[int, int]
    prefix: int
    patch: int
    points: int = 6
    seeds: int = 3
    baseline: str = "mean"
    rank: int = 1
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("report", self.grid, self.points, self.seeds, self.baseline, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        pixels = (tokens - self.prefix) * self.patch ** 2  # H·W
        road = PICTURES_PER_BATCH * 3 * pixels * 4 * ROAD_COPIES if self.baseline == "road" else 0
        return max(faithful._eager_estimate(spec, tokens),
                   PICTURES_PER_BATCH * budget.forward_bytes(spec, tokens)) + road + PICTURES_PER_BATCH * 3 * pixels * 4

    def staged(self, x: torch.Tensor, run: Callable) -> Report:
        p, z, s, maps, slices, occ, randoms, orders = faithful.maps_and_orders(run, self.prefix, self.rank, self.grid,
                                                                               REGIONS, self.seeds)
        tokens = faithful.curves(p, z, self.prefix, s, orders, self.points, ("deletion",), slices)
        pixels, forwards = pixel_curves(run, x, s, self.prefix, orders, self.points, self.grid, self.patch,
                                        self.baseline)
        passes = made.forwards_of(z.shape[-1], z.shape[1], s.target is not None)  # as maps.maps_forwards counts
        r = scored_report(maps, randoms, {TOKENS: tokens, test_name(self.baseline): pixels}, forwards,
                          passes * z.shape[1] + occ.tokens + tokens.tokens, occ.count)
        r.left_out = dict(maps.left_out)
        return r

    def nbytes(self, r: Report) -> int:
        return sum(v.nbytes for v in r.maps.values()) + 64 * len(r.names) * self.points * 4


# ---- its cost, from the settings alone --------------------------------------------------------------------------

def planned_macs(spec: ModelSpec, grid: tuple[int, int], maps: int, points: int, seeds: int, baseline: str) -> int:
    """Multiply-adds of a whole :class:`ReportProbe` from its settings: the maps' stage
    (:func:`vitviz.analyses.maps.maps_forwards`), occlusion and the token curves (:func:`faithful.planned_macs`,
    occlusion one of the orders beside the ``maps``), the pixel curves (one whole forward per picture,
    :func:`planned_pictures`) and, for ``road``, each picture's imputation (:data:`ROAD_MACS_PER_PIXEL` × H·W)."""
    n = grid[0] * grid[1]
    pictures = planned_pictures(n, maps + 1, points, seeds, baseline)
    impute = pictures * ROAD_MACS_PER_PIXEL * n * spec.patch ** 2 if baseline == "road" else 0
    return int(faithful.planned_macs(spec, grid, maps + 1, points, seeds, REGIONS, ("deletion",))
               + pictures * faithful.sequence_macs(spec, n + spec.prefix) + impute)


def planned_pictures(n: int, orders: int, points: int, seeds: int, baseline: str) -> int:
    """Whole pictures the pixel curves send through the model: each order's inner points, and the end per order
    (``mean``) or once (``road``)."""
    inner = len(faithful.inner_counts(n, points))
    return (orders + seeds) * inner + ((orders + seeds) if baseline == "mean" else 1)
