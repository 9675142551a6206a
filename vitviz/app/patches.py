"""The Patches tab: an image becomes a grid of patch tokens (and the toy, the filters, Swin's windows)."""

from __future__ import annotations

import gradio as gr

from vitviz.app import uploads
from vitviz.app.components import Form, browser_view, download_row, examples, explain, figure, figure_value
from vitviz.app.serving import MODEL, friendly, on
from vitviz.app.tab import Tab, layout
from vitviz.specs import views as declared
from vitviz.views import patches as patches_view


@layout("patches")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("patches")
    with gr.Row():
        with gr.Column(scale=1):
            src = form.add(declared.IMAGE)
            for f in (declared.PATCH, declared.RESOLUTION, declared.POLICY, declared.MODEL_SIZE):
                form.add(f)
            go = gr.Button("Cut into patches", variant="primary")
            examples(src, uploads.PHOTOS + uploads.SCENES[:2] + ("toy_8x8.png",))
            toy_setup = gr.Button("The toy from the notes: 8×8 image, 4×4 patches")
            dl_button, dl_file = download_row("patches-bundle")
            explain(
                "A ViT never sees pixels one by one. It cuts the image into square patches, lays them out "
                "row by row (p00, p01, …), flattens each into a list of numbers, and maps that list to one "
                "vector with the same linear layer for every patch. Those vectors are the tokens. Halve the "
                "patch side and you get four times as many patch tokens and sixteen times as many patch pairs to "
                "attend over (a little less with the class token counted: the summary gives the exact ratio).")
        with gr.Column(scale=2):
            note = gr.Markdown(elem_id="patches-note", elem_classes="vx-note")
            summary = gr.Markdown(elem_id="patch-summary")
            grid = figure("patch-grid", "The patch grid: click a patch (labels where they fit)")
            inspector_view = browser_view("patches", "patch-inspector", "patch inspector: point at a patch or use the "
                                          "arrow keys")
            equivalence = gr.Markdown()
            with gr.Accordion("The clicked patch, drawn on the server (to download)", open=False,
                              elem_id="patch-vectors-box") as vec_box:
                vectors = figure("patch-vectors", "The clicked patch (the centre one until you click the grid)")
                clicked, vec_open = gr.State(None), gr.State(False)
            costs = gr.Markdown(elem_classes="vx-table", elem_id="cost-table")
            chart = figure("cost-chart")
    with gr.Accordion("The 8×8 toy, step by step", open=False) as toy_box:
        with gr.Row():  # the step beside its figure: each step is seen without scrolling at 1280×720
            with gr.Column(scale=1, min_width=260):
                toy_step = form.add(declared.TOY["step"])
                toy_caption = gr.Markdown()
            with gr.Column(scale=2, min_width=300):
                toy = figure("toy-step")
    with gr.Accordion("What a trained patch projection learned: its filters' principal components",
                      open=False) as filt_box:
        explain("Each embedding dimension has its own P×P×3 filter: the patch's pixels, weighted and summed. "
                "Principal components show what the filters share. The ViT paper found colour blobs and stripes "
                "at several frequencies, like a CNN's first layer; that comes from training, not from the design.")
        with gr.Row():
            form.add(declared.FILTERS["model"])
            filt_btn = gr.Button("Show its filters", scale=0, min_width=220)
        filt_note = gr.Markdown()
        filters = figure("patch-filters")
    with gr.Accordion("Windowed attention (Swin): windows, shifted windows, and what attention costs",
                      open=False) as win_box:
        explain("Global attention compares every patch with every other: N² scores, so doubling the picture's side "
                "makes sixteen times as many. Swin lets a patch attend only inside its M×M window (N·M² scores: "
                "linear in N) and shifts the windows by half a window in every second block, so information still "
                "crosses the borders. The plot uses this tab's patch size and model width.")
        with gr.Row():
            for name in ("window", "row", "col"):
                form.add(declared.WINDOWS[name])
        win_note = gr.Markdown()
        win_fig = figure("swin-windows")
        win_cost = figure("swin-cost")
    tab = Tab("patches", form, note, gr_tab, default="cat.png")

    # the page's events: the main answer, then what reads the answer on screen (main.last) and nothing else, so
    # a refused setting (which leaves the answer as it was) leaves them as they were too
    # (the patch inspector's data, drawn in the browser, comes with the answer: one event, not a follow-up)
    main = tab.event(declared.PATCHES, lambda sh: (tab.note_text(sh), sh.texts["summary"], sh.figures["grid"],
                                               sh.texts["equivalence"], sh.texts["costs"], sh.figures["costs"], None,
                                               sh.data["inspector"]),
                     [note, summary, grid, equivalence, costs, chart, clicked, inspector_view])

    def opened(last, clicked_at, is_open):
        """The clicked patch's figure while its accordion is open: the last clicked patch, or the centre one, so
        the open panel is never empty; nothing (no figure, no work) while it is closed."""
        if not is_open:
            return figure_value(None)

        def draw(picture, values):
            fitted, _ = patches_view.fitted_for(uploads.picture(picture), values)
            gh, gw = fitted.grid
            row, col = clicked_at if clicked_at is not None else (gh // 2, gw // 2)
            return figure_value(patches_view.patch_vectors(fitted, row, col))

        return tab.follow(draw, main, declared.PATCHES)(last)

    show_clicked = friendly(opened)
    # one event for every trigger. A hand's choice (input, not change): a link that sets the picture and the patch
    # size together is answered once, by the picture's name (its change and the radio's queued two answers); one
    # that keeps the picture opens the answer's door instead (Tab.by_hand)
    chosen = [form[f].input for f in (declared.PATCH, declared.POLICY, declared.MODEL_SIZE)]
    shown = on(tab.answer_triggers([go.click, *chosen, form[declared.RESOLUTION].release]),
               main, main.inputs, main.outputs, trigger_mode="always_last")
    shown.then(None, None, None, js=tab.reveal("#patch-summary"))
    # a new picture: its centre patch, asked of the server only while its panel is open (a closed one sends nothing)
    tab.while_open("patch-vectors-box", [shown.success], show_clicked, [main.last, clicked, vec_open], vectors,
                   opened=vec_open)

    def click(last, evt: gr.SelectData) -> tuple:
        def draw(picture, values):
            fitted, _ = patches_view.fitted_for(uploads.picture(picture), values)
            row, col = patches_view.click_to_patch(evt.index[0], evt.index[1], fitted.patch,
                                                   patches_view.scale_of(fitted))
            image, _ = patches_view.grid_image(fitted, highlight=(row, col))
            return figure_value(image), figure_value(patches_view.patch_vectors(fitted, row, col)), (row, col)

        return tab.follow(draw, main, declared.PATCHES)(last)

    on(grid.select, friendly(click), main.last, [grid, vectors, clicked])
    on(on(vec_box.expand, lambda: True, None, vec_open, queue=False).then, show_clicked,
       [main.last, clicked, vec_open], vectors)
    on(vec_box.collapse, lambda: False, None, vec_open, queue=False)
    tab.download(declared.PATCHES, dl_button, dl_file)
    tab.accordion(declared.TOY, toy_box, [toy_step.change], [("toy", toy)], ("caption", toy_caption))
    tab.accordion(declared.FILTERS, filt_box, [filt_btn.click, form[declared.FILTERS["model"]].change],
                  [("filters", filters)], ("text", filt_note), **MODEL)
    tab.accordion(declared.WINDOWS, win_box, [form[declared.WINDOWS[n]].release for n in ("window", "row", "col")],
                  [("windows", win_fig), ("cost", win_cost)], ("text", win_note))
    toy_set = on(toy_setup.click, lambda: (uploads.example("toy_8x8.png"), 4, 8, "stretch"), None,
                 [src, form[declared.PATCH], form[declared.RESOLUTION], form[declared.POLICY]], preprocess=True)
    tab.relink_after(toy_set, [declared.PATCH, declared.RESOLUTION, declared.POLICY])
    tab.finish()
    return tab
