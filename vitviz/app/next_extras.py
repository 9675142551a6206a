"""The page at /next's panels that are not a view's: the lesson maker (:func:`maker`) and the device panels
(:func:`device`). Each is a ``gr.HTML`` whose ``js_on_load`` imports its module from the package (render/web/app/),
as every panel does; :func:`vitviz.app.panels.build` places them."""

from __future__ import annotations


def maker_mount() -> str:
    """The maker's ``js_on_load``: the panels' one line (:data:`vitviz.app.panels.MOUNT`) importing
    ``app/maker.mjs`` instead of ``app/main.mjs`` and calling ``mountMaker`` with the maker's server functions."""
    from vitviz.app import panels

    line = (panels.MOUNT.replace("/app/main.mjs", "/app/maker.mjs").replace("mountPanel", "mountMaker")
            .replace("{ element, props, trigger, watch, upload }", "{ element, props, server, upload }"))
    if "maker.mjs" not in line or "mountMaker({ element, props, server, upload })" not in line:
        raise RuntimeError("panels.MOUNT changed shape: the lesson maker's mount line needs a look")
    return line


def maker():
    """The lesson maker on /next, a collapsed section at the page's bottom (render/web/app/maker.mjs draws it): a
    teacher adds the view on screen as a step with a caption, reorders, edits and removes steps, downloads the
    lesson's Markdown, opens a lesson file in the page and prints a handout. Its server functions are the old
    page's (:mod:`vitviz.app.lessons`: a lesson file's picture kept as an upload, an upload as the file's picture,
    the handout's PDF)."""
    import gradio as gr

    from vitviz.app import lessons
    from vitviz.render import web
    from vitviz.tools import lesson

    return gr.HTML(None, html_template='<section class="vx-maker" aria-labelledby="vx-maker-toggle"></section>',
                   js_on_load=maker_mount(), apply_default_css=False, elem_id="vx-maker",
                   server_functions=[lessons.keep_picture, lessons.picture_of, lessons.handout_of],
                   version=web.version(), limits=lesson.limits())


def device() -> list:
    """The "compute on this device" panels on /next (render/web/app/device.mjs): one ``gr.HTML`` per tab with a
    device switch (``TabSpec.device``), mounted by a one-line import as every panel is, each with one queued event
    that makes its tab's manifest (:func:`device_manifest_of`) when ``GET /vitviz/device-manifest`` has none yet.
    Returns the panels (tests)."""
    import gradio as gr

    from vitviz.app import serving
    from vitviz.app.panels import MOUNT
    from vitviz.render import web
    from vitviz.specs import tabs as declared_tabs

    made = []
    for t in declared_tabs.TABS.values():
        if not t.device:
            continue
        spec = device_spec(t)
        template = f'<section class="vx-device-panel" data-device-tab="{t.id}"></section>'
        panel = gr.HTML(value=None, html_template=template,
                        js_on_load=MOUNT.replace("app/main.mjs", "app/device.mjs").replace("mountPanel", "mountDevice"),
                        elem_id=f"next-device-{t.id}", elem_classes=["vx-device-box"], apply_default_css=False,
                        spec=spec, version=web.version())
        panel.submit(device_manifest_of(t.id), panel, panel, api_visibility="private", show_progress="hidden",
                     show_progress_on=[], trigger_mode="always_last", **serving.MODEL)
        made.append(panel)
    return made


def device_spec(t) -> dict:
    """What a device panel is made from: its tab, its tab's main view and the link keys of the settings its
    manifest follows (the model and, for the tabs whose graph follows the short side, the side)."""
    from vitviz.app.manifests import SIDED

    settings = {f.name: f.link for f in t.opens_with.settings()}
    model = settings.get("model")
    side = settings.get("resolution") if t.id in SIDED else None
    return {"tab": t.id, "main": t.opens_with.name, "title": t.title, "model": model, "side": side}


def device_manifest_of(tab: str):
    """The event behind ``tab``'s device panel: its value ``{"ask": {"n", "model", "side"}}`` -> ``{"n",
    "manifest"}`` (:func:`vitviz.app.manifests.device_manifest`: the graph made on first use; a manifest's own
    ``error`` says why a model cannot run on a device) or ``{"n", "error"}`` in words for a refused setting."""
    from vitviz.app.manifests import device_manifest
    from vitviz.models import cache as models
    from vitviz.specs import tabs as declared_tabs

    view = declared_tabs.TABS[tab].opens_with

    def manifest_of(value) -> dict:
        ask = value.get("ask") if isinstance(value, dict) else None
        if not isinstance(ask, dict):
            return {"n": None, "error": "This panel sent no question."}
        n = ask.get("n")
        try:
            given = {"model": ask.get("model")}
            if ask.get("side") not in (None, ""):
                given["resolution"] = ask.get("side")
            values = view.check({k: v for k, v in given.items() if v is not None})
            if tab == "classify":  # the classifier at its checkpoint's own size, as this tab's server path runs it
                values = {"model": values["model"], "resolution": models.get_model(values["model"]).resolution}
            return {"n": n, "manifest": device_manifest(values, tab=tab)}
        except ValueError as err:
            return {"n": n, "error": str(err)}

    manifest_of.__name__ = manifest_of.__qualname__ = f"device_{tab}"
    return manifest_of
