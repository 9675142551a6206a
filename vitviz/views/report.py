"""Test the map's report card: every map under two tests that remove the same patches in two ways, side by side, on
the student's own picture (the analyses: :mod:`vitviz.analyses.perturb`).

- **Token dropping**: the patches' tokens taken out of the sequence (as the deletion view does).
- **Pixel perturbation**: the patches' pixels replaced (the picture's mean, or filled in from the neighbours: ROAD)
  and the whole picture seen again.

A map's gain is 1 − A_map / A_random on the raw curves' areas (0: as random, 1: the score gone at once, negative:
slower than random); a map is better (worse) than random only when its area is below (above) every random order's.
The table ranks the maps by area under each test beside the random orders' spread, and the text says where the tests
disagree: a map is a hint, and how it is tested changes which map looks best.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from vitviz.analyses import faithful, maps, perturb, randomise
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.specs import views as declared
from vitviz.specs.state import settle
from vitviz.views import faithful as page
from vitviz.views.shown import Shown, record, shapes_only

LINES = {"attention": "-", "rollout": (0, (3, 2)), "relevance": "-.", "attnlrp": (0, (5, 1, 1, 1, 1, 1)),
         "legrad": (0, (9, 3)), "occlusion": ":", "random": (0, (1, 4))}
"""The report card's own line styles: six maps and the random orders' mean, no two alike (the deletion view's
:data:`~vitviz.views.faithful.MARKS` give attention and AttnLRP, rollout and LeGrad, occlusion and random the same
line on this figure's scale)."""


def label(name: str) -> str:
    """A map's name as the page writes it (the deletion view's labels, e.g. 'AttnLRP'; numbers keep the key)."""
    return page.label_of(name)


def style(name: str, place: float, count: int) -> dict:
    """The map's line: the deletion view's colour and marker, this figure's own line style (:data:`LINES`),
    markers 6, width 2; the best-ranked map (``place`` 1 of ``count``) drawn on top."""
    kw = page.line_style(name, 6)
    return kw | {"linestyle": LINES.get(name, "-"), "lw": 2, "zorder": 3 + count - place}


DEFINITION = ("A map's **gain** = 1 − A_map ÷ A_random: A_map the area under its deletion curve (the raw score, 0 to "
              "100% of the patches removed, trapezoid rule), A_random the random orders' mean area. 0 = the score "
              "falls as fast as when patches are removed at random, 1 = it is gone at once, negative = slower than "
              "random; it has no units, so a probability and a cosine compare. A map is called better (worse) than "
              "random only when its area is below (above) every random order's.")


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
    if grid[0] != grid[1]:
        ask.append(f"crop the picture nearer to a square (now {grid[0]}×{grid[1]} patches)")
    ask = ask or ["choose a smaller model"]
    raise ValueError(
        f"`points`, `seeds`, `baseline`: with these settings the report card would send about {macs / 1e12:.1f} "
        f"trillion multiply-adds through {runner.spec.key} on this {grid[0]}×{grid[1]}-patch picture (about "
        f"{forwards:.0f} of its forwards); one request may send at most {faithful.MAX_TEST_MACS / 1e12:.1f} "
        "trillion. " + (lambda t: t[0].upper() + t[1:])(", or ".join(ask)) + ".")


def legend_label(r: perturb.Report, name: str) -> str:
    """A map's legend entry: its name and its gain under each test, in the tests' order ('n/a' where undefined)."""
    return label(name) + " (" + " / ".join(gain_text(r.gains[t][name]) for t in r.tests) + ")"


def gain_text(g: float) -> str:
    return "n/a" if np.isnan(g) else f"{g:+.2f}"


def render_report(r: perturb.Report, what: str, model: str) -> Image.Image:
    """Two panels, one per test: each map's raw deletion curve (the score itself) against the random orders' band
    and mean; the legend gives each map's gain under the two tests. The maps' curves are shifted sideways by at
    most 1.25 % of the patches (half a percent apart) and the best-ranked drawn on top, so that no curve hides
    another that has the same points."""
    tests = list(r.tests)
    with plotting.figure(1, len(tests), figsize=(plotting.fig_width(3.9 * len(tests)), 7.4), squeeze=False) \
            as (fig, axes):
        for ax, test in zip(axes[0], tests):
            c = r.tests[test]
            x = c.fractions * 100
            band = np.stack([c.deletion[k] for k in r.randoms])
            ax.fill_between(x, np.nanmin(band, 0), np.nanmax(band, 0), color="#dddddd", zorder=1,
                            label="random orders (range)")
            ax.plot(x, np.nanmean(band, 0), linestyle=LINES["random"], lw=2, color=page.COLOURS["random"], zorder=2,
                    label="random orders (mean)")
            for i, name in enumerate(r.names):  # each map a little to the side (±1.25 %), so equal curves all show
                ax.plot(x + (i - (len(r.names) - 1) / 2) * 0.5, c.deletion[name],
                        **(style(name, r.ranks[test][name], len(r.names))
                                                | {"label": legend_label(r, name)}))
            ax.set_xlabel("% of patches removed")
            ax.set_title(test)
        axes[0][0].set_ylabel(what if len(what) < 28 else "score")
        handles, labels = axes[0][-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=2, fontsize="small", frameon=False,
                   title="gain: " + " / ".join(tests), title_fontsize="small", bbox_to_anchor=(0.5, 0.47))
        fig.subplots_adjust(wspace=0.3, top=0.94, bottom=0.56)
        image = plotting.to_image(fig)
    said = "; ".join(f"{t}: " + ", ".join(f"{label(k)} gain {gain_text(r.gains[t][k])}" for k in r.names)
                     for t in tests)
    return plotting.described(image, f"Report card of {model} ({what}), deletion curves by token dropping and by "
                              f"pixel perturbation against random orders: {said}.")


def _names(keys: list[str]) -> str:
    return ", ".join(label(k) for k in keys)


def random_spread(r: perturb.Report, test: str) -> tuple[float, float, float]:
    """(the random orders' smallest area, largest, and that range in gain units: (max − min) ÷ A_random)."""
    a = [r.areas[test][k] for k in r.randoms]
    mean = float(np.mean(a))
    return min(a), max(a), (max(a) - min(a)) / mean if mean > 0 else float("nan")


def ranking_words(r: perturb.Report) -> tuple[str, float]:
    """(where the two tests agree or disagree on this picture, in words; the Spearman ρ of their rankings by area)."""
    ta, tb = list(r.tests)[:2]
    firsts = {t: [k for k in r.names if r.areas[t][k] == min(r.areas[t][n] for n in r.names)] for t in (ta, tb)}
    rho = randomise.spearman(np.array([r.areas[ta][k] for k in r.names]), np.array([r.areas[tb][k] for k in r.names]))
    rho_text = "undefined (one ranking has every map tied)" if np.isnan(rho) else f"{rho:.2f}"
    first = {t: ("**" + _names(v) + "** first" + (" (tied)" if len(v) > 1 else "")) for t, v in firsts.items()}
    if firsts[ta] == firsts[tb]:
        head = f"Both tests rank {first[ta]}"
    else:
        head = f"{ta.capitalize()} ranks {first[ta]}, {tb} ranks {first[tb]}"
    same = [r.ranks[ta][k] for k in r.names] == [r.ranks[tb][k] for k in r.names]
    text = head + (": the two rankings are the same" if same else
                   f"; the two rankings' Spearman ρ = {rho_text} (1: the same order, 0: unrelated, −1: reversed; "
                   f"over {len(r.names)} maps only a rough measure)")
    for t in (ta, tb):
        v = r.verdicts[t]
        low, high, spread = random_spread(r, t)
        text += f". Under {t} the random orders' areas span {low:.3f}–{high:.3f}"
        better, worse = [k for k in r.names if v[k] == "better"], [k for k in r.names if v[k] == "worse"]
        within = [k for k in r.names if v[k] == "within"]
        text += (f"; better than every random order: {_names(better) or 'none'}"
                 + (f"; worse than every random order: {_names(worse)}" if worse else "")
                 + (f"; inside the random orders' range (not told apart from chance): {_names(within)}" if within
                    else ""))
        g = [r.gains[t][k] for k in r.names]
        if np.isnan(spread) or np.isnan(g).any():
            text += (f". Under {t} the random orders' mean area is about 0, so no gain is defined (the areas are "
                     "in the numbers)")
        elif max(g) - min(g) <= spread:
            text += (f". Under {t} the maps' gains lie within {max(g) - min(g):.3f} of each other, less than the "
                     f"random orders' own spread ({spread:.3f} in gain): its ranking says little on this picture")
    return text + ".", rho


MEANING = ("Two tests of the same maps can disagree: each test is a choice (which patches are removed, and how: a "
           "token taken out, a pixel replaced), and a map is a hint of what the model used, not a measurement. "
           "Occlusion is itself made by token dropping, so the token test favours it. Ties between patches of equal "
           "value (occlusion's regions) are broken in raster order, left to right and top to bottom.")


@record(declared.REPORT, tab="classify", figures=("report",), bundle=True, long=True,
        doc="The report card: every map (those of the maps' stage and occlusion) tested by token dropping and by "
            "pixel perturbation (baseline 'mean': quantus's RegionPerturbation mean; 'road': ROAD's noisy linear "
            "imputation); numbers.area gives every order's deletion area on the raw scores (the random orders' too), "
            "numbers.gain each map's 1 − A_map / A_random (0: as random, 1: the score gone at once, negative: "
            "slower; null when A_random is about 0), numbers.verdict 'better'/'worse' than every random order or "
            "'within' their range, numbers.rank its place under each test (1 = smallest area), numbers.spearman "
            "the two rankings' rank correlation, numbers.curves the curves divided by the whole picture's score, "
            "numbers.cost the forwards. Settings that would send more than "
            f"{faithful.MAX_TEST_MACS / 1e13:g}e13 multiply-adds through the model are refused, naming what to "
            "lower.")
def show_report(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Every map under token dropping and pixel perturbation: curves, areas, gains, ranks, where they differ."""
    runner = page._runner(values, progress)
    s = settle(values)
    grid, _ = page._input_grid(runner, rgb)
    check_report(runner, grid, values)
    r = runner.analyse(perturb.ReportProbe(grid, runner.spec.prefix, runner.spec.patch, values["points"],
                                           values["seeds"], values["baseline"], values["rank"]), rgb).value
    tokens = r.tests[perturb.TOKENS]
    what, name = page._what(runner, tokens.target, rgb)
    tests = list(r.tests)
    said = {"better": "better than random", "worse": "worse than random", "within": "within random's range"}
    table = ("| map | " + " | ".join(f"{t}: area, gain (rank)" for t in tests) + " |\n|---|"
             + "---|" * len(tests) + "\n"
             + "\n".join(f"| {label(k)} | " + " | ".join(
                 f"{r.areas[t][k]:.3f}, {gain_text(r.gains[t][k])} ({r.ranks[t][k]:g}; {said[r.verdicts[t][k]]})"
                 for t in tests) + " |" for k in r.names)
             + "\n| random orders | " + " | ".join(
                 "{:.3f}–{:.3f} (mean {:.3f})".format(*random_spread(r, t)[:2],
                                                     float(np.mean([r.areas[t][k] for k in r.randoms])))
                 for t in tests) + " |")
    words, rho = ranking_words(r)
    full = runner.spec.prefix + grid[0] * grid[1]
    forwards = r.tokens / full + r.forwards
    ends = "" if tokens.ends else (
        " This model's head pools the patch tokens, so with none left token dropping has nothing to read: its "
        "curve has no point at 100% removed and its areas cover 0 to "
        f"{tokens.fractions[-2]:.0%} (the random orders' too); the pixel test always has a picture to read.")
    road = (" With every patch removed ROAD's equations have no known pixel (grad-cam's system is singular "
            "there): vitviz's own choice is the picture's per-channel mean plus the noise, the same end for every "
            "order." if values["baseline"] == "road" else "")
    text = (f"Scored by the {what} (the whole picture: {tokens.full:.3f}). {words} {MEANING} {DEFINITION} Pixels: "
            f"{perturb.BASELINES[values['baseline']]}, on the picture as the model takes it, patch by patch on its "
            f"{grid[0]}×{grid[1]} grid.{road} Occlusion: about {perturb.REGIONS}×{perturb.REGIONS} regions of tokens, each "
            f"taken out once.{ends} Cost: about {forwards:.0f} forwards' worth ({r.forwards} whole pictures, the "
            f"rest token subsets). {page.left_out_words(r.left_out)}{page.caveats('the token curve')}")
    if tokens.target is None:
        text = ("This model has no classes, so each sequence or picture is scored by how close its final [CLS] "
                "stays to the whole picture's (cosine similarity), not by a probability. " + text)
    numbers = {"model": runner.spec.key, "score": what, "class": name or None, "full": tokens.full,
               "baseline": values["baseline"], "fractions": tokens.fractions.tolist(), "grid": list(grid),
               "maps": r.names, "left_out": dict(r.left_out), "tests": tests,
               "curves": {t: {k: v.tolist() for k, v in c.deletion.items()} for t, c in r.scaled.items()},
               "raw": {t: {k: v.tolist() for k, v in c.deletion.items()} for t, c in r.tests.items()},
               "gain": {t: {k: None if np.isnan(v) else v for k, v in g.items()} for t, g in r.gains.items()},
               "area": r.areas, "verdict": r.verdicts, "rank": r.ranks, "spearman": None if np.isnan(rho) else rho,
               "ends": tokens.ends, "occlusion": {"regions": r.occlusion_regions, "per_side": perturb.REGIONS},
               "cost": {"tokens": r.tokens, "pictures": r.forwards, "forwards": forwards}}
    figure = render_report(r, what, runner.spec.key)
    warning = shapes_only(runner.spec.key, rgb)
    return Shown({"report": figure}, {"text": table + "\n\n" + text, "table": table}, numbers, s, runner.spec.key,
                 "\n\n".join(p for p in (runner.notice, warning) if p))
