"""What the README promises about figures, checked on every view's figures: no figure wider than 790 px or taller
than 660 px, no text under 20 px (projector style), and plain unit labels instead of a '1e10' axis multiplier."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vitviz import views
from vitviz.render import plotting
from vitviz.views import VIEWS

README = Path(__file__).resolve().parents[1] / "README.md"
DOCS = README.parent / "docs"


def documentation() -> str:
    """The README and the documents beside it (docs/*.md): what they say, wherever it is said."""
    return "\n".join(p.read_text() for p in [README, *sorted(DOCS.glob("*.md"))])
PICTURELESS = {"toy", "patch_filters", "position_embeddings", "rotary", "relative_bias", "registers",
               "patch_size_tradeoff"}


def test_the_readme_states_the_limits_this_file_checks():
    text = " ".join(documentation().split())
    assert "no text under 20 px of the figure" in text
    assert "no figure wider than 790 px or taller than 660 px" in text
    assert (plotting.PROJECTOR.max_width, plotting.PROJECTOR.max_height, plotting.PROJECTOR.text_px) == (790, 660, 20)


@pytest.mark.parametrize("view", sorted(set(VIEWS) - {"patch_size_tradeoff"}))
def test_every_figure_of_every_view_keeps_the_readme_limits(view, rgb_cat):
    v = VIEWS[view]
    given = {"predict": {"patches": "3,3;4,4;5,5"}}.get(view, {})  # a view with nothing to show by default
    shown = views.show(view, None if view in PICTURELESS else rgb_cat, v.check(v.defaults() | given))
    for name, image in shown.figures.items():
        assert image.width <= 790 and image.height <= 660, (view, name, image.size)
        px = plotting.text_px_of(image)
        assert px is None or px >= 20 - 1e-6, (view, name, px)
        alt = plotting.alt_of(image)  # a text alternative that says what it shows, with its numbers
        assert alt and len(alt) > 40 and any(ch.isdigit() for ch in alt), (view, name, alt)


def test_the_readmes_list_of_views_is_made_from_the_records():
    from vitviz.views import RECORDS, table

    text = documentation()
    assert table() in text
    assert all(f"`/{name}`" in table() for name, r in RECORDS.items() if r.api)


def test_the_readmes_token_limits_are_the_codes():
    """The README's token limits are what the budget computes now (they once lagged behind the code)."""
    from vitviz.analyses import attention, heads, relevance
    from vitviz.models import budget
    from vitviz.specs import registry

    text = " ".join(documentation().split())
    s8, b8 = registry.REGISTRY["DINO ViT-S/8"], registry.REGISTRY["DINO ViT-B/8"]

    def limits(estimate) -> str:
        return f"{budget.max_tokens(s8, estimate):,} and {budget.max_tokens(b8, estimate):,}"

    att = f"DINO ViT-S/8: {budget.max_tokens(s8, attention.attention_bytes):,} tokens; " \
          f"ViT-B/8: {budget.max_tokens(b8, attention.attention_bytes):,})"
    assert att in text
    assert f"inside one head: {limits(heads.LayerProbe(0, 1, 8).estimate)};" in text
    assert f"relevance, a backward through every layer: {limits(relevance.RelevanceProbe(None, 1).estimate)})" in text


def test_a_bar_chart_labels_its_axis_in_units_not_with_a_multiplier():
    from matplotlib.figure import Figure

    seen = {}

    def spy(fig: Figure, *args, **kwargs):
        fig.canvas.draw()
        ax = fig.axes[0]
        seen["offset"] = ax.xaxis.get_offset_text().get_text()
        seen["ticks"] = [t.get_text() for t in ax.get_xticklabels()]
        return real(fig, *args, **kwargs)

    real = plotting.to_image
    plotting.to_image = spy
    try:
        image = plotting.bars({"QKᵀ": 3.6e8, "MLP": 1.1e10}, "where the MACs go", "multiply-accumulates")
    finally:
        plotting.to_image = real
    assert seen["offset"] == "" and any(re.fullmatch(r"\d+ G", t.replace("−", "-")) for t in seen["ticks"])
    assert image.width <= 790 and plotting.text_px_of(image) == pytest.approx(20, abs=0.01)


def test_the_patch_grid_fits_the_figure_height_with_whole_pixels_per_patch(rgb_cat):
    from vitviz.views import patches

    for side, patch in ((224, 16), (64, 8), (480, 16), (32, 4)):
        fitted = patches.fit(rgb_cat, side, patch, "crop")
        grid, scale = patches.grid_image(fitted)
        assert grid.height <= 660 and grid.width <= 790 and scale == max(1, 660 // max(fitted.image.shape[:2]))
        assert np.asarray(grid).shape[0] == fitted.image.shape[0] * scale


def test_the_toys_grey_image_is_drawn_in_grey():
    from vitviz.views import patches

    (image, caption), *_ = patches.toy_figures()
    rgb = np.asarray(image.convert("RGB")).astype(int)
    colour = np.abs(rgb[..., 0] - rgb[..., 1]) + np.abs(rgb[..., 1] - rgb[..., 2])
    assert "grey" in caption and (colour > 12).mean() < 0.001  # no yellow and navy for grey levels


def test_the_distance_chart_starts_at_zero(rgb_cat):
    """A chart of distances from 0: 30.5–34 px on the axis would make 3 px look large."""
    from matplotlib.figure import Figure

    from vitviz.views import attention as view

    seen = {}

    def spy(fig: Figure, *args, **kwargs):
        seen["ylim"] = fig.axes[0].get_ylim()
        return real(fig, *args, **kwargs)

    real = plotting.to_image
    plotting.to_image = spy
    try:
        a, _ = view.analysis_for(rgb_cat, {"model": "vitviz tiny (shapes only)", "resolution": 64})
        view._draw_distance(a)
    finally:
        plotting.to_image = real
    assert seen["ylim"][0] == 0 and seen["ylim"][1] >= a.maps.distance().max()


def test_a_newcomer_meets_the_two_commands_and_the_cpu_variant_on_the_first_screen():
    """Within the first 50 lines (the Space's header included): the run command, the test command and the CPU-only
    install, whose versions are the pinned ones."""
    lines = README.read_text().splitlines()
    first = "\n".join(lines[:50])
    assert "pip install -r requirements.txt -e . && python app.py" in first
    assert "pip install -r requirements-dev.txt -e . && pip install --no-deps -r requirements-peers.txt" in first
    assert "\npython -m pytest " in first
    pins = dict(line.split("==") for line in (README.parent / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    cpu = f"pip install torch=={pins['torch']} torchvision=={pins['torchvision']} --index-url " \
          "https://download.pytorch.org/whl/cpu"
    assert cpu in first
    # the CPU build is installed before the run command pulls PyTorch in (else pip takes the 6 GB CUDA build first)
    block = first[first.index("```bash"):first.index("```", first.index("```bash") + 3)]
    assert cpu in block and block.index(cpu) < block.index("pip install -r requirements.txt")
    assert "second terminal" in first


def _said_with_its_numbers(claim: str, text: str) -> bool:
    """Whether ``text`` says ``claim`` (whitespace aside), each decimal in it within one unit of its last digit of
    the number ``claim`` gives: both are rounded, and float32's error of an area (about 1e-6 here, other CPUs
    included) can move a value across a rounding boundary, never further."""
    claim, text = " ".join(claim.split()), " ".join(text.split())
    number = re.compile(r"-?\d+\.\d+")
    pattern = "".join(re.escape(part) + ("(-?\\d+\\.\\d+)" if i < len(number.findall(claim)) else "")
                      for i, part in enumerate(number.split(claim)))
    wanted = number.findall(claim)
    for found in re.finditer(pattern, text):
        if all(abs(float(a) - float(b)) <= 10 ** -len(b.split(".")[1]) * (1 + 1e-6)
               for a, b in zip(found.groups(), wanted)):
            return True
    return False


def test_said_with_its_numbers_by_hand():
    assert _said_with_its_numbers("occlusion 0.15 (random 0.48)", "x occlusion\n0.15 (random 0.48) y")
    assert _said_with_its_numbers("occlusion 0.149", "occlusion 0.150")  # a rounding that fell the other way
    assert not _said_with_its_numbers("occlusion 0.149", "occlusion 0.151")
    assert not _said_with_its_numbers("occlusion 0.15", "occlusion 0.17")
    assert not _said_with_its_numbers("occlusion 0.15 on star", "rollout 0.15 on star")


@pytest.mark.slow
def test_the_docs_say_test_the_maps_numbers_scene_by_scene():
    """Issue 68: README and docs/test-the-map.md said occlusion is the most faithful map on the offline model's
    scenes, true of the four scenes' mean only. They now say it per scene with the random orders' spread, as
    ``python -m scripts.faithful_scenes`` measures it with the deletion view itself; this recomputes that and fails
    when a sentence or a table's number no longer matches."""
    from scripts import faithful_scenes

    measured = faithful_scenes.measure()
    said = faithful_scenes.claims(measured)
    docs = (DOCS / "test-the-map.md").read_text()
    assert _said_with_its_numbers(said["readme"], README.read_text()), said["readme"]
    assert _said_with_its_numbers(said["docs"], docs), said["docs"]
    for kind in faithful_scenes.KINDS:
        for row in faithful_scenes.table(measured, kind).splitlines()[2:]:
            assert _said_with_its_numbers(row.replace("**", ""), docs.replace("**", "")), row
    assert "occlusion is the most faithful map" not in " ".join(documentation().split()).lower()
    # what the documents now say, checked against the numbers themselves (not only the script's own sentences)
    fastest = [faithful_scenes.best_map(s, "deletion") for s in measured.values()]
    lucky = [faithful_scenes.random_beats_every_map(s, "insertion") for s in measured.values()]
    assert len(set(fastest)) > 1 and 0 < sum(lucky) < len(lucky)  # no map wins every scene; luck on some


@pytest.mark.slow
def test_the_docs_say_the_report_cards_and_the_randomisations_numbers_scene_by_scene():
    """Issue 70: the README's sentence on the report card and the randomisation holds on every scene, the docs'
    tables are the views' own numbers at their defaults (``python -m scripts.faithful_scenes``), and the lesson's
    step on the cross says what the numbers do: its tests put different maps first."""
    from scripts import faithful_scenes
    from vitviz.tools import lesson

    cards = faithful_scenes.measure_cards()
    said = faithful_scenes.claims_cards(cards)
    docs = (DOCS / "test-the-map.md").read_text()
    assert _said_with_its_numbers(said["readme"], README.read_text()), said["readme"]
    assert _said_with_its_numbers(said["docs"], docs), said["docs"]
    for table in (faithful_scenes.report_table(cards), faithful_scenes.randomise_table(cards)):
        for row in table.splitlines()[2:]:
            assert _said_with_its_numbers(row, docs), row
    step = next(s for s in lesson.shipped("test_the_map").steps if s.query.get("open") == "report")
    assert step.query["image"] == "scene_cross" and "crown different maps" in step.caption
    assert len(set(faithful_scenes.firsts(cards["scene_cross"]).values())) > 1
