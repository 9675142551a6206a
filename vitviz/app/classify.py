"""The Classify tab: a pretrained ViT's top 5, where its class token looked, class relevance and two experiments."""

from __future__ import annotations

import gradio as gr

from vitviz.app import uploads
from vitviz.app.components import Form, device_panel, device_want, download_row, examples, explain, figure
from vitviz.app.serving import MODEL, on
from vitviz.app.tab import Tab, by_component
from vitviz.specs import views as declared

C = declared.CLASSIFY


def build(gr_tab: gr.Tab) -> Tab:
    form = Form("classify")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            model = form.add(C["model"])  # a list of long names: a dropdown, from the declaration
            go = gr.Button("Classify", variant="primary")
            on_device = gr.Checkbox(False, label="Compute on this device (the picture stays here)",
                                    elem_id="classify-device-switch")
            device_view, device_make = device_panel("classify-device-panel", "classify-device-picture")
            dl_button, dl_file = download_row("classify-bundle")
            photos_note = examples(src, uploads.PHOTOS + uploads.SCENES, "classify-photos-note")
            explain(
                "After the last block only the class token's vector is kept; one linear layer turns it into a "
                "score per class. The maps show which patches the class token drew on for this prediction: the "
                "last layer alone, and rolled out through all layers.")
        with gr.Column(scale=2):
            note = gr.Markdown(elem_id="classify-notice")
            top5 = gr.Label(num_top_classes=5, label="top 5", elem_id="classify-top5")
            maps = figure("classify-maps")
            facts = gr.Markdown(elem_classes="vx-table")
    with gr.Accordion("Class-specific relevance: which patches raised this class's score", open=False) as rel_box:
        rank = form.add(declared.RELEVANCE["rank"])
        rel_note = gr.Markdown()
        rel_fig = figure("classify-relevance")
    with gr.Accordion("Experiment: shuffle the patches", open=False) as sh_box:
        explain(
            "Cut the picture into its patches and deal them out in a random order. The model still sees the "
            "same patch contents, only their places change. With position embeddings the prediction moves. Take "
            "the position embeddings out and the class token's output is identical for both orders: attention "
            "itself has no idea of order. Position is information the model only has because we add it.")
        with gr.Row():
            form.add(declared.SHUFFLE["seed"], component=gr.Number(value=0, minimum=0, step=1,
                                                                      label=declared.SHUFFLE["seed"].label))
            sh_btn = gr.Button("Shuffle and compare")
        with gr.Row():
            with gr.Column(min_width=300):
                scrambled = figure("shuffled", "The patches, shuffled")
            sh_md = gr.Markdown(elem_classes="vx-table")
    with gr.Accordion("Experiment: patch size trade-off", open=False) as tr_box:
        explain("Same ViT-S body with patches of 8, 16 and 32 pixels at 224 px, timed on this machine.")
        tr_md = gr.Markdown(elem_classes="vx-table")
    tab = Tab("classify", form, note, gr_tab, default="cat.png", offline_default=uploads.SCENES[0],
              model_field=C["model"])
    tab.extras = {"photos_note": photos_note, "classify_device": on_device}

    main = tab.event(C, lambda sh: (tab.note_text(sh), sh.numbers["top5"], sh.figures["maps"], sh.texts["facts"]),
                     [note, top5, maps, facts])
    on(tab.answer_triggers([go.click, model.change]), main, main.inputs, main.outputs, trigger_mode="always_last",
       **MODEL).then(None, None, None, js=tab.reveal("#classify-notice"))
    tab.download(C, dl_button, dl_file, **MODEL)
    # compute on this device: the classifier's manifest at its checkpoint size (what this tab's server path uses)
    manifest = by_component([on_device, model], _device_manifest, "classify_device_model", progress=True)
    on(device_make.click, manifest, manifest.inputs, device_view, trigger_mode="always_last", **MODEL)
    on([on_device.change, model.change], None, [on_device, model], None,
       js=device_want("classify"))
    on_device.change(None, on_device, None, js="(on) => window.vitvizLink?.set({ device: on ? '1' : null })")
    tab.accordion(declared.RELEVANCE, rel_box, [rank.change], [("relevance", rel_fig)], ("text", rel_note), **MODEL)
    tab.accordion(declared.SHUFFLE, sh_box, [sh_btn.click], [("shuffled", scrambled)], ("text", sh_md), **MODEL)
    tab.accordion(declared.TRADEOFF, tr_box, [], note=("text", tr_md), **MODEL)
    tab.finish()
    return tab


def _device_manifest(on: bool, model: str, progress) -> dict | None:
    """The Classify tab's device manifest when the page could not get it made: nothing while its switch is off;
    else the classifier's at its checkpoint's own size (the picture prepared as this tab's server path does)."""
    from vitviz.app.attention import device_manifest
    from vitviz.models import cache as models

    if not on:
        return None
    values = C.check({"model": model})
    runner = models.get_model(values["model"], lambda f, msg: progress(f, desc=msg))
    return device_manifest({"model": values["model"], "resolution": runner.resolution}, tab="classify")
