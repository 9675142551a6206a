"""The Forward-pass tab: one picture through the whole model, every stage with its real tensor, the residual stream
and the logit lens (the view and its endpoint come from its record: vitviz/views/forward.py)."""

from __future__ import annotations

import gradio as gr

from vitviz.app import lessons, uploads
from vitviz.app.components import WEB, Form, device_panel, device_want, download_row, examples, explain, figure
from vitviz.app.serving import MODEL, on
from vitviz.app.tab import Tab, by_component, layout, narrow
from vitviz.specs import views as declared
from vitviz.views.forward import IMAGE_KEY

F = declared.FORWARD


@layout("forward")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("forward")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            model = form.add(F["model"])
            side = form.add(F["resolution"])
            go = gr.Button("Run the forward pass", variant="primary")
            on_device, device_view, device_make = device_panel("forward", draws=("forward_device.js",))
            gr.Button("Start the guided tour (10 steps)", link=lessons.tour_link(), elem_id="start-tour")
            dl_button, dl_file = download_row("forward-bundle")
            photos_note = examples(src, uploads.PHOTOS + uploads.SCENES, "forward-photos-note")
            explain("A Vision Transformer in one pass: the picture is cut into patches, each patch becomes a token, "
                    "the tokens pass through the same kind of block again and again, and one token, [CLS], "
                    "carries the answer out. Every stage here holds this picture's real numbers; open one to see "
                    "its equation and the view that explains it.")
        with gr.Column(scale=2):
            note = gr.Markdown(elem_id="forward-notice")
            summary = gr.Markdown(elem_id="forward-summary")
            stages = gr.HTML(elem_id="forward-diagram", css_template=(WEB / "forward.css").read_text())
            drawn_here("forward-device-diagram")
    with gr.Accordion("The residual stream: what each block adds", open=True, elem_id="residual-box"):
        with gr.Row():
            layer = form.add(F["layer"], elem_id="forward-layer")  # on the device: its own (forward_device.js)
            cmap = form.add(F["cmap"])
        drawn_here("forward-device-residual")
        residual = figure("forward-residual")
        updates = figure("forward-updates")
    with gr.Accordion("The logit lens: how the answer forms, layer by layer", open=True, elem_id="lens-box"):
        lens_note = gr.Markdown(elem_classes="explain", elem_id="forward-lens-note")
        drawn_here("forward-device-lens")
        lens = figure("forward-lens")
        lens_map = figure("forward-lens-map")
    tab = Tab("forward", form, note, gr_tab, default="cat.png", offline_default=uploads.SCENES[0],
              model_field=F["model"])
    tab.extras = {"photos_note": photos_note, "forward_device": on_device}

    def render(sh):
        return (tab.note_text(sh), sh.texts["text"], sh.data["diagram"], tab.used(F["resolution"], sh),
                narrow(F["layer"], sh), sh.figures["residual"], sh.figures["updates"], sh.texts["lens"],
                sh.figures.get("lens"), sh.figures.get("lens_map"))

    main = tab.event(F, render, [note, summary, stages, side, layer, residual, updates, lens_note, lens, lens_map])
    on(tab.answer_triggers([go.click, model.change, side.release, layer.release, cmap.change]), main, main.inputs,
       main.outputs, trigger_mode="always_last", **MODEL).then(None, None, None, js=tab.reveal("#forward-notice"))
    # each stage's link opens its view with this picture: the page's name for it goes where the diagram left room
    stages.change(None, [stages, tab.key], None, api_visibility="private",
                  js="(_h, k) => { document.querySelectorAll('#forward-diagram a').forEach((a) => { a.href = "
                     f"a.href.replace({IMAGE_KEY!r}, encodeURIComponent(k || '')); }}); }}")
    tab.download(F, dl_button, dl_file, **MODEL)
    # compute on this device: the same graph as the Attention tab's, its forward-pass outputs drawn by the panel
    # (forward_device.js) into the places above that show the server's figures otherwise
    manifest = by_component([on_device, model, side], _device_manifest, "forward_device_model", progress=True)
    on(device_make.click, manifest, manifest.inputs, device_view, trigger_mode="always_last", **MODEL)
    # (the colour map and the layer by their change, which a link's settings fire too: only the drawing follows them;
    # the side by a hand's release and by a link within the page that changes it, Tab.by_hand)
    on(Tab.by_hand([on_device.change, model.change, side.release, cmap.change, layer.change]), None,
       [on_device, model, side, cmap, layer], None, js=device_want("forward"))
    tab.finish()
    return tab


def drawn_here(elem_id: str) -> gr.HTML:
    """An empty place the device's Forward-pass view draws into (render/web/forward_device.js; shown only while the
    Forward pass is computed on the device)."""
    css = (WEB / "forward.css").read_text() + (WEB / "forward_device.css").read_text()
    return gr.HTML(None, elem_id=elem_id, apply_default_css=False, html_template='<div class="vx-fd"></div>',
                   css_template=css)


def _device_manifest(on: bool, model: str, side: float, progress) -> dict | None:
    """The Forward pass's device manifest when the page could not get it made: nothing while its switch is off;
    else the model's at the short side asked (with the stages the device's view draws)."""
    from vitviz.app.manifests import device_manifest

    if not on:
        return None
    values = F.check({"model": model, "resolution": side})
    return device_manifest(values, lambda f, msg: progress(f, desc=msg), tab="forward")
