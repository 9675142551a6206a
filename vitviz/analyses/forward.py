"""One picture's whole forward pass: every stage's real tensor, the residual stream and the logit lens.

One forward (fused attention) is recorded by hooks:

- the stages: the picture (3, H, W); its patches flattened (N, 3·P²), the patch embeddings (N, D); the tokens
  entering the first block, [CLS] (and registers) prepended and position embeddings added (T, D); each block's
  output (T, D); the final LayerNorm (T, D); for a classifier the head's logits and their softmax (C,);
- the residual stream: each token's norm after the embedding and after every block; how much each block's
  attention and MLP change the [CLS] token (the norm of what they add over the norm of what they add to); how
  close [CLS] already is to its final value (cosine with the last block's output);
- the logit lens (models with a head): every layer's [CLS] and patch tokens read through the model's own final
  LayerNorm and head, as if the model stopped there. At the last layer this is exactly the model's prediction.
  It is a probe: the intermediate layers were never trained to be read this way.

Shapes: B = 1 picture, T = prefix + N tokens of width D, N = gh·gw patches of P×P pixels, L blocks, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.core.images import Fitted
from vitviz.models import budget, hooks
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
        prefix_norms: (L + 1, prefix) the same for [CLS] (first) and the registers.
        attn_update, mlp_update: (L,) relative size of what attention and the MLP add to [CLS] in each block.
        cls_cosine: (L + 1,) cosine of [CLS] after the embedding and after every block with its last value.
        probs: (C,) the model's own softmax, or None without a head.
        lens: (L, C) the softmax of every block's [CLS] through the final norm and the head (the last = probs).
        lens_patches: (L, N) at every block, each patch token's probability of the model's final class, read
            through the same norm and head.
        labels: the class names (None without a head).
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


# ---- where each library keeps each part --------------------------------------------------------------------

def _first(model: torch.nn.Module, *names: str) -> torch.nn.Module | None:
    """The first of the dotted attribute paths ``names`` that ``model`` has (None if none)."""
    for name in names:
        obj = model
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.Module):
            return obj
    return None


@dataclass(frozen=True)
class Parts:
    """The modules of a timm or transformers ViT the forward pass is read from."""

    patch_embed: torch.nn.Module
    blocks: list[torch.nn.Module]
    attn_out: list[torch.nn.Module]  # what each block's attention adds to the stream (after any layer scale)
    norm: torch.nn.Module  # the final LayerNorm
    fc_norm: torch.nn.Module | None  # timm's norm after pooling (Identity for token pooling)
    head: torch.nn.Module | None  # the classifier (None: no classes, e.g. DINO)


def parts_of(model: torch.nn.Module) -> Parts:
    """Find the parts of ``model`` (timm VisionTransformer, transformers ViT/DeiT/DINOv2, with or without a head);
    ValueError for a model whose layout vitviz does not know."""
    blocks = hooks.blocks(model)
    patch_embed = _first(model, "patch_embed", "embeddings.patch_embeddings", "vit.embeddings.patch_embeddings")
    norm = _first(model, "norm", "layernorm", "vit.layernorm", "dinov2.layernorm")
    if patch_embed is None or norm is None or not blocks:
        raise ValueError(f"{type(model).__name__}: vitviz cannot read its forward pass (no patch embedding, blocks "
                         "and final norm where a ViT keeps them).")
    attn_out = [_first(b, "ls1", "layer_scale1", "attention", "attn") for b in blocks]
    head = _first(model, "head", "classifier")
    if head is not None and (isinstance(head, torch.nn.Identity) or not any(True for _ in head.parameters())):
        head = None
    fc_norm = _first(model, "fc_norm")
    return Parts(patch_embed, blocks, attn_out, norm, fc_norm, head)


# ---- the probe ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ForwardProbe:
    """Records one forward's stages (see :class:`ForwardPass`); ``prefix`` tokens before the patches, ``patch``
    pixels a side, ``labels`` of the head."""

    prefix: int
    patch: int
    labels: tuple[str, ...] | None = None
    grad: bool = False
    checkpoint_input: bool = False

    @property
    def key(self) -> tuple:
        return ("forward", self.prefix, self.patch)

    def estimate(self, spec: ModelSpec, tokens: int) -> int:
        """A fused forward, every block's stream kept (L + 3 (T, D) float32 tensors) and the lens's logits of one
        layer's tokens at a time (T × 1000 float32, twice)."""
        return budget.forward_bytes(spec, tokens) + (spec.depth + 3) * tokens * spec.dim * 4 + 2 * tokens * 1000 * 4

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> ForwardPass:
        p = parts_of(model)
        targets = {"patches": (p.patch_embed, "output"), "final": (p.norm, "output")}
        targets |= {f"block{i}": (b, "output") for i, b in enumerate(p.blocks)}
        targets |= {f"in{i}": (b, "input") for i, b in enumerate(p.blocks)}
        targets |= {f"attn{i}": (m, "output") for i, m in enumerate(p.attn_out)}
        if p.head is not None:
            targets["logits"] = (p.head, "output")
        with hooks.capture(targets) as seen:
            forward(x)
        return _assemble(p, x, seen, self.prefix, self.patch, list(self.labels) if self.labels else None)

    def nbytes(self, out: ForwardPass) -> int:
        return out.nbytes


def _tokens(t: torch.Tensor) -> torch.Tensor:
    """(T, D) float32 of a (1, T, D) stream, or of timm's (1, gh, gw, D) patch grid (dynamic sizes)."""
    t = t.detach().float()[0]
    return t.reshape(-1, t.shape[-1])


def _assemble(p: Parts, x: torch.Tensor, seen: dict, prefix: int, patch: int,
              labels: list[str] | None) -> ForwardPass:
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    blocks = [_tokens(seen[f"block{i}"]) for i in range(len(p.blocks))]
    ins = [_tokens(seen[f"in{i}"]) for i in range(len(p.blocks))]
    attn = [_tokens(seen[f"attn{i}"]) for i in range(len(p.blocks))]
    first = ins[0]
    embedded = _tokens(seen["patches"])
    final = _tokens(seen["final"])
    pixels = torch.nn.functional.unfold(x.detach().float(), patch, stride=patch)[0].T  # (N, 3·P²)

    stream = [first] + blocks  # (L + 1) × (T, D)
    norms = torch.stack([s[prefix:].norm(dim=-1) for s in stream])  # (L + 1, N)
    prefix_norms = torch.stack([s[:prefix].norm(dim=-1) for s in stream])
    attn_update = torch.stack([a[0].norm() / i[0].norm() for a, i in zip(attn, ins)])
    mid = [i + a for i, a in zip(ins, attn)]  # the stream between attention and MLP
    mlp_update = torch.stack([(o[0] - m[0]).norm() / m[0].norm() for o, m in zip(blocks, mid)])
    last = blocks[-1][0]
    cls_cosine = torch.stack([torch.nn.functional.cosine_similarity(s[0], last, dim=0) for s in stream])

    def patch_map(t: torch.Tensor) -> np.ndarray:
        return t.norm(dim=-1).reshape(gh, gw).numpy()

    stages = [
        Stage("image", tuple(x.shape[1:]), ("colour channels", "height in pixels", "width in pixels"),
              x[0].detach().float().mean(0).numpy()),
        Stage("patches, flattened", tuple(pixels.shape), ("patches", f"pixel values per patch (3·{patch}·{patch})"),
              patch_map(pixels)),
        Stage("patch embeddings", tuple(embedded.shape), ("patches", "token width"), patch_map(embedded)),
        Stage("tokens entering block 1", tuple(first.shape), ("tokens ([CLS]" + (", registers" if prefix > 1 else "")
              + " and patches)", "token width"), patch_map(first[prefix:])),
    ]
    stages += [Stage(f"block {i + 1}", tuple(b.shape), ("tokens", "token width"), patch_map(b[prefix:]))
               for i, b in enumerate(blocks)]
    stages.append(Stage("final LayerNorm", tuple(final.shape), ("tokens", "token width"), patch_map(final[prefix:])))
    out = ForwardPass(stages, (gh, gw), prefix, norms.numpy(), prefix_norms.numpy(), attn_update.numpy(),
                      mlp_update.numpy(), cls_cosine.numpy(), labels=labels)
    if p.head is None:
        return out
    logits = seen["logits"].detach().float()[0]
    logits = logits.reshape(-1, logits.shape[-1])[0]  # (C,)
    probs = torch.softmax(logits.double(), -1)
    out.stages += [Stage("head: logits", tuple(logits.shape), ("classes",), logits[None].numpy()),
                   Stage("softmax: probabilities", tuple(probs.shape), ("classes",), probs[None].float().numpy())]
    target = int(probs.argmax())
    lens, lens_patches = [], []
    for b in blocks:  # one layer's tokens at a time through the final norm and the head
        read = lens_logits(p, b)
        lens.append(torch.softmax(read[0].double(), -1))
        lens_patches.append(torch.softmax(read[prefix:].double(), -1)[:, target])
    out.probs, out.lens = probs.numpy(), torch.stack(lens).numpy()
    out.lens_patches = torch.stack(lens_patches).float().numpy()
    return out


def lens_logits(p: Parts, tokens: torch.Tensor) -> torch.Tensor:
    """(T, C) logits of every token of a (T, D) stream read through the model's final norm, its norm after pooling
    (timm's ``fc_norm``, Identity for token pooling) and its head: what the model would answer if that token were
    its final [CLS]."""
    t = p.norm(tokens[None])[0]
    if p.fc_norm is not None:
        t = p.fc_norm(t)
    return p.head(t).float()


def forward_pass(runner: Runner, rgb: np.ndarray, resolution: int) -> tuple[Fitted, ForwardPass]:
    """The picture fitted as the Attention tab fits it and its forward pass (one forward, kept with the picture)."""
    probe = ForwardProbe(runner.spec.prefix, runner.spec.patch, tuple(runner.labels) if runner.labels else None)
    run = runner.analyse(probe, rgb, resolution)
    return run.fitted, run.value
