"""What the ViT-vs-CNN tab shows: receptive fields, shifts, data efficiency and hybrid stages, side by side.

The CNN side is timm's ResNet-50 online and vitviz's small CNN offline (trained on the same generated shapes as
the embedded ViT, so the same honesty rules apply); a stand-in says so next to the answer.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from vitviz.core import owned
from vitviz import assets
from vitviz.analyses import compare, efficiency
from vitviz.analyses.attention import analyse, distance
from vitviz.core import stages
from vitviz.core.lru import LRU
from vitviz.models import cache as models
from vitviz.models.runner import Runner, image_key
from vitviz.render import plotting
from vitviz.specs.state import settle
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record, shapes_only

VIT_COLOUR, CNN_COLOUR = "#0072b2", "#d55e00"
STAGE_COLOURS = ("#000000", "#e69f00", "#009e73", "#cc79a7", "#d55e00")


def _notices(*parts: str) -> str:
    return "\n\n".join(dict.fromkeys(p for p in parts if p))


# ---- receptive field ------------------------------------------------------------------------------------------

def render_reach(erf: compare.Erf, vit_distance: np.ndarray, cnn_side: tuple[int, int],
                 vit_side: tuple[int, int], vit_name: str, cnn_name: str) -> tuple[Image.Image, str]:
    """Both networks' reach against relative depth: the CNN's gradient-weighted mean distance per stage and its
    theoretical half-width, the ViT's mean attention distance per layer and the half-diagonal any patch reaches
    from layer 1. Pixels when both inputs have the same short side, else per cent of each one's short side."""
    same = min(cnn_side) == min(vit_side)
    scale_c = 1.0 if same else 100.0 / min(cnn_side)
    scale_v = 1.0 if same else 100.0 / min(vit_side)
    unit = "px" if same else "% of the short side"
    k = len(erf.labels)
    x_c = np.arange(1, k + 1) / k
    x_v = np.arange(1, len(vit_distance) + 1) / len(vit_distance)
    half_rf = (np.array(erf.rf) - 1) / 2 * scale_c
    half_diag = math.hypot(*vit_side) / 2 * scale_v
    with plotting.figure(figsize=(plotting.fig_width(7.2), 6.0)) as (fig, ax):
        ax.plot(x_c, erf.mean_distance() * scale_c, "s-", color=CNN_COLOUR, linewidth=3, markersize=10,
                label="CNN: effective (gradient)")
        ax.plot(x_c, half_rf, "s--", color=CNN_COLOUR, linewidth=2, markersize=6, alpha=0.8,
                label="CNN: theoretical (RF / 2)")
        ax.plot(x_v, vit_distance * scale_v, "o-", color=VIT_COLOUR, linewidth=3, markersize=9,
                label="ViT: mean attention distance")
        ax.axhline(half_diag, color=VIT_COLOUR, linestyle="--", linewidth=2, alpha=0.8,
                   label="ViT: reachable from layer 1")
        ax.set_ylim(0, max(half_diag, float(np.nanmax(erf.mean_distance() * scale_c))) * 1.1)
        ax.set_xlim(0, 1.05)
        ax.set_xlabel("depth (share of the network)")
        ax.set_ylabel(f"distance ({unit})")
        ax.set_title("How far each network looks")
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small", ncol=2)
        ax.grid(alpha=0.3)
        image = plotting.to_image(fig)
    words = (f"CNN ({cnn_name}) stages: " + ", ".join(f"{lab} {d:.1f} ({r:.0f} theoretical)" for lab, d, r in
                                                        zip(erf.labels, erf.mean_distance() * scale_c, half_rf))
             + f"; ViT ({vit_name}) layers: " + ", ".join(f"{d:.1f}" for d in vit_distance * scale_v) + f" {unit}.")
    return plotting.described(image, f"How far each network looks. {words}"), unit


def render_erf_maps(erf: compare.Erf, picture: np.ndarray, cnn_name: str) -> Image.Image:
    """The picture under each stage's gradient map (one colour scale per stage), the theoretical field outlined."""
    tiles, titles = [], []
    for lab, m, (cy, cx), rf, d in zip(erf.labels, erf.maps, erf.centres, erf.rf, erf.mean_distance()):
        heat = np.sqrt(m / max(float(m.max()), 1e-20))  # square root: the faint tails stay visible
        img = Image.fromarray(plotting.overlay(picture, heat, "viridis", 0.75, 0.0, 1.0))
        draw = ImageDraw.Draw(img)
        half = (rf - 1) / 2
        draw.rectangle([cx - half, cy - half, cx + half, cy + half], outline=(255, 255, 255), width=1)
        tiles.append(np.asarray(img))
        titles.append(f"{lab}: {d:.1f} px\n(field {rf} px)")
    return plotting.panels(tiles, titles, f"{cnn_name}: gradient of the centre unit, per stage", cmap="viridis",
                           bar_label="√|gradient| (per stage)", cols=5, panel_px=220)


@record(declared.RECEPTIVE_FIELD, tab="vitcnn", bundle=True)
def show_receptive_field(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The CNN's effective receptive field per stage beside the ViT's mean attention distance per layer."""
    vit = models.get_model(values["vit"], progress)
    cnn = models.get_model(values["cnn"], progress)
    s = settle(values)
    side = values["resolution"]
    erf, run = compare.receptive_fields(cnn, rgb, side)
    a = analyse(vit, rgb, side)
    reasons = " ".join(dict.fromkeys(r.side_reason(side) for r in (vit, cnn) if r.side_reason(side)))
    if vit.embedded and cnn.embedded and a.resolution == run.resolution:  # both run at one size only
        s.only("resolution", a.resolution, " ".join(dict.fromkeys(r.side_reason(side, always=True)
                                                                  for r in (vit, cnn))))
    elif reasons:  # one value used when both models agree on it; otherwise each one's, said in the note
        s.use("resolution", a.resolution if a.resolution == run.resolution else side, reasons)
    if reasons:
        s.notes["resolution"] = reasons
    cnn_side, vit_side = run.fitted.image.shape[:2], a.fitted.image.shape[:2]
    vit_distance = distance(a).mean(1)  # every query of every layer, from the kept queries and keys
    reach, unit = render_reach(erf, vit_distance, cnn_side, vit_side, vit.spec.key, cnn.spec.key)
    maps = render_erf_maps(erf, run.fitted.image, cnn.spec.key)
    widths = erf.width(0.9)
    w = cnn_side[1]
    rows = "\n".join(f"| {lab} | {st} | {rf} | {d:.1f} | {wd:.0f} ({wd / w:.0%}) |" for lab, st, rf, d, wd in
                     zip(erf.labels, erf.strides, erf.rf, erf.mean_distance(), widths))
    last_share = widths[-1] / w
    text = (
        f"**CNN: {cnn.spec.key}** at {cnn_side[1]}×{cnn_side[0]} px. Each stage's unit at the centre is traced back "
        "to the pixels (the gradient of its output, summed over channels, after Luo et al. 2016). Its theoretical "
        "field is every pixel some path of kernels reaches; most of the gradient stays near the middle of it.\n\n"
        f"| stage | stride | theoretical field (px) | mean distance (px) | width holding 90% (share of width) |\n"
        f"|---|---|---|---|---|\n{rows}\n\n"
        f"The last stage's 90% width here is {widths[-1]:.0f} px, {last_share:.0%} of the picture's width (the "
        "teaching texts quote about a quarter of the image width for a trained ResNet-50).\n\n"
        f"**ViT: {vit.spec.key}** at {vit_side[1]}×{vit_side[0]} px. Its mean attention distance (attention-weighted "
        f"distance from each query patch to the patches it attends to, head mean) runs from "
        f"{vit_distance[0]:.1f} px in layer 1 to {vit_distance[-1]:.1f} px in layer {len(vit_distance)}. Any patch "
        "can reach any other from the first layer: locality is something a ViT may learn, a CNN has it built in."
        + ("" if unit == "px" else "\n\nThe two models ran at different sizes, so the chart shows distances as a "
                                   "share of each one's short side."))
    numbers = {
        "vit": vit.spec.key, "cnn": cnn.spec.key, "cnn_input": list(cnn_side), "vit_input": list(vit_side),
        "cnn_stages": [{"stage": lab, "stride": st, "theoretical_rf_px": rf, "erf_mean_distance_px": d,
                        "erf_width90_px": wd} for lab, st, rf, d, wd in
                       zip(erf.labels, erf.strides, erf.rf, erf.mean_distance(), widths)],
        "vit_mean_attention_distance_px": vit_distance,
    }
    notice = _notices(vit.notice, cnn.notice, shapes_only(cnn.spec.key, rgb), shapes_only(vit.spec.key, rgb))
    numbers["notice"] = notice
    return Shown({"reach": reach, "maps": maps}, {"text": text}, numbers, s, vit.spec.key, notice)


# ---- translation ----------------------------------------------------------------------------------------------

_shift_cache: LRU[tuple] = owned.keep("vitcnn.shifts", "results", LRU(16), "the shift experiment per model and picture")


def shifts_for(runner: Runner, rgb: np.ndarray, shifts: list[int], vit: bool) -> compare.Shifts:
    """The shift experiment for ``runner`` on ``rgb`` (its own preprocessing), kept for the next request."""
    key = (runner.spec.key, runner.weights_id, image_key(rgb), tuple(shifts), vit)
    return _shift_cache.get_or_make(key, lambda: compare.shift_experiment(runner, runner.preprocess(rgb), shifts,
                                                                          vit))


def render_shift_errors(cnn: compare.Shifts, vit: compare.Shifts, patch: int) -> Image.Image:
    """Relative change of each map against the unshifted map moved along, per shift."""
    with plotting.figure(figsize=(plotting.fig_width(7.2), 5.2)) as (fig, ax):
        for i, (lab, st) in enumerate(zip(cnn.labels, cnn.strides)):
            e = cnn.errors[i]
            if np.all(np.isnan(e)):
                continue
            ax.plot(cnn.shifts, e, "s-", color=STAGE_COLOURS[i % 5], linewidth=2, markersize=6,
                    label=f"CNN {lab} (stride {st})")
        ax.plot(vit.shifts, vit.errors[0], "o-", color=VIT_COLOUR, linewidth=3, markersize=8,
                label=f"ViT patch tokens (P = {patch})")
        for m in range(0, int(cnn.shifts.max()) + 1, patch):
            ax.axvline(m, color="grey", linestyle=":", linewidth=1.5)
        ax.set_xlabel("shift to the right (pixels)")
        ax.set_ylabel("relative change")
        ax.set_title("Moved along, or changed?")
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize="small")
        ax.grid(alpha=0.3)
        return plotting.to_image(fig)


def render_stability(cnn: compare.Shifts, vit: compare.Shifts, cnn_labels: list[str], vit_labels: list[str],
                     cnn_name: str, vit_name: str) -> Image.Image:
    """Probability of the unshifted picture's top class at each shift, for both models."""
    with plotting.figure(figsize=(plotting.fig_width(7.2), 4.8)) as (fig, ax):
        for r, colour, marker, name, labels in ((cnn, CNN_COLOUR, "s", cnn_name, cnn_labels),
                                               (vit, VIT_COLOUR, "o", vit_name, vit_labels)):
            p, same = r.stability(), r.same_top()
            ax.plot(r.shifts, p, "-", color=colour, linewidth=2.5)
            ax.plot(r.shifts[same], p[same], marker, color=colour, markersize=9,
                    label=f"{name}: “{_label(labels, r.top())}”")
            ax.plot(r.shifts[~same], p[~same], marker, color=colour, markersize=9, markerfacecolor="white",
                    markeredgewidth=2)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("shift to the right (pixels)")
        ax.set_ylabel("probability of that class")
        ax.set_title("Is the answer stable? (hollow: top class changed)")
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small")
        ax.grid(alpha=0.3)
        image = plotting.to_image(fig)
    words = "; ".join(
        f"{name} keeps “{_label(labels, r.top())}” at {int(r.same_top().sum())} of {len(r.shifts)} shifts, its "
        f"probability from {r.stability().min():.0%} to {r.stability().max():.0%}"
        for r, name, labels in ((cnn, cnn_name, cnn_labels), (vit, vit_name, vit_labels)))
    return plotting.described(image, f"{plotting.alt_of(image)} {words}.")


def _most(errors: np.ndarray, shifts: list[int], stride: int, divides: bool) -> float:
    """The largest error over the shifts that ``stride`` divides (or does not); NaN when there is none to show."""
    picked = errors[[i for i, d in enumerate(shifts) if (d % stride == 0) == divides]]
    picked = picked[~np.isnan(picked)]
    return float(picked.max()) if len(picked) else float("nan")


def _label(labels: list[str] | None, i: int) -> str:
    return labels[i] if labels and i < len(labels) else f"class {i}"


def _first_map_words(c: compare.Shifts, shifts: list[int]) -> str:
    """What the CNN's first compared map shows: exact at every shift when its stride is 1 (vitviz's small CNN),
    else exact only at the shifts its stride divides (ResNet-50's first map is after the max pool, stride 4)."""
    label, stride, e = c.labels[0], c.strides[0], c.errors[0]
    if stride == 1:
        return (f"Its stride-1 {label} shows it exactly (largest change {compare.nice(float(np.nanmax(e)))} over "
                "all shifts).")
    return (f"Its first map, the {label}, already has stride {stride}: it moves along exactly only when the shift "
            f"is a multiple of {stride} (largest change {compare.nice(_most(e, shifts, stride, True))} at those "
            f"shifts, {compare.nice(_most(e, shifts, stride, False))} at the others).")


@record(declared.TRANSLATION, tab="vitcnn", bundle=True)
def show_translation(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Shift the picture by 0 … 2P pixels: the CNN's maps move along, the ViT's patch tokens only at multiples of P."""
    vit = models.get_model(values["classifier"], progress)
    cnn = models.get_model(values["cnn"], progress)
    p = vit.spec.patch
    shifts = list(range(2 * p + 1))
    if progress:
        progress(0.6, f"{len(shifts)} shifted copies through both models")
    c = shifts_for(cnn, rgb, shifts, vit=False)
    v = shifts_for(vit, rgb, shifts, vit=True)
    errors = render_shift_errors(c, v, p)
    stability = render_stability(c, v, cnn.labels, vit.labels, cnn.spec.key, vit.spec.key)
    stage_rows = "\n".join(f"| CNN {lab} | {st} | {compare.nice(_most(e, shifts, st, True))} | "
                           f"{compare.nice(_most(e, shifts, st, False))} |"
                           for lab, st, e in zip(c.labels, c.strides, c.errors))
    text = (
        f"The picture (as each model preprocesses it) moves right by 0 to {2 * p} pixels; the strip it uncovers is "
        "filled with the picture's own mirror image. Each map is compared with the unshifted map moved along by the "
        "same amount, only where the units' receptive fields stay inside the picture.\n\n"
        f"CNN: {cnn.spec.key}; ViT: {vit.spec.key}.\n\n"
        "| map | stride (px) | largest change, shifts the stride divides | largest change, other shifts |\n"
        f"|---|---|---|---|\n{stage_rows}\n| ViT patch tokens | {p} | "
        f"{compare.nice(_most(v.errors[0], shifts, p, True))} | "
        f"{compare.nice(_most(v.errors[0], shifts, p, False))} |\n\n"
        f"A convolution is equivariant: shift the input and its output shifts. {_first_map_words(c, shifts)} "
        "Each stride-2 step keeps it only "
        "for shifts the accumulated stride divides: a map can only move by whole cells. The ViT's patch tokens "
        f"(straight after the patch embedding, before position embeddings) move by whole tokens when the shift is a "
        f"multiple of P = {p}; for any other shift every patch holds different pixels and its token changes. "
        "A stage marked — had no unit whose field stayed inside the picture.\n\n"
        f"Top class kept at {int(c.same_top().sum())} of {len(shifts)} shifts by the CNN and "
        f"{int(v.same_top().sum())} of {len(shifts)} by the ViT.")
    numbers = {
        "classifier": vit.spec.key, "cnn": cnn.spec.key, "shifts": shifts, "patch": p,
        "cnn_errors": {lab: e for lab, e in zip(c.labels, c.errors)}, "cnn_strides": c.strides,
        "vit_token_errors": v.errors[0],
        "cnn_top": _label(cnn.labels, c.top()), "cnn_top_probability": c.stability(),
        "cnn_same_top": c.same_top(), "vit_top": _label(vit.labels, v.top()),
        "vit_top_probability": v.stability(), "vit_same_top": v.same_top(),
    }
    notice = _notices(vit.notice, cnn.notice, shapes_only(cnn.spec.key, rgb), shapes_only(vit.spec.key, rgb))
    numbers["notice"] = notice
    return Shown({"errors": errors, "stability": stability}, {"text": text}, numbers, settle(values), vit.spec.key,
                 notice)


# ---- data efficiency ------------------------------------------------------------------------------------------

def interval_bars(accuracies: list[float], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(accuracies in %, (2, runs) error-bar lengths below and above them): the Wilson bounds, not ± a half-width."""
    y = 100 * np.asarray(accuracies, dtype=np.float64)
    bounds = 100 * np.array([efficiency.wilson(a, n) for a in accuracies]).reshape(-1, 2)
    return y, np.stack([y - bounds[:, 0], bounds[:, 1] - y])


def render_sweep(res: dict, train: bool) -> Image.Image:
    """Accuracy on scenes never trained on against the number of training scenes, both models (95% Wilson
    intervals, drawn as their two bounds: at 100% the bar runs down from 100, never above it)."""
    n = res["test_scenes"]
    with plotting.figure(figsize=(plotting.fig_width(7.2), 5.2)) as (fig, ax):
        for kind, colour, marker, name in (("cnn", CNN_COLOUR, "s", "small CNN"), ("vit", VIT_COLOUR, "o", "tiny ViT")):
            runs = sorted((r for r in res["runs"] if r["model"] == kind), key=lambda r: r["scenes"])
            x = [r["scenes"] for r in runs]
            y, err = interval_bars([r["test_accuracy"] for r in runs], n)
            ax.errorbar(x, y, yerr=err, fmt=marker + "-", color=colour, linewidth=3, markersize=9, capsize=5,
                        label=f"{name}: new scenes")
            if train:
                ax.plot(x, [100 * r["train_accuracy"] for r in runs], marker + ":", color=colour, linewidth=2,
                        markersize=6, markerfacecolor="white", label=f"{name}: its training scenes")
        ax.set_xscale("log")
        ax.set_xticks([r["scenes"] for r in res["runs"] if r["model"] == "cnn"])
        ax.set_xticklabels([f"{r['scenes'] // 1000}k" for r in res["runs"] if r["model"] == "cnn"])
        ax.axhline(100 / 6, color="grey", linestyle=":", linewidth=1.5)
        ax.text(res["runs"][0]["scenes"], 100 / 6 + 1.5, "chance", color="#555555", fontsize="small")
        ax.set_ylim(0, 105)
        ax.set_xlabel("training scenes")
        ax.set_ylabel("accuracy (%)")
        ax.set_title("Same budget, more data")
        ax.legend(frameon=False, loc="lower right", fontsize="small")
        ax.grid(alpha=0.3)
        image = plotting.to_image(fig)
    words = "; ".join(f"{r['model'].upper()} on {r['scenes']:,} scenes: {r['test_accuracy']:.1%} of new scenes"
                      for r in sorted(res["runs"], key=lambda r: (r["scenes"], r["model"])))
    return plotting.described(image, f"{plotting.alt_of(image)} {words}.")


def verdict(res: dict) -> tuple[str, list[dict]]:
    """In words, what the sweep shows (:func:`vitviz.analyses.efficiency.leads` per size)."""
    rows = efficiency.leads(res)
    sizes = [r["scenes"] for r in rows]
    leads = [r["leads"] for r in rows]
    if "ViT" in leads and "CNN" in leads and leads.index("CNN") < leads.index("ViT"):
        size = sizes[leads.index("ViT")]
        words = f"The ViT overtakes the CNN at {size:,} scenes: the crossover appears at this scale."
    elif all(lead == "CNN" for lead in leads):
        words = (f"The CNN leads at every size, from {sizes[0]:,} to {sizes[-1]:,} scenes, but the gap narrows from "
                 f"{-100 * rows[0]['gap']:.1f} to {-100 * rows[-1]['gap']:.1f} percentage points: no crossover at "
                 "this scale.")
    else:
        last = rows[-1]
        words = (f"The CNN leads where data are scarce; at {last['scenes']:,} scenes the gap is "
                 f"{100 * last['gap']:+.1f} "
                 f"points (ViT minus CNN), {'within' if last['leads'] == 'neither' else 'beyond'} the noise: "
                 + ("the curves meet, but the ViT does not pull ahead here." if last["leads"] != "ViT" else
                    "the ViT ends ahead."))
    return words, rows


def fit_words(res: dict) -> str:
    """What the gap between training and test accuracy says about each model, at the smallest and largest size."""
    out = []
    for kind, name in (("cnn", "CNN"), ("vit", "ViT")):
        runs = sorted((r for r in res["runs"] if r["model"] == kind), key=lambda r: r["scenes"])
        small, large = runs[0], runs[-1]
        gap_small = small["train_accuracy"] - small["test_accuracy"]
        gap_large = large["train_accuracy"] - large["test_accuracy"]
        if gap_small > 0.1:
            text = (f"At {small['scenes']:,} scenes the {name} gets {small['train_accuracy']:.0%} of its training "
                    f"scenes right but {small['test_accuracy']:.0%} of new ones: it memorised them.")
            if gap_large < 0.05 and large["train_accuracy"] < 0.95:
                text += (f" At {large['scenes']:,} it gets {large['train_accuracy']:.0%} of its training scenes "
                         "right, about as many as of new ones: with this budget of steps it runs short of training "
                         "before it runs short of data.")
            out.append(text)
        elif min(small["test_accuracy"], large["test_accuracy"]) > 0.98:
            out.append(f"The {name} gets nearly every new scene right from {small['scenes']:,} scenes on.")
    return " ".join(out)


@record(declared.DATA_EFFICIENCY, tab="vitcnn", bundle=True, runs_model=False)
def show_data_efficiency(_rgb: None, values: dict, progress=None) -> Shown:
    """The shipped sweep: both models' accuracy on new scenes against the number of training scenes."""
    res = assets.sweep_results()
    words, rows = verdict(res)
    n = res["test_scenes"]

    def acc(p: float) -> str:
        lo, hi = efficiency.wilson(p, n)
        return f"{p:.1%} ({100 * lo:.1f}–{100 * hi:.1f})"

    table = "\n".join(f"| {r['scenes']:,} | {acc(r['cnn'])} | {acc(r['vit'])} | {100 * r['gap']:+.1f} | "
                      f"±{100 * r['noise']:.1f} | {r['leads']} |" for r in rows)
    params = {r["model"]: r["parameters"] for r in res["runs"]}
    minutes = res["total_seconds"] / 60
    text = (
        f"vitviz trained a small CNN ({params['cnn'] / 1e6:.2f} M parameters) and a tiny ViT "
        f"({params['vit'] / 1e6:.2f} M, the offline ViT's architecture) on its generated shape scenes, with one "
        f"recipe: {res['steps']:,} steps of {res['batch']} scenes, the same augmentation and optimiser; only the "
        f"number of distinct training scenes changes. Accuracy is measured on {res['test_scenes']:,} scenes neither "
        f"ever saw (six classes: chance is 16.7%). The whole sweep took {minutes:.0f} minutes on "
        f"{res['torch_threads']} CPU threads (`python -m vitviz.embedded.sweep`; `--eval` re-measures the "
        "shipped weights).\n\n"
        "| training scenes | CNN (95% interval) | ViT (95% interval) | ViT − CNN (points) | noise of the "
        "difference (95%, points) | ahead |\n"
        f"|---|---|---|---|---|---|\n{table}\n\n"
        f"**What the curves show:** {words} {fit_words(res)}\n\n"
        "The convolution already assumes that nearby pixels belong together and that a pattern means the same "
        "wherever it appears, so the CNN needs few examples. The ViT has to learn those assumptions, from data and "
        "from training steps. The ViT paper saw "
        "ViTs pull ahead of strong ResNets only after pre-training on ImageNet-21k (about 14 million pictures) and "
        "JFT-300M (about 300 million); trained on ImageNet-1k alone (1.3 million), ViTs trailed. That is hundreds to "
        "thousands of times the data used here, on pictures far richer than these shapes, and far more compute.")
    numbers = {"runs": res["runs"], "rows": rows, "verdict": words, "steps": res["steps"],
               "total_seconds": res["total_seconds"], "test_scenes": res["test_scenes"]}
    return Shown({"sweep": render_sweep(res, values["train"])}, {"text": text}, numbers, settle(values))


# ---- hybrid stages --------------------------------------------------------------------------------------------

def _g(macs: float) -> str:
    return f"{macs / 1e9:.2f} G" if macs >= 1e8 else f"{macs / 1e6:.1f} M"


def render_stages(nets: list[stages.Network]) -> Image.Image:
    """MACs per stage, one row per network: convolution stages, attention stages (their q kᵀ and weighted-sum
    share hatched) and the head."""
    colours = {"conv": CNN_COLOUR, "attention": VIT_COLOUR, "head": "#999999"}
    with plotting.figure(figsize=(plotting.fig_width(7.6), 4.6)) as (fig, ax):
        for row, net in enumerate(nets):
            left = 0.0
            for s in net.stages:
                g = s.macs / 1e9
                ax.barh(row, g, left=left, color=colours[s.kind], edgecolor="white", linewidth=1.5)
                if s.attention_macs:
                    ax.barh(row, s.attention_macs / 1e9, left=left, color="none", edgecolor="black", hatch="//",
                            linewidth=0)
                left += g
            ax.text(left, row, f"  {_g(net.macs)}", va="center")
        ax.set_yticks(range(len(nets)))
        ax.set_yticklabels([n.name for n in nets])
        ax.invert_yaxis()
        ax.set_xlim(0, max(n.macs for n in nets) / 1e9 * 1.25)
        ax.set_xlabel("multiply-accumulates (G), stage after stage")
        ax.set_title(f"Where the compute goes at {nets[0].resolution} px")
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=CNN_COLOUR, label="convolution"),
                           Patch(color=VIT_COLOUR, label="attention block"),
                           Patch(facecolor="white", edgecolor="black", hatch="//", label="q·kᵀ and weights·v")],
                  frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize="small")
        ax.grid(alpha=0.3, axis="x")
        return plotting.to_image(fig)


def _head_words(s: stages.Stage) -> str:
    """A stage's heads over its layers in words: "12 heads × 12 layers", or "(6 + 6 × 12) heads" when they differ."""
    counts = s.heads_per_layer
    if len(set(counts)) == 1:
        return f"{counts[0]} heads × {len(counts)} layer{'s' if len(counts) > 1 else ''}"
    groups: list[list[int]] = []
    for c in counts:
        if groups and groups[-1][0] == c:
            groups[-1][1] += 1
        else:
            groups.append([c, 1])
    return "(" + " + ".join(f"{c}" if k == 1 else f"{c} × {k}" for c, k in groups) + ") heads"


@record(declared.HYBRID_STAGES, tab="vitcnn", bundle=True, runs_model=False)
def show_hybrid_stages(_rgb: None, values: dict, progress=None) -> Shown:
    """ViT-B/16, ResNet-50 and CoAtNet-0 stage by stage: grid, tokens, attention-matrix size and MACs."""
    side = values["side"]
    nets = stages.networks(side)
    lines = []
    for net in nets:
        for s in net.stages:
            att = (f"{s.attention_entries:,} × {_head_words(s)} = {s.attention_total:,}" if s.kind == "attention"
                   else "—")
            lines.append(f"| {net.name} | {s.name} | {s.side[0]}×{s.side[1]} | {s.tokens:,} | {att} | {_g(s.macs)} |"
                         f" {_g(s.attention_macs) if s.attention_macs else '—'} |")
    vit, resnet, coat = nets
    text = (
        "A CoAtNet-style hybrid keeps convolutions where the grid is large (cheap, local, with a CNN's built-in "
        "assumptions) and switches to attention once the grid is small enough for every position to look at every "
        "other. The counts come from the architecture alone; the tests check every stage against PyTorch's "
        "`FlopCounterMode` on timm's models.\n\n"
        "| network | stage | grid | tokens | attention matrices (entries per head × heads over the layers) | MACs | "
        "of which q·kᵀ and weights·v |\n|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
        f"At {side} px, ViT-B/16 needs {_g(vit.macs)} MACs, ResNet-50 {_g(resnet.macs)} and CoAtNet-0 "
        f"{_g(coat.macs)}. Only {_g(vit.attention_macs)} of the ViT's ({vit.attention_macs / vit.macs:.1%}) are the "
        "attention products themselves; the rest are the linear layers every token passes through. CoAtNet's "
        "first block of each attention stage still works at the width it receives, so it has half the heads of "
        "the blocks after it. A rough "
        "count that multiplies 197²·768 by 12 heads and 12 layers (4.3 G) counts each product head by head at "
        "the full width 768, where each head works on 64 channels. The quadratic term grows with the square of "
        f"the token count: at twice this side ({2 * side} px, four times the tokens) the ViT's attention products "
        f"are {_g(stages.vit(2 * side).attention_macs)} of {_g(stages.vit(2 * side).macs)}.")
    numbers = {"side": side, "networks": [
        {"name": n.name, "macs": n.macs, "attention_macs": n.attention_macs,
         "stages": [{"stage": s.name, "kind": s.kind, "grid": list(s.side), "tokens": s.tokens, "heads": s.heads,
                     "layers": s.layers, "heads_per_layer": list(s.heads_per_layer),
                     "attention_entries_per_head": s.attention_entries, "attention_entries": s.attention_total,
                     "macs": s.macs, "attention_macs": s.attention_macs} for s in n.stages]} for n in nets]}
    return Shown({"stages": render_stages(nets)}, {"text": text}, numbers, settle(values))
