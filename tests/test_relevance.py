"""Class-specific relevance: on a model built so only one region can move a logit, the relevance lands there."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.analyses import relevance
from vitviz.models import loaders
from vitviz.models.runner import Runner
from vitviz.specs.registry import ModelSpec


def hooks_of(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def one_region_model() -> Runner:
    """A one-block timm ViT whose background tokens are exactly zero, so their keys and values are zero.

    No position embedding, zero biases in the patch projection and q/k/v, LayerNorm with zero bias (so
    LayerNorm(0) = 0): a patch of zero pixels gives a zero value vector, and the class token's output
    (hence every logit) can change through the other patches only. Random weights otherwise.
    """
    import timm

    torch.manual_seed(3)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=1, num_heads=2, num_classes=3).eval()
    with torch.no_grad():
        model.pos_embed.zero_()
        model.patch_embed.proj.bias.zero_()
        model.blocks[0].attn.qkv.bias.zero_()
        model.cls_token.normal_()
    spec = ModelSpec("one-region test model", "timm", "test", 8, 1, 32, 0.0, "classify", dim=32, depth=1, heads=2)
    return Runner(spec, model, loaders._timm_forward(model), mean=(0.0,) * 3, std=(1.0,) * 3, resolution=32,
                  origin="built by the test")


def test_relevance_lands_only_on_the_region_that_can_change_the_logit():
    loaded = one_region_model()
    x = torch.zeros(1, 3, 32, 32)
    x[:, :, 8:16, 16:32] = torch.rand(3, 8, 16, generator=torch.Generator().manual_seed(0)) + 0.5  # patches (1,2),(1,3)
    region = np.zeros((4, 4), bool)
    region[1, 2:4] = True
    best = None
    for target in range(3):
        r = relevance.class_relevance(loaded, x, target)
        patch_rel = r.relevance[1:].reshape(4, 4)
        assert np.abs(patch_rel[~region]).max() < 1e-12  # nothing outside the region
        if best is None or patch_rel[region].sum() > best[1][region].sum():
            best = (r, patch_rel)
    r, patch_rel = best
    assert patch_rel[region].sum() > 1e-4  # and something inside it
    roll = r.rollout[1:].reshape(4, 4)
    assert roll[~region].sum() / roll.sum() > 0.5  # plain rollout spreads over the empty background
    y = x.clone()  # other pixels in the region: the logits move (the region is what the class depends on)
    y[:, :, 8:16, 16:32] = torch.rand(3, 8, 16, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        model = module_of(loaded)
        assert (model(y) - model(x)).abs().max() > 1e-5  # small: timm initialises weights small


def test_top_class_by_default_no_hooks_no_parameter_gradients_and_bad_class():
    tiny = loaders.load_embedded()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    flags = [b.attn.fused_attn for b in module_of(tiny).blocks]
    r = relevance.class_relevance(tiny, x)
    assert r.target == int(np.argmax(r.logits))
    second = relevance.class_relevance(tiny, x, rank=2)  # the class ranked second, from the same forward
    assert second.target == int(np.argsort(-r.logits)[1]) and np.array_equal(second.logits, r.logits)
    assert hooks_of(module_of(tiny)) == 0 and [b.attn.fused_attn for b in module_of(tiny).blocks] == flags
    assert all(p.grad is None for p in module_of(tiny).parameters())
    assert r.relevance[0] >= 1 and np.all(r.relevance >= -1e-12)  # R = I + non-negative terms
    assert abs(r.rollout.sum() - 1) < 1e-5  # rollout rows stay distributions
    with pytest.raises(ValueError, match="no class 99"):
        relevance.class_relevance(tiny, x, 99)
    assert hooks_of(module_of(tiny)) == 0


def test_relevance_from_threads_equals_sequential():
    tiny = loaders.load_embedded()
    xs = [torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(s)) for s in range(4)]
    alone = [relevance.class_relevance(tiny, x, 1).relevance for x in xs]
    together: dict[int, np.ndarray] = {}

    def run(i):
        together[i] = relevance.class_relevance(tiny, xs[i], 1).relevance

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert np.array_equal(alone[i], together[i])
