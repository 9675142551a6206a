"""The Forward-pass view: one picture through the whole model, stage by stage, with its real tensors.

The diagram (HTML: each stage a disclosure a keyboard opens, with its shape, what each axis counts, a glimpse of its
values, its equation in words and a link to the view that explains it), the residual stream (each token's norm
per layer, the prefix tokens' beside the patches'; how much attention and the MLP change the token the head reads;
how close it is to its final value) and, for a model
with a head, the logit lens. All from one forward (:mod:`vitviz.analyses.forward`).
"""

from __future__ import annotations

import html
from types import SimpleNamespace
from urllib.parse import urlencode

import numpy as np
from PIL import Image

from vitviz.analyses.forward import ForwardPass, forward_pass, parts_of, prefix_kinds, stage_plan
from vitviz.core.images import Fitted
from vitviz.models import cache as models
from vitviz.models.parts import layer_scale_sizes
from vitviz.models.runner import Runner
from vitviz.render import plotting
from vitviz.render.browser import png_data_url
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.specs.state import settle
from vitviz.views.shown import Shown, nearest_shapes, record

IMAGE_KEY = "__vitviz_image__"
"""Where a link in the diagram names the picture (the page puts the picture's link name there)."""

LENS_WARNING = ("The logit lens is a probe, not how the model reasons: it reads an intermediate layer's tokens with "
                "the final norm, pooling and head, which were trained only on the last layer's output. Early layers "
                "were never meant to be read this way, so their guesses say what is already decodable, not what the "
                "model 'thinks' there. At the last layer the lens is the model's own computation, so its own "
                "prediction (equal up to float32 rounding).")

def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def entering_words(fp: ForwardPass) -> str:
    """What happens before block 1 for this model, in the ViT paper's notation and our words: which tokens are put
    in front, and which get a position embedding (registers get none in transformers' DINOv2; a timm model with
    ``no_embed_class`` adds them to the patches only)."""
    kinds, pos = list(fp.prefix_kinds), list(fp.pos_on_prefix)
    label = {"[CLS]": "[CLS]", "distillation": "the distillation token", "register": "register"}
    with_pos = [label[k] for k, p_ in zip(kinds, pos) if p_ and k != "register"]
    regs_with = sum(1 for k, p_ in zip(kinds, pos) if p_ and k == "register")
    regs_without = kinds.count("register") - regs_with
    with_pos += [f"the {regs_with} register{'s' if regs_with > 1 else ''}"] if regs_with else []
    without = [label[k] for k, p_ in zip(kinds, pos) if not p_ and k != "register"]
    without += [f"the {regs_without} register{'s' if regs_without > 1 else ''}"] if regs_without else []
    learned = [label[k] for k in dict.fromkeys(kinds) if k != "register"]
    learned += [f"{kinds.count('register')} register{'s' if kinds.count('register') > 1 else ''}"] \
        if "register" in kinds else []
    if not kinds:
        return "z₀ = x_p E + E_pos: a position embedding added to every patch token (this model has no [CLS])."
    words = f"z₀ = [x_class; x_p E] + E_pos: the learned {_and(learned)} put in front; a position embedding added to "
    words += _and(with_pos + ["every patch"]) + "."
    if without:
        one = len(without) == 1 and "registers" not in without[0]
        words += f" {_and(without)[0].upper()}{_and(without)[1:]} {'gets' if one else 'get'} none."
    return words


def stage_words(name: str, fp: ForwardPass) -> str:
    """What stage ``name`` computes, in the ViT paper's notation and our words, for this model."""
    reads = {"token": "[CLS] is what the head reads.",
             "distilled": "[CLS] and the distillation token are what the two heads read.",
             "cls+mean": "[CLS] and the mean of the patch tokens are what the head reads."}
    head = {"token": "one linear map from [CLS] to one score per class.",
            "distilled": "two linear maps, one from [CLS] and one from the distillation token; the model averages "
                         "their scores (as a distilled DeiT does when it is not training).",
            "cls+mean": "one linear map from [CLS] and the mean of the patch tokens, side by side, to one score per "
                        "class."}
    if name.startswith("block "):
        scales = getattr(fp, "layer_scale", ())
        if not scales:
            return ("z′ = MSA(LN(z)) + z, then z = MLP(LN(z′)) + z′: every token looks at every other (attention: "
                    "each head's weighted sum of values, the heads joined and projected back to the token width), "
                    "then each is transformed on its own (MLP); both add to the stream, never replace it.")
        i = int(name.split()[1]) - 1
        g1, g2 = scales[min(max(i, 0), len(scales) - 1)]
        return ("z′ = γ₁ ⊙ MSA(LN(z)) + z, then z = γ₂ ⊙ MLP(LN(z′)) + z′: every token looks at every other "
                "(attention: each head's weighted sum of values, the heads joined and projected back to the token "
                "width), then each is transformed on its own (MLP); both add to the stream, never replace it. "
                "γ₁ and γ₂ are LayerScale: learned scales, one per channel, that multiply what attention and the "
                f"MLP add before it joins the stream (in this block their mean size is {g1:.3g} and {g2:.3g}).")
    return {
        "image": "x ∈ ℝ^{C×H×W}: the picture (C = 3 colour channels), resized to the model's grid and normalised "
                 "per channel.",
        "patches, flattened": "x_p ∈ ℝ^{N×(P²·C)}: the picture cut into N non-overlapping P×P patches, each "
                              "flattened into one row of P·P·3 numbers.",
        "patch embeddings": "x_p E: one linear map E (the same for every patch) turns each row into a token of width "
                            "D; a stride-P convolution computes exactly this.",
        "tokens entering block 1": entering_words(fp),
        "final LayerNorm": "y = LN(z_L): the last block's tokens normalised once more. " + reads.get(
            fp.pool, "The head reads the mean of the patch tokens, taken from here."),
        "pooled: the mean of the patch tokens": "this model's head reads one vector: the mean of the patch tokens"
                                                + (" ([CLS] is not used)." if "[CLS]" in fp.prefix_kinds else "."),
        "LayerNorm after pooling": "that mean normalised once more (timm's fc_norm) before the head.",
        "head: logits": head.get(fp.pool, "one linear map from the pooled vector to one score per class."),
        "softmax: probabilities": "softmax turns the scores into probabilities that sum to 1.",
    }.get(name, "")


def explaining_link(stage: str, model: str, side: int, device: bool = False) -> str:
    """The link (``?…`` of this page) of the view that explains ``stage`` for this model and picture (``IMAGE_KEY``
    stands for the picture): the patches at the model's own patch size, its own learned filters and position table,
    the attention of its block, its own classifier. ``device``: for a picture that never left the device (no
    picture in the link; the Attention and Classify tabs computed on the device too)."""
    spec = registry.REGISTRY.get(model)
    if stage in ("image", "patches, flattened"):
        tab, extra = "patches", ({"patch": spec.patch} if spec and spec.patch in declared.PATCH_SIZES else {})
    elif stage == "patch embeddings":
        tab, extra = "patches", {"open": "patch_filters"} | (
            {"filters": model} if model in declared.filter_models() else {})
    elif stage == "tokens entering block 1":
        pe = declared.LEARNED + model
        tab, extra = "positions", ({"pe": pe} if pe in declared.position_sources() else {})
    elif stage in ("head: logits", "softmax: probabilities"):
        tab, extra = "classify", {"classifier": model}
    else:  # a block, the norms, the pooling: what attention did there
        tab, extra = "attention", ({"model": model, "side": side} if model in registry.keys("attention") else {})
        if stage.startswith("block "):
            extra["layer"] = stage.split()[1]
    picture = {} if tab == "positions" else {"image": IMAGE_KEY}  # a position table has no picture
    if device:
        picture = {"device": "1"} if tab in ("attention", "classify") else {}
    return "?" + urlencode({"tab": tab} | picture | extra)


def diagram(fp: ForwardPass, fitted: Fitted, model: str, side: int, cmap: str, self_supervised: bool = False) -> str:
    """The model as one diagram (HTML): each stage a ``<details>`` (Enter opens it) with its real shape, what each
    axis counts, a glimpse of its values, its equation in words and a link to the view that explains it."""
    rows = []
    for i, st in enumerate(fp.stages):
        words = stage_words(st.name, fp)
        if st.name == "image":
            glimpse = fitted.image
        elif st.glimpse.shape[0] == 1:  # logits or probabilities: the top values as a strip
            v = st.glimpse[0]
            top = np.sort(v)[::-1][:32]
            glimpse = plotting.colorize(top[None].repeat(4, 0), cmap)
        else:
            glimpse = plotting.colorize(st.glimpse, cmap)
        size = plotting.panel_size(*glimpse.shape[:2], 96)
        thumb = np.asarray(Image.fromarray(glimpse).resize(size, Image.NEAREST))
        shape = " × ".join(f"{n:,}" for n in st.shape)
        axes = "; ".join(f"{n:,} {a}" for n, a in zip(st.shape, st.axes))
        link = explaining_link(st.name, model, side)
        rows.append(
            f'<li class="vx-stage"><details><summary><span class="vx-step">{i + 1}</span> '
            f'<strong>{html.escape(st.name)}</strong> <code>{shape}</code>'
            f'<img src="{png_data_url(thumb)}" alt="{html.escape(st.name)}: a glimpse of its values" '
            f'width="{size[0]}" height="{size[1]}"></summary>'
            f'<p>{html.escape(axes)}.</p><p>{html.escape(words)}</p>'
            f'<p><a href="{html.escape(link)}">Open the view that explains it</a></p></details></li>')
    end = ("" if fp.probs is not None else
           f'<li class="vx-stage"><p>{html.escape(_no_head(fp, fp.stages[-1].shape[-1], self_supervised))}</p></li>')
    return (f'<ol class="vx-forward" aria-label="the forward pass of {html.escape(model)}, stage by stage">'
            + "".join(rows) + end + "</ol>")


def device_plan(runner: Runner, side: int, width: int) -> dict:
    """What the Forward-pass view computed on a device (``render/web/forward_device.js``) needs besides its graph's
    outputs: the stages (:func:`vitviz.analyses.forward.stage_plan`: name, shape with "H", "W", "N", "T" for the
    picture's sizes, what each axis counts), each with its equation in words and the link to the view that explains
    it; what the residual view follows; the prefix tokens; the lens's caveat, or why there is no lens. ``width``:
    the token width D."""
    p = runner.read(parts_of)
    prefix = runner.spec.prefix
    kinds = prefix_kinds(p, prefix)
    # what the words read of a forward pass: its pooling and prefix tokens, known before any picture
    known = SimpleNamespace(pool=p.pool, prefix_kinds=kinds, pos_on_prefix=p.pos_on_prefix, tracks=p.tracks,
                            layer_scale=runner.read(lambda m: layer_scale_sizes(parts_of(m))))
    plan = stage_plan(p, prefix, runner.spec.patch, width, len(runner.labels) if runner.labels else None)
    stages = [{"name": name, "shape": list(shape), "axes": list(axes), "words": stage_words(name, known),
               "link": explaining_link(name, runner.spec.key, side, device=True)} for name, shape, axes in plan]
    lens = lens_note(runner.spec, bool(runner.labels) and p.readout is not None)
    layer = declared.FORWARD["layer"]  # the lens's layer: the device's own control writes the link as this one does
    return {"stages": stages, "tracks": p.tracks, "prefix_kinds": list(kinds), "lens_note": lens,
            "layer": {"link": layer.link, "default": layer.default, "label": layer.label},
            "no_head": None if runner.labels else _no_head(known, width, is_self_supervised(runner.spec))}


def lens_note(spec, has_head: bool) -> str:
    """What the lens section says: the lens's caveat, or why a model without a head has no lens."""
    if has_head:
        return LENS_WARNING
    why = " (it learned without labels)" if is_self_supervised(spec) else ""
    return (f"{spec.key} has no classification head{why}, so there is nothing for a logit lens to read: the "
            "residual stream above is what its forward pass shows.")


def lens_reading(tops: list[dict[str, float]], final: dict[str, float]) -> str:
    """What the lens shows on this picture, from its own numbers: after which block the model's final answer is
    the lens's top class and stays so. ``tops``: per block, first to last, the lens's classes (name -> probability,
    most likely first); ``final``: the model's own, the same way."""
    answer = next(iter(final))
    firsts = [next(iter(t)) for t in tops]
    before = len(firsts)
    while before and firsts[before - 1] == answer:
        before -= 1
    if before == len(firsts):
        return (f"On this picture the lens's top class after the last block is not the final answer, “{answer}” "
                "(a tie, or float32 rounding).")
    if before == 0:
        return f"On this picture the final answer, “{answer}”, is the lens's top class from block 1 on."
    earlier = ", ".join(f"block {i + 1}: “{n}”" for i, n in enumerate(firsts[:before]))
    when = (f"only after the last block, {before + 1}" if before + 1 == len(firsts) else
            f"from block {before + 1} of {len(firsts)} on")
    return f"On this picture the final answer, “{answer}”, is the lens's top class {when} (before it, {earlier})."


def _no_head(fp, width: int, self_supervised: bool) -> str:
    """The diagram's last line for a model without a head (what its output is instead)."""
    how = ("it was trained without labels (self-supervised, as DINO is): " if self_supervised else
           "vitviz was given it without a classifier: ")
    return (f"No head. This model has no classification head; {how}its output is the final {fp.tracks} token, "
            f"{width:,} numbers that describe the picture (used to find similar pictures or to train a small "
            "classifier on top), not classes.")


def is_self_supervised(spec) -> bool:
    """Whether ``spec`` is one of the models known to have learned without labels (DINO, DINOv2): vitviz does not
    assume it of a model an operator added without a head."""
    return not spec.added and "dino" in spec.source.lower()


def render_residual(fp: ForwardPass, fitted: Fitted, model: str, cmap: str) -> Image.Image:
    """Each patch token's norm after the embedding and after every block, one map per layer (each on its own
    scale: the high-norm outlier tokens stand out wherever they appear)."""
    maps = [plotting.colorize(n.reshape(fp.grid), cmap) for n in fp.norms]
    titles = ["embedding"] + [f"block {i}" for i in range(1, fp.layers + 1)]
    titles = [f"{t}\nmax {n.max():.1f}" for t, n in zip(titles, fp.norms)]
    image = plotting.panels(maps, titles, "each patch token's norm, layer by layer", cmap=cmap,
                            bar_label="token norm (each map on its own scale)", cols=min(5, len(maps)), panel_px=120)
    outliers = [int((n > 3 * np.median(n)).sum()) for n in fp.norms]
    return plotting.described(image, f"Token norms per layer for {model}: largest "
                              + ", ".join(f"{t.splitlines()[0]} {n.max():.1f}" for t, n in zip(titles, fp.norms))
                              + f"; tokens over 3× the median: {', '.join(map(str, outliers))}.")


def render_updates(fp: ForwardPass, model: str) -> Image.Image:
    """Per block: how much attention and the MLP change the token the head reads (relative size of what they add),
    how close it already is to its last value (cosine), and every prefix token's norm beside the patch tokens'
    (a register or [CLS] far above the patches is a high-norm outlier, as DINOv2's registers are)."""
    who = fp.tracks
    layers = np.arange(1, fp.layers + 1)
    rows = 3 if fp.prefix else 2
    with plotting.figure(rows, 1, figsize=(plotting.fig_width(7.0), 3.1 * rows)) as (fig, axes):
        a, b = axes[0], axes[1]
        a.plot(layers, fp.attn_update, "o-", color="#0072b2", label="attention")
        a.plot(layers, fp.mlp_update, "s--", color="#e69f00", label="MLP")
        a.set_xlabel("block")
        a.set_ylabel("relative size")
        a.set_title(f"what each block adds to {_short(who, 24)}")
        a.set_ylim(0, None)
        a.legend(loc="upper right")
        b.plot(np.arange(0, fp.layers + 1), fp.cls_cosine, "o-", color="#009e73")
        b.set_xlabel("after block (0 = the embedding)")
        b.set_ylabel("cosine")
        b.set_title(f"{_short(who, 24)} compared with its last value")
        b.set_ylim(min(0.0, float(fp.cls_cosine.min())), 1.05)
        if fp.prefix:
            c = axes[2]
            steps = np.arange(0, fp.layers + 1)
            c.fill_between(steps, fp.norms.min(1), fp.norms.max(1), color="#bbbbbb", label="patch tokens (range)")
            c.plot(steps, np.median(fp.norms, 1), ":", color="#555555", label="patch tokens (median)")
            marks = {"[CLS]": ("o-", "#0072b2"), "distillation": ("^-", "#d55e00"), "register": ("s--", "#cc79a7")}
            shown: set = set()
            for i, kind in enumerate(fp.prefix_kinds):
                style, colour = marks.get(kind, ("o-", "#000000"))
                name = {"[CLS]": "[CLS]", "distillation": "distillation token", "register": "registers"}.get(kind, kind)
                c.plot(steps, fp.prefix_norms[:, i], style, color=colour, label=None if name in shown else name)
                shown.add(name)
            c.set_xlabel("after block (0 = the embedding)")
            c.set_ylabel("token norm")
            c.set_title("the prefix tokens' norms beside the patches'")
            c.legend(loc="upper left", fontsize="small")
        for ax in axes:
            ax.xaxis.get_major_locator().set_params(integer=True)
        fig.subplots_adjust(hspace=0.75)
        image = plotting.to_image(fig)
    prefix = "" if not fp.prefix else "; norms of " + ", ".join(
        f"{k} {fp.prefix_norms[-1, i]:.1f}" for i, k in enumerate(fp.prefix_kinds)) + \
        f" after the last block, the patch tokens' median {np.median(fp.norms[-1]):.1f}"
    return plotting.described(image, f"Residual stream of {who} in {model}: attention adds "
                              + ", ".join(f"{v:.2f}" for v in fp.attn_update) + "; the MLP adds "
                              + ", ".join(f"{v:.2f}" for v in fp.mlp_update) + " of its size per block; cosine with "
                              "its last value after each block " + ", ".join(f"{v:.2f}" for v in fp.cls_cosine)
                              + prefix + ".")


def _short(name: str, n: int = 18) -> str:
    name = name.split(",")[0]
    return name if len(name) <= n else name[:n - 1] + "…"


def lens_classes(lens: np.ndarray, probs: np.ndarray, k: int = 5, most: int = 10) -> list[int]:
    """The classes the lens's figure shows: each layer's top ``k`` of the (L, C) ``lens``, then of the model's own
    (C,) ``probs``, in order of first appearance, at most ``most`` (ties by class index)."""
    chosen: list[int] = []
    for row in np.vstack([lens, probs[None]]):
        for i in np.argsort(-row, kind="stable")[:k]:
            if i not in chosen:
                chosen.append(int(i))
    return chosen[:most]


def render_lens(fp: ForwardPass, model: str) -> Image.Image:
    """Layer × class: the lens's probability of each class that is in the top 5 at some layer."""
    chosen = lens_classes(fp.lens, fp.probs)
    names = [_short(fp.labels[i]) if fp.labels else str(i) for i in chosen]
    m = fp.lens[:, chosen]
    image = plotting.heatmap(m, f"the logit lens on {_short(fp.tracks, 24)}", "class", "after block",
                             "probability", cmap="viridis", ticks=names,
                             yticks=[str(i) for i in range(1, fp.layers + 1)], annotate=m.shape[1] <= 8,
                             size=(8.0, 1.6 + 0.42 * fp.layers))
    return plotting.described(image, f"Logit lens of {model}: the top class after each block is "
                              + ", ".join(f"{i + 1}: {names[int(np.argmax(row))]} {row.max():.1%}"
                                          for i, row in enumerate(m)) + ".")


def render_lens_map(fp: ForwardPass, fitted: Fitted, layer: int, cmap: str, model: str) -> Image.Image:
    """Where the final class is already readable after block ``layer``: each patch token's lens probability of
    the model's final class, over the picture."""
    target = int(np.argmax(fp.probs))
    name = fp.labels[target] if fp.labels else str(target)
    heat = fp.lens_patches[layer - 1].reshape(fp.grid)
    shown = [fitted.image, np.asarray(plotting.heat_overlay(fitted.image, heat, cmap, 0.6))]
    image = plotting.panels(shown, ["the picture", f"P({_short(name, 24)}) read from each patch\nafter block "
                                    f"{layer}: up to {heat.max():.1%}"],
                            f"the final class, read after block {layer}", cmap=cmap,
                            bar_label="lens probability of the final class", cols=2, panel_px=250)
    return plotting.described(image, f"Lens map after block {layer}: each patch token's probability of {name}, "
                              f"mean {heat.mean():.1%}, largest {heat.max():.1%}.")


@record(declared.FORWARD, tab="forward", bundle=True, command="forward",
        sections={"": (), "residual": ("residual", "updates"), "lens": ("lens", "lens_map")},
        doc="The Forward-pass view: every stage of one forward with its real tensor shape (numbers.stages), the "
            "residual stream, and for a model with a head the logit lens (numbers.logit_lens: per layer, first "
            "to last, the top 5 classes of what the head reads ([CLS], or the pooled patches) read through the "
            "model's own final norm, pooling and head).")
def show_forward_pass(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    runner = models.get_model(values["model"], progress)
    s = settle(values)
    if runner.embedded:  # trained at one size
        s.only("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"], always=True))
    else:
        s.use("resolution", runner.side(values["resolution"]), runner.side_reason(values["resolution"]))
    fitted, fp = forward_pass(runner, rgb, values["resolution"])
    layer = s.within("layer", fp.layers, f"{runner.spec.key} has {fp.layers} layers.", lo=1)
    key, cmap, side = runner.spec.key, values["cmap"], s.values["resolution"]
    figures = {"residual": render_residual(fp, fitted, key, cmap), "updates": render_updates(fp, key)}
    stages = [{"name": st.name, "shape": list(st.shape), "axes": list(st.axes)} for st in fp.stages]
    numbers: dict = {"model": key, "stages": stages, "layer": layer,
                     "residual": {"attention_update": fp.attn_update.tolist(), "mlp_update": fp.mlp_update.tolist(),
                                  "cls_cosine_to_last": fp.cls_cosine.tolist(), "tracks": fp.tracks,
                                  "largest_token_norm": fp.norms.max(1).tolist(),
                                  "prefix_norms": {f"{k} {i}" if fp.prefix_kinds.count(k) > 1 else k:
                                                   fp.prefix_norms[:, i].tolist()
                                                   for i, k in enumerate(fp.prefix_kinds)}}}
    t = fp.stages[3].shape[0]
    text = (f"One forward of {key} on this picture: {fitted.grid[0]}×{fitted.grid[1]} = {fp.grid[0] * fp.grid[1]} "
            f"patches of {runner.spec.patch}×{runner.spec.patch} pixels become {t} tokens of width "
            f"{fp.stages[3].shape[1]}, which pass through {fp.layers} blocks.")
    texts = {"text": text}
    if fp.probs is not None:
        figures["lens"] = render_lens(fp, key)
        figures["lens_map"] = render_lens_map(fp, fitted, layer, cmap, key)
        numbers["logit_lens"] = [nearest_shapes(fp.top(row), key, rgb) for row in fp.lens]
        numbers["top5"] = nearest_shapes(fp.top(fp.probs), key, rgb)
    texts["lens"] = lens_note(runner.spec, fp.probs is not None)
    if fp.probs is not None:
        texts["lens"] += "\n\n" + lens_reading(numbers["logit_lens"], numbers["top5"])
    data = {"diagram": diagram(fp, fitted, key, side, cmap, self_supervised=is_self_supervised(runner.spec))}
    return Shown(figures, texts, numbers, s, key, runner.notice, data)
