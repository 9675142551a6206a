"""The declared state of every view: what a person can set, with its range, default and link key.

Each tab is one main view (the tab's button, link and download) and the views in its accordions. A field shared
by several views of a tab (the picture, the model, the colormap) is one object: one control, one link key.
The app's controls, the link, the API's checks, ``params.json`` and the command line's flags all come from here
(:mod:`vitviz.specs.state`); each declaration becomes a view by its record beside its show function
(:func:`vitviz.views.shown.record`), which places it in a tab.
"""

from __future__ import annotations

from vitviz import assets
from vitviz.specs import registry
from vitviz.specs.state import Field, View

# ---- choice lists (kept here so that nothing heavy is needed to know them) -------------------------------------

PATCH_SIZES = (4, 8, 14, 16, 32)
FIT_POLICIES = {
    "crop": "resize the short side to the target, then cut the centre square",
    "pad": "resize the long side to the target, then pad the rest with grey",
    "stretch": "resize both sides to the target, ignoring the aspect ratio",
    "keep": "resize the short side to the target, then trim each side down to a multiple of the patch size",
}
"""Ways to make a picture fit a model, and what each does (shown under the control)."""
COLORMAPS = ("viridis", "cividis", "magma", "inferno", "plasma")
"""Colour-blind-safe sequential colormaps offered for maps."""
SINUSOIDAL = ("2D sinusoidal", "1D sinusoidal")
LEARNED = "learned: "
"""Prefix of a registry model's learned position table in the list of position embeddings."""
TIMELINE = "learned: vitviz tiny, training timeline"
RPB_FORMULA = "formula: each head penalises distance (not learned)"
"""The relative-bias table that needs no weights; the others are the registry's Swin models' learned tables."""
FUSIONS = ("mean", "max", "min")
STEPS = tuple(step for step, _ in assets.tiny_checkpoints())
"""Training steps of the embedded model's shipped checkpoints."""
MAX_DEPTH = max(s.depth for s in registry.REGISTRY.values() if s.task not in ("relative", "cnn"))
MAX_HEADS = max(s.heads for s in registry.REGISTRY.values() if s.task not in ("relative", "cnn"))


def position_sources() -> tuple[str, ...]:
    return SINUSOIDAL + (TIMELINE,) + tuple(LEARNED + k for k, s in registry.REGISTRY.items()
                                                      if s.task not in ("relative", "cnn"))


def relative_bias_sources() -> tuple[str, ...]:
    return (RPB_FORMULA,) + tuple(registry.keys("relative"))


def comparison_choices() -> tuple[str, ...]:
    """The attention models, then the offline model at each saved training step."""
    return tuple(registry.keys("attention")) + tuple(f"{registry.OFFLINE_KEY} @ step {s}" for s in STEPS)


def filter_models() -> tuple[str, ...]:
    return registry.own_first(registry.keys("attention") + registry.keys("classify"))


def _steps_text() -> str:
    return ", ".join(f"{i} = step {s}" for i, s in enumerate(STEPS))


# ---- the Patches tab ------------------------------------------------------------------------------------------

IMAGE = Field("image", "image", None, "picture")
PATCH = Field("patch", "choice", 16, "patch size P (pixels)", choices=PATCH_SIZES, link="patch")
RESOLUTION = Field("resolution", "int", 224, "input resolution (pixels, rounded down to a multiple of P)", 8, 640, 1,
                   link="res", cli=("--size",))
POLICY = Field("policy", "choice", "crop", "how the image is made to fit", choices=tuple(FIT_POLICIES), link="fit",
               info="; ".join(f"{k}: {v}" for k, v in FIT_POLICIES.items()))
MODEL_SIZE = Field("model_size", "choice", "ViT-B", "model size for the counts", choices=tuple(registry.VIT_SIZES),
                   link="size")
PATCHES = View("patches", "Patches", (IMAGE, PATCH, RESOLUTION, POLICY, MODEL_SIZE))

TOY = View("toy", "8×8 toy", (Field("step", "int", 1, "step of the walk-through (pixels → patches → vectors → "
                                     "embeddings → + position → [CLS] → position similarity)", 1, 7, 1, link="toy"),))
FILTERS = View("patch_filters", "patch filters", (
    Field("model", "choice", registry.OFFLINE_KEY, "model", choices=filter_models, link="filters"),))
WINDOWS = View("windows", "Swin windows", (
    IMAGE, PATCH, RESOLUTION, POLICY, MODEL_SIZE,
    Field("window", "int", 7, "window side M (patches)", 2, 14, 1, link="win"),
    Field("row", "int", 3, "query row", 0, 159, 1, link="win_row", follows="rows"),
    Field("col", "int", 5, "query column", 0, 159, 1, link="win_col", follows="cols")))

# ---- the Position-embeddings tab -----------------------------------------------------------------------------

PE_CMAP = Field("cmap", "choice", "viridis", "colormap", choices=COLORMAPS, link="pcmap")
POSITIONS = View("position_embeddings", "Position embeddings", (
    Field("source", "choice", "2D sinusoidal", "position embedding", choices=position_sources, link="pe"),
    Field("rows", "int", 14, "grid rows", 1, 32, 1, link="rows"),
    Field("cols", "int", 14, "grid columns", 1, 32, 1, link="cols"),
    Field("dim", "int", 64, "embedding size D (sinusoidal; a multiple of 4)", 8, 768, 4, link="dim", multiple=4),
    Field("kind", "choice", "cosine", "similarity", choices=("cosine", "dot"), link="sim"),
    Field("new_rows", "int", 20, "resample to rows", 1, 40, 1, link="rr"),
    Field("new_cols", "int", 20, "resample to columns", 1, 40, 1, link="rc"),
    Field("step", "int", max(len(STEPS) - 1, 0), "training timeline: checkpoint (0 = random initial weights)",
          0, max(len(STEPS) - 1, 0), 1, link="ckpt", info=_steps_text()),
    PE_CMAP))
ROTARY = View("rotary", "2D rotary encoding", (
    Field("dim", "int", 32, "size D (a multiple of 4)", 8, 128, 4, link="rope_d", multiple=4),
    Field("reach", "int", 6, "offsets shown (±)", 1, 12, 1, link="rope_r"),
    Field("base", "float", 100.0, "base of the frequencies", 10, 10000, 10, link="rope_b"),
    PE_CMAP))
RELATIVE_BIAS = View("relative_bias", "relative position bias", (
    Field("source", "choice", RPB_FORMULA, "bias table", choices=relative_bias_sources, link="rpb"),
    Field("window", "int", 7, "window side M", 2, 12, 1, link="rpb_m"),
    Field("heads", "int", 3, "heads (of the formula table)", 1, 8, 1, link="rpb_h"),
    Field("block", "int", 1, "block (1 = first)", 1, 12, 1, link="rpb_block", follows="layers"),
    Field("head", "int", 0, "head shown", 0, 23, 1, link="rpb_head", follows="heads"),
    Field("row", "int", 1, "query row", 0, 11, 1, link="rpb_row", follows="rows"),
    Field("col", "int", 2, "query column", 0, 11, 1, link="rpb_col", follows="cols"),
    PE_CMAP))

# ---- the Attention tab ------------------------------------------------------------------------------------------

ATT_MODEL = Field("model", "choice", "DINO ViT-S/8", "model", choices=lambda: tuple(registry.keys("attention")),
                  link="model")
SIDE = Field("resolution", "int", 224, "short side (pixels, rounded to the patch size)", 64, 512, 8, link="side",
             cli=("--size",))
KEEP = Field("keep", "float", 0.6, "keep this share of attention mass", 0.1, 0.95, 0.05, link="keep",
             cli=("--threshold",))
ALPHA = Field("alpha", "float", 0.6, "overlay opacity", 0.0, 1.0, 0.05, link="alpha")
CMAP = Field("cmap", "choice", "inferno", "colormap", choices=COLORMAPS, link="cmap")
DEVICE_MODEL = View("device_model", "the model for this device", (ATT_MODEL, SIDE))
"""What the page's "compute on this device" downloads for a model and short side (no picture: it stays on the
device)."""


FORWARD = View("forward_pass", "the forward pass", (
    IMAGE,
    Field("model", "choice", "ViT-B/16 (ImageNet-1k)", "model", choices=lambda: registry.own_first(
        registry.keys("classify") + registry.keys("attention")), link="fp_model"),
    Field("resolution", "int", 224, "short side (pixels, rounded to the patch size)", 64, 512, 8, link="fp_side",
          cli=("--size",)),
    Field("layer", "int", MAX_DEPTH, "layer the lens reads", 1, MAX_DEPTH, 1, link="fp_layer", follows="layers"),
    Field("cmap", "choice", "viridis", "colormap", choices=COLORMAPS, link="fp_cmap")))
ATTENTION = View("attention", "Attention", (
    IMAGE, ATT_MODEL, SIDE,
    Field("layer", "int", MAX_DEPTH, "layer (1 = first)", 1, MAX_DEPTH, 1, link="layer", follows="layers"),
    Field("head", "int", -1, "head (or the head mean)", 0, MAX_HEADS - 1, 1, link="head", words={"mean": -1},
          follows="heads"),
    KEEP, ALPHA, CMAP,
    Field("query", "cell", None, "pinned query patch (none: the class token)", link="query")))
ROLLOUT = View("rollout", "attention rollout", (
    IMAGE, ATT_MODEL, SIDE,
    Field("fusion", "choice", "mean", "rollout: fuse heads by", choices=FUSIONS, link="fusion"),
    Field("discard", "float", 0.0, "rollout: discard weakest share", 0.0, 0.9, 0.1, link="discard"),
    ALPHA, CMAP))
DISTANCE = View("attention_distance", "mean attention distance", (IMAGE, ATT_MODEL, SIDE))
REGISTERS = View("registers", "registers", (IMAGE, SIDE, ALPHA, CMAP))
TIMELINE_VIEW = View("timeline", "training timeline", (
    IMAGE, Field("step", "int", max(len(STEPS) - 1, 0), "checkpoint", 0, max(len(STEPS) - 1, 0), 1, link="tl",
                 info=_steps_text()), ALPHA, CMAP))
INSIDE_HEAD = View("inside_head", "inside one head", (
    IMAGE, ATT_MODEL, SIDE,
    Field("layer", "int", MAX_DEPTH, "layer", 1, MAX_DEPTH, 1, link="ih_layer", follows="layers"),
    Field("head", "int", 0, "head", 0, MAX_HEADS - 1, 1, link="ih_head", follows="heads"),
    Field("row", "int", 3, "query row", 0, 63, 1, link="ih_row", follows="rows"),
    Field("col", "int", 4, "query column", 0, 63, 1, link="ih_col", follows="cols"),
    Field("cls", "bool", False, "the [CLS] token as the query", link="ih_cls"),
    CMAP))
FEATURE_PCA = View("feature_pca", "patch-feature PCA", (
    IMAGE, ATT_MODEL, SIDE,
    Field("layer", "int", MAX_DEPTH, "tokens after layer", 1, MAX_DEPTH, 1, link="pca_layer", follows="layers")))
_PAIRS = comparison_choices()
_STEP_CHOICES = [c for c in _PAIRS if " @ step " in c]
COMPARE = View("compare_models", "two models", (
    IMAGE,
    Field("model_a", "choice", _STEP_CHOICES[len(_STEP_CHOICES) // 2] if _STEP_CHOICES else _PAIRS[0], "left model",
          choices=comparison_choices, link="pair_a"),
    Field("model_b", "choice", _STEP_CHOICES[-1] if _STEP_CHOICES else _PAIRS[-1], "right model", choices=comparison_choices,
          link="pair_b"),
    SIDE,
    Field("fraction", "float", 1.0, "layer, as a share of each model's depth", 0.1, 1.0, 0.05, link="pair_frac"),
    KEEP, CMAP))

# ---- the Classify tab -------------------------------------------------------------------------------------------

CLS_MODEL = Field("model", "choice", "ViT-B/16 (ImageNet-1k)", "model",
                  choices=lambda: tuple(registry.keys("classify")), link="classifier")
CLASSIFY = View("classify", "Classify", (IMAGE, CLS_MODEL))
RELEVANCE = View("relevance", "class-specific relevance", (
    IMAGE, CLS_MODEL, Field("rank", "choice", 1, "class: its place in the top 5", choices=(1, 2, 3, 4, 5),
                            link="rank")))
SHUFFLE = View("shuffle", "patch shuffling", (
    IMAGE, CLS_MODEL, Field("seed", "int", 0, "shuffle seed", 0, 2**31 - 1, 1, link="seed")))
TRADEOFF = View("patch_size_tradeoff", "patch-size trade-off", ())

# ---- Test the map (on the Classify tab) ---------------------------------------------------------------------------

TM_MODEL = Field("model", "choice", "ViT-B/16 (ImageNet-1k)", "model (test the map)",
                 choices=lambda: registry.own_first(registry.keys("classify") + registry.keys("attention")),
                 link="tm_model")
"""A classifier is scored by its class's probability; a model without classes (DINO) by the cosine similarity of
its final [CLS] to the whole picture's."""
TM_SEEDS = Field("seeds", "int", 3, "random orders (the baseline and its spread)", 1, 10, 1, link="tm_seeds")
TM_RANK = Field("rank", "choice", 1, "class tested: its place in the top 5", choices=(1, 2, 3, 4, 5), link="tm_rank")
MAP_NAMES = ("attention", "rollout", "relevance", "attnlrp", "legrad")
"""Every map the tests of the map rank the patches by (:data:`vitviz.analyses.maps.NAMES`), as link values."""
MAP_LABELS = {"attnlrp": "AttnLRP", "legrad": "LeGrad"}
"""How the page writes a map's name where it is not its key (the link, API and CLI keep the key)."""
DELETION = View("deletion", "test the map: deletion and insertion", (
    IMAGE, TM_MODEL, TM_RANK,
    Field("curves", "choice", "deletion", "curves", choices=("deletion", "insertion", "both"), link="tm_curves"),
    Field("points", "choice", 11, "points on each curve (every 10% or every 5%)", choices=(11, 21),
          link="tm_points"),
    TM_SEEDS,
    Field("regions", "int", 3, "occlusion: regions per side of the picture", 2, 8, 1, link="tm_regions")))
RANDOMISE = View("randomise", "test the map: randomise the weights", (
    IMAGE, TM_MODEL,
    Field("step", "int", 0, "step shown: 0 = trained, then the head, the final norm and the blocks from the top "
          "re-drawn", 0, MAX_DEPTH + 2, 1, link="tm_step", follows="steps",
          info="a model without classes has no head step; the last step has every block and the head random"),
    Field("draws", "int", 3, "random draws of the weights (each its own seed; the spread is shown)", 2, 10, 1,
          link="tm_draws"),
    Field("samples", "int", 3, "sMPRT: noisy copies of the picture each map is averaged over (the last noise-free)",
          2, 50, 1, link="tm_samples"),
    Field("map", "choice", "relevance", "map", choices=MAP_NAMES, link="tm_map", shown=MAP_LABELS),
    Field("cmap", "choice", "inferno", "colormap", choices=COLORMAPS, link="tm_cmap")))
REPORT = View("report", "test the map: report card", (
    IMAGE, TM_MODEL, TM_RANK,
    Field("baseline", "choice", "mean", "pixel test: what replaces the removed patches", choices=("mean", "road"),
          link="tm_baseline", info="mean: the picture's mean as it is at each step (quantus's RegionPerturbation); "
          "road: filled in from the neighbouring pixels with a little noise (ROAD's noisy linear imputation)"),
    Field("points", "choice", 5, "points on each curve (every 25%, 20% or 10%)", choices=(5, 6, 11),
          link="tm_report_points"),
    TM_SEEDS))
PREDICT = View("predict", "test the map: predict, then test", (
    IMAGE, TM_MODEL, TM_RANK,
    Field("patches", "cells", (), "the patches you think the model needs", link="tm_patches"),
    Field("mode", "choice", "drop", "what is done to them", choices=("drop", "keep"), link="tm_mode"),
    TM_SEEDS))

# ---- the ViT-vs-CNN tab ------------------------------------------------------------------------------------------

VS_VIT = Field("vit", "choice", "DINO ViT-S/8", "ViT (attention distance)",
               choices=lambda: tuple(registry.keys("attention")), link="vs_vit")
VS_CNN = Field("cnn", "choice", "ResNet-50 (ImageNet-1k)", "CNN", choices=lambda: tuple(registry.keys("cnn")),
               link="vs_cnn")
VS_CLASSIFIER = Field("classifier", "choice", "ViT-B/16 (ImageNet-1k)", "ViT classifier (shifts)",
                      choices=lambda: tuple(registry.keys("classify", timm_only=True)), link="vs_cls")
RECEPTIVE_FIELD = View("receptive_field", "ViT vs CNN: receptive field", (
    IMAGE, VS_VIT, VS_CNN,
    Field("resolution", "int", 224, "short side (pixels, both models)", 64, 384, 32, link="vs_side")))
TRANSLATION = View("translation", "shift the picture", (IMAGE, VS_CLASSIFIER, VS_CNN))
DATA_EFFICIENCY = View("data_efficiency", "data efficiency", (
    Field("train", "bool", True, "also show accuracy on the training scenes", link="de_train"),))
HYBRID_STAGES = View("hybrid_stages", "hybrid stages", (
    Field("side", "int", 224, "input side (pixels, a multiple of 32)", 64, 512, 32, link="hy_side", multiple=32),))
