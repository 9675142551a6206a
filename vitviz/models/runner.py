"""A loaded model and the only way to run it.

Gradio answers requests in threads, so two requests can reach one model at the same moment. Recording what a
model computes puts hooks on it (each called only for its own thread's forwards: :func:`vitviz.models.hooks.on_output`);
some views also switch a model to eager attention for one forward (timm's ``fused_attn``, transformers'
implementation), which every other forward running meanwhile would see. So a :class:`Runner` owns its model
outright: the module and its forward function are private, and there are three ways in, all under the model's
:class:`ModelLock` (shared by every runner that wraps the same module):

- :meth:`Runner.analyse`: fit the picture, check the budget, take the lock, run a :class:`Probe` (its hooks on
  for this forward only), keep the result in the one cache of results. Every analysis of a picture goes here.
- :meth:`Runner.run`: the same for an input the caller prepared (a batch, or the classifier's own
  preprocessing), without fitting or keeping.
- :meth:`Runner.read`: read weights (position tables, patch filters), never a forward.

A probe that changes nothing on the module but puts its own thread's hooks (``shares = True``: the fused forward
that records queries and keys, the Forward pass's stream) runs beside others of its kind; any other probe runs
with the model alone. Two forwards side by side do more in a second than one after the other, even on two cores
where one forward's intra-op threads already use both (the cores idle between its operators):
``python -m benchmarks.load --forwards`` measured 1.7 forwards a second one after the other against 2.4 side by
side (DINO ViT-S/8, 224 px, 2026-11-28), and a class's requests share the model this way.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch

from vitviz.core import digest, owned
from vitviz.core.images import Fitted, fit_to_patches, fitted_shape, source_size
from vitviz.core.lru import LRU
from vitviz.models import budget, hooks
from vitviz.specs.registry import ModelSpec

T = TypeVar("T")
Forward = Callable[[torch.Tensor], tuple[torch.Tensor | None, torch.Tensor]]
"""A model's forward: (B, 3, H, W) normalised pixels -> (logits (B, K) or None, first image's last tokens (T, D))."""


class Probe(Protocol[T]):
    """What one forward records.

    ``key`` names what it records (with the model, picture and resolution it makes the cache key); ``grad`` asks
    for a forward with autograd on (relevance); ``own_size`` runs it at the checkpoint's own size whatever side
    was asked (Classify: its prediction is the checkpoint's). A probe may say ``shares = True`` when it changes
    nothing on the module but puts on hooks through :mod:`vitviz.models.hooks` (which see their own thread only):
    it then runs beside other such forwards (:class:`ModelLock`); without it, with the model alone. A long probe
    may instead be made of stages (``staged``, see :meth:`Runner.run`), each its own turn with the lock. The picture is
    fitted by the model's one input policy (:attr:`Runner.input_policy`), whatever the probe.
    ``__call__`` runs inside the lock with the model in eval mode; any hooks it puts on must come off before it
    returns (context managers), also when it raises.
    """

    key: Hashable
    grad: bool
    own_size: bool

    def estimate(self, spec: ModelSpec, tokens: int) -> int: ...

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> T: ...

    def nbytes(self, result: T) -> int: ...


@dataclass
class Run(Generic[T]):
    """One probe's result on one picture, with what the picture became on the way in.

    Attributes:
        runner: the model that ran (its ``notice`` says when it stands in for another).
        fitted: the picture as the model saw it (``fitted.note`` says what was done).
        resolution: the short side used, in pixels (the embedded model's own 64 whatever was asked).
        value: what the probe recorded.
        seconds: how long the forward took.
        token: a digest naming this run (model, probe, picture, resolution).
    """

    runner: "Runner"
    fitted: Fitted
    resolution: int
    value: T
    seconds: float
    token: str
    nbytes: int = 0


RESULTS_ITEMS = 100_000
"""The one cache of probe results keeps the newest within the server's one byte budget (``core.lru.KEPT``, shared
with every other cache; the newest result always stays): bounded by what the results weigh, not by their number
(a class of small pictures keeps them all; ``RESULTS_ITEMS`` is only a guard)."""
_results: LRU[Run] = owned.keep("runner.results", "results", LRU(RESULTS_ITEMS, size=lambda r: r.nbytes),
                                "analyses made, by model, picture, side and probe")


_by_token: dict[str, Hashable] = owned.keep("runner.tokens", "results", {}, "a page's token -> its analysis")
"""Each run's token -> its key in the result store (the explorer's parts are fetched by token: no scan)."""


FORWARD_SAMPLES = 9
"""How many of a model's latest forwards :func:`forward_ms` keeps (of any input shape)."""
_forward_ms: LRU[tuple[tuple[int, float], ...]] = owned.keep(
    "runner.forward_ms", "results", LRU(256), "the latest forwards' token counts and milliseconds, by model")


def note_forward(key: Hashable, tokens: int, ms: float) -> None:
    """Keep ``ms``, one forward of the model ``key`` (its registry key and weights id) over one picture of ``tokens``
    tokens (prefix and patches: a 3:2 photo's as well as a square's), among the :data:`FORWARD_SAMPLES` latest of that
    model (two threads noting at once may lose one). The reader scales them by the cost model to the tokens it asks
    about (:func:`vitviz.models.device.recent_ms`)."""
    _forward_ms.put(key, ((_forward_ms.get(key) or ()) + ((int(tokens), float(ms)),))[-FORWARD_SAMPLES:])


def forward_ms(key: Hashable) -> tuple[tuple[int, float], ...]:
    """The latest forwards noted for ``key`` (:func:`note_forward`) as (tokens, milliseconds), oldest first."""
    return _forward_ms.get(key) or ()


def results_bytes() -> int:
    """What the kept results weigh now, in bytes (at most ``RESULTS_BYTES``, but for a single larger one)."""
    return _results.held


_digests: dict[int, str] = owned.keep("runner.digests", "pictures", {}, "shared pictures' digests by array id")
"""The digests of shared pictures (:func:`shared_picture`), by the array's id while it lives."""


def picture_address(rgb: np.ndarray) -> str:
    """The name a page may ask for a picture by (the explorer's analysis made again from the server's own file):
    keyed with the server's secret, so that holding a picture does not tell anyone whether this server has it."""
    return digest.keyed("picture", image_key(rgb), size=32)


def image_key(rgb: np.ndarray) -> str:
    """A digest of an (H, W, 3) array's pixels and shape (a shared picture's, computed when it was shared)."""
    known = _digests.get(id(rgb))
    return known if known is not None else _digest(rgb)


def _digest(rgb: np.ndarray) -> str:
    return digest.content(np.ascontiguousarray(rgb).tobytes(), rgb.shape, size=40)


def shared_picture(rgb: np.ndarray) -> np.ndarray:
    """Make ``rgb`` read-only and hash it once, for every request that will use it (a decoded upload: the events
    of one click hand it along and its digest with it, instead of hashing its pixels again). Returns ``rgb``."""
    rgb.flags.writeable = False  # shared by the requests that use this picture: nobody may change it
    _digests[id(rgb)] = _digest(rgb)
    weakref.finalize(rgb, _digests.pop, id(rgb), None)
    return rgb


def find(token: str) -> Run | None:
    """The kept run named ``token``, or None when it has left the cache."""
    key = _by_token.get(token)
    run = _results.get(key) if key is not None else None
    if run is None:
        _by_token.pop(token, None)
    return run


class ModelLock:
    """Who may use one model at a time: any number of forwards that change nothing on it (:meth:`shared`), or one
    thread alone (:meth:`alone`: a switch to eager attention, an experiment, a trace). A thread waiting to be alone
    goes before new sharers, so a class's steady stream of forwards cannot keep it out. The thread that holds the
    model alone may take it again either way; a sharer may share again, but not ask to be alone (it would wait for
    itself: that raises)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._sharers: dict[int, int] = {}  # thread -> how deep it holds the lock shared
        self._owner: int | None = None
        self._depth = 0
        self._waiting = 0  # threads waiting to be alone

    @property
    def idle(self) -> bool:
        """Nobody holds the lock."""
        with self._cond:
            return self._owner is None and not self._sharers

    @property
    def sharing(self) -> int:
        """How many threads hold the lock shared now."""
        with self._cond:
            return len(self._sharers)

    @contextmanager
    def shared(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me and me not in self._sharers:
                while self._owner is not None or self._waiting:
                    self._cond.wait()
            self._sharers[me] = self._sharers.get(me, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                left = self._sharers.pop(me) - 1
                if left:
                    self._sharers[me] = left
                self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:
                if me in self._sharers:
                    raise RuntimeError("a thread that shares a model cannot also ask for it alone")
                self._waiting += 1
                try:
                    while self._owner is not None or self._sharers:
                        self._cond.wait()
                finally:
                    self._waiting -= 1
                self._owner = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                self._cond.notify_all()


class Runner:
    """A model ready to run, and the only way to run it (see the module's text).

    ``notice`` is non-empty when this model stands in for one that was asked for (:meth:`standing_in`).
    """

    def __init__(self, spec: ModelSpec, module: torch.nn.Module, forward: Forward, *, mean: tuple[float, ...],
                 std: tuple[float, ...], resolution: int, origin: str, labels: list[str] | None = None,
                 data_config: dict | None = None, notice: str = "", lock: ModelLock | None = None) -> None:
        self.spec, self.mean, self.std, self.resolution = spec, tuple(mean), tuple(std), int(resolution)
        self.origin, self.labels, self.data_config, self.notice = origin, labels, dict(data_config or {}), notice
        self._module, self._forward = module.eval(), forward
        self._lock = lock or ModelLock()
        self.depth = spec.depth if spec.task == "cnn" else len(hooks.attention_modules(module))
        """Number of attention layers (a CNN's: its stages)."""
        self.params = sum(p.numel() for p in module.parameters())
        self.key = spec.key
        params = list(module.parameters())
        ends = [p.detach().float().cpu().numpy().tobytes() for p in ((params[0], params[-1]) if params else ())]
        self.weights_id = digest.content(spec.key, origin, self.params, *ends, size=8)
        """Tells these weights from others under the same key (a new revision): part of every result's token, so
        what a browser cached for a token is never another model's."""

    def __repr__(self) -> str:
        return f"Runner({self.spec.key!r}, origin={self.origin!r})"

    def standing_in(self, notice: str) -> "Runner":
        """This model (same module, same lock) answering for another key, with ``notice`` saying so."""
        other = Runner.__new__(Runner)
        other.__dict__.update(self.__dict__)
        other.notice = notice
        return other

    @property
    def heads(self) -> int:
        return self.spec.heads

    @property
    def embedded(self) -> bool:
        """The model vitviz trained itself (runs at its own size only)."""
        return self.spec.family == "embedded"

    @property
    def nbytes(self) -> int:
        """What the model's weights and buffers hold, in bytes."""
        return sum(t.nbytes for t in itertools.chain(self._module.parameters(), self._module.buffers()))

    # ---- input ------------------------------------------------------------------------------------------------

    def normalise(self, rgb: np.ndarray) -> torch.Tensor:
        """(H, W, 3) uint8 -> (1, 3, H, W) float normalised with the checkpoint's mean and std."""
        x = torch.tensor(rgb, dtype=torch.uint8).permute(2, 0, 1)[None].float() / 255.0
        return (x - torch.tensor(self.mean).view(1, 3, 1, 1)) / torch.tensor(self.std).view(1, 3, 1, 1)

    def side(self, resolution: int) -> int:
        """The short side a picture is fitted to for ``resolution``: a whole number of patches (rounded down), and
        the embedded model's own size whatever was asked (it was trained at that size only)."""
        p = self.spec.patch
        return self.resolution if self.embedded else max(int(resolution), p) // p * p

    def side_reason(self, resolution: int, always: bool = False) -> str:
        """Why :meth:`side` differs from ``resolution`` (empty when it does not, unless ``always`` and the model runs
        at one size only)."""
        used = self.side(resolution)
        if used == int(resolution) and not (always and self.embedded):
            return ""
        if self.embedded:
            return f"{self.spec.key} runs at {used} px only (the size it was trained at), whatever short side is set."
        return f"The short side is {used} px: {int(resolution)} rounded down to a whole number of {self.spec.patch}-px patches."

    @property
    def input_policy(self) -> str:
        """How every view and every door (page, API, command line, bundle, device) fits a picture for this model:
        one input per model.

        - "checkpoint" for a model with classes: the checkpoint's own eval transform (timm's, from its data config)
          at the side asked: the short side resized to floor(side / crop_pct), the centre side × side cropped. What
          its prediction means, and its maps explain that prediction, so they are of the same input.
        - "keep" for a model without classes (DINO, DINOv2): the whole picture, short side at the side asked, the
          aspect kept, cut to whole patches: its maps are about the picture's patches, all of them.
        """
        return "checkpoint" if self.labels else "keep"

    def fitted_shape(self, h0: int, w0: int, side: int) -> tuple[int, int]:
        """(H, W) of an (h0, w0) picture fitted at ``side`` by :attr:`input_policy`, from the shapes alone."""
        if self.input_policy == "checkpoint":
            return side, side
        return fitted_shape(h0, w0, side, self.spec.patch, "keep")

    def fit(self, rgb: np.ndarray, resolution: int, probe: Probe | None = None) -> tuple[Fitted, int]:
        """``rgb`` fitted by the model's :attr:`input_policy` at the side ``resolution`` asks for, and that side.

        Raises ``ValueError`` (saying what to change) when one forward would be over the per-request budget,
        checked from the shapes alone before any resizing.
        """
        side = self.planned_side(rgb, resolution, probe)
        return self.fit_at(rgb, side), side

    def fit_at(self, rgb: np.ndarray, side: int) -> Fitted:
        """``rgb`` fitted at the short side ``side`` (a whole number of patches) by :attr:`input_policy`."""
        if self.input_policy == "keep":
            return fit_to_patches(rgb, side, self.spec.patch, "keep")
        return self._checkpoint_fit(rgb, side)

    def planned_side(self, rgb: np.ndarray, resolution: int, probe: Probe | None = None) -> int:
        """The short side :meth:`fit` will use for ``rgb``, after checking the budget from the shapes alone (no
        resizing: a kept result is found before any work)."""
        side = self.side(resolution)
        p = self.spec.patch
        h, w = self.fitted_shape(*rgb.shape[:2], side)
        budget.check_tokens(self.spec, (h // p, w // p), side, None if probe is None else probe.estimate)
        return side

    def preprocess(self, rgb: np.ndarray, side: int | None = None) -> torch.Tensor:
        """(H, W, 3) uint8 -> (1, 3, H', W') normalised, fitted by :attr:`input_policy` at ``side`` (the
        checkpoint's own size by default). For a classifier this is timm's eval transform from the checkpoint's
        data config, bit for bit."""
        return self.normalise(self.fit_at(rgb, self.side(side if side is not None else self.resolution)).image)

    def eval_transform(self, side: int):
        """timm's eval transform of this checkpoint at ``side`` (its interpolation, crop fraction, mean and std)."""
        from timm.data import create_transform

        dc = self.data_config
        return create_transform(input_size=(3, side, side), interpolation=dc.get("interpolation") or "bicubic",
                                crop_pct=dc.get("crop_pct") or 1.0, crop_mode=dc.get("crop_mode") or "center",
                                mean=self.mean, std=self.std)

    def _checkpoint_fit(self, rgb: np.ndarray, side: int) -> Fitted:
        """The picture as timm's eval transform crops it (every step before the tensor conversion, through PIL),
        and where that crop lies in ``rgb``."""
        import math

        from PIL import Image

        im = Image.fromarray(rgb)
        for step in self.eval_transform(side).transforms:
            if "Tensor" in type(step).__name__:  # what follows works on tensors: vitviz normalises the same way
                break
            im = step(im)
        image = np.ascontiguousarray(np.asarray(im.convert("RGB")))
        h0, w0 = rgb.shape[:2]
        crop_pct = float(self.data_config.get("crop_pct") or 1.0)
        short = math.floor(side / crop_pct)  # torchvision's Resize(int): the short side to it, the long in proportion
        rh, rw = (short, int(short * h0 / w0)) if w0 <= h0 else (int(short * w0 / h0), short)
        top, left = int(round((rh - side) / 2.0)), int(round((rw - side) / 2.0))
        sw, sh = source_size(rgb)
        read = "" if (sw, sh) == (w0, h0) else f", read at {w0}×{h0}"
        dc, p, g = self.data_config, self.spec.patch, side // self.spec.patch
        note = (f"{sw}×{sh} picture{read} → {side}×{side} as this checkpoint expects ({dc.get('interpolation')} "
                f"resize of the short side to {short}, centre crop): {g}×{g} = {g * g} patches of {p}×{p}.")
        return Fitted(image, p, "checkpoint", note, (w0 / rw, h0 / rh, float(left), float(top), w0, h0))

    def picture(self, x: torch.Tensor) -> np.ndarray:
        """Undo the normalisation of a (1, 3, S, S) input -> (S, S, 3) uint8: the picture the model saw."""
        mean = torch.tensor(self.mean).view(3, 1, 1)
        std = torch.tensor(self.std).view(3, 1, 1)
        return ((x[0] * std + mean).clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)

    # ---- the three ways in ------------------------------------------------------------------------------------

    def forward_estimate(self, probe: Probe, x: torch.Tensor) -> int:
        """Estimated peak bytes of ``probe`` over a (B, 3, H, W) input: B times one picture's (never more than the
        server's whole budget, which the per-request check keeps single pictures under)."""
        p = self.spec.patch
        tokens = (x.shape[-2] // p) * (x.shape[-1] // p) + self.spec.prefix
        return min(probe.estimate(self.spec, tokens) * x.shape[0], budget.SERVER.total)

    def run(self, probe: Probe[T], x: torch.Tensor) -> T:
        """``probe`` over one forward of the prepared input ``x`` (B, 3, H, W), under the model's lock (shared when
        the probe says it ``shares``, else alone), with its estimate reserved from the server-wide budget while it
        runs. The budget is reserved first, then the lock taken: work waiting for memory never holds the model (a
        sharer waiting so would keep out a thread waiting to be alone, and everyone queued behind that one).

        A probe in stages (one with ``staged(x, run)``) is not run under the lock itself: its whole estimate is
        reserved once, before any lock, for as long as it runs (the stages' and what it keeps between them: the
        randomisation check's copy of the model); then it runs each of its stages as a probe of its own through
        ``run(stage)``, each taking the lock (shared or alone, as that stage says) and giving it back, so other
        requests' forwards get in between its stages. A stage's own reservation is then nested in the probe's, which
        covers it (:class:`vitviz.models.budget.Gate`: it never waits and counts nothing twice), so no stage waits
        for memory holding the lock."""
        staged = getattr(probe, "staged", None)
        if staged is not None:
            with budget.reserve(self.forward_estimate(probe, x), f"a forward of {self.spec.key}", covers=True):
                return staged(x, lambda stage: self.run(stage, x))
        held = self._lock.shared() if getattr(probe, "shares", False) else self._lock.alone()
        with budget.reserve(self.forward_estimate(probe, x), f"a forward of {self.spec.key}"), held:
            self._module.eval()
            if probe.grad:
                with torch.inference_mode(False), torch.enable_grad():
                    return probe(self._module, x, self._forward)
            with torch.inference_mode():
                if not (getattr(probe, "timed", False) and x.shape[0] == 1):
                    return probe(self._module, x, self._forward)
                return self._timed(probe, x)

    def _timed(self, probe: Probe[T], x: torch.Tensor) -> T:
        """``probe`` over (1, 3, H, W) ``x`` with a forward that times itself: only the model's forward (and the
        records its hooks take) is noted (:func:`note_forward`), not the probe's work around it (the Forward pass's
        logit lens) nor what its hooks say they spent inside it on their own work (``forward.aside``, ms: the
        attention maps' float16 packing and its check), and only when the probe ran exactly one forward."""
        spent: list[float] = []

        def forward(inp: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
            t0 = time.perf_counter()
            out = self._forward(inp)
            spent.append((time.perf_counter() - t0) * 1000)
            return out

        forward.aside = []  # type: ignore[attr-defined] - ms the probe's own hooks spent inside it, not the model's
        value = probe(self._module, x, forward)
        if len(spent) == 1:
            p = self.spec.patch
            note_forward(self.timing_key, (x.shape[-2] // p) * (x.shape[-1] // p) + self.spec.prefix,
                         max(spent[0] - sum(forward.aside), 0.0))  # type: ignore[attr-defined]
        return value

    @property
    def timing_key(self) -> tuple[str, str]:
        """What :func:`note_forward` keeps this model's forward times under: its registry key and weights id."""
        return (self.spec.key, self.weights_id)

    def analyse(self, probe: Probe[T], rgb: np.ndarray, resolution: int | None = None) -> Run[T]:
        """Fit ``rgb``, check the budget, run ``probe`` once under the lock, keep the result (one cache for all).

        The same request twice at once runs one forward; the other waits for it and shares the answer.
        """
        # the budget is checked and the side decided from the shapes; the picture is resized only on a miss
        asked = self.resolution if probe.own_size or resolution is None else resolution
        side = self.planned_side(rgb, asked, probe)
        key = (self._module, probe.key, image_key(rgb), side)  # the key keeps its module alive

        def make() -> Run[T]:
            shown = self.fit_at(rgb, side)
            x = self.normalise(shown.image)
            t0 = time.perf_counter()
            value = self.run(probe, x)
            seconds = time.perf_counter() - t0
            named = (self.spec.key, self.weights_id, probe.key, key[2], side)
            token = digest.keyed(*named)  # keyed: nobody names another person's analysis from the picture
            if len(_by_token) > 4 * len(_results) + 256:  # forget the tokens of runs the store let go
                for old in [t for t, k in list(_by_token.items()) if k not in _results]:
                    _by_token.pop(old, None)
            _by_token[token] = key
            return Run(self, shown, side, value, seconds, token, probe.nbytes(value) + shown.image.nbytes)

        run = _results.get_or_make(key, make)
        return run if run.runner is self else Run(self, run.fitted, run.resolution, run.value, run.seconds, run.token,
                                                   run.nbytes)

    def trace(self, fn: Callable[[torch.nn.Module, Forward], T]) -> T:
        """``fn(module, forward)`` under the lock and without gradients, outside inference mode: for tracing the
        model's forward into a graph (:mod:`vitviz.models.device`), never for a request's forward."""
        with self._lock.alone(), torch.no_grad():
            return fn(self._module, self._forward)

    def read(self, fn: Callable[[torch.nn.Module], T]) -> T:
        """``fn(module)`` with the lock shared, for reading weights (never for a forward, that is :meth:`run`; ``fn``
        changes nothing on the module)."""
        with self._lock.shared(), torch.inference_mode():
            return fn(self._module)

@dataclass(frozen=True)
class Call:
    """A probe that records nothing: ``fn(model, x, forward)`` as it is, under the lock (for experiments and
    benchmarks that need the model's own call, e.g. ``output_attentions=True`` as a reference)."""

    fn: Callable[[torch.nn.Module, torch.Tensor, Forward], Any]
    key: Hashable = "call"
    grad: bool = False
    own_size: bool = False
    timed: bool = False  # its one forward is the server's forward time (note_forward): fn only calls forward(x)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return budget.forward_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> Any:
        return self.fn(model, x, forward)

    def nbytes(self, result: Any) -> int:
        return 0
