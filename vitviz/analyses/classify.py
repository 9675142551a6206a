"""Classification with a timm ViT, and the experiments that expose its design.

Preprocessing comes from the checkpoint (:meth:`vitviz.models.runner.Runner.preprocess`: timm's transform on its
resolved data config); labels from timm's ImageNet info or the checkpoint's own label names. Every forward goes
through the runner: the shuffle experiment is a probe, the model's size is read under its lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from vitviz.core import patches
from vitviz.models.runner import Forward, Runner
from vitviz.specs import registry


def top_k(logits: np.ndarray, labels: list[str] | None, k: int = 5) -> dict[str, float]:
    """Softmax probabilities of the k best classes, {label: probability}: ``logits`` (C,) in float64 through torch's
    softmax, the operation the forward pass uses (vitviz.analyses.forward), so both give the same bits on any CPU."""
    z = torch.from_numpy(np.asarray(logits, dtype=np.float64).ravel())
    p = torch.softmax(z, -1).numpy()
    best = np.argsort(-p, kind="stable")[:k]
    return {(labels[i] if labels else f"class {i}"): float(p[i]) for i in best}


def size_of(model: torch.nn.Module) -> registry.ViTSize:
    """Width, depth and heads of a timm VisionTransformer, for the MAC calculator."""
    blocks = list(model.blocks)
    return registry.ViTSize(type(model).__name__, int(model.embed_dim), len(blocks), int(blocks[0].attn.num_heads),
                           blocks[0].mlp.fc1.out_features / model.embed_dim)


def model_macs(model: torch.nn.Module, h: int, w: int) -> int:
    """Total multiply-accumulates of one forward at h×w (same calculator as the Patches tab)."""
    p = model.patch_embed.patch_size[0]
    return sum(patches.vit_macs(size_of(model), p, h, w, num_classes=model.num_classes,
                                prefix=model.num_prefix_tokens).values())


def macs_of(runner: Runner, h: int, w: int) -> int:
    """:func:`model_macs` of a runner's model (read under its lock); a transformers ViT's from its config."""
    def of(model: torch.nn.Module) -> int:
        if hasattr(model, "patch_embed"):
            return model_macs(model, h, w)
        cfg, s = model.config, runner.spec
        size = registry.ViTSize(s.key, s.dim, s.depth, s.heads, cfg.intermediate_size / cfg.hidden_size)
        classes = int(cfg.num_labels) if getattr(model, "classifier", None) is not None else 0
        return sum(patches.vit_macs(size, s.patch, h, w, num_classes=classes, prefix=s.prefix).values())
    return runner.read(of)


def shuffle_patches(x: torch.Tensor, patch: int, perm: torch.Tensor) -> torch.Tensor:
    """Rearrange the P×P patches of (B, C, H, W) images: output patch i is input patch perm[i]."""
    b, c, h, w = x.shape
    gh, gw = h // patch, w // patch
    tiles = x.reshape(b, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, patch, patch)
    tiles = tiles[:, perm]
    return tiles.reshape(b, gh, gw, c, patch, patch).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


def forward_without_positions(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A timm ViT's logits with the position embeddings left out (nothing else changed).

    Mirrors ``VisionTransformer.forward_features``: patch embedding, prefix
    tokens (class, registers), ``norm_pre``, blocks, ``norm``, then the head.
    The shared model is not modified.
    """
    tokens = model.patch_embed(x)
    if tokens.ndim == 4:  # dynamic_img_size keeps (B, H, W, D)
        tokens = tokens.flatten(1, 2)
    prefix = []
    if model.cls_token is not None:
        prefix.append(model.cls_token.expand(tokens.shape[0], -1, -1))
    if getattr(model, "reg_token", None) is not None:
        prefix.append(model.reg_token.expand(tokens.shape[0], -1, -1))
    tokens = torch.cat(prefix + [tokens], dim=1)
    tokens = model.norm_pre(tokens)
    tokens = model.blocks(tokens)
    tokens = model.norm(tokens)
    return model.forward_head(tokens)


@dataclass
class ShuffleResult:
    scrambled: np.ndarray  # (S, S, 3) uint8, the permuted picture
    top_original: dict[str, float]
    top_shuffled: dict[str, float]
    diff_with_pos: float  # max |logits(original) − logits(shuffled)| with position embeddings
    diff_without_pos: float  # the same with position embeddings removed (≈ 0)


@dataclass(frozen=True)
class ShuffleProbe:
    """Four forwards: the picture and its shuffled patches, each with and without position embeddings."""

    perm: tuple[int, ...]
    grad: bool = False
    own_size: bool = True

    @property
    def key(self) -> tuple:
        return ("shuffle", hash(self.perm))

    def estimate(self, spec, tokens: int) -> int:
        from vitviz.models import budget

        return budget.forward_bytes(spec, tokens)

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, forward: Forward) -> tuple[torch.Tensor, ...]:
        p = model.patch_embed.patch_size[0]
        xs = shuffle_patches(x, p, torch.tensor(self.perm))
        return model(x), model(xs), forward_without_positions(model, x), forward_without_positions(model, xs), xs

    def nbytes(self, out) -> int:
        return sum(o.numel() * o.element_size() for o in out)


def shuffle_experiment(runner: Runner, rgb: np.ndarray, seed: int = 0) -> ShuffleResult:
    """Permute the patches; compare logits with and without position embeddings."""
    if runner.spec.family == "hf":
        raise ValueError(f"The patch-shuffling experiment takes a timm ViT apart (it leaves out its position "
                         f"embeddings); {runner.spec.key} is a transformers model: choose another model.")
    x = runner.preprocess(rgb)
    p = runner.spec.patch
    n = (x.shape[-2] // p) * (x.shape[-1] // p)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    a, b, a0, b0, xs = runner.run(ShuffleProbe(tuple(perm.tolist())), x)
    return ShuffleResult(runner.picture(xs), top_k(a[0].numpy(), runner.labels), top_k(b[0].numpy(), runner.labels),
                         float((a - b).abs().max()), float((a0 - b0).abs().max()))


def time_forward(model: torch.nn.Module, x: torch.Tensor, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` forwards in seconds (after one warm-up)."""
    times = []
    with torch.inference_mode():
        model(x)
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


@lru_cache(maxsize=2)
def patch_size_tradeoff(size: str = "ViT-S", resolution: int = 224, repeats: int = 3) -> tuple[tuple, ...]:
    """For P = 8, 16, 32: (P, tokens, parameters, attention entries per layer and head, MACs, seconds).

    Architecture only (random weights): cost does not depend on the weights.
    """
    import timm

    spec = registry.VIT_SIZES[size]
    rows = []
    x = torch.randn(1, 3, resolution, resolution)
    for p in (8, 16, 32):
        model = timm.create_model(f"{registry.TIMM_NAMES[size]}_patch16_224", pretrained=False, patch_size=p,
                                  img_size=resolution).eval()
        n = (resolution // p) ** 2
        rows.append((p, n + 1, sum(q.numel() for q in model.parameters()), (n + 1) ** 2,
                     sum(patches.vit_macs(spec, p, resolution, resolution).values()), time_forward(model, x, repeats)))
    return tuple(rows)
