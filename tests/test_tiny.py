"""The shipped offline model: files, reproducible figures, and the quality bars on unseen scenes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz import assets
from vitviz.core import attention, posembed
from vitviz.embedded import quality, scenes, train
from vitviz.models import cache as models
from vitviz.models import hooks, loaders

QUALITY = json.loads((assets.TINY / "quality.json").read_text())


def test_scenes_are_seeded_and_masks_match():
    a, b = scenes.make_scene(5), scenes.make_scene(5)
    assert (a.image == b.image).all() and a.label == b.label and (a.mask == b.mask).all()
    assert a.image.shape == (64, 64, 3) and a.mask.dtype == bool and 0.02 < a.mask.mean() < 0.6
    labels = {scenes.make_scene(i).label for i in range(60)}
    assert labels == set(range(len(scenes.CLASSES))) and len(scenes.CLASSES) >= 6


def test_shipped_files_and_card():
    info = assets.tiny_info()
    assert (assets.TINY / "model.safetensors").stat().st_size < 8 * 2**20
    assert info["train_seconds"] <= 30 * 60 * 1.1 and "not DINO" in info["objective"]
    card = (assets.TINY / "MODEL_CARD.md").read_text()
    assert f"{QUALITY['accuracy']:.1%}" in card and "supervised" in card


@pytest.mark.slow  # a training run or a 200-scene measurement (pytest.ini: slow)
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


def test_issue_accuracy_bar():
    assert QUALITY["accuracy"] >= 0.90


def test_issue_best_head_iou_bar():
    assert QUALITY["best_head_iou"] >= 0.5


def test_issue_attention_lift_bar():
    assert QUALITY["attention_lift"] >= 3.0


def test_lift_definition_by_hand():
    """2×2 patches of 8 px: lift = share of attention on object pixels / object share of the pixels."""
    on_top_left = np.array([[1.0, 0.0, 0.0, 0.0]])
    even = np.full((1, 4), 0.25)
    mask = np.zeros((1, 16, 16), bool)
    mask[0, :8, :8] = True  # the object is exactly the top-left patch: a quarter of the pixels
    assert quality.lift(on_top_left, mask, 8) == pytest.approx([4.0])  # all attention on it
    assert quality.lift(even, mask, 8) == pytest.approx([1.0])  # chance
    half = mask.copy()
    half[0, :8, :4] = False  # half that patch: the attention lands half on object, the object is 1/8
    assert quality.lift(on_top_left, half, 8) == pytest.approx([4.0])
    heads = np.stack([on_top_left, even], axis=1)  # (B=1, H=2, N=4): one lift per head
    assert quality.lift(heads, mask, 8) == pytest.approx(np.array([[4.0, 1.0]]))
    assert quality.lift(np.zeros((1, 4)), mask, 8) == pytest.approx([0.0])  # no attention at all: no division by 0


def test_calm_scenes_for_the_curriculum():
    busy, calm = scenes.make_scene(11), scenes.make_scene(11, clutter=0.0)
    assert (scenes.make_scene(11, clutter=1.0).image == busy.image).all()  # 1.0 is the default scene
    assert calm.label == busy.label and (calm.mask == busy.mask).all()  # same object, calmer background
    background = ~calm.mask
    # flat colour plus a little noise (std 0.04 of the range), versus texture and distractors
    assert calm.image[background].std(axis=0).max() < 0.06 * 255
    assert busy.image[background].std(axis=0).max() > calm.image[background].std(axis=0).max() * 1.5


def test_curriculum_moves_from_calm_to_busy_scenes():
    n = 1000
    hard = (np.zeros((n, 1)), np.full(n, -1), np.full(n, -2.0))
    levels = np.linspace(0, 1, n, endpoint=False)
    easy = (np.zeros((n, 1)), np.arange(n), np.arange(n) * 10.0, levels)  # label = index, to see which were drawn
    rng = np.random.default_rng(0)
    steps = 1000
    _, first, first_cover = train._curriculum_batch(0, steps, hard, easy, rng)
    assert (first >= 0).all() and first.max() < 200  # all calm: only the calmest scenes (level < 0.2)
    assert (first_cover == first * 10.0).all()  # the arrays stay row-aligned
    _, middle, middle_cover = train._curriculum_batch(int(train.RAMP * steps / 2), steps, hard, easy, rng)
    assert (middle == -1).sum() == train.BATCH // 2 and middle.max() < 0.5 * n + 1
    assert ((middle_cover == -2.0) == (middle == -1)).all()
    _, late, _ = train._curriculum_batch(int(train.RAMP * steps), steps, hard, easy, rng)
    assert (late == -1).all()


def test_patch_cover_by_hand():
    mask = np.zeros((1, 16, 16), bool)
    mask[0, :8, :4] = True  # half of the top-left patch
    mask[0, 8:, 8:] = True  # all of the bottom-right one
    assert scenes.patch_cover(mask, 8)[0].tolist() == [[0.5, 0.0], [0.0, 1.0]]


def test_augment_moves_images_and_patch_labels_together():
    """Flips and turns keep each patch's label on the pixels it describes."""
    imgs, _, masks = scenes.make_batch(4, 32)
    cover = scenes.patch_cover(masks, 8)
    marked = np.zeros_like(imgs)
    marked[..., 0] = masks * 255  # the mask drawn into the image, so it moves with it
    out, out_cover = train.augment(marked, cover, np.random.default_rng(0))
    assert not (out == marked).all()  # something moved
    assert np.allclose(scenes.patch_cover(out[..., 0] > 0, 8), out_cover)


def test_token_targets_by_hand():
    labels = torch.tensor([2, 0])
    cover = torch.tensor([[1.0, 0.25, 0.0], [0.5, 0.0, 1.0]])
    t = train.token_targets(labels, cover, classes=3)  # columns: 3 classes + background
    assert t.shape == (2, 3, 4) and torch.allclose(t.sum(-1), torch.ones(2, 3))
    assert t[0, 0].tolist() == [0, 0, 1, 0] and t[0, 1].tolist() == [0, 0, 0.25, 0.75]
    assert t[0, 2].tolist() == [0, 0, 0, 1] and t[1, 0].tolist() == [0.5, 0, 0, 0.5]


def test_spread_penalty_by_hand():
    """Entropy above log(spread) nats is the penalty: even over 64 patches costs log(64/24), one patch costs 0."""
    even = torch.full((1, 1, 64), 1 / 64)
    one = torch.zeros(1, 1, 64)
    one[0, 0, 5] = 0.5  # unnormalised on purpose: the penalty renormalises over the patches
    assert train.spread_penalty(even, spread=24).item() == pytest.approx(np.log(64 / 24), abs=1e-5)
    assert train.spread_penalty(one, spread=24).item() == pytest.approx(0.0, abs=1e-6)
    sixteen = torch.zeros(1, 1, 64)
    sixteen[..., :16] = 1.0
    assert train.spread_penalty(sixteen, spread=24).item() == pytest.approx(0.0, abs=1e-6)  # under the allowance
    both = torch.cat([even, one], 1)  # (1, 2, 64): the mean over heads
    assert train.spread_penalty(both, spread=24).item() == pytest.approx(np.log(64 / 24) / 2, abs=1e-5)


def test_spread_penalty_reads_the_last_block(monkeypatch):
    """step_loss adds the penalty of the last block's class-token attention, not another block's.

    On the shipped model the blocks differ; the penalty step_loss adds (bfloat16 autocast) must match
    the last block's, computed here from attention recorded independently in float32.
    """
    loaded = loaders.load_embedded()
    model = module_of(loaded)
    imgs, _, _ = scenes.make_batch(quality.TEST_SEED, 8)
    x = torch.cat([loaded.normalise(img) for img in imgs])
    got: dict[int, torch.Tensor] = {}
    with torch.inference_mode(), hooks.record_attention(model, lambda layer, a: got.__setitem__(layer, a[:, :, 0, 1:])):
        model(x)
    per_block = [train.spread_penalty(got[layer].float(), spread=8).item() for layer in sorted(got)]
    assert min(abs(v - per_block[-1]) for v in per_block[:-1]) > 0.05  # the blocks can be told apart
    monkeypatch.setattr(train, "ATTENTION_SPREAD", 8)
    head = torch.nn.Linear(96, len(scenes.CLASSES) + 1)
    y, cover = torch.zeros(8, dtype=torch.long), torch.zeros(8, 64)
    with torch.no_grad():
        added = (train.step_loss(model, head, x, y, cover, spread_weight=1.0)
                 - train.step_loss(model, head, x, y, cover, spread_weight=0.0)).item()
    assert added == pytest.approx(per_block[-1], abs=0.01)
    assert not any(m._forward_hooks for m in model.modules())  # hooks gone after the steps


@pytest.mark.slow  # a training run or a 200-scene measurement (pytest.ini: slow)
def test_spread_penalty_starts_at_spread_from(tmp_path, monkeypatch):
    """The training loop passes weight 0 before SPREAD_FROM of the steps and the full weight from then on."""
    weights = []
    real = train.step_loss

    def spy(model, head, x, y, cover, spread_weight=None):
        weights.append(spread_weight)
        return real(model, head, x, y, cover, spread_weight)

    monkeypatch.setattr(train, "step_loss", spy)
    monkeypatch.setattr(train, "EASY_SCENES", 32)
    monkeypatch.setattr(train, "BATCH", 8)
    info = train.train(tmp_path, steps=10, n_scenes=32)
    assert weights == [0.0] * 4 + [train.ATTENTION_SPREAD_WEIGHT] * 6  # 35% of 10 steps: steps 0-3 free
    assert info["spread_from_step"] == 4 and info["attention_spread"] == train.ATTENTION_SPREAD


@pytest.mark.slow  # a training run or a 200-scene measurement (pytest.ini: slow)
def test_training_is_seeded(tmp_path, monkeypatch):
    """Two short runs of the real training loop give bit-identical weights (bfloat16 autocast included)."""
    from safetensors.torch import load_file

    monkeypatch.setattr(train, "EASY_SCENES", 64)
    monkeypatch.setattr(train, "BATCH", 16)
    for run in ("a", "b"):
        info = train.train(tmp_path / run, steps=6, n_scenes=64)
    assert info["checkpoint_steps"] == [0, 6] and (tmp_path / "a" / "checkpoints" / "step00006.safetensors").is_file()
    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = load_file(tmp_path / "a" / "checkpoints" / "step00000.safetensors")
    assert not torch.equal(start["head.weight"], a["head.weight"])  # it did train


def test_timeline_shows_attention_emerge():
    """Over the shipped checkpoints the last-layer attention goes from chance to the object, and narrows."""
    imgs, _, masks = scenes.make_batch(quality.TEST_SEED, 100)
    side = 64 // 8
    lifts, spread = {}, {}
    steps = [s for s, _ in assets.tiny_checkpoints()]
    for step in (steps[0], steps[-1]):
        _, cls = quality.last_layer_cls(models.get_checkpoint(step), imgs)
        mean = cls.mean(1)  # (B, N)
        lifts[step] = quality.lift(mean, masks, 8).mean()
        spread[step] = np.mean([attention.mass_mask(m.reshape(side, side), 0.6)[0].sum() for m in mean])
    assert lifts[steps[0]] < 1.3 < 2.0 < lifts[steps[-1]]
    assert spread[steps[0]] > 0.5 * side * side > spread[steps[-1]]  # random: 60% needs over half the patches


def test_timeline_position_embeddings_gain_structure():
    """Random at step 0; after training, neighbours (and rings around the centre) are alike."""
    steps = [s for s, _ in assets.tiny_checkpoints()]
    first, last = (posembed.neighbourhood(models.get_checkpoint(s).read(posembed.learned_grid))
                   for s in (steps[0], steps[-1]))
    assert abs(first["next_door"]) < 0.1 and abs(first["all"]) < 0.1
    assert last["next_door"] > last["all"] + 0.2
    assert QUALITY["position_embeddings"]["next_door"] == pytest.approx(last["next_door"], abs=1e-6)

