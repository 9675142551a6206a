"""Captions that say what a model learned or does are made from that model's numbers, or ask the reader to look
(issue 68, items 3 and 4): the guided tour, the Position-embeddings tab, the Forward pass's lens."""

from __future__ import annotations

import re

import pytest

from vitviz import assets, views
from vitviz.core import images
from vitviz.specs import registry
from vitviz.tools import lesson

VERDICTS = re.compile(r"so the model has learned|has learned the grid|neighbours look alike|says where the answer "
                      r"comes from|rarely decodable|the answer forms late", re.I)
"""Claims the shipped lessons once made about the offline model that its own numbers contradict."""


def _scene(name: str):
    return images.load_rgb(assets.example(name), images.INTAKE_SHORT_SIDE)


@pytest.mark.parametrize("name", lesson.shipped_names())
def test_no_shipped_lesson_states_a_verdict_its_model_contradicts(name):
    captions = [s.caption for s in lesson.shipped(name).steps]
    assert not [c for c in captions if VERDICTS.search(c)]


def test_the_tours_position_step_asks_to_look_and_its_view_says_what_this_model_learned():
    """Step 4 no longer says the model learned the grid; it asks the reader to look whether it did, and the view it
    opens says, from the offline model's own table, that it learned the distance from the centre."""
    step = lesson.tour().steps[3]
    assert step.query["tab"] == "positions" and "Look whether" in step.caption
    from vitviz.core import posembed
    from vitviz.specs.views import SINUSOIDAL
    from vitviz.views import posembed as view

    name, values, _, notes = lesson.step_view(step)
    assert name == "position_embeddings" and not notes and values["source"] not in SINUSOIDAL
    grid, _, _ = view.grid_for(values)  # what the view shows (tests/test_posembed.py: its summary says this)
    near = posembed.neighbourhood(grid)
    assert near["same_ring"] > near["next_door"]  # 0.87 against 0.61
    assert posembed.arrangement(near, posembed.relations(grid)) == "centre"
    assert "mostly learned how far a patch is from the centre, not the grid" in view.what_it_codes(grid, True)


def test_the_tours_attention_step_says_what_the_class_row_is_and_sends_to_the_test():
    """Step 6 said the class token's row "says where the answer comes from"; on the tour's scene the app's own
    insertion test puts the top-attended patches below random orders. It now says what the row is (where [CLS]
    attends, in the last layer the step opens) and that Test the map tests whether it matters."""
    step = lesson.tour().steps[5]
    assert "where [CLS], the token the head reads, attends in this last layer" in step.caption
    assert "Test the map" in step.caption
    name, values, _, notes = lesson.step_view(step)
    assert name == "attention" and not notes
    assert values["layer"] == registry.REGISTRY[values["model"]].depth  # "this last layer" is the last one


def test_the_tours_lens_step_asks_to_look_and_the_lens_text_says_it_from_the_pictures_numbers():
    step = lesson.tour().steps[7]
    assert step.query["open"] == "lens" and "Look after which block" in step.caption
    name, values, rgb, _ = lesson.step_view(step)
    shown = views.show("forward_pass", rgb, views.VIEWS["forward_pass"].check(values))
    tops = [next(iter(t)) for t in shown.numbers["logit_lens"]]
    answer = next(iter(shown.numbers["top5"]))
    assert tops[-1] == answer and answer not in tops[:-1]  # scene_star: only the last block reads "star"
    assert f"the final answer, “{answer}”, is the lens's top class only after the last block, {len(tops)}" \
           in shown.texts["lens"]


def test_the_lens_reading_by_hand():
    from vitviz.views.forward import lens_reading

    top = {"star": 0.8, "cross": 0.1}
    assert "from block 1 on" in lens_reading([top, top, top], top)
    said = lens_reading([{"cross": 0.5}, top, {"ring": 0.4}, top, top], top)
    assert "from block 4 of 5 on (before it, block 1: “cross”, block 2: “star”, block 3: “ring”)" in said
    assert "only after the last block, 3" in lens_reading([{"cross": 0.5}, {"ring": 0.5}, top], top)
    assert "not the final answer" in lens_reading([top, {"cross": 0.5}], top)


def test_the_position_tabs_explanation_asks_to_look_instead_of_promising_neighbours():
    from pathlib import Path

    source = " ".join((Path(views.__file__).parents[1] / "app" / "positions.py").read_text().split())
    assert "nearby positions end up with similar vectors" not in source
    assert "Look whether " in source
