"""One picture, one input per model, one answer: every view and door that reports a prediction or a map for the same
model and picture agrees (the Forward pass once ran the whole 64×96 cat and said "cross 69.1%" while Classify
cropped a 64×64 square and said "ring 78%"; the Attention tab took the whole picture while the device cropped)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES

from vitviz import views
from vitviz.core import images
from vitviz.models import cache, device
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.tools import cli


@pytest.fixture(scope="module")
def cat() -> np.ndarray:
    return images.load_rgb(EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE)  # 451×300, as the app decodes it


def _show(name: str, rgb, **values):
    return views.show(name, rgb, views.VIEWS[name].check(values))


def test_a_classifier_gives_one_answer_and_one_grid_in_every_view_and_door(cat, tmp_path):
    key = registry.OFFLINE_KEY
    runner = cache.get_model(key)
    assert runner.input_policy == "checkpoint"  # a classifier: its own eval transform (64 px, centre crop)
    forward = _show("forward_pass", cat, model=key)
    classify = _show("classify", cat, model=key)
    attention = _show("attention", cat, model=key, resolution=224)
    shuffle = _show("shuffle", cat, model=key)
    # one top 5: the same classes in the same order with the same probabilities (the same input, the same model)
    assert list(forward.numbers["top5"]) == list(classify.numbers["top5"]) == list(shuffle.numbers["top_original"])
    assert all(k.startswith("nearest shape: ") for k in forward.numbers["top5"])  # a photo: said as Classify says it
    np.testing.assert_array_equal(list(forward.numbers["top5"].values()), list(classify.numbers["top5"].values()))
    # one grid, the checkpoint's 8×8, in every view that draws a map
    assert forward.numbers["stages"][0]["shape"] == [3, 64, 64] and classify.numbers["input_size"] == [64, 64]
    assert attention.numbers["grid"] == [8, 8]
    assert _show("rollout", cat, model=key).numbers["grid"] == [8, 8]
    assert _show("inside_head", cat, model=key).settled.bounds["col"] == 7  # 8 columns
    # the command line: the same numbers as the API's view (the Attention view's mass and box at its settings)
    assert cli.main(["attention", str(EXAMPLES / "cat.png"), "--out", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "cat.png.json").read_text())
    assert written["grid"] == [8, 8] and written["box"] == attention.numbers["box"]
    # the device: the same preparation, the same input
    m = device.manifest(runner, 224)
    assert m["policy"] == "checkpoint" and m["side"] == 64
    x = device.reference_input(runner, cat, 224)
    from vitviz.analyses.attention import analyse

    a = analyse(runner, cat, 224)
    assert np.array_equal(x, runner.normalise(a.fitted.image).numpy()) and x.shape == (1, 3, 64, 64)
    assert a.fitted.policy == "checkpoint" and "centre crop" in a.fitted.note  # the view says what was done


def test_a_model_without_classes_sees_the_whole_picture_in_every_view(cat, dino_in_cache):
    key = "DINO ViT-S/8"
    assert dino_in_cache.input_policy == "keep"
    attention = _show("attention", cat, model=key, resolution=224)
    forward = _show("forward_pass", cat, model=key, resolution=224)
    pca = _show("feature_pca", cat, model=key, resolution=224)
    assert attention.numbers["grid"] == [28, 42]  # 451×300 → 336×224: the whole picture, 8-px patches
    assert forward.numbers["stages"][0]["shape"] == [3, 224, 336]
    assert pca.numbers["grid"] == [28, 42]
    m = device.manifest(dino_in_cache, 224)
    assert m["policy"] == "keep" and m["interpolation"] == "bicubic"
    assert device.reference_input(dino_in_cache, cat, 224).shape == (1, 3, 224, 336)
