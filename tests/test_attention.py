"""Attention recording: equal to an independent recomputation, hooks always gone, analysis maths by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.core import owned
from vitviz.analyses import attention as analysis
from vitviz.core import attention as att
from vitviz.models import hooks, loaders, runner
from vitviz.render import plotting
from vitviz.specs import registry
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


def eager(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The model's own (H, T, T) attention of every layer, on its eager path (the reference)."""
    kept: dict[int, torch.Tensor] = {}
    with hooks.record_attention(model, lambda i, a: kept.__setitem__(i, a[0].detach().clone())), \
            torch.inference_mode():
        model(pixel_values=x, interpolate_pos_encoding=True) if hasattr(model, "config") else model(x)
    return [kept[i] for i in range(len(kept))]


def reference_distance(full: torch.Tensor, grid: tuple[int, int], patch: int, prefix: int) -> np.ndarray:
    """(H,) mean attention distance from one layer's eager matrices, every patch query, in float64."""
    pp = full.double()[:, prefix:, prefix:]
    d = att.patch_distances(*grid, patch).double()
    return ((pp / pp.sum(-1, keepdim=True)) * d).sum(-1).mean(-1).numpy()


def fused_only(model: torch.nn.Module):
    """A context that fails the test if any eager attention runs: transformers' eager function raises, and timm's
    eager path (the softmax handed to attn_drop) is watched; counts the fused calls."""
    import contextlib
    from unittest import mock

    from transformers.models.dinov2_with_registers import modeling_dinov2_with_registers as hf_reg
    from transformers.models.vit import modeling_vit as hf_vit

    def refuse(*args, **kwargs):
        raise AssertionError("an eager attention function ran")

    fused = {"calls": 0}
    real = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        fused["calls"] += 1
        return real(*args, **kwargs)

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(hf_vit, "eager_attention_forward", refuse))
    stack.enter_context(mock.patch.object(hf_reg, "eager_attention_forward", refuse, create=True))
    stack.enter_context(mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", counting))
    for mod in hooks.attention_modules(model):
        if hasattr(mod, "attn_drop"):
            stack.callback(mod.attn_drop.register_forward_hook(lambda *a: refuse()).remove)
    return stack, fused


def check_against_eager(runner_, x: torch.Tensor, grid: tuple[int, int], patch: int, prefix: int) -> None:
    """The fused analysis of ``x`` against the eager reference: the class token's rows and their masks (1e-5), every
    layer's rows from the kept q and k (within their stated error), rollout (1e-5, every fusion, with a discard) and
    the mean distance (1e-4 relative), the latter two computed later without a second forward."""
    model = module_of(runner_)
    stack, fused = fused_only(model)
    calls = []
    with stack:
        maps = runner_.run(analysis.AttentionProbe(patch, prefix), x)
        handle = model.register_forward_hook(lambda *a: calls.append(1))
        try:
            rollouts = {(f, d): maps.rollout(f, d) for f in att.FUSIONS for d in (0.0, 0.3)}
            distance = maps.distance()
            query = maps.query_maps(1, 2, 0)
        finally:
            handle.remove()
    assert fused["calls"] == maps.layers and calls == []  # one fused forward; the panels ran no forward at all
    full = eager(model, x)
    n = grid[0] * grid[1]
    assert maps.cls.shape == (len(full), full[0].shape[0], n)
    for i, a in enumerate(full):
        np.testing.assert_allclose(maps.cls[i], a[:, 0, prefix:].numpy(), atol=1e-5)
        for h in range(a.shape[0]):
            mask, _, _ = att.mass_mask(a[h, 0, prefix:].numpy(), 0.6)
            mine, _, _ = att.mass_mask(maps.cls[i, h], 0.6)
            assert (mask == mine).all()
        rows = maps.keys[i].rows()
        assert np.abs(rows - a.double().numpy()).max() <= maps.keys[i].error + 1e-5
        np.testing.assert_allclose(distance[i], reference_distance(a, grid, patch, prefix), rtol=1e-4)
    np.testing.assert_allclose(query[1], full[0][:, prefix + grid[1] + 2, prefix:].reshape(-1, *grid).numpy(),
                               atol=1e-5)
    from_keys = [torch.from_numpy(k.rows()).float() for k in maps.keys]
    for (fusion, discard), mine in rollouts.items():
        if discard == 0:  # the model's own matrices
            want = att.rollout_cls([att.fuse_heads(a, fusion) for a in full])[prefix:].reshape(grid)
            np.testing.assert_allclose(mine, want, atol=1e-5, err_msg=fusion)
        # discarding the weakest 30% cuts through near-equal entries (random weights: nearly flat rows), where
        # rounding decides which side of the cut an entry falls; against the rows of the kept keys it is exact
        want = att.rollout_cls([att.fuse_heads(a, fusion) for a in from_keys], discard)[prefix:].reshape(grid)
        np.testing.assert_allclose(mine, want, atol=1e-5, err_msg=f"{fusion} {discard}")


def test_hf_fused_analysis_equals_the_eager_computation(dino):
    torch.manual_seed(1)
    baseline = all_hooks(module_of(dino))  # transformers keeps hooks of its own for output capturing
    check_against_eager(dino, torch.randn(1, 3, 32, 48), (4, 6), 8, 1)
    assert all_hooks(module_of(dino)) == baseline
    assert module_of(dino).config._attn_implementation == "sdpa"  # the eager reference switched it back


def test_hf_with_registers_fused_analysis_equals_the_eager_computation(dinov2_reg_dir):
    loaded = loaders.load_hf(dinov2_reg_dir)
    assert loaded.spec.prefix == 5 and loaded.spec.patch == 14
    torch.manual_seed(2)
    check_against_eager(loaded, torch.randn(1, 3, 56, 84), (4, 6), 14, 5)


@pytest.mark.parametrize("reg_tokens", [0, 4])
def test_timm_fused_analysis_equals_the_eager_computation(reg_tokens):
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, patch_size=8, depth=3,
                          reg_tokens=reg_tokens, dynamic_img_size=True).eval()
    loaded = runner.Runner(registry.REGISTRY["vitviz tiny (shapes only)"], m, loaders._timm_forward(m),
                           mean=(0.5,) * 3, std=(0.5,) * 3, resolution=64, origin="test")
    assert all(b.attn.fused_attn for b in m.blocks)
    check_against_eager(loaded, torch.randn(1, 3, 64, 48), (8, 6), 8, 1 + reg_tokens)
    assert all(b.attn.fused_attn for b in m.blocks) and all_hooks(m) == 0


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


def test_eager_attention_is_switched_on_for_a_block_and_back_even_on_error(dino_s8_dir):
    """A view that needs the matrices themselves gets them from an SDPA model, and the model is fused again after."""
    from transformers import AutoModel

    m = AutoModel.from_pretrained(dino_s8_dir, attn_implementation="sdpa", add_pooling_layer=False).eval()
    baseline = all_hooks(m)
    seen = []
    with pytest.raises(KeyError):
        with hooks.record_attention(m, lambda i, a: seen.append(a.shape)), torch.inference_mode():
            assert m.config._attn_implementation == "eager"
            m(pixel_values=torch.randn(1, 3, 16, 16), interpolate_pos_encoding=True)
            raise KeyError("boom")
    assert len(seen) == 12 and seen[0] == (1, 6, 5, 5)
    assert m.config._attn_implementation == "sdpa" and all_hooks(m) == baseline


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


def test_what_an_analysis_keeps_is_linear_in_the_tokens(dino):
    """No (H, T, T) matrix is kept: the class token's rows and each layer's queries and keys (2·H·T·d numbers)."""
    torch.manual_seed(2)
    maps = dino.run(analysis.AttentionProbe(8, 1), torch.randn(1, 3, 48, 48))
    t = 37
    assert all(k.q.shape == k.k.shape == (6, t, 64) for k in maps.keys)
    assert maps.nbytes == maps.cls.nbytes + sum(k.nbytes for k in maps.keys) <= 12 * 2 * t * 384 * 4 + maps.cls.nbytes
    assert maps.fusions() == ("mean", "max", "min") and maps.rollout("max").shape == (6, 6)
    # the fast head-mean path equals the general one on fused matrices built from the same keys
    np.testing.assert_allclose(att.rollout_from_keys(maps.keys, "mean"),
                               att.rollout_cls([att.fuse_heads(torch.from_numpy(k.rows()).float(), "mean")
                                                for k in maps.keys]), atol=1e-6)


def test_attention_distance_by_hand():
    # two patches 8 px apart; a head that always looks at the other patch has distance 8
    d = att.patch_distances(1, 2, 8)
    assert d.tolist() == [[0.0, 8.0], [8.0, 0.0]]


def test_mean_attention_distance_is_exact_over_every_query(dino):
    """16×16 = 256 patches: the distance computed from the kept keys, a chunk of rows at a time, equals a plain loop
    over every query of the model's own eager matrices."""
    torch.manual_seed(3)
    x = torch.randn(1, 3, 128, 128)
    maps = dino.run(analysis.AttentionProbe(8, 1), x)
    full = eager(module_of(dino), x)
    centres = np.array([(r * 8, c * 8) for r in range(16) for c in range(16)], dtype=np.float64)
    distance = maps.distance()
    for layer in (0, 5, 11):
        a = full[layer].double().numpy()[:, 1:, 1:]  # (H, N, N) patch queries to patch keys
        for h in range(a.shape[0]):
            per_query = []
            for q in range(256):
                w = a[h, q] / a[h, q].sum()
                per_query.append(w @ np.hypot(*(centres[q] - centres).T))  # to each of the 256 keys
            assert distance[layer, h] == pytest.approx(np.mean(per_query), rel=1e-5)


def test_one_forward_per_model_image_resolution(dino, rgb_cat):
    calls = []
    handle = module_of(dino).register_forward_hook(lambda *a: calls.append(1))
    try:
        owned.reset("results")
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


def test_an_answer_without_figures_draws_none_and_says_the_same(rgb_cat, monkeypatch):
    """``show(..., only=frozenset())``: the Attention view skips every figure (drawing one would fail here) and its
    numbers and texts are those of the answer with figures; a view that cannot skip draws and leaves them out."""
    from vitviz.specs import views as declared
    from vitviz.views import show

    values = declared.ATTENTION.check({"model": registry.OFFLINE_KEY, "layer": 3, "keep": 0.5, "query": (2, 5)})
    full = show("attention", rgb_cat, values)
    assert set(full.figures) == {"heads", "box", "crop", "query"}

    def no_drawing(*_args, **_kwargs):
        raise AssertionError("a figure was drawn")
    with monkeypatch.context() as m:
        for name in ("map_grid", "render_query"):
            m.setattr(view, name, no_drawing)
        m.setattr(view.plotting, "upscale", no_drawing)
        bare = show("attention", rgb_cat, values, only=frozenset())
    assert bare.figures == {} and bare.texts == full.texts and bare.settled.values == full.settled.values
    assert bare.numbers == full.numbers
    patches = declared.PATCHES.check({})
    first, *rest = show("patches", rgb_cat, patches).figures
    assert rest and show("patches", rgb_cat, patches, only=frozenset()).figures == {}
    assert list(show("patches", rgb_cat, patches, only=frozenset({first})).figures) == [first]


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


def test_the_fusions_offered_are_the_ones_the_maths_knows():
    from vitviz.specs import views as declared

    assert declared.ROLLOUT["fusion"].options() == att.FUSIONS  # declared as data (specs) and known to the maths (core)
