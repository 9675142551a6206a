"""Answers drawn once are handed out again (``views.show(..., reuse=True)``, what the server's pages and endpoints
ask for), but never when the models that drew them would now draw something else or the analysis they hand the
browser is gone; and a page event whose inputs are those of the answer on screen sends nothing again."""

from __future__ import annotations

import gradio as gr
import numpy as np
import pytest
import torch
from conftest import EXAMPLES
from PIL import Image

from vitviz import views
from vitviz.core import owned
from vitviz.models import cache
from vitviz.specs import registry
from vitviz.views import RECORDS, VIEWS


@pytest.fixture(autouse=True)
def _fresh():
    owned.reset("results")
    yield
    owned.reset("results")


@pytest.fixture()
def counted(monkeypatch):
    """How many times each view's show function really drew (the record's function wrapped)."""
    calls: dict[str, int] = {}
    for name, record in list(RECORDS.items()):
        def counting(*args, _show=record.show, _name=name, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _show(*args, **kwargs)
        monkeypatch.setitem(RECORDS, name, record.__class__(**{**record.__dict__, "show": counting}))
    return calls


def _star() -> np.ndarray:
    return np.asarray(Image.open(EXAMPLES / "scene_star.png").convert("RGB"))


def _same(a, b) -> bool:
    return (a.texts == b.texts and a.model == b.model and a.notice == b.notice and a.figures.keys() == b.figures.keys()
            and all(np.array_equal(np.asarray(a.figures[k]), np.asarray(b.figures[k])) for k in a.figures))


def test_an_answer_is_drawn_once_and_equals_a_fresh_one(counted):
    rgb, values = _star(), VIEWS["attention"].check({"model": registry.OFFLINE_KEY, "layer": 3})
    first = views.show("attention", rgb, values, reuse=True)
    again = views.show("attention", rgb.copy(), values, reuse=True)  # the same pixels, another array
    assert counted == {"attention": 1}
    assert _same(first, again) and _same(first, views.show("attention", rgb, values))  # and a fresh drawing
    assert counted == {"attention": 2}
    again.texts["summary"] = "changed by a caller"
    assert views.show("attention", rgb, values, reuse=True).texts.get("summary") != "changed by a caller"
    other = views.show("attention", rgb, VIEWS["attention"].check({"model": registry.OFFLINE_KEY, "layer": 2}),
                       reuse=True)
    assert counted == {"attention": 3} and not _same(first, other)
    views.show("position_embeddings", None, VIEWS["position_embeddings"].check({}), reuse=True)
    views.show("position_embeddings", None, VIEWS["position_embeddings"].check({}), reuse=True)
    assert counted["position_embeddings"] == 1


def test_an_answer_is_drawn_again_when_its_model_changed(counted):
    import timm

    def tiny(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0,
                                 depth=1).eval()

    name = "a drawn-cache test model"
    try:
        views.use_model(tiny(0), name)
        values = VIEWS["attention"].check({"model": name})
        rgb = _star()
        first = views.show("attention", rgb, values, reuse=True)
        assert views.show("attention", rgb, values, reuse=True).figures.keys() == first.figures.keys()
        assert counted == {"attention": 1}
        views.use_model(tiny(1), name)  # the same name, other weights
        second = views.show("attention", rgb, values, reuse=True)
        assert counted == {"attention": 2} and not _same(first, second)
    finally:
        from vitviz.models import listing

        listing.remove(name)
        cache.forget(name)


def test_what_a_stand_in_drew_stays_only_while_its_models_failure_is_remembered(monkeypatch):
    with cache.asked() as seen:
        stand_in = cache.get_model("DINO ViT-S/8")  # offline: the embedded model answers
    assert seen == {"DINO ViT-S/8": stand_in.weights_id} and stand_in.notice
    assert cache.still(seen)
    monkeypatch.setattr(cache, "FAILURE_TTL", 0.0)  # the failure forgotten: it may load now
    assert not cache.still(seen)
    assert not cache.still({registry.OFFLINE_KEY: "another weights id"})
    assert cache._asked.get() is None  # nothing collects outside a with


def test_an_answer_whose_analysis_left_the_cache_is_drawn_again():
    from vitviz.views import Shown, _leans_on_gone

    assert _leans_on_gone(Shown(data={"explorer": {"token": "0" * 16, "base": "vitviz/explorer/0/"}}))
    assert not _leans_on_gone(Shown(data={"similarity_map": {"grid": [2, 2]}}))


def test_a_page_event_with_the_inputs_of_the_answer_on_screen_sends_nothing_again(counted):
    from vitviz.app.tab import LAYOUTS
    from vitviz.app import tab_layouts
    from vitviz.specs import views as declared

    tab_layouts()
    with gr.Blocks():
        with gr.Tab("Patches") as t:
            tab = LAYOUTS["patches"](t)
        summary = gr.Markdown()
        fn = tab.event(declared.PATCHES, lambda sh: sh.texts["summary"], [summary])
    picture = {"path": str(EXAMPLES / "scene_star.png"), "meta": {"_type": "gradio.FileData"}}
    controls = {c: None for c in fn.inputs}
    form = tab.form
    controls[form[declared.IMAGE]] = picture
    for f in (declared.PATCH, declared.RESOLUTION, declared.POLICY, declared.MODEL_SIZE):
        controls[form[f]] = f.default
    quiet = lambda *a, **k: None  # noqa: E731

    first = fn(controls, None, quiet)
    assert "patch" in first[0] and counted == {"patches": 1}
    kept = first[-1]
    assert kept["given"]
    again = fn(controls | {fn.last: kept}, None, quiet)  # a second trigger of the same values
    assert all(isinstance(v, dict) and v.get("__type__") == "update" and len(v) == 1 for v in again)
    changed = fn(controls | {fn.last: kept, form[declared.PATCH]: 8}, None, quiet)
    assert "patch" in changed[0] and changed[0] != first[0] and counted == {"patches": 2}


def test_many_threads_asking_at_once_get_one_drawing_equal_to_the_sequential_one(counted):
    from concurrent.futures import ThreadPoolExecutor

    rgb, values = _star(), VIEWS["attention"].check({"model": registry.OFFLINE_KEY, "layer": 2})
    alone = views.show("attention", rgb, values)  # drawn afresh, no cache
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: views.show("attention", rgb, values, reuse=True), range(8)))
    assert counted == {"attention": 2}  # the fresh one, then one drawing shared by the eight
    assert all(_same(a, alone) for a in answers)
