"""What the Classify tab shows: top-5, where the class token looked, model facts, experiments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from vitviz.analyses import classify
from vitviz.analyses.attention import analyse, rollout
from vitviz.models import cache as models
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.specs.state import settle
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, nearest_shapes, record
from vitviz.views.attention import map_grid


@dataclass
class ClassifyView:
    top5: dict[str, float]
    maps: Image.Image
    facts: str


def render(loaded: Runner, rgb: np.ndarray, cmap: str = "inferno", alpha: float = 0.6) -> ClassifyView:
    """One forward gives the logits and the attention (last layer head mean and rollout)."""
    a = analyse(loaded, rgb, own_size=True)
    maps, seconds, picture = a.maps, a.seconds, a.fitted.image
    grid = maps.grid
    top5 = classify.top_k(maps.logits[0], loaded.labels)
    best = next(iter(top5))
    last, roll = maps.cls_map(maps.layers - 1), rollout(a, "mean")
    img = map_grid(picture, [last, roll],
                   ["last layer, head mean", "rollout (mean)"], f"Where [CLS] looked for “{best}”", cmap, alpha)
    peak = np.unravel_index(int(np.argmax(last)), last.shape)
    plotting.described(img, f"{plotting.alt_of(img)} Top class “{best}” at {top5[best]:.1%}; the last layer's "
                            f"head mean puts its most attention, {last.max() / max(last.sum(), 1e-12):.1%}, on patch "
                            f"({peak[0]}, {peak[1]}) of {grid[0]}×{grid[1]}.")
    side = picture.shape[0]
    macs = classify.macs_of(loaded, side, side)
    n = grid[0] * grid[1]
    dc = loaded.data_config
    facts = (f"**{loaded.spec.key}**, weights from {loaded.origin}\n\n"
             f"| fact | value |\n|---|---|\n"
             f"| parameters | {loaded.params / 1e6:.1f} M |\n"
             f"| tokens | {n} patches + {loaded.spec.prefix} prefix = {n + loaded.spec.prefix} |\n"
             f"| multiply-accumulates | {macs / 1e9:.2f} G |\n"
             f"| this forward on this machine (with attention recording) | {seconds * 1000:.0f} ms |\n"
             f"| preprocessing (from the checkpoint) | {dc['interpolation']} resize, crop_pct {dc['crop_pct']}, "
             f"{dc['input_size'][-1]} px, mean {tuple(round(m, 3) for m in dc['mean'])}, "
             f"std {tuple(round(s, 3) for s in dc['std'])} |")
    return ClassifyView(top5, img, facts)


def shuffle_markdown(r: classify.ShuffleResult) -> str:
    a, b = next(iter(r.top_original)), next(iter(r.top_shuffled))
    return (f"- with position embeddings: top class **{a}** ({r.top_original[a]:.1%}) becomes **{b}** "
            f"({r.top_shuffled[b]:.1%}) after shuffling; max |Δ logit| = **{r.diff_with_pos:.3f}**\n"
            f"- position embeddings removed: max |Δ logit| between original and shuffled = "
            f"**{r.diff_without_pos:.2e}**, zero up to float rounding: without positions the model "
            "cannot tell the patches' order apart")


def tradeoff_markdown(rows: tuple[tuple, ...], size: str = "ViT-S", resolution: int = 224) -> str:
    head = (f"{size} at {resolution}×{resolution} px (random weights: cost does not depend on them).\n\n"
            "| patch | tokens | parameters | attention entries per layer·head | MACs | CPU latency |\n"
            "|---|---|---|---|---|---|\n")
    body = "\n".join(f"| {p} | {t:,} | {q / 1e6:.1f} M | {a:,} | {m / 1e9:.2f} G | {s * 1000:.0f} ms |"
                     for p, t, q, a, m, s in rows)
    p8, p32 = rows[0], rows[-1]
    return (head + body + f"\n\nHalving the patch side quadruples the tokens, and attention entries grow with the "
            f"square of that: P = 8 has {p8[3] / p32[3]:.0f}× the attention entries of P = 32 and runs "
            f"{p8[5] / max(p32[5], 1e-9):.0f}× slower here, while the parameter count barely moves. Small patches "
            "buy spatial detail with compute, not with parameters.")


def render_relevance(loaded: Runner, rgb: np.ndarray, rank: int = 1, cmap: str = "inferno",
                     alpha: float = 0.6) -> tuple[Image.Image, str, dict]:
    """The class maps (relevance, AttnLRP, LeGrad) for the ``rank``-th class of the top 5 (1 = the top class),
    beside plain rollout, all from one probe (:class:`vitviz.analyses.relevance.ClassMapsProbe`): the figure, the
    text and the numbers (the class, and each map's top patch and its share, :func:`relevance.top_patch`)."""
    from vitviz.analyses import maps as made, relevance
    from vitviz.views.faithful import label_of

    x = loaded.preprocess(rgb)
    p = loaded.spec.patch
    grid = (x.shape[-2] // p, x.shape[-1] // p)
    rank = min(max(int(rank), 1), 5)
    c = loaded.run(relevance.ClassMapsProbe(loaded.spec.prefix, rank=rank), x)  # the class at this rank
    name = loaded.labels[c.target] if loaded.labels else f"class {c.target}"
    shown = [k for k in made.NEED_A_CLASS if k in c.maps] + ["rollout"]
    tops = {k: relevance.top_patch(c.maps[k], grid) for k in shown}
    titles = [f"{label_of(k)} for “{name}”" for k in shown[:-1]] + ["plain rollout (any class)"]
    picture, suptitle, bar = loaded.picture(x), f"Class {rank} of the top 5: “{name}”", "each map scaled to its own range"
    tile = plotting.grid_layout(picture.shape[:2], titles, suptitle, cmap, bar, cols=2).tile  # two by two
    small = np.asarray(Image.fromarray(picture).resize(tile, Image.BILINEAR))
    img = plotting.panels([plotting.heat_overlay(small, c.maps[k].reshape(grid), cmap, alpha) for k in shown],
                          titles, suptitle, cmap, bar, cols=2)
    said = {"relevance": "**Relevance** (Chefer, Gur and Wolf 2021) weighs every layer's attention by its gradient "
                         f"for **{name}**, keeps the positive part and multiplies the layers together.",
            "attnlrp": "**AttnLRP** (Achtibat et al. 2024) hands the score back from the output to the patches, "
                       "layer by layer, by rules that keep its total; a patch can get a negative share (evidence "
                       "against the class, the bottom of the colour scale).",
            "legrad": "**LeGrad** (Bousselham et al. 2025) reads the class's score after every block and averages, "
                      "over the layers, how much more attention to each patch would raise it.",
            "rollout": "**Plain rollout** multiplies the layers' attention and is the same whatever the class."}
    where = "; ".join(f"{label_of(k)} ({r}, {col}), {share:.1%}" for k, (r, col, share) in tops.items())
    missing = "".join(f" {label_of(k)} is not shown: {why}" for k, why in c.left_out.items())
    text = (" ".join(said.get(k, "") for k in shown) + f" Each map's top patch (row, column) and its share of the "
            f"map's positive total: {where}.{missing} None of them proves what the model used: each is one rule "
            "for dividing one score among the patches of one picture, the rules disagree with one another, and a "
            "patch can matter without lighting up. The tests of the map below ask the model itself.")
    numbers = {"class": name, "target": c.target, "grid": list(grid),
               "maps": {k: {"top": [r, col], "share": share} for k, (r, col, share) in tops.items()},
               "left_out": dict(c.left_out)}
    return img, text, numbers


# ---- the views of the Classify tab, from their declared settings ----------------------------------------------

@record(declared.CLASSIFY, tab="classify", bundle=True)
def show_classify(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The top 5, where the class token looked for the best one, and the model's facts."""
    runner = models.get_model(values["model"], progress)
    v = render(runner, rgb)
    x = runner.preprocess(rgb)
    top5 = nearest_shapes(v.top5, runner.spec.key, rgb)  # a photo to the shapes model: its nearest shapes, said
    numbers = {"model": runner.spec.key, "notice": runner.notice, "top5": top5, "input_size": list(x.shape[-2:]),
               "parameters": runner.params}
    return Shown({"maps": v.maps}, {"facts": v.facts}, numbers, settle(values), runner.spec.key, runner.notice)


@record(declared.RELEVANCE, tab="classify",
        doc="The class maps for the class at one place of the top 5, beside plain rollout, from one probe: "
            "relevance (Chefer et al. 2021), AttnLRP (Achtibat et al. 2024) and LeGrad (Bousselham et al. 2025); "
            "numbers.maps gives each map's top patch [row, column] and its share of the map's positive total, "
            "numbers.class the class explained, numbers.left_out why a map this model cannot have is missing.")
def show_relevance(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The class maps (relevance, AttnLRP, LeGrad) for the class at one place of the top 5, beside plain
    rollout."""
    runner = models.get_model(values["model"], progress)
    image, text, numbers = render_relevance(runner, rgb, values["rank"])
    return Shown({"relevance": image}, {"text": text}, {"model": runner.spec.key, "rank": values["rank"]} | numbers,
                 settle(values), runner.spec.key, runner.notice)


@record(declared.SHUFFLE, tab="classify")
def show_shuffle(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """The patches dealt out in a random order: the prediction with and without position embeddings."""
    runner = models.get_model(values["model"], progress)
    r = classify.shuffle_experiment(runner, rgb, values["seed"])
    h, w = r.scrambled.shape[:2]  # the model's input (64 px for the offline model): enlarged, patch edges kept
    picture = plotting.upscale(r.scrambled, plotting.display_scale(h, w, 384))
    plotting.described(picture, f"The picture's patches dealt out in a random order (seed {values['seed']}), "
                                f"{w}×{h} px, as the model sees it.")
    numbers = {"model": runner.spec.key, "diff_with_positions": r.diff_with_pos,
               "diff_without_positions": r.diff_without_pos,
               "top_original": nearest_shapes(r.top_original, runner.spec.key, rgb),
               "top_shuffled": nearest_shapes(r.top_shuffled, runner.spec.key, rgb)}
    return Shown({"shuffled": picture}, {"text": shuffle_markdown(r)}, numbers, settle(values), runner.spec.key,
                 runner.notice)


@record(declared.TRADEOFF, tab="classify")
def show_patch_size_tradeoff(_rgb: None, values: dict, progress=None) -> Shown:
    """The same ViT-S body with patches of 8, 16 and 32 pixels: tokens, parameters, MACs and time here."""
    rows = classify.patch_size_tradeoff()
    return Shown({}, {"text": tradeoff_markdown(rows)}, {"rows": [list(r) for r in rows]}, settle(values))
