"""Pixel perturbation (issue 70 item 2): the mean baseline is quantus's progressive mean done by hand, a pixel curve
is one plain forward per point, ROAD's imputation solves its own linear system; the report card's gains and ranks
are the definitions computed by hand. The slow set has quantus and pytorch-grad-cam referee the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, module_of

from peers import peer
from vitviz.analyses import faithful, perturb
from vitviz.core import images
from vitviz.models import cache
from vitviz.models.runner import Call
from vitviz.specs import registry


def by_hand_mean(x: np.ndarray, order: list[int], patch: int, gw: int) -> list[np.ndarray]:
    """x (3, H, W) after 0, 1, …, N patches of ``order`` were replaced, each by the mean of the whole picture (every
    channel, every pixel) as it was just before: quantus's RegionPerturbation 'mean' baseline, as a loop."""
    img, out = x.astype(np.float64).copy(), [x.astype(np.float64).copy()]
    for i in order:
        r, c = divmod(i, gw)
        img[:, r * patch:(r + 1) * patch, c * patch:(c + 1) * patch] = img.mean()
        out.append(img.copy())
    return out


def test_the_mean_baseline_is_the_progressive_mean_of_the_whole_picture_by_hand():
    x = torch.arange(48, dtype=torch.float32).reshape(1, 3, 4, 4) ** 1.5 / 10
    order = np.array([2, 0, 3, 1])
    values = perturb.mean_values(x, order, 2, (2, 2))
    hand = by_hand_mean(x[0].numpy(), order.tolist(), 2, 2)
    assert values[0] == pytest.approx(float(x.double().mean()), rel=1e-15)  # the first: the picture's own mean
    for k in range(5):
        got = perturb.mean_picture(x, order, values, k, 2, (2, 2)).double().numpy()
        np.testing.assert_allclose(got, hand[k], rtol=2 ** -23)  # float32 pictures: one rounding of each number
    assert len(set(values.round(9))) == 4  # each patch its own number: not one mean for all, not per channel


def test_the_patch_mask_covers_the_removed_patches_pixels():
    m = perturb.patch_mask((2, 3), 2, np.array([1, 5]))
    assert m.shape == (4, 6) and int(m.sum()) == 8
    assert m[0:2, 2:4].all() and m[2:4, 4:6].all() and not m[0:2, 0:2].any()


def test_road_solves_its_own_linear_system_by_a_dense_solve():
    """The imputation is the solution of grad-cam's equations (every removed pixel the weighted mean of its eight
    neighbours, weights 1/6 and 1/12, outside the picture left out), here written as a dense matrix in float64."""
    torch.manual_seed(0)
    h = w = 8
    x = torch.randn(1, 3, h, w)
    missing = perturb.patch_mask((4, 4), 2, np.array([0, 5, 6, 9, 15]))
    got = perturb.road_solve(x, missing[None], dtype=torch.float64)[0].numpy()
    idx = [i for i in range(h * w) if missing.reshape(-1)[i]]
    at = {p: j for j, p in enumerate(idx)}
    weights = {(dy, dx): (1 / 6 if dy == 0 or dx == 0 else 1 / 12) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
               if (dy, dx) != (0, 0)}
    a, b = np.zeros((len(idx), len(idx))), np.zeros((len(idx), 3))
    img = x[0].double().numpy().reshape(3, -1)
    for j, p in enumerate(idx):
        y, xx = divmod(p, w)
        for (dy, dx), wt in weights.items():
            yy, xn = y + dy, xx + dx
            if 0 <= yy < h and 0 <= xn < w:
                q = yy * w + xn
                a[j, j] += wt
                if q in at:
                    a[j, at[q]] -= wt
                else:
                    b[j] += wt * img[:, q]
    v = np.linalg.solve(a, b)
    want = img.copy()
    want[:, idx] = v.T
    # the solver stops at residual ≤ tol·|b| (per channel), so its error is at most tol·|b| / λ_min(A), A symmetric
    lam = float(np.linalg.eigvalsh(a).min())
    bound = lambda tol: tol * np.linalg.norm(b, axis=0).max() / lam  # noqa: E731
    assert float(np.abs(got.reshape(3, -1) - want).max()) <= bound(perturb.ROAD_TOLERANCE[torch.float64])
    # every patch removed: no known pixel, the picture's per-channel mean
    all_gone = perturb.road_solve(x, torch.ones(1, h, w, dtype=torch.bool), dtype=torch.float64)[0]
    np.testing.assert_allclose(all_gone.numpy(), x[0].double().mean((1, 2), keepdim=True).expand(3, h, w).numpy())
    # the page's float32 solve: the same bound at float32's tolerance, plus float32's rounding of the pictures'
    # values (a few units of 2^-24 of the largest, the recurrences' residual drifting from the true one)
    plain = perturb.road_solve(x, missing[None])[0]
    err = float((plain.double() - torch.as_tensor(want.reshape(3, h, w))).abs().max())
    assert plain.dtype == torch.float32 and err <= bound(perturb.ROAD_TOLERANCE[torch.float32]) + \
        8 * 2 ** -24 * np.abs(want).max() / lam
    # a solve that cannot reach its tolerance in the steps allowed says so (it used to return silently)
    with pytest.raises(perturb.NotConverged, match="did not converge in 1 steps"):
        perturb.road_solve(x, missing[None], max_steps=1, dtype=torch.float64)
    noisy = perturb.road_pictures(x, missing[None], seed=3)[0] - plain
    assert float(noisy[:, ~missing].abs().max()) == 0.0  # the noise only where pixels were removed
    assert 0.005 < float(noisy[:, missing].std()) < 0.02  # and of grad-cam's size, 0.01


def _offline():
    runner = cache.get_model(registry.OFFLINE_KEY)
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    return runner, rgb, runner.preprocess(rgb)


def test_pixel_deletion_is_one_plain_forward_per_point_by_hand(monkeypatch):
    monkeypatch.setattr(perturb, "PICTURES_PER_BATCH", 1)  # one picture per forward: the same kernels as by hand
    runner, rgb, x = _offline()
    g, patch = x.shape[-1] // runner.spec.patch, runner.spec.patch
    logits = runner.run(Call(lambda m, x, forward: forward(x)[0]), x)
    probs = torch.softmax(logits[0].double(), -1)
    target = int(probs.argmax())
    s = faithful.Scored(float(probs[target]), target, None, probs.numpy())
    order = np.asarray(faithful.random_order(g * g, 7))
    c, pictures = perturb.pixel_curves(lambda probe: runner.run(probe, x), x, s, runner.spec.prefix,
                                       [("o", order)], 5, (g, g), patch, "mean")
    assert pictures == 4  # 25, 50, 75 and 100% (the mean's end is the order's own)
    hand = by_hand_mean(x[0].numpy(), order.tolist(), patch, g)
    for i, k in enumerate([0, 16, 32, 48, 64]):
        picture = torch.as_tensor(hand[k], dtype=torch.float32)[None]
        p = torch.softmax(runner.run(Call(lambda m, x, forward: forward(x)[0]), picture)[0].double(), -1)[target]
        assert c.deletion["o"][i] == pytest.approx(float(p), rel=1e-6, abs=1e-7)  # pictures equal to 1 ulp
    assert c.deletion["o"][0] == s.full


def test_a_reports_curves_start_at_the_models_own_score_and_cost_what_was_planned():
    runner, rgb, x = _offline()
    g = x.shape[-1] // runner.spec.patch
    r = runner.analyse(perturb.ReportProbe((g, g), runner.spec.prefix, runner.spec.patch, 5, 3, "mean"), rgb).value
    logits = runner.run(Call(lambda m, x, forward: forward(x)[0]), x)
    own = float(torch.softmax(logits[0].double(), -1).max())
    for test, c in r.tests.items():
        assert all(v[0] == c.full for v in c.deletion.values()), test
        # the maps' eager forward against the fused one: float32 rounding of a probability, far below 1e-5
        assert c.full == pytest.approx(own, abs=1e-5)
        assert all(v[0] == 1.0 for v in r.scaled[test].deletion.values())
    assert r.forwards == perturb.planned_pictures(g * g, len(r.names), 5, 3, "mean")
    assert set(r.tests) == {"token dropping", "pixels (mean)"} and "occlusion" in r.names


def test_gains_verdicts_and_ranks_on_a_hand_made_case():
    fr = np.array([0.0, 0.5, 1.0])
    c = faithful.Curves(fr, {"a": np.array([2.0, 0.0, 0.0]), "b": np.array([2.0, 1.0, 0.0]),
                             "c": np.array([2.0, 2.0, 2.0]), "r1": np.array([2.0, 2.0, 0.0]),
                             "r2": np.array([2.0, 1.0, 0.0])}, {}, 2.0, 0)
    assert perturb.normalised(c).deletion["a"].tolist() == [1.0, 0.0, 0.0]
    # raw areas (trapezoid, 0..1): a 0.5, b 1.0, c 2.0, r1 1.5, r2 1.0; A_random = 1.25
    assert perturb.areas(c) == pytest.approx({"a": 0.5, "b": 1.0, "c": 2.0, "r1": 1.5, "r2": 1.0})
    g = perturb.gains(c, ["a", "b", "c"], ["r1", "r2"])  # 1 - A / 1.25
    assert g == pytest.approx({"a": 0.6, "b": 0.2, "c": -0.6})
    # b's area equals r2's: inside the random orders' range, not "better" (its gain is positive all the same)
    assert perturb.verdicts(c, ["a", "b", "c"], ["r1", "r2"]) == {"a": "better", "b": "within", "c": "worse"}
    assert perturb.ranks(perturb.areas(c)) == {"a": 1, "b": 2.5, "r2": 2.5, "r1": 4, "c": 5}
    # scale-free: the same curves times 1000 (a different score's units) give the same gains
    big = faithful.Curves(fr, {k: v * 1000 for k, v in c.deletion.items()}, {}, 2000.0, 0)
    assert perturb.gains(big, ["a", "b", "c"], ["r1", "r2"]) == pytest.approx(g)
    # bounded: a score that is tiny on the whole picture and rises when patches go (divided by the whole
    # picture's score it reached 30 here, as the review's 63.8): areas 0.17 and 0.355, gain 1 - 0.17/0.355
    rise = faithful.Curves(fr, {"m": np.array([0.02, 0.3, 0.06]), "r": np.array([0.02, 0.6, 0.2])}, {}, 0.02, 0)
    assert perturb.gains(rise, ["m"], ["r"]) == pytest.approx({"m": 1 - 0.17 / 0.355})
    # the random orders lose nothing (area 0): no gain, NaN, rather than a division by about zero
    flat = faithful.Curves(fr, {"m": np.array([0.0, 0.0, 0.0]), "r": np.zeros(3)}, {}, 0.0, 0)
    assert np.isnan(perturb.gains(flat, ["m"], ["r"])["m"])
    r = perturb.scored_report({"a": np.zeros(2), "b": np.zeros(2), "c": np.zeros(2)}, ["r1", "r2"],
                              {"t1": c, "t2": c})
    assert r.ranks["t2"] == {"a": 1, "b": 2, "c": 3} and r.gains["t1"] == pytest.approx(g)
    assert r.areas["t1"]["r1"] == 1.5 and r.verdicts["t2"]["c"] == "worse"


def test_an_unknown_baseline_is_refused_naming_it():
    s = faithful.Scored(1.0, 0, None, None)
    with pytest.raises(ValueError, match="`baseline`"):
        perturb.pixel_curves(lambda p: None, torch.zeros(1, 3, 8, 8), s, 1, [], 5, (1, 1), 8, "blur")


# ---- referees ----------------------------------------------------------------------------------------------------

class _Logits(torch.nn.Module):
    """The offline model as a plain module (B, 3, H, W) -> logits (B, C), for the peers' model wrappers."""

    def __init__(self, runner):
        super().__init__()
        from vitviz.models import loaders

        self.model = module_of(runner)
        self.fwd = loaders.forward_of(self.model)

    def forward(self, x):
        return self.fwd(x)[0]


@pytest.mark.slow
def test_quantus_region_perturbation_equals_the_pixel_deletion_curve():
    quantus = peer("quantus")
    runner, rgb, x = _offline()
    g, patch = x.shape[-1] // runner.spec.patch, runner.spec.patch
    n = g * g
    logits = runner.run(Call(lambda m, x, forward: forward(x)[0]), x)
    probs = torch.softmax(logits[0].double(), -1)
    target = int(probs.argmax())
    s = faithful.Scored(float(probs[target]), target, None, probs.numpy())
    values = np.random.default_rng(5).permutation(n).astype(np.float64) + 1  # distinct: quantus's sort is not stable
    order = np.asarray(faithful.order_of(values))
    c, _ = perturb.pixel_curves(lambda probe: runner.run(probe, x), x, s, runner.spec.prefix, [("map", order)],
                                n + 1, (g, g), patch, "mean")
    a = np.repeat(np.repeat(values.reshape(g, g), patch, 0), patch, 1)[None, None].astype(np.float32)
    metric = quantus.RegionPerturbation(patch_size=patch, order="morf", regions_evaluation=n,
                                        perturb_baseline="mean", normalise=False, abs=False, disable_warnings=True)
    model = _Logits(runner).eval()
    drops = np.asarray(metric(model=model, x_batch=x.numpy(), y_batch=np.array([target]), a_batch=a,
                              device="cpu", softmax=True)[0])
    # quantus returns the original prediction minus each perturbed one (its prediction in float32)
    with torch.no_grad():
        theirs = float(torch.softmax(model(x).double(), -1)[0, target]) - drops
    # relative to the curve's own scale (the whole picture's score, what the report card divides by): quantus sums
    # the picture's mean and the softmax in float32, vitviz in float64 (seen: 1.6e-6 of 0.80 at most, 2e-6)
    np.testing.assert_allclose(c.deletion["map"][1:], theirs, rtol=0, atol=1e-5 * s.full)


@pytest.mark.slow
def test_grad_cams_noisy_linear_imputer_equals_the_road_pictures():
    road = peer("pytorch_grad_cam.metrics.road")
    torch.manual_seed(0)
    for side, patch, share in ((64, 8, 0.5), (224, 16, 0.8)):
        g = side // patch
        x = torch.randn(1, 3, side, side)
        removed = np.random.default_rng(side).permutation(g * g)[:int(share * g * g)]
        mask = perturb.patch_mask((g, g), patch, removed)
        ours = perturb.road_pictures(x, mask[None], seed=0, noise=0.0)[0]
        theirs = road.NoisyLinearImputer(noise=0.0)(x[0], (~mask).float())  # grad-cam's mask: 1 = kept
        scale = float(theirs.abs().max())
        assert float((ours - theirs).abs().max()) <= 1e-5 * scale
        # with their noise: the same noiseless solution, plus 0.01 × a normal draw on the removed pixels only
        noisy = road.NoisyLinearImputer()(x[0], (~mask).float())
        assert float((noisy - ours)[:, ~mask].abs().max()) <= 1e-5 * scale
        assert 0.008 < float((noisy - ours)[:, mask].std()) < 0.012


def test_a_model_without_classes_is_scored_by_cosine_in_both_tests():
    """A tiny DINO-like transformers ViT without a head: every curve starts at 1 (the whole picture's [CLS] against
    itself), the pixel points are the cosine of each picture's final [CLS] to the whole picture's, done by hand."""
    from transformers import ViTConfig, ViTModel

    from vitviz.models import loaders

    torch.manual_seed(0)
    model = ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64), add_pooling_layer=False).eval()
    runner = loaders.runner_for(model, "tiny DINO-like ViT", resolution=32)
    rgb = images.load_rgb(EXAMPLES / "scene_ring.png")
    x = runner.preprocess(rgb)
    g = x.shape[-1] // 8
    r = runner.run(perturb.ReportProbe((g, g), runner.spec.prefix, 8, 5, 2, "road"), x)
    assert r.names == ["attention", "rollout", "occlusion"]  # the class maps need a class
    for test, c in r.tests.items():
        assert c.target is None and all(v[0] == 1.0 for v in c.deletion.values()), test
    # rollout's 25% point: the 4th picture made (after attention's 25, 50 and 75%), its noise seeded 0 + 3
    pictures = perturb.road_pictures(x, torch.stack([perturb.patch_mask((g, g), 8, np.asarray(
        faithful.order_of(r.maps["rollout"]))[:4])]), seed=3)
    with torch.inference_mode():
        whole = model(x).last_hidden_state[:, 0]
        seen = model(pictures).last_hidden_state[:, 0]
    cos = float(torch.nn.functional.cosine_similarity(seen.double(), whole.double()))
    assert r.tests["pixels (road)"].deletion["rollout"][1] != 1.0
    assert r.tests["pixels (road)"].deletion["rollout"][1] == pytest.approx(cos, abs=1e-5)
