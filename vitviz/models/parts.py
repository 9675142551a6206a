"""Where a timm or transformers ViT keeps each part of its forward pass, and the residual stream's numbers.

:func:`parts_of` finds the patch embedding, the blocks, what each block's attention adds, the final norm and the
head's own readout (its pooling included). :func:`stream` turns the tensors one forward went through (recorded by
:func:`vitviz.models.hooks.capture` on :func:`stream_targets`) into the numbers the Forward-pass view shows: every
token's norm per layer, what attention and the MLP add to the token the head reads, how close it is to its last
value, and the logit lens. It is torch only, without Python branches on values, so the server's probe
(:mod:`vitviz.analyses.forward`) and the device's graph (:mod:`vitviz.models.device`) compute the same thing.

Shapes: T = prefix + N tokens of width D, N patches, L blocks, C classes (one picture: batch 1 left out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from vitviz.models import hooks


# ---- where each library keeps each part -----------------------------------------------------------------------

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
    layer_scales: tuple[tuple[torch.nn.Module, torch.nn.Module], ...] = ()  # per block (after attention, after
    # the MLP): LayerScale's learned per-channel scales (timm's ls1/ls2 with init_values, DINOv2's layer_scale1/2)

    @property
    def tracks(self) -> str:
        """The token whose path through the stream the residual view follows: what the head reads."""
        return "[CLS]" if self.pool in ("token", "distilled", "cls+mean") and self.class_token else \
            "the mean of the patch tokens"


def _is_identity(m: torch.nn.Module | None) -> bool:
    return m is None or isinstance(m, torch.nn.Identity)


def _layer_scales(blocks: list[torch.nn.Module]) -> tuple[tuple[torch.nn.Module, torch.nn.Module], ...]:
    """Each block's two LayerScale modules (after attention, after the MLP), or () when the blocks have none (timm
    puts an Identity there without ``init_values``)."""
    found = [(_first(b, "ls1", "layer_scale1"), _first(b, "ls2", "layer_scale2")) for b in blocks]
    if not all(a is not None and c is not None and not _is_identity(a) and not _is_identity(c)
               and any(True for _ in a.parameters()) and any(True for _ in c.parameters()) for a, c in found):
        return ()
    return tuple(found)  # type: ignore[arg-type]


def layer_scale_sizes(p: Parts) -> tuple[tuple[float, float], ...]:
    """Per block, the mean absolute value of LayerScale's learned scales (γ₁ after attention, γ₂ after the MLP),
    () for a model without LayerScale. Read the weights under the runner's read (:meth:`Runner.read`)."""
    def size(m: torch.nn.Module) -> float:
        return float(torch.cat([t.detach().float().abs().flatten() for t in m.parameters()]).mean())

    return tuple((size(a), size(b)) for a, b in p.layer_scales)


def parts_of(model: torch.nn.Module) -> Parts:
    """Find the parts of ``model`` (timm VisionTransformer and its distilled DeiT, transformers ViT/DeiT/DINOv2 ±
    registers, with or without a head); ValueError for a model whose layout vitviz does not know."""
    found = _parts_of(model)
    return replace(found, layer_scales=_layer_scales(found.blocks))


def _parts_of(model: torch.nn.Module) -> Parts:
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


def token_lens(p: Parts, normed: torch.Tensor, prefix: int, target: torch.Tensor | int,
               step: int | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(N,) ``dtype``: each of the (N, D) normalised patch tokens read as if it were every token the head pools
    (the token repeated ``prefix + 1`` times: [CLS], a distillation token and the patches' mean are all that token),
    through the model's own readout: the probability of class ``target``. A chunk of tokens at a time (``step``;
    by default what fits :data:`LENS_CHUNK_BYTES`), or all at once (``step=0``: the device's graph)."""
    n, d = normed.shape

    def read(chunk: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(p.readout(chunk[:, None, :].expand(chunk.shape[0], prefix + 1, d)).to(dtype), -1)
        return probs.index_select(-1, torch.as_tensor(target).reshape(1))[:, 0]

    if step == 0:
        return read(normed)

    first = read(normed[:1])
    classes = int(p.readout(normed[:1, None, :].expand(1, prefix + 1, d)).shape[-1])
    step = step or max(1, LENS_CHUNK_BYTES // (classes * 8 * (prefix + 2)))
    return torch.cat([first] + [read(normed[i:i + step]) for i in range(1, n, step)])


# ---- the residual stream ----------------------------------------------------------------------------------------

def stream_targets(p: Parts) -> dict[str, tuple[torch.nn.Module, str]]:
    """What :func:`stream` reads, for :func:`vitviz.models.hooks.capture`: the patch embeddings, each block's input
    and output, what each block's attention adds, the final norm's output."""
    targets = {"patches": (p.patch_embed, "output"), "final": (p.norm, "output")}
    targets |= {f"block{i}": (b, "output") for i, b in enumerate(p.blocks)}
    targets |= {f"in{i}": (b, "input") for i, b in enumerate(p.blocks)}
    targets |= {f"attn{i}": (m, "output") for i, m in enumerate(p.attn_out)}
    return targets


def tokens_of(t: torch.Tensor) -> torch.Tensor:
    """(T, D) float32 of a (1, T, D) stream, or of timm's (1, gh, gw, D) patch grid (dynamic sizes)."""
    t = t.detach().float()[0]
    return t.reshape(-1, t.shape[-1])


@dataclass
class Stream:
    """The residual stream of one forward (torch tensors, float32 unless said).

    Attributes:
        tokens: (L + 1) × (T, D): the tokens entering block 1, then after every block.
        norms: (L + 1, T) every token's norm in ``tokens`` (the prefix first).
        attn_update, mlp_update: (L,) the relative size of what attention and the MLP add to the tracked token.
        cosine: (L + 1,) the tracked token's cosine with its last value.
        embedded, final: (T_e, D), (T, D): the patch embeddings, the final norm's output.
    """

    tokens: list[torch.Tensor]
    norms: torch.Tensor
    attn_update: torch.Tensor
    mlp_update: torch.Tensor
    cosine: torch.Tensor
    embedded: torch.Tensor
    final: torch.Tensor


def tracked(p: Parts, z: torch.Tensor, prefix: int) -> torch.Tensor:
    """(T, D) -> (D,): the token the head reads ([CLS]), or the mean of the patch tokens."""
    return z[0] if p.tracks == "[CLS]" else z[prefix:].mean(0)


def stream(p: Parts, seen: dict[str, torch.Tensor], prefix: int) -> Stream:
    """The residual stream's numbers from the tensors :func:`stream_targets` recorded (see :class:`Stream`)."""
    layers = range(len(p.blocks))
    blocks = [tokens_of(seen[f"block{i}"]) for i in layers]
    ins = [tokens_of(seen[f"in{i}"]) for i in layers]
    attn = [tokens_of(seen[f"attn{i}"]) for i in layers]
    tokens = [ins[0]] + blocks
    norms = torch.stack([s.norm(dim=-1) for s in tokens])
    attn_update = torch.stack([tracked(p, a, prefix).norm() / tracked(p, i, prefix).norm() for a, i in zip(attn, ins)])
    mid = [i + a for i, a in zip(ins, attn)]  # the stream between attention and the MLP
    mlp_update = torch.stack([(tracked(p, o, prefix) - tracked(p, m, prefix)).norm() / tracked(p, m, prefix).norm()
                              for o, m in zip(blocks, mid)])
    last = tracked(p, blocks[-1], prefix)
    # the cosine written out: the exporter's cosine_similarity of two vectors gave a wrong (1,) per layer; the
    # floor of its divisor a tensor of the stream's own dtype (a Python float becomes a float64 constant in the
    # graph, which ONNX Runtime Web's builds cannot cast)
    def cos(a: torch.Tensor) -> torch.Tensor:
        size = a.norm() * last.norm()
        return (a * last).sum() / torch.maximum(size, size.new_tensor(1e-8))

    cosine = torch.stack([cos(tracked(p, s, prefix)) for s in tokens])
    return Stream(tokens, norms, attn_update, mlp_update, cosine, tokens_of(seen["patches"]),
                  tokens_of(seen["final"]))


def lens(p: Parts, blocks: list[torch.Tensor], prefix: int, target: torch.Tensor | int,
         step: int | None = None, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """The logit lens: every block's (T, D) tokens read through the model's own final norm, pooling and head.

    Returns (L, C) the softmax of each block's readout (in ``dtype``: float64 on the server, float32 in the
    device's graph, where WebGPU has no float64), and
    (L, N) each patch token's probability of class ``target`` read alone (:func:`token_lens`, ``step`` tokens at a
    time: by default what fits :data:`LENS_CHUNK_BYTES`; 0: all at once, as the device's graph does)."""
    rows, patches = [], []
    for b in blocks:
        normed = p.norm(b[None]).float()  # (1, T, D)
        rows.append(torch.softmax(p.readout(normed)[0].to(dtype), -1))
        patches.append(token_lens(p, normed[0, prefix:], prefix, target, step, dtype))
    return torch.stack(rows), torch.stack(patches)
