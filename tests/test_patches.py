"""Patch maths: the toy numbers, linear == convolution, and a cost calculator that matches measurement."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES

from vitviz.core import patches
from vitviz.specs import registry


def test_toy_walkthrough_matches_the_seed():
    t = patches.toy_walkthrough()
    assert t["image"].shape == (8, 8)
    # four 4×4 patches, row-major p00 p01 p10 p11, each constant
    np.testing.assert_allclose(t["flat"], np.repeat([[0.9], [0.4], [0.6], [0.1]], 16, axis=1))
    assert t["E"].shape == (4, 8) and t["tokens"].shape == (5, 8)
    np.testing.assert_allclose(t["tokens"][0], 0)  # [CLS] is all zeros
    # constant patches: E is (patch value) × (column sums of W)
    np.testing.assert_allclose(t["E"], np.outer([0.9, 0.4, 0.6, 0.1], t["W"].sum(0)))
    np.testing.assert_allclose(t["E_pe"], t["E"] + t["PE"])
    # same row -> same first half of the PE, same column -> same second half
    np.testing.assert_allclose(t["PE"][0, :4], t["PE"][1, :4])
    np.testing.assert_allclose(t["PE"][0, 4:], t["PE"][2, 4:])


def test_patchify_order_by_hand():
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)
    flat = patches.patchify(x, 2)
    assert flat.shape == (1, 4, 8)
    # patch p01 = rows 0-1, cols 2-3; channel 0 first, then channel 1
    assert flat[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]


@pytest.mark.parametrize("patch, h, w", [(4, 8, 8), (8, 32, 48), (14, 56, 28), (16, 64, 64)])
def test_unfold_linear_equals_strided_conv(patch, h, w):
    g = torch.Generator().manual_seed(patch)
    x = torch.randn(2, 3, h, w, generator=g)
    weight = torch.randn(24, 3, patch, patch, generator=g)
    bias = torch.randn(24, generator=g)
    conv = torch.nn.Conv2d(3, 24, patch, stride=patch)
    conv.weight.data, conv.bias.data = weight, bias
    ref = conv(x).flatten(2).transpose(1, 2)
    mine = patches.embed_linear(patches.patchify(x, patch), weight, bias)
    assert mine.shape == (2, (h // patch) * (w // patch), 24)
    assert torch.allclose(mine, ref, rtol=1e-5, atol=1e-4)
    assert patches.linear_vs_conv(x, weight, bias) < 1e-5 * float(ref.detach().abs().max())  # float32 rounding


def test_grid_rejects_partial_patches():
    with pytest.raises(ValueError):
        patches.grid_size(225, 224, 16)


def test_token_counts_from_the_seeds():
    assert patches.token_counts(224, 224, 16)["patches"] == 196
    assert patches.token_counts(224, 224, 32)["patches"] == 49
    c = patches.token_counts(224, 224, 8)
    assert c["patches"] == 784 and c["sequence"] == 785 and c["attention entries"] == 616_225
    assert patches.token_counts(448, 448, 8)["patches"] == 3136


def test_vit_b16_attention_cost_by_hand():
    """The seed claims ~4.3 G MACs of attention for ViT-B/16; per head it is 197²·64, not 197²·768."""
    m = patches.vit_macs(registry.VIT_SIZES["ViT-B"], 16, 224, 224)
    scores = 12 * 12 * 197 * 197 * 64  # layers × heads × T² × head dim
    assert m["attention scores QKᵀ"] == scores == 357_663_744
    attention = m["attention scores QKᵀ"] + m["attention × V"]
    assert attention == 2 * scores  # ≈ 0.72 G, not 4.3 G
    total = sum(m.values())
    assert 17.5e9 < total < 17.6e9
    assert 0.04 < attention / total < 0.042


def _measured_macs(model: torch.nn.Module, x: torch.Tensor) -> dict[str, int]:
    """FlopCounterMode counts (2 FLOPs = 1 MAC), grouped like vit_macs."""
    from torch.utils.flop_counter import FlopCounterMode

    for blk in model.blocks:  # the CPU flash-attention kernel has no FLOP formula: count the matmuls
        blk.attn.fused_attn = False
    with FlopCounterMode(display=False) as fc, torch.inference_mode():
        model(x)
    counts = fc.get_flop_counts()
    name = type(model).__name__

    def of(prefix: str) -> int:
        return sum(counts.get(f"{name}.{prefix}", {}).values()) // 2

    depth = len(model.blocks)
    out = {"patch embedding": of("patch_embed"), "classifier head": of("head")}
    out["QKV projection"] = sum(of(f"blocks.{i}.attn.qkv") for i in range(depth))
    out["output projection"] = sum(of(f"blocks.{i}.attn.proj") for i in range(depth))
    out["MLP"] = sum(of(f"blocks.{i}.mlp") for i in range(depth))
    attn = sum(of(f"blocks.{i}.attn") for i in range(depth)) - out["QKV projection"] - out["output projection"]
    out["attention"] = attn
    out["total"] = fc.get_total_flops() // 2
    return out


@pytest.mark.parametrize("size, patch, h, w", [("ViT-Ti", 16, 224, 224), ("ViT-S", 8, 64, 96), ("ViT-Ti", 32, 96, 64)])
def test_cost_calculator_matches_flop_counter(size, patch, h, w):
    import timm

    model = timm.create_model(f"{registry.TIMM_NAMES[size]}_patch16_224", pretrained=False, patch_size=patch,
                              img_size=(h, w)).eval()
    measured = _measured_macs(model, torch.randn(1, 3, h, w))
    mine = patches.vit_macs(registry.VIT_SIZES[size], patch, h, w)
    for part in ("patch embedding", "QKV projection", "output projection", "MLP", "classifier head"):
        assert mine[part] == measured[part], part
    assert mine["attention scores QKᵀ"] + mine["attention × V"] == measured["attention"]
    assert sum(mine.values()) == measured["total"]


def test_filter_components_equal_an_independent_pca():
    """The patch filters' principal components against torch.pca_lowrank (up to sign) and the covariance's
    eigenvalues (the variance shares)."""
    import torch

    g = torch.Generator().manual_seed(3)
    weight = torch.randn(64, 3, 8, 8, generator=g) * torch.linspace(0.2, 2.0, 192).reshape(3, 8, 8)
    comps, share = patches.filter_components(weight, k=5)
    assert comps.shape == (5, 3, 8, 8) and share.shape == (5,)
    _, _, v = torch.pca_lowrank(weight.reshape(64, -1).double(), q=20, center=True, niter=30)
    for i in range(5):
        ref = v[:, i].numpy()
        assert min(np.abs(comps[i].ravel() - ref).max(), np.abs(comps[i].ravel() + ref).max()) < 1e-6
    flat = weight.reshape(64, -1).double().numpy()
    eig = np.sort(np.linalg.eigvalsh(np.cov(flat, rowvar=False)))[::-1]
    np.testing.assert_allclose(share, eig[:5] / eig.sum(), rtol=1e-9)
    assert np.all(np.diff(share) <= 0)


def test_embedding_weight_is_the_patch_projection_for_both_families(dino_s8_dir):
    from vitviz.models import loaders
    from vitviz.specs import registry

    hf = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    assert tuple(hf.read(patches.embedding_weight).shape) == (384, 3, 8, 8)
    tiny = loaders.load_embedded()
    w = tiny.read(patches.embedding_weight)
    assert w.shape[-1] == tiny.spec.patch and w.shape[1] == 3


def test_the_patch_cost_sentence_comes_from_the_calculator():
    from vitviz.core.images import load_rgb
    from vitviz.specs import views as declared
    from vitviz.views import show

    cat = load_rgb(EXAMPLES / "cat.png", 640)
    costs = show("patches", cat, declared.PATCHES.check({"model_size": "ViT-B"})).texts["costs"]
    assert "the QKᵀ scores alone 4.29 G (12× the real 357.66 M)" in costs and "8.58 G instead of 715.33 M" in costs
    costs = show("patches", cat, declared.PATCHES.check({"model_size": "ViT-S"})).texts["costs"]
    scores = 12 * 6 * 197 * 197 * 64  # layers × heads × T² × head width, by hand
    assert f"scores alone {scores * 6 / 1e9:.2f} G (6× the real {scores / 1e6:.2f} M)" in costs


def test_halving_the_patch_gives_the_exact_ratio_not_sixteen():
    from vitviz.views import patches as view

    line = view.halving_line(196, 16)  # 224 px in 16-px patches -> 8-px patches: 784 patches
    assert "4N = 784" in line and "616,225" in line and "15.88×" in line  # 785² / 197² by hand
    assert view.halving_line(196, 7) == ""  # an odd patch side cannot be halved into whole pixels
