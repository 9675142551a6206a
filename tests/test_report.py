"""The report card view (/report, issue 70 item 2): its numbers are its definitions, work over the bound is refused
naming the settings, and many requests at once get the sequential answers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import EXAMPLES, local_client

from vitviz import views
from vitviz.analyses import faithful, maps, perturb
from vitviz.core import images, owned
from vitviz.specs import registry
from vitviz.views import report


def test_the_report_cards_numbers_are_its_definitions():
    rgb = images.load_rgb(EXAMPLES / "scene_cross.png")
    sh = views.show("report", rgb, views.VIEWS["report"].check({"model": registry.OFFLINE_KEY}))
    n = sh.numbers
    assert n["baseline"] == "mean" and n["tests"] == ["token dropping", "pixels (mean)"]
    assert n["maps"] == list(maps.NAMES) + ["occlusion"] and n["fractions"] == [0, 0.25, 0.5, 0.75, 1]
    fr = np.array(n["fractions"])
    for test in n["tests"]:
        curves = {k: np.array(v) for k, v in n["curves"][test].items()}
        raw = {k: np.array(v) for k, v in n["raw"][test].items()}
        assert all(v[0] == 1.0 for v in curves.values())
        np.testing.assert_allclose(curves["attention"], raw["attention"] / n["full"], rtol=1e-15)
        # the gain on the raw curves: 1 - A_map / A_random (the old one, normalised areas subtracted, differs)
        area = {k: np.trapezoid(v, fr) for k, v in raw.items()}
        floor = np.mean([area[f"random {i}"] for i in (1, 2, 3)])
        for k in n["maps"]:
            assert n["area"][test][k] == pytest.approx(area[k], rel=1e-12)
            assert n["gain"][test][k] == pytest.approx(1 - area[k] / floor, rel=1e-12) and n["gain"][test][k] <= 1
            low, high = min(area[f"random {i}"] for i in (1, 2, 3)), max(area[f"random {i}"] for i in (1, 2, 3))
            assert n["verdict"][test][k] == ("better" if area[k] < low else "worse" if area[k] > high else "within")
        best = max(n["maps"], key=lambda k: n["gain"][test][k])
        assert n["rank"][test][best] == 1
    assert n["cost"]["pictures"] == perturb.planned_pictures(64, len(n["maps"]), 5, 3, "mean")
    text = sh.texts["text"]
    same = n["rank"]["token dropping"] == n["rank"]["pixels (mean)"]
    said = ": the two rankings are the same" if same else f"Spearman ρ = {n['spearman']:.2f}"
    assert said in text and "1 − A_map ÷ A_random" in text and "over 6 maps only a rough measure" in text
    assert "the random orders' areas span" in text and "| random orders |" in sh.texts["table"]
    assert "Occlusion is itself made by token dropping" in text and "a map is a hint" in text
    assert "quantus" in sh.texts["text"] and sh.figures["report"].size[0] > 400


def test_work_over_the_bound_is_refused_naming_the_settings():
    big = SimpleNamespace(spec=registry.REGISTRY["DINO ViT-S/8"], labels=None)
    values = {"points": 11, "seeds": 10, "baseline": "mean"}
    with pytest.raises(ValueError, match=r"`points`, `seeds`, `baseline`.*Lower `points` \(now 11\) or `seeds` "
                                         r"\(now 10\)") as refused:
        report.check_report(big, (50, 50), values)
    assert "road" not in str(refused.value)  # ROAD is not lighter: its imputation costs more than the mean
    # ROAD's imputation is in the bound: its pictures × ROAD_MACS_PER_PIXEL × H·W over the forwards alone
    spec, grid = big.spec, (28, 28)
    road = perturb.planned_macs(spec, grid, 5, 5, 3, "road")
    pictures = perturb.planned_pictures(784, 6, 5, 3, "road")  # 9 orders × 3 inner points + one end = 28
    assert pictures == 28
    alone = faithful.planned_macs(spec, grid, 6, 5, 3, perturb.REGIONS, ("deletion",)) \
        + pictures * faithful.sequence_macs(spec, 785)
    assert road == int(alone + 28 * perturb.ROAD_MACS_PER_PIXEL * 224 * 224)
    assert road > perturb.planned_macs(spec, grid, 5, 5, 3, "mean")
    # and its memory: 8 pictures × 3 × H·W × 4 bytes × the solver's copies on top of the mean baseline's
    probe = lambda b: perturb.ReportProbe(grid, 1, 8, baseline=b)  # noqa: E731
    assert probe("road").estimate(spec, 785) - probe("mean").estimate(spec, 785) == \
        8 * 3 * 224 * 224 * 4 * perturb.ROAD_COPIES
    assert report.check_report(big, (28, 28), {"points": 5, "seeds": 3, "baseline": "mean"}) <= \
        faithful.MAX_TEST_MACS
    with pytest.raises(ValueError, match="`baseline`"):
        views.VIEWS["report"].check({"model": registry.OFFLINE_KEY, "baseline": "blur"})


def test_many_reports_at_once_get_the_sequential_answers():
    """Distinct requests (other pictures and settings, so the runner cannot merge them) and /relevance, whose
    probe holds the model alone, in the same pool."""
    star, cross = (images.load_rgb(EXAMPLES / f"scene_{k}.png") for k in ("star", "cross"))
    cases = [("report", star, {"seeds": 1}), ("report", cross, {"baseline": "road", "points": 6, "rank": 2,
                                                                "seeds": 1}),
             ("report", cross, {"seeds": 2}), ("relevance", star, {})]

    def numbers(case):
        view, rgb, extra = case
        shown = views.show(view, rgb, views.VIEWS[view].check({"model": registry.OFFLINE_KEY, **extra}))
        return shown.numbers

    owned.reset("results")
    alone = [numbers(c) for c in cases]
    assert alone[1]["baseline"] == "road" and len(alone[1]["fractions"]) == 6 and alone[0]["baseline"] == "mean"
    assert len(alone[2]["gain"]["token dropping"]) == 6 and alone[0] != alone[2] != alone[1]
    owned.reset("results")
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(numbers, cases))
    assert together == alone


def test_the_report_card_answers_through_the_api_and_refuses_in_words(app_url):
    """/report with its declared parameters, as an API user calls it; a baseline it does not offer is refused
    naming the parameter."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    client = local_client(app_url)
    scene = handle_file(str(EXAMPLES / "scene_triangle.png"))
    r = client.predict(scene, model=registry.OFFLINE_KEY, baseline="road", points=6, api_name="/report")
    n = r["numbers"]
    assert n["baseline"] == "road" and len(n["fractions"]) == 6 and r["figures"]["report"]
    assert set(n["gain"]) == {"token dropping", "pixels (road)"} and n["cost"]["pictures"] > 0
    assert all(v[0] == 1.0 for v in n["curves"]["pixels (road)"].values())
    with pytest.raises(AppError, match="`baseline`"):
        client.predict(scene, model=registry.OFFLINE_KEY, baseline="blur", api_name="/report")


def test_the_words_name_every_map_tied_first_and_judge_by_the_random_orders_spread():
    """Two maps with the same area share first place and both are named; a map is 'worse than every random order'
    only above the largest random area; gains closer than the random orders' spread make the ranking say little."""
    fr = np.array([0.0, 0.5, 1.0])
    curves = {"attention": [2.0, 0.0, 0.0], "rollout": [2.0, 0.0, 0.0], "relevance": [2.0, 2.0, 2.0],
              "random 1": [2.0, 2.0, 0.0], "random 2": [2.0, 1.0, 0.0]}
    c = faithful.Curves(fr, {k: np.array(v) for k, v in curves.items()}, {}, 2.0, 0)
    # areas: attention = rollout 0.5, relevance 2.0, random 1.5 and 1.0 (mean 1.25): gains 0.6, 0.6, -0.6
    r = perturb.scored_report({k: np.zeros(2) for k in ("attention", "rollout", "relevance")},
                              ["random 1", "random 2"], {"token dropping": c, "pixels (mean)": c})
    words, rho = report.ranking_words(r)
    assert "Both tests rank **attention, rollout** first (tied)" in words and rho == pytest.approx(1.0)
    assert "better than every random order: attention, rollout; worse than every random order: relevance" in words
    assert "span 1.000–1.500" in words and "says little" not in words  # gains 1.2 apart, random spread 0.4
    close = {k: np.array(v) for k, v in curves.items()} | {"relevance": np.array([2.0, 0.2, 0.0])}  # area 0.6
    r = perturb.scored_report({k: np.zeros(2) for k in ("attention", "rollout", "relevance")},
                              ["random 1", "random 2"], {"token dropping": faithful.Curves(fr, close, {}, 2.0, 0),
                                                         "pixels (mean)": c})
    words, _ = report.ranking_words(r)
    # gains 0.6, 0.6 and 1 - 0.6/1.25 = 0.52: 0.08 apart, under the random orders' 0.5/1.25 = 0.4
    assert "Under token dropping the maps' gains lie within 0.080 of each other, less than the random orders' own " \
           "spread (0.400 in gain)" in words and "Under pixels (mean) the maps' gains" not in words
