"""Test the map (issue 44): token dropping is the model's own forward on the shorter sequence; the curves, occlusion
and the randomised weights are what independent computations give; bad input is refused in words."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, module_of

import precision
from vitviz.models import listing
from vitviz import views
from vitviz.analyses import faithful
from vitviz.analyses.forward import parts_of
from vitviz.core import images
from vitviz.models import cache, loaders
from vitviz.specs import registry
from vitviz.specs import views as declared


def timm_classifier():
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=5, depth=2, img_size=64,
                          reg_tokens=2, dynamic_img_size=True).eval()
    return loaders.runner_for(m, "timm ViT with registers", labels=list("abcde"))


def hf_classifier():
    from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersForImageClassification

    torch.manual_seed(0)
    m = Dinov2WithRegistersForImageClassification(Dinov2WithRegistersConfig(
        hidden_size=48, num_hidden_layers=2, num_attention_heads=4, patch_size=14, image_size=56,
        num_register_tokens=4, num_labels=5)).eval()
    return loaders.runner_for(m, "transformers DINOv2 with registers", labels=list("abcde"))


RUNNERS = {"timm": timm_classifier, "transformers": hf_classifier, "offline": loaders.load_embedded}


def hooked(runner, x: torch.Tensor, kept: np.ndarray, target: int, sizes: list | None = None) -> float:
    """The model's own forward with its sequence cut by a hook of this test's own where the stream enters the
    blocks (timm: norm_pre's output; transformers: the embeddings' output): the prefix and the ``kept`` patches.
    ``sizes`` gets Σ|W||r| + |b| of the class's logit (what its float32 rounding is proportional to)."""
    model = module_of(runner)
    prefix = runner.spec.prefix
    index = torch.cat([torch.arange(prefix), torch.as_tensor(kept, dtype=torch.long) + prefix])
    where = model.norm_pre if hasattr(model, "norm_pre") else model.base_model.embeddings
    head = model.head if hasattr(model, "head") else model.classifier
    handles = [where.register_forward_hook(lambda _m, _i, out: out[:, index]),
               head.register_forward_hook(lambda m, i, _o: sizes.append(float(
                   (m.weight[target].abs() * i[0][0].abs()).sum() + m.bias[target].abs())) if sizes is not None
                   else None)]
    try:
        with torch.inference_mode():
            logits, _ = loaders.forward_of(model)(x)
    finally:
        for h in handles:
            h.remove()
    return float(torch.softmax(logits[0].double(), -1)[target])


def drift_bound(runner, p: float, size: float, layers: int) -> float:
    """How far two float32 runs of one sequence may differ when batched differently (the same sums, blocked
    otherwise): the read token off by about γ_D per layer relative to the sizes summed, so the class's logit by
    (L + 1)·γ_D·Σ|W||r| (``size``), carried through the softmax (p·2δ)."""
    return p * 2 * (layers + 1) * precision.gamma(runner.spec.dim) * size + 4 * precision.U


@pytest.mark.parametrize("kind", list(RUNNERS))
def test_token_dropping_is_the_models_own_forward_on_the_shorter_sequence(kind, rgb_cat):
    runner = RUNNERS[kind]()
    x = runner.preprocess(rgb_cat)
    n = (x.shape[-2] // runner.spec.patch) * (x.shape[-1] // runner.spec.patch)
    model, prefix = module_of(runner), runner.spec.prefix
    rng = np.random.default_rng(0)
    sets = [np.sort(rng.choice(n, k, replace=False)) for k in (n // 4, n // 4, n // 4)]
    with torch.inference_mode():
        z, logits = faithful.stream_in(model, x, loaders.forward_of(model))
        p = parts_of(model)
        target = int(torch.argmax(logits[0]))
        full = faithful.drop_tokens(p, z, prefix, torch.arange(n)[None], target, None)
        one = [faithful.drop_tokens(p, z, prefix, torch.as_tensor(s)[None], target, None) for s in sets]
        batch = faithful.drop_tokens(p, z, prefix, torch.as_tensor(np.stack(sets)), target, None)
    own = float(torch.softmax(logits[0].double(), -1)[target])
    assert float(full[0]) == pytest.approx(own, abs=1e-6)  # 0% deletion: the model's own probability
    for s, single, together in zip(sets, one, batch):
        sizes: list = []
        want = hooked(runner, x, s, target, sizes)
        assert float(single[0]) == want  # one sequence: the same computation as the hooked forward, bit for bit
        bound = drift_bound(runner, want, max(sizes), len(p.blocks))
        assert abs(float(together) - want) <= bound, (float(together), want, bound)  # batched: rounding only


def test_the_curves_ends_and_areas_are_what_they_should_be(rgb_cat):
    runner = loaders.load_embedded()
    n, prefix = 64, runner.spec.prefix
    orders = (("first", tuple(range(n))), ("last", tuple(range(n - 1, -1, -1))))
    c = runner.analyse(faithful.CurvesProbe(orders, 11, prefix), rgb_cat).value
    x = runner.preprocess(rgb_cat)
    with torch.inference_mode():
        probs = torch.softmax(module_of(runner)(x)[0].double(), -1)
    assert c.target == int(torch.argmax(probs)) and c.full == pytest.approx(float(probs.max()), abs=1e-6)
    for name in ("first", "last"):
        assert c.deletion[name][0] == c.full and c.insertion[name][-1] == c.full
        assert c.deletion[name][-1] == c.insertion[name][0]  # the prefix alone
        assert c.area("deletion", name) == pytest.approx(np.trapezoid(c.deletion[name], c.fractions), abs=1e-12)
    # insertion of one order at 30% keeps exactly the patches deletion of the reversed order keeps at 70%
    k, sizes = round(0.3 * n), []
    want = hooked(runner, x, np.arange(k), c.target, sizes)
    bound = drift_bound(runner, want, max(sizes), 4)
    assert abs(c.insertion["first"][3] - want) <= bound and abs(c.deletion["last"][7] - want) <= bound


def test_occlusion_equals_one_forward_per_region_done_independently(rgb_cat):
    runner = loaders.load_embedded()
    x = runner.preprocess(rgb_cat)
    o = runner.analyse(faithful.OcclusionProbe((8, 8), 3, runner.spec.prefix), rgb_cat).value
    assert o.count == 9 and sorted(np.bincount(o.regions)) == [4, 6, 6, 6, 6, 9, 9, 9, 9]  # 8 = 3 + 3 + 2
    with torch.inference_mode():
        probs = torch.softmax(module_of(runner)(x)[0].double(), -1)
    target = int(torch.argmax(probs))
    for r in range(o.count):
        kept, sizes = np.flatnonzero(o.regions != r), []
        without = hooked(runner, x, kept, target, sizes)
        got = o.drop[o.regions == r]
        assert np.all(got == got[0]), r
        assert abs(got[0] - (float(probs[target]) - without)) <= drift_bound(runner, without, max(sizes), 4), r


def test_randomising_no_block_gives_the_trained_maps_and_the_shared_model_is_untouched(rgb_cat):
    from vitviz.analyses.relevance import RelevanceProbe

    runner = loaders.load_embedded()
    before = {k: v.clone() for k, v in module_of(runner).state_dict().items()}
    c = runner.analyse(faithful.CascadeProbe(runner.spec.prefix), rgb_cat).value
    assert all(torch.equal(v, module_of(runner).state_dict()[k]) for k, v in before.items())
    assert c.layers == 4 and all(m.shape == (5, 64) for m in c.maps.values())
    rel = runner.analyse(RelevanceProbe(c.target), rgb_cat).value
    np.testing.assert_array_equal(c.maps["relevance"][0], rel.relevance[1:])  # step 0: the trained model, exactly
    np.testing.assert_array_equal(c.maps["rollout"][0], rel.rollout[1:])
    assert faithful.spearman(c.maps["attention"][0], c.maps["attention"][0]) == 1.0
    assert c.probs[0] == pytest.approx(float(torch.softmax(torch.as_tensor(rel.logits, dtype=torch.float64), -1)
                                             [c.target]), abs=1e-6)
    assert not np.allclose(c.maps["attention"][4], c.maps["attention"][0])  # all random: another map


def test_spearman_and_regions_by_hand():
    assert faithful.spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1.0)
    assert faithful.spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    # ties take their average rank: scipy's spearmanr of the same numbers
    a, b = np.array([1, 1, 2, 3, 5]), np.array([2, 1, 1, 4, 3])
    from scipy.stats import spearmanr

    assert faithful.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert faithful.regions((2, 4), 2).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_the_three_views_answer_and_many_at_once_get_the_sequential_answers():
    from vitviz.core import owned

    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    cases = [("deletion", {}), ("randomise", {"step": 2}), ("predict", {"patches": "3,3;3,4;4,3;4,4"}),
             ("predict", {"patches": "3,3;3,4", "mode": "keep"})]

    def numbers(case):
        name, extra = case
        shown = views.show(name, rgb, views.VIEWS[name].check({"model": registry.OFFLINE_KEY, **extra}))
        return shown.numbers

    owned.reset("results")
    alone = [numbers(c) for c in cases]
    assert alone[0]["auc"]["occlusion"]["deletion"] < alone[0]["random_auc"]["deletion"][0]
    assert set(alone[1]["spearman"]) == {"attention", "rollout", "relevance"} and alone[1]["step"] == 2
    assert alone[2]["rank"] <= alone[2]["of"] == 1 + 3 + 3 and alone[2]["patches"][0] == [3, 3]
    owned.reset("results")
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(numbers, cases * 2))
    assert together == alone * 2


@pytest.mark.parametrize("values, words", [
    ({"patches": ""}, "`patches`"), ({"patches": "9,9"}, "outside this 8×8 grid"),
    ({"patches": "a,b"}, "`patches`"), ({"rank": 6}, "`rank`"), ({"mode": "swap"}, "`mode`")])
def test_bad_input_is_refused_naming_the_parameter(values, words):
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    with pytest.raises(ValueError, match=words):
        views.show("predict", rgb, views.VIEWS["predict"].check({"model": registry.OFFLINE_KEY, "patches": "1,1"}
                                                                | values))


def test_a_model_without_a_class_token_is_refused_and_a_cnn_is_not_offered():
    import timm

    torch.manual_seed(0)
    gap = timm.create_model("vit_medium_patch16_gap_256", pretrained=False, num_classes=3, depth=1, img_size=64,
                            dynamic_img_size=True).eval()
    key = views.use_model(gap, "a ViT without [CLS]", labels=["x", "y", "z"])
    try:
        with pytest.raises(ValueError, match="`model`: a ViT without \\[CLS\\] has no \\[CLS\\] or register"):
            views.show("deletion", images.load_rgb(EXAMPLES / "scene_star.png"), views.VIEWS["deletion"].check(
                {"model": key}))
    finally:
        listing.remove(key)
        cache.forget(key)
    with pytest.raises(ValueError, match="`model`"):
        declared.DELETION.check({"model": "ResNet-50 (ImageNet-1k)"})
