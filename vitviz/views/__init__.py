"""What each view shows, from its declared settings (:mod:`vitviz.specs.views`) to figures, text and numbers.

Every view is one record (:func:`vitviz.views.shown.record`) beside its show function ``show(picture, values) ->
Shown``: the page, the API, a downloaded bundle and the command line all call it, so what a student sees, shares,
downloads and scripts is one thing. ``values`` are checked settings (:meth:`vitviz.specs.state.View.check`); what
a view had to change (the embedded model runs at 64 px only; a layer past the model's depth) is in
``Shown.settled`` with the reason, next to the answer. No gradio here.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
import pkgutil
from typing import Callable

import numpy as np

from vitviz.core import owned
from vitviz.core.lru import LRU
from vitviz.specs import tabs as declared_tabs
from vitviz.specs.state import View
from vitviz.views.shown import LINK, RECORDS, VIEWS, Record, Shown, plain, record, shapes_only  # noqa: F401

__path__ = pkgutil.extend_path(__path__, __name__)  # a vitviz/views folder elsewhere on the path adds its views

def _discover() -> None:
    """Import every module of this package (each records its views as it is imported: found, not listed), then
    order the records as the page shows them: by tab, each tab's first view (its declaration's ``opens_with``)
    first, the rest as their modules and code have them."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name != "shown":
            importlib.import_module(f"{__name__}.{info.name}")
    tabs = declared_tabs.TABS
    order = {t: i for i, t in enumerate(tabs)}

    def rank(item: tuple[int, Record]) -> tuple:
        i, r = item
        first = r.tab in tabs and r.name == tabs[r.tab].opens_with.name
        return order.get(r.tab, len(order)), not first, i

    ranked = [r for _, r in sorted(enumerate(RECORDS.values()), key=rank)]
    RECORDS.clear()
    RECORDS.update((r.name, r) for r in ranked)



def tab_views(tab: str) -> tuple[View, ...]:
    """The views of ``tab``, its main view first."""
    return tuple(r.view for r in RECORDS.values() if r.tab == tab)


def records_of(tab: str) -> tuple[Record, ...]:
    return tuple(r for r in RECORDS.values() if r.tab == tab)


def table() -> str:
    """Every view with an endpoint, as a Markdown table made from the records (docs/using.md's list of views,
    ``vitviz views``): endpoint, tab, what it shows, its settings, its download endpoint, its command line."""
    rows = ["| endpoint | tab | view | settings | download | command line |", "|---|---|---|---|---|---|"]
    for r in RECORDS.values():
        if not r.api:
            continue
        settings = ", ".join(f"`{f.name}`" for f in r.view.settings()) or "none"
        rows.append(f"| `/{r.name}` | {r.tab} | {r.view.title} | {settings} | "
                    f"{f'`/bundle_{r.name}`' if r.bundle else ''} | `vitviz view {r.verb}` |")
    return "\n".join(rows)


DRAWN_ITEMS = 256
"""At most this many drawn answers are kept for ``show(..., reuse=True)`` (within the one byte budget, weighed by
their figures' pixels)."""
_drawn: LRU[tuple[Shown, dict]] = owned.keep("views.drawn", "results", LRU(DRAWN_ITEMS),
                                             "answers drawn (and the models that made them), by view, picture "
                                             "and settings")


def show(view: str, picture: np.ndarray | None, values: dict, progress: Callable | None = None,
         only: frozenset[str] | None = None, reuse: bool = False) -> Shown:
    """What view ``view`` shows for ``picture`` (None for views without one) and checked settings ``values``;
    ``progress(fraction, message)`` hears about slow steps (a model loading); ``only`` names the figures wanted
    when not all of them are (``frozenset()``: none, the numbers and texts alone): a view whose show function takes
    ``only`` skips drawing the rest, another's are drawn and left out. When the model that answered knows only
    vitviz's generated shapes and the picture is not one of its example scenes, the answer says so.

    ``reuse``: an answer already drawn for the same view, picture and settings is handed out again (a copy; its
    figures are shared and never changed) instead of drawn anew, as long as the models that made it would make it
    again (the same weights; a stand-in only while its model's failure is remembered) and the analysis it hands
    the browser (the explorer's parts) is still held: the server's pages and endpoints ask this way (a lesson step
    opened again, a class opening the same view); the library and its tests do not."""
    if view not in RECORDS:
        raise ValueError(f"Unknown view {view!r}; choose one of {sorted(RECORDS)}.")
    if reuse:
        from vitviz.models import cache, runner

        key = (view, None if picture is None else runner.image_key(picture),
               json.dumps(plain(values), sort_keys=True), only and tuple(sorted(only)))
        held = _drawn.get(key)
        if held is not None and (not cache.still(held[1]) or _leans_on_gone(held[0])):
            _drawn.pop(key)

        def draw() -> tuple[Shown, dict]:  # once, however many ask for it at the same moment
            with cache.asked() as models_asked:
                return show(view, picture, values, progress, only), dict(models_asked)

        return _copy(_drawn.get_or_make(key, draw)[0])
    skips = only is not None and _takes_only(RECORDS[view].show)
    kwargs = {"progress": progress} | ({"only": only} if skips else {})
    shown = RECORDS[view].show(picture, values, **kwargs)
    if only is not None and not only >= set(shown.figures):
        shown = dataclasses.replace(shown, figures={k: v for k, v in shown.figures.items() if k in only})
    settled = shown.settled
    if settled is not None and shown.model and settled.values.get("model") not in (None, shown.model):
        settled.use("model", shown.model, f"{settled.values['model']} cannot be loaded here.")  # the model used
    warning = shapes_only(shown.model, picture)
    if warning and warning not in shown.notice:
        shown.notice = f"{shown.notice}\n\n{warning}" if shown.notice else warning
        shown.numbers["notice"] = shown.notice
    return shown


@functools.cache
def _takes_only(show: Callable) -> bool:
    """Whether a view's show function can be told which figures to draw (an ``only`` parameter)."""
    return "only" in inspect.signature(show).parameters


def _copy(shown: Shown) -> Shown:
    """A copy a caller may change (its dictionaries new; figures and numbers' arrays shared, never changed)."""
    return dataclasses.replace(shown, figures=dict(shown.figures), texts=dict(shown.texts),
                               numbers=dict(shown.numbers), data=dict(shown.data))


def _leans_on_gone(shown: Shown) -> bool:
    """Whether ``shown`` hands the browser an analysis (a payload naming its ``token``) the server no longer holds."""
    from vitviz.models import runner

    return any(isinstance(d, dict) and "token" in d and "base" in d and runner.find(str(d["token"])) is None
               for d in shown.data.values())


def use_model(module, name: str, labels: list[str] | None = None, **preprocessing) -> str:
    """Put a model object on this process's model list under ``name``, so that every view can show it
    (``show(view, picture, {"model": name, ...})``): any timm ViT (ViT, DeiT, DINOv2 ± registers) or transformers
    ViT/DeiT/DINO/DINOv2 vitviz can record; ``labels`` (one per output of its head) make it a classifier;
    ``preprocessing``: ``mean``, ``std``, ``resolution`` when not the model's own. Returns ``name``. ``ValueError``
    saying why for a model vitviz cannot record."""
    from vitviz.models import cache, listing, loaders

    runner = loaders.runner_for(module, name, labels=labels, origin="a model given in Python",
                                about="given in Python", **preprocessing)
    listing.add(runner.spec)
    cache.adopt(name, runner)
    return name


def attention_maps(module, picture, name: str | None = None, labels: list[str] | None = None,
                   **settings) -> Shown:
    """The Attention view for any model object and a picture (a path, a PIL image or an (H, W, 3) uint8 array):
    the class token's attention per head with the mass-threshold contour, the numbers behind it
    (``.numbers``) and its figures (``.figures["heads"]``, PIL images). ``settings``: the view's own (``layer``,
    ``keep``, ``resolution``, ``cmap``…, as in ``vitviz view attention --help``)."""
    from PIL import Image

    from vitviz.core import images

    if isinstance(picture, Image.Image):
        rgb = np.asarray(picture.convert("RGB"))
    elif isinstance(picture, np.ndarray):
        rgb = np.ascontiguousarray(picture)
    else:
        rgb = images.load_rgb(picture, images.INTAKE_SHORT_SIDE)
    key = use_model(module, name or f"{type(module).__name__} (given in Python)", labels)
    return show("attention", rgb, VIEWS["attention"].check({**settings, "model": key}))


_discover()
