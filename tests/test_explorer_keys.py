"""The explorer's data: every layer's queries and keys, from which the browser computes any attention row.

Checked against the model's own attention (its eager post-softmax matrices) and against a softmax done by hand. The
precision of each layer's keys is chosen by measuring: float16 only where the rows stay within F16_TOLERANCE of the
float32 ones (the near-even rows of random weights), float32 where heads are sharp (as trained DINO's are; here a
model whose query and key projections are scaled ×8, rows peaking near 1), so that a pointed contour is the one
DINO's rule draws on the true attention."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
import torch
import precision
from conftest import EXAMPLES, module_of

from vitviz.analyses import attention as analysis
from vitviz.core import attention as att
from vitviz.core.attention import F16_TOLERANCE, LayerKeys
from vitviz.models import hooks, loaders
from vitviz.render import browser
from vitviz.specs import registry
from vitviz.specs import views as declared

FIELDS = {n: declared.ATTENTION[n] for n in ("layer", "head", "keep", "alpha", "cmap", "query")}


def true_attention(a: analysis.Analysis) -> list[np.ndarray]:
    """The model's own (H, T, T) attention of every layer for the analysis's picture, on its eager path."""
    return eager_attention_and_keys(a)[0]


def eager_attention_and_keys(a: analysis.Analysis) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """From one eager forward of the analysis's picture: every layer's (H, T, T) attention and its (H, T, d) queries
    (times the scale) and keys as the model computes them (not centred), from hooks of this test's own."""
    attn: dict[int, torch.Tensor] = {}
    qk: dict[int, tuple] = {}
    model = module_of(a.runner)
    x = a.runner.normalise(a.fitted.image)
    with hooks.record_attention(model, lambda i, t: attn.__setitem__(i, t[0].double())), \
            hooks.record_keys(model, lambda i, q, k, s: qk.__setitem__(i, ((q[0] * s).double().numpy(),
                                                                           k[0].double().numpy()))), \
            torch.inference_mode():
        model(pixel_values=x, interpolate_pos_encoding=True) if hasattr(model, "config") else model(x)
    return [attn[i].numpy() for i in range(len(attn))], [qk[i] for i in range(len(qk))]


def fused_queries_and_keys(a: analysis.Analysis) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every layer's (H, T, d) queries (times the scale) and keys as the fused path (what the analysis kept) computes
    them, not centred, from hooks of this test's own."""
    kept: dict[int, tuple] = {}
    model = module_of(a.runner)
    x = a.runner.normalise(a.fitted.image)
    with hooks.record_keys(model, lambda i, q, k, s: kept.__setitem__(i, ((q[0] * s).double().numpy(),
                                                                          k[0].double().numpy()))), \
            torch.inference_mode():
        model(pixel_values=x, interpolate_pos_encoding=True) if hasattr(model, "config") else model(x)
    return [kept[i] for i in range(len(kept))]


def agreement_bound(fused: tuple, eager: tuple, true: np.ndarray) -> np.ndarray:
    """How far rows from the fused forward's q and k may be from the eager forward's own rows ``true`` (H, Q, T),
    derived, not tuned: the float32 rounding of the scores (tests/precision.py) plus what the two paths' q and k
    already differ by (the fused and eager kernels round each layer's output differently, and later layers inherit
    it; measured here, |Δq|·|k| + |q|·|Δk| per score)."""
    (qf, kf), (qe, ke) = fused, eager
    kt = np.swapaxes
    drift = np.abs(qf - qe) @ kt(np.abs(ke), -1, -2) + np.abs(qf) @ kt(np.abs(kf - ke), -1, -2)
    return precision.softmax_bound(true, precision.dot_bound(qe, kt(ke, -1, -2)) + drift)


def test_rows_are_a_softmax_of_scaled_query_key_products_and_centring_the_keys_changes_nothing():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g) + 3.0  # keys far from 0
    keys = LayerKeys.pack(q, k, 0.5, exact_bytes=10**6)
    by_hand = torch.softmax((q.double() * 0.5) @ k.double().transpose(1, 2), -1).numpy()
    assert keys.q.dtype == np.float32 and np.allclose(keys.rows(), by_hand, atol=1e-12 + 1e-6)
    assert np.allclose(keys.k.mean(1), 0, atol=1e-6)  # centred ...
    assert np.abs(keys.k).max() < np.abs(k.numpy()).max() - 1  # ... and smaller, so float16 rounds them less
    assert np.allclose(keys.rows(np.array([3])), by_hand[:, [3]], atol=1e-6)
    flat = LayerKeys.pack(q * 0.01, k, 0.5, exact_bytes=100)  # near-even rows: float16 keeps them
    assert flat.q.dtype == np.float16 and 0 <= flat.error <= F16_TOLERANCE
    sharp = LayerKeys.pack(q * 40, k, 0.5, exact_bytes=100)  # rows near 0 and 1: float16 would move them
    assert sharp.q.dtype == np.float32 and sharp.error == 0.0


def test_keys_beyond_float16s_range_or_decided_once_as_float32_stay_float32():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 5, 4, generator=g) * 1e-3, torch.randn(2, 5, 4, generator=g)
    assert LayerKeys.pack(q, k, 0.5, exact_bytes=100).q.dtype == np.float16  # even rows: float16 would do
    big = k.clone()
    big[1, 2, 3] = 2e5  # centred, still over float16's largest (65504): it would become infinite
    far = LayerKeys.pack(q * 0, big, 0.5, exact_bytes=100)  # (every score 0: even rows, no error to measure)
    assert far.q.dtype == np.float32 and np.isfinite(far.k).all() and far.error == 0.0
    nan = k.clone()
    nan[0, 0, 0] = float("nan")
    assert LayerKeys.pack(q, nan, 0.5, exact_bytes=100).q.dtype == np.float32
    once = LayerKeys.pack(q, k, 0.5, exact_bytes=100, decided=float("inf"))  # float32 was decided for this layer
    assert once.q.dtype == np.float32 and once.error == 0.0
    known = LayerKeys.pack(q, k, 0.5, exact_bytes=100, decided=1e-6)  # float16, its error as measured before
    assert known.q.dtype == np.float16 and known.error == 1e-6
    assert np.allclose(known.rows(), once.rows(), atol=1e-3)


def test_the_embedded_models_keys_give_its_attention_in_every_layer(rgb_cat):
    a = analysis.analyse(loaders.load_embedded(), rgb_cat, 64)
    full = true_attention(a)
    assert len(a.maps.keys) == a.maps.layers == len(full)
    for layer, keys in enumerate(a.maps.keys):
        assert keys.q.dtype == np.float32  # small: exact
        assert np.abs(keys.rows() - full[layer]).max() < 1e-6, layer
    payload = browser.attention_payload(a, declared.ATTENTION.check({}), FIELDS)
    assert payload["first"] == list(range(a.maps.layers))  # all of them come with the first answer
    assert payload["parts"]["keys"] == [f"keys-{i}.f4" for i in range(a.maps.layers)]
    # and in it: the page's explorer asks the server for nothing more (the bytes the parts' route serves)
    assert payload["bytes"] <= browser.INLINE_BYTES
    data = payload["data"]
    assert sorted(data) == sorted(["cls.f4", "image.png", *payload["parts"]["keys"]])
    for name in ("cls.f4", *payload["parts"]["keys"]):
        assert base64.b64decode(data[name]) == browser.part(a, name), name
    assert base64.b64decode(data["image.png"].removeprefix("data:image/png;base64,")) == browser.part(a, "image.png")


def test_random_weights_travel_as_float16_within_the_stated_tolerance(dino_s8_dir, rgb_cat):
    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    a = analysis.analyse(runner, square(rgb_cat), 224)
    full = true_attention(a)
    for layer, keys in enumerate(a.maps.keys):
        assert keys.q.dtype == np.float16 and keys.error <= F16_TOLERANCE
        some = np.arange(0, a.maps.tokens, 37)
        assert np.abs(keys.rows(some) - full[layer][:, some]).max() <= F16_TOLERANCE + 1e-6


@pytest.fixture(scope="module")
def sharp_dino(dino_s8_dir):
    """DINO ViT-S/8's shape with its query and key projections scaled up ×8: rows peak near 1, as trained DINO's."""
    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    with torch.no_grad():
        for name, p in module_of(runner).named_parameters():
            if re.search(r"(q_proj|k_proj|query|key)", name):
                p.mul_(8.0)
    return runner


def contours_agree(rows: np.ndarray, true: np.ndarray, bound: np.ndarray, keep: float = 0.6) -> tuple[int, int]:
    """(rows whose mass-threshold masks differ, of those, rows where the true attention has no genuine tie at the
    threshold): a mask may differ only where the rows' agreement ``bound`` (per entry, derived) allows it: the
    patches that differ are within twice the row's largest bound of the cut, or the mass kept at the cut is within
    the row's summed bound of ``keep``."""
    differ = unexplained = 0
    for mine, want, b in zip(rows, true, bound):
        m1, _, _ = att.mass_mask(mine, keep)
        m2, _, _ = att.mass_mask(want, keep)
        if (m1 != m2).any():
            differ += 1
            order = np.sort(want)[::-1]
            cut = order[int(m2.sum()) - 1]
            near_cut = np.abs(want[m1 != m2] - cut).max() <= 2 * b.max()
            near_keep = min(abs(order[:int(m2.sum())].sum() - keep * want.sum()),
                            abs(order[:int(m2.sum()) - 1].sum() - keep * want.sum())) <= b.sum()
            if not (near_cut or near_keep):
                unexplained += 1
    return differ, unexplained


def square(rgb: np.ndarray) -> np.ndarray:
    """The picture's centre square: 28×28 patches at 224 px, not 28×42 (the same scores, a third fewer tokens)."""
    h, w = rgb.shape[:2]
    s = min(h, w)
    return np.ascontiguousarray(rgb[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s])


def test_sharp_heads_keep_float32_keys_and_their_contours_are_the_true_ones(sharp_dino, rgb_cat):
    a = analysis.analyse(sharp_dino, square(rgb_cat), 224)
    assert a.maps.grid == (28, 28)
    full, eager = eager_attention_and_keys(a)
    fused = fused_queries_and_keys(a)
    p = a.maps.prefix
    for layer, keys in enumerate(a.maps.keys):
        assert full[layer].max(-1).mean() > 0.1 and full[layer].max() > 0.9  # sharp rows, as DINO's are
        assert keys.q.dtype == np.float32, layer
        some = np.arange(p, a.maps.tokens, 19)  # 42 patch queries a layer
        rows = keys.rows(some)
        # scores near 100: 6.0e-5 off with AVX2 kernels, 5.8e-5 with SSE, less with AVX-512 (a tolerance of 5e-5 once
        # failed on every AVX2 machine); the bound is derived from float32's precision and the values' sizes
        fq, fk = fused[layer]
        eq, ek = eager[layer]
        bound = agreement_bound((fq[:, some], fk), (eq[:, some], ek), full[layer][:, some])
        assert (np.abs(rows - full[layer][:, some]) <= bound).all(), (layer, np.abs(rows - full[layer][:, some]).max())
        n = a.maps.cls.shape[-1]
        differ, unexplained = contours_agree(rows[..., p:].reshape(-1, n), full[layer][:, some, p:].reshape(-1, n),
                                             bound[..., p:].reshape(-1, n))
        assert unexplained == 0, (layer, differ)


def test_dino_at_224_px_sends_one_layer_first_within_4_mib(dino_s8_dir, rgb_cat):
    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    a = analysis.analyse(runner, rgb_cat, 224)
    p = browser.attention_payload(a, declared.ATTENTION.check({"layer": 5}), FIELDS)
    assert p["first"] == [4] and p["tokens"] == 1 + 28 * 42 and p["head_dim"] == 64
    assert "data" not in p  # over INLINE_BYTES: fetched by name, kept by the browser's cache
    per_layer = 2 * 6 * 1177 * 64 * 2  # q and k, float16 (random weights: near-even rows)
    cls = 12 * 7 * 1176 * 4
    assert p["bytes"] == cls + len(browser.part(a, "image.png")) + per_layer
    assert p["bytes"] <= 4 * 2**20
    assert len(browser.part(a, "keys-4.f2")) == per_layer
    assert len(browser.part(a, "cls.f4")) == cls


def test_the_keys_hooks_are_gone_after_a_forward_that_raises(sharp_dino):
    model = module_of(sharp_dino)
    before = sum(len(m._forward_hooks) for m in model.modules())
    with pytest.raises(RuntimeError, match="stop"):
        with hooks.record_keys(model, lambda *_: None):
            assert sum(len(m._forward_hooks) for m in model.modules()) == before + 2 * 12
            raise RuntimeError("stop")
    assert sum(len(m._forward_hooks) for m in model.modules()) == before


@pytest.mark.slow
def test_at_480_px_pointed_contours_are_the_true_ones_for_patch_queries(sharp_dino):
    """The case the class saw go wrong (float16 keys, sharp heads, 480 px: up to a quarter of the rows' contours off
    by 1–6 patches): every sampled patch query's contour from the kept keys is DINO's rule on the true attention."""
    from vitviz.core import images

    a = analysis.analyse(sharp_dino, images.load_rgb(EXAMPLES / "astronaut.png"), 480)
    assert a.maps.grid == (60, 60)
    full, eager = eager_attention_and_keys(a)
    p, n = a.maps.prefix, a.maps.cls.shape[-1]
    some = np.arange(p, a.maps.tokens, 97)
    fused = fused_queries_and_keys(a)
    for layer in (0, 5, 11):
        rows = a.maps.keys[layer].rows(some)
        (fq, fk), (eq, ek) = fused[layer], eager[layer]
        bound = agreement_bound((fq[:, some], fk), (eq[:, some], ek), full[layer][:, some])
        differ, unexplained = contours_agree(rows[..., p:].reshape(-1, n), full[layer][:, some, p:].reshape(-1, n),
                                             bound[..., p:].reshape(-1, n))
        assert unexplained == 0, (layer, differ)
    pay = browser.attention_payload(a, declared.ATTENTION.check({}), FIELDS)
    assert pay["grid"] == [60, 60] and pay["first"] == [11] and pay["bytes"] <= 16 * 2**20


def test_the_keys_precision_is_measured_once_per_model_and_layer(dino_s8_dir, rgb_cat, monkeypatch):
    """The trial softmax that decides float16 or float32 cost a tenth of a forward on every request: now it runs on
    a model's first picture only; later pictures reuse the decision (float16 kept with a margin of 4)."""
    from vitviz.core import attention as core

    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    calls = []
    real = core._softmax_rows
    monkeypatch.setattr(core, "_softmax_rows", lambda q, k: calls.append(q.dtype) or real(q, k))
    first = analysis.analyse(runner, rgb_cat, 224)
    trials = [d for d in calls if d == torch.float16]
    assert len(trials) == 12 and all(k.q.dtype == np.float16 for k in first.maps.keys)
    calls.clear()
    again = analysis.analyse(runner, np.ascontiguousarray(rgb_cat[:, ::-1]), 224)  # another picture
    assert [d for d in calls if d == torch.float16] == []  # no trial this time
    assert all(k.q.dtype == np.float16 and k.error == f.error for k, f in zip(again.maps.keys, first.maps.keys))
