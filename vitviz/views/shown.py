"""What a view answers (:class:`Shown`) and the one record that wires a view (:func:`record`).

A view is its declared settings (:class:`vitviz.specs.state.View`) and one function ``show(picture, values) ->
Shown``, joined by a record next to the function::

    @record(spec.PATCHES, tab="patches", bundle=True, runs_model=False)
    def show_patches(rgb, values, progress=None) -> Shown: ...

From the records (:data:`RECORDS`) come the app's endpoints (``/<name>``, and ``/bundle_<name>`` with
``bundle``), the tab the view sits in (an accordion of its own unless the tab lays it out), the command line's
``vitviz view <name>``, the bundles, the MCP tools (gradio's, from the endpoints) and the list of views in docs/using.md.
No gradio here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from PIL import Image

from vitviz.specs.state import Settled, View, link_keys


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
            parts.append(" ".join(dict.fromkeys(reasons)))  # a reason several settings share, said once
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


Show = Callable[..., "Shown"]
"""``show(picture or None, checked values, progress=None[, only=...]) -> Shown``."""


@dataclass(frozen=True)
class Record:
    """One view, wired once.

    Attributes:
        view: its declared settings (name, title, fields: controls, link keys, checks, CLI flags, params.json).
        show: the function that shows it.
        tab: the page's tab it sits in (``?tab=`` id).
        bundle: whether it has a 'Download this view' button and a ``/bundle_<name>`` endpoint.
        runs_model: whether it runs a model (its endpoint then queues in the model group).
        long: whether one request sends many forwards through the model (Test the map's deletion and randomised
            weights: a minute or more on a laptop's cores): its endpoint and panel then queue in a group of their
            own, two at a time (``serving.LONG_CONCURRENCY``), so that a class's long requests never take a place
            of the model group.
        api: whether it is an endpoint of its own (the explorer's page-only answer is not).
        figures: the names of its figures, in the order a panel of its own shows them.
        doc: what its endpoint says about it (the declaration's labels are added).
        command: a command-line command of its own (``vitviz <command>``), besides ``vitviz view <verb>``.
        sections: the parts of its panel a link can open (``?open=<section>``; ``""``: the panel as it opens) -> the
            figures each shows: a lesson's handout prints a step's section with these (none: the chain of stages
            its numbers hold); a view without them prints its first two figures.
    """

    view: View
    show: Show
    tab: str
    bundle: bool = False
    runs_model: bool = True
    long: bool = False
    api: bool = True
    figures: tuple[str, ...] = ()
    doc: str = ""
    name: str = ""
    command: str | None = None
    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def verb(self) -> str:
        """Its command-line name: ``vitviz view <verb>``."""
        return self.name.replace("_", "-")

    @property
    def needs_picture(self) -> bool:
        return any(f.kind == "image" for f in self.view.fields)


RECORDS: dict[str, Record] = {}
"""Every view by name, in the order their modules declare them (see :func:`record`)."""
VIEWS: dict[str, View] = {}
"""Every view with an endpoint of its own, by name (its endpoint is /name): its declared settings."""
LINK: dict[str, Any] = {}
"""Every key of the page's link and the one setting (a :class:`~vitviz.specs.state.Field`) it holds."""


def record(view: View, *, tab: str, name: str | None = None, **how: Any) -> Callable[[Show], Show]:
    """Register the decorated show function as view ``name`` (the declaration's name by default) in ``tab``;
    ``how`` sets the other fields of :class:`Record`. Two views of one name, or two settings on one link key,
    fail at import."""
    name = name or view.name

    def register(show: Show) -> Show:
        if name in RECORDS:
            raise ValueError(f"Two views are named {name!r}.")
        keys = link_keys([r.view for r in RECORDS.values()] + [view])  # raises for a key two settings would share
        RECORDS[name] = Record(view, show, tab, name=name, **how)
        if RECORDS[name].api:
            VIEWS[name] = view
        LINK.clear()
        LINK.update(keys)
        return show

    return register


def shapes_only(model: str | None, picture: np.ndarray | None) -> str:
    """The warning that goes with an answer of the embedded model (trained only on generated shapes) for a picture
    that is not one of its example scenes; empty otherwise."""
    from vitviz.models.runner import image_key
    from vitviz.specs.registry import CNN_OFFLINE_KEY, OFFLINE_KEY

    if model not in (OFFLINE_KEY, CNN_OFFLINE_KEY) or picture is None or image_key(picture) in scene_keys():
        return ""
    if model == CNN_OFFLINE_KEY:
        return (f"**{CNN_OFFLINE_KEY} was trained only on generated shape scenes** like the four example scenes. "
                "On any other picture its gradients and its guesses are those of a shapes detector, not of a "
                "network that knows photos. Photos need ResNet-50 from the hub (online).")
    return (f"**{OFFLINE_KEY} was trained only on generated shape scenes** like the four example scenes. Unless "
            "this picture is one of them, its answer is the nearest of its six shape classes and where that guess "
            "looked, not what the picture holds; its percentages compare shapes only. Photos need a model from the "
            "hub (online): DINO ViT-S/8 for attention, ViT-B/16 for labels.")


def nearest_shapes(top: dict[str, float], model: str | None, picture: np.ndarray | None) -> dict[str, float]:
    """Class names and probabilities, each name marked "nearest shape: …" when a shapes-only model answers for a
    picture that is not one of its scenes (:func:`shapes_only`): not a label for this picture."""
    if not shapes_only(model, picture):
        return top
    return {f"nearest shape: {k}": p for k, p in top.items()}


@functools.lru_cache(maxsize=1)
def scene_keys() -> frozenset[str]:
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
