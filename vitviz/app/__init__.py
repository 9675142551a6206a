"""vitviz's web app: how a Vision Transformer sees an image, one tab per idea. The only package that imports gradio.

    patches.py, forward.py, positions.py, attention.py, classify.py, vitcnn.py   one module per tab (vitcnn.py:
                    ViT vs CNN), found by its @layout mark for its declaration in vitviz/specs/tabs.py:
                    layout and events (its views' endpoints come from their records)
    components.py   one control per declared setting, figures, the browser views
    tab.py          what every tab's events share (settings -> checks -> intake -> view -> components)
    serving.py      the typed API made from the declarations, files handed out, server settings
    uploads.py      pictures however they arrive: one intake, one decode cache, names for the link
    links.py        the link read back on page load      theme.py   light theme, projector mode

Nothing heavy is loaded at import; models load on first use. ``python app.py`` (the Space's entry file) or
``vitviz serve`` runs it.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import time

import gradio as gr

from vitviz import assets
from vitviz.app import adapters, files, lessons, links, next_extras, panels, serving, theme
from vitviz.app.components import door, open_door
from vitviz.app.tab import LAYOUTS, Tab
from vitviz.specs import tabs as declared_tabs
from vitviz.models import added, budget
from vitviz.models import cache as models
from vitviz.render import plotting

log = logging.getLogger("vitviz")
__path__ = pkgutil.extend_path(__path__, __name__)  # a vitviz/app folder elsewhere on the path adds its tabs


def build_demo(models_file: str | None = None) -> gr.Blocks:
    """The whole app as a Blocks (no registry model is loaded here). ``models_file`` (or ``VITVIZ_MODELS``): the
    operator's models file, whose models are checked, loaded and put on the lists first (a broken entry is logged
    and left out; the app starts without it)."""
    models_file = models_file or os.environ.get("VITVIZ_MODELS") or None
    if models_file:
        try:
            # logs what was added and what was left out, and why; the cache keeps what it checked
            added.install(models_file, adopt=models.adopt, forget=models.forget)
        except ValueError as err:  # the file itself: the app starts with vitviz's own models
            log.error("%s The app starts with vitviz's own models only.", err)
    serving.return_freed_memory()
    adapters.lazy_session_configs()  # a new session no longer copies every block's configuration at once
    plotting.gate_drawing(budget.reserve)  # the server's figures share its memory budget (a notebook's do not)
    # gradio removes the files it made for this app 10 minutes after their last use, every 5 minutes; a picture an
    # open page uses is kept alive (vitviz.app.files), and this server's own outputs are swept by it.
    # (the API's endpoints are made last, at the page's root: serving.endpoints_last says why)
    with gr.Blocks(title="vitviz: how a Vision Transformer sees", delete_cache=(300, files.PICTURE_SECONDS)) as demo, \
            serving.endpoints_last():
        gr.Navbar(visible=False, main_page_name=False)  # the page at /next is reached by its address, not by a bar on this one
        with gr.Row():
            with gr.Column(scale=5, min_width=300):
                gr.Markdown("# vitviz: how a Vision Transformer sees an image\n"
                            "From pixels to patch tokens, position embeddings, attention and a prediction. "
                            "Pick a tab, then click an example or upload your own picture. The address bar always "
                            "holds a link to what you see. New here? "
                            f"[Start the guided tour]({lessons.tour_link()}): ten steps through one picture's "
                            "forward pass.", elem_id="intro")
            with gr.Column(scale=1, min_width=240):
                projector = gr.Checkbox(False, label="Projector mode (large text)", elem_id="projector",
                                        container=False)
                contrast = gr.Checkbox(False, label="High contrast", elem_id="contrast", container=False)
        link_notice = gr.Markdown(visible=False, elem_id="link-notice", elem_classes="vx-note")
        lesson_bar = gr.HTML(visible=False, elem_id="lesson-box")  # a lesson's caption and Back / Next
        tabs: dict[str, Tab] = {}
        layouts = tab_layouts()
        with gr.Tabs(overflow_behavior="wrap"), serving.by_hand_doors() as by_hand:  # selected by the page
            for spec in declared_tabs.TABS.values():  # each declared tab, laid out by its module's @layout
                with gr.Tab(spec.title, id=spec.id) as t:
                    tabs[spec.id] = layouts[spec.id](t)
        with gr.Accordion("Make a lesson from these views (for teachers)", open=False):
            lessons.maker()
        opened = gr.State()
        settle = gr.Textbox(visible="hidden", elem_id="page-settle")  # the opener's settings, put in by the page
        page = {"projector": projector, "contrast": contrast, "notice": link_notice,
                "opened": opened, "lesson": lesson_bar, "settle": settle}
        page |= {k: c for t in tabs.values() for k, c in t.extras.items() if k != "photos_note"}  # each tab's own
        links.label_page(tabs, page)

        def relabel() -> dict:  # the server's models changed since the page was made: the page made again
            available = links.label_page(tabs, page)
            demo.config = demo.get_config_file()
            serving.PageCache.renew()
            return available

        # The page opens as its link says: in the browser when the link asks only for what the browser can set
        # (page.js, vitvizLink.open: the device link), else the server's opener, through its door (also
        # when the page's script is not there yet), while the page selects the link's tab by its button. (The
        # tabs are no answer's output: gradio then refreshes every component inside them at every later status
        # message of every event, which made each step of the tour ~0.5 s slower.)
        carriers = [t.form.carrier for t in tabs.values() if t.form.carrier is not None]
        here = [tabs["attention"].form[f] for f in links.HERE]
        demo.load(None, carriers, [projector, contrast, *here, page["device"]] + carriers,
                  js=f"(...held) => window.vitvizLink ? window.vitvizLink.open(held.slice(0, {len(carriers)})) "
                     f": ({open_door('page-open')}, document.querySelector("
                     f"'[role=tab][data-tab-id=' + JSON.stringify(new URLSearchParams(location.search).get('tab') "
                     f"|| '') + ']')?.click(), [])")
        open_here = door("page-open")
        loaded = open_here.click(links.opener(tabs, page, relabel), links.inputs(tabs),
                                 links.outputs(tabs, page), trigger_mode="always_last",  # the address as it is
                                 api_visibility="private", queue=False,  # (last: a link opened while the page
                                 show_progress_on=[])  # still opens). UI only, no model: outside the queue, it
        # costs the page two status messages, not four; it takes a few ms, so its progress is shown on none (why that
        # matters: serving.progress_on)
        put = links.settled(tabs)  # set by the page itself, in one event: they take part in no answered event
        # (the values now of the controls only a hand asks with: compared with the link's, to open its doors)
        table = links.by_hand_table(tabs, put, by_hand)
        read = links.watched(table)
        settle.change(None, [settle, *(put[i] for i in read)], put, js=links.settle_script(len(put), table, read))
        tabs["positions"].open_on_load(loaded, opened)
        for tab in tabs.values():
            tab.opens(models.available_now, opened)
        projector.change(None, projector, None, js="(on) => window.vitvizLink?.projector(on)")
        contrast.change(None, contrast, None, js="(on) => window.vitvizLink?.contrast(on)")
    with demo.route("vitviz: one store, one panel per view", panels.ROUTE, show_in_navbar=False):
        panels.build()  # the page being rebuilt (issue 69), served at /next until it does all this page does
        next_extras.device()  # "compute on this device" for the tabs that have it
        next_extras.maker()  # the lesson maker
    demo.queue(default_concurrency_limit=2, max_size=serving.QUEUE_SIZE)
    adapters.poll_slower_while(demo, lambda: budget.SERVER.used > 0)  # no 1 ms polling beside a forward
    return demo


def tab_layouts() -> dict:
    """Every declared tab's layout, found in this package (a module that says ``@layout("<id>")``; a ``vitviz/app``
    folder elsewhere on the path adds its own). ``ValueError`` for a declared tab without one, or a view recorded
    in a tab that is not declared."""
    from vitviz import views

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    missing = [t for t in declared_tabs.TABS if t not in LAYOUTS]
    if missing:
        raise ValueError(f"no layout for the declared tab(s) {', '.join(missing)}: a module of vitviz/app must say "
                         "@layout(\"<id>\")")
    stray = sorted({f"{r.name} ({r.tab})" for r in views.RECORDS.values() if r.tab not in declared_tabs.TABS})
    if stray:
        raise ValueError(f"views recorded in tabs that are not declared (vitviz/specs/tabs.py): {', '.join(stray)}")
    return {t: LAYOUTS[t] for t in declared_tabs.TABS}


def launch_kwargs() -> dict:
    """Theme, CSS and the page script (Gradio 6 takes these in launch()); with VITVIZ_MCP=1 an MCP server."""
    styles = theme.styles(theme.theme())
    styles["css"] += "\n" + adapters.NAVBAR_CSS  # gradio#12532: its bar of pages, hidden (adapters.py says why)
    kwargs = dict(**styles, js=links.page_script(), max_file_size="50mb",
                  server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                  allowed_paths=[str(assets.EXAMPLES)],  # the examples ship in the package, wherever it is installed
                  state_session_capacity=serving.SESSIONS,
                  # gradio's own refusals (a path it did not receive, say) keep their words
                  show_error=True,
                  # the explorer's data, served with a long-lived cache; the page compressed
                  app_kwargs={"routes": serving.data_routes() + panels.web_routes(),
                              # a page closed (or reloaded): the pictures it used age out as usual
                              "middleware": serving.guards() + serving.page_files(closed=files.PICTURES.release)
                              + serving.body_limit() + serving.compression() + serving.upload_budget(),
                              "lifespan": files.lifespan})
    if os.environ.get("VITVIZ_MCP") == "1":  # an assistant can call the named endpoints as tools
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            raise SystemExit("VITVIZ_MCP=1 needs gradio's MCP extra: pip install 'gradio[mcp]==6.31.0'.")
        kwargs["mcp_server"] = True
    return kwargs


def main(argv: list[str] | None = None) -> None:
    """Serve the app (``python app.py``, ``python -m vitviz.app [--port N]``, ``vitviz serve``), with the library's
    log lines on the console."""
    import argparse
    import logging

    ap = argparse.ArgumentParser(prog="python -m vitviz.app", description="vitviz's web app")
    ap.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    ap.add_argument("--models", metavar="FILE", default=None,
                    help="a models file (TOML) of this server's own models (or set VITVIZ_MODELS)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not 1 <= args.port <= 65535:
        raise SystemExit(f"--port {args.port} is not a port: a whole number from 1 to 65535.")
    files.stop_on_sigterm()  # a Space restarting or `kill` stops it as Ctrl-C does: its files are removed
    demo = build_demo(args.models)
    serving.freeze_what_lasts()  # a full collection then costs what requests made, not the whole app
    try:
        demo.launch(**launch_kwargs(), server_port=args.port, prevent_thread_lock=True)
    except OSError as err:  # the port is taken, or cannot be bound here
        raise SystemExit(f"Cannot serve on port {args.port}: {err}") from None
    serving.read_long_heads(demo)  # an over-long link is refused in words, not with uvicorn's bare 400
    try:
        while demo.is_running:
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("Stopping: removing the files this server made.")
    finally:
        demo.close()
        adapters.remove_app_files(demo)  # gradio's own cleanup, also when its server stopped before running it
        files.close()


__all__ = ["build_demo", "launch_kwargs", "main"]
