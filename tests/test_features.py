"""Patch-feature PCA against torch.pca_lowrank and the covariance; the tokens against the models' own outputs."""

from __future__ import annotations

import numpy as np
import torch
from conftest import module_of

from vitviz.core import owned
from vitviz.analyses import features
from vitviz.core.images import fit_to_patches
from vitviz.models import loaders


def hooks_of(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_pca_equals_pca_lowrank_up_to_sign_and_the_covariance_eigenvalues():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 24, generator=g, dtype=torch.float64) @ torch.randn(24, 24, generator=g, dtype=torch.float64)
    x += 3.0  # an offset: PCA must centre
    r = features.pca(x, 3)
    _, _, v = torch.pca_lowrank(x, q=10, center=True, niter=10)
    for i in range(3):
        cos = float(np.dot(r.components[i], v[:, i].numpy()))
        assert abs(abs(cos) - 1) < 1e-6, (i, cos)
    eig = np.linalg.eigvalsh(np.cov(x.numpy(), rowvar=False))[::-1]
    assert np.allclose(r.share, eig[:3] / eig.sum())
    centred = x.numpy() - x.numpy().mean(0)
    assert np.allclose(r.projections, centred @ r.components.T)  # coordinates on the components
    assert np.allclose(r.projections.var(0, ddof=1), eig[:3])


def test_constant_tokens_give_zero_share_and_black_not_nan():
    r = features.pca(np.ones((16, 8)), 3)
    assert np.all(r.share == 0)
    rgb = features.to_rgb(r.projections, (4, 4))
    assert rgb.shape == (4, 4, 3) and rgb.max() == 0


def test_foreground_orientation_by_hand():
    m = -np.ones((5, 5))
    m[1:4, 1:4] = 2.0
    assert (features.orient_foreground(m) > 0).sum() == 9
    assert (features.orient_foreground(-m) > 0).sum() == 9  # the sign PCA happened to pick does not matter
    assert np.array_equal(features.to_rgb(np.array([[0.0, 1, 2], [2, 1, 0]]), (1, 2))[0],
                          [[0, 0, 255], [255, 0, 0]])


def test_timm_tokens_equal_forward_intermediates(rgb_cat):
    tiny = loaders.load_embedded()
    fitted = fit_to_patches(rgb_cat, 64, 8, "keep")
    streams = tiny.run(features.TokensProbe(), tiny.normalise(fitted.image))
    assert hooks_of(module_of(tiny)) == 0 and streams.shape == (tiny.depth, 1 + 8 * 12, tiny.spec.dim)
    with torch.inference_mode():
        _, inter = module_of(tiny).forward_intermediates(tiny.normalise(fitted.image), indices=list(range(tiny.depth)),
                                                    norm=False, output_fmt="NLC", return_prefix_tokens=True)
    for layer, (patches_, prefix) in enumerate(inter):
        assert torch.allclose(streams[layer, 1:], patches_[0], atol=1e-5)
        assert torch.allclose(streams[layer, :1], prefix[0], atol=1e-5)


def test_transformers_tokens_equal_hidden_states(dino_s8_dir, rgb_cat):
    dino = loaders.load_hf(dino_s8_dir)
    fitted = fit_to_patches(rgb_cat, 64, 8, "keep")
    streams = dino.run(features.TokensProbe(), dino.normalise(fitted.image))
    with torch.inference_mode():
        out = module_of(dino)(pixel_values=dino.normalise(fitted.image), output_hidden_states=True,
                         interpolate_pos_encoding=True)
    assert torch.allclose(streams, torch.stack(out.hidden_states[1:])[:, 0], atol=1e-5)  # [0] is the embedding


def test_token_streams_are_cached_and_made_once_for_simultaneous_requests(rgb_cat):
    import threading
    from unittest import mock

    tiny = loaders.load_embedded()
    owned.reset("results")
    real, calls = features.TokensProbe.__call__, []

    def counted(*args):
        calls.append(1)
        return real(*args)

    with mock.patch.object(features.TokensProbe, "__call__", counted):
        results = []
        threads = [threading.Thread(target=lambda: results.append(features.tokens_for(tiny, rgb_cat, 64)[1]))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(calls) == 1 and all(r is results[0] for r in results)
    assert features.tokens_for(tiny, rgb_cat, 64)[1] is results[0] and hooks_of(module_of(tiny)) == 0


def test_colour_panel_is_oriented_like_the_mask_on_every_layer_of_the_embedded_model(rgb_cat):
    """The red channel (PC1) must be high where the mask says foreground, whatever sign the SVD picked: before
    the fix it pointed the other way on 21 of 32 cases."""
    from vitviz.embedded import scenes

    tiny = loaders.load_embedded()
    pictures = [rgb_cat] + [scenes.make_scene(seed).image for seed in range(3)]
    checked = 0
    for rgb in pictures:
        fitted, streams = features.tokens_for(tiny, rgb, 64)
        for layer in range(streams.shape[0]):
            r = features.oriented(features.pca(streams[layer, tiny.spec.prefix:], 3), fitted.grid)
            first = r.projections[:, 0].reshape(fitted.grid)
            assert np.array_equal(features.orient_foreground(first), first)  # already oriented
            red = features.to_rgb(r.projections, fitted.grid)[..., 0].astype(float)
            fg = first > 0
            if fg.any() and (~fg).any():
                assert red[fg].mean() > red[~fg].mean()
            assert np.allclose(np.abs(r.components[0] @ features.pca(streams[layer, tiny.spec.prefix:], 3).components[0]), 1)
            checked += 1
    assert checked == len(pictures) * tiny.depth


def test_the_last_layer_says_it_is_before_the_final_layernorm(rgb_cat):
    from vitviz.views import features as view

    tiny = loaders.load_embedded()
    fitted, streams = features.tokens_for(tiny, rgb_cat, 64)
    _, last = view.render(tiny, fitted, streams, streams.shape[0])
    _, first = view.render(tiny, fitted, streams, 1)
    assert "before the model's final LayerNorm" in last and "LayerNorm" not in first
