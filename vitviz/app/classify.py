"""The Classify tab: a pretrained ViT's top 5, where its class token looked, class relevance and two experiments."""

from __future__ import annotations

import json

import gradio as gr

from vitviz.app import uploads
from vitviz.app.components import (Form, browser_view, device_panel, device_want, download_row, examples, explain,
                                   figure)
from vitviz.app.serving import MODEL, friendly, on
from vitviz.app.tab import Tab, by_component, layout
from vitviz.specs import views as declared

C = declared.CLASSIFY
P = declared.PREDICT


@layout("classify")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("classify")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            model = form.add(C["model"])  # a list of long names: a dropdown, from the declaration
            go = gr.Button("Classify", variant="primary")
            on_device, device_view, device_make = device_panel("classify")
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
    with gr.Accordion("Class maps: which patches raised this class's score (relevance, AttnLRP, LeGrad)",
                      open=False) as rel_box:
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
    tab.accordion(declared.RELEVANCE, rel_box, [rank.change], [("relevance", rel_fig)], ("text", rel_note), **MODEL)
    tab.accordion(declared.SHUFFLE, sh_box, [sh_btn.click], [("shuffled", scrambled)], ("text", sh_md), **MODEL)
    tab.accordion(declared.TRADEOFF, tr_box, [], note=("text", tr_md), **MODEL)
    _test_the_map(tab, form)
    tab.finish()
    return tab


def _test_the_map(tab: Tab, form: Form) -> None:
    """The section 'Test the map': its model, class and random orders (shared by its views), then each view in its
    panel: deletion and insertion, randomised weights, predict, then test (laid out here: its picker), and the report
    card."""
    from vitviz.views import RECORDS

    gr.Markdown("## Test the map\nAn attention map is a hint, not proof that the model used those patches. These "
                "tests ask the model itself, on this picture, and the report card shows where two kinds of test "
                "disagree.", elem_id="test-the-map")
    with gr.Row():
        shared = [form.add(P["model"]), form.add(P["rank"]), form.add(P["seeds"])]
    again = [shared[0].change, shared[1].change, shared[2].release, tab.key.change]  # the section's own, a picture
    tab.panel(RECORDS["deletion"], again)
    tab.panel(RECORDS["randomise"], [shared[0].change, tab.key.change])
    seeds = shared[2]
    with gr.Accordion("Predict, then test", open=False, elem_id="predict-box") as box:
        explain("Which patches does the model need for its answer? Mark them on the picture as the model sees it "
                "(click or drag), then see what taking them out (or keeping only them) does to its answer, beside "
                "the same number of patches chosen by each map and at random. The maps stay hidden until you have "
                "chosen: predict first, then test.")
        with gr.Row():
            with gr.Column(min_width=300):
                carrier = form.hold_in_browser(P, (P["patches"],))
                picker = browser_view("picker", "predict-picker", "your patches: click or drag on the picture to "
                                      "mark the patches you think the model needs; arrow keys move, space marks")
            with gr.Column(min_width=300):
                mode = form.add(P["mode"])
                note = gr.Markdown(elem_classes="vx-table")
                fig = figure("predict-choice", visible=False)  # until the marks are tested
    _predict_panel(tab, P, box, picker, carrier, [mode.change, seeds.release, form[P["rank"]].change,
                                                  form[P["model"]].change], note, fig)
    tab.panel(RECORDS["report"], again)  # the report card: every map under token dropping and pixel perturbation


def _predict_panel(tab: Tab, view, box: gr.Accordion, picker: gr.HTML, carrier: gr.HTML, triggers: list,
                   note: gr.Markdown, fig: gr.Image) -> None:
    """'Predict, then test': the picker shows the picture as the model sees it when the panel opens (no map yet:
    predict first); the student's marks (the carrier), the mode, the class and the seeds then test the choice
    (the view's answer: the figure, the text, and the picker with the marks)."""
    from vitviz.models import cache as models
    from vitviz.views.faithful import picker_payload

    is_open = gr.State(False)
    form = tab.form
    inputs = form.inputs(view)

    def grid(*args):  # the picker's picture, grid and marks, for the form's picture and model (UI only)
        *given, showing = args
        if not showing:
            return gr.skip()
        picture, raw = form.values(view, tuple(given))
        if picture is None:
            return gr.skip()
        values = view.check(raw)
        runner = models.get_model(values["model"])
        return picker_payload(runner, uploads.picture(picture), values["patches"])

    def render(sh):
        return sh.data["picker"], tab.note_text(sh) + sh.texts["text"], sh.figures["choice"]

    event = tab.event(view, render, [picker, note, fig], gate=is_open)
    opened = on(box.expand, lambda: True, None, is_open, queue=False)
    on(box.collapse, lambda: False, None, is_open, queue=False)
    tab.while_open("predict-box", [tab.key.change, form[view["model"]].change], friendly(grid), inputs + [is_open],
                   picker, name="grid", opened=is_open, **MODEL)
    on(opened.then, friendly(grid), inputs + [is_open], picker, **MODEL)
    on(tab.by_hand([carrier.change] + triggers), event, event.inputs, event.outputs, trigger_mode="always_last",
       **MODEL)

    def when_marked(values: dict, request: gr.Request, progress=gr.Progress()):
        """Opening the panel tests the marks it already holds (a link's); with none, it only shows the picker."""
        try:
            held = json.loads(values[carrier] or "{}")
        except (TypeError, ValueError):
            held = {}
        if not (isinstance(held, dict) and held.get("patches")):
            return tuple(gr.skip() for _ in event.outputs)
        return event(values, request, progress)

    on(opened.then, when_marked, event.inputs, event.outputs, **MODEL)


def _device_manifest(on: bool, model: str, progress) -> dict | None:
    """The Classify tab's device manifest when the page could not get it made: nothing while its switch is off;
    else the classifier's at its checkpoint's own size (the picture prepared as this tab's server path does)."""
    from vitviz.app.manifests import device_manifest
    from vitviz.models import cache as models

    if not on:
        return None
    values = C.check({"model": model})
    runner = models.get_model(values["model"], lambda f, msg: progress(f, desc=msg))
    return device_manifest({"model": values["model"], "resolution": runner.resolution}, tab="classify")
