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


def device() -> None:
    """The "compute on this device" panels on /next (render/web/app/device.mjs): nothing yet."""
