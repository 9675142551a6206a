"""The randomisation test of the maps (vitviz.analyses.randomise, the /randomise view): the cascade's steps and
what each re-draws, the seeded draws, the shared model left alone, the three scores against independent
computations; and, in the slow set, quantus 0.6.0's MPRT, SmoothMPRT and EfficientMPRT as referees on the same
steps and maps."""

from __future__ import annotations

import copy
import itertools
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conftest import EXAMPLES, module_of
from vitviz import views
from vitviz.analyses import faithful, randomise
from vitviz.core import images
from vitviz.models import loaders
from vitviz.specs import registry
from vitviz.views import faithful as faithful_view


def tiny_timm(init_values: float | None = 1e-5, **kw) -> torch.nn.Module:
    """A two-block timm ViT at 32 px (random weights; LayerScale when ``init_values``), every parameter then moved
    off its initial value, so that a re-drawn part shows as changed (norms away from 1 and 0, LayerScale away
    from its start)."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32, depth=2,
                          num_heads=2, num_classes=3, init_values=init_values, dynamic_img_size=True, **kw).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1 + 0.05)
    return m


def tiny_dinov2() -> torch.nn.Module:
    """A two-block transformers DINOv2 (LayerScale ``lambda1``, ``config.layerscale_value`` 0.3), moved off its
    initial values."""
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    m = Dinov2Model(Dinov2Config(image_size=28, patch_size=14, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, layerscale_value=0.3)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1 + 0.05)
    return m


def state(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.named_parameters()}


# ---- the steps and what each re-draws --------------------------------------------------------------------------

def test_the_steps_go_from_the_output_head_final_norm_then_blocks_top_down():
    from vitviz.models import cache

    offline = module_of(cache.get_model(registry.OFFLINE_KEY))
    assert randomise.step_names(offline) == ("trained", "head", "final norm", "block 4", "block 3", "block 2",
                                             "block 1")
    assert randomise.step_names(tiny_dinov2()) == ("trained", "final norm", "block 2", "block 1")  # no head
    pooled = tiny_timm(None, global_pool="avg", fc_norm=True)  # timm's norm after pooling: in the final norm step
    steps = dict(randomise.cascade(pooled))
    assert steps["final norm"] == [pooled.fc_norm] and steps["head"] == [pooled.head]
    from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher, ViTConfig, ViTForImageClassification

    small = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, num_labels=3)
    hf = ViTForImageClassification(ViTConfig(**small)).eval()
    assert randomise.step_names(hf) == ("trained", "head", "final norm", "block 2", "block 1")
    assert dict(randomise.cascade(hf))["head"] == [hf.classifier]
    deit = DeiTForImageClassificationWithTeacher(DeiTConfig(**small)).eval()  # both classifiers in the head step
    assert dict(randomise.cascade(deit))["head"] == [deit.cls_classifier, deit.distillation_classifier]


@pytest.mark.parametrize("which", ["timm", "dinov2"])
def test_each_step_redraws_exactly_its_part_and_layer_scale_restarts(which):
    model = tiny_timm() if which == "timm" else tiny_dinov2()
    trained = state(model)
    twin = copy.deepcopy(model)
    owners = {}  # parameter name -> the step that re-draws it
    for k, (name, parts) in enumerate(randomise.cascade(twin), start=1):
        for part in parts:
            for pn, p in twin.named_parameters():
                if any(p is q for q in part.parameters()):
                    owners[pn] = k
    scale = 1e-5 if which == "timm" else 0.3
    for k, (name, parts) in enumerate(randomise.cascade(twin), start=1):
        for part in parts:
            randomise.reinitialise(part, randomise.seed_of(0, k), randomise.layer_scale_init(twin))
        now = state(twin)
        changed = {n for n in now if not torch.equal(now[n], trained[n])}
        assert changed == {n for n, s in owners.items() if s <= k}, (name, changed ^ {n for n, s in owners.items()
                                                                                        if s <= k})
        for n, v in now.items():
            if owners.get(n, 99) > k:
                continue
            if n.endswith(("ls1.gamma", "ls2.gamma", "lambda1")):
                assert torch.all(v == torch.tensor(scale, dtype=v.dtype)), n  # LayerScale at its initial value
            elif v.ndim == 2:
                # timm's draw, in effect N(0, 0.02²): the sample std within six of its sd σ/sqrt(2n)
                assert abs(float(v.std()) - 0.02) < 6 * 0.02 / np.sqrt(2 * v.numel()), n
            elif "norm" in n or "layernorm" in n:
                assert torch.all(v == (1.0 if n.endswith("weight") else 0.0)), n  # the identity
            else:
                assert not v.any(), n  # a linear layer's bias
    # below block 1: never re-drawn
    unowned = set(trained) - set(owners)
    assert unowned and all(any(w in n for w in ("embed", "cls_token", "mask_token", "reg_token", "pos"))
                           for n in unowned), unowned


def test_a_steps_modules_share_one_generator_so_two_heads_of_one_shape_differ():
    # DeiT's head and head_dist have one shape: a fresh generator per module with the step's seed drew them alike
    model = torch.nn.ModuleDict({"head": torch.nn.Linear(16, 10), "head_dist": torch.nn.Linear(16, 10)})
    randomise.redraw_step(list(model.values()), 0, 1)
    assert not torch.equal(model["head"].weight, model["head_dist"].weight)
    again = copy.deepcopy(model)
    randomise.redraw_step(list(again.values()), 0, 1)
    assert all(torch.equal(again[k].weight, model[k].weight) for k in model)  # seeded: the same draw


def test_one_draw_or_one_sample_is_refused_by_the_view():
    for key in ("draws", "samples"):
        with pytest.raises(ValueError, match=key):
            views.VIEWS["randomise"].check({"model": registry.OFFLINE_KEY, key: 1})


def test_a_module_of_unknown_kind_is_refused_in_words():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

    with pytest.raises(ValueError, match="Odd.*does not know how this module is initialised"):
        randomise.reinitialise(torch.nn.Sequential(Odd()), 0)


# ---- the draws ----------------------------------------------------------------------------------------------------

def _run_direct(model: torch.nn.Module, probe: randomise.CascadeProbe, x: torch.Tensor):
    """The probe's stages run on ``model`` directly (as the Runner would, without its lock): every copy made is
    recorded (a weak reference), with the copies still alive when it was made."""
    made: list = []

    def run(stage):
        alive = sum(r() is not None for r in made)
        out = stage(model, x, loaders.forward_of(model))
        made.append(weakref.ref(out[0]))
        alive_then.append(alive)
        return out

    alive_then: list[int] = []
    with torch.inference_mode(False), torch.enable_grad():
        c = probe.staged(x, run)
    return c, alive_then


def test_draws_differ_by_seed_are_reproducible_one_copy_alive_and_the_shared_model_untouched():
    model = tiny_timm()
    before = state(model)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    c, alive = _run_direct(model, randomise.CascadeProbe(1, draws=2, samples=2), x)
    again, _ = _run_direct(model, randomise.CascadeProbe(1, draws=2, samples=2), x)
    assert alive == [0, 0]  # the first draw's copy was gone before the second was made
    assert all(torch.equal(v, dict(model.named_parameters())[k]) for k, v in before.items())
    assert c.steps == ("trained", "head", "final norm", "block 2", "block 1") and c.seeds == (0, 1)
    for name, m in c.maps.items():
        assert m.shape == (2, 5, 16)
        np.testing.assert_array_equal(m[0, 0], m[1, 0])  # step 0 is the trained model in every draw
        assert not np.allclose(m[0, -1], m[1, -1], rtol=1e-3, atol=0), name  # the draws differ
        np.testing.assert_array_equal(m, again.maps[name])  # and each is the same every time
        np.testing.assert_array_equal(c.smooth_random[name], again.smooth_random[name])
    assert c.probs.shape == (2, 5) and c.top.shape == (2, 5) and np.all(c.probs[:, 0] == c.probs[0, 0])


def test_the_views_slider_spans_every_step_and_the_numbers_hold_every_draw():
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    shown = views.show("randomise", rgb, views.VIEWS["randomise"].check(
        {"model": registry.OFFLINE_KEY, "step": 14, "draws": 2, "samples": 2}))
    n = shown.numbers
    assert shown.settled.bounds["step"] == 6 and n["step"] == 6  # head, final norm and 4 blocks after the trained
    assert n["steps"] == ["trained", "head", "final norm", "block 4", "block 3", "block 2", "block 1"]
    assert len(n["draws"]) == 2 and n["noise"]["samples"] == 2
    for name, per_step in n["spearman"].items():
        assert len(per_step) == 7 and all(len(d) == 2 for d in per_step) and per_step[0] == [1.0, 1.0], name
        assert len(n["smprt"][name]) == len(n["emprt"][name]) == 2
        assert all(-1 <= v <= 1 for v in n["smprt"][name]), name
    text = shown.texts["text"]
    assert "**Passing** here means" in text and "| map |" in shown.texts["table"]
    # the slider's words name the steps, not the layer count (its bound, 6, is the steps', not the 4 layers')
    words = views.VIEWS["randomise"]["step"].accepts()
    assert "layer count" not in words and "last step" in words, words
    # the thresholds are vitviz's; sMPRT at full randomisation only, with 2 samples against quantus's 50; the
    # offline model's 64 patches cap eMPRT's 100-bin entropy at ln 64
    assert "against vitviz's thresholds" in text and "computed at full randomisation only, with 2 samples where " \
        "quantus and the paper default to 50" in text
    assert "capped at ln 64 = 4.16" in text and n["entropy_cap"] == pytest.approx(np.log(64))
    assert all(max(e["random"] + [e["trained"]]) <= np.log(64) + 1e-12 for e in n["entropy"].values())
    # attention and rollout do not read the head or the final norm: ρ = 1 there, and the page says what passing means
    for name in ("attention", "rollout"):
        assert all(v == pytest.approx(1.0) for v in n["spearman"][name][1] + n["spearman"][name][2]), name
    assert "Attention and rollout stay as trained (ρ = 1) through the head and final norm" in text
    assert "passing means they depend on the blocks' weights, not that they explain the class" in text
    assert set(n["verdicts"]["attention"]) == {"mprt", "smprt", "emprt", "all"}


def test_a_score_whose_draws_straddle_the_threshold_is_too_close_to_call():
    # vitviz's thresholds: Spearman below 0.5 (MPRT, sMPRT), entropy rising (eMPRT); draws on both sides: neither
    mp = np.ones((3, 4))
    mp[:, -1] = [0.2, 0.3, 0.7]  # the last step's draws straddle 0.5
    sc = randomise.Scores({"a": mp, "b": np.where(mp > 0.4, 0.1, mp)}, {"a": np.array([0.1, 0.2, 0.3]),
                                                                      "b": np.array([0.6, 0.8, 0.9])},
                          {"a": np.array([0.1, 0.2, 0.3]), "b": np.array([-0.1, 0.05, 0.2])}, {})
    assert sc.verdicts("a") == {"mprt": randomise.CLOSE, "smprt": "pass", "emprt": "pass", "all": randomise.CLOSE}
    assert sc.verdicts("b") == {"mprt": "pass", "smprt": "fail", "emprt": randomise.CLOSE, "all": "fail"}
    assert sc.passes("a")["mprt"] is False  # 'in every draw' is the stricter, kept in the numbers


def _cascade(steps: tuple[str, ...], top: np.ndarray | None, layers: int) -> randomise.Cascade:
    d, s = (top.shape if top is not None else (2, len(steps)))
    maps = {"attention": np.random.default_rng(0).random((d, s, 16))}
    probs = None if top is None else np.full(top.shape, 0.5)
    return randomise.Cascade(steps, maps, probs, top, None if top is None else 0, seeds=tuple(range(d)),
                             samples=2, layers=layers)


def test_the_steps_and_the_prediction_are_said_from_the_cascade():
    dino = _cascade(("trained", "final norm") + tuple(f"block {i}" for i in range(12, 0, -1)), None, 12)
    assert faithful_view._steps_said(dino) == "final norm, then blocks 12 to 1"  # no head, no 'block 12' twice
    deit = _cascade(("trained", "head", "final norm", "block 2", "block 1"), np.zeros((3, 5), int), 2)
    assert faithful_view._steps_said(deit) == "head, final norm, then blocks 2 to 1"
    deit.top[:, 1:] = 4  # every draw changes at the head
    words = faithful_view._probability_words(deit, 0, str)
    assert "first changes in every draw at step 1 (head)." in words and "draws 1, 2, 3" not in words
    deit.top[2, 1] = 0  # draw 3 changes one step later
    assert "first changes at step 1, 1, 2 in draws 1, 2, 3." in faithful_view._probability_words(deit, 0, str)
    assert faithful_view._probability_words(dino, 0, str) == ""


def test_settings_over_the_bound_are_refused_naming_them_and_the_defaults_pass():
    for key in ("ViT-B/16 (ImageNet-1k)", "DINO ViT-S/8"):
        spec = registry.REGISTRY[key]
        g = 224 // spec.patch
        runner = SimpleNamespace(spec=spec, labels=["a"] if spec.task == "classify" else None)
        defaults = {f.name: f.default for f in views.VIEWS["randomise"].fields}
        assert faithful_view.check_randomise(runner, (g, g), defaults) <= faithful.MAX_TEST_MACS
        with pytest.raises(ValueError, match=r"`draws`, `samples`: .*Lower `draws` \(now 10\) or `samples` "
                                             r"\(now 50\)"):
            faithful_view.check_randomise(runner, (g, g), defaults | {"draws": 10, "samples": 50})


def test_the_work_is_counted_as_it_is_done():
    # explanations(): the trained model and its noisy inputs once, then per draw the re-drawn steps and the
    # fully random model's noisy inputs
    model = tiny_timm()
    calls = []
    real = randomise._maps_of

    def counted(*a):
        calls.append(1)
        return real(*a)

    x = torch.randn(1, 3, 32, 32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(randomise, "_maps_of", counted)
        _run_direct(model, randomise.CascadeProbe(1, draws=3, samples=4), x)
    assert len(calls) == randomise.explanations(5, 3, 4) == 4 + 3 * (4 + 3)


# ---- the scores by hand ------------------------------------------------------------------------------------------

def test_the_scores_match_independent_computations():
    from scipy.stats import entropy as scipy_entropy, spearmanr

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=50), rng.normal(size=50)
    b[:5] = b[5]  # ties
    assert randomise.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    # MPRT and sMPRT rank |map| (quantus's abs; its rescalings change no rank)
    assert randomise.mprt(a, b) == pytest.approx(spearmanr(np.abs(a), np.abs(b)).statistic, abs=1e-12)
    assert randomise.smprt(a, b) == pytest.approx(spearmanr(np.abs(a), np.abs(b)).statistic, abs=1e-12)
    assert np.isnan(randomise.spearman(np.ones(5), a[:5]))
    # the entropy of 100 equal bins from min to max, counted by hand
    for v in (a, np.abs(b), np.array([0.0, 0.0, 1.0, 2.0, 2.0, 2.0])):
        lo, hi = v.min(), v.max()
        idx = np.minimum(((v - lo) / (hi - lo) * 100).astype(int), 99)
        p = np.bincount(idx, minlength=100) / len(v)
        want = -sum(q * np.log(q) for q in p if q > 0)
        assert randomise.entropy(v) == pytest.approx(want, abs=1e-12)
        assert randomise.entropy(v) == pytest.approx(scipy_entropy(np.bincount(idx, minlength=100)), abs=1e-12)
    # eMPRT: the relative rise; a map of six values in three bins (ln 3 over the trained map's entropy)
    h0 = -(2 / 6 * np.log(2 / 6) + 1 / 6 * np.log(1 / 6) + 3 / 6 * np.log(3 / 6))
    assert randomise.emprt(np.array([0.0, 0.0, 1.0, 2.0, 2.0, 2.0]), np.array([0.0, 0.0, 1.0, 1.0, 2.0, 2.0])) \
        == pytest.approx((np.log(3) - h0) / h0, abs=1e-12)
    assert randomise.emprt(np.array([1.0, 1.0]), a) != randomise.emprt(np.array([1.0, 1.0]), a)  # NaN: H0 = 0


def test_the_smoothing_inputs_and_average():
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    xs = randomise.noises(x, 4)
    assert len(xs) == 4 and xs[-1] is x  # the last sample is noise-free
    std = 0.1 * float(x.max() - x.min())
    eps = torch.cat([(n - x).flatten() for n in xs[:-1]]).double()
    assert float(eps.std()) == pytest.approx(std, rel=0.1) and abs(float(eps.mean())) < 0.2 * std
    assert all(torch.equal(p, q) for p, q in zip(xs, randomise.noises(x, 4)))  # seeded
    maps = [{"m": np.array([1.0, 2.0])}, {"m": np.array([3.0, 0.0])}, {"m": np.array([2.0, 4.0])}]
    np.testing.assert_allclose(randomise.smoothed(maps)["m"], [2.0, 2.0], rtol=1e-15)


# ---- the referee: quantus 0.6.0 ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_quantus_mprt_smooth_and_efficient_agree_on_the_same_steps_and_maps(monkeypatch):
    """quantus's three metrics run on vitviz's cascade and maps; they agree with vitviz's scores to 1e-5 relative.

    How the definitions are made to coincide (each documented change is only which steps and which maps):
    - the steps: quantus's ``PyTorchModel.get_random_layer_generator`` (which resets every module with
      ``reset_parameters``, in reverse order) is replaced by one yielding vitviz's cascade of draw 0 (the same
      copy re-drawn one more part at each step, as quantus's own generator does);
    - the maps: ``explain_func`` gives vitviz's map of the given module, one value per patch repeated over its
      P × P pixels (quantus's explanations live at the input's pixels; ranks, rescalings and histogram shares are
      the same at the patches);
    - sMPRT's noise: quantus draws it from NumPy's global ``np.random.randn`` and explains through
      ``quantus.explain``; both are replaced here by vitviz's seeded standard normals (the same for every
      smoothing, as vitviz uses) and the same explain function; quantus's std (``noise_magnitude`` × the input's
      range) and its sum of map / nr_samples are its own.
    """
    from peers import peer

    quantus = peer("quantus")
    from quantus.helpers.model import pytorch_model

    runner = loaders.load_embedded()
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    x = runner.preprocess(rgb)
    model = module_of(runner)
    prefix, patch, samples = runner.spec.prefix, runner.spec.patch, 3
    with torch.inference_mode(False), torch.enable_grad():
        c, _ = _run_direct(model, randomise.CascadeProbe(prefix, draws=1, samples=samples), x)
    ours = randomise.scores_of(c)

    def generator(self, order="top_down", seed=42):
        twin = copy.deepcopy(self.model)
        for k, (name, parts) in enumerate(randomise.cascade(twin), start=1):
            for part in parts:
                randomise.reinitialise(part, randomise.seed_of(0, k), randomise.layer_scale_init(twin))
            yield name, twin

    monkeypatch.setattr(pytorch_model.PyTorchModel, "get_random_layer_generator", generator)
    monkeypatch.setattr(pytorch_model.PyTorchModel, "random_layer_generator_length",
                        property(lambda self: len(randomise.cascade(self.model))))
    rng = np.random.default_rng(randomise.NOISE_SEED)
    eps = [rng.standard_normal(tuple(x.shape)) for _ in range(samples - 1)]
    cycle = itertools.cycle(eps)
    monkeypatch.setattr(np.random, "randn", lambda *shape: next(cycle).reshape(shape).copy())

    worst: list[float] = []

    def relative(theirs, mine) -> float:
        theirs, mine = np.asarray(theirs, np.float64), np.asarray(mine, np.float64)
        return float(np.max(np.abs(theirs - mine) / np.maximum(np.abs(mine), 1e-300)))

    for name in c.maps:
        def explain(model, inputs, targets, **kw):
            xx = torch.from_numpy(np.asarray(inputs)).to(torch.float32)
            with torch.inference_mode(False), torch.enable_grad():
                got = randomise._maps_of(model, xx, loaders.forward_of(model), prefix, int(targets[0]))[0][name]
            g = int(round(len(got) ** 0.5))
            return np.kron(got.reshape(g, g), np.ones((patch, patch)))[None, None]

        monkeypatch.setattr(quantus, "explain", explain)
        xb, yb = x.numpy(), np.array([c.target])
        kw = dict(model=model, x_batch=xb, y_batch=yb, explain_func=explain, channel_first=True)
        m = quantus.MPRT(layer_order="top_down", disable_warnings=True)(**kw)
        assert list(m) == ["original", *c.steps[1:]] and m["original"] == [pytest.approx(1.0)]
        got = np.array([m[s][0] for s in c.steps[1:]])
        worst.append(relative(got, ours.mprt[name][0, 1:]))
        np.testing.assert_allclose(got, ours.mprt[name][0, 1:], rtol=1e-5, atol=1e-12, err_msg=name)
        cycle = itertools.cycle(eps)
        monkeypatch.setattr(np.random, "randn", lambda *shape, cy=cycle: next(cy).reshape(shape).copy())
        sm = quantus.SmoothMPRT(layer_order="top_down", nr_samples=samples, noise_magnitude=randomise.NOISE,
                                skip_layers=True, return_last_correlation=True, disable_warnings=True)(**kw)
        worst.append(relative(sm, ours.smprt[name]))
        np.testing.assert_allclose(sm, ours.smprt[name], rtol=1e-5, atol=1e-12, err_msg=name)
        em = quantus.EfficientMPRT(layer_order="top_down", disable_warnings=True)(**kw)
        worst.append(relative(em, ours.emprt[name]))
        np.testing.assert_allclose(em, ours.emprt[name], rtol=1e-5, atol=1e-12, err_msg=name)
    print(f"quantus against vitviz, {len(c.maps)} maps × (MPRT at {len(c.steps) - 1} steps, sMPRT, eMPRT): largest "
          f"relative difference {max(worst):.1e}")


def test_the_figure_draws_what_the_scores_rank_and_a_left_out_map_says_why(monkeypatch):
    # the scores rank |map| / max |map|: the overlays draw that, on one 0…1 scale
    from vitviz.analyses import maps as made
    from vitviz.render import plotting

    drawn = []
    real_overlay = plotting.heat_overlay

    def overlay(rgb, heat, cmap, alpha, *a, **kw):
        drawn.append((np.asarray(heat).copy(), kw.get("vmin"), kw.get("vmax")))
        return real_overlay(rgb, heat, cmap, alpha, *a, **kw)

    real_maps = made.class_maps

    def without_attnlrp(*a, **kw):  # as for a model whose layers lxt cannot rewrite
        m = real_maps(*a, **kw)
        m.maps.pop("attnlrp", None)
        m.left_out = {"attnlrp": "AttnLRP: its rules do not cover this model's layers (test)"}
        return m

    from vitviz.core import owned

    monkeypatch.setattr(plotting, "heat_overlay", overlay)
    monkeypatch.setattr(randomise, "class_maps", without_attnlrp)
    owned.reset("results")  # not another test's kept answer
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    shown = views.show("randomise", rgb, views.VIEWS["randomise"].check(
        {"model": registry.OFFLINE_KEY, "step": 0, "draws": 2, "samples": 2, "map": "attnlrp"}))
    assert shown.settled.values["map"] == "attention"
    assert shown.settled.notes["map"] == ("AttnLRP: its rules do not cover this model's layers (test): the attention "
                                          "map is shown.")
    assert "has no classes" not in shown.settled.notes["map"] and shown.numbers["left_out"] == {
        "attnlrp": "AttnLRP: its rules do not cover this model's layers (test)"}
    assert shown.texts["text"].split("\n\n", 1)[1].startswith("Step 0 of 6: the trained model. ")
    assert len(drawn) == 2
    for heat, lo, hi in drawn:
        assert (lo, hi) == (0.0, 1.0) and heat.min() >= 0 and heat.max() == pytest.approx(1.0, abs=1e-12)
    owned.reset("results")  # the next test's answer is not this one's, made without AttnLRP


def test_attnlrps_line_is_apart_from_attentions_and_the_class_probability_is_not_legrads():
    from vitviz.views import faithful as page

    assert page.MARKS["attnlrp"][1] != page.MARKS["attention"][1]  # the same solid line before, colours alike
    assert page.COLOURS["attnlrp"] == "#56b4e9" and page.COLOURS["legrad"] == "#f0e442"  # colours as they were
