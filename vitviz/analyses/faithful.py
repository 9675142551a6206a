"""Can we trust the map? Tests of whether a map's patches are the ones the prediction needs.

A map (the class token's attention, rollout, relevance…) ranks the patches. The tests here take patch tokens out of
the model's sequence in the map's order and watch the prediction:

- **Token dropping** (:func:`drop_tokens`): the model runs on a shorter sequence: its prefix tokens ([CLS],
  registers) and the patch tokens kept, each with its own position embedding (the stream entering block 1 is
  recorded once, then subsets of it go through the blocks, the final norm and the head). No grey patch is pasted
  in, so the picture stays in its own distribution; the model still sees a sequence it was never trained on.
- **Deletion and insertion curves** (:func:`curves`): remove the most relevant patches first (the probability of
  the class should fall fast for a faithful map: low area under the curve), or start from the prefix tokens alone
  and add the most relevant first (it should rise fast: high area), at 0, 10, …, 100% of the patches. Every
  order's sequences at one point are equally long, so they go through the model together: a curve costs about
  4.5 forwards' worth of tokens, not one forward per point.
- **Occlusion** (:func:`occlusion`): the drop in the class's probability when one region of patches is taken out,
  a reference that asks the model itself (one sequence per region, all in one batch).
- **Randomised weights**: in :mod:`vitviz.analyses.randomise`.

For a model without classes (DINO), the score is the cosine similarity of what its head would read (the final
[CLS]) to the whole picture's, and the views say so. A head that reads the patch tokens themselves (their mean, as
timm's ``global_pool="avg"`` and DINOv2's classifiers do beside [CLS]) reads nothing once every patch is out, so
such a model's curves have no end point there (:func:`reads_prefix_alone`): it is left out of the curve and of its
area, and the views say so.

**Slices.** A test runs in stages, each its own turn with the model's lock (:meth:`Runner.run`'s ``staged``): the
maps' one eager forward and backward with the model alone (it switches the model's attention path), then every
batch of shorter sequences as a slice of its own with the lock shared (token dropping calls the blocks as they
are: no hook, no switch, nothing on the module changes), so other students' forwards on the same model run beside
it and between its slices. The randomisation check copies the model (alone, briefly) and runs the copy outside the
lock: the shared model is never changed, nor waited on.

Shapes: T = prefix + N tokens of width D; B sequences in a batch; K tokens kept; F points of a curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.analyses.maps import class_maps, forwards_of, maps_bytes, maps_forwards
from vitviz.models.parts import Parts, parts_of
from vitviz.models import budget, hooks
from vitviz.models.runner import Forward, Runner
from vitviz.specs.registry import ModelSpec

TOKENS_PER_BATCH = 8
"""A batch of subsets holds at most this many full sequences' worth of tokens (memory, counted by the budget)."""


# ---- running the model on a subset of its tokens ------------------------------------------------------------

def _block(b: torch.nn.Module, z: torch.Tensor) -> torch.Tensor:
    out = b(z)
    return out[0] if isinstance(out, tuple) else out


def stream_in(model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(the (1, T, D) stream entering block 1: patches embedded, prefix tokens put in front, positions added;
    the model's own logits (1, C) or None), from one forward of ``x``."""
    p = parts_of(model)
    with hooks.capture({"in": (p.blocks[0], "input")}) as seen:
        logits, _ = forward(x)
    z = seen["in"].detach()
    return z.reshape(z.shape[0], -1, z.shape[-1])[:1], logits


def through(p: Parts, z: torch.Tensor) -> torch.Tensor:
    """(B, K, D) tokens through every block and the final norm -> (B, K, D) (what the head reads from)."""
    for b in p.blocks:
        z = _block(b, z)
    return p.norm(z)


def reads_prefix_alone(p: Parts) -> bool:
    """Whether a score is defined with no patch token left: the head reads prefix tokens only ([CLS], the
    distillation token, an attention pool over every token) or, without a head, the final [CLS] is compared. A
    head that pools the patch tokens (their mean or maximum, or [CLS] beside their mean: DINOv2's classifiers)
    would read an empty set there (a mean of nothing is NaN)."""
    if p.readout is None:
        return p.tracks == "[CLS]"
    return p.pool in ("token", "distilled", "map")


def tracked(p: Parts, final: torch.Tensor, prefix: int) -> torch.Tensor:
    """(B, D): what the head reads (or would read) from (B, K, D) normalised tokens: [CLS], or the patches' mean."""
    return final[:, 0] if p.tracks == "[CLS]" else final[:, prefix:].mean(1)


def score(p: Parts, final: torch.Tensor, target: int | None, reference: torch.Tensor | None,
          prefix: int) -> torch.Tensor:
    """(B,) float64: the probability of class ``target`` read from (B, K, D) normalised tokens by the model's own
    readout; without a head, the cosine of what the head would read with ``reference`` (D,), the whole picture's."""
    if p.readout is not None and target is not None:
        return torch.softmax(p.readout(final).double(), -1)[:, target]
    return torch.nn.functional.cosine_similarity(tracked(p, final, prefix).double(), reference.double()[None], dim=-1)


def drop_tokens(p: Parts, z: torch.Tensor, prefix: int, kept: torch.Tensor, target: int | None,
                reference: torch.Tensor | None) -> torch.Tensor:
    """(B,) scores of the model run on ``kept`` (B, K) patch indices of the stream ``z`` (1, T, D): each sequence
    is the ``prefix`` tokens and the kept patch tokens in their own order, their position embeddings already in."""
    b, k = kept.shape
    index = torch.cat([torch.arange(prefix).expand(b, prefix), kept + prefix], 1)  # (B, prefix + K)
    seqs = z[0][index]  # (B, prefix + K, D)
    return score(p, through(p, seqs), target, reference, prefix)


@dataclass
class Scored:
    """What one forward of the whole picture gives the tests: its score, the class, the reference feature."""

    full: float
    target: int | None
    reference: torch.Tensor | None
    probs: np.ndarray | None


def _scored(p: Parts, z: torch.Tensor, logits: torch.Tensor | None, rank: int, prefix: int) -> Scored:
    if p.readout is None or logits is None:
        return Scored(1.0, None, tracked(p, through(p, z), prefix)[0], None)
    probs = torch.softmax(logits.detach().double().reshape(-1, logits.shape[-1])[0], -1)
    order = torch.argsort(probs, descending=True, stable=True)
    target = int(order[min(max(int(rank), 1), len(probs)) - 1])
    return Scored(float(probs[target]), target, None, probs.numpy())


# ---- curves ------------------------------------------------------------------------------------------------------

def fractions(points: int) -> np.ndarray:
    """(F,) the shares of the patches at which a curve is read: 0, 1/(F-1), …, 1."""
    return np.linspace(0.0, 1.0, int(points))


def inner_counts(n: int, points: int) -> list[int]:
    """The patch counts a curve of ``points`` shares over ``n`` patches reads between its ends (round(f·n) with
    0 < k < n): the ones that need a sequence or picture of their own."""
    return [k for k in (int(round(f * n)) for f in fractions(points)) if 0 < k < n]


def auc(x: np.ndarray, y: np.ndarray, end: int | None = None) -> float:
    """The area under the curve ``y`` (F,) over ``x`` (F,) by the trapezoid rule (x from 0 to 1). ``end``: the index
    of the one end point a model may have no score for (0 or F - 1, see :attr:`Curves.ends`): when it is NaN the
    area covers the rest of the range. Any other point that is not finite raises ``ValueError`` (a score that went
    wrong is never left out quietly)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    keep = np.ones(len(y), bool)
    if end is not None and np.isnan(y[end]):
        keep[end] = False
    if not np.all(np.isfinite(y[keep])):
        bad = [int(i) for i in np.flatnonzero(keep & ~np.isfinite(y))]
        raise ValueError(f"The model's score is not a finite number at the curve's points {bad} (of 0 to "
                         f"{len(y) - 1}); only the end point with no patch left may be undefined.")
    x, y = x[keep], y[keep]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


@dataclass
class Curves:
    """Deletion and insertion curves of several orders of the patches.

    Attributes:
        fractions: (F,) share of the patches removed (deletion) or added (insertion).
        deletion, insertion: order name -> (F,) score at each point (empty for a kind not asked for).
        full: the score of the whole picture (deletion's first point, insertion's last).
        target: the class scored (None: a model without classes, scored by cosine similarity).
        tokens: how many tokens went through the model (cost, in tokens).
        ends: whether the point with no patch left (deletion's last, insertion's first) is defined; when not
            (:func:`reads_prefix_alone`) it is NaN and every area covers the other points only.
    """

    fractions: np.ndarray
    deletion: dict[str, np.ndarray]
    insertion: dict[str, np.ndarray]
    full: float
    target: int | None
    tokens: int = 0
    ends: bool = True

    def area(self, kind: str, name: str) -> float:
        end = None if self.ends else -1 if kind == "deletion" else 0  # no patch left: deletion's last, insertion's 1st
        return auc(self.fractions, (self.deletion if kind == "deletion" else self.insertion)[name], end)


def _batched(n_tokens_full: int, rows: list[tuple[str, str, int, np.ndarray]]) -> list[list]:
    """Group (kind, order, point, kept patches) rows of one length into batches of at most
    :data:`TOKENS_PER_BATCH` full sequences' worth of tokens."""
    by_len: dict[int, list] = {}
    for row in rows:
        by_len.setdefault(len(row[3]), []).append(row)
    batches = []
    for k, group in sorted(by_len.items()):
        per = max(1, TOKENS_PER_BATCH * n_tokens_full // max(k, 1))
        batches += [group[i:i + per] for i in range(0, len(group), per)]
    return batches


Scorer = Callable[[list], tuple[dict, int]]
"""(kind, name, point, kept patches) rows -> (each row's score by ``row[:3]``, the tokens that went through)."""


def run_rows(p: Parts, z: torch.Tensor, prefix: int, rows: list, s: "Scored") -> tuple[dict, int]:
    """Every (kind, name, point, kept patches) row's score, batched by length; and the tokens that went through."""
    got, tokens = {}, 0
    with torch.no_grad():
        for batch in _batched(z.shape[1], rows):
            kept = torch.as_tensor(np.stack([r[3] for r in batch]), dtype=torch.long)
            values = drop_tokens(p, z, prefix, kept, s.target, s.reference)
            tokens += kept.numel() + prefix * len(batch)
            got |= {r[:3]: float(v) for r, v in zip(batch, values)}
    return got, tokens


class SharedSlice:
    """What every slice of a test shares: no gradients, its own size, the model shared with other forwards (it
    changes nothing on the module), a batch of :data:`TOKENS_PER_BATCH` forwards reserved, nothing kept."""

    grad = False
    own_size = True
    shares = True

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return TOKENS_PER_BATCH * budget.forward_bytes(spec, tokens)

    def nbytes(self, got: object) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class RowsProbe(SharedSlice):
    """One slice of a test: one batch of rows (:func:`_batched`) through the blocks, from the stream ``z``
    (1, T, D) recorded by an earlier stage. Token dropping calls the blocks as they are (no hook, no switch of the
    attention path): it changes nothing on the module, so it shares the model with other requests' forwards."""

    z: torch.Tensor
    prefix: int
    rows: tuple
    scored: "Scored"
    key: str = "rows"

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> tuple[dict, int]:
        return run_rows(parts_of(model), self.z, self.prefix, list(self.rows), self.scored)


def in_slices(run: Callable, z: torch.Tensor, prefix: int, s: "Scored") -> Scorer:
    """A :data:`Scorer` that sends each batch of rows to the model as a slice of its own (``run``: the runner's
    stage runner), so the model's lock is given back between batches."""
    def score(rows: list) -> tuple[dict, int]:
        got, tokens = {}, 0
        for batch in _batched(z.shape[1], rows):
            g, t = run(RowsProbe(z, prefix, tuple(batch), s))
            got |= g
            tokens += t
        return got, tokens
    return score


def curves(p: Parts, z: torch.Tensor, prefix: int, s: "Scored", orders: list[tuple[str, np.ndarray]],
           points: int, kinds: tuple[str, ...], score_rows: Scorer | None = None) -> Curves:
    """Deletion and/or insertion (``kinds``) curves of each order (the patches, most relevant first) at ``points``
    shares, from the stream ``z`` (1, T, D) of the whole picture scored ``s``; ``score_rows`` runs the subsets
    (by default all here, at once; :func:`in_slices`: each batch its own turn with the model). The point with
    no patch left is NaN for a head that reads only patch tokens (:func:`reads_prefix_alone`)."""
    n = z.shape[1] - prefix
    fr = fractions(points)
    counts = [int(round(f * n)) for f in fr]
    rows = []
    for name, order in orders:
        o = np.asarray(order)
        for i, k in enumerate(counts):
            if 0 < k < n:  # the ends are the same for every order: the whole picture, and the prefix alone
                if "deletion" in kinds:
                    rows.append(("deletion", name, i, np.sort(o[k:])))
                if "insertion" in kinds:
                    rows.append(("insertion", name, i, np.sort(o[:k])))
    ends = reads_prefix_alone(p)
    if ends:  # the prefix tokens alone: the same for every order
        rows.append(("empty", "", 0, np.zeros(0, np.int64)))
    got, tokens = (score_rows or (lambda r: run_rows(p, z, prefix, r, s)))(rows)
    empty = got[("empty", "", 0)] if ends else float("nan")
    deletion, insertion = {}, {}
    for name, _ in orders:
        if "deletion" in kinds:
            deletion[name] = np.array([s.full if k == 0 else empty if k == n else got[("deletion", name, i)]
                                       for i, k in enumerate(counts)])
        if "insertion" in kinds:
            insertion[name] = np.array([empty if k == 0 else s.full if k == n else got[("insertion", name, i)]
                                        for i, k in enumerate(counts)])
    return Curves(fr, deletion, insertion, s.full, s.target, tokens, ends)


# ---- the maps, from one forward (and one backward) ----------------------------------------------------------

class MapSet(dict):
    """name -> (N,) float64: the maps a test ranks the patches by, those :func:`class_maps` made; ``left_out``:
    name -> why, for a map of :data:`vitviz.analyses.maps.NAMES` it could not make (in its own words)."""

    def __init__(self, maps: dict[str, np.ndarray], left_out: dict[str, str]) -> None:
        super().__init__(maps)
        self.left_out = dict(left_out)


def maps_and_stream(model: torch.nn.Module, x: torch.Tensor, forward: Forward, prefix: int,
                    rank: int) -> tuple[Parts, torch.Tensor, "Scored", MapSet]:
    """The tests' first stage: every map of :func:`vitviz.analyses.maps.class_maps` (one eager forward and, with
    classes, the backwards the class maps need) for the class at ``rank`` of the top 5, the stream entering block 1
    (1, T, D), the whole picture's score for that class, and the maps made (with why any is left out)."""
    p = parts_of(model)
    m = class_maps(model, x, forward, prefix, rank=rank)
    with torch.no_grad():
        s = _scored(p, m.stream, m.logits, rank, prefix)
    return p, m.stream, s, MapSet(m.maps, m.left_out)


@dataclass(frozen=True)
class MapsProbe:
    """A test's first stage: :func:`maps_and_stream` (one eager forward and, with classes, one backward), with the
    model alone (its attention path is switched for this forward)."""

    prefix: int
    rank: int = 1
    key: str = "maps"
    grad: bool = True
    own_size: bool = True

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return maps_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> tuple:
        return maps_and_stream(model, x, forward, self.prefix, self.rank)

    def nbytes(self, got: tuple) -> int:
        return 0


def _eager_estimate(spec: ModelSpec, tokens: int) -> int:
    """The eager forward and backward of the maps, or a batch of subsets, whichever is larger."""
    return max(maps_bytes(spec, tokens), TOKENS_PER_BATCH * budget.forward_bytes(spec, tokens))


MAX_TEST_MACS = 1.1e13
"""The most multiply-adds one request's test may send through the model (:func:`planned_macs`; the heaviest offered
settings: both curves, 21 points, 10 seeds, 8 regions per side). Those pass on a ViT-S/8 and a ViT-B/16 at 224 px
on a square picture (6.5e12 each, with the five maps; DINO ViT-S/8's took 127 s on two laptop cores with three) and
on a 3:2 photo, which a model without classes sees whole (DINO ViT-S/8's 28×42 patches: 1.06e13, some three and a
half minutes; DINO ViT-B/16's 14×21: 8.2e12); a 2:1 picture on DINO ViT-S/8 (28×56: 1.54e13) passes with one kind
of curves (9.5e12), and a ViT-B/8 only with lighter settings (2.3e13 square). The bound caps one request's total;
what keeps other students' waits short is that the test runs in slices (:meth:`TestProbe.staged`), however long it
is."""


def sequence_macs(spec: ModelSpec, tokens: int) -> int:
    """Multiply-adds of one sequence of ``tokens`` through ``spec``'s blocks: per block 12·T·D² (q, k, v, the
    output projection and an MLP four times as wide) and 2·T²·D (the scores and the weighted sum)."""
    return spec.depth * (12 * tokens * spec.dim ** 2 + 2 * tokens ** 2 * spec.dim)


def planned_lengths(grid: tuple[int, int], maps: int, points: int, seeds: int, per_side: int,
                 kinds: tuple[str, ...]) -> list[int]:
    """The patch count of every sequence a :class:`TestProbe` sends through the blocks after its maps (occlusion's
    regions, then each of ``maps`` + ``seeds`` orders' points; the prefix alone as 0), from the settings alone."""
    n = grid[0] * grid[1]
    region = regions(grid, per_side)
    lengths = [n - int(c) for c in np.bincount(region)]
    inner = inner_counts(n, points)
    for _ in range(maps + seeds):
        lengths += [n - k for k in inner] * ("deletion" in kinds) + inner * ("insertion" in kinds)
    return lengths + [0]


def planned_macs(spec: ModelSpec, grid: tuple[int, int], maps: int, points: int, seeds: int, per_side: int,
              kinds: tuple[str, ...]) -> int:
    """Multiply-adds of a whole :class:`TestProbe` (its maps counted as
    :func:`~vitviz.analyses.maps.maps_forwards` forwards)."""
    n, prefix = grid[0] * grid[1], spec.prefix
    return (maps_forwards(spec, n + prefix) * sequence_macs(spec, n + prefix)
            + sum(sequence_macs(spec, k + prefix) for k in planned_lengths(grid, maps, points, seeds, per_side, kinds)))


def maps_and_orders(run: Callable, prefix: int, rank: int, grid: tuple[int, int], per_side: int,
                    seeds: int) -> tuple:
    """The first stages of a test of the maps (the deletion view's and the report card's): the maps (one eager
    forward and backward, the model alone), occlusion on ``per_side``² regions in slices, and every order: the maps',
    occlusion's (ties in raster order, :func:`order_of`) and ``seeds`` random orders'. Returns (parts, stream z
    (1, T, D), scored, maps with occlusion, the slices' scorer, the occlusion, the random orders' names, the orders
    as (name, (N,) patch indices))."""
    p, z, s, maps = run(MapsProbe(prefix, rank))
    slices = in_slices(run, z, prefix, s)
    occ = occlusion(p, z, prefix, s, grid, per_side, slices)
    maps["occlusion"] = occ.drop
    n = z.shape[1] - prefix
    randoms = [f"random {i + 1}" for i in range(seeds)]
    orders = [(k, np.asarray(order_of(v))) for k, v in maps.items()]
    orders += [(r, np.asarray(random_order(n, i))) for i, r in enumerate(randoms)]
    return p, z, s, maps, slices, occ, randoms, orders


@dataclass
class Tested:
    """What the deletion view shows: the maps, the occlusion drop, the curves of every order."""

    maps: dict[str, np.ndarray]
    occlusion: "Occlusion"
    curves: Curves
    orders: list[str]
    randoms: list[str]
    tokens: int = 0
    left_out: dict[str, str] = field(default_factory=dict)  # name -> why, for a map the model could not have


@dataclass(frozen=True)
class TestProbe:
    """The deletion view: the maps from one eager forward and backward (the model alone), occlusion, then every
    order's curves (the maps', occlusion's and ``seeds`` random orders'), the subsets batched by length and each
    batch a slice of its own with the model shared (:meth:`staged`)."""

    grid: tuple[int, int]
    prefix: int
    points: int = 11
    seeds: int = 3
    regions: int = 3
    kinds: tuple[str, ...] = ("deletion", "insertion")
    rank: int = 1
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("tested", self.grid, self.points, self.seeds, self.regions, self.kinds, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return _eager_estimate(spec, tokens)

    def staged(self, x: torch.Tensor, run: Callable) -> Tested:
        p, z, s, maps, slices, occ, randoms, orders = maps_and_orders(run, self.prefix, self.rank, self.grid,
                                                                      self.regions, self.seeds)
        c = curves(p, z, self.prefix, s, orders, self.points, self.kinds, slices)
        passes = forwards_of(z.shape[-1], z.shape[1], s.target is not None)  # the maps' (maps.maps_forwards)
        tokens = passes * z.shape[1] + occ.tokens + c.tokens  # the maps' passes, occlusion, the curves
        return Tested(maps, occ, c, list(maps), randoms, tokens, maps.left_out)

    def nbytes(self, t: Tested) -> int:
        return sum(v.nbytes for v in (*t.maps.values(), *t.curves.deletion.values(), *t.curves.insertion.values()))


# ---- occlusion -------------------------------------------------------------------------------------------------

def regions(grid: tuple[int, int], per_side: int) -> np.ndarray:
    """(N,) the region of each patch when a (gh, gw) grid is cut into about ``per_side`` × ``per_side`` blocks of
    whole patches (fewer where the grid has fewer patches)."""
    gh, gw = grid
    rows = np.minimum(np.arange(gh) * min(per_side, gh) // gh, per_side - 1)
    cols = np.minimum(np.arange(gw) * min(per_side, gw) // gw, per_side - 1)
    return (rows[:, None] * min(per_side, gw) + cols[None, :]).reshape(-1)


@dataclass
class Occlusion:
    """The score's drop when each region of patches is left out, on every patch of the region.

    Attributes:
        drop: (N,) full score minus the score without the patch's region (larger: the model needed it more).
        regions: (N,) each patch's region; count: how many regions; tokens: cost in tokens.
    """

    drop: np.ndarray
    regions: np.ndarray
    count: int
    full: float
    tokens: int = 0


def occlusion(p: Parts, z: torch.Tensor, prefix: int, s: "Scored", grid: tuple[int, int],
              per_side: int, score_rows: Scorer | None = None) -> Occlusion:
    """One sequence per region of about ``per_side`` × ``per_side`` patches, each without its region (run by
    ``score_rows``, as for :func:`curves`)."""
    region = regions(grid, per_side)
    count = int(region.max()) + 1
    rows = [("occlusion", "", r, np.flatnonzero(region != r)) for r in range(count)]
    got, tokens = (score_rows or (lambda r: run_rows(p, z, prefix, r, s)))(rows)
    drop = np.array([s.full - got[("occlusion", "", int(r))] for r in region])
    return Occlusion(drop, region, count, s.full, tokens)


@dataclass(frozen=True)
class OcclusionProbe:
    """Occlusion on its own: one forward of the whole picture, then one sequence per region left out."""

    grid: tuple[int, int]
    per_side: int
    prefix: int
    rank: int = 1
    grad: bool = False
    own_size: bool = True
    shares: bool = True  # a fused forward with this thread's own hook, then token dropping: nothing changes

    @property
    def key(self) -> tuple:
        return ("occlusion", self.grid, self.per_side, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return TOKENS_PER_BATCH * budget.forward_bytes(spec, tokens) + budget.forward_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> Occlusion:
        p = parts_of(model)
        z, logits = stream_in(model, x, forward)
        s = _scored(p, z, logits, self.rank, self.prefix)
        return occlusion(p, z, self.prefix, s, self.grid, self.per_side)

    def nbytes(self, o: Occlusion) -> int:
        return o.drop.nbytes + o.regions.nbytes


@dataclass(frozen=True)
class CurvesProbe:
    """Curves of given orders on their own: one forward of the whole picture, then the subsets."""

    orders: tuple[tuple[str, tuple[int, ...]], ...]  # (name, the patches, most relevant first)
    points: int
    prefix: int
    rank: int = 1
    kinds: tuple[str, ...] = ("deletion", "insertion")
    grad: bool = False
    own_size: bool = True
    shares: bool = True  # a fused forward with this thread's own hook, then token dropping: nothing changes

    @property
    def key(self) -> tuple:
        return ("curves", self.orders, self.points, self.rank, self.kinds)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return TOKENS_PER_BATCH * budget.forward_bytes(spec, tokens) + budget.forward_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> Curves:
        p = parts_of(model)
        z, logits = stream_in(model, x, forward)
        s = _scored(p, z, logits, self.rank, self.prefix)
        c = curves(p, z, self.prefix, s, [(k, np.asarray(o)) for k, o in self.orders], self.points, self.kinds)
        c.tokens += z.shape[1]
        return c

    def nbytes(self, c: Curves) -> int:
        return sum(v.nbytes for v in (*c.deletion.values(), *c.insertion.values())) + c.fractions.nbytes


def order_of(values: np.ndarray) -> tuple[int, ...]:
    """The patches, most relevant first (ties in patch order, i.e. raster order: left to right, top to bottom; the
    report card says so for occlusion's regions, whose patches share a value): a map's order for the curves."""
    return tuple(int(i) for i in np.argsort(-np.asarray(values, np.float64), kind="stable"))


def random_order(n: int, seed: int) -> tuple[int, ...]:
    """A seeded random order of ``n`` patches (the baseline every map is compared with)."""
    return tuple(int(i) for i in np.random.default_rng(seed).permutation(n))


# ---- a student's own choice ------------------------------------------------------------------------------------

@dataclass
class Choice:
    """The score with the student's patches dropped (or kept alone), beside each order's same number of patches.

    Attributes:
        full: the whole picture's score; chosen: with the student's choice applied.
        others: order name -> the score with that order's first len(choice) patches applied the same way.
    """

    full: float
    chosen: float
    others: dict[str, float] = field(default_factory=dict)
    target: int | None = None
    left_out: dict[str, str] = field(default_factory=dict)  # name -> why, for a map the model could not have


@dataclass(frozen=True)
class ChoiceProbe:
    """The maps from one eager forward and backward, then the student's set and each order's set of the same size
    (the maps', ``seeds`` random orders'), dropped (``keep`` False) or kept alone (``keep`` True), in one batch."""

    chosen: tuple[int, ...]
    prefix: int
    seeds: int = 3
    keep: bool = False
    rank: int = 1
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("choice", self.chosen, self.seeds, self.keep, self.rank)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return _eager_estimate(spec, tokens)

    def staged(self, x: torch.Tensor, run: Callable) -> Choice:
        """The maps with the model alone, then the sets as slices with the model shared (as :class:`TestProbe`)."""
        p, z, s, maps = run(MapsProbe(self.prefix, self.rank))
        n, k = z.shape[1] - self.prefix, len(self.chosen)
        orders = [(name, np.asarray(order_of(v))) for name, v in maps.items()]
        orders += [(f"random {i + 1}", np.asarray(random_order(n, i))) for i in range(self.seeds)]
        sets = [("yours", np.asarray(self.chosen))] + [(name, o[:k]) for name, o in orders]
        rows = [("choice", name, 0, np.sort(c) if self.keep else np.setdiff1d(np.arange(n), c)) for name, c in sets]
        got, _ = in_slices(run, z, self.prefix, s)(rows)
        return Choice(s.full, got[("choice", "yours", 0)], {name: got[("choice", name, 0)] for name, _ in orders},
                      s.target, maps.left_out)

    def nbytes(self, c: Choice) -> int:
        return 64 * (len(c.others) + 2)


def tokens_of(runner: Runner) -> int:
    """Tokens of one forward of ``runner`` at its own size (what a cost in tokens is divided by)."""
    g = runner.resolution // runner.spec.patch
    return runner.spec.prefix + g * g
