"""Classification: preprocessing from the checkpoint, labels, and the permutation experiment."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.analyses import classify
from vitviz.core import patches
from vitviz.models import loaders
from vitviz.specs import registry
from vitviz.views import classify as classify_view


@pytest.fixture(scope="module")
def deit(deit_file):
    return loaders.load_timm("deit_tiny_patch16_224.fb_in1k", file=deit_file)


def test_preprocess_follows_the_data_config(deit, rgb_cat):
    x = deit.preprocess(rgb_cat)
    assert x.shape == (1, 3, 224, 224)
    # resize short side to 224/0.875 = 256, centre crop 224, normalise: compare with timm directly
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    ref = create_transform(**resolve_data_config({}, model=module_of(deit)))(Image.fromarray(rgb_cat))
    torch.testing.assert_close(x[0], ref)


def test_top_k_is_a_softmax():
    logits = np.array([0.0, 2.0, 1.0])
    top = classify.top_k(logits, ["a", "b", "c"], k=2)
    p = np.exp(logits) / np.exp(logits).sum()
    assert list(top) == ["b", "c"] and top["b"] == pytest.approx(p[1])


def test_shuffle_patches_is_a_token_permutation(deit):
    x = torch.randn(1, 3, 224, 224)
    perm = torch.randperm(196, generator=torch.Generator().manual_seed(3))
    xs = classify.shuffle_patches(x, 16, perm)
    t = patches.patchify(x, 16)
    ts = patches.patchify(xs, 16)
    torch.testing.assert_close(ts, t[:, perm])


def test_without_positions_the_class_token_ignores_order(deit, rgb_cat):
    r = classify.shuffle_experiment(deit, rgb_cat, seed=1)
    assert r.diff_without_pos < 1e-5
    assert r.diff_with_pos > 1e-3  # position embeddings make the order matter
    assert r.scrambled.shape == (224, 224, 3)


def test_without_positions_equals_model_with_zeroed_pos_embed(deit):
    x = torch.randn(1, 3, 224, 224)
    import copy

    twin = copy.deepcopy(module_of(deit))
    twin.pos_embed.data.zero_()
    with torch.inference_mode():
        torch.testing.assert_close(classify.forward_without_positions(module_of(deit), x), twin(x), atol=1e-5, rtol=0)


def test_model_macs_uses_the_shared_calculator(deit):
    assert classify.macs_of(deit, 224, 224) == sum(
        patches.vit_macs(registry.VIT_SIZES["ViT-Ti"], 16, 224, 224).values())


def test_classify_view_one_forward(deit, rgb_cat):
    calls = []
    h = module_of(deit).patch_embed.register_forward_hook(lambda *a: calls.append(1))  # every forward passes here
    try:
        v = classify_view.render(deit, rgb_cat)
    finally:
        h.remove()
    assert len(calls) == 1 and len(v.top5) == 5
    assert sum(v.top5.values()) <= 1.0 + 1e-6 and "multiply-accumulates" in v.facts
    macs = sum(patches.vit_macs(registry.VIT_SIZES["ViT-Ti"], 16, 224, 224).values())
    assert f"{macs / 1e9:.2f} G" in v.facts


def test_patch_size_tradeoff_table():
    rows = classify.patch_size_tradeoff("ViT-Ti", 64, repeats=1)
    assert [r[0] for r in rows] == [8, 16, 32]
    assert [r[1] for r in rows] == [65, 17, 5] and [r[3] for r in rows] == [65 ** 2, 17 ** 2, 25]
    assert rows[0][4] > rows[1][4] > rows[2][4] and all(r[5] > 0 for r in rows)
    md = classify_view.tradeoff_markdown(rows, "ViT-Ti", 64)
    assert "| 8 | 65 |" in md
