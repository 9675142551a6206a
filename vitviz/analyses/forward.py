"""One picture's whole forward pass: every stage's real tensor, the residual stream and the logit lens.

One forward (fused attention) is recorded by hooks:

- the stages: the picture (3, H, W); its patches flattened (N, 3·P²), the patch embeddings (N, D); the tokens
  entering the first block, [CLS] (and registers) prepended and position embeddings added (T, D); each block's
  output (T, D); the final LayerNorm (T, D); for a classifier the head's logits and their softmax (C,);
- the residual stream: each token's norm after the embedding and after every block; how much each block's
  attention and MLP change the [CLS] token (the norm of what they add over the norm of what they add to); how
  close [CLS] already is to its final value (cosine with the last block's output);
- the logit lens (models with a head): every layer's tokens read through the model's own final norm, pooling and
  head (:class:`Parts`' ``readout``: [CLS], the mean of the patches, a distilled DeiT's two heads averaged), as if
  the model stopped there; and each patch token read alone the same way. At the last layer this is the model's
  own computation, so its prediction up to float32 rounding. It is a probe: the intermediate layers were never
  trained to be read this way.

Shapes: B = 1 picture, T = prefix + N tokens of width D, N = gh·gw patches of P×P pixels, L blocks, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
from vitviz.models.parts import (LENS_CHUNK_BYTES, Parts, _is_identity, layer_scale_sizes, lens, parts_of,
                                 prefix_kinds, prefix_names, stream, stream_targets)

__all__ = ["ForwardPass", "ForwardProbe", "Parts", "Stage", "forward_pass", "parts_of"]
from vitviz.models.runner import Forward, Runner
from vitviz.specs.registry import ModelSpec


@dataclass(frozen=True)
class Stage:
    """One step of the forward pass: its name, its tensor's shape (batch left out), what each axis counts, and a
    glimpse of its values (a small 2D array: a map over the patches, or the values themselves)."""

    name: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]
    glimpse: np.ndarray


@dataclass
class ForwardPass:
    """What one forward computed, as numpy (see the module's text).

    Attributes:
        stages: the steps in order.
        grid: (gh, gw) patches; prefix: tokens before them.
        norms: (L + 1, N) each patch token's norm after the embedding and after every block.
        prefix_norms: (L + 1, prefix) the same for [CLS] (first), a distillation token, and the registers.
        attn_update, mlp_update: (L,) relative size of what attention and the MLP add, in each block, to the token
            the head reads (``tracks``: [CLS], or the mean of the patch tokens for a model that pools them).
        cls_cosine: (L + 1,) cosine of that token after the embedding and after every block with its last value.
        probs: (C,) the model's own softmax (its own output: a distilled DeiT's two heads averaged), or None.
        lens: (L, C) the softmax of every block's tokens read through the model's own final norm, pooling and
            head (the last = probs, up to float32 rounding).
        lens_patches: (L, N) at every block, each patch token's probability of the model's final class, read
            through the same norm and head as if it were the token(s) the head pools.
        labels: the class names (None without a head).
        tracks, pool: what the head reads, and the model's pooling (:class:`Parts`).
        registers: register tokens among the prefix; pos_on_prefix: which prefix tokens get a position embedding;
            prefix_kinds: what each prefix token is ("[CLS]", "distillation", "register").
        layer_scale: per block, the mean absolute LayerScale scale after attention and after the MLP (γ₁, γ₂), or
            () for a model without LayerScale (:func:`vitviz.models.parts.layer_scale_sizes`).
    """

    stages: list[Stage]
    grid: tuple[int, int]
    prefix: int
    norms: np.ndarray
    prefix_norms: np.ndarray
    attn_update: np.ndarray
    mlp_update: np.ndarray
    cls_cosine: np.ndarray
    probs: np.ndarray | None = None
    lens: np.ndarray | None = None
    lens_patches: np.ndarray | None = None
    labels: list[str] | None = field(default=None)
    tracks: str = "[CLS]"
    pool: str = "token"
    registers: int = 0
    pos_on_prefix: tuple[bool, ...] = ()
    prefix_kinds: tuple[str, ...] = ()
    layer_scale: tuple[tuple[float, float], ...] = ()

    @property
    def layers(self) -> int:
        return len(self.attn_update)

    @property
    def nbytes(self) -> int:
        arrays = [self.norms, self.prefix_norms, self.probs, self.lens, self.lens_patches]
        return sum(a.nbytes for a in arrays if a is not None) + sum(s.glimpse.nbytes for s in self.stages)

    def top(self, probs: np.ndarray, k: int = 5) -> dict[str, float]:
        """The ``k`` most likely class names of a (C,) softmax, with their probabilities."""
        order = np.argsort(-probs, kind="stable")[:k]
        return {self.labels[i] if self.labels else str(i): float(probs[i]) for i in order}


# ---- the probe ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ForwardProbe:
    """Records one forward's stages (see :class:`ForwardPass`); ``prefix`` tokens before the patches, ``patch``
    pixels a side, ``labels`` of the head."""

    prefix: int
    patch: int
    labels: tuple[str, ...] | None = None
    grad: bool = False
    own_size: bool = False
    shares: bool = True  # its hooks see its own thread only and it changes nothing on the module
    timed: bool = True  # one forward and its records: its time is the server's forward time (runner.note_forward)

    @property
    def key(self) -> tuple:
        return ("forward", self.prefix, self.patch)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        """A fused forward, every block's stream kept (L + 3 (T, D) float32 tensors), the lens's copies of one
        layer's tokens (prefix + 1 each) and its logits a chunk at a time (:data:`LENS_CHUNK_BYTES`, twice)."""
        return (budget.forward_bytes(spec, tokens) + (spec.depth + 3 + spec.prefix + 1) * tokens * spec.dim * 4
                + 2 * LENS_CHUNK_BYTES)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> ForwardPass:
        p = parts_of(model)
        with hooks.capture(stream_targets(p)) as seen:
            logits, _ = forward(x)  # the model's own answer (a distilled DeiT's two heads averaged, say)
        labels = list(self.labels) if self.labels else None
        return _assemble(p, x, seen, self.prefix, self.patch, labels, logits if p.readout is not None else None)

    def nbytes(self, out: ForwardPass) -> int:
        return out.nbytes


def _assemble(p: Parts, x: torch.Tensor, seen: dict, prefix: int, patch: int, labels: list[str] | None,
              logits: torch.Tensor | None) -> ForwardPass:
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    st = stream(p, seen, prefix)
    blocks, first, embedded, final = st.tokens[1:], st.tokens[0], st.embedded, st.final
    pixels = torch.nn.functional.unfold(x.detach().float(), patch, stride=patch)[0].T  # (N, 3·P²)
    norms, prefix_norms = st.norms[:, prefix:], st.norms[:, :prefix]
    attn_update, mlp_update, cls_cosine = st.attn_update, st.mlp_update, st.cosine

    def patch_map(t: torch.Tensor) -> np.ndarray:
        return t.norm(dim=-1).reshape(gh, gw).numpy()

    glimpses = {"image": lambda: x[0].detach().float().mean(0).numpy(), "patches, flattened": lambda: patch_map(pixels),
                "patch embeddings": lambda: patch_map(embedded),
                "tokens entering block 1": lambda: patch_map(first[prefix:]),
                "final LayerNorm": lambda: patch_map(final[prefix:]),
                "pooled: the mean of the patch tokens": lambda: final[prefix:].mean(0)[None].numpy(),
                "LayerNorm after pooling": lambda: p.fc_norm(final[prefix:].mean(0)[None])[0].float()[None].numpy()}
    glimpses |= {f"block {i + 1}": (lambda b=b: patch_map(b[prefix:])) for i, b in enumerate(blocks)}
    sizes = {"H": int(x.shape[-2]), "W": int(x.shape[-1]), "N": gh * gw, "T": prefix + gh * gw}
    stages = [Stage(name, tuple(sizes.get(n, n) for n in shape), axes, glimpses[name]())
              for name, shape, axes in stage_plan(p, prefix, patch, int(first.shape[-1]), None)]
    out = ForwardPass(stages, (gh, gw), prefix, norms.numpy(), prefix_norms.numpy(), attn_update.numpy(),
                      mlp_update.numpy(), cls_cosine.numpy(), labels=labels, tracks=p.tracks, pool=p.pool,
                      registers=p.registers, pos_on_prefix=p.pos_on_prefix, prefix_kinds=prefix_kinds(p, prefix),
                      layer_scale=layer_scale_sizes(p))
    if p.readout is None or logits is None:
        return out
    logits = logits.detach().float().reshape(-1, logits.shape[-1])[0]  # (C,): the model's own answer
    probs = torch.softmax(logits.double(), -1)
    head = stage_plan(p, prefix, patch, int(first.shape[-1]), int(logits.shape[-1]))[len(out.stages):]
    out.stages += [Stage(*head[0], logits[None].numpy()), Stage(*head[1], probs[None].float().numpy())]
    target = int(probs.argmax())
    lens_rows, lens_patches = lens(p, blocks, prefix, target)  # as if the model stopped after each block
    out.probs, out.lens = probs.numpy(), lens_rows.numpy()
    out.lens_patches = lens_patches.float().numpy()
    return out


def stage_plan(p: Parts, prefix: int, patch: int, dim: int,
               classes: int | None) -> list[tuple[str, tuple[int | str, ...], tuple[str, ...]]]:
    """The forward pass's stages for this model: (name, shape, what each axis counts), the shape's sizes that
    depend on the picture given as "H", "W" (pixels), "N" (patches) and "T" (tokens); with ``classes``, the head's
    two stages too. :func:`_assemble` and the device's Forward-pass view (its manifest) both follow it."""
    entering = "tokens (" + ", ".join(prefix_names(p, prefix) + ["patches)"]) if prefix else \
        "tokens (the patches: this model has no [CLS])"
    plan: list[tuple[str, tuple[int | str, ...], tuple[str, ...]]] = [
        ("image", (3, "H", "W"), ("colour channels", "height in pixels", "width in pixels")),
        ("patches, flattened", ("N", 3 * patch * patch), ("patches", f"pixel values per patch (3·{patch}·{patch})")),
        ("patch embeddings", ("N", dim), ("patches", "token width")),
        ("tokens entering block 1", ("T", dim), (entering, "token width")),
    ]
    plan += [(f"block {i + 1}", ("T", dim), ("tokens", "token width")) for i in range(len(p.blocks))]
    if not _is_identity(p.norm):
        plan.append(("final LayerNorm", ("T", dim), ("tokens", "token width")))
    if p.pool not in ("token", "distilled", "cls+mean"):  # the head reads one vector made from the patches
        plan.append(("pooled: the mean of the patch tokens", (dim,), ("token width",)))
        if not _is_identity(p.fc_norm):
            plan.append(("LayerNorm after pooling", (dim,), ("token width",)))
    if classes is not None and p.readout is not None:
        plan += [("head: logits", (classes,), ("classes",)), ("softmax: probabilities", (classes,), ("classes",))]
    return plan


def forward_pass(runner: Runner, rgb: np.ndarray, resolution: int) -> tuple[Fitted, ForwardPass]:
    """The picture fitted as the Attention tab fits it and its forward pass (one forward, kept with the picture)."""
    probe = ForwardProbe(runner.spec.prefix, runner.spec.patch, tuple(runner.labels) if runner.labels else None)
    run = runner.analyse(probe, rgb, resolution)
    return run.fitted, run.value
