"""Test the map's report card: every map under two tests that remove the same patches in two ways, side by side, on
the student's own picture (the analyses: :mod:`vitviz.analyses.perturb`).

- **Token dropping**: the patches' tokens taken out of the sequence (as the deletion view does).
- **Pixel perturbation**: the patches' pixels replaced (the picture's mean, or filled in from the neighbours: ROAD)
  and the whole picture seen again.

Each curve is divided by the whole picture's score; a map's gain over random is the random orders' mean area minus
its own (positive: the score falls faster than at random). The table ranks the maps under each test, and the text
says where the tests disagree: a map is a hint, and how it is tested changes which map looks best.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from vitviz.analyses import faithful, maps, perturb
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.specs import views as declared
from vitviz.specs.state import settle
from vitviz.views import faithful as page
from vitviz.views.shown import Shown, record, shapes_only

FALLBACK = "#000000"
"""A map with no colour of its own in :data:`vitviz.views.faithful.COLOURS` is drawn in black."""


def label(name: str) -> str:
    """A map's name as the page writes it (the deletion view's labels, e.g. 'AttnLRP'; numbers keep the key)."""
    return getattr(page, "label_of", lambda n: n)(name)


def style(name: str) -> dict:
    """The map's line as the deletion view draws it (colour, marker, rim), or a plain black line for a map that
    view has no style for."""
    if hasattr(page, "line_style"):
        return page.line_style(name, 3)
    return {"color": page.COLOURS.get(name, FALLBACK), "marker": "o", "ms": 3, "label": label(name)}

DEFINITION = ("Each curve is divided by the whole picture's score, so it starts at 1 and pictures and models compare; "
              "a map's **gain over random** is the area under the random orders' mean curve minus the area under "
              "the map's (deletion, 0 to 100% of the patches removed): positive means the score falls faster than "
              "when the same number of patches is removed at random, 0 no better than chance.")


CLOSE = 0.02
"""Gains closer than this (a fiftieth of the whole area) make a ranking the text says little about."""


def map_count(runner: Runner) -> int:
    """How many maps the report card tests on ``runner``'s model (those of :func:`maps.class_maps` it can have),
    occlusion not counted."""
    return len([k for k in maps.NAMES if runner.labels or k not in maps.NEED_A_CLASS])


def check_report(runner: Runner, grid: tuple[int, int], values: dict) -> int:
    """The multiply-adds the report card's settings would send through ``runner``'s model (from the settings
    alone); ``ValueError`` naming what to lower when that is over :data:`faithful.MAX_TEST_MACS`."""
    macs = perturb.planned_macs(runner.spec, grid, map_count(runner), values["points"], values["seeds"],
                                values["baseline"])
    if macs <= faithful.MAX_TEST_MACS:
        return macs
    forwards = macs / faithful.sequence_macs(runner.spec, grid[0] * grid[1] + runner.spec.prefix)
    lower = ([f"`points` (now {values['points']})"] if values["points"] > 5 else []) \
        + ([f"`seeds` (now {values['seeds']})"] if values["seeds"] > 1 else [])
    ask = ["lower " + " or ".join(lower)] if lower else []
    if values["baseline"] == "mean":
        ask.append("choose `baseline` road (its all-removed picture is one for every order)")
    if grid[0] != grid[1]:
        ask.append(f"crop the picture nearer to a square (now {grid[0]}×{grid[1]} patches)")
    ask = ask or ["choose a smaller model"]
    raise ValueError(
        f"`points`, `seeds`, `baseline`: with these settings the report card would send about {macs / 1e12:.1f} "
        f"trillion multiply-adds through {runner.spec.key} on this {grid[0]}×{grid[1]}-patch picture (about "
        f"{forwards:.0f} of its forwards); one request may send at most {faithful.MAX_TEST_MACS / 1e12:.1f} "
        "trillion. " + (lambda t: t[0].upper() + t[1:])(", or ".join(ask)) + ".")


def render_report(r: perturb.Report, what: str, model: str) -> Image.Image:
    """Two panels, one per test: each map's normalised deletion curve against the random orders' band."""
    tests = list(r.scaled)
    with plotting.figure(1, len(tests), figsize=(plotting.fig_width(3.9 * len(tests)), 6.0), squeeze=False) \
            as (fig, axes):
        for ax, test in zip(axes[0], tests):
            c = r.scaled[test]
            x = c.fractions * 100
            band = np.stack([c.deletion[k] for k in r.randoms])
            ax.fill_between(x, band.min(0), band.max(0), color="#bbbbbb", label="random (range)")
            ax.plot(x, band.mean(0), ":", color=page.COLOURS.get("random", "#777777"), label="random (mean)")
            for name in r.names:
                ax.plot(x, c.deletion[name], **style(name))
            ax.set_xlabel("% of patches removed")
            ax.set_title(test)
            top = max(1.0, float(np.nanmax([np.nanmax(v) for v in c.deletion.values()])))
            bottom = min(0.0, float(np.nanmin([np.nanmin(v) for v in c.deletion.values()])))
            ax.set_ylim(bottom, top * 1.05)
        axes[0][0].set_ylabel("score ÷ whole picture's")
        handles, labels = axes[0][-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize="small", frameon=False)
        fig.subplots_adjust(wspace=0.3, bottom=0.3)
        image = plotting.to_image(fig)
    said = "; ".join(f"{t}: " + ", ".join(f"{label(k)} gain {r.gains[t][k]:+.3f}" for k in r.names) for t in tests)
    return plotting.described(image, f"Report card of {model} ({what}), normalised deletion curves by token dropping "
                              f"and by pixel perturbation against random orders: {said}.")


def ranking_words(r: perturb.Report) -> tuple[str, float]:
    """(where the two tests agree or disagree on this picture, in words; the Spearman ρ of their rankings)."""
    (ta, a), (tb, b) = list(r.gains.items())[:2]
    first_a, first_b = min(r.names, key=lambda k: r.ranks[ta][k]), min(r.names, key=lambda k: r.ranks[tb][k])
    rho = perturb.spearman_of(r.ranks[ta], r.ranks[tb])
    rho_text = "undefined (one ranking has every map tied)" if np.isnan(rho) else f"{rho:.2f}"
    losers = {t: [k for k in r.names if r.gains[t][k] <= 0] for t in (ta, tb)}
    if first_a == first_b:
        head = f"Both tests rank **{label(first_a)}** first"
    else:
        head = f"{ta.capitalize()} ranks **{label(first_a)}** first, {tb} rank **{label(first_b)}** first"
    same = [r.ranks[ta][k] for k in r.names] == [r.ranks[tb][k] for k in r.names]
    text = head + (": the two rankings are the same" if same else
                   f"; the two rankings' Spearman ρ = {rho_text} (1: the same order, 0: unrelated, −1: reversed)")
    for t, names in losers.items():
        if names:
            text += f". Under {t}, no better than random: {', '.join(label(k) for k in names)}"
    for t in (ta, tb):
        spread = max(r.gains[t].values()) - min(r.gains[t].values())
        if spread < CLOSE:
            text += (f". Under {t} every map's gain lies within {spread:.3f} of the others': its ranking says "
                     "little on this picture")
    return text + ".", rho


@record(declared.REPORT, tab="classify", figures=("report",), bundle=True, long=True,
        doc="The report card: every map (those of the maps' stage and occlusion) tested by token dropping and by "
            "pixel perturbation (baseline 'mean': quantus's RegionPerturbation mean; 'road': ROAD's noisy linear "
            "imputation), deletion curves divided by the whole picture's score; numbers.gain gives each map's area "
            "under the random orders' mean curve minus its own (positive: faster than random), numbers.rank its "
            "place under each test (1 = largest gain), numbers.spearman the two rankings' rank correlation, "
            "numbers.cost the forwards. Settings that would send more than "
            f"{faithful.MAX_TEST_MACS / 1e13:g}e13 multiply-adds through the model are refused, naming what to "
            "lower.")
def show_report(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Every map under token dropping and pixel perturbation: curves, gains over random, ranks, where they differ."""
    runner = page._runner(values, progress)
    s = settle(values)
    grid, _ = page._input_grid(runner, rgb)
    check_report(runner, grid, values)
    r = runner.analyse(perturb.ReportProbe(grid, runner.spec.prefix, runner.spec.patch, values["points"],
                                           values["seeds"], values["baseline"], values["rank"]), rgb).value
    tokens = r.tests[perturb.TOKENS]
    what, name = page._what(runner, tokens.target, rgb)
    tests = list(r.tests)
    table = ("| map | " + " | ".join(f"{t}: gain over random (rank)" for t in tests) + " |\n|---|"
             + "---|" * len(tests) + "\n"
             + "\n".join(f"| {label(k)} | " + " | ".join(f"{r.gains[t][k]:+.3f} ({r.ranks[t][k]:g})" for t in tests)
                         + " |" for k in r.names))
    words, rho = ranking_words(r)
    full = runner.spec.prefix + grid[0] * grid[1]
    forwards = r.tokens / full + r.forwards
    ends = "" if tokens.ends else (
        " This model's head pools the patch tokens, so with none left token dropping has nothing to read: its "
        "curve has no point at 100% removed and its areas cover 0 to "
        f"{tokens.fractions[-2]:.0%} (the random orders' too); the pixel test always has a picture to read.")
    text = (f"Scored by the {what} (the whole picture: {tokens.full:.3f}). {words} {DEFINITION} Pixels: "
            f"{perturb.BASELINES[values['baseline']]}, on the picture as the model takes it, patch by patch on its "
            f"{grid[0]}×{grid[1]} grid. Occlusion: about {perturb.REGIONS}×{perturb.REGIONS} regions of tokens, each "
            f"taken out once.{ends} Cost: about {forwards:.0f} forwards' worth ({r.forwards} whole pictures, the "
            f"rest token subsets). {page.caveats('the token curve')}")
    if tokens.target is None:
        text = ("This model has no classes, so each sequence or picture is scored by how close its final [CLS] "
                "stays to the whole picture's (cosine similarity), not by a probability. " + text)
    numbers = {"model": runner.spec.key, "score": what, "class": name or None, "full": tokens.full,
               "baseline": values["baseline"], "fractions": tokens.fractions.tolist(), "grid": list(grid),
               "maps": r.names, "tests": tests,
               "curves": {t: {k: v.tolist() for k, v in c.deletion.items()} for t, c in r.scaled.items()},
               "raw": {t: {k: v.tolist() for k, v in c.deletion.items()} for t, c in r.tests.items()},
               "gain": r.gains, "rank": r.ranks, "spearman": None if np.isnan(rho) else rho,
               "ends": tokens.ends, "occlusion": {"regions": r.occlusion_regions, "per_side": perturb.REGIONS},
               "cost": {"tokens": r.tokens, "pictures": r.forwards, "forwards": forwards}}
    figure = render_report(r, what, runner.spec.key)
    warning = shapes_only(runner.spec.key, rgb)
    return Shown({"report": figure}, {"text": table + "\n\n" + text, "table": table}, numbers, s, runner.spec.key,
                 "\n\n".join(p for p in (runner.notice, warning) if p))
