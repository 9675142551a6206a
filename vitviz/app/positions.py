"""The Position-embeddings tab: sinusoidal and learned tables, their similarity, and relative positions."""

from __future__ import annotations

import gradio as gr

from vitviz.app.components import Form, browser_view, download_row, explain, figure, figure_value
from vitviz.app.serving import MODEL, friendly, on
from vitviz.app.tab import Tab, layout
from vitviz.specs import views as declared
from vitviz.views import posembed as posembed_view

P = declared.POSITIONS


@layout("positions")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("positions")
    with gr.Row():
        with gr.Column(scale=1):
            source = form.add(P["source"])
            with gr.Row():
                rows, cols = form.add(P["rows"]), form.add(P["cols"])
            dim = form.add(P["dim"])
            step = form.add(P["step"], visible=False)
            form.add(P["kind"])
            with gr.Row():
                form.add(P["new_rows"]), form.add(P["new_cols"])
            form.add(P["cmap"])
            go = gr.Button("Show", variant="primary")
            dl_button, dl_file = download_row("pe-bundle")
            shown_examples = gr.Examples([["2D sinusoidal", 2, 2, 8], ["2D sinusoidal", 14, 14, 64],
                                          ["1D sinusoidal", 14, 14, 64], [declared.TIMELINE, 8, 8, 8]],
                                         inputs=[source, rows, cols, dim], label="examples (click one)")
            explain(
                "Attention alone cannot tell where a patch came from: shuffle the tokens and it computes the "
                "same thing, shuffled. So each patch gets a position vector added. Sinusoidal ones are a fixed "
                "formula (in 2D: half the dimensions code the row, half the column) that makes nearby positions "
                "similar; learned ones start random and training arranges them as the task needs. Look whether "
                "neighbours end up alike (the grid) or positions equally far from the centre do: each little map "
                "of the mosaic is one position's similarity to all others, and the text above says which, from "
                "the table's own numbers.")
        with gr.Column(scale=2):
            note = gr.Markdown(elem_id="positions-note", elem_classes="vx-note")
            summary = gr.Markdown(elem_id="pe-summary")
            pe_map = browser_view("posembed", "pe-explorer", "position similarity: point at a position or use the "
                                  "arrow keys")
            mosaic = figure("pe-mosaic", "Similarity mosaic: tile (r, c) is position (r, c) against all; click a tile")
            tile = figure("pe-tile")
            matrix = figure("pe-matrix")
            sim = figure("pe-sim")
            resampled = figure("pe-resampled", "The table resampled bicubically (as timm does for a new resolution)")
    with gr.Accordion("Relative positions: 2D rotary encoding (RoPE)", open=False) as rope_box:
        explain("Rotary encoding adds nothing to the tokens. It turns each query and key in small 2D planes by "
                "angles proportional to its row (half the dimensions) and column (the other half), so the score "
                "q·k depends only on how far apart the two patches are. The map puts one vector at the centre "
                "and at every nearby key: the score falls off with the row and column offset, the same in every "
                "place of the image.")
        with gr.Row():
            rope_in = [form.add(declared.ROTARY[n]) for n in ("dim", "reach", "base")]
        rope = figure("pe-rotary")
    with gr.Accordion("Relative positions: Swin's relative position bias", open=False) as rpb_box:
        explain("Swin adds no position vector to the tokens either. Inside a window, each head adds a number to every "
                "query-key score, looked up in a table by their offset. The same table serves every query, so what "
                "a head prefers depends on where a key is relative to the query, never on where it is in the image.")
        with gr.Row():
            rpb_source = form.add(declared.RELATIVE_BIAS["source"])
            rpb_m, rpb_heads = form.add(declared.RELATIVE_BIAS["window"]), form.add(declared.RELATIVE_BIAS["heads"])
            rpb_block = form.add(declared.RELATIVE_BIAS["block"], visible=False)
        with gr.Row():
            rpb_rest = [form.add(declared.RELATIVE_BIAS[n]) for n in ("head", "row", "col")]
        rpb_note = gr.Markdown()
        rpb = figure("pe-relative-bias")
    tab = Tab("positions", form, note, gr_tab)


    main = tab.event(P, lambda sh: (tab.note_text(sh), sh.texts["summary"], sh.figures["mosaic"], sh.figures["tile"],
                                    sh.figures["matrix"], sh.figures["similarity"], sh.figures["resampled"],
                                    sh.data["similarity_map"]),  # the figures and the map drawn in the browser
                     [note, summary, mosaic, tile, matrix, sim, resampled, pe_map], needs_picture=False)
    on([go.click] + [form[f].change for f in P.settings()], main, main.inputs, main.outputs,
       trigger_mode="always_last", js=tab.asked).then(None, None, None, js=tab.reveal("#pe-summary"))
    tab.on_open = (main, main.inputs, main.outputs)

    def controls(source_value):  # UI only: the grid and D apply to formulas, the checkpoint to the timeline
        formula = source_value in declared.SINUSOIDAL
        return (gr.Slider(visible=formula), gr.Slider(visible=formula), gr.Slider(visible=formula),
                gr.Slider(visible=source_value == declared.TIMELINE))

    on(source.change, controls, source, [rows, cols, dim, step], queue=False)

    def tile_at(last, evt: gr.SelectData):
        def draw(_picture, values):
            grid, _, _ = posembed_view.grid_for(values)
            row, col = posembed_view.tile_at(grid, values["kind"], evt.index[0], evt.index[1])
            return figure_value(posembed_view.tile_figure(grid, values["kind"], row, col, values["cmap"]))

        return tab.follow(draw, main, P)(last)

    on(mosaic.select, friendly(tile_at), main.last, tile)
    tab.download(P, dl_button, dl_file)

    tab.accordion(declared.ROTARY, rope_box, [c.release for c in rope_in], [("rotary", rope)])
    tab.accordion(declared.RELATIVE_BIAS, rpb_box, [rpb_source.change] + [c.release for c in [rpb_m, rpb_heads, rpb_block]
                                                                      + rpb_rest],
                  [("relative_bias", rpb)], ("text", rpb_note), **MODEL)

    def rpb_controls(source_value):  # UI only: M and the head count shape the formula; a Swin brings its own
        formula = source_value == declared.RPB_FORMULA
        return gr.Slider(visible=formula), gr.Slider(visible=formula), gr.Slider(visible=not formula)

    on(rpb_source.change, rpb_controls, rpb_source, [rpb_m, rpb_heads, rpb_block], queue=False)
    tab.finish()
    tab.relink_after(shown_examples.load_input_event, [P["source"], P["rows"], P["cols"], P["dim"]])
    return tab
