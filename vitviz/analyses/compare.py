"""ViT against a CNN: effective receptive fields and what a shift of the picture does to each.

- :class:`ErfProbe`: the effective receptive field of every stage of a CNN (Luo et al., 2016): the gradient of
  the stage's centre unit (summed over its channels) with respect to the input pixels, one backward per stage.
- :func:`theoretical_rf`: the receptive field a stage could have (every kernel and stride up to it).
- :class:`ShiftProbe`: one batch of the picture moved right by 0, 1, …, d pixels; how far each stage's map (or a
  ViT's patch tokens) is from the unshifted one moved along, and the class probabilities per shift.

Shapes: a picture x is (1, 3, H, W); a stage's map (1, C, H / s, W / s) for its output stride s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from vitviz.models import hooks
from vitviz.specs.registry import ModelSpec

# ---- which modules are the stages --------------------------------------------------------------------------

_STAGE_PATHS = {
    "SmallCNN": (("stem", "stem"), ("stage 1", "stage1"), ("stage 2", "stage2"), ("stage 3", "stage3"),
                 ("stage 4", "stage4")),
    "ResNet": (("stem + max pool", "maxpool"), ("stage 1", "layer1"), ("stage 2", "layer2"), ("stage 3", "layer3"),
               ("stage 4", "layer4")),
}
_SKIP = ("short", "downsample")
"""Shortcut branches: a 1x1 projection does not widen the receptive field and its stride is already counted."""


def stage_paths(model: torch.nn.Module) -> tuple[tuple[str, str], ...]:
    """(label, module path) of a supported CNN's stages, input side first."""
    name = type(model).__name__
    if name not in _STAGE_PATHS:
        raise ValueError(f"{name} is not a CNN whose stages vitviz knows.")
    return _STAGE_PATHS[name]


def theoretical_rf(model: torch.nn.Module, path: str) -> tuple[int, int]:
    """(receptive field width, output stride) in input pixels of module ``path``'s output.

    Walks every convolution and pooling layer up to the end of ``path`` in the order they are built (which is the
    order they run in these networks), skipping shortcut projections: r grows by (k - 1) * j, j by the stride.
    """
    rf, jump, inside = 1, 1, False
    for name, mod in model.named_modules():
        within = name == path or name.startswith(path + ".")
        if inside and not within:
            break
        inside = inside or within
        if any(part in name.split(".") for part in _SKIP):
            continue
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.MaxPool2d, torch.nn.AvgPool2d)):
            k = mod.kernel_size[0] if isinstance(mod.kernel_size, tuple) else mod.kernel_size
            s = mod.stride[0] if isinstance(mod.stride, tuple) else mod.stride
            d = mod.dilation[0] if isinstance(getattr(mod, "dilation", 1), tuple) else getattr(mod, "dilation", 1)
            rf += (d * (k - 1)) * jump
            jump *= s
    return rf, jump


# ---- effective receptive field -----------------------------------------------------------------------------

@dataclass
class Erf:
    """Effective receptive fields of a CNN's stages on one picture.

    Attributes:
        labels: stage names.
        maps: per stage, (H, W) |d(sum over channels of the centre unit) / d(input)|, summed over colour channels.
        centres: per stage, the centre unit's position in input pixels (y, x).
        strides, rf: per stage, the output stride and the theoretical receptive field width (pixels).
    """

    labels: list[str]
    maps: list[np.ndarray]
    centres: list[tuple[float, float]]
    strides: list[int]
    rf: list[int]

    def mean_distance(self) -> np.ndarray:
        """(stages,) gradient-weighted mean distance in pixels from the centre unit: the measure the ViT's mean
        attention distance uses with attention weights."""
        return np.array([_weighted_distance(m, c) for m, c in zip(self.maps, self.centres)])

    def width(self, share: float = 0.9) -> np.ndarray:
        """(stages,) diameter in pixels of the disc around the centre unit holding ``share`` of the gradient."""
        out = []
        for m, (cy, cx) in zip(self.maps, self.centres):
            yy, xx = np.indices(m.shape)
            d = np.hypot(yy - cy, xx - cx).ravel()
            order = np.argsort(d, kind="stable")
            mass = np.cumsum(m.ravel()[order])
            total = mass[-1]
            out.append(2 * float(d[order][np.searchsorted(mass, share * total)]) if total > 0 else float("nan"))
        return np.array(out)


def _weighted_distance(m: np.ndarray, centre: tuple[float, float]) -> float:
    yy, xx = np.indices(m.shape)
    total = float(m.sum())
    return float((m * np.hypot(yy - centre[0], xx - centre[1])).sum() / total) if total > 0 else float("nan")


def unit_centre(cell, stride: int, offset: float = 0.0):
    """Input-pixel position of output cell ``cell`` of a stage with output stride ``stride``. Convolutions padded
    by (k - 1) / 2 on each side centre cell i on pixel i * s (``offset`` 0); a ViT's patch i covers pixels
    i * P … i * P + P - 1 (``offset`` (P - 1) / 2)."""
    return cell * stride + offset


@dataclass(frozen=True)
class ErfProbe:
    """Every stage's effective receptive field in one forward and one backward per stage (needs autograd)."""

    paths: tuple[str, ...]
    bytes_per_pixel: int = 4096
    grad: bool = True
    own_size: bool = False

    @property
    def key(self) -> tuple:
        return ("erf", self.paths)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return tokens * spec.patch ** 2 * self.bytes_per_pixel

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward) -> tuple[list[np.ndarray], list]:
        return erf_maps(model, x, self.paths)

    def nbytes(self, out: tuple[list[np.ndarray], list]) -> int:
        return sum(m.nbytes for m in out[0])


def erf_maps(model: torch.nn.Module, x: torch.Tensor,
             paths: tuple[str, ...]) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """For one picture x (1, 3, H, W), each path's (H, W) gradient map of its centre unit, and that unit's cell
    (row, col) in the path's (h, w) map; needs autograd on."""
    x = x.detach().clone().requires_grad_(True)
    mods = dict(model.named_modules())
    with hooks.capture({p: (mods[p], "output") for p in paths}) as seen:
        model(x)
    maps, cells = [], []
    for i, p in enumerate(paths):
        y = seen[p]  # (1, C, h, w)
        cell = (y.shape[-2] // 2, y.shape[-1] // 2)
        (g,) = torch.autograd.grad(y[0, :, cell[0], cell[1]].sum(), x, retain_graph=i < len(paths) - 1)
        maps.append(g[0].abs().sum(0).float().numpy())
        cells.append(cell)
    return maps, cells


def receptive_fields(runner, rgb: np.ndarray, resolution: int) -> tuple[Erf, object]:
    """The CNN ``runner``'s effective receptive fields on ``rgb`` fitted to ``resolution`` (aspect kept), and the
    run (its ``fitted`` picture, ``resolution`` used)."""
    labels, paths = zip(*runner.read(stage_paths))
    run = runner.analyse(ErfProbe(tuple(paths)), rgb, resolution)
    info = runner.read(lambda m: [theoretical_rf(m, p) for p in paths])
    maps, cells = run.value
    centres = [(unit_centre(r, s), unit_centre(c, s)) for (r, c), (_, s) in zip(cells, info)]
    return Erf(list(labels), maps, centres, [s for _, s in info], [r for r, _ in info]), run


# ---- translation -------------------------------------------------------------------------------------------

def shifted(x: torch.Tensor, shifts: list[int]) -> torch.Tensor:
    """(1, 3, H, W) -> (len(shifts), 3, H, W): the content moved right by each shift, the strip it leaves filled
    by reflecting the picture's own left edge (no black bar that a model would see as an edge)."""
    pad = max(max(shifts), 1)
    wide = F.pad(x, (pad, 0, 0, 0), mode="reflect")
    w = x.shape[-1]
    return torch.cat([wide[..., pad - d:pad - d + w] for d in shifts])


def valid_cells(width: int, stride: int, rf: int, shift: int, offset: float = 0.0) -> np.ndarray:
    """Output columns whose receptive field lies inside the picture both before and after a right shift of
    ``shift`` pixels, and whose partner column (this one minus shift / stride) does too."""
    cells = np.arange(-(-width // stride))
    c = unit_centre(cells, stride, offset)
    half = (rf - 1) / 2
    k = shift / stride
    return cells[(c - half >= shift) & (c + half <= width - 1) & (cells - k >= 0)]


def equivariance_error(maps: torch.Tensor, stride: int, rf: int, shifts: list[int], width: int,
                       offset: float = 0.0) -> np.ndarray:
    """(len(shifts),) relative distance between each shifted picture's map and the unshifted map moved along.

    maps (S, C, h, w) for the shifts in order, shifts[0] == 0. A shift d moves a stride-s map by d / s cells:
    whole cells only when s divides d; otherwise the nearest whole number of cells is the best a grid can do.
    Only columns whose receptive field stays inside the picture are compared (the rest see the new strip or the
    zero padding); NaN when none are left.
    """
    base = maps[0]
    out = []
    for i, d in enumerate(shifts):
        k = round(d / stride)
        cols = valid_cells(width, stride, rf, d, offset)
        cols = cols[(cols - k >= 0) & (cols < maps.shape[-1])]
        if len(cols) == 0:
            out.append(float("nan"))
            continue
        a, b = maps[i][..., cols], base[..., cols - k]
        out.append(float((a - b).norm() / b.norm().clamp_min(1e-12)))
    return np.array(out)


@dataclass
class Shifts:
    """What shifting the picture did: per shift, the stages' (or patch tokens') error and the class probabilities.

    Attributes:
        shifts: (S,) pixels, starting at 0.
        labels: names of the maps compared (CNN stages, or "patch tokens").
        strides: their output strides (pixels).
        errors: (maps, S) relative equivariance error (NaN where no column could be compared).
        probs: (S, K) softmax of the logits.
    """

    shifts: np.ndarray
    labels: list[str]
    strides: list[int]
    errors: np.ndarray
    probs: np.ndarray

    def top(self) -> int:
        """The unshifted picture's top class."""
        return int(self.probs[0].argmax())

    def stability(self) -> np.ndarray:
        """(S,) probability of the unshifted picture's top class at each shift."""
        return self.probs[:, self.top()]

    def same_top(self) -> np.ndarray:
        """(S,) whether the top class is still the unshifted one."""
        return self.probs.argmax(1) == self.top()


@dataclass(frozen=True)
class ShiftProbe:
    """One forward of a batch of shifted pictures: the maps of ``paths`` (CNN stages, or a ViT's patch embedding)
    compared as :func:`equivariance_error` does, and the logits. ``rf`` and ``strides`` per path."""

    paths: tuple[str, ...]
    strides: tuple[int, ...]
    rf: tuple[int, ...]
    shifts: tuple[int, ...]
    tokens: bool = False
    bytes_per_pixel: int = 256
    grad: bool = False
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("shift", self.paths, self.shifts)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        return tokens * spec.patch ** 2 * self.bytes_per_pixel

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward) -> tuple[np.ndarray, np.ndarray]:
        mods = dict(model.named_modules())
        with hooks.capture({p: (mods[p], "output") for p in self.paths}) as seen:
            logits, _ = forward(x)
        errors = []
        for p, s, r in zip(self.paths, self.strides, self.rf):
            m = seen[p].float()
            if self.tokens:  # a ViT's patch embedding: (S, N, D) or (S, gh, gw, D) -> (S, D, gh, gw)
                g = x.shape[-1] // s
                m = m.reshape(m.shape[0], -1, g, m.shape[-1]).permute(0, 3, 1, 2)
            offset = (s - 1) / 2 if self.tokens else 0.0
            errors.append(equivariance_error(m, s, r, list(self.shifts), x.shape[-1], offset))
        return np.stack(errors), torch.softmax(logits.float(), -1).numpy()

    def nbytes(self, out) -> int:
        return 0


def shift_experiment(runner, x: torch.Tensor, shifts: list[int], vit: bool) -> Shifts:
    """Shift ``x`` (1, 3, H, W, the model's own preprocessing) by each of ``shifts`` and measure.

    For a CNN every stage's map is compared; for a ViT its patch tokens straight after the patch embedding
    (before position embeddings are added), which move by one token per P pixels.
    """
    batch = shifted(x, shifts)
    if vit:
        p = runner.spec.patch
        probe = ShiftProbe(("patch_embed",), (p,), (p,), tuple(shifts), tokens=True)
        labels, strides = ["ViT patch tokens"], [p]
    else:
        labels, paths = zip(*runner.read(stage_paths))
        info = runner.read(lambda m: [theoretical_rf(m, q) for q in paths])
        probe = ShiftProbe(tuple(paths), tuple(s for _, s in info), tuple(r for r, _ in info), tuple(shifts))
        labels, strides = list(labels), [s for _, s in info]
    errors, probs = runner.run(probe, batch)
    return Shifts(np.asarray(shifts), list(labels), strides, errors, probs)


def nice(value: float) -> str:
    """A relative error for text: '< 1e-6' near float32 rounding, else 3 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return "< 1e-6" if value < 1e-6 else f"{value:.3g}"
