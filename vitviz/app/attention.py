"""The Attention tab: the explorer (drawn in the browser), the server's figures of the same view, and the views in
its accordions (registers, training timeline, inside one head, feature PCA, two models side by side).

The explorer's layer, head, threshold, opacity, colormap and pinned patch are the Attention view's settings: the
browser holds them (a carrier element, :meth:`vitviz.app.components.Form.hold_in_browser`), and the server's
figures, the download and the link all read them from there. There is no second set of those controls.
"""

from __future__ import annotations

import json
import logging

import gradio as gr

from vitviz import assets
from vitviz.app import uploads
from vitviz.app.components import (
    Form,
    browser_carrier,
    browser_view,
    device_panel,
    device_want,
    download_row,
    examples,
    explain,
    figure,
)
from vitviz.app.manifests import HELD, device_manifest
from vitviz.app.serving import MODEL, endpoint, on
from vitviz.app.tab import Tab, by_component, layout
from vitviz.models.runner import picture_address
from vitviz.render import browser
from vitviz.specs import views as declared
from vitviz.views import attention as attention_view
from vitviz.views.shown import plain

A = declared.ATTENTION
log = logging.getLogger("vitviz")


def explorer_payload(picture, values: dict, progress=None, inline: bool = False) -> dict:
    """What the explorer draws (data, sent once per picture): the analysis and the view's settings as used, and
    ``adjusted``: each setting not used as asked, with what was asked and why (as every view's answer says); with
    ``inline`` (the API) the first map's data in the answer itself, else the names the browser fetches them by."""
    rgb = uploads.picture(picture)
    a, settled = attention_view.analysis_for(rgb, values, progress)
    return browser.attention_payload(a, settled.values, {f.name: f for f in HELD}, inline=inline) | {
        "picture": picture_address(rgb),  # its (keyed) address: made again from it while the server has the picture
        "adjusted": plain(settled.adjusted())}


@layout("attention")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("attention")
    spread_from = assets.tiny_info().get("spread_from_step")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            model = form.add(A["model"])  # a list of long names: a dropdown, from the declaration
            side = form.add(A["resolution"])
            go = gr.Button("Show attention", variant="primary")
            on_device, device_view, device_make = device_panel("attention")
            dl_button, dl_file = download_row("attention-bundle")
            photos_note = examples(src, uploads.SCENES + uploads.PHOTOS, "attention-photos-note")
            explain(
                "The class token gathers information from all patches; its attention row says how much it "
                "took from each. DINO models learned without any labels, yet their heads often outline the main "
                "object (the offline shapes model learned with labels, on shapes only: expect this from DINO). "
                "The contour keeps the fewest patches holding the chosen share of a head's attention. "
                "Point at any patch to see where it looks instead. Rollout follows attention through every "
                "layer, counting the skip connections too.")
        with gr.Column(scale=3):
            note = gr.Markdown(elem_id="attention-notice")
            explorer = browser_view("explorer", "attention-explorer",
                                    "attention explorer: point at a patch or use the arrow keys")
            carrier = form.hold_in_browser(A, HELD)
            again = browser_carrier("attention-again")  # the explorer's picture, sent back when the server forgot
            with gr.Row(elem_id="attn-crops"):  # hidden, captions too, while the device computes (theme.css)
                with gr.Column(min_width=200):
                    box = figure("attn-box", "Box around the head-mean mask")
                with gr.Column(min_width=200):
                    crop = figure("attn-crop", "Free crop from attention")
    with gr.Accordion("Figures drawn on the server, for the explorer's layer, threshold and colormap (to "
                      "download, and what the /attention API returns)", open=False) as figs_box:
        heads = figure("attn-heads")
        table = gr.Markdown(elem_classes="vx-table")
        query = figure("attn-query", "The pinned patch as the query, per head (pin a patch in the explorer)")
    with gr.Accordion("Rollout: attention followed through every layer", open=False) as roll_box:
        explain("Rollout follows the class token's attention back through every layer, counting the skip "
                "connections too. It needs every row of every layer's attention, so it is computed (from the "
                "queries and keys the explorer already has) when you open this panel.")
        with gr.Row():
            fusion, discard = form.add(declared.ROLLOUT["fusion"]), form.add(declared.ROLLOUT["discard"])
        roll_note = gr.Markdown()
        roll = figure("attn-rollout")
    with gr.Accordion("Mean attention distance per head", open=False) as dist_box:
        dist_note = gr.Markdown()
        dist = figure("attn-distance")
    with gr.Accordion("Registers: DINOv2 with and without", open=False) as reg_box:
        with gr.Row():  # the note wraps under the button on a narrow screen (never squeezed beside it)
            reg_btn = gr.Button("Compare on this image", scale=0, min_width=260)
            with gr.Column(scale=1, min_width=300):
                reg_note = gr.Markdown()
        reg_img = figure("registers")
    with gr.Accordion("Training timeline of the offline model", open=False) as tl_box:
        gr.Markdown("The embedded tiny ViT at each saved training step, on the current image (seen at 64 px), "
                    "all on one colour scale. Step 0 is the random initialisation: its attention is nearly even, "
                    "so 60% of it needs more than half the patches; training gathers it onto the shape." + (
                        f" From step {spread_from:,} on, training also charges any last-layer head that looks at "
                        "nearly the whole picture (not told where to look; see the model card), so a head that "
                        "stayed spread out until then has to pick a place." if spread_from else ""))
        tl_step = form.add(declared.TIMELINE_VIEW["step"])
        tl_strip = figure("timeline-strip")
        tl_heads = figure("timeline-heads")
    with gr.Accordion("Inside one head: q·k, softmax, weighted sum", open=False) as head_box:
        # the browser's view first: with a lesson's bar above it, it is what the first screen shows
        inside_view = browser_view("inside", "inside-head-view",
                                   "inside one head: point at a patch to make it the query")
        with gr.Row():
            inside = [form.add(declared.INSIDE_HEAD[n], **({"elem_id": "inside-layer"} if n == "layer" else {}))
                      for n in ("layer", "head", "row", "col", "cls")]
        explain("One head of one layer, for one query, with this picture's real numbers: the query vector q meets "
                "every key k, each score q·k/√d says how well they match, the softmax turns the scores into "
                "weights that sum to 1 (the attention row), and the head's output is the values added up with "
                "those weights. Point at a patch in the maps above to make it the query (your browser redoes the "
                "arithmetic at once, from the layer's q, k and v); the sliders set the query of the figure "
                "below, and what the link and the download hold. Its last panel checks our sum against what the "
                "model computed.")
        in_note = gr.Markdown()
        in_fig = figure("inside-head")
    with gr.Accordion("Patch-feature PCA: what the tokens have in common (DINOv2's colour view)",
                      open=False) as pca_box:
        pca_layer = form.add(declared.FEATURE_PCA["layer"])
        pca_note = gr.Markdown()
        pca_fig = figure("feature-pca")
    with gr.Accordion("Two models side by side, on one scale", open=False) as pair_box:
        with gr.Row():
            pair = [form.add(declared.COMPARE[n], component=gr.Dropdown(list(declared.COMPARE[n].options()),
                                                                     value=declared.COMPARE[n].default,
                                                                     label=declared.COMPARE[n].label))
                    for n in ("model_a", "model_b")]
            pair.append(form.add(declared.COMPARE["fraction"]))
        pair_btn = gr.Button("Compare")
        pair_note = gr.Markdown(elem_classes="vx-table")
        pair_fig = figure("attn-pair")
    tab = Tab("attention", form, note, gr_tab, default="cat.png", offline_default=uploads.SCENES[0],
              model_field=A["model"])
    tab.extras = {"registers": reg_btn, "registers_note": reg_note, "photos_note": photos_note,
                  "device": on_device}

    # the public API: the views' endpoints come from their records (tab.finish()); the explorer's data is its own
    endpoint(A, lambda pic, v: explorer_payload(pic, v, inline=True), name="explorer",
             doc="What the attention explorer draws in the browser, for the same settings (data): the class token's "
                 "maps, the fitted picture and the queries and keys of the layer asked for (of every layer when "
                 "small), base64, with their shapes; each further layer's (and the rollout) under 'base' + its part "
                 "name.")

    endpoint(declared.DEVICE_MODEL, lambda _pic, v: device_manifest(v), name="device_model",
             doc="What a device downloads to compute the attention explorer itself (the picture never leaves it): "
                 "the model's ONNX graph (served at /vitviz/device/<file>), its size, how to prepare a picture, the "
                 "labels; made on first use.")

    # the page: the explorer first (the main view: its data, the notice first, the short side as used, the ranges
    # of the accordions' sliders), then the server's figures of the same settings (which leave the notice alone:
    # text changing above the explorer would move it under the pointer)
    first = tab.event(A, lambda sh: (sh.data["explorer"], tab.note_text(sh) + sh.texts["info"],
                                     tab.used(A["resolution"], sh), *_limits(sh)),
                      [explorer, note, side] + inside + [pca_layer], shows="explorer")
    # what the first screen shows besides the explorer: the box and the crop (nothing else is drawn)
    screen = tab.event(A, lambda sh: (sh.figures["box"], sh.figures["crop"]), [box, crop],
                       only=frozenset(("box", "crop")))
    # (while the explorer's answer is asked, the explorer says since when: data-asking, read below)
    shown = on(tab.answer_triggers([go.click, model.change, side.release]), first, first.inputs, first.outputs,
               trigger_mode="always_last", **MODEL,
               js="(...a) => { const e = document.getElementById('attention-explorer'); "
                  "if (e) e.dataset.asking = String(performance.now()); window.vitvizLink?.asked('attention'); "
                  "return a; }")
    on(shown.success, screen, screen.inputs, screen.outputs, **MODEL)
    shown.then(None, None, None, js="() => { const e = document.getElementById('attention-explorer'); "
                                    "if (e) delete e.dataset.asking; (" + tab.reveal("#attention-notice") + ")(); }")
    # the server no longer holds the explorer's analysis (a restart, another process): the picture comes back from
    # the browser, through the queue like every request, and the explorer continues where it was
    inputs = form.inputs(A)
    settings = [c for c in inputs if c is not src]  # not the page's picture: after a restart its file may be gone
    resend = by_component([again] + settings, lambda *args: _payload_again(form, inputs.index(src), *args),
                          "explorer_again", progress=True)
    on(again.change, resend, resend.inputs, explorer, trigger_mode="always_last", **MODEL)
    # the explorer moved (a burst of changes ends): the server's figures follow what is on screen (the panels'
    # only while open); not while the explorer's answer is asked (a link setting the picture and the explorer's
    # settings at once): its success draws them, once
    asking = "Number(document.getElementById('attention-explorer')?.dataset.asking || 0)"
    tab.relay("attention-screen-refresh", [carrier.change], screen, screen.inputs, screen.outputs,
              when=f"!{asking} || performance.now() - {asking} > 30000", delay=50, after_link=True, tab=tab.name,
              trigger_mode="always_last", **MODEL)
    tab.download(A, dl_button, dl_file, **MODEL)
    # compute on this device: the manifest of the chosen model (its graph made on first use, through the queue like
    # every piece of work), whenever the switch, the model or the short side changes
    manifest = by_component([on_device] + inputs, lambda *args: _device_manifest(form, *args), "attention_device_model",
                            progress=True)
    on(device_make.click, manifest, manifest.inputs, device_view, trigger_mode="always_last", **MODEL)
    # the side by a hand's release, and by a link within the page that changes it (Tab.by_hand: a script's value
    # fires no release), so the device's picture is computed again at the side the link says
    on(Tab.by_hand([on_device.change, model.change, side.release]), None, [on_device, model, side], None,
       js=device_want("attention"))

    tab.accordion(A, figs_box, [carrier.change], [("heads", heads), ("query", query)], texts=[("table", table)],
                  only=frozenset(("heads", "query")), **MODEL)
    tab.accordion(declared.ROLLOUT, roll_box, [fusion.change, discard.release, carrier.change], [("rollout", roll)],
                  ("text", roll_note), **MODEL)
    tab.accordion(declared.DISTANCE, dist_box, [], [("distance", dist)], ("text", dist_note), **MODEL)
    tab.accordion(declared.REGISTERS, reg_box, [reg_btn.click], [("registers", reg_img)], ("note", reg_note), **MODEL)
    tab.accordion(declared.TIMELINE_VIEW, tl_box, [tl_step.release], [("strip", tl_strip), ("heads", tl_heads)], **MODEL)
    tab.accordion(declared.INSIDE_HEAD, head_box, [c.input for c in inside], [("inside_head", in_fig)], ("text", in_note),
                  browser=[("inside", inside_view)], **MODEL)
    tab.accordion(declared.FEATURE_PCA, pca_box, [pca_layer.input], [("feature_pca", pca_fig)], ("text", pca_note),
                  **MODEL)
    tab.accordion(declared.COMPARE, pair_box, [pair_btn.click], [("pair", pair_fig)], ("table", pair_note), **MODEL)
    tab.finish()
    return tab


def _device_manifest(form: Form, *args):
    """The device panel's manifest when the page could not get it made (:func:`made_manifest`): nothing while the
    switch is off; else :func:`device_manifest` for the form's settings (the graph made on first use)."""
    on, *given, progress = args
    if not on:
        return None
    _, raw = form.values(A, tuple(given))
    return device_manifest(A.check(raw), lambda f, msg: progress(f, desc=msg))


def _payload_again(form: Form, at: int, *args) -> dict:
    """The explorer's analysis made again, with the page's model, short side and the explorer's own settings
    (``at``: where the picture goes among the view's inputs), when the server no longer holds it. The explorer asks
    first by its picture's content address: the picture is read again from the server's own file when it still has
    it (nothing is uploaded again); else the answer asks for the picture (``{"resend": token}``), and the explorer
    sends the fitted picture back (a data: URL, read by the same intake as every picture)."""
    again, *settings, progress = args
    _, raw = form.values(A, tuple(settings[:at]) + (None,) + tuple(settings[at:]))
    try:
        sent = json.loads(again or "{}")
    except (TypeError, ValueError):
        sent = {}
    sent = sent if isinstance(sent, dict) else {}
    picture, token = sent.get("image"), sent.get("token")
    if not picture and isinstance(token, str):
        picture = uploads.file_of(sent.get("picture"))
        if picture is None:  # another process answered, or the file is gone
            return {"resend": token}
    if not picture:
        return gr.skip()
    made = explorer_payload(picture, A.check(raw), lambda f, msg: progress(f, desc=msg))
    return made | {"again": sent.get("at")}  # a new value even when the analysis is the same: the explorer rebuilds


def _limits(shown) -> tuple:
    """UI only: the inside-one-head and feature-PCA sliders span the layers, heads and grid of what is shown."""
    (gh, gw), depth, heads = shown.numbers["grid"], shown.numbers["layers"], shown.numbers["heads"]
    return (gr.Slider(maximum=depth), gr.Slider(maximum=heads - 1), gr.Slider(maximum=gh - 1),
            gr.Slider(maximum=gw - 1), gr.skip(), gr.Slider(maximum=depth))
