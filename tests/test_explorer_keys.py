"""The explorer's data: every layer's queries and keys, from which the browser computes any attention row.

Checked against the model's own attention (the hooked post-softmax matrices) and against a softmax done by hand;
float16 keys against a stated tolerance on a model whose attention is sharp, not the near-even rows of random
weights."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from vitviz.analyses import attention as analysis
from vitviz.core.attention import LayerKeys
from vitviz.models import hooks, loaders
from vitviz.render import browser
from vitviz.specs import registry
from vitviz.specs import views as spec

F16_TOLERANCE = 2e-3
"""Largest difference allowed between a row computed from float16 q and k and the model's own attention (weights
in [0, 1]), on a model whose rows reach 0.2 and more (DINO-like): README, "The attention explorer"."""
FIELDS = {n: spec.ATTENTION[n] for n in ("layer", "head", "keep", "alpha", "cmap", "query")}


def test_rows_are_a_softmax_of_scaled_query_key_products_and_centring_the_keys_changes_nothing():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g) + 3.0  # keys far from 0
    keys = LayerKeys.pack(q, k, 0.5, exact_bytes=10**6)
    by_hand = torch.softmax((q.double() * 0.5) @ k.double().transpose(1, 2), -1).numpy()
    assert keys.q.dtype == np.float32 and np.allclose(keys.rows(), by_hand, atol=1e-12 + 1e-6)
    assert np.allclose(keys.k.mean(1), 0, atol=1e-6)  # centred ...
    assert np.abs(keys.k).max() < np.abs(k.numpy()).max() - 1  # ... and smaller, so float16 rounds them less
    assert np.allclose(keys.rows(np.array([3])), by_hand[:, [3]], atol=1e-6)
    assert LayerKeys.pack(q, k, 0.5, exact_bytes=100).q.dtype == np.float16  # over the size: float16


def test_the_embedded_models_keys_give_its_attention_in_every_layer(rgb_cat):
    a = analysis.analyse(loaders.load_embedded(), rgb_cat, 64)
    assert len(a.maps.keys) == a.maps.layers and len(a.maps.full) == a.maps.layers
    for layer, keys in enumerate(a.maps.keys):
        assert keys.q.dtype == np.float32
        assert np.abs(keys.rows() - a.maps.full[layer].double().numpy()).max() < 1e-6, layer
    payload = browser.attention_payload(a, spec.ATTENTION.check({}), FIELDS)
    assert payload["first"] == list(range(a.maps.layers))  # all of them come with the first answer
    assert payload["parts"]["keys"] == [f"keys-{i}.f4" for i in range(a.maps.layers)]


@pytest.fixture(scope="module")
def sharp_dino(dino_s8_dir):
    """DINO ViT-S/8's shape with its query and key projections scaled up ×6: rows peak at 0.2 and more."""
    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    with torch.no_grad():
        for name, p in runner._module.named_parameters():
            if re.search(r"(q_proj|k_proj|query|key)", name):
                p.mul_(6.0)
    return runner


def test_float16_keys_give_the_models_attention_within_the_stated_tolerance(sharp_dino, rgb_cat):
    a = analysis.analyse(sharp_dino, rgb_cat, 224)
    assert a.maps.grid == (28, 42) and a.maps.keys[0].q.dtype == np.float16
    for layer in sorted(a.maps.full):
        model = a.maps.full[layer].double().numpy()
        rows = a.maps.keys[layer].rows()
        assert model.max(-1).mean() > 0.1 and model.max() > 0.5  # sharp rows, as DINO's are
        assert np.abs(rows - model).max() < F16_TOLERANCE, layer
        assert np.allclose(rows.sum(-1), 1)


def test_dino_at_224_px_sends_one_layer_first_within_4_mib(sharp_dino, rgb_cat):
    a = analysis.analyse(sharp_dino, rgb_cat, 224)
    p = browser.attention_payload(a, spec.ATTENTION.check({"layer": 5}), FIELDS)
    assert p["first"] == [4] and p["tokens"] == 1 + 28 * 42 and p["head_dim"] == 64
    per_layer = 2 * 6 * 1177 * 64 * 2  # q and k, float16
    cls = 12 * 7 * 1176 * 4
    assert p["bytes"] == cls + 1176 * 4 + len(browser.part(a, "image.png")) + per_layer
    assert p["bytes"] <= 4 * 2**20
    assert len(browser.part(a, "keys-4.f2")) == per_layer
    assert len(browser.part(a, "cls.f4")) == cls


def test_the_keys_hooks_are_gone_after_a_forward_that_raises(sharp_dino):
    model = sharp_dino._module
    before = sum(len(m._forward_hooks) for m in model.modules())
    with pytest.raises(RuntimeError, match="stop"):
        with hooks.record_keys(model, lambda *_: None):
            assert sum(len(m._forward_hooks) for m in model.modules()) == before + 2 * 12
            raise RuntimeError("stop")
    assert sum(len(m._forward_hooks) for m in model.modules()) == before


@pytest.mark.slow
def test_dino_at_512_px_still_points_per_head_within_16_mib(sharp_dino):
    """At 512 px the cat (64×96 patches) is over S/8's token budget: the square astronaut, 64×64 patches."""
    from vitviz.core import images

    from conftest import EXAMPLES

    a = analysis.analyse(sharp_dino, images.load_rgb(EXAMPLES / "astronaut.png"), 512)
    p = browser.attention_payload(a, spec.ATTENTION.check({}), FIELDS)
    assert p["grid"] == [64, 64] and p["first"] == [11]
    assert p["bytes"] <= 16 * 2**20
    keys = a.maps.keys[11]
    model = a.maps.full[11].double().numpy()  # the last layer's matrices are always kept
    some = np.arange(1, 4097, 67)
    assert np.abs(keys.rows(some) - model[:, some]).max() < F16_TOLERANCE
