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

from collections.abc import Callable
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
    """The modules of a timm or transformers ViT the forward pass is read from, and how its head reads the tokens.

    ``readout`` is the model's own last step, from the tokens after its final norm to its logits: (B, T, D) ->
    (B, C), its pooling included (timm's ``forward_head``: [CLS], the mean of the patch tokens, [CLS] and the
    distillation token averaged, an attention pool; transformers' classifiers, DINOv2's [CLS] beside the patches'
    mean). ``pool`` names that pooling; ``reads`` says in words which token(s) it reads."""

    patch_embed: torch.nn.Module
    blocks: list[torch.nn.Module]
    attn_out: list[torch.nn.Module]  # what each block's attention adds to the stream (after any layer scale)
    norm: torch.nn.Module  # the final norm over every token (Identity when the model normalises after pooling)
    fc_norm: torch.nn.Module | None  # timm's norm after pooling (None, or Identity, for token pooling)
    readout: Callable[[torch.Tensor], torch.Tensor] | None  # None: no classes (e.g. DINO)
    pool: str = "token"  # "token", "avg", "distilled", "cls+mean", or another of timm's global pools
    class_token: bool = True  # the stream's first token is [CLS] (a pooling model may have none)
    registers: int = 0  # register tokens among the prefix
    pos_on_prefix: tuple[bool, ...] = ()  # which prefix tokens get a position embedding added

    @property
    def tracks(self) -> str:
        """The token whose path through the stream the residual view follows: what the head reads."""
        return "[CLS]" if self.pool in ("token", "distilled", "cls+mean") and self.class_token else \
            "the mean of the patch tokens"


def _is_identity(m: torch.nn.Module | None) -> bool:
    return m is None or isinstance(m, torch.nn.Identity)


def parts_of(model: torch.nn.Module) -> Parts:
    """Find the parts of ``model`` (timm VisionTransformer and its distilled DeiT, transformers ViT/DeiT/DINOv2 ±
    registers, with or without a head); ValueError for a model whose layout vitviz does not know."""
    blocks = hooks.blocks(model)
    patch_embed = _first(model, "patch_embed", "embeddings.patch_embeddings", "base_model.embeddings.patch_embeddings")
    norm = _first(model, "norm", "layernorm", "base_model.layernorm")
    if patch_embed is None or norm is None or not blocks:
        raise ValueError(f"{type(model).__name__}: vitviz cannot read its forward pass (no patch embedding, blocks "
                         "and final norm where a ViT keeps them).")
    attn_out = [_first(b, "ls1", "layer_scale1", "attention", "attn") for b in blocks]
    if hasattr(model, "forward_head"):  # timm
        head = _first(model, "head")
        classes = head is not None and not _is_identity(head) and any(True for _ in head.parameters())
        distilled = hasattr(model, "head_dist")
        pool = "distilled" if distilled else (getattr(model, "global_pool", "token") or "token")
        prefix = int(getattr(model, "num_prefix_tokens", 1))
        registers = int(getattr(model, "num_reg_tokens", 0) or 0)
        pos_prefix = not getattr(model, "no_embed_class", False) and getattr(model, "pos_embed", None) is not None
        return Parts(patch_embed, blocks, attn_out, norm, _first(model, "fc_norm"),
                     (lambda z: model.forward_head(z)) if classes else None, pool,
                     getattr(model, "cls_token", None) is not None, registers, (pos_prefix,) * prefix)
    base = getattr(model, "base_model", model)
    registers = int(getattr(model.config, "num_register_tokens", 0) or 0)
    distilled = hasattr(base.embeddings, "distillation_token")
    prefix = 1 + int(distilled) + registers
    pos = (True,) * (1 + int(distilled)) + (False,) * registers  # transformers: registers go in after the positions
    if hasattr(model, "cls_classifier") and hasattr(model, "distillation_classifier"):  # DeiT with its teacher's head
        def readout(z):
            return (model.cls_classifier(z[:, 0]) + model.distillation_classifier(z[:, 1])) / 2
        return Parts(patch_embed, blocks, attn_out, norm, None, readout, "distilled", True, registers, pos)
    classifier = _first(model, "classifier")
    if classifier is None or _is_identity(classifier):
        return Parts(patch_embed, blocks, attn_out, norm, None, None, "token", True, registers, pos)
    if type(model).__name__.startswith("Dinov2"):  # [CLS] beside the mean of the patch tokens (registers left out)
        def readout(z):
            return classifier(torch.cat([z[:, 0], z[:, prefix:].mean(1)], dim=1))
        return Parts(patch_embed, blocks, attn_out, norm, None, readout, "cls+mean", True, registers, pos)
    return Parts(patch_embed, blocks, attn_out, norm, None, lambda z: classifier(z[:, 0]), "token", True,
                 registers, pos)


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
        targets = {"patches": (p.patch_embed, "output"), "final": (p.norm, "output")}
        targets |= {f"block{i}": (b, "output") for i, b in enumerate(p.blocks)}
        targets |= {f"in{i}": (b, "input") for i, b in enumerate(p.blocks)}
        targets |= {f"attn{i}": (m, "output") for i, m in enumerate(p.attn_out)}
        with hooks.capture(targets) as seen:
            logits, _ = forward(x)  # the model's own answer (a distilled DeiT's two heads averaged, say)
        labels = list(self.labels) if self.labels else None
        return _assemble(p, x, seen, self.prefix, self.patch, labels, logits if p.readout is not None else None)

    def nbytes(self, out: ForwardPass) -> int:
        return out.nbytes


def _tokens(t: torch.Tensor) -> torch.Tensor:
    """(T, D) float32 of a (1, T, D) stream, or of timm's (1, gh, gw, D) patch grid (dynamic sizes)."""
    t = t.detach().float()[0]
    return t.reshape(-1, t.shape[-1])


def _assemble(p: Parts, x: torch.Tensor, seen: dict, prefix: int, patch: int, labels: list[str] | None,
              logits: torch.Tensor | None) -> ForwardPass:
    gh, gw = x.shape[-2] // patch, x.shape[-1] // patch
    blocks = [_tokens(seen[f"block{i}"]) for i in range(len(p.blocks))]
    ins = [_tokens(seen[f"in{i}"]) for i in range(len(p.blocks))]
    attn = [_tokens(seen[f"attn{i}"]) for i in range(len(p.blocks))]
    first = ins[0]
    embedded = _tokens(seen["patches"])
    final = _tokens(seen["final"])
    pixels = torch.nn.functional.unfold(x.detach().float(), patch, stride=patch)[0].T  # (N, 3·P²)

    def tracked(z: torch.Tensor) -> torch.Tensor:  # (T, D) -> (D,): the token the head reads (or their mean)
        return z[0] if p.tracks == "[CLS]" else z[prefix:].mean(0)

    stream = [first] + blocks  # (L + 1) × (T, D)
    norms = torch.stack([s[prefix:].norm(dim=-1) for s in stream])  # (L + 1, N)
    prefix_norms = torch.stack([s[:prefix].norm(dim=-1) for s in stream])
    attn_update = torch.stack([tracked(a).norm() / tracked(i).norm() for a, i in zip(attn, ins)])
    mid = [i + a for i, a in zip(ins, attn)]  # the stream between attention and MLP
    mlp_update = torch.stack([(tracked(o) - tracked(m)).norm() / tracked(m).norm() for o, m in zip(blocks, mid)])
    last = tracked(blocks[-1])
    cls_cosine = torch.stack([torch.nn.functional.cosine_similarity(tracked(s), last, dim=0) for s in stream])

    def patch_map(t: torch.Tensor) -> np.ndarray:
        return t.norm(dim=-1).reshape(gh, gw).numpy()

    entering = "tokens (" + ", ".join(prefix_names(p, prefix) + ["patches)"]) if prefix else \
        "tokens (the patches: this model has no [CLS])"
    stages = [
        Stage("image", tuple(x.shape[1:]), ("colour channels", "height in pixels", "width in pixels"),
              x[0].detach().float().mean(0).numpy()),
        Stage("patches, flattened", tuple(pixels.shape), ("patches", f"pixel values per patch (3·{patch}·{patch})"),
              patch_map(pixels)),
        Stage("patch embeddings", tuple(embedded.shape), ("patches", "token width"), patch_map(embedded)),
        Stage("tokens entering block 1", tuple(first.shape), (entering, "token width"), patch_map(first[prefix:])),
    ]
    stages += [Stage(f"block {i + 1}", tuple(b.shape), ("tokens", "token width"), patch_map(b[prefix:]))
               for i, b in enumerate(blocks)]
    if not _is_identity(p.norm):
        stages.append(Stage("final LayerNorm", tuple(final.shape), ("tokens", "token width"),
                            patch_map(final[prefix:])))
    if p.pool not in ("token", "distilled", "cls+mean"):  # the head reads one vector made from the patches
        pooled = final[prefix:].mean(0)
        stages.append(Stage("pooled: the mean of the patch tokens", tuple(pooled.shape), ("token width",),
                            pooled[None].numpy()))
        if not _is_identity(p.fc_norm):
            normed = p.fc_norm(pooled[None])[0].float()
            stages.append(Stage("LayerNorm after pooling", tuple(normed.shape), ("token width",),
                                normed[None].numpy()))
    out = ForwardPass(stages, (gh, gw), prefix, norms.numpy(), prefix_norms.numpy(), attn_update.numpy(),
                      mlp_update.numpy(), cls_cosine.numpy(), labels=labels, tracks=p.tracks, pool=p.pool,
                      registers=p.registers, pos_on_prefix=p.pos_on_prefix, prefix_kinds=prefix_kinds(p, prefix))
    if p.readout is None or logits is None:
        return out
    logits = logits.detach().float().reshape(-1, logits.shape[-1])[0]  # (C,): the model's own answer
    probs = torch.softmax(logits.double(), -1)
    out.stages += [Stage("head: logits", tuple(logits.shape), ("classes",), logits[None].numpy()),
                   Stage("softmax: probabilities", tuple(probs.shape), ("classes",), probs[None].float().numpy())]
    target = int(probs.argmax())
    lens, lens_patches = [], []
    for b in blocks:  # each layer read through the model's own final norm, pooling and head
        normed = p.norm(b[None]).float()  # (1, T, D)
        lens.append(torch.softmax(p.readout(normed)[0].double(), -1))
        lens_patches.append(token_lens(p, normed[0, prefix:], prefix, target))
    out.probs, out.lens = probs.numpy(), torch.stack(lens).numpy()
    out.lens_patches = torch.stack(lens_patches).float().numpy()
    return out


def prefix_kinds(p: Parts, prefix: int) -> tuple[str, ...]:
    """What each of the ``prefix`` tokens before the patches is, in order: "[CLS]", "distillation", "register"."""
    kinds = (("[CLS]",) if p.class_token else ()) + (("distillation",) if p.pool == "distilled" else ())
    return kinds + ("register",) * (prefix - len(kinds))


def prefix_names(p: Parts, prefix: int) -> list[str]:
    """The prefix tokens in words, in order: [CLS], the distillation token, N registers."""
    kinds = prefix_kinds(p, prefix)
    names = ["[CLS]"] if "[CLS]" in kinds else []
    names += ["the distillation token"] if "distillation" in kinds else []
    n = kinds.count("register")
    return names + ([f"{n} register{'s' if n != 1 else ''}"] if n else [])


LENS_CHUNK_BYTES = 32 * 2**20
"""The per-patch lens's logits are made this many bytes at a time (a 21k-class head over 3,600 patches would be
300 MB at once)."""


def token_lens(p: Parts, normed: torch.Tensor, prefix: int, target: int) -> torch.Tensor:
    """(N,) float64: each of the (N, D) normalised patch tokens read as if it were every token the head pools
    (the token repeated ``prefix + 1`` times: [CLS], a distillation token and the patches' mean are all that token),
    through the model's own readout: the probability of class ``target``. A chunk of tokens at a time."""
    n, d = normed.shape

    def read(chunk: torch.Tensor) -> torch.Tensor:
        return torch.softmax(p.readout(chunk[:, None, :].expand(len(chunk), prefix + 1, d)).double(), -1)[:, target]

    first = read(normed[:1])
    classes = int(p.readout(normed[:1, None, :].expand(1, prefix + 1, d)).shape[-1])
    step = max(1, LENS_CHUNK_BYTES // (classes * 8 * (prefix + 2)))
    return torch.cat([first] + [read(normed[i:i + step]) for i in range(1, n, step)])


def forward_pass(runner: Runner, rgb: np.ndarray, resolution: int) -> tuple[Fitted, ForwardPass]:
    """The picture fitted as the Attention tab fits it and its forward pass (one forward, kept with the picture)."""
    probe = ForwardProbe(runner.spec.prefix, runner.spec.patch, tuple(runner.labels) if runner.labels else None)
    run = runner.analyse(probe, rgb, resolution)
    return run.fitted, run.value
