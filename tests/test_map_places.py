"""The class maps' places (issue 70 item 3): every test of the map counts and draws every map of maps.NAMES, the
randomise view's map list offers them by name, and Classify's /relevance view shows relevance, AttnLRP and LeGrad
for one class from one probe, with the relevance numbers it had before."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, module_of

from vitviz import views
from vitviz.analyses import faithful, maps, relevance
from vitviz.core import images
from vitviz.models import cache, hooks
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.views import faithful as shown_faithful

OKABE_ITO = {"#000000", "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7"}


def _star() -> np.ndarray:
    return images.load_rgb(EXAMPLES / "scene_star.png")


def test_every_map_has_its_own_colour_marker_and_line_and_the_page_writes_the_new_ones_by_name():
    from vitviz.app.components import control

    names = maps.NAMES + ("occlusion",)
    assert set(declared.MAP_NAMES) == set(maps.NAMES) and {"attnlrp", "legrad"} <= set(maps.NAMES)
    colours = [shown_faithful.COLOURS[n] for n in names]
    assert set(colours) <= OKABE_ITO and len(set(colours)) == len(names)  # one colour-blind-safe colour each
    assert "#000000" not in colours  # black is the class's probability and the whole picture's bar
    styles = [(shown_faithful.MARKS[n][0], shown_faithful.MARKS[n][1]) for n in names]
    assert len({s[0] for s in styles}) == len(names) and len({s[1] for s in styles}) >= 4  # apart without colour
    yellow = shown_faithful.line_style("legrad")
    assert yellow["color"] == "#f0e442" and yellow["markeredgecolor"] == "#000000" and yellow["path_effects"]
    assert shown_faithful.line_style("attnlrp")["label"] == "AttnLRP" and "path_effects" not in \
        shown_faithful.line_style("attnlrp")
    # the randomise view's map control: the words on the page, the key as its value, in the link and the API
    field = declared.RANDOMISE["map"]
    choices = control(field).choices
    assert ("AttnLRP", "attnlrp") in choices and ("LeGrad", "legrad") in choices and \
        ("relevance", "relevance") in choices and len(choices) == len(maps.NAMES)
    assert declared.RANDOMISE.check({"map": "attnlrp"})["map"] == "attnlrp"
    with pytest.raises(ValueError, match="`map`"):
        declared.RANDOMISE.check({"map": "AttnLRP"})


def test_the_planned_work_counts_every_map_the_model_can_have(monkeypatch):
    spec = registry.spec("ViT-B/16 (ImageNet-1k)")
    values = {"curves": "both", "points": 11, "seeds": 3, "regions": 3}
    both = ("deletion", "insertion")
    with_classes = SimpleNamespace(spec=spec, labels=["x"])
    without = SimpleNamespace(spec=spec, labels=None)
    assert shown_faithful.map_names(with_classes) == maps.NAMES
    assert shown_faithful.map_names(without) == tuple(n for n in maps.NAMES if n not in maps.NEED_A_CLASS)
    assert shown_faithful.check_work(with_classes, (14, 14), values) == faithful.planned_macs(
        spec, (14, 14), len(maps.NAMES) + 1, 11, 3, 3, both)  # every map and occlusion
    assert shown_faithful.check_work(without, (14, 14), values) == faithful.planned_macs(
        spec, (14, 14), 2 + 1, 11, 3, 3, both)  # attention and rollout, and occlusion
    monkeypatch.setattr(maps, "NAMES", maps.NAMES + ("another",))  # a map added later is counted too
    monkeypatch.setattr(maps, "NEED_A_CLASS", maps.NEED_A_CLASS + ("another",))
    assert shown_faithful.check_work(with_classes, (14, 14), values) == faithful.planned_macs(
        spec, (14, 14), len(maps.NAMES) + 1, 11, 3, 3, both)
    assert "another" in shown_faithful.maps_in_words()


def test_deletion_and_predict_show_every_map_by_its_name():
    rgb = _star()
    d = views.show("deletion", rgb, views.VIEWS["deletion"].check(
        {"model": registry.OFFLINE_KEY, "seeds": 1, "regions": 2}))
    assert set(d.numbers["auc"]) == set(maps.NAMES) | {"occlusion", "random 1"}
    table = d.texts["table"]
    for name in maps.NAMES:
        label = shown_faithful.label_of(name)
        area = d.numbers["auc"][name]["deletion"]
        assert f"| {label} | {area:.3f} |" in table, (name, table)
        assert f"{label}: deletion area {area:.3f}" in plotting.alt_of(d.figures["curves"])
    assert "AttnLRP" in table and "LeGrad" in table and "attnlrp" not in table
    best = min(list(maps.NAMES) + ["occlusion"], key=lambda k: d.numbers["auc"][k]["deletion"])
    assert f"fall fastest for **{shown_faithful.label_of(best)}**" in d.texts["text"]
    p = views.show("predict", rgb, views.VIEWS["predict"].check(
        {"model": registry.OFFLINE_KEY, "patches": "3,3;3,4", "seeds": 2}))
    n = p.numbers
    assert set(n["scores"]) == set(maps.NAMES) | {"your choice", "random 1", "random 2"}
    assert n["of"] == 1 + len(maps.NAMES) + 1 and f"the {len(maps.NAMES)} maps" in p.texts["text"]
    for name in maps.NAMES:
        assert f"{shown_faithful.label_of(name)} {n['scores'][name]:.3f}" in p.texts["text"]
    # the chart holds the whole picture's, your choice's, every map's and the random mean's bar, readable: each
    # bar at least 30 px tall, the chart within the projector's height
    height = p.figures["choice"].height
    assert height <= plotting.PROJECTOR.max_height and height / (3 + len(maps.NAMES)) >= 30


def test_top_patch_and_share_by_hand():
    assert relevance.top_patch(np.array([0.0, 2.0, -1.0, 2.0]), (2, 2)) == (0, 1, 0.5)  # first of equal ones
    assert relevance.top_patch(np.array([-3.0, -1.0, -2.0, -5.0, -4.0, -6.0]), (2, 3)) == (0, 1, 0.0)
    r, c, share = relevance.top_patch(np.array([1.0, 3.0, 0.0, 4.0, -2.0, 2.0]), (3, 2))
    assert (r, c) == (1, 1) and share == 4.0 / 10.0  # the negative patch does not count against it


def _runs(monkeypatch) -> list:
    """Every probe the runners run from now on (one list, appended in order)."""
    seen, run = [], Runner.run

    def spy(self, probe, x):
        seen.append(probe)
        return run(self, probe, x)

    monkeypatch.setattr(Runner, "run", spy)
    return seen


def test_the_relevance_view_shows_every_class_map_from_one_probe_with_the_relevance_it_had(monkeypatch):
    rgb = _star()
    runner = cache.get_model(registry.OFFLINE_KEY)
    module = module_of(runner)
    flags = [m.fused_attn for m in hooks.attention_modules(module) if hasattr(m, "fused_attn")]
    x = runner.preprocess(rgb)
    before = {rank: relevance.class_relevance(runner, x, rank=rank) for rank in (1, 2)}  # the view's former probe
    runs = _runs(monkeypatch)
    for rank in (1, 2):
        runs.clear()
        shown = views.show("relevance", rgb, views.VIEWS["relevance"].check(
            {"model": registry.OFFLINE_KEY, "rank": rank}))
        assert [type(p) for p in runs] == [relevance.ClassMapsProbe]  # one probe, one turn with the model alone
        assert not getattr(runs[0], "shares", False)
        n, text, old = shown.numbers, shown.texts["text"], before[rank]
        assert n["target"] == old.target and n["class"] == runner.labels[old.target]
        assert list(n["maps"]) == [k for k in maps.NEED_A_CLASS if k not in n["left_out"]] + ["rollout"]
        assert n["left_out"] == {} and {"relevance", "attnlrp", "legrad"} <= set(n["maps"])
        # the relevance and rollout as the former probe made them, to the last bit
        got = runner.run(relevance.ClassMapsProbe(runner.spec.prefix, rank=rank), x)
        assert np.array_equal(got.maps["relevance"], old.relevance[1:])
        assert np.array_equal(got.maps["rollout"], old.rollout[1:].astype(np.float64))
        rel = old.relevance[1:]
        assert n["maps"]["relevance"]["share"] == float(rel.max() / rel.sum())  # the former text's share
        for name, said in n["maps"].items():  # each top patch is the map's largest, its share by hand
            v = got.maps[name]
            i = int(np.argmax(v))
            assert said["top"] == [i // 8, i % 8] and said["share"] == pytest.approx(
                v[i] / np.clip(v, 0, None).sum(), rel=1e-12)
            label = shown_faithful.label_of(name)
            assert f"{label} ({i // 8}, {i % 8}), {said['share']:.1%}" in text, (name, text)
        assert "**AttnLRP**" in text and "**LeGrad**" in text and "None of them proves what the model used" in text
        assert np.isfinite(got.maps["attnlrp"]).all() and (got.maps["legrad"] >= 0).all()
    # the model as it was: no hook left, the attention path restored, no parameter's gradient touched
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules()) == 0
    assert [m.fused_attn for m in hooks.attention_modules(module) if hasattr(m, "fused_attn")] == flags
    assert all(p.grad is None for p in module.parameters())


def test_the_class_maps_from_threads_equal_the_sequential_ones():
    runner = cache.get_model(registry.OFFLINE_KEY)
    xs = [torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    probe = relevance.ClassMapsProbe(runner.spec.prefix)
    alone = [runner.run(probe, x).maps for x in xs]
    together: dict[int, dict] = {}

    def run(i: int) -> None:
        together[i] = runner.run(probe, xs[i]).maps

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        assert list(together[i]) == list(alone[i])
        for k in alone[i]:
            assert np.array_equal(alone[i][k], together[i][k]), (i, k)


def test_the_explorers_class_map_parts_are_the_librarys_maps_for_the_top_class(dino_in_cache, monkeypatch):
    from vitviz.analyses import attention as analysis
    from vitviz.core import owned
    from vitviz.render import browser

    owned.reset("results")
    rgb = _star()
    runner = cache.get_model(registry.OFFLINE_KEY)
    a = analysis.analyse(runner, rgb, 224)
    target = int(np.argmax(a.maps.logits.reshape(-1)))
    said = browser.class_maps_payload(a)
    assert said == {"names": list(maps.NEED_A_CLASS), "labels": {"relevance": "relevance", "attnlrp": "AttnLRP",
                                                                  "legrad": "LeGrad"},
                    "parts": {k: f"class-{k}.f4" for k in maps.NEED_A_CLASS}, "target": target,
                    "class": runner.labels[target], "left_out": {}}
    want = runner.run(relevance.ClassMapsProbe(runner.spec.prefix, target=target),
                      runner.normalise(a.fitted.image)).maps  # the same class, on the analysis's own input
    runs = _runs(monkeypatch)
    for k in maps.NEED_A_CLASS:
        body, media = browser.explorer_part(a.token, f"class-{k}.f4")
        got = np.frombuffer(body, "<f4")
        assert media == "application/octet-stream" and np.array_equal(got, want[k].astype(np.float32)), k
    assert [type(p) for p in runs] == [relevance.ClassMapsProbe]  # one run of the model for all three parts
    assert browser.explorer_part(a.token, "class-attention.f4") is None  # not a class map
    assert browser.PART.match("class-legrad.f4") and not browser.PART.match("class-legrad.f2")
    # DINO (no classes): the payload says so, and there is no part to fetch
    d = analysis.analyse(dino_in_cache, rgb, 64)
    none = browser.class_maps_payload(d)
    assert none["target"] is None and none["class"] is None
    assert browser.explorer_part(d.token, "class-relevance.f4") is None


def test_the_class_maps_probe_reserves_what_class_maps_is_measured_to_need():
    for key in ("ViT-B/16 (ImageNet-1k)", registry.OFFLINE_KEY):
        spec = registry.spec(key)
        tokens = spec.prefix + (224 // spec.patch) ** 2
        assert relevance.ClassMapsProbe(spec.prefix).estimate(spec, tokens) == maps.maps_bytes(spec, tokens)
        assert maps.maps_bytes(spec, tokens) > relevance.RelevanceProbe().estimate(spec, tokens)  # AttnLRP's too


def gated_runner() -> Runner:
    """A timm ViT with a gated MLP (SwiGLU), 8×8 patches of 8 pixels, D = 32, 2 blocks, 4 classes, random weights:
    AttnLRP's rules do not cover its MLP, the other maps are made as for any ViT."""
    import timm
    from timm.layers import SwiGLUPacked

    from vitviz.models import loaders
    from vitviz.specs.registry import ModelSpec

    torch.manual_seed(5)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=4, mlp_layer=SwiGLUPacked,
                              act_layer=torch.nn.SiLU).eval()
    spec = ModelSpec("gated-MLP test model", "timm", "test", 8, 1, 64, 0.0, "classify", dim=32, depth=2, heads=2)
    return Runner(spec, model, loaders._timm_forward(model), mean=(0.0,) * 3, std=(1.0,) * 3, resolution=64,
                  origin="built by the test", labels=["circle", "square", "star", "cross"])


def test_a_model_attnlrp_refuses_gets_the_other_maps_and_why_in_deletion_predict_relevance_and_report(monkeypatch):
    from vitviz.views import classify as shown_classify

    rgb, runner = _star(), gated_runner()
    why = hooks.lrp_refusal(module_of(runner))
    assert why and "MLP" in why
    monkeypatch.setattr(shown_faithful.models, "get_model", lambda key, progress=None: runner)
    others = [k for k in maps.NAMES if k != "attnlrp"]
    d = views.show("deletion", rgb, views.VIEWS["deletion"].check(
        {"model": registry.OFFLINE_KEY, "seeds": 1, "regions": 2}))
    assert d.numbers["left_out"] == {"attnlrp": why}
    assert set(d.numbers["auc"]) == set(others) | {"occlusion", "random 1"}
    assert "AttnLRP" not in d.texts["table"] and f"AttnLRP is not among the maps: {why}" in d.texts["text"]
    p = views.show("predict", rgb, views.VIEWS["predict"].check(
        {"model": registry.OFFLINE_KEY, "patches": "3,3;3,4", "seeds": 2}))
    n = p.numbers
    assert n["left_out"] == {"attnlrp": why} and set(n["scores"]) == set(others) | {"your choice", "random 1",
                                                                                   "random 2"}
    assert n["of"] == 1 + len(others) + 1 and f"the {len(others)} maps" in p.texts["text"]
    assert f"AttnLRP is not among the maps: {why}" in p.texts["text"]
    _, text, numbers = shown_classify.render_relevance(runner, rgb)
    assert numbers["left_out"] == {"attnlrp": why} and list(numbers["maps"]) == ["relevance", "legrad", "rollout"]
    assert f"AttnLRP is not shown: {why}" in text and "**AttnLRP**" not in text
    r = views.show("report", rgb, views.VIEWS["report"].check({"model": registry.OFFLINE_KEY, "seeds": 2}))
    assert r.numbers["left_out"] == {"attnlrp": why} and r.numbers["maps"] == others + ["occlusion"]
    assert f"AttnLRP is not among the maps: {why}" in r.texts["text"]
    assert hooks_of(module_of(runner)) == 0


def hooks_of(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
