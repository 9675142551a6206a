"""Classification with a timm ViT, and the experiments that expose its design.

Preprocessing comes from the checkpoint (``timm.data.create_transform`` on its
resolved data config); labels from timm's ImageNet info or the checkpoint's
own label names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

from vitviz.core import patches
from vitviz.models.runner import LoadedModel


def preprocess(loaded: LoadedModel, rgb: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (1, 3, S, S) exactly as the checkpoint expects (resize, crop, normalise)."""
    from timm.data import create_transform

    transform = create_transform(**loaded.data_config)
    return transform(Image.fromarray(rgb))[None]


def to_picture(loaded: LoadedModel, x: torch.Tensor) -> np.ndarray:
    """Undo the normalisation of (1, 3, S, S) model input -> (S, S, 3) uint8."""
    mean = torch.tensor(loaded.mean).view(3, 1, 1)
    std = torch.tensor(loaded.std).view(3, 1, 1)
    return ((x[0] * std + mean).clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)


def top_k(logits: np.ndarray, labels: list[str] | None, k: int = 5) -> dict[str, float]:
    """Softmax probabilities of the k best classes, {label: probability}."""
    z = np.asarray(logits, dtype=np.float64).ravel()
    p = np.exp(z - z.max())
    p /= p.sum()
    best = np.argsort(-p)[:k]
    return {(labels[i] if labels else f"class {i}"): float(p[i]) for i in best}


def size_of(model: torch.nn.Module) -> patches.ViTSize:
    """Width, depth and heads of a timm VisionTransformer, for the MAC calculator."""
    blocks = list(model.blocks)
    return patches.ViTSize(type(model).__name__, int(model.embed_dim), len(blocks), int(blocks[0].attn.num_heads),
                           blocks[0].mlp.fc1.out_features / model.embed_dim)


def model_macs(model: torch.nn.Module, h: int, w: int) -> int:
    """Total multiply-accumulates of one forward at h×w (same calculator as the Patches tab)."""
    p = model.patch_embed.patch_size[0]
    return sum(patches.vit_macs(size_of(model), p, h, w, num_classes=model.num_classes,
                                prefix=model.num_prefix_tokens).values())


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


def shuffle_experiment(loaded: LoadedModel, rgb: np.ndarray, seed: int = 0) -> ShuffleResult:
    """Permute the patches; compare logits with and without position embeddings."""
    x = preprocess(loaded, rgb)
    p = loaded.model.patch_embed.patch_size[0]
    n = (x.shape[-2] // p) * (x.shape[-1] // p)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    xs = shuffle_patches(x, p, perm)
    with loaded.exclusive() as model:  # no other request's hooks can be on the model meanwhile
        a, b = model(x), model(xs)
        a0, b0 = forward_without_positions(model, x), forward_without_positions(model, xs)
    return ShuffleResult(to_picture(loaded, xs), top_k(a[0].numpy(), loaded.labels), top_k(b[0].numpy(), loaded.labels),
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

    spec = patches.VIT_SIZES[size]
    rows = []
    x = torch.randn(1, 3, resolution, resolution)
    for p in (8, 16, 32):
        model = timm.create_model(f"{patches.TIMM_NAMES[size]}_patch16_224", pretrained=False, patch_size=p,
                                  img_size=resolution).eval()
        n = (resolution // p) ** 2
        rows.append((p, n + 1, sum(q.numel() for q in model.parameters()), (n + 1) ** 2,
                     sum(patches.vit_macs(spec, p, resolution, resolution).values()), time_forward(model, x, repeats)))
    return tuple(rows)
