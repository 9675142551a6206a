"""The page as one store and one panel per view (issue 69), served at ``/next`` until it does everything ``/`` does.

Three parts, each small:

- **The store** (``vitviz/render/web/app/store.mjs``, in the browser): the page's state (the tab, the page's one
  picture, every setting by its link key, the open section, the lesson and its step, projector, contrast, device).
  The address is written from it at every change and read into it once; every control renders from it. Nothing
  else holds a copy: no hidden component, no ``gr.State``, no ``window`` global (the page's modules import it).
- **A panel per view** (:class:`Panel`, a ``gr.HTML`` subclass made from the view's record): its ``js_on_load`` is
  one line that imports ``app/main.mjs`` from the package (served by :func:`web_routes`, never joined into the
  page's configuration) and mounts it with the view's spec (:func:`view_spec`: its declared fields, their ranges,
  labels and link keys, its figures, whether it has a download).
- **The server's function per view** (:func:`respond`): the panel puts its question in its own value and fires
  ``submit``, one queued event per view (the view's concurrency group, as its API endpoint has); the answer is
  ``views.show``'s, the API's own :func:`vitviz.app.serving.answer` with the figures as URLs, and comes back as the
  panel's value (``watch('value')`` in the browser). A refused value comes back in words, naming the parameter.

Only gradio's documented means are used here: ``gr.HTML``'s ``js_on_load`` with ``props``, ``trigger``, ``watch``
and ``upload``; ``demo.route``; one event per panel.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import gradio as gr

from vitviz.app import files, serving, uploads
from vitviz.models import cache as models
from vitviz.specs import registry
from vitviz.render import plotting, web
from vitviz.specs import tabs as declared_tabs
from vitviz.specs.state import Field
from vitviz.views import RECORDS, Record

log = logging.getLogger("vitviz")

ROUTE = "next"
"""Where the rebuilt page is served (``/next``) while ``/`` keeps the page it replaces."""
WEB_ROUTE = "vitviz/web"
"""Where the page's modules are served from the package: ``/vitviz/web/<file>``."""
OUT_ROUTE = "vitviz/out"
"""Where a panel's figures and downloads are served: ``/vitviz/out/figures/<content>.png``,
``/vitviz/out/bundles/<folder>/<name>.zip`` (this server's outputs, swept as gradio's files are)."""

MOUNT = ("const base = (window.gradio_config && window.gradio_config.root) || location.origin;"
         "import(base.replace(/\\/$/, '') + '/" + WEB_ROUTE + "/app/main.mjs?v=' + props.version)"
         ".then((m) => m.mountPanel({ element, props, trigger, watch, upload }));")
"""Every panel's ``js_on_load``: import the panel module (one copy for the page, cached by the browser) and mount."""
PAGE_MOUNT = MOUNT.replace("mountPanel", "mountPage")
"""The page bar's ``js_on_load``: the title, the tab strip, projector and contrast, the lesson bar, the notices."""


def field_spec(f: Field, default: Any | None = None) -> dict:
    """One declared setting as the page's store and panels read it: its name, kind, label, range or choices, link
    key, default (as the link writes it) and special words."""
    value = f.default if default is None else default
    out = {"name": f.name, "kind": f.kind, "label": f.label, "link": f.link, "info": f.info,
           "default": f.link_text(value), "words": {w: _plain(v) for w, v in f.words.items()},
           "follows": f.follows}
    if f.kind in ("int", "float"):
        out |= {"lo": f.lo, "hi": f.hi, "step": f.step or (1 if f.kind == "int" else (f.hi - f.lo) / 100),
                "multiple": f.multiple}
    if f.kind == "choice":
        out["choices"] = [[_label(f, c), str(c)] for c in f.options()]
    return out


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _label(f: Field, choice: Any) -> str:
    if f.name.startswith("model") or f.name in ("classifier", "vit", "cnn", "model_a", "model_b"):
        try:
            return models.choice_label(choice)
        except Exception:  # noqa: BLE001 - a list made at run time: its key is its label
            return str(choice)
    return str(f.shown.get(choice, choice))


def model_defaults(available: dict[str, bool] | None = None) -> dict[str, str]:
    """Each model list's value when a link says nothing, by link key: its default when it can be had here, else
    the stand-in for its task (the offline model)."""
    available = models.available_now() if available is None else available
    out = {}
    for t in declared_tabs.TABS.values():
        for field, task in t.models:
            stand_in = registry.CNN_OFFLINE_KEY if task == "cnn" else registry.OFFLINE_KEY
            out[field.link] = field.default if available.get(field.default, False) else stand_in
    return out


def first_picture(available: dict[str, bool] | None = None) -> str:
    """The page's picture when a link names none: the cat when the tabs' own models can be had, else the first
    shape scene (which the offline model knows)."""
    defaults = model_defaults(available)
    online = all(defaults[t.models[0][0].link] == t.models[0][0].default
                 for t in declared_tabs.TABS.values() if t.models)
    return "cat" if online else Path(uploads.SCENES[0]).stem


def view_spec(r: Record, defaults: dict[str, str] | None = None) -> dict:
    """What a view's panel is made from: its record (name, title, tab, whether it is its tab's main view, needs a
    picture, has a download) and its declared fields."""
    defaults = defaults or {}
    tab = declared_tabs.TABS[r.tab]
    fields = []
    for f in r.view.settings():
        spec = field_spec(f)
        if f.link in defaults and defaults[f.link] != spec["default"]:
            spec["used"] = defaults[f.link]  # what this server uses when a link names none (the stand-in)
        fields.append(spec)
    sections = {name: list(figs) for name, figs in r.sections.items() if name}
    return {"view": r.name, "title": r.view.title, "tab": r.tab, "main": tab.opens_with.name == r.name,
            "sections": sections,
            "picture": r.needs_picture, "bundle": r.bundle, "long": r.long, "fields": fields}


def page_spec(available: dict[str, bool] | None = None) -> dict:
    """What the store is made from: every tab (id, title, its views in order), every link key's setting, the
    examples, the picture a link without one opens on."""
    defaults = model_defaults(available)
    keys: dict[str, dict] = {}
    for r in RECORDS.values():
        for f in r.view.settings():
            if f.link and f.link not in keys:
                keys[f.link] = field_spec(f) | {"tab": r.tab}
                # "default": the declared default, which a link leaves out (as Field.to_link does); "used": what
                # this server uses when a link names no model and it cannot have that default (the stand-in),
                # which the store then holds, so a link made here names it
                if f.link in defaults and defaults[f.link] != keys[f.link]["default"]:
                    keys[f.link]["used"] = defaults[f.link]
    tabs = [{"id": t.id, "title": t.title, "views": [r.name for r in RECORDS.values() if r.tab == t.id],
             "sections": [name for r in RECORDS.values() if r.tab == t.id for name in r.sections if name]}
            for t in declared_tabs.TABS.values()]
    examples = [Path(n).stem for n in (*uploads.PHOTOS, *uploads.SCENES)]
    from vitviz.tools import lesson

    lessons = {name: {"title": got.title, "steps": [{"caption": s.caption, "link": s.link} for s in got.steps]}
               for name in lesson.shipped_names() if (got := lesson.shipped(name)) is not None}
    return {"tabs": tabs, "keys": keys, "examples": examples, "picture": first_picture(available),
            "first": declared_tabs.FIRST, "version": web.version(), "lessons": lessons,
            "kept": ["projector", "contrast", "device"], "lessonLimits": lesson.limits(),
            "device": [t.id for t in declared_tabs.TABS.values() if t.device]}


class Panel(gr.HTML):
    """One view's panel, made from its record: its controls from the declared fields, its figure slots, its
    texts, notices and download, all drawn by ``app/main.mjs`` from the store. Its value is the question it asks
    (``{"ask": ...}``) and then the server's answer; ``submit`` asks."""

    def __init__(self, r: Record, defaults: dict[str, str] | None = None, **kwargs: Any) -> None:
        spec = view_spec(r, defaults)
        super().__init__(value=None, html_template=f'<section class="vx-panel" data-view="{r.name}"></section>',
                         js_on_load=MOUNT, elem_id=f"panel-{r.name}", elem_classes=["vx-panel-box"],
                         apply_default_css=False, spec=spec, version=web.version(), **kwargs)


class PageBar(gr.HTML):
    """The page's own panel: title, tab strip, projector and contrast, the lesson bar and the notices, drawn by
    ``app/page.mjs`` from the store, which it makes from :func:`page_spec`."""

    def __init__(self, spec: dict, **kwargs: Any) -> None:
        super().__init__(value=None, html_template='<header class="vx-page"></header>', js_on_load=PAGE_MOUNT,
                         elem_id="vx-page", apply_default_css=False, spec=spec, version=spec["version"], **kwargs)


# ---- the server's function per view ---------------------------------------------------------------------------

def _picture(asked: Any) -> Any:
    """The picture a question names, as the intake takes it: an example's name, an upload a link names
    (``upload-<fingerprint>``, while this server holds it) or a file the page just uploaded (``{"path": ...}``,
    checked by the intake like every upload). ``ValueError`` in words otherwise."""
    if isinstance(asked, dict) and isinstance(asked.get("path"), str):
        return {"path": asked["path"]}
    if isinstance(asked, str) and asked:
        path = uploads.example_path(asked) or uploads.named_file(asked)
        if path is not None:
            return path
        if asked.startswith("upload-"):
            raise ValueError("This server no longer holds that uploaded picture (pictures are let go a while after "
                             "their page closes): upload it again.")
    raise ValueError(f"image: {str(asked)[:60]!r} is not a picture this page knows: pick an example or upload one.")


def _url(path: Path | str) -> str:
    """A file among this server's outputs as the page fetches it (:data:`OUT_ROUTE`)."""
    rel = Path(path).resolve().relative_to(files.outputs().root.resolve())
    return f"/{OUT_ROUTE}/{rel.as_posix()}"


def browser_data(view: str, shown, picture, values: dict) -> dict:
    """What the browser's own drawing of ``view`` receives with the answer (``Shown.data``: the patch inspector's,
    the similarity map's…), made JSON-ready; the views drawn in the browser (``app/views.mjs``) read it."""
    from vitviz.views import plain

    return plain(dict(shown.data)) if shown.data else {}


def respond(r: Record):
    """The event behind ``r``'s panel: its value ``{"ask": {"n", "picture", "settings", "bundle"}}`` -> ``{"n",
    "answer"}`` (the API's answer, figures as URLs, the picture's link name) or ``{"n", "error"}`` in words."""
    from vitviz.views import show

    def answer_of(value: Any) -> dict:
        ask = value.get("ask") if isinstance(value, dict) else None
        if not isinstance(ask, dict):
            return {"n": None, "error": "This panel sent no question."}
        n = ask.get("n")
        try:
            settings = ask.get("settings") or {}
            if not isinstance(settings, dict):
                raise ValueError("settings: a panel sends its settings by name.")
            values = r.view.check(settings)
            picture, name = None, None
            if r.needs_picture:
                source = _picture(ask.get("picture"))
                picture = uploads.picture(source)
                name = uploads.link_name(source)
            if ask.get("preview"):  # what the view's browser drawing needs before it answers (predict's picker)
                from vitviz.app import browser_views

                data = browser_views.plain_preview(r.name, picture, values)
                return {"n": n, "answer": {"figures": {}, "texts": {}, "alt": {}, "data": data, "preview": True},
                        "picture": name}
            if ask.get("bundle"):
                if not r.bundle:
                    raise ValueError(f"The {r.view.title} view has no download.")
                made = serving.bundle_file(r.name, values, picture)
                return {"n": n, "bundle": _url(made.path), "picture": name}
            shown = show(r.name, picture, values, reuse=True)
            got = serving.answer(shown)
            got["figures"] = {k: _url(v.path) for k, v in got["figures"].items()}
            got["alt"] = {k: plotting.alt_of(img) or "" for k, img in shown.figures.items()}
            got["data"] = browser_data(r.name, shown, picture, values)  # what a view drawn in the browser receives
            return {"n": n, "answer": got, "picture": name}
        except ValueError as err:
            return {"n": n, "error": str(err)}
        except Exception as err:  # noqa: BLE001 - said in the panel, logged whole: the panel never waits in vain
            log.exception("panel %s could not answer", r.name)
            return {"n": n, "error": f"The server could not answer this view ({type(err).__name__}); the log says "
                                     "more. Try again, or another setting."}

    answer_of.__name__ = answer_of.__qualname__ = f"panel_{r.name}"
    return answer_of


# ---- the page ------------------------------------------------------------------------------------------------

def build(available: dict[str, bool] | None = None) -> dict[str, Panel]:
    """The page's blocks, in the current Blocks context (``demo.route``'s page): the page bar, then every view's
    panel in the page's order, each with its one event. Returns the panels by view."""
    spec = page_spec(available)
    defaults = model_defaults(available)
    gr.Navbar(visible=False, main_page_name=False)
    PageBar(spec)
    panels = {}
    with gr.Column(elem_id="vx-panels"):
        for r in RECORDS.values():
            if not r.api and r.name != "explorer":
                continue
            panel = Panel(r, defaults)
            # its progress is the panel's own (its status line): gradio's is shown on nothing
            panel.submit(respond(r), panel, panel, api_visibility="private", show_progress="hidden",
                         show_progress_on=[], trigger_mode="multiple", **serving.queue_of(r))
            # ("multiple": each question goes with the value it was asked with; the panel keeps one in flight)
            panels[r.name] = panel
    return panels


def web_routes() -> list:
    """``GET /vitviz/web/<file>``: the page's modules, styles and the library's twins from the package (only
    ``.mjs``, ``.js`` and ``.css`` files under ``vitviz/render/web``), cached for a year under the package's
    version (the panels import them with ``?v=``); ``GET /vitviz/out/<kind>/<file>``: a panel's figures and
    downloads among this server's outputs."""
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Route

    media = {"mjs": "text/javascript", "js": "text/javascript", "css": "text/css"}
    name_ok = re.compile(r"^[A-Za-z0-9_\-/]+\.(mjs|js|css)$")

    async def module(request):
        name = request.path_params["name"]
        path = (web.WEB / name).resolve()
        if not name_ok.match(name) or ".." in name or web.WEB.resolve() not in path.parents or not path.is_file():
            return JSONResponse({"missing": "no such file"}, status_code=404)
        cache = serving.IMMUTABLE if request.query_params.get("v") == web.version() else {"Cache-Control": "no-cache"}
        return FileResponse(path, media_type=media[path.suffix[1:]], headers=cache)

    out_ok = re.compile(r"^(figures/[0-9a-f]{20}\.png|bundles/[0-9a-f]{32}/[A-Za-z0-9_.\-]+\.zip)$")

    async def output(request):
        name = request.path_params["name"]
        root = files.outputs().root.resolve()
        path = (root / name).resolve()
        if not out_ok.match(name) or root not in path.parents or not path.is_file():
            return JSONResponse({"missing": "no such file (outputs are let go a while after they are made)"},
                                status_code=404, headers={"Cache-Control": "no-store"})
        kind = "image/png" if name.endswith(".png") else "application/zip"
        headers = {"Cache-Control": "public, max-age=600"}
        if kind == "application/zip":
            headers["Content-Disposition"] = f'attachment; filename="{path.name}"'
        return FileResponse(path, media_type=kind, headers=headers)

    return [Route(f"/{WEB_ROUTE}/{{name:path}}", module, methods=["GET"]),
            Route(f"/{OUT_ROUTE}/{{name:path}}", output, methods=["GET"])]


def spec_json() -> str:
    """The page's spec as JSON (tests, the Node tests' vectors)."""
    return json.dumps(page_spec())


__all__ = ["Panel", "PageBar", "build", "field_spec", "page_spec", "respond", "view_spec", "web_routes"]
