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
        floor = np.trapezoid(np.mean([curves[f"random {i}"] for i in (1, 2, 3)], 0), fr)
        for k in n["maps"]:
            assert n["gain"][test][k] == pytest.approx(floor - np.trapezoid(curves[k], fr), abs=1e-12)
        best = max(n["maps"], key=lambda k: n["gain"][test][k])
        assert n["rank"][test][best] == 1
    assert n["cost"]["pictures"] == perturb.planned_pictures(64, len(n["maps"]), 5, 3, "mean")
    assert "gain over random" in sh.texts["text"] and "Spearman ρ" in sh.texts["text"] or "the same" in \
        sh.texts["text"]
    assert "quantus" in sh.texts["text"] and sh.figures["report"].size[0] > 400


def test_work_over_the_bound_is_refused_naming_the_settings():
    big = SimpleNamespace(spec=registry.REGISTRY["DINO ViT-S/8"], labels=None)
    values = {"points": 11, "seeds": 10, "baseline": "mean"}
    with pytest.raises(ValueError, match=r"`points`, `seeds`, `baseline`.*Lower `points` \(now 11\) or `seeds` "
                                         r"\(now 10\).*choose `baseline` road"):
        report.check_report(big, (50, 50), values)
    assert report.check_report(big, (28, 28), {"points": 5, "seeds": 3, "baseline": "mean"}) <= \
        faithful.MAX_TEST_MACS
    with pytest.raises(ValueError, match="`baseline`"):
        views.VIEWS["report"].check({"model": registry.OFFLINE_KEY, "baseline": "blur"})


def test_many_reports_at_once_get_the_sequential_answers():
    rgb = images.load_rgb(EXAMPLES / "scene_star.png")
    cases = [{"seeds": 1}, {"baseline": "road", "points": 6, "rank": 2, "seeds": 1}]

    def numbers(extra):
        shown = views.show("report", rgb, views.VIEWS["report"].check({"model": registry.OFFLINE_KEY, **extra}))
        return shown.numbers

    owned.reset("results")
    alone = [numbers(c) for c in cases]
    assert alone[1]["baseline"] == "road" and len(alone[1]["fractions"]) == 6 and alone[0]["baseline"] == "mean"
    owned.reset("results")
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(numbers, cases * 2))
    assert together == alone * 2


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
