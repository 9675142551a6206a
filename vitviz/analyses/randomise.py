"""Randomised weights: does a map change when the weights that made the prediction are gone?

The model parameter randomisation test (MPRT, Adebayo et al. 2018) as the field now runs it (Hedström et al. 2023,
arXiv 2401.06465, and quantus 0.6.0): a cascade from the output, each step re-drawing one more part of a copy of
the trained model from its initial distribution, and each step's map compared with the trained model's:

- step 0: the trained model;
- "head": the classifier (timm's ``head`` and ``head_dist``, transformers' ``classifier``, DeiT's two classifiers;
  an attention pool with it); a model without classes (DINO) has no head step;
- "final norm": the norm between the blocks and the head (``norm``, and timm's ``fc_norm`` after pooling), reset to
  the identity;
- "block L" … "block 1": each block re-drawn whole, its LayerScale with it (:func:`reinitialise`).

The patch embedding, the position table, [CLS] and the register tokens are below block 1 and are never re-drawn:
the cascade ends with every block and the head random.

Three scores per map, as quantus 0.6.0 computes them (:func:`mprt`, :func:`smprt`, :func:`emprt`): the original
MPRT's Spearman rank correlation with the trained map at every step; smooth MPRT's, of maps averaged over noisy
copies of the input first (trained and fully randomised); efficient MPRT's relative rise in the map's discrete
entropy from the trained model to the fully randomised one. Each over several seeded draws of the random weights
(each draw its own copy of the trained model), so that no single draw is taken for the answer.

The shared model is never changed: each draw copies it (with the model alone, briefly) and runs its copy outside
the lock; one copy is alive at a time.

Shapes: N patch tokens; S steps (1 + head? + final norm? + L); D draws; a map is (N,) float64 over the patches.
The scores are those of the patch maps, which are also those of the maps drawn at the input's pixels with one value
per patch (quantus's explanations at H × W): a rank correlation, a rescaling and a histogram's shares do not change
when every value is repeated P² times.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.analyses import maps as made
from vitviz.analyses.maps import class_maps
from vitviz.models.parts import parts_of
from vitviz.models.runner import Forward
from vitviz.specs.registry import ModelSpec

NOISE = 0.1
"""sMPRT's noise: its standard deviation is this share of the input's range (max - min over the prepared input,
quantus's ``noise_magnitude`` default)."""
BINS = 100
"""eMPRT's histogram: this many equal bins between the map's minimum and maximum (quantus's ``n_bins`` when no
rule is named)."""
PASS_BELOW = 0.5
"""vitviz's threshold, not the papers' (they report the scores and draw no line): a map passes the (smooth) MPRT
when its Spearman correlation with the trained map at full randomisation is below this in every draw; eMPRT's is
vitviz's too (a rise in entropy: above 0)."""
CLOSE = "too close to call"
"""The verdict of a score whose draws fall on both sides of its threshold (:meth:`Scores.verdicts`)."""
NOISE_SEED = 0
"""The seed of sMPRT's noise: the same noisy copies for the trained and every randomised model."""


# ---- the cascade: which part each step re-draws, and how ----------------------------------------------------------

def _has_params(m: torch.nn.Module | None) -> bool:
    return m is not None and any(True for _ in m.parameters())


def head_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The classifier's modules (with parameters) of a timm or transformers ViT: [] for a model without classes."""
    names = ("head", "head_dist", "attn_pool") if hasattr(model, "forward_head") else \
        ("classifier", "cls_classifier", "distillation_classifier")
    found = [getattr(model, n, None) for n in names]
    return [m for m in found if isinstance(m, torch.nn.Module) and _has_params(m)]


def cascade(model: torch.nn.Module) -> list[tuple[str, list[torch.nn.Module]]]:
    """The steps after the trained one, from the output: ("head", its modules) when the model has classes, ("final
    norm", the norms after the blocks) when they have weights, then ("block L", [block L]) … ("block 1", …)."""
    p = parts_of(model)
    steps: list[tuple[str, list[torch.nn.Module]]] = []
    head = head_modules(model)
    if head:
        steps.append(("head", head))
    norms = [m for m in (p.norm, p.fc_norm) if _has_params(m)]
    if norms:
        steps.append(("final norm", norms))
    return steps + [(f"block {i}", [p.blocks[i - 1]]) for i in range(len(p.blocks), 0, -1)]


def step_names(model: torch.nn.Module) -> tuple[str, ...]:
    """Every step's name, the trained model's first: ("trained", "head", "final norm", "block 12", …, "block 1")."""
    return ("trained",) + tuple(name for name, _ in cascade(model))


def layer_scale_init(model: torch.nn.Module) -> float | None:
    """The value a LayerScale starts from where its module does not keep it: transformers' DINOv2
    ``config.layerscale_value`` (timm's ``LayerScale`` keeps its own ``init_values``); None if the model says none."""
    value = getattr(getattr(model, "config", None), "layerscale_value", None)
    return None if value is None else float(value)


def _is_norm(m: torch.nn.Module) -> bool:
    names = {n for n, _ in m.named_parameters(recurse=False)}
    return names <= {"weight", "bias"} and (isinstance(m, (torch.nn.LayerNorm, torch.nn.GroupNorm))
                                            or type(m).__name__.lower().endswith("norm"))


def _is_layer_scale(m: torch.nn.Module) -> bool:
    return "layerscale" in type(m).__name__.lower() and len(list(m.parameters(recurse=False))) == 1


STD = 0.02
"""The standard deviation a ViT's linear layers start from (timm's ``init_weights_vit_timm``, transformers'
``initializer_range``)."""


def reinitialise(part: torch.nn.Module, seed: int | torch.Generator, layer_scale: float | None = None) -> None:
    """Draw ``part``'s weights anew, as timm initialises a ViT before training (``init_weights_vit_timm``):

    - every linear layer by ``torch.nn.init.trunc_normal_(w, std=0.02, a=-2, b=2)``: timm's call, whose bounds are
      absolute (±2, a hundred standard deviations), so the draw is in effect a normal of std 0.02 (transformers'
      ``normal_(std=0.02)``); zero bias; in the order of ``part.modules()``;
    - every norm (LayerNorm, an RMS norm) to the identity: weight 1, bias 0;
    - every LayerScale to its initial value: timm's ``LayerScale.init_values`` (kept on the module), else
      ``layer_scale`` (transformers' DINOv2 ``config.layerscale_value``, :func:`layer_scale_init`).

    ``seed``: a generator (shared across a step's modules, so that two heads of one shape differ), or a number to
    seed a new one. ``ValueError`` for a module with weights of another kind (nothing is left trained unsaid)."""
    g = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in part.named_modules():
            if not list(m.parameters(recurse=False)):
                continue
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.trunc_normal_(m.weight, std=STD, a=-2.0, b=2.0, generator=g)
                if m.bias is not None:
                    m.bias.zero_()
            elif _is_norm(m):
                if getattr(m, "weight", None) is not None:
                    m.weight.fill_(1.0)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
            elif _is_layer_scale(m):
                value = getattr(m, "init_values", None)
                value = layer_scale if value is None else value
                if value is None:
                    raise ValueError(f"{type(m).__name__} ({name or 'the part'}): its initial value is not known, so "
                                     "vitviz cannot re-draw it.")
                next(m.parameters(recurse=False)).fill_(float(value))
            else:
                raise ValueError(f"{type(m).__name__} ({name or 'the part'}): vitviz does not know how this module "
                                 "is initialised, so it cannot re-draw it.")


def seed_of(draw: int, step: int) -> int:
    """The generator's seed for step ``step`` (1 = the first re-drawn part) of draw ``draw`` (0 = the first)."""
    return draw * 1000 + step


def redraw_step(modules: list[torch.nn.Module], draw: int, step: int, layer_scale: float | None = None) -> None:
    """Re-draw step ``step``'s modules of draw ``draw`` (:func:`reinitialise`) from one generator seeded
    :func:`seed_of` (draw, step), in turn: DeiT's two heads of one shape get different weights."""
    g = torch.Generator().manual_seed(seed_of(draw, step))
    for m in modules:
        reinitialise(m, g, layer_scale)


# ---- the scores, as quantus 0.6.0 computes them ---------------------------------------------------------------

def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two maps (ties take their average rank; scipy's ``spearmanr``): 1 = the same
    order of patches; NaN when either is constant (no order to compare)."""
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
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def by_max(a: np.ndarray) -> np.ndarray:
    """quantus's ``normalise_by_max``: a / max |a| (a map of zeros as it is)."""
    a = np.asarray(a, np.float64)
    return a if not a.any() else a / np.abs(a).max()


def by_second_moment(a: np.ndarray) -> np.ndarray:
    """quantus's ``normalise_by_average_second_moment_estimate``: a / sqrt(mean a²) (a map of zeros as it is)."""
    a = np.asarray(a, np.float64)
    return a if not a.any() else a / np.sqrt((a ** 2).sum() / a.size)


def mprt(trained: np.ndarray, step: np.ndarray) -> float:
    """The original MPRT's score (quantus ``MPRT`` with its defaults: ``normalise`` by max, then ``abs``, then
    ``correlation_spearman``) of two (N,) maps."""
    return spearman(np.abs(by_max(trained)), np.abs(by_max(step)))


def smprt(trained: np.ndarray, random: np.ndarray) -> float:
    """Smooth MPRT's score (quantus ``SmoothMPRT`` at full randomisation: the maps already averaged over the noisy
    inputs (:func:`smoothed`), ``normalise`` by the average second moment, then ``abs``, then Spearman)."""
    return spearman(np.abs(by_second_moment(trained)), np.abs(by_second_moment(random)))


def entropy(a: np.ndarray, bins: int = BINS) -> float:
    """quantus's ``discrete_entropy``: the Shannon entropy (nats) of the shares of a's values in ``bins`` equal bins
    between its minimum and maximum (``numpy.histogram``)."""
    counts, _ = np.histogram(np.asarray(a, np.float64), bins=bins)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def emprt(trained: np.ndarray, random: np.ndarray, bins: int = BINS) -> float:
    """Efficient MPRT's score (quantus ``EfficientMPRT`` with its defaults: no ``abs``, no ``normalise``,
    ``discrete_entropy`` with 100 bins): the relative rise (H(random) - H(trained)) / H(trained); > 0 (an entropy
    ratio above 1) means the randomised model's map is the more disordered; NaN for a trained map of one value."""
    h0, h1 = entropy(trained, bins), entropy(random, bins)
    return (h1 - h0) / h0 if h0 > 0 else float("nan")


def noises(x: torch.Tensor, samples: int, seed: int = NOISE_SEED) -> list[torch.Tensor]:
    """sMPRT's ``samples`` inputs from x (1, 3, H, W), each (1, 3, H, W) float32: x plus Gaussian noise of standard
    deviation :data:`NOISE` × (max x - min x), ``samples - 1`` of them seeded, then x itself (quantus's last sample
    is noise-free). Computed as quantus does, in float64 numpy, then cast to the model's float32."""
    xn = x.detach().cpu().numpy()
    std = NOISE * (xn.max() - xn.min())
    rng = np.random.default_rng(seed)
    return [torch.from_numpy(xn + rng.standard_normal(xn.shape) * std).to(x.dtype) for _ in range(samples - 1)] + [x]


def smoothed(maps: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The maps of the noisy inputs averaged, in quantus's order: sum over samples of map / samples."""
    out = {k: v / len(maps) for k, v in maps[0].items()}
    for m in maps[1:]:
        for k in out:
            out[k] = out[k] + m[k] / len(maps)
    return out


# ---- the probe ------------------------------------------------------------------------------------------------

@dataclass
class Cascade:
    """Maps and predictions at every step of every draw, and sMPRT's smoothed maps.

    Attributes:
        steps: (S,) the steps' names: "trained", "head", "final norm", "block L", …, "block 1".
        maps: map name -> (D, S, N) each draw's map at each step (step 0, the trained model's, the same in all).
        probs: (D, S) the trained class's probability at each step (None without classes).
        top: (D, S) the class each step predicts (None without classes).
        target: the trained model's class (None without classes).
        smooth_trained: map name -> (N,) the trained model's map averaged over sMPRT's noisy inputs.
        smooth_random: map name -> (D, N) each fully randomised model's, over the same inputs.
        seeds: (D,) each draw's number (its step k is seeded :func:`seed_of` (draw, k)).
        samples: sMPRT's inputs per average (the last noise-free).
        layers: the model's blocks.
        left_out: map name -> why, for a class map this model cannot have (``Maps.left_out``).
    """

    steps: tuple[str, ...]
    maps: dict[str, np.ndarray]
    probs: np.ndarray | None
    top: np.ndarray | None
    target: int | None
    smooth_trained: dict[str, np.ndarray] = field(default_factory=dict)
    smooth_random: dict[str, np.ndarray] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()
    samples: int = 1
    layers: int = 0
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def draws(self) -> int:
        return len(self.seeds)


@dataclass
class Scores:
    """The three scores of every map (:func:`scores_of`).

    Attributes:
        mprt: map name -> (D, S) Spearman with the trained map at each step of each draw (1 at step 0).
        smprt: map name -> (D,) smooth MPRT's Spearman at full randomisation.
        emprt: map name -> (D,) efficient MPRT's relative rise in entropy at full randomisation.
        entropy: map name -> (D + 1,) the trained map's entropy, then each fully randomised one's.
    """

    mprt: dict[str, np.ndarray]
    smprt: dict[str, np.ndarray]
    emprt: dict[str, np.ndarray]
    entropy: dict[str, np.ndarray]

    def passes(self, name: str) -> dict[str, bool]:
        """Which tests map ``name`` passes in every draw: "mprt" and "smprt" (Spearman at full randomisation below
        :data:`PASS_BELOW`), "emprt" (its entropy rises: > 0), and "all" three."""
        got = {"mprt": bool(np.all(self.mprt[name][:, -1] < PASS_BELOW)),
               "smprt": bool(np.all(self.smprt[name] < PASS_BELOW)),
               "emprt": bool(np.all(self.emprt[name] > 0))}
        return got | {"all": all(got.values())}

    def verdicts(self, name: str) -> dict[str, str]:
        """Map ``name``'s verdict per test: "pass" (every draw on the passing side of vitviz's threshold), "fail"
        (every draw on the other), or :data:`CLOSE` (the draws' range crosses it); "all": "pass" when all three
        pass, "fail" when one fails, else :data:`CLOSE`."""
        def verdict(ok: np.ndarray) -> str:
            return "pass" if ok.all() else "fail" if not ok.any() else CLOSE

        got = {"mprt": verdict(self.mprt[name][:, -1] < PASS_BELOW),
               "smprt": verdict(self.smprt[name] < PASS_BELOW) if name in self.smprt else CLOSE,
               "emprt": verdict(self.emprt[name] > 0)}
        every = set(got.values())
        return got | {"all": "pass" if every == {"pass"} else "fail" if "fail" in every else CLOSE}


def scores_of(c: Cascade) -> Scores:
    """Every map's MPRT, sMPRT and eMPRT from a :class:`Cascade`."""
    mp, sm, em, en = {}, {}, {}, {}
    for k, m in c.maps.items():
        mp[k] = np.array([[mprt(d[0], d[s]) for s in range(d.shape[0])] for d in m])
        em[k] = np.array([emprt(d[0], d[-1]) for d in m])
        en[k] = np.array([entropy(m[0, 0])] + [entropy(d[-1]) for d in m])
        if k in c.smooth_trained:
            sm[k] = np.array([smprt(c.smooth_trained[k], r) for r in c.smooth_random[k]])
    return Scores(mp, sm, em, en)


def explanations(steps: int, draws: int, samples: int) -> int:
    """How many times the maps are made (:func:`vitviz.analyses.maps.class_maps`): the trained model once and on
    its ``samples - 1`` noisy inputs, then per draw its ``steps - 1`` re-drawn steps and the fully randomised model's
    ``samples - 1`` noisy inputs (the noise-free sample is the last step's own maps)."""
    return samples + draws * (steps - 1 + samples - 1)


def planned_steps(spec: ModelSpec, classes: bool) -> int:
    """The steps a model of ``spec`` has, from its registry entry (a head with classes, a final norm, the blocks)."""
    return 1 + int(classes) + 1 + spec.depth


def planned_macs(spec: ModelSpec, tokens: int, classes: bool, draws: int, samples: int) -> int:
    """Multiply-adds of a whole :class:`CascadeProbe` over ``tokens`` tokens, from the settings alone: each making
    of the maps costs :func:`vitviz.analyses.maps.maps_forwards` forwards (with all five maps on ViT-B/16's shape at
    224 px, 5.1 fused forwards measured, 8 counted)."""
    from vitviz.analyses.faithful import sequence_macs

    return explanations(planned_steps(spec, classes), draws, samples) * made.maps_forwards(spec) \
        * sequence_macs(spec, tokens)


def _maps_of(model: torch.nn.Module, x: torch.Tensor, forward: Forward, prefix: int,
             target: int | None) -> tuple[dict[str, np.ndarray], torch.Tensor | None, int | None, dict[str, str]]:
    """Every map of ``model`` (:func:`vitviz.analyses.maps.class_maps`) for ``target`` (the model's own top class
    when None); the logits; the target; name -> why for a class map the model cannot have (``Maps.left_out``)."""
    m = class_maps(model, x, forward, prefix, target)
    return m.maps, m.logits, m.target, dict(getattr(m, "left_out", {}) or {})


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
    """The maps of the trained model and of ``draws`` copies randomised step by step from the output
    (:func:`cascade`), with sMPRT's noisy inputs on the trained and the fully randomised models. Each draw's copy is
    made with the model alone, a moment, and the previous one is dropped first (one copy alive at a time); the
    steps run outside the model's lock (:meth:`staged`). The shared model is never changed."""

    prefix: int
    draws: int = 3
    samples: int = 3
    grad: bool = True
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("cascade", self.draws, self.samples)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        weights = int(spec.params_m * 1e6 * 4)  # one copy at a time
        return weights + made.maps_bytes(spec, tokens)

    def staged(self, x: torch.Tensor, run: Callable) -> Cascade:
        # the runner holds this probe's whole estimate (one copy's weights with the steps') from before the first
        # copy is made until the last step ends: a copy is never alive uncounted, and nothing here waits for memory
        draws = []
        for d in range(self.draws):
            twin, twin_forward = run(_Copy())  # the shared model is never changed
            with torch.inference_mode(False), torch.enable_grad():
                draws.append(self.steps(twin, x, twin_forward, d, draws[0] if draws else None))
            del twin, twin_forward  # before the next copy: one alive at a time
        return self.gathered(draws)

    def steps(self, twin: torch.nn.Module, x: torch.Tensor, twin_forward: Forward, draw: int = 0,
              first: dict | None = None) -> dict:
        """One draw on ``twin``, the probe's own copy (re-drawn step by step from the output); the trained model's
        maps (and smoothed maps) come from the ``first`` draw's when given, else are made here."""
        parts = cascade(twin)
        scale = layer_scale_init(twin)
        inputs = noises(x, self.samples)
        if first is None:
            got, lg, target, left = _maps_of(twin, x, twin_forward, self.prefix, None)
            trained = {"maps": got, "logits": lg, "target": target, "left_out": left}
            trained["smooth"] = smoothed([_maps_of(twin, n, twin_forward, self.prefix, target)[0]
                                          for n in inputs[:-1]] + [got])
        else:
            trained = first["trained"]
        target = trained["target"]
        maps, logits = [trained["maps"]], [trained["logits"]]
        for k, (_, modules) in enumerate(parts, start=1):
            redraw_step(modules, draw, k, scale)
            got, lg, *_ = _maps_of(twin, x, twin_forward, self.prefix, target)
            maps.append(got)
            logits.append(lg)
        smooth = smoothed([_maps_of(twin, n, twin_forward, self.prefix, target)[0] for n in inputs[:-1]]
                          + [maps[-1]])
        return {"trained": trained, "maps": maps, "logits": logits, "smooth": smooth,
                "steps": ("trained",) + tuple(name for name, _ in parts), "layers": len(parts_of(twin).blocks)}

    def gathered(self, draws: list[dict]) -> Cascade:
        first = draws[0]
        target = first["trained"]["target"]
        names = list(first["maps"][0])
        maps = {n: np.stack([np.stack([s[n] for s in d["maps"]]) for d in draws]) for n in names}
        probs = top = None
        if target is not None:
            p = np.array([[torch.softmax(lg.double().reshape(-1, lg.shape[-1])[0], -1).numpy() for lg in d["logits"]]
                          for d in draws])  # (D, S, C)
            probs, top = p[:, :, target], p.argmax(-1)
        return Cascade(first["steps"], maps, probs, top, target, dict(first["trained"]["smooth"]),
                       {n: np.stack([d["smooth"][n] for d in draws]) for n in names},
                       tuple(range(len(draws))), self.samples, first["layers"],
                       dict(first["trained"].get("left_out", {})))

    def nbytes(self, c: Cascade) -> int:
        return sum(v.nbytes for v in c.maps.values()) + sum(v.nbytes for v in c.smooth_random.values())
