"""Test the map: whether the patches a map highlights are the ones the model's prediction needs, on the student's
own picture (the Classify tab's section "Test the map"; the analyses are :mod:`vitviz.analyses.faithful`).

- **Deletion and insertion**: each map's order of the patches, taken out (or put in) 10% at a time, against
  random orders; the area under each curve in a table.
- **Randomise the weights**: the maps of copies of the model re-drawn from the output (the head, the final norm,
  then the blocks from the top), in several seeded draws, and how alike they stay to the trained model's: the
  original MPRT's Spearman rank correlation at every step, smooth MPRT's and efficient MPRT's at full
  randomisation (as quantus 0.6.0 computes them), with the draws' spread, beside the prediction falling apart.
- **Predict, then test**: the student marks the patches they think the model needs; those are dropped (or kept
  alone) and compared with the same number of patches by each map.

All run at the model's own size with its one input (a classifier's own eval transform), as the Classify tab does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image

from vitviz.analyses import faithful, randomise
from vitviz.analyses import maps as made
from vitviz.models import cache as models
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.render.browser import png_data_url
from vitviz.specs import views as declared
from vitviz.specs.state import settle
from vitviz.views.attention import map_grid
from vitviz.views.shown import Shown, nearest_shapes, record, shapes_only

COLOURS = {"attention": "#0072b2", "rollout": "#e69f00", "relevance": "#009e73", "occlusion": "#cc79a7",
           "attnlrp": "#56b4e9", "legrad": "#f0e442", "your choice": "#d55e00", "random": "#777777"}
"""Okabe and Ito's colour-blind-safe palette, one colour per map (black is the class's probability and the whole
picture). LeGrad's yellow is faint on white: its lines and bars are drawn with a black edge (:func:`line_style`,
:data:`EDGES`)."""
MARKS = {"attention": ("o", "-"), "rollout": ("s", "--"), "relevance": ("^", "-."), "occlusion": ("D", ":"),
         "attnlrp": ("v", (0, (5, 1, 1, 1, 1, 1))), "legrad": ("P", "--")}
"""Each map's marker and line style, so that six or more lines stay apart without their colours (a reader who
cannot tell sky blue from blue, or a grey printout)."""
EDGES = {"legrad": "#000000"}
"""The edge a colour too light for white paper is drawn with (its bars' outline, its markers' rim)."""


def label_of(name: str) -> str:
    """A map's name as the page writes it ('AttnLRP' for the key 'attnlrp'); numbers keep the key."""
    return declared.MAP_LABELS.get(name, name)


def line_style(name: str, size: float = 4) -> dict:
    """``Axes.plot`` keywords drawing map ``name``'s curve: its colour, marker and line style (black for a name
    that has none), and for a light colour a black rim around the line and markers."""
    from matplotlib import patheffects

    marker, line = MARKS.get(name, ("o", "-"))
    kw = {"color": COLOURS.get(name, "#000000"), "marker": marker, "linestyle": line, "ms": size,
          "label": label_of(name)}
    if name in EDGES:
        kw |= {"markeredgecolor": EDGES[name], "markeredgewidth": 0.8,
               "path_effects": [patheffects.Stroke(linewidth=3.2, foreground=EDGES[name]), patheffects.Normal()]}
    return kw


def map_names(runner: Runner) -> tuple[str, ...]:
    """The maps every test ranks the patches by on ``runner``'s model, in the views' order
    (:data:`vitviz.analyses.maps.NAMES`; those of :data:`~vitviz.analyses.maps.NEED_A_CLASS` only with classes);
    occlusion, made by the tests themselves, is not among them."""
    return tuple(n for n in made.NAMES if runner.labels or n not in made.NEED_A_CLASS)


def left_out_words(left_out: dict[str, str]) -> str:
    """What a view says of the maps its model could not have (``left_out``: name -> why, in
    :func:`vitviz.analyses.maps.class_maps`' words), one sentence each; empty when every map is there."""
    return "".join(f"{label_of(k)} is not among the maps: {why} " for k, why in left_out.items())


def maps_in_words() -> str:
    """The maps every test uses, as the numbers name them, for the records' docs."""
    need = [n for n in made.NAMES if n in made.NEED_A_CLASS]
    return ", ".join(made.NAMES) + (f" (with classes only: {', '.join(need)})" if need else "")


def caveats(measured: str) -> str:
    """What the token-dropping tests show and do not, for ``measured`` (what the view measures: "every curve",
    "every score here")."""
    return ("What this shows and what it does not: taking tokens out keeps every remaining patch exactly as it was "
            "(no grey square pasted in, which the model never saw in training), but a sequence with tokens missing "
            f"is still one the model was never trained on, so {measured} also measures how the model copes with "
            "that. A map that beats the random orders points at patches the prediction depends on here; it does not "
            "show how the model reasons, and a map that loses may still be right about something else.")



def _runner(values: dict, progress=None) -> Runner:
    runner = models.get_model(values["model"], progress)
    if runner.spec.prefix < 1:
        raise ValueError(f"`model`: {runner.spec.key} has no [CLS] or register token, so with every patch taken out "
                         "nothing is left to read: choose a model with a class token.")
    return runner


def _what(runner: Runner, target: int | None, rgb: np.ndarray) -> tuple[str, str]:
    """(what the score is, in words; the class's name) for the figures and texts."""
    if target is None:
        return "cosine similarity to the whole picture's [CLS]", ""
    name = runner.labels[target] if runner.labels else f"class {target}"
    name = next(iter(nearest_shapes({name: 0.0}, runner.spec.key, rgb)))
    return f"probability of “{name}”", name


def grid_of(runner: Runner) -> tuple[int, int]:
    g = runner.side(runner.resolution) // runner.spec.patch
    return g, g


def _input_grid(runner: Runner, rgb: np.ndarray) -> tuple[tuple[int, int], np.ndarray]:
    fitted = runner.fit_at(rgb, runner.side(runner.resolution))
    return fitted.grid, fitted.image


# ---- deletion and insertion ---------------------------------------------------------------------------------

KINDS = {"deletion": ("deletion",), "insertion": ("insertion",), "both": ("deletion", "insertion")}


def check_work(runner: Runner, grid: tuple[int, int], values: dict) -> int:
    """The multiply-adds the deletion view's settings would send through ``runner``'s model (from the settings
    alone); ``ValueError`` naming what to lower when that is over :data:`faithful.MAX_TEST_MACS`."""
    kinds = KINDS[values["curves"]]
    maps = len(map_names(runner)) + 1  # every map (the class maps with classes only) and occlusion
    macs = faithful.planned_macs(runner.spec, grid, maps, values["points"], values["seeds"], values["regions"], kinds)
    if macs <= faithful.MAX_TEST_MACS:
        return macs
    forwards = macs / faithful.sequence_macs(runner.spec, grid[0] * grid[1] + runner.spec.prefix)
    lower = ([f"`points` (now {values['points']}; 11 reads a point every 10%)"] if values["points"] > 11 else []) \
        + ([f"`seeds` (now {values['seeds']})"] if values["seeds"] > 1 else []) \
        + ([f"`regions` (now {values['regions']})"] if values["regions"] > 2 else [])
    said = (", ".join(lower[:-1]) + " or " + lower[-1]) if len(lower) > 1 else "".join(lower)
    ask = ["lower " + said] * bool(lower) + ["ask for one kind of `curves` (now both)"] * (len(kinds) > 1)
    if grid[0] != grid[1]:  # a model without classes sees the whole picture: a longer one makes more patches
        side = min(grid)
        square = faithful.planned_macs(runner.spec, (side, side), maps, values["points"], values["seeds"],
                                       values["regions"], kinds)
        ask.append(f"crop the picture nearer to a square (a {side}×{side}-patch one would need about "
                   f"{square / 1e12:.1f} trillion)")
    ask = ask or ["choose a smaller model"]
    raise ValueError(
        f"`curves`, `points`, `seeds`, `regions`: with these settings the test would send about "
        f"{macs / 1e12:.1f} trillion multiply-adds through {runner.spec.key} on this {grid[0]}×{grid[1]}-patch "
        f"picture (about {forwards:.0f} of its forwards); one request may send at most "
        f"{faithful.MAX_TEST_MACS / 1e12:.1f} trillion. " + (lambda t: t[0].upper() + t[1:])(", or ".join(ask)) + ".")


def render_curves(c: faithful.Curves, names: list[str], randoms: list[str], what: str, model: str,
                  kinds: tuple[str, ...]) -> Image.Image:
    x = c.fractions * 100
    with plotting.figure(1, len(kinds), figsize=(plotting.fig_width(3.9 * len(kinds)), 6.0), squeeze=False) \
            as (fig, axes):
        for ax, kind in zip(axes[0], kinds):
            curves = c.deletion if kind == "deletion" else c.insertion
            band = np.stack([curves[r] for r in randoms])  # a point the model cannot score is NaN: not drawn
            ax.fill_between(x, band.min(0), band.max(0), color="#bbbbbb", label="random (range)")
            ax.plot(x, band.mean(0), ":", color=COLOURS["random"], label="random (mean)")
            for name in names:
                ax.plot(x, curves[name], lw=1.6, **line_style(name))
            ax.set_xlabel("% of patches taken out" if kind == "deletion" else "% of patches put in")
            ax.set_title(kind)
            ax.set_ylim(min(0.0, float(np.nanmin(band))), max(1.0, float(np.nanmax(band))) * 1.02)
        axes[0][0].set_ylabel(what[:40])
        handles, labels = axes[0][-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize="small", frameon=False)
        fig.subplots_adjust(wspace=0.3, bottom=0.3)
        image = plotting.to_image(fig)
    parts = "; ".join(f"{label_of(n)}: " + ", ".join(f"{k} area {c.area(k, n):.3f}" for k in kinds) for n in names)
    return plotting.described(image, f"{' and '.join(kinds).capitalize()} curves of {model} ({what}): {parts}; "
                              "random orders' " + ", ".join(f"{k} area {np.mean([c.area(k, r) for r in randoms]):.3f}"
                                                            for k in kinds) + ".")


@record(declared.DELETION, tab="classify", figures=("curves",), bundle=True, long=True,
        doc="Deletion and insertion curves: each map's order of the patch tokens (" + maps_in_words()
            + ", and occlusion) taken out (or put in) a share at a time, against seeded random orders; "
            "numbers.auc gives each curve's area (lower deletion and higher insertion = more faithful); "
            "numbers.ends is false for a head that pools the patch tokens, which has no score with every patch "
            "out (that point is null and the areas cover the others); numbers.left_out says why a map the model "
            "cannot have (AttnLRP on a gated MLP) is missing. Settings that would send more than "
            f"{faithful.MAX_TEST_MACS / 1e13:g}e13 multiply-adds through the model (on the picture's own patch "
            "grid) are refused, naming what to lower.")
def show_deletion(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Deletion and insertion curves of each map against random orders, with the areas under them."""
    runner = _runner(values, progress)
    s = settle(values)
    grid, _ = _input_grid(runner, rgb)
    kinds = KINDS[values["curves"]]
    check_work(runner, grid, values)
    t = runner.analyse(faithful.TestProbe(grid, runner.spec.prefix, values["points"], values["seeds"],
                                          values["regions"], kinds, values["rank"]), rgb).value
    c, occ, names, randoms = t.curves, t.occlusion, t.orders, t.randoms
    what, name = _what(runner, c.target, rgb)
    area = {k: {kind: c.area(kind, k) for kind in kinds} for k in names + randoms}
    spread = {kind: np.array([area[r][kind] for r in randoms]) for kind in kinds}

    def pm(v: np.ndarray) -> str:
        return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if len(v) > 1 else f"{v.mean():.3f}"

    heads = {"deletion": "deletion area (lower: more faithful)", "insertion": "insertion area (higher: more faithful)"}
    table = ("| map | " + " | ".join(heads[k] for k in kinds) + " |\n|---|" + "---|" * len(kinds) + "\n"
             + "\n".join(f"| {label_of(k)} | " + " | ".join(f"{area[k][kind]:.3f}" for kind in kinds) + " |" for k in names)
             + f"\n| random ({len(randoms)} orders) | " + " | ".join(pm(spread[kind]) for kind in kinds) + " |")
    said = []
    if "deletion" in kinds:
        best = min(names, key=lambda k: area[k]["deletion"])
        said.append(f"taking out the patches each map ranks highest makes it fall fastest for **{label_of(best)}**")
    if "insertion" in kinds:
        best = max(names, key=lambda k: area[k]["insertion"])
        said.append(f"putting them in first, it rises fastest for **{label_of(best)}**")
    beats = [k for k in names if all((area[k][kind] < spread[kind].min()) if kind == "deletion" else
                                     (area[k][kind] > spread[kind].max()) for kind in kinds)]
    missing = {"deletion": "100% taken out", "insertion": "0% put in"}  # only the kinds asked for are named
    ranges = {"deletion": f"deletion 0–{c.fractions[-2]:.0%} taken out",
              "insertion": f"insertion {c.fractions[1]:.0%}–100% put in"}
    ends = "" if c.ends else (
        "This model's head pools the patch tokens, so with none left it has nothing to read: its curves have no "
        f"point at {' and '.join(missing[k] for k in kinds)}, and each area covers the points they have "
        f"({', '.join(ranges[k] for k in kinds)}, the same range for every order). ")
    said = "; ".join(said)  # its first letter up, the maps' names as they are written ('AttnLRP')
    text = (f"Scored by the {what} (the whole picture: {c.full:.3f}). " + ends + said[:1].upper() + said[1:] + ". "
            + (f"Beating every random order: {', '.join(map(label_of, beats))}. " if beats
               else "No map beats every random order. ")
            + f"Occlusion: the picture cut into {occ.count} regions (about {values['regions']} per side), each taken "
            f"out once. {left_out_words(t.left_out)}{caveats('every curve')}")
    if c.target is None:
        text = ("This model has no classes, so each sequence is scored by how close its final [CLS] stays to the "
                "whole picture's (cosine similarity), not by a probability. " + text)
    warning = shapes_only(runner.spec.key, rgb)
    numbers = {"model": runner.spec.key, "score": what, "class": name or None, "full": c.full,
               "fractions": c.fractions.tolist(), "deletion": {k: v.tolist() for k, v in c.deletion.items()},
               "insertion": {k: v.tolist() for k, v in c.insertion.items()}, "auc": area,
               "random_auc": {kind: [float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0]
                              for kind, v in spread.items()},
               "occlusion": {"regions": occ.count, "per_side": values["regions"]}, "grid": list(grid),
               "ends": c.ends, "left_out": dict(t.left_out),
               "cost": {"tokens": t.tokens, "forwards": t.tokens / faithful.tokens_of(runner)}}
    figure = render_curves(c, names, randoms, what, runner.spec.key, kinds)
    return Shown({"curves": figure}, {"text": table + "\n\n" + text, "table": table}, numbers, s, runner.spec.key,
                 "\n\n".join(p for p in (runner.notice, warning) if p))


# ---- randomised weights -------------------------------------------------------------------------------------

def compose(parts: list[Image.Image], beside: bool) -> Image.Image:
    """Figures drawn here put side by side (or one under the other) on white, keeping the smallest text recorded;
    scaled to the style's box if they would not fit it (they are sized to)."""
    w = sum(p.width for p in parts) if beside else max(p.width for p in parts)
    h = max(p.height for p in parts) if beside else sum(p.height for p in parts)
    out, at = Image.new("RGB", (w, h), "white"), 0
    for part in parts:
        out.paste(part.convert("RGB"), (at, 0) if beside else ((w - part.width) // 2, at))
        at += part.width if beside else part.height
    sizes = [plotting.text_px_of(p) for p in parts if plotting.text_px_of(p) is not None]
    return plotting.fit_image(out, min(sizes) if sizes else None)


def check_randomise(runner: Runner, grid: tuple[int, int], values: dict) -> int:
    """The multiply-adds the randomisation's settings would send through ``runner``'s model (from the settings
    alone: :func:`vitviz.analyses.randomise.planned_macs`); ``ValueError`` naming what to lower when that is over
    :data:`faithful.MAX_TEST_MACS`."""
    tokens = grid[0] * grid[1] + runner.spec.prefix
    draws, samples = values["draws"], values["samples"]
    macs = randomise.planned_macs(runner.spec, tokens, bool(runner.labels), draws, samples)
    if macs <= faithful.MAX_TEST_MACS:
        return macs
    forwards = macs / faithful.sequence_macs(runner.spec, tokens)
    lower = [f"`draws` (now {draws})"] * (draws > 1) + [f"`samples` (now {samples})"] * (samples > 1)
    ask = ("lower " + " or ".join(lower)) if lower else "choose a smaller model"
    raise ValueError(
        f"`draws`, `samples`: with these settings the randomisation would send about {macs / 1e12:.1f} trillion "
        f"multiply-adds through {runner.spec.key} on this {grid[0]}×{grid[1]}-patch picture (about {forwards:.0f} "
        f"of its forwards); one request may send at most {faithful.MAX_TEST_MACS / 1e12:.1f} trillion. "
        f"{ask[0].upper() + ask[1:]}.")


def step_label(name: str) -> str:
    """A step's name as the chart's axis writes it: 'trained', 'head', 'norm', then the block's number."""
    return {"final norm": "norm"}.get(name, name.removeprefix("block "))


def spread(v: np.ndarray, unit: str = "") -> str:
    """Draws' values in words: 'mean ± sd (min to max)', or the one value ('%': as percentages)."""
    v = np.asarray(v, np.float64)
    f = "{:.1%}" if unit == "%" else "{:.2f}"
    if len(v) < 2:
        return f.format(v[0])
    return (f"{f.format(np.nanmean(v))} ± {f.format(np.nanstd(v, ddof=1))} ({f.format(np.nanmin(v))} to "
            f"{f.format(np.nanmax(v))})")


def render_cascade(c: randomise.Cascade, sc: randomise.Scores, picture: np.ndarray, grid: tuple[int, int],
                   step: int, name: str, cmap: str, model: str) -> Image.Image:
    """The map ``name`` trained and at ``step`` (the first draw), over the chart of every map's MPRT score per
    step: the draws' range as a band, their mean as a line; the trained class's mean probability (grey, dotted).

    Shapes: ``c.maps[name]`` (D, S, N) with N = gh × gw (``grid``); ``sc.mprt[k]`` (D, S); ``c.probs`` (D, S);
    ``picture`` (H, W, 3) uint8. The maps are drawn as the scores rank them: |map| / max |map| on one 0…1 scale
    (:func:`vitviz.analyses.randomise.mprt`), so a map whose sign flips but whose sizes stay reads alike."""
    st = plotting.style()
    small = np.asarray(Image.fromarray(picture).resize(plotting.panel_size(*picture.shape[:2], 170), Image.BILINEAR))
    maps = [plotting.heat_overlay(small, np.abs(randomise.by_max(m)).reshape(grid), cmap, 0.6, vmin=0.0, vmax=1.0)
            for m in (c.maps[name][0, 0], c.maps[name][0, step])]
    after = f"step {step}: re-drawn down to {c.steps[step]} (draw 1)" if step else "trained (step 0)"
    overlay = plotting.panels(maps, ["trained", after], f"{label_of(name)}: the weights re-drawn from the output",
                              cmap, f"|{label_of(name)}| / its max (what the scores rank)", cols=2, panel_px=170)
    x = np.arange(len(c.steps))
    height = max(2.4, (st.max_height - overlay.height - 60) / plotting.DPI)  # the chart's margins come on top
    with plotting.figure(1, 1, figsize=(plotting.fig_width(7.6), height)) as (fig, ax):
        for k, r in sc.mprt.items():
            style = line_style(k)
            light = k in EDGES  # LeGrad's yellow: a denser band with a dark hatched rim, to be seen on white
            ax.fill_between(x, np.nanmin(r, 0), np.nanmax(r, 0), facecolor=style["color"], alpha=0.4 if light else 0.18,
                            lw=0.8 if light else 0, edgecolor=EDGES.get(k, "none"), hatch="////" if light else None)
            ax.plot(x, np.nanmean(r, 0), lw=1.6, **style)
        if c.probs is not None:
            ax.plot(x, c.probs.mean(0), ls=":", color="#555555", lw=2.0, marker="x", ms=5,
                    label="class's\nprobability")
        last = x[-1]
        ax.hlines(randomise.PASS_BELOW, last - 0.3, last + 0.3, color="#000000", lw=2.4,
                  label=f"vitviz's pass line\n({randomise.PASS_BELOW:g}, last step)")
        ax.set_xlim(-0.3, last + 0.35)  # the pass line's ends do not widen the axis (the names stay apart)
        ax.axvline(step, color="#999999", lw=1)
        ax.set_xticks(x, [step_label(s) for s in c.steps], rotation=90 if len(x) > 8 else 0)  # 'trained', 'head'…
        ax.set_xlabel("re-drawn from the output: head, final norm, block (number)")
        ax.set_ylabel("rank corr. / prob.")
        low = min(float(np.nanmin(r)) for r in sc.mprt.values()) if sc.mprt else 0.0
        ax.set_ylim(min(-0.2, low - 0.05), 1.05)
        ax.set_title(f"lines: mean of {c.draws} draw{'s' if c.draws != 1 else ''}; bands: their range", loc="left")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.05), frameon=False, labelspacing=0.25,
                  handlelength=2.6)
        chart = plotting.to_image(fig)
    both = compose([overlay, chart], beside=False)
    return plotting.described(both, f"|{label_of(name)}| of {model} at step {step} ({c.steps[step]}), beside the "
                              f"trained map; each map's rank correlation with its trained map per step, mean of "
                              f"{c.draws} draws: " + "; ".join(f"{label_of(k)} " + ", ".join(
                                  f"{v:.2f}" for v in np.nanmean(r, 0)) for k, r in sc.mprt.items()) + ".")


def randomise_table(sc: randomise.Scores, names: list[str]) -> str:
    """The scores at full randomisation, one row per map: MPRT's and sMPRT's Spearman, eMPRT's rise, and each
    test's verdict against vitviz's threshold ('too close to call' when the draws fall on both sides)."""
    rows = []
    for k in names:
        v = sc.verdicts(k)
        rows.append(f"| {label_of(k)} | {spread(sc.mprt[k][:, -1])} | "
                    + (f"{spread(sc.smprt[k])} | " if k in sc.smprt else "— | ")
                    + f"{spread(sc.emprt[k])} | {v['mprt']} / {v['smprt']} / {v['emprt']} |")
    return ("| map | MPRT: Spearman, all random | sMPRT: Spearman of smoothed maps, all random | eMPRT: entropy's "
            f"rise | verdict (MPRT / sMPRT / eMPRT; vitviz's thresholds: below {randomise.PASS_BELOW:g}, above 0) |"
            "\n|---|---|---|---|---|\n" + "\n".join(rows))


def _steps_said(c: randomise.Cascade) -> str:
    """The steps after the trained one in words, from the cascade itself: 'head, final norm, then blocks 12 to 1'
    (a model without a head: 'final norm, then blocks 12 to 1')."""
    parts = [n for n in c.steps[1:] if not n.startswith("block ")]
    return ", ".join(parts + [f"then blocks {c.layers} to 1"])


def _probability_words(c: randomise.Cascade, step: int, said: Callable[[int], str]) -> str:
    """The trained class's probability at step 0 and ``step`` and where each draw's prediction first changes
    ('' for a model without classes); ``said`` names a class as the page does."""
    if c.probs is None:
        return ""
    text = f" The trained class's probability: {c.probs[0, 0]:.1%} in the trained model"
    if step:
        text += (f", {spread(c.probs[:, step], '%')} at step {step} over the draws, where the model predicts "
                 f"“{said(c.top[0, step])}” in draw 1")
    changed = [next((i for i, t in enumerate(row) if t != c.target), None) for row in c.top]
    if all(i is None for i in changed):
        return text + "; no draw changes the prediction."
    if len(set(changed)) == 1:
        return text + f"; the prediction first changes in every draw at step {changed[0]} ({c.steps[changed[0]]})."
    return (text + "; the prediction first changes at step " + ", ".join("never" if i is None else str(i)
                                                                        for i in changed)
            + " in draws " + ", ".join(str(d + 1) for d in range(c.draws)) + ".")


def _verdict_words(c: randomise.Cascade, sc: randomise.Scores, names: list[str]) -> str:
    """Which maps pass, fail or are too close to call, against vitviz's thresholds, with the spread; and, for a map
    that stays as it was (ρ = 1) through the steps before the blocks, what its passing means."""
    verdicts = {k: sc.verdicts(k) for k in names}
    by = {v: [label_of(k) for k in names if verdicts[k]["all"] == v] for v in ("pass", randomise.CLOSE, "fail")}
    text = (f"Passing all three: **{', '.join(by['pass'])}**. " if by["pass"] else "No map passes all three. ")
    if by[randomise.CLOSE]:
        text += (f"Too close to call (some draws on either side of a threshold, none failing outright): "
                 f"{', '.join(by[randomise.CLOSE])}. ")
    if by["fail"]:
        text += f"Failing at least one: {', '.join(by['fail'])}. "
    text += ("At full randomisation, MPRT's Spearman, mean ± sd (min to max) over the draws: "
             + "; ".join(f"{label_of(k)} {spread(sc.mprt[k][:, -1])}" for k in names) + ".")
    early = [i for i, n in enumerate(c.steps) if i and not n.startswith("block ")]
    blind = [k for k in names if early and np.all(sc.mprt[k][:, early] > 1 - 1e-9)]
    if blind:
        who = " and ".join(label_of(k) for k in blind)
        text += (f" {who[0].upper() + who[1:]} stay{'s' if len(blind) == 1 else ''} as trained "
                 f"(ρ = 1) through the {' and '.join(c.steps[i] for i in early)}: "
                 f"{'it does' if len(blind) == 1 else 'they do'} not read them, so passing means "
                 f"{'it depends' if len(blind) == 1 else 'they depend'} on the blocks' weights, not that "
                 f"{'it explains' if len(blind) == 1 else 'they explain'} the class.")
    return text


def _scores_words(c: randomise.Cascade, draws: str) -> str:
    """What passing means here: vitviz's thresholds, sMPRT's samples (quantus and the paper use 50) at full
    randomisation only, and eMPRT's bins against the patches (the entropy is at most ln N with N patches)."""
    n = next(iter(c.maps.values())).shape[-1]
    cap = (f" With {n} patches, fewer than eMPRT's {randomise.BINS} bins, the entropy here is capped at "
           f"ln {n} = {np.log(n):.2f}." if n < randomise.BINS else "")
    return (f"**Passing** here means, in every one of the {draws}, against vitviz's thresholds (the papers report "
            f"the scores and set none): the rank correlation with the trained map at full randomisation (every "
            f"block{' and the head' if 'head' in c.steps else ''} re-drawn) is below {randomise.PASS_BELOW:g}, "
            f"for the maps themselves (MPRT) and for maps averaged over {c.samples} copies of the picture with "
            f"noise of {randomise.NOISE:.0%} of its range (sMPRT, the last copy noise-free; computed at full "
            f"randomisation only, with {c.samples} samples where quantus and the paper default to 50), and the "
            f"map's entropy over {randomise.BINS} bins rises (eMPRT above 0: the random model's map is the more "
            f"disordered); a score whose draws fall on both sides of its threshold is too close to call." + cap + " ")


@record(declared.RANDOMISE, tab="classify", figures=("randomise",), bundle=True, long=True,
        doc="The model parameter randomisation test as quantus 0.6.0 computes it: copies of the model re-drawn "
            "from the output, step by step (numbers.steps: 'trained', 'head', 'final norm', 'block L' … 'block 1'), "
            "in numbers.draws seeded draws; numbers.spearman[map][step][draw] is the original MPRT's score (Spearman "
            "rank correlation of |map| with the trained |map|), numbers.smprt[map][draw] smooth MPRT's (maps "
            "averaged over numbers.noise.samples noisy copies of the input, at full randomisation), "
            "numbers.emprt[map][draw] efficient MPRT's (the relative rise of the map's 100-bin entropy from trained "
            "to fully random; capped at ln N with fewer than 100 patches, numbers.entropy_cap); numbers.passes[map] "
            "which tests a map passes in every draw and numbers.verdicts[map] 'pass', 'fail' or 'too close to call' "
            "(draws on both sides) against vitviz's own thresholds, not the papers' (Spearman below "
            f"{randomise.PASS_BELOW:g}, entropy rising); sMPRT is computed at full randomisation only. Settings "
            "that would send more than "
            f"{faithful.MAX_TEST_MACS / 1e13:g}e13 multiply-adds through the model are refused, naming what to "
            "lower.")
def show_randomise(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The maps of copies re-drawn from the output step by step, over several draws, and the three scores."""
    runner = _runner(values, progress)
    s = settle(values)
    grid, picture = _input_grid(runner, rgb)
    check_randomise(runner, grid, values)
    c = runner.analyse(randomise.CascadeProbe(runner.spec.prefix, values["draws"], values["samples"]), rgb).value
    sc = randomise.scores_of(c)
    last = len(c.steps) - 1
    step = s.within("step", last, f"{runner.spec.key} has {last} steps after the trained model ({_steps_said(c)}).",
                    lo=0)
    name = values["map"]
    if name not in c.maps:
        why = c.left_out.get(name) or (f"{runner.spec.key} has no classes, so no {label_of(name)}" if c.target is None
                                       else f"{runner.spec.key} has no {label_of(name)}")
        s.use("map", "attention", f"{why.rstrip('.')}: the attention map is shown.")
        name = "attention"
    names = list(c.maps)
    figure = render_cascade(c, sc, picture, grid, step, name, values["cmap"], runner.spec.key)
    labels = runner.labels or []

    def said(t: int) -> str:
        return next(iter(nearest_shapes({labels[t] if labels else f"class {int(t)}": 0.0}, runner.spec.key, rgb)))

    draws = f"{c.draws} draws"
    text = (f"Step {step} of {last}: "
            + ("the trained model." if not step else f"{c.steps[step]} and everything above it re-drawn as timm "
               "initialises a ViT (linear layers from a normal of std 0.02, torch's trunc_normal_ with timm's "
               "bounds ±2, a hundred standard deviations away; zero bias; norms the identity; LayerScale at its "
               "initial value), the rest keeping their trained weights; the picture shows draw 1.")
            + f" The chart shows every step of {draws} (each its own seed): a map that stays alike to the trained "
            "one once the weights that made the prediction are gone is not about what the model learned. "
            + _scores_words(c, draws) + _verdict_words(c, sc, names) + _probability_words(c, step, said)
            + " The scores depend on the similarity measure and on the order of the steps (Hedström et al. 2023): "
            "a hint, not a verdict.")
    if c.target is None:
        text += " This model has no classes, so no head step."
    table = randomise_table(sc, names)
    n_patches = next(iter(c.maps.values())).shape[-1]
    numbers = {"model": runner.spec.key, "step": step, "map": name, "grid": list(grid), "steps": list(c.steps),
               "draws": [{"draw": d + 1, "seeds": [randomise.seed_of(d, k) for k in range(1, len(c.steps))]}
                         for d in c.seeds],
               "spearman": {k: r.T.tolist() for k, r in sc.mprt.items()},
               "smprt": {k: v.tolist() for k, v in sc.smprt.items()},
               "emprt": {k: v.tolist() for k, v in sc.emprt.items()},
               "entropy": {k: {"trained": float(v[0]), "random": v[1:].tolist()} for k, v in sc.entropy.items()},
               "passes": {k: sc.passes(k) for k in names}, "verdicts": {k: sc.verdicts(k) for k in names},
               "threshold": randomise.PASS_BELOW,
               "threshold_is": "vitviz's own (the papers set none): Spearman below it for MPRT and sMPRT, an "
                               "entropy rise above 0 for eMPRT; draws on both sides: 'too close to call'",
               "noise": {"samples": c.samples, "std": f"{randomise.NOISE:g} × (max - min) of the prepared input",
                         "seed": randomise.NOISE_SEED, "at": "full randomisation only",
                         "quantus_default_samples": 50},
               "bins": randomise.BINS, "patches": n_patches,
               "entropy_cap": float(np.log(min(n_patches, randomise.BINS))),
               "left_out": dict(c.left_out),
               "probability": None if c.probs is None else c.probs.T.tolist(),
               "prediction": None if c.top is None else [[said(t) for t in row] for row in c.top.T]}
    return Shown({"randomise": figure}, {"text": table + "\n\n" + text, "table": table}, numbers, s,
                 runner.spec.key, runner.notice)


# ---- predict, then test -------------------------------------------------------------------------------------

def cells_in(cells: tuple[tuple[int, int], ...], grid: tuple[int, int]) -> list[int]:
    """The patch indices of ``cells`` (row, column) on a (gh, gw) grid; ``ValueError`` naming ``patches`` for an
    empty set or a cell outside the grid."""
    gh, gw = grid
    if not cells:
        raise ValueError(f"`patches` (the patches you think the model needs) must name at least one patch as "
                         f"'row,column' on this {gh}×{gw} grid (rows 0 to {gh - 1}, columns 0 to {gw - 1}).")
    outside = [c for c in cells if not (0 <= c[0] < gh and 0 <= c[1] < gw)]
    if outside:
        raise ValueError(f"`patches`: {outside[0][0]},{outside[0][1]} is outside this {gh}×{gw} grid (rows 0 to "
                         f"{gh - 1}, columns 0 to {gw - 1}).")
    if len(cells) >= gh * gw:
        raise ValueError(f"`patches`: all {gh * gw} patches are marked; leave at least one out.")
    return [r * gw + c for r, c in cells]


def picker_payload(runner: Runner, rgb: np.ndarray, chosen=()) -> dict:
    """What the page's patch picker draws: the picture as the model sees it, its grid and the patches marked."""
    grid, picture = _input_grid(runner, rgb)
    return {"image": png_data_url(picture), "grid": list(grid), "patch": runner.spec.patch,
            "chosen": [list(c) for c in chosen], "model": runner.spec.key}


def render_choice(ch: faithful.Choice, picture: np.ndarray, grid: tuple[int, int], chosen: list[int],
                  names: list[str], randoms: list[str], mode: str, what: str) -> Image.Image:
    st = plotting.style()
    mask = np.zeros(grid[0] * grid[1], bool)
    mask[chosen] = True
    small = np.asarray(Image.fromarray(picture).resize(plotting.panel_size(*picture.shape[:2], 240), Image.BILINEAR))
    marked = plotting.panels([plotting.heat_overlay(small, mask.reshape(grid).astype(float), "cividis", 0.5,
                                                    mask.reshape(grid))],
                             [f"your {len(chosen)} patch{'es' if len(chosen) != 1 else ''}"], "your choice",
                             cols=1, panel_px=240)
    shown = {"whole picture": ch.full, "your choice": ch.chosen} | {k: ch.others[k] for k in names}
    shown["random (mean)"] = float(np.mean([ch.others[r] for r in randoms]))
    width = (st.max_width - marked.width - 90) / plotting.DPI  # the chart's margins come on top
    with plotting.figure(1, 1, figsize=(width, min(st.max_height, 90 + 52 * len(shown)) / plotting.DPI)) as (fig, ax):
        keys = list(shown)[::-1]
        colours = [COLOURS.get(k.split(" (")[0], "#0072b2") if k != "whole picture" else "#000000" for k in keys]
        edges = [EDGES.get(k, c) for k, c in zip(keys, colours)]  # a light colour gets a black outline
        ax.barh([label_of(k) for k in keys], [shown[k] for k in keys], color=colours, edgecolor=edges)
        for i, k in enumerate(keys):
            ax.text(shown[k], i, f" {shown[k]:.2f}", va="center")
        ax.set_xlim(0, max(1.0, max(shown.values())) * 1.35)
        ax.set_xlabel("score" if "cosine" in what else "probability")
        ax.set_title(f"{'taken out' if mode == 'drop' else 'kept alone'}")
        chart = plotting.to_image(fig)
    both = compose([marked, chart], beside=True)
    return plotting.described(both, f"Your {len(chosen)} patches {'taken out' if mode == 'drop' else 'kept alone'}: "
                              f"{what} {ch.chosen:.3f} (the whole picture {ch.full:.3f}); "
                              + "; ".join(f"{label_of(k)} {v:.3f}" for k, v in ch.others.items()) + ".")


@record(declared.PREDICT, tab="classify", figures=("choice",), bundle=True,
        doc="Predict, then test: the patches given (rows and columns of the model's grid) are taken out of the "
            "sequence (mode 'drop') or kept alone ('keep'); numbers.scores gives the score with them and with the "
            "same number of patches ranked highest by each map (" + maps_in_words() + ") and by random orders "
            "('random 1', …); numbers.rank is your "
            "choice's place among the chart's bars: your choice, each map and the random orders' mean (1 = it "
            "mattered most), of numbers.of; numbers.beats_random how many of the random orders it beats; "
            "numbers.left_out why a map the model cannot have is missing.")
def show_predict(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The student's patches taken out (or kept alone), beside the same number of patches by each map."""
    runner = _runner(values, progress)
    s = settle(values)
    grid, picture = _input_grid(runner, rgb)
    chosen = cells_in(values["patches"], grid)
    keep = values["mode"] == "keep"
    ch = runner.analyse(faithful.ChoiceProbe(tuple(chosen), runner.spec.prefix, values["seeds"], keep,
                                             values["rank"]), rgb).value
    randoms = [k for k in ch.others if k.startswith("random ")]
    names = [k for k in ch.others if k not in randoms]
    what, name = _what(runner, ch.target, rgb)
    everyone = {"your choice": ch.chosen} | ch.others
    # ranked as the chart draws them: your choice, each map, the random orders' mean (the whole picture is the
    # yardstick, not a contender); dropping what the model needs lowers the score most, keeping it alone keeps
    # the score highest
    bars = {"your choice": ch.chosen} | {k: ch.others[k] for k in names} | {
        "random (mean)": float(np.mean([ch.others[r] for r in randoms]))}
    ranked = sorted(bars, key=lambda k: bars[k], reverse=keep)
    place = ranked.index("your choice") + 1
    beats = sum((ch.chosen > ch.others[r]) if keep else (ch.chosen < ch.others[r]) for r in randoms)
    verb = "taking them out" if not keep else "keeping only them"
    text = (f"With your {len(chosen)} patches {'taken out' if not keep else 'kept alone'}, the {what} goes from "
            f"{ch.full:.3f} to **{ch.chosen:.3f}**. Doing the same with the {len(chosen)} patches each map ranks "
            "highest: " + ", ".join(f"{label_of(k)} {ch.others[k]:.3f}" for k in names)
            + f"; random patches {bars['random (mean)']:.3f} on average. Your choice ranks **{place} of "
            f"{len(bars)}** among the chart's bars below the whole picture (your choice, the {len(names)} maps and "
            f"the random orders' mean; {verb}, 1 = the patches the prediction needed most), and it beats "
            f"{beats} of the {len(randoms)} random order{'s' if len(randoms) != 1 else ''}. "
            f"{left_out_words(ch.left_out)}{caveats('every score here')}")
    numbers = {"model": runner.spec.key, "score": what, "class": name or None, "full": ch.full,
               "patches": [list(c) for c in values["patches"]], "mode": values["mode"],
               "scores": everyone, "rank": place, "of": len(bars), "beats_random": beats, "grid": list(grid),
               "left_out": dict(ch.left_out)}
    figure = render_choice(ch, picture, grid, chosen, names, randoms, values["mode"], what)
    data = {"picker": picker_payload(runner, rgb, values["patches"])}
    return Shown({"choice": figure}, {"text": text}, numbers, s, runner.spec.key,
                 "\n\n".join(p for p in (runner.notice, shapes_only(runner.spec.key, rgb)) if p), data)
