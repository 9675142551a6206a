"""Attention recording: equal to an independent recomputation, hooks always gone, analysis maths by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.analyses import attention as analysis
from vitviz.core import attention as att
from vitviz.models import hooks, loaders, runner
from vitviz.render import plotting
from vitviz.views import attention as view


def all_hooks(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture(scope="module")
def dino(dino_s8_dir):
    loaded = loaders.load_hf(dino_s8_dir)
    with torch.inference_mode():  # transformers installs its own capture hooks on first use; let it
        module_of(loaded)(pixel_values=torch.randn(1, 3, 16, 16), output_hidden_states=True, output_attentions=True,
                     interpolate_pos_encoding=True)
    return loaded


def test_hf_hooked_attention_equals_recomputation(dino):
    torch.manual_seed(1)
    baseline = all_hooks(module_of(dino))  # transformers keeps hooks of its own for output capturing
    x = torch.randn(1, 3, 32, 48)  # 4×6 patches of 8 px, T = 25
    maps = dino.run(analysis.AttentionProbe(8, 1), x)
    assert maps.cls.shape == (12, 6, 24) and len(maps.full) == 12
    with torch.inference_mode():
        out = module_of(dino)(pixel_values=x, output_hidden_states=True, output_attentions=True,
                         interpolate_pos_encoding=True)
    for i, layer in enumerate(module_of(dino).layers):
        with torch.inference_mode():
            h = layer.layernorm_before(out.hidden_states[i])
            q = layer.attention.q_proj(h).view(1, 25, 6, 64).transpose(1, 2)
            k = layer.attention.k_proj(h).view(1, 25, 6, 64).transpose(1, 2)
            mine = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)[0]
        torch.testing.assert_close(maps.full[i].float(), mine, atol=1e-5, rtol=0)
        torch.testing.assert_close(maps.full[i].float(), out.attentions[i][0], atol=1e-5, rtol=0)
        np.testing.assert_allclose(maps.cls[i], mine[:, 0, 1:].numpy(), atol=1e-5)
    rows = maps.full[11].float().sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows), atol=1e-5, rtol=0)
    assert all_hooks(module_of(dino)) == baseline
    # mean attention distance, recomputed from the stored matrices (all 24 queries are used here)
    pp = maps.full[3].float()[:, 1:, 1:]
    d = att.patch_distances(4, 6, 8)
    expected = ((pp / pp.sum(-1, keepdim=True)) * d).sum(-1).mean(-1)
    np.testing.assert_allclose(maps.distance[3], expected.numpy(), rtol=2e-3)


def test_timm_hooked_attention_equals_recomputation_and_fused_flag_restored():
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, patch_size=8, depth=3).eval()
    assert all(b.attn.fused_attn for b in m.blocks)  # hooks on this path would see nothing
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        maps = analysis.collect(m, x, lambda x: (m(x), None), 8, 1)
    assert all(b.attn.fused_attn for b in m.blocks) and all_hooks(m) == 0
    with torch.inference_mode():
        t = m.norm_pre(m._pos_embed(m.patch_embed(x)))
        for i, blk in enumerate(m.blocks):
            h = blk.norm1(t)
            qkv = blk.attn.qkv(h).reshape(1, 65, 3, 3, 64).permute(2, 0, 3, 1, 4)
            q, k = qkv[0], qkv[1]
            mine = torch.softmax(q @ k.transpose(-1, -2) * 64 ** -0.5, dim=-1)[0]
            torch.testing.assert_close(maps.full[i].float(), mine, atol=1e-5, rtol=0)
            t = blk(t)


def test_hooks_removed_after_an_exception(dino):
    class Boom(Exception):
        pass

    calls = []
    baseline = all_hooks(module_of(dino))
    with pytest.raises(Boom):
        with hooks.record_attention(module_of(dino), lambda layer, a: calls.append(layer)) as n:
            assert n == 12 and all_hooks(module_of(dino)) == baseline + 12
            with torch.inference_mode():
                module_of(dino)(pixel_values=torch.randn(1, 3, 16, 16), interpolate_pos_encoding=True)
            raise Boom
    assert calls == list(range(12)) and all_hooks(module_of(dino)) == baseline


def test_sdpa_model_is_refused_not_silently_empty(dino_s8_dir):
    from transformers import AutoModel

    m = AutoModel.from_pretrained(dino_s8_dir, attn_implementation="sdpa", add_pooling_layer=False).eval()
    baseline = all_hooks(m)
    with pytest.raises(RuntimeError, match="eager"):
        with hooks.record_attention(m, lambda *a: None), torch.inference_mode():
            m(pixel_values=torch.randn(1, 3, 16, 16), interpolate_pos_encoding=True)
    assert all_hooks(m) == baseline


def test_registers_are_dropped_from_the_grid(dinov2_reg_dir):
    loaded = loaders.load_hf(dinov2_reg_dir)
    assert loaded.spec.prefix == 5 and loaded.spec.patch == 14
    x = torch.randn(1, 3, 56, 84)
    maps = loaded.run(analysis.AttentionProbe(14, 5), x)
    assert maps.cls.shape == (2, 4, 24) and maps.cls_map(1).shape == (4, 6)
    assert maps.norms.shape == (29,)
    full = maps.full[1].float()
    np.testing.assert_allclose(maps.cls[1], full[:, 0, 5:].numpy(), atol=1e-6)


@pytest.mark.parametrize("seed", range(20))
def test_mass_mask_is_the_smallest_set(seed):
    rng = np.random.default_rng(seed)
    a = rng.random(30) ** 4
    keep = float(rng.uniform(0.1, 0.95))
    mask, mass, frac = att.mass_mask(a, keep)
    k = int(mask.sum())
    top = np.sort(a)[::-1] / a.sum()
    assert mass == pytest.approx(a[mask].sum() / a.sum()) and mass >= keep - 1e-12
    assert top[: k - 1].sum() < keep  # one fewer patch, even the best ones, is not enough
    assert frac == pytest.approx(k / 30)
    assert a[mask].min() >= a[~mask].max()


def test_mass_mask_zero_attention():
    mask, mass, frac = att.mass_mask(np.zeros((3, 3)), 0.6)
    assert mask.all() and mass == 1.0 and frac == 1.0


def test_rollout_two_layer_toy_by_hand():
    a1 = torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8]])
    a2 = torch.tensor([[0.2, 0.3, 0.5], [0.4, 0.4, 0.2], [0.3, 0.3, 0.4]])
    r1 = (a1.numpy() + np.eye(3)) / 2
    r2 = (a2.numpy() + np.eye(3)) / 2
    r1 /= r1.sum(1, keepdims=True)
    r2 /= r2.sum(1, keepdims=True)
    expected = (r2 @ r1)[0]
    # by hand for row 0: r2[0] = [0.6, 0.15, 0.25]; times r1 columns
    assert expected[1] == pytest.approx(0.6 * 0.125 + 0.15 * 0.8 + 0.25 * 0.05)
    np.testing.assert_allclose(att.rollout_cls([a1, a2]), expected, atol=1e-6)
    assert att.rollout_cls([a1, a2]).sum() == pytest.approx(1.0)


def test_rollout_discard_drops_smallest_but_not_cls():
    a = torch.tensor([[0.05, 0.9, 0.05], [0.3, 0.3, 0.4], [0.01, 0.49, 0.5]])
    with_discard = att.rollout_cls([a], discard=0.2)  # drops the 1 smallest entry: a[2, 0] = 0.01
    b = a.clone()
    b[2, 0] = 0
    r = (b.numpy() + np.eye(3)) / 2
    r /= r.sum(1, keepdims=True)
    np.testing.assert_allclose(with_discard, r[0], atol=1e-6)


def test_memory_aware_mode_keeps_little_and_agrees(dino):
    torch.manual_seed(2)
    x = torch.randn(1, 3, 48, 48)
    full = dino.run(analysis.AttentionProbe(8, 1), x)
    lean = dino.run(analysis.AttentionProbe(8, 1, full_budget=0, fused_budget=0), x)
    mid = dino.run(analysis.AttentionProbe(8, 1, full_budget=0), x)
    assert set(mid.full) == {11} and mid.fusions() == ("mean", "max", "min")
    for fusion in ("mean", "max", "min"):
        np.testing.assert_allclose(mid.rollout(fusion, 0.3), full.rollout(fusion, 0.3), atol=1e-3)
    assert set(full.full) == set(range(12)) and not full.fused
    assert set(lean.full) == {11} and set(lean.fused) == {"mean"} and lean.fusions() == ("mean",)
    assert full.fusions() == ("mean", "max", "min")
    np.testing.assert_allclose(lean.cls, full.cls)
    np.testing.assert_allclose(lean.distance, full.distance, rtol=1e-6)
    for discard in (0.0, 0.3):
        np.testing.assert_allclose(lean.rollout("mean", discard), full.rollout("mean", discard), atol=1e-3)
    with pytest.raises(ValueError, match="lower the resolution"):
        lean.rollout("max")
    assert full.rollout("max").shape == full.rollout("min").shape == (6, 6)
    # the fast head-mean path equals the general one on explicitly fused matrices
    fused = [att.fuse_heads(full.full[i], "mean") for i in range(12)]
    np.testing.assert_allclose(att.rollout_cls_mean([full.full[i] for i in range(12)]), att.rollout_cls(fused),
                               atol=1e-6)
    used, q = lean.query_maps(2, 3, layer=4)
    assert used == 11 and q.shape == (6, 6, 6)


def test_attention_distance_by_hand():
    # two patches 8 px apart; a head that always looks at the other patch has distance 8
    d = att.patch_distances(1, 2, 8)
    assert d.tolist() == [[0.0, 8.0], [8.0, 0.0]]


def test_mean_attention_distance_is_exact_over_every_query(dino):
    """16×16 = 256 patches (the old estimate sampled 128 queries): equal to a plain loop over all of them."""
    torch.manual_seed(3)
    maps = dino.run(analysis.AttentionProbe(8, 1), torch.randn(1, 3, 128, 128))
    assert len(maps.full) == maps.layers  # every layer kept at this size
    centres = np.array([(r * 8, c * 8) for r in range(16) for c in range(16)], dtype=np.float64)
    for layer in (0, 5, 11):
        a = maps.full[layer].double().numpy()[:, 1:, 1:]  # (H, N, N) patch queries to patch keys
        for h in range(a.shape[0]):
            per_query = []
            for q in range(256):
                w = a[h, q] / a[h, q].sum()
                per_query.append(sum(w[k] * np.hypot(*(centres[q] - centres[k])) for k in range(256)))
            assert maps.distance[layer, h] == pytest.approx(np.mean(per_query), rel=1e-5)


def test_one_forward_per_model_image_resolution(dino, rgb_cat):
    calls = []
    handle = module_of(dino).register_forward_hook(lambda *a: calls.append(1))
    try:
        runner.clear_results()
        a = analysis.analyse(dino, rgb_cat, 64)
        for layer in range(12):
            for keep in (0.3, 0.6, 0.9):
                view.render_heads(analysis.analyse(dino, rgb_cat, 64), layer, keep, "viridis", 0.3)
        view.render_rollout(a, "max", 0.5)
        view.render_query(a, 1, 2, 5)
        assert len(calls) == 1
        analysis.analyse(dino, rgb_cat, 96)  # a new resolution is a new forward
        assert len(calls) == 2
    finally:
        handle.remove()


def test_heads_view_reports_mass_and_box(dino, rgb_cat):
    a = analysis.analyse(dino, rgb_cat, 64)
    v = view.render_heads(a, 11, 0.6)
    assert v.heads.size[0] > 300 and "mass kept" in v.table and v.table.count("| head ") == 7  # six heads and the mean
    k = view.box_scale(a)
    assert v.box.size == (a.fitted.image.shape[1] * k, a.fitted.image.shape[0] * k)
    assert v.crop.size[0] <= v.box.size[0] and v.crop.size[0] % (8 * k) == 0  # whole patches
    # a click on the box view maps back to the patch under it
    assert view.click_to_patch(a, 3 * 8 * k + 1, 2 * 8 * k + 1) == (2, 3)


def test_registers_comparison_renders_two_models(dinov2_reg_dir, tmp_path, rgb_cat):
    """The comparison view on two locally built DINOv2s (without and with registers), as the tab draws it."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    plain_dir = tmp_path / "dinov2_plain"
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(image_size=56, patch_size=14, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=4)).save_pretrained(plain_dir)
    BitImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}).save_pretrained(plain_dir)
    plain, reg = loaders.load_hf(plain_dir), loaders.load_hf(dinov2_reg_dir)
    assert (plain.spec.prefix, reg.spec.prefix) == (1, 5)
    pair = [analysis.analyse(m, rgb_cat, 56) for m in (plain, reg)]
    assert [a.maps.cls.shape[-1] for a in pair] == [4 * 6, 4 * 6]  # same grid: registers dropped
    note, image = view.render_registers(pair)
    assert "High-norm patch tokens" in note and image.size[0] > 600
    norms = np.array([1.0] * 20 + [50.0])
    assert view.outlier_tokens(norms).tolist() == [False] * 20 + [True]


def test_overlay_on_a_shared_scale():
    """A flat map is flat black on its own min..max, but keeps its level on a shared scale (the timeline)."""
    rgb = np.zeros((16, 16, 3), np.uint8)
    flat = np.full((2, 2), 0.5)
    own = plotting.overlay(rgb, flat, "inferno", alpha=1.0)
    shared = plotting.overlay(rgb, flat, "inferno", alpha=1.0, vmin=0.0, vmax=1.0)
    assert (own == plotting.colorize(np.zeros((1, 1)), "inferno")[0, 0]).all()
    assert (shared == plotting.colorize(np.array([[0.0, 0.5, 1.0]]), "inferno")[0, 1]).all()


def test_distance_chart_is_kept_per_analysis_and_style(rgb_cat):
    """A warm /attention skips matplotlib for the distance chart; a different style or a bundle draws its own."""
    tiny = loaders.load_embedded()
    a = analysis.analyse(tiny, rgb_cat, 64)
    first = view.render_distance(a)
    assert view.render_distance(a) is first
    assert np.array_equal(np.asarray(view._draw_distance(a)), np.asarray(first))  # the same pixels as drawn anew
    with plotting.styled(compact=True):
        compact = view.render_distance(a)
    assert compact is not first and compact.info["vitviz:text_px"] != first.info["vitviz:text_px"]
    with plotting.keep_vectors():
        assert "pdf" in view.render_distance(a).info and "pdf" not in first.info
