"""What each view shows, from its declared settings (:mod:`vitviz.specs.views`) to figures, text and numbers.

Every view has one function, ``show_<view>(picture, values) -> Shown``: the page, the API, a downloaded bundle
and the command line all call it, so what a student sees, shares, downloads and scripts is one thing. ``values``
are checked settings (:meth:`vitviz.specs.state.View.check`); what a view had to change (the embedded model runs
at 64 px only; a layer past the model's depth) is in ``Shown.settled`` with the reason, next to the answer.
No gradio here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable

import numpy as np
from PIL import Image

from vitviz.specs.state import Settled


@dataclass
class Shown:
    """What one view shows for one set of settings.

    Attributes:
        figures: name -> figure (projector-sized PIL images; matplotlib ones keep a vector PDF in bundles).
        texts: name -> markdown shown beside the figures.
        numbers: what the figures show, as plain numbers (a bundle's numbers.json, the API's last answer).
        settled: the settings actually used, and why any differ from the ones asked for.
        model: the model actually shown (None for views without one).
        notice: a sentence that must stand next to the answer (a stand-in model, a photo shown to a model that
            knows only shapes); empty when there is nothing to warn about.
        data: name -> what a view drawn in the browser receives (render/browser.py), for the page only: not
            part of the API's answer or a bundle (they hold the figures and numbers of the same settings).
    """

    figures: dict[str, Image.Image] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)
    settled: Settled | None = None
    model: str | None = None
    notice: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def note(self) -> str:
        """The notice and the settings' reasons, as one paragraph (empty when there is nothing to say)."""
        parts = [self.notice] if self.notice else []
        reasons = [why for name, why in (self.settled.notes.items() if self.settled else ())
                   if not (name == "model" and self.notice)]  # a stand-in model's notice already says why
        if reasons:
            parts.append(" ".join(reasons))
        return "\n\n".join(parts)


def plain(value: Any) -> Any:
    """``value`` as plain JSON: numpy numbers and arrays as numbers and lists, tuples as lists, NaN and ±inf as None
    (JSON has no words for them), so every answer and every numbers.json is valid JSON."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_MODULES = {"patches": "patches", "toy": "patches", "patch_filters": "patches", "windows": "windows",
            "position_embeddings": "posembed", "rotary": "posembed", "relative_bias": "posembed",
            "attention": "attention", "explorer": "attention", "rollout": "attention",
            "attention_distance": "attention", "registers": "attention", "timeline": "attention",
            "compare_models": "attention",
            "inside_head": "heads", "feature_pca": "features",
            "classify": "classify", "relevance": "classify", "shuffle": "classify", "patch_size_tradeoff": "classify",
            "receptive_field": "compare", "translation": "compare", "data_efficiency": "compare",
            "hybrid_stages": "compare"}
"""Which module of this package shows which view."""


def shower(view: str) -> Callable[..., Shown]:
    """The ``show_<view>`` function of a declared view."""
    if view not in _MODULES:
        raise ValueError(f"Unknown view {view!r}; choose one of {sorted(_MODULES)}.")
    return getattr(import_module(f"vitviz.views.{_MODULES[view]}"), f"show_{view}")


def show(view: str, picture: np.ndarray | None, values: dict, progress: Callable | None = None,
         only: frozenset[str] | None = None) -> Shown:
    """What view ``view`` shows for ``picture`` (None for views without one) and checked settings ``values``;
    ``progress(fraction, message)`` hears about slow steps (a model loading); ``only`` names the figures wanted
    when not all of them are (a view that can skip work skips the rest). When the model that answered knows only
    vitviz's generated shapes and the picture is not one of its example scenes, the answer says so."""
    kwargs = {"progress": progress} | ({"only": only} if only is not None else {})
    shown = shower(view)(picture, values, **kwargs)
    settled = shown.settled
    if settled is not None and shown.model and settled.values.get("model") not in (None, shown.model):
        settled.use("model", shown.model, f"{settled.values['model']} cannot be loaded here.")  # the model used
    warning = shapes_only(shown.model, picture)
    if warning and warning not in shown.notice:
        shown.notice = f"{shown.notice}\n\n{warning}" if shown.notice else warning
        shown.numbers["notice"] = shown.notice
    return shown


def shapes_only(model: str | None, picture: np.ndarray | None) -> str:
    """The warning that goes with an answer of the embedded model (trained only on generated shapes) for a picture
    that is not one of its example scenes; empty otherwise."""
    from vitviz.models.runner import image_key
    from vitviz.specs.registry import CNN_OFFLINE_KEY, OFFLINE_KEY

    if model not in (OFFLINE_KEY, CNN_OFFLINE_KEY) or picture is None or image_key(picture) in _scene_keys():
        return ""
    if model == CNN_OFFLINE_KEY:
        return (f"**{CNN_OFFLINE_KEY} was trained only on generated shape scenes** like the four example scenes. "
                "On any other picture its gradients and its guesses are those of a shapes detector, not of a "
                "network that knows photos. Photos need ResNet-50 from the hub (online).")
    return (f"**{OFFLINE_KEY} was trained only on generated shape scenes** like the four example scenes. Unless "
            "this picture is one of them, its answer is the nearest of its six shape classes and where that guess "
            "looked, not what the picture holds; its percentages compare shapes only. Photos need a model from the "
            "hub (online): DINO ViT-S/8 for attention, ViT-B/16 for labels.")


@functools.lru_cache(maxsize=1)
def _scene_keys() -> frozenset[str]:
    """The example scenes as the app and the command line decode them."""
    from vitviz import assets
    from vitviz.core import images
    from vitviz.models.runner import image_key

    keys = set()
    for name in assets.example_names():
        if name.startswith("scene_"):
            path = assets.example(name)
            keys |= {image_key(images.load_rgb(path, side)) for side in (None, images.INTAKE_SHORT_SIDE)}
    return frozenset(keys)
