"""From pixels to tokens: patch splitting, the patch projection, and what it costs.

Shapes follow timm's ``vision_transformer.py``: an image is (C, H, W); with
patch size P the grid is (H/P, W/P) and N = (H/P)(W/P) patch tokens; one
flattened patch has P·P·C values in (C, P, P) order, the order of a Conv2d
kernel's weights, so flatten-then-Linear and the stride-P convolution share
one weight tensor.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from vitviz.core.posembed import sincos_2d
from vitviz.specs.registry import ViTSize


def grid_size(h: int, w: int, patch: int) -> tuple[int, int]:
    """(H/P, W/P); raises ``ValueError`` if a side is not a whole number of patches."""
    if h % patch or w % patch:
        raise ValueError(f"{w}×{h} is not a whole number of {patch}-pixel patches.")
    return h // patch, w // patch


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """Split images into flattened patches.

    Args:
        x: (B, C, H, W).
        patch: P, dividing H and W.

    Returns:
        (B, N, C·P·P), patches in row-major order p_00, p_01, ..., each flattened (C, P, P).
    """
    grid_size(x.shape[-2], x.shape[-1], patch)
    cols = F.unfold(x, kernel_size=patch, stride=patch)  # (B, C·P·P, N)
    return cols.transpose(1, 2)


def embed_linear(flat: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Flatten-then-Linear patch embedding.

    Args:
        flat: (B, N, C·P·P) from :func:`patchify`.
        weight: (D, C, P, P), a Conv2d kernel (or (D, C·P·P)).
        bias: (D,) or None.

    Returns:
        (B, N, D) token embeddings.
    """
    return F.linear(flat, weight.reshape(weight.shape[0], -1), bias)


def embed_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The same embedding as a Conv2d with kernel = stride = P.

    Args:
        x: (B, C, H, W); weight: (D, C, P, P); bias: (D,) or None.

    Returns:
        (B, N, D), the (B, D, H/P, W/P) feature map flattened row-major.
    """
    patch = weight.shape[-1]
    return F.conv2d(x, weight, bias, stride=patch).flatten(2).transpose(1, 2)


def linear_vs_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> float:
    """Max |flatten+Linear − Conv2d(stride=P)| over all tokens and channels, for (B, C, H, W) ``x``."""
    with torch.inference_mode():
        a = embed_linear(patchify(x, weight.shape[-1]), weight, bias)
        b = embed_conv(x, weight, bias)
    return float((a - b).abs().max())


COST_PARTS = ("patch embedding", "QKV projection", "attention scores QKᵀ", "attention × V",
              "output projection", "MLP", "classifier head")


def vit_macs(size: ViTSize, patch: int, h: int, w: int, channels: int = 3, num_classes: int = 1000,
             prefix: int = 1) -> dict[str, int]:
    """Multiply-accumulates of one forward pass, per component (matrix products only).

    With T = N + prefix tokens, width D, depth L, MLP width M:
    patch embedding N·(C·P²)·D; QKV L·T·D·3D; scores L·T²·D (summed over heads,
    each head T²·D/heads); attention × V L·T²·D; output projection L·T·D²;
    MLP L·T·2·D·M; head D·classes. Norms, softmax and GELU are not MACs.
    """
    gh, gw = grid_size(h, w, patch)
    n = gh * gw
    t = n + prefix
    d, layers = size.dim, size.depth
    m = int(d * size.mlp_ratio)
    return {
        "patch embedding": n * channels * patch * patch * d,
        "QKV projection": layers * t * d * 3 * d,
        "attention scores QKᵀ": layers * t * t * d,
        "attention × V": layers * t * t * d,
        "output projection": layers * t * d * d,
        "MLP": layers * t * 2 * d * m,
        "classifier head": d * num_classes,
    }


def token_counts(h: int, w: int, patch: int, heads: int = 1, layers: int = 1) -> dict[str, int]:
    """N, sequence length N + 1 and attention-matrix entries (N + 1)² (per head, per layer)."""
    gh, gw = grid_size(h, w, patch)
    n = gh * gw
    return {"rows": gh, "cols": gw, "patches": n, "sequence": n + 1, "attention entries": (n + 1) ** 2,
            "all attention entries": (n + 1) ** 2 * heads * layers}


# ---- the seed's toy walk-through ---------------------------------------------------------

TOY_VALUES = np.array([[0.9, 0.4], [0.6, 0.1]])
"""Grey level of each 4×4 patch of the 8×8 toy image (p_00, p_01 / p_10, p_11)."""


def toy_walkthrough(d_model: int = 8, seed: int = 42, scale: float = 0.3) -> dict[str, np.ndarray]:
    """Every step of the 8×8 toy: pixels -> patches -> flat -> E -> E + PE -> [CLS] + tokens.

    Returns a dict of numpy arrays: ``image`` (8, 8), ``patches`` (4, 4, 4),
    ``flat`` (4, 16), ``W`` (16, d), ``E`` (4, d), ``PE`` (4, d), ``E_pe`` (4, d),
    ``tokens`` (5, d) with the all-zero [CLS] row first.
    """
    image = np.kron(TOY_VALUES, np.ones((4, 4)))
    x = torch.tensor(image, dtype=torch.float64)[None, None]
    flat = patchify(x, 4)[0].numpy()
    w = np.random.default_rng(seed).standard_normal((16, d_model)) * scale
    e = flat @ w
    pe = sincos_2d(2, 2, d_model)
    e_pe = e + pe
    tokens = np.concatenate([np.zeros((1, d_model)), e_pe])
    return {"image": image, "patches": flat.reshape(4, 4, 4), "flat": flat, "W": w, "E": e, "PE": pe,
            "E_pe": e_pe, "tokens": tokens}


def embedding_weight(model: torch.nn.Module) -> torch.Tensor:
    """The patch projection of a ViT, (D, C, P, P): its first Conv2d (timm's ``patch_embed.proj``,
    transformers' ``embeddings.patch_embeddings.projection``)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            return module.weight.detach()
    raise ValueError("This model has no convolutional patch projection to show.")


def filter_components(weight: torch.Tensor, k: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Principal components of the D patch filters, as the ViT paper shows them.

    Args:
        weight: (D, C, P, P) patch projection; each of its D rows is one filter.
        k: how many components (at most min(D, C·P·P)).

    Returns:
        (components (k, C, P, P), share of the filters' variance each explains (k,)); a component's
        sign is arbitrary, so each is flipped to make its largest entry positive.
    """
    d = weight.shape[0]
    flat = weight.reshape(d, -1).double()
    centred = flat - flat.mean(dim=0, keepdim=True)
    _, s, vt = torch.linalg.svd(centred, full_matrices=False)
    k = min(k, vt.shape[0])
    comps = vt[:k]
    sign = torch.sign(comps.gather(1, comps.abs().argmax(dim=1, keepdim=True)))
    var = s ** 2
    share = var[:k] / var.sum().clamp_min(1e-30)
    return (comps * sign).reshape(k, *weight.shape[1:]).numpy(), share.numpy()
