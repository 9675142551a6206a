"""The ViT-vs-CNN tab: receptive fields, shifting the picture, data efficiency and hybrid stages."""

from __future__ import annotations

import gradio as gr

from vitviz.app import uploads
from vitviz.app.components import Form, download_row, examples, explain, figure
from vitviz.app.serving import MODEL, on
from vitviz.app.tab import Tab, layout
from vitviz.specs import views as declared

R, T, D, H = declared.RECEPTIVE_FIELD, declared.TRANSLATION, declared.DATA_EFFICIENCY, declared.HYBRID_STAGES


@layout("vitcnn")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("vitcnn")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            vit = form.add(R["vit"])
            cnn = form.add(R["cnn"])
            side = form.add(R["resolution"])
            go = gr.Button("Compare how far they look", variant="primary")
            dl_button, dl_file = download_row("vitcnn-bundle")
            photos_note = examples(src, uploads.PHOTOS + uploads.SCENES, "vitcnn-photos-note")
            explain(
                "A convolution looks at a 3×3 neighbourhood; a CNN sees far only by stacking many of them and "
                "shrinking the grid. Attention lets every patch look at every other patch in the first layer. The "
                "chart puts both on one scale: how far from a unit (or a query patch) the pixels that matter lie.")
        with gr.Column(scale=2):
            note = gr.Markdown(elem_id="vitcnn-notice")
            reach = figure("vitcnn-reach")
            maps = figure("vitcnn-erf")
            text = gr.Markdown(elem_classes="vx-table")
    with gr.Accordion("Shift the picture: equivariance by construction, or not", open=False) as t_box:
        explain("Move the picture a few pixels to the right. A convolution's output moves with it; every stride "
                "breaks that for shifts it does not divide. A ViT cuts the picture into fixed P×P squares, so its "
                "patch tokens only move along when the shift is a whole number of patches.")
        with gr.Row():
            classifier = form.add(T["classifier"])
            t_go = gr.Button("Shift and compare")
        t_note = gr.Markdown(elem_classes="vx-table")  # its table scrolls sideways on a phone
        t_errors = figure("vitcnn-shift-errors")
        t_stability = figure("vitcnn-shift-stability")
        t_dl, t_file = download_row("vitcnn-shift-bundle")
    with gr.Accordion("Data efficiency: the same budget, more and more scenes", open=False) as d_box:
        train = form.add(D["train"])
        d_fig = figure("vitcnn-sweep")
        d_text = gr.Markdown(elem_classes="vx-table")
        d_dl, d_file = download_row("vitcnn-sweep-bundle")
    with gr.Accordion("Hybrid stages: convolutions first, attention later (CoAtNet)", open=False) as h_box:
        h_side = form.add(H["side"])
        h_fig = figure("vitcnn-stages")
        h_text = gr.Markdown(elem_classes="vx-table")
        h_dl, h_file = download_row("vitcnn-stages-bundle")

    tab = Tab("vitcnn", form, note, gr_tab, default="cat.png", offline_default=uploads.SCENES[0],
              model_field=R["vit"])
    tab.extras = {"photos_note": photos_note}

    main = tab.event(R, lambda sh: (tab.note_text(sh), sh.figures["reach"], sh.figures["maps"], sh.texts["text"],
                                    tab.used(R["resolution"], sh)),  # the short side shows the size used
                     [note, reach, maps, text, side])
    on(tab.answer_triggers([go.click, vit.change, cnn.change, side.release]), main, main.inputs, main.outputs,
       trigger_mode="always_last", **MODEL).then(None, None, None, js=tab.reveal("#vitcnn-notice"))
    tab.download(R, dl_button, dl_file, **MODEL)
    tab.accordion(T, t_box, [t_go.click, classifier.change],
                  [("errors", t_errors), ("stability", t_stability)], ("text", t_note), **MODEL)
    tab.download(T, t_dl, t_file, **MODEL)
    tab.accordion(D, d_box, [train.change], [("sweep", d_fig)], ("text", d_text))
    tab.download(D, d_dl, d_file)
    tab.accordion(H, h_box, [h_side.release], [("stages", h_fig)], ("text", h_text))
    tab.download(H, h_dl, h_file)
    tab.finish()
    return tab
