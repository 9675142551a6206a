"""Inside one head: our step-by-step arithmetic equals what the model computed, for timm and transformers ViTs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.analyses import heads
from vitviz.core.images import fit_to_patches
from vitviz.models import hooks, loaders


def record_layer(loaded, fitted, layer: int) -> heads.LayerRecord:
    """Layer ``layer`` (0-based) of one forward of an already fitted picture, taken apart."""
    return loaded.run(heads.LayerProbe(layer, loaded.spec.prefix, loaded.spec.patch), loaded.normalise(fitted.image))


def hooks_of(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture(scope="module")
def tiny():
    return loaders.load_embedded()


@pytest.fixture(scope="module")
def dino(dino_s8_dir):
    loaded = loaders.load_hf(dino_s8_dir)
    with torch.inference_mode():  # transformers installs capture hooks of its own on first use
        module_of(loaded)(pixel_values=torch.randn(1, 3, 16, 16), output_attentions=True,
                          interpolate_pos_encoding=True)
    return loaded


def check_every_head(loaded, rgb, side, layer):
    fitted = fit_to_patches(rgb, side, loaded.spec.patch, "keep")
    before = hooks_of(module_of(loaded))
    record = record_layer(loaded, fitted, layer)
    assert hooks_of(module_of(loaded)) == before  # nothing left behind
    t = loaded.spec.prefix + fitted.grid[0] * fitted.grid[1]
    assert record.q.shape == (loaded.spec.heads, t, loaded.spec.dim // loaded.spec.heads)
    for h in range(record.heads):
        for query in (0, loaded.spec.prefix, t // 2, t - 1):
            tr = heads.trace(record, h, query)
            assert abs(tr.weights.sum() - 1) < 1e-9
            assert tr.softmax_error < 2e-6, tr.softmax_error  # our softmax = the model's own attention row
            assert tr.output_error < 2e-5, tr.output_error  # Σ a_j v_j = the head's output in the model
            assert np.abs(tr.model_out).max() > 1e-3  # (a real comparison, not of zeros)
    return record


def test_timm_head_arithmetic_equals_the_model(tiny, rgb_cat):
    flags = [b.attn.fused_attn for b in module_of(tiny).blocks]
    rec = check_every_head(tiny, rgb_cat, 64, 2)
    assert rec.scale == pytest.approx((tiny.spec.dim // rec.heads) ** -0.5)
    assert [b.attn.fused_attn for b in module_of(tiny).blocks] == flags  # switched off for the capture, then restored


def test_transformers_head_arithmetic_equals_the_model(dino, rgb_cat):
    check_every_head(dino, rgb_cat, 64, 11)


def test_registers_model_head_arithmetic(dinov2_reg_dir, rgb_cat):
    loaded = loaders.load_hf(dinov2_reg_dir)
    with torch.inference_mode():
        module_of(loaded)(pixel_values=torch.randn(1, 3, 28, 28), output_attentions=True)
    rec = check_every_head(loaded, rgb_cat, 56, 1)
    assert rec.prefix == 5


def test_scores_by_hand_from_the_layers_input(tiny, rgb_cat):
    """q and k recomputed from the block's normalised input with the layer's own weights give the same scores."""
    fitted = fit_to_patches(rgb_cat, 64, 8, "keep")
    block = module_of(tiny).blocks[1]
    with torch.inference_mode(), hooks.capture({"x": (block.norm1, "output")}) as seen:
        module_of(tiny)(tiny.normalise(fitted.image))
    x = seen["x"][0].double()
    w, b = block.attn.qkv.weight.detach().double(), block.attn.qkv.bias.detach().double()
    d = tiny.spec.dim
    hd = d // block.attn.num_heads
    q = x @ w[:d].T + b[:d]
    k = x @ w[d:2 * d].T + b[d:2 * d]
    tr = heads.trace(record_layer(tiny, fitted, 1), 2, 7)
    expected = (k[:, 2 * hd:3 * hd] @ q[7, 2 * hd:3 * hd]) / hd ** 0.5
    assert np.allclose(tr.scores, expected.numpy(), atol=1e-5)


def test_hooks_removed_and_fused_flags_restored_on_error(tiny, rgb_cat):
    fitted = fit_to_patches(rgb_cat, 64, 8, "keep")
    flags = [b.attn.fused_attn for b in module_of(tiny).blocks]

    class Broken(heads.LayerProbe):
        """The layer probe with its hooks on, over a forward that fails."""

        def __call__(self, model, x, forward):
            def broken(_x):
                raise RuntimeError("boom")
            return super().__call__(model, x, broken)

    with pytest.raises(RuntimeError, match="boom"):
        tiny.run(Broken(0, 1, 8), tiny.normalise(fitted.image))
    assert hooks_of(module_of(tiny)) == 0
    assert [b.attn.fused_attn for b in module_of(tiny).blocks] == flags
    assert tiny._lock.idle  # and the lock is free again


def test_layer_record_is_cached_and_clamped(tiny, rgb_cat):
    fitted, a = heads.layer_record(tiny, rgb_cat, 224, 99)  # the embedded model runs at 64 px; layer clamped
    assert a.layer == tiny.depth - 1 and fitted.image.shape[:2] == (64, 64)  # a classifier: its own 64-px crop
    assert heads.layer_record(tiny, rgb_cat, 224, 99)[1] is a
    with pytest.raises(ValueError, match="no layer 9"):
        tiny.read(lambda model: hooks.attention_parts(model, 8))
