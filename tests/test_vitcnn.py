"""The ViT-vs-CNN lab: receptive fields, shifts, the data-efficiency sweep and the stage calculator.

Each against something independent: a gradient worked out by hand on a hand-built CNN, the published receptive
fields of ResNet-50, exact equivariance of stride-1 convolutions, the shipped sweep re-measured, and PyTorch's own
FlopCounterMode on timm's models.
"""

from __future__ import annotations

import itertools
from pathlib import Path
import math
import numpy as np
import pytest
import torch
from torch import nn

from vitviz.core import owned
from vitviz.analyses import compare
from vitviz.core import stages
from vitviz.embedded import scenes, sweep
from vitviz.models import smallcnn as cnn
from vitviz.models import loaders
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.views import show

EQUIVARIANCE_TOLERANCE = 1e-6
"""Stride-1 convolutions with ReLU: the shifted map equals the moved map to float32 rounding (stated in the view)."""
RESNET = registry.REGISTRY["ResNet-50 (ImageNet-1k)"]


class TwoConvs(nn.Module):
    """A hand-built CNN: two 3x3 convolutions, one channel, no bias, known weights; ``relu`` between them."""

    def __init__(self, stride: int = 1, relu: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 1, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv2d(1, 1, 3, 1, 1, bias=False)
        self.relu = relu
        with torch.no_grad():
            self.conv1.weight.copy_(torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0], [0.5, 0.0, 1.0]]).view(1, 1, 3, 3))
            self.conv2.weight.copy_(torch.tensor([[0.0, 1.0, 0.0], [2.0, 1.0, -2.0], [0.0, 4.0, 1.0]]).view(1, 1, 3, 3))

    def forward(self, x):
        h = self.conv1(x)
        return self.conv2(torch.relu(h) if self.relu else h)


def hand_gradient(k1: np.ndarray, k2: np.ndarray, size: int, c: int) -> np.ndarray:
    """d y[c, c] / d x for y = conv2(conv1(x)) (cross-correlation, padding 1), by summing over every path."""
    g = np.zeros((size, size))
    for a in range(3):
        for b in range(3):  # y[c, c] = sum_ab k2[a, b] h[c + a - 1, c + b - 1]
            for u in range(3):
                for v in range(3):  # h[i, j] = sum_uv k1[u, v] x[i + u - 1, j + v - 1]
                    g[c + a - 1 + u - 1, c + b - 1 + v - 1] += k2[a, b] * k1[u, v]
    return g


def test_the_erf_equals_a_gradient_worked_out_by_hand():
    model = TwoConvs()
    k1, k2 = (m.weight.detach().numpy()[0, 0] for m in (model.conv1, model.conv2))
    x = torch.randn(1, 1, 11, 11)
    with torch.enable_grad():
        (first, second), cells = compare.erf_maps(model, x, ("conv1", "conv2"))
    assert cells == [(5, 5), (5, 5)]
    by_hand = np.zeros((11, 11))
    by_hand[4:7, 4:7] = k1
    np.testing.assert_allclose(first, np.abs(by_hand), atol=1e-6)
    np.testing.assert_allclose(second, np.abs(hand_gradient(k1, k2, 11, 5)), atol=1e-6)
    assert (second > 0).sum() <= 25  # the field of two 3x3 convolutions is 5x5
    assert compare.theoretical_rf(model, "conv1") == (3, 1) and compare.theoretical_rf(model, "conv2") == (5, 1)
    assert compare.theoretical_rf(TwoConvs(stride=2), "conv2") == (7, 2)
    with torch.enable_grad():  # with a stride: the field of centre cell 3 is pixels 3..9, centred on 3 * 2
        (_, strided), cells = compare.erf_maps(TwoConvs(stride=2), torch.randn(1, 1, 11, 11), ("conv1", "conv2"))
    rows = np.flatnonzero(strided.sum(1))
    assert cells[1] == (3, 3) and (rows.min(), rows.max()) == (3, 9) and compare.unit_centre(3, 2) == 6


def test_mean_distance_and_width_by_hand():
    m = np.zeros((9, 9))
    m[4, 4], m[4, 7], m[0, 4] = 2.0, 1.0, 1.0  # distances 0, 3 and 4 from the centre
    erf = compare.Erf(["x"], [m], [(4.0, 4.0)], [1], [9])
    assert erf.mean_distance()[0] == pytest.approx((0 * 2 + 3 + 4) / 4)
    assert erf.width(0.5)[0] == 0.0 and erf.width(0.75)[0] == 6.0 and erf.width(1.0)[0] == 8.0


@pytest.fixture(scope="module")
def resnet50():
    """timm's ResNet-50 architecture with random weights (seeded)."""
    import timm

    torch.manual_seed(0)
    return timm.create_model("resnet50", pretrained=False)


def test_resnet50_stages_have_the_receptive_fields_worked_out_by_hand(resnet50):
    """timm's ResNet-50 (v1.5: the stride sits on each stage's first 3x3). By hand: 7x7/2 stem -> 7, 3x3/2 pool
    -> 7 + 2*2 = 11 (jump 4); layer1, three 3x3 at jump 4 -> 35; layer2: the strided 3x3 adds 2*4, three more
    add 2*8 each -> 91; layer3: 91 + 2*8 + 5*2*16 = 267; layer4: 267 + 2*16 + 2*2*32 = 427. (The original v1,
    stride on the 1x1, gives the often-quoted 99, 291 and 483.)"""
    got = [compare.theoretical_rf(resnet50, path) for _, path in compare.stage_paths(resnet50)]
    assert got == [(11, 4), (35, 4), (91, 8), (267, 16), (427, 32)]


def test_the_small_cnn_is_sized_like_the_embedded_vit():
    from vitviz.embedded import train

    c, v = cnn.parameter_count(cnn.SmallCNN()), cnn.parameter_count(train.build_model())
    assert abs(c - v) / v < 0.1
    got = [compare.theoretical_rf(cnn.SmallCNN(), p) for _, p in compare.stage_paths(cnn.SmallCNN())]
    assert got == [(3, 1), (9, 2), (21, 4), (45, 8), (93, 16)] and [s for _, s in got] == list(cnn.STRIDES)


def test_a_stride_one_cnn_is_equivariant_and_a_stride_breaks_it_for_odd_shifts():
    torch.manual_seed(0)
    x = torch.randn(1, 1, 40, 40)
    shifts = list(range(9))
    for stride in (1, 2):
        model = TwoConvs(stride=stride, relu=True).eval()
        with torch.no_grad():
            maps = model(compare.shifted(x, shifts))
        err = compare.equivariance_error(maps, stride, *compare.theoretical_rf(model, "conv2")[:1], shifts, 40)
        if stride == 1:
            assert np.nanmax(err) < EQUIVARIANCE_TOLERANCE
        else:
            assert np.nanmax(err[0::2]) < EQUIVARIANCE_TOLERANCE and np.nanmin(err[1::2]) > 0.1


def test_shifted_moves_the_content_and_mirrors_the_new_strip():
    x = torch.arange(12.0).view(1, 1, 1, 12).expand(1, 3, 2, 12)
    out = compare.shifted(x, [0, 3])
    assert torch.equal(out[0], x[0])
    assert out[1, 0, 0].tolist() == [3, 2, 1] + list(range(9))


def test_the_vits_patch_tokens_move_only_by_whole_patches():
    vit = loaders.load_embedded()
    scene = scenes.make_scene(3)
    r = compare.shift_experiment(vit, vit.preprocess(scene.image), list(range(17)), vit=True)
    whole, other = r.errors[0][[0, 8, 16]], np.delete(r.errors[0], [0, 8, 16])
    assert whole.max() < EQUIVARIANCE_TOLERANCE and other.min() > 0.1
    assert r.probs.shape == (17, len(scenes.CLASSES)) and np.allclose(r.probs.sum(1), 1, atol=1e-5)


def test_the_shipped_cnn_stem_is_equivariant_and_strides_divide_the_exact_shifts():
    small = loaders.load_embedded_cnn()
    scene = scenes.make_scene(3)
    r = compare.shift_experiment(small, small.preprocess(scene.image), list(range(17)), vit=False)
    assert r.labels[0] == "stem" and np.nanmax(r.errors[0]) < EQUIVARIANCE_TOLERANCE
    for e, s in zip(r.errors[1:4], r.strides[1:4]):
        exact = [d for d in range(17) if d % s == 0]
        assert np.nanmax(e[exact]) < EQUIVARIANCE_TOLERANCE and np.nanmin(np.delete(e, exact)) > 0.05
    assert np.isnan(r.errors[4]).all()  # stage 4's field (93 px) is wider than the 64-px picture


def test_erf_hooks_are_gone_after_a_forward_that_raises():
    model = TwoConvs()

    def boom(_m, _i, _o):
        raise RuntimeError("boom")

    handle = model.conv2.register_forward_hook(boom)
    with pytest.raises(RuntimeError), torch.enable_grad():
        compare.erf_maps(model, torch.randn(1, 1, 9, 9), ("conv1", "conv2"))
    handle.remove()
    assert not model.conv1._forward_hooks and not model.conv2._forward_hooks


@pytest.mark.parametrize("side", [224, 320])
def test_the_stage_calculator_equals_flop_counter_mode(side):
    """Every stage of ViT-B/16, ResNet-50 and CoAtNet-0 (timm, random weights), attention unfused so that the two
    matrix products are visible to the counter."""
    import timm
    from torch.utils.flop_counter import FlopCounterMode

    nets = stages.networks(side)
    for net in nets:
        if net.name == "CoAtNet-0" and side != 224:
            continue  # its relative position tables are built for 224 px
        kwargs = {"img_size": side} if net.name == "ViT-B/16" else {}
        with torch.device("meta"):  # shapes only: the counter needs no numbers, and no memory is filled
            model = timm.create_model(stages.TIMM_NAMES[net.name], pretrained=False, **kwargs).eval()
        for mod in model.modules():
            if hasattr(mod, "fused_attn"):
                mod.fused_attn = False
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(torch.empty(1, 3, side, side, device="meta"))
        counts = counter.get_flop_counts()
        root = type(model).__name__
        assert counter.get_total_flops() == 2 * net.macs, net.name
        for s in net.stages:
            assert sum(counts[f"{root}.{s.module}"].values()) == 2 * s.macs, (net.name, s.name)
            if s.kind == "attention":  # every layer's heads as timm builds them (CoAtNet: the first block has fewer)
                mods = [m for m in model.get_submodule(s.module).modules() if hasattr(m, "fused_attn")]
                assert s.heads_per_layer == tuple(m.num_heads for m in mods), (net.name, s.name)


def test_the_calculator_by_hand_and_the_texts_cost_claim():
    vit = stages.vit(224)
    assert vit.stages[1].tokens == 197 and vit.stages[1].attention_entries == 197 ** 2
    assert vit.stages[1].heads_per_layer == (12,) * 12 and vit.stages[1].attention_total == 197 ** 2 * 144
    assert vit.attention_macs == 2 * 197 ** 2 * 768 * 12  # 0.72 G, not the 4.3 G of counting per head at full width
    assert stages.resnet50(224).macs == 4_089_184_256  # the "4.1 billion" of the texts
    coat = stages.coatnet0(224)
    assert [s.side for s in coat.stages[:5]] == [(112, 112), (56, 56), (28, 28), (14, 14), (7, 7)]
    assert [s.kind for s in coat.stages[1:5]] == ["conv", "conv", "attention", "attention"]
    # the first block of each attention stage attends at the width it receives: 192 / 32 and 384 / 32 heads
    assert coat.stages[3].heads_per_layer == (6,) + (12,) * 6 and coat.stages[4].heads_per_layer == (12, 24)
    assert coat.stages[3].attention_total == 196 ** 2 * 78 and coat.stages[4].attention_total == 49 ** 2 * 36
    table = show("hybrid_stages", None, {"side": 224}).texts["text"]
    assert "38,416 × (6 + 12 × 6) heads = 2,996,448" in table and "2,401 × (12 + 24) heads = 86,436" in table
    assert "197 × 12 heads × 12 layers" not in table and "38,809 × 12 heads × 12 layers = 5,588,496" in table


def test_the_shipped_sweep_is_complete_and_within_its_budget():
    res = sweep.results()
    got = {(r["model"], r["scenes"]) for r in res["runs"]}
    assert got == {(m, n) for m in sweep.MODELS for n in sweep.SIZES}
    assert res["total_seconds"] <= 3600 and res["test_scenes"] == sweep.TEST_SCENES
    for r in res["runs"]:
        assert (sweep.OUT / r["file"]).is_file() and 1 / 6 - 0.05 < r["test_accuracy"] <= 1.0
    params = {r["model"]: r["parameters"] for r in res["runs"]}
    assert abs(params["cnn"] - params["vit"]) / params["vit"] < 0.1


@pytest.mark.slow
def test_the_sweeps_eval_reproduces_the_shipped_numbers():
    rows = sweep.evaluate()
    assert len(rows) == 2 * len(sweep.SIZES)
    for r in rows:
        assert abs(r["measured"] - r["shipped"]) <= sweep.EVAL_TOLERANCE, r


def test_the_data_efficiency_view_reports_what_the_numbers_show():
    shown = show("data_efficiency", None, declared.DATA_EFFICIENCY.check({}))
    rows, res = shown.numbers["rows"], sweep.results()
    by = {(r["model"], r["scenes"]): r["test_accuracy"] for r in res["runs"]}
    for row in rows:
        assert row["cnn"] == by[("cnn", row["scenes"])] and row["vit"] == by[("vit", row["scenes"])]
        assert row["leads"] == ("ViT" if row["gap"] > row["noise"] else "CNN" if -row["gap"] > row["noise"]
                                else "neither")
    text = shown.texts["text"]
    assert "JFT-300M" in text and "ImageNet-21k" in text and shown.numbers["verdict"] in text
    assert f"{rows[0]['cnn']:.1%}" in text


def test_the_views_answer_offline_on_a_scene_with_the_shapes_models():
    scene = np.asarray(scenes.make_scene(7).image)
    rf = show("receptive_field", scene, declared.RECEPTIVE_FIELD.check({}))
    assert rf.numbers["cnn"] == registry.CNN_OFFLINE_KEY and rf.numbers["vit"] == registry.OFFLINE_KEY
    d = [s["erf_mean_distance_px"] for s in rf.numbers["cnn_stages"]]
    assert all(a < b for a, b in itertools.pairwise(d))  # each stage looks further
    assert [s["theoretical_rf_px"] for s in rf.numbers["cnn_stages"]] == [3, 9, 21, 45, 93]
    assert len(rf.numbers["vit_mean_attention_distance_px"]) == 4
    assert "cannot be reached" in rf.notice  # says the stand-ins are stand-ins
    tr = show("translation", scene, declared.TRANSLATION.check({}))
    assert tr.numbers["shifts"] == list(range(17)) and max(tr.numbers["cnn_errors"]["stem"]) < EQUIVARIANCE_TOLERANCE
    assert "stride-1 stem shows it exactly" in tr.texts["text"]  # true of vitviz's small CNN (not of ResNet-50)
    hy = show("hybrid_stages", None, declared.HYBRID_STAGES.check({"side": 224}))
    assert [n["macs"] for n in hy.numbers["networks"]] == [n.macs for n in stages.networks(224)]
    assert "17.56 G" in hy.texts["text"] and "0.72 G" in hy.texts["text"]


def test_a_photo_shown_to_the_shapes_cnn_says_so(rgb_cat):
    tr = show("translation", rgb_cat, declared.TRANSLATION.check({}))
    assert "trained only on generated shape scenes" in tr.notice and registry.CNN_OFFLINE_KEY in tr.notice


@pytest.mark.slow  # a ResNet-50 built and saved: with the slow set
def test_a_local_resnet50_loads_through_the_real_loader(tmp_path, rgb_cat, resnet50):
    """The online CNN's loading code, on a ResNet-50 checkpoint built here (real architecture, random weights)."""
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file(resnet50.state_dict(), str(path))
    runner = loaders.load_timm("resnet50.a1_in1k", file=path, spec=RESNET)
    assert runner.spec.key == "ResNet-50 (ImageNet-1k)" and len(runner.labels) == 1000 and runner.resolution == 224
    erf, run = compare.receptive_fields(runner, rgb_cat, 224)
    assert erf.rf == [11, 35, 91, 267, 427] and run.fitted.image.shape[0] == 224
    # ResNet-50's first compared map is after the max pool (stride 4): exact only at shifts 4 divides, and said so
    from vitviz.views.vitcnn import _first_map_words, shifts_for

    shifts = list(range(9))
    c = shifts_for(runner, rgb_cat, shifts, vit=False)
    assert c.labels[0] == "stem + max pool" and c.strides[0] == 4
    assert max(c.errors[0][[0, 4, 8]]) < EQUIVARIANCE_TOLERANCE and min(c.errors[0][[1, 2, 3, 5, 6, 7]]) > 1e-3
    words = _first_map_words(c, shifts)
    assert "stride 4" in words and "multiple of 4" in words and "stride-1" not in words
    assert all(m.shape == run.fitted.image.shape[:2] for m in erf.maps)


def test_offline_the_resnet_key_falls_back_fast_to_the_small_cnn(monkeypatch):
    import time

    from vitviz.models import cache as models

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    owned.reset("models")  # nothing remembered: the fall-back is timed from a first try
    t0 = time.perf_counter()
    runner = models.get_model("ResNet-50 (ImageNet-1k)")
    assert time.perf_counter() - t0 < 5 and runner.spec.key == registry.CNN_OFFLINE_KEY
    assert "not ResNet-50" in runner.notice



@pytest.mark.slow
def test_online_models_answer_the_receptive_field_in_pixels(dino_s8_dir, resnet50, tmp_path, rgb_cat):
    """With DINO ViT-S/8 and ResNet-50 available (real architectures, random weights, through the real loaders),
    both run at 224 px, the chart's axis is pixels and nothing stands in."""
    from conftest import in_hub_cache
    from safetensors.torch import save_file

    path = tmp_path / "resnet50.safetensors"
    save_file(resnet50.state_dict(), str(path))
    with in_hub_cache("ResNet-50 (ImageNet-1k)", {"model.safetensors": path}), \
            in_hub_cache("DINO ViT-S/8", dino_s8_dir):
        shown = show("receptive_field", rgb_cat, declared.RECEPTIVE_FIELD.check({}))
    n = shown.numbers
    assert n["vit"] == "DINO ViT-S/8" and n["cnn"] == "ResNet-50 (ImageNet-1k)" and not shown.notice
    assert min(n["cnn_input"]) == min(n["vit_input"]) == 224 and len(n["vit_mean_attention_distance_px"]) == 12
    assert [s["theoretical_rf_px"] for s in n["cnn_stages"]] == [11, 35, 91, 267, 427]
    assert "share of each one's short side" not in shown.texts["text"]


def test_the_model_card_states_the_shipped_numbers():
    card = (sweep.OUT / "MODEL_CARD.md").read_text()
    res = sweep.results()
    rows = {line.split("|")[1].strip(): line for line in card.splitlines() if line.startswith("| ") and "," in line}
    readme = (Path(__file__).resolve().parents[1] / "docs" / "vit-vs-cnn.md").read_text()
    table = {line.split("|")[1].strip(): line for line in readme.splitlines()
             if line.strip().startswith("| ") and "(" in line and line.strip()[2].isdigit()}
    from vitviz.analyses.efficiency import wilson

    for r in res["runs"]:
        lo, hi = wilson(r["test_accuracy"], res["test_scenes"])
        said = f"{r['test_accuracy']:.1%} ({100 * lo:.1f}–{100 * hi:.1f})"  # each accuracy with its own interval
        assert said in rows[f"{r['scenes']:,}"] and said in table[f"{r['scenes']:,}"], r
    assert f"{res['total_seconds']:,} s" in card
    assert f"{cnn.parameter_count(cnn.SmallCNN()):,}" in card


def test_the_sweep_augments_pictures_as_the_embedded_training_does():
    """One augmentation for both trainings: without patch cover the pictures move exactly as with it."""
    from vitviz.embedded import train

    pics = np.random.default_rng(1).integers(0, 255, (12, 8, 8, 3)).astype(np.uint8)
    alone, none = train.augment(pics, None, np.random.default_rng(0))
    with_cover, _ = train.augment(pics, np.zeros((12, 1, 1), np.float32), np.random.default_rng(0))
    assert none is None and np.array_equal(alone, with_cover) and not np.array_equal(alone, pics)


def test_the_verdict_names_a_crossover_only_when_the_numbers_show_one():
    from vitviz.views.vitcnn import verdict

    def result(pairs):
        runs = [dict(model=m, scenes=n, test_accuracy=a) for n, (c, v) in pairs for m, a in (("cnn", c), ("vit", v))]
        return dict(test_scenes=2000, runs=runs)

    crossing = verdict(result([(1000, (0.9, 0.5)), (4000, (0.9, 0.9)), (16000, (0.9, 0.97))]))
    assert [r["leads"] for r in crossing[1]] == ["CNN", "neither", "ViT"]
    assert "overtakes the CNN at 16,000 scenes" in crossing[0]
    meeting = verdict(result([(1000, (0.9, 0.5)), (4000, (0.9, 0.905))]))
    assert "within the noise" in meeting[0] and "does not pull ahead" in meeting[0]
    assert "no crossover" in verdict(result([(1000, (0.95, 0.4)), (4000, (1.0, 0.7))]))[0]


def test_the_cnn_lists_offer_only_cnns():
    """The ViT-vs-CNN tab's CNN list (control, API schema, CLI flag, bundles: one declaration) offers CNNs only;
    the embedded ViT serves attention and classification, never as a CNN."""
    assert declared.VS_CNN.options() == ("ResNet-50 (ImageNet-1k)", registry.CNN_OFFLINE_KEY)
    assert registry.keys("relative") == ["Swin-T (ImageNet-1k)"]
    assert registry.OFFLINE_KEY in registry.keys("attention") and registry.OFFLINE_KEY in registry.keys("classify")
    with pytest.raises(ValueError, match="`cnn`"):
        declared.RECEPTIVE_FIELD.check({"cnn": registry.OFFLINE_KEY})


def test_wilson_intervals_by_hand_and_the_charts_bars_stay_inside_them():
    from vitviz.analyses import efficiency
    from vitviz.views.vitcnn import interval_bars

    z = efficiency.Z95
    lo, hi = efficiency.wilson(0.5, 10)  # the textbook case: 5 of 10 right
    assert abs(lo - 0.2366) < 1e-4 and abs(hi - 0.7634) < 1e-4
    lo, hi = efficiency.wilson(1.0, 2000)  # all right: the interval is [n / (n + z²), 1], not 100 ± something
    assert hi == 1.0 and abs(lo - 2000 / (2000 + z * z)) < 1e-12 and f"{100 * lo:.2f}" == "99.81"
    assert efficiency.wilson(0.0, 2000) == (0.0, pytest.approx(z * z / (2000 + z * z)))
    y, err = interval_bars([1.0, 0.5], 2000)
    assert err[1, 0] == 0.0 and y[0] - err[0, 0] == pytest.approx(100 * 2000 / (2000 + z * z))  # down from 100 only
    assert err[0, 1] == pytest.approx(err[1, 1])  # symmetric only in the middle
    rows = efficiency.leads(sweep.results())  # the noise of a difference is the half-widths in quadrature
    assert rows[0]["noise"] == pytest.approx(math.hypot(efficiency.wilson_half_width(rows[0]["cnn"], 2000),
                                                        efficiency.wilson_half_width(rows[0]["vit"], 2000)))
