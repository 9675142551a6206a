"""vitviz: a Gradio app that shows how a Vision Transformer sees an image.

This file only wires the UI: every callback turns widget values into calls to
the ``vitviz`` library and its answers back into widget values. Nothing heavy
is loaded at import; models load on first use.

    python app.py        # http://127.0.0.1:7860
"""

from __future__ import annotations

import base64
import functools
import os
import tempfile
from pathlib import Path

import gradio as gr
import pandas as pd

from vitviz import (analysis, budget, bundle, explorer, images, loaders, models, patches, plotting, registry, resources, web)
from vitviz.views import attention as attention_view
from vitviz.views import classify as classify_view
from vitviz.views import patches as patches_view
from vitviz.views import posembed as posembed_view

EXAMPLES = resources.examples()
PHOTOS = ["cat.png", "coffee.png", "astronaut.png", "rocket.jpg"]
SCENES = ["scene_star.png", "scene_ring.png", "scene_triangle.png", "scene_cross.png"]
LEARNED, TIMELINE = posembed_view.LEARNED, posembed_view.TIMELINE
MODEL_CONCURRENCY = int(os.environ.get("VITVIZ_MODEL_CONCURRENCY", "2"))
"""Events that run a model share one concurrency group of this size (benchmarks/load.py measured 1, 2, 4)."""
QUEUE_SIZE = int(os.environ.get("VITVIZ_QUEUE_SIZE", "128"))
"""Requests waiting at most; past that the page says the app is busy and to try again in a moment."""
PATCH_SIZES = [4, 8, 14, 16, 32]


class IntakeImage(gr.Image):
    """gr.Image that passes the upload on undecoded, so vitviz's intake checks it (size, type, damage)."""

    is_template = True  # reuse the front end of gr.Image

    def preprocess(self, payload):  # noqa: D102
        if payload is None:
            return None
        if payload.url and payload.url.startswith("data:"):
            return base64.b64decode(payload.url.split(",", 1)[1])
        return payload.path


class NumberChoice(gr.Radio):
    """A radio of whole numbers whose API schema says so, and that also takes the number as a string."""

    is_template = True  # reuse the front end of gr.Radio

    def api_info(self):  # noqa: D102
        return {"type": "integer", "enum": [c[1] for c in self.choices], "title": "Radio"}

    def preprocess(self, payload):  # noqa: D102
        if isinstance(payload, str) and payload.strip().lstrip("-").isdigit():
            payload = int(payload)
        return super().preprocess(payload)


def load(src):
    """The upload as an RGB array, shrunk while decoding to what the largest view uses."""
    return images.load_rgb(src, images.INTAKE_SHORT_SIDE)


BUNDLES = Path(tempfile.gettempdir()) / "vitviz-bundles"
BUNDLE_AGE = 600
"""Seconds a downloadable bundle is kept on the server (gradio serves its own copy from its cache)."""


def make_bundle(view: str, params: dict, src=None) -> str:
    """The ZIP of one view, in a folder of its own (two students, same settings: two files), old ones pruned."""
    import shutil
    import time
    import uuid

    BUNDLES.mkdir(exist_ok=True)
    for old in BUNDLES.iterdir():
        if time.time() - old.stat().st_mtime > BUNDLE_AGE:
            shutil.rmtree(old, ignore_errors=True)
    return str(bundle.write(view, params, None if src is None else load(src), BUNDLES / uuid.uuid4().hex))


def download_row(elem_id: str) -> tuple[gr.Button, gr.File]:
    """'Download this view': every figure as PNG and PDF, the numbers, and params.json for ``vitviz bundle``."""
    button = gr.Button("Download this view (figures as PNG and PDF, numbers, settings)", size="sm")
    files = gr.File(label="this view as files", elem_id=elem_id, visible=False)
    return button, files


def wire_download(button: gr.Button, files: gr.File, fn, inputs: list, api_name: str, **kwargs) -> None:
    """The endpoint returns the ZIP (data); showing the file box is a separate, UI-only step."""
    button.click(fn, inputs, files, api_name=api_name, **kwargs).success(
        lambda: gr.File(visible=True), None, files, api_visibility="private")


def friendly(fn):
    """Turn the library's ValueErrors (meant for students) into gr.Error messages."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as err:
            raise gr.Error(str(err), title="Cannot use this") from None
    return wrapper


def image_input(label: str = "Image") -> IntakeImage:
    return IntakeImage(label=label, type="filepath", image_mode=None, sources=["upload", "webcam", "clipboard"],
                       height=320)


def figure(elem_id: str, titled: bool, label: str, **kwargs) -> gr.Image:
    """An output image; figures that carry their own title hide the (overlapping) label."""
    return gr.Image(label=label, show_label=not titled, elem_id=elem_id, interactive=False, type="pil",
                    buttons=["download", "fullscreen"], **kwargs)


def explain(text: str) -> gr.Markdown:
    """A short explanation beside the figures, in the large 'explain' style."""
    return gr.Markdown(text, elem_classes="explain")


def example_paths(names: list[str]) -> list[str]:
    return [str(EXAMPLES / n) for n in names]


# ---- Patches ---------------------------------------------------------------------------

def _fitted(src, patch, resolution, policy):
    """The upload fitted to whole patches, after checking the grid's budget from the shapes alone."""
    rgb = load(src)
    patch, resolution = int(patch), budget.number(resolution, "resolution", 8, 640, integer=True)
    return patches_view.fit(rgb, resolution, patch, policy)


@friendly
def run_patches(src, patch, resolution, policy, size_name):
    v = patches_view.render(_fitted(src, patch, resolution, policy), size_name)
    return v.grid, v.summary, v.costs, v.cost_chart, v.equivalence, None


@friendly
def bundle_patches(src, patch, resolution, policy, size_name):
    params = {"patch": int(patch), "resolution": budget.number(resolution, "resolution", 8, 640, integer=True),
              "policy": policy, "model_size": size_name}
    return make_bundle("patches", params, src)


@friendly
def run_patch_inspector(src, patch, resolution, policy):
    fitted = _fitted(src, patch, resolution, policy)
    weight, bias = patches_view.projection(fitted.patch)
    return explorer.patches_payload(fitted, weight.numpy(), bias.numpy())


@friendly
def click_patch(src, patch, resolution, policy, size_name, evt: gr.SelectData):
    fitted = _fitted(src, patch, resolution, policy)
    row, col = patches_view.click_to_patch(evt.index[0], evt.index[1], int(patch), patches_view.scale_of(fitted))
    grid, _ = patches_view.grid_image(fitted, highlight=(row, col))
    return grid, patches_view.patch_vectors(fitted, row, col)


def toy_gallery():
    return [(img, caption) for img, caption in patches_view.toy_figures()]


def patches_tab() -> None:
    with gr.Row():
        with gr.Column(scale=1):
            src = image_input()
            patch = NumberChoice(PATCH_SIZES, value=16, label="patch size P (pixels)")
            resolution = gr.Slider(8, 640, value=224, step=1, label="input resolution (pixels, rounded down to a multiple of P)")
            policy = gr.Radio(list(images.POLICIES), value="crop", label="how the image is made to fit",
                              info="; ".join(f"{k}: {v}" for k, v in images.POLICIES.items()))
            size_name = gr.Dropdown(list(patches.VIT_SIZES), value="ViT-B", label="model size for the counts")
            go = gr.Button("Cut into patches", variant="primary")
            gr.Examples(example_paths(PHOTOS + SCENES[:2] + ["toy_8x8.png"]), inputs=[src],
                        label="examples (click one)")
            toy_setup = gr.Button("The seed's toy: 8×8 image, 4×4 patches")
            dl_button, dl_file = download_row("patches-bundle")
            explain(
                "A ViT never sees pixels one by one. It cuts the image into square patches, lays them out "
                "row by row (p00, p01, …), flattens each into a list of numbers, and maps that list to one "
                "vector with the same linear layer for every patch. Those vectors are the tokens. Halve the "
                "patch size and you get four times as many tokens, and sixteen times as many attention entries.")
        with gr.Column(scale=2):
            grid = figure("patch-grid", False, label="patch grid: click a patch", height=560)
            inspector = browser_view("patches", "patch-inspector", "patch inspector: point at a patch or use the "
                                     "arrow keys")
            summary = gr.Markdown()
            equivalence = gr.Markdown()
            with gr.Accordion("The clicked patch, drawn on the server (to download)", open=False):
                vectors = figure("patch-vectors", True, label="click a patch in the grid: its flattened pixels and "
                                 "embedding")
    with gr.Row():
        costs = gr.Markdown()
        chart = figure("cost-chart", True, label="cost breakdown", height=420)
    with gr.Accordion("The 8×8 toy, step by step", open=False):
        toy_btn = gr.Button("Show the walk-through")
        toy = gr.Gallery(label="pixels → patches → vectors → embeddings → + position → [CLS]", columns=3,
                         height="auto")
    inputs = [src, patch, resolution, policy, size_name]
    outputs = [grid, summary, costs, chart, equivalence, vectors]
    fit_in = [src, patch, resolution, policy]
    go.click(run_patches, inputs, outputs, api_name="patches").success(
        run_patch_inspector, fit_in, inspector, api_visibility="private")
    gr.on([c.change for c in (src, patch, policy, size_name, resolution)], run_patches, inputs, outputs,
          api_visibility="private", trigger_mode="always_last").success(
        run_patch_inspector, fit_in, inspector, api_visibility="private")
    grid.select(click_patch, inputs, [grid, vectors], api_visibility="private")
    wire_download(dl_button, dl_file, bundle_patches, inputs, "bundle_patches")
    toy_btn.click(toy_gallery, None, toy, api_name="toy")
    toy_setup.click(lambda: (str(EXAMPLES / "toy_8x8.png"), 4, 8, "stretch"), None,
                    [src, patch, resolution, policy], api_visibility="private")


# ---- Position embeddings -------------------------------------------------------------------

@friendly
def run_posembed(source, rows, cols, dim, kind, new_rows, new_cols, step_index, cmap):
    grid, name, notice = posembed_view.grid_for(source, rows, cols, dim, step_index)
    new = tuple(budget.number(v, name, 1, 40, integer=True)
                for v, name in ((new_rows, "rows to resample to"), (new_cols, "columns to resample to")))
    v = posembed_view.render(grid, name, kind, new, cmap)
    r, c, _ = grid.shape
    tile = posembed_view.tile_figure(grid, kind, r // 2, c // 2, cmap)
    return (notice + "\n\n" + v.summary).strip(), v.mosaic, tile, v.matrix, v.sim, v.resampled


@friendly
def bundle_posembed(source, rows, cols, dim, kind, new_rows, new_cols, step_index, cmap):
    params = {"source": source, "rows": rows, "cols": cols, "dim": dim, "kind": kind, "new_rows": new_rows,
              "new_cols": new_cols, "step": step_index, "cmap": cmap}
    return make_bundle("position_embeddings", params)


@friendly
def run_pe_map(source, rows, cols, dim, kind, step_index, cmap):
    grid, name, _ = posembed_view.grid_for(source, rows, cols, dim, step_index)
    return explorer.posembed_payload(grid, kind, name, cmap)


@friendly
def click_tile(source, rows, cols, dim, kind, step_index, cmap, evt: gr.SelectData):
    grid, _, _ = posembed_view.grid_for(source, rows, cols, dim, step_index)
    row, col = posembed_view.tile_at(grid, kind, evt.index[0], evt.index[1])
    return posembed_view.tile_figure(grid, kind, row, col, cmap)


def posembed_tab(tab: gr.Tab) -> None:
    learned = [LEARNED + k for k in registry.REGISTRY]
    n_ckpt = max(1, len(loaders.tiny_checkpoints()))
    with gr.Row():
        with gr.Column(scale=1):
            source = gr.Dropdown(list(posembed_view.SINUSOIDAL) + [TIMELINE] + learned, value="2D sinusoidal",
                                 label="position embedding")
            with gr.Row():
                rows = gr.Slider(1, 32, value=14, step=1, label="grid rows")
                cols = gr.Slider(1, 32, value=14, step=1, label="grid columns")
            dim = gr.Slider(8, 768, value=64, step=4, label="embedding size D (sinusoidal)")
            kind = gr.Radio(["cosine", "dot"], value="cosine", label="similarity")
            with gr.Row():
                new_rows = gr.Slider(1, 40, value=20, step=1, label="resample to rows")
                new_cols = gr.Slider(1, 40, value=20, step=1, label="resample to columns")
            step_index = gr.Slider(0, n_ckpt - 1, value=n_ckpt - 1, step=1,
                                   label="training timeline: checkpoint (0 = random initial weights)")
            cmap = gr.Dropdown(list(plotting.SEQUENTIAL), value="viridis", label="colormap")
            go = gr.Button("Show", variant="primary")
            dl_button, dl_file = download_row("pe-bundle")
            gr.Examples([["2D sinusoidal", 2, 2, 8], ["2D sinusoidal", 14, 14, 64], ["1D sinusoidal", 14, 14, 64],
                         [TIMELINE, 8, 8, 8]], inputs=[source, rows, cols, dim], label="examples (click one)")
            explain(
                "Attention alone cannot tell where a patch came from: shuffle the tokens and it computes the "
                "same thing, shuffled. So each patch gets a position vector added. Sinusoidal ones are a fixed "
                "formula (in 2D: half the dimensions code the row, half the column); learned ones start random "
                "and training arranges them. Either way, nearby positions end up with similar vectors, which "
                "the mosaic shows: each little map is one position's similarity to all others.")
        with gr.Column(scale=2):
            summary = gr.Markdown()
            pe_map = browser_view("posembed", "pe-explorer", "position similarity: point at a position or use the "
                                  "arrow keys")
            with gr.Row():
                mosaic = figure("pe-mosaic", False, label="similarity mosaic: click a tile")
                tile = figure("pe-tile", True, label="the clicked tile")
            with gr.Row():
                matrix = figure("pe-matrix", True, label="embedding matrix")
                sim = figure("pe-sim", True, label="similarity matrix")
            resampled = figure("pe-resampled", False, label="resampled grid (bicubic, as timm does for a new resolution)")
    inputs = [source, rows, cols, dim, kind, new_rows, new_cols, step_index, cmap]
    outputs = [summary, mosaic, tile, matrix, sim, resampled]
    map_in = [source, rows, cols, dim, kind, step_index, cmap]
    go.click(run_posembed, inputs, outputs, api_name="position_embeddings").success(
        run_pe_map, map_in, pe_map, api_visibility="private")
    tab.select(run_posembed, inputs, outputs, api_visibility="private").success(
        run_pe_map, map_in, pe_map, api_visibility="private")
    gr.on([c.change for c in (source, kind, cmap, rows, cols, dim, new_rows, new_cols, step_index)], run_posembed,
          inputs, outputs, api_visibility="private", trigger_mode="always_last").success(  # one run per burst
        run_pe_map, map_in, pe_map, api_visibility="private")
    wire_download(dl_button, dl_file, bundle_posembed, inputs, "bundle_position_embeddings")
    mosaic.select(click_tile, [source, rows, cols, dim, kind, step_index, cmap], tile, api_visibility="private")


# ---- Attention --------------------------------------------------------------------------------

def _analysis(src, model_key, resolution, progress=None):
    """The cached forward for these inputs, and the model notice."""
    loaded = models.get_model(model_key, progress)
    resolution = budget.number(resolution, "short side", 8, 512, integer=True)
    return analysis.analyse(loaded, load(src), resolution), loaded.notice


def _view_numbers(layer, keep, alpha):
    return (budget.number(layer, "layer", 1, 64, integer=True), budget.number(keep, "share of mass", 0.01, 1),
            budget.number(alpha, "opacity", 0, 1))


@friendly
def run_attention(src, model_key, resolution, layer, keep, alpha, cmap, fusion, discard,
                  progress=gr.Progress()):
    layer, keep, alpha = _view_numbers(layer, keep, alpha)
    discard = budget.number(discard, "discard share", 0, 0.9)
    a, notice = _analysis(src, model_key, resolution, lambda f, msg: progress(f, desc=msg))
    heads = attention_view.render_heads(a, layer, keep, cmap, alpha)
    roll = attention_view.render_rollout(a, fusion, discard, cmap, alpha)
    dist = pd.DataFrame([(f"{layer:02d}", head, d) for layer, head, d in attention_view.distance_table(a)],
                        columns=["layer", "head", "distance (px)"])  # layers as categories: whole-number ticks
    info = (f"{notice}\n\n" if notice else "") + (
        f"**{a.loaded.spec.key}** ({a.loaded.origin}); input {a.fitted.note}")
    return info, heads.heads, heads.table, roll, heads.box, heads.crop, dist


@friendly
def bundle_attention(src, model_key, resolution, layer, keep, alpha, cmap, fusion, discard):
    layer, keep, alpha = _view_numbers(layer, keep, alpha)
    params = {"model": model_key, "resolution": resolution, "layer": layer, "keep": keep, "alpha": alpha,
              "cmap": cmap, "fusion": fusion, "discard": budget.number(discard, "discard share", 0, 0.9)}
    return make_bundle("attention", params, src)


def layer_slider(model_key, layer):
    """UI only: the layer slider spans the depth of the model actually shown (a stand-in may be shallower)."""
    depth = models.get_model(model_key).depth
    return gr.Slider(maximum=depth, value=min(int(layer), depth))


@friendly
def rerender_heads(src, model_key, resolution, layer, keep, alpha, cmap):
    layer, keep, alpha = _view_numbers(layer, keep, alpha)
    a, _ = _analysis(src, model_key, resolution)
    heads = attention_view.render_heads(a, layer, keep, cmap, alpha)
    return heads.heads, heads.table, heads.box, heads.crop


@friendly
def rerender_rollout(src, model_key, resolution, alpha, cmap, fusion, discard):
    alpha = budget.number(alpha, "opacity", 0, 1)
    discard = budget.number(discard, "discard share", 0, 0.9)
    a, _ = _analysis(src, model_key, resolution)
    return attention_view.render_rollout(a, fusion, discard, cmap, alpha)


@friendly
def click_query(src, model_key, resolution, layer, alpha, cmap, evt: gr.SelectData):
    layer, _, alpha = _view_numbers(layer, 1, alpha)
    a, _ = _analysis(src, model_key, resolution)
    row, col = attention_view.click_to_patch(a, evt.index[0], evt.index[1])
    return attention_view.render_query(a, row, col, layer, cmap, alpha)


@friendly
def run_registers(src, resolution, alpha, cmap, progress=gr.Progress()):
    resolution = budget.number(resolution, "short side", 8, 512, integer=True)
    return attention_view.compare_registers(load(src), resolution, cmap, budget.number(alpha, "opacity", 0, 1),
                                            lambda f, msg: progress(f, desc=msg))


@friendly
def run_timeline(src, step_index, alpha, cmap):
    step_index = budget.number(step_index, "checkpoint", 0, 99, integer=True)
    return attention_view.render_timeline(load(src), step_index, cmap, budget.number(alpha, "opacity", 0, 1))


WEB = Path(web.__file__).resolve().parent  # the browser views' scripts, inside the installed package


def browser_view(name: str, elem_id: str, label: str, **kwargs) -> gr.HTML:
    """A view drawn in the browser: vitviz/web/{name}.js (after common.js) and {name}.css; data comes as its value."""
    return gr.HTML(None, elem_id=elem_id, apply_default_css=False,
                   html_template=f'<div class="vx" tabindex="0" role="application" aria-label="{label}"></div>',
                   css_template=(WEB / f"{name}.css").read_text(),
                   js_on_load=(WEB / "common.js").read_text() + (WEB / f"{name}.js").read_text(), **kwargs)


def explorer_component() -> gr.HTML:
    """The in-browser attention explorer: data from /explorer, other layers' rows fetched once."""
    return browser_view("explorer", "attention-explorer", "attention explorer: point at a patch or use the arrow keys",
                        server_functions=[explorer_rows])


def explorer_rows(call: list) -> dict:
    """Server function for the explorer: one more layer's patch-to-patch rows (data, fetched once per layer).

    gradio hands a server function the browser's arguments as one list: here [token, 0-based layer].
    """
    try:
        token, layer = call
        layer = budget.number(layer, "layer", 0, 999, integer=True)
    except (TypeError, ValueError):
        return {"layer": -1, "missing": "the explorer asked for rows in a form the server does not know"}
    return explorer.rows_for(str(token), layer)


@friendly
def run_explorer(src, model_key, resolution, keep, alpha, cmap):
    _, keep, alpha = _view_numbers(1, keep, alpha)
    a, _ = _analysis(src, model_key, resolution)
    return explorer.attention_payload(a, a.maps.layers, keep, alpha, cmap)  # opens on the last layer


def attention_tab() -> None:
    n_ckpt = max(1, len(loaders.tiny_checkpoints()))
    spread_from = loaders.tiny_info().get("spread_from_step")
    with gr.Row():
        with gr.Column(scale=1):
            src = image_input()
            model_key = gr.Dropdown(registry.keys("attention"), value="DINO ViT-S/8", label="model")
            resolution = gr.Slider(64, 512, value=224, step=8, label="short side (pixels, rounded to the patch size)")
            go = gr.Button("Show attention", variant="primary")
            dl_button, dl_file = download_row("attention-bundle")
            gr.Examples(example_paths(SCENES + PHOTOS), inputs=[src], label="examples (click one)")
            explain(
                "The class token gathers information from all patches; its attention row says how much it "
                "took from each. DINO models learned without any labels, yet their heads often outline the main "
                "object. The contour keeps the fewest patches holding the chosen share of a head's attention. "
                "Point at any patch to see where it looks instead. Rollout follows attention through every "
                "layer, counting the skip connections too.")
        with gr.Column(scale=2):
            notice = gr.Markdown()
            explorer_view = explorer_component()
            with gr.Row():
                box = figure("attn-box", False, label="box around the head-mean mask", height=320)
                crop = figure("attn-crop", False, label="free crop from attention", height=320)
            dist = gr.ScatterPlot(x="layer", y="distance (px)", color="head", title="mean attention distance",
                                  x_title="layer", y_title="mean attention distance (pixels)", height=360)
    with gr.Accordion("Figures drawn on the server (to download, and what the /attention API returns)", open=False):
        with gr.Row():
            layer = gr.Slider(1, 12, value=12, step=1, label="layer (1 = first)")
            keep = gr.Slider(0.1, 0.95, value=0.6, step=0.05, label="keep this share of attention mass")
            alpha = gr.Slider(0, 1, value=0.6, step=0.05, label="overlay opacity")
            cmap = gr.Dropdown(list(plotting.SEQUENTIAL), value="inferno", label="colormap")
        with gr.Row():
            fusion = gr.Radio(["mean", "max", "min"], value="mean", label="rollout: fuse heads by")
            discard = gr.Slider(0, 0.9, value=0.0, step=0.1, label="rollout: discard weakest share")
        heads = figure("attn-heads", True, label="[CLS] attention per head")
        table = gr.Markdown()
        roll = figure("attn-rollout", True, label="attention rollout")
        query = figure("attn-query", True, label="click a patch in the box view: its attention per head, drawn here")
    with gr.Accordion("Registers: DINOv2 with and without", open=False):
        reg_btn = gr.Button("Compare on this image")
        reg_note = gr.Markdown()
        reg_img = figure("registers", True, label="registers comparison")
    with gr.Accordion("Training timeline of the offline model", open=False):
        gr.Markdown("The embedded tiny ViT at each saved training step, on the current image (seen at 64 px), "
                    "all on one colour scale. Step 0 is the random initialisation: its attention is nearly even, "
                    "so 60% of it needs more than half the patches; training gathers it onto the shape." + (
                        f" From step {spread_from:,} on, training also charges any last-layer head that looks at "
                        "nearly the whole picture (not told where to look; see the model card), so a head that "
                        "stayed spread out until then has to pick a place." if spread_from else ""))
        step_index = gr.Slider(0, n_ckpt - 1, value=n_ckpt - 1, step=1, label="checkpoint")
        tl_btn = gr.Button("Show the timeline")
        tl_strip = figure("timeline-strip", True, label="all checkpoints")
        tl_heads = figure("timeline-heads", True, label="the chosen checkpoint, per head")

    inputs = [src, model_key, resolution, layer, keep, alpha, cmap, fusion, discard]
    outputs = [notice, heads, table, roll, box, crop, dist]
    model = dict(concurrency_id="model", concurrency_limit=MODEL_CONCURRENCY)
    wire_download(dl_button, dl_file, bundle_attention, inputs, "bundle_attention", **model)

    head_in = [src, model_key, resolution, layer, keep, alpha, cmap]

    def analyse_on(trigger, public: bool = False):
        """Run the forward (or reuse it); then the explorer's data and the layer slider's range (UI only)."""
        named = dict(api_name="attention") if public else dict(api_visibility="private")
        done = trigger(run_attention, inputs, outputs, **model, **named)
        done.success(run_explorer, [src, model_key, resolution, keep, alpha, cmap], explorer_view, **model,
                     **(dict(api_name="explorer") if public else dict(api_visibility="private")))
        done.success(layer_slider, [model_key, layer], layer, api_visibility="private", **model)

    analyse_on(go.click, public=True)
    for comp in (src, model_key):
        analyse_on(comp.change)
    analyse_on(resolution.release)
    for comp in (layer, keep, alpha):
        comp.release(rerender_heads, head_in, [heads, table, box, crop], api_visibility="private", **model)
    cmap.change(rerender_heads, head_in, [heads, table, box, crop], api_visibility="private", **model)
    roll_in = [src, model_key, resolution, alpha, cmap, fusion, discard]
    fusion.change(rerender_rollout, roll_in, roll, api_visibility="private", **model)
    discard.release(rerender_rollout, roll_in, roll, api_visibility="private", **model)
    box.select(click_query, [src, model_key, resolution, layer, alpha, cmap], query, api_visibility="private", **model)
    reg_btn.click(run_registers, [src, resolution, alpha, cmap], [reg_note, reg_img], api_name="registers", **model)
    tl_btn.click(run_timeline, [src, step_index, alpha, cmap], [tl_strip, tl_heads], api_name="timeline", **model)
    step_index.release(run_timeline, [src, step_index, alpha, cmap], [tl_strip, tl_heads], api_visibility="private",
                       **model)


# ---- Classify -------------------------------------------------------------------------------

@friendly
def run_classify(src, model_key, progress=gr.Progress()):
    rgb = load(src)
    loaded = models.get_model(model_key, lambda f, msg: progress(f, desc=msg))
    v = classify_view.render(loaded, rgb)
    return loaded.notice, v.top5, v.maps, v.facts


@friendly
def bundle_classify(src, model_key):
    return make_bundle("classify", {"model": model_key}, src)


@friendly
def run_shuffle(src, model_key, seed):
    from vitviz import classify

    seed = budget.number(seed, "shuffle seed", 0, 2**31 - 1, integer=True)
    r = classify.shuffle_experiment(models.get_model(model_key), load(src), seed)
    return r.scrambled, classify_view.shuffle_markdown(r)


def run_tradeoff():
    from vitviz import classify

    return classify_view.tradeoff_markdown(classify.patch_size_tradeoff())


def classify_tab() -> None:
    with gr.Row():
        with gr.Column(scale=1):
            src = image_input()
            model_key = gr.Dropdown(registry.keys("classify"), value="ViT-B/16 (ImageNet-1k)", label="model")
            go = gr.Button("Classify", variant="primary")
            dl_button, dl_file = download_row("classify-bundle")
            gr.Examples(example_paths(PHOTOS + SCENES), inputs=[src], label="examples (click one)")
            explain(
                "After the last block only the class token's vector is kept; one linear layer turns it into a "
                "score per class. The maps show which patches the class token drew on for this prediction: the "
                "last layer alone, and rolled out through all layers.")
        with gr.Column(scale=2):
            notice = gr.Markdown()
            top5 = gr.Label(num_top_classes=5, label="top 5")
            maps = figure("classify-maps", True, label="where the class token looked")
            facts = gr.Markdown()
    with gr.Accordion("Experiment: shuffle the patches", open=True):
        explain(
            "Cut the picture into its patches and deal them out in a random order. The model still sees the "
            "same patch contents, only their places change. With position embeddings the prediction moves. Take "
            "the position embeddings out and the class token's output is identical for both orders: attention "
            "itself has no idea of order. Position is information the model only has because we add it.")
        with gr.Row():
            seed = gr.Number(value=0, minimum=0, step=1, label="shuffle seed")  # whole numbers checked by vitviz
            sh_btn = gr.Button("Shuffle and compare")
        with gr.Row():
            scrambled = figure("shuffled", False, label="shuffled patches")
            sh_md = gr.Markdown()
    with gr.Accordion("Experiment: patch size trade-off", open=False):
        explain("Same ViT-S body with patches of 8, 16 and 32 pixels at 224 px, timed on this machine.")
        tr_btn = gr.Button("Measure (takes a few seconds)")
        tr_md = gr.Markdown()
    model = dict(concurrency_id="model", concurrency_limit=MODEL_CONCURRENCY)
    go.click(run_classify, [src, model_key], [notice, top5, maps, facts], api_name="classify", **model)
    for comp in (src, model_key):
        comp.change(run_classify, [src, model_key], [notice, top5, maps, facts], api_visibility="private", **model)
    wire_download(dl_button, dl_file, bundle_classify, [src, model_key], "bundle_classify", **model)
    sh_btn.click(run_shuffle, [src, model_key, seed], [scrambled, sh_md], api_name="shuffle", **model)
    tr_btn.click(run_tradeoff, None, tr_md, api_name="patch_size_tradeoff", **model)


# ---- the app --------------------------------------------------------------------------------

FORCE_LIGHT = """
() => {
  const url = new URL(window.location.href);
  if (url.searchParams.get('__theme') !== 'light') {
    url.searchParams.set('__theme', 'light');
    window.location.replace(url.href);
  }
}
"""


def return_freed_memory() -> bool:
    """Ask glibc to give large freed buffers back to the system at once (a server setting, not the library's).

    By default glibc raises its mmap threshold after the first large free, so the next big
    buffers (decoded uploads, attention matrices) come from the heap and stay with the
    process after the request. A fixed 1 MiB threshold keeps them mmapped: with 12
    concurrent 6320×6320 uploads the server stayed 526 MB up afterwards without it, and
    came back to within 100 MB with it (tests/test_app_crowd.py).
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-3, 1 << 20))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc: nothing to do
        return False


def _save_pil_atomically(img, cache_dir: str, name: str = "image", format: str = "webp") -> str:
    """gradio's ``save_pil_to_cache``, but written under a temporary name and renamed into place."""
    import uuid

    from gradio import processing_utils

    data = processing_utils.encode_pil_to_bytes(img, format)
    folder = Path(cache_dir) / processing_utils.hash_bytes(data)
    folder.mkdir(exist_ok=True, parents=True)
    path = (folder / f"{name}.{format}").resolve()
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    part.write_bytes(data)
    os.replace(part, path)  # atomic: a reader sees the old complete file or the new one, never a partial one
    return str(path)


def atomic_image_cache() -> None:
    """Make gradio's cache of output pictures safe for identical answers given at the same moment.

    gradio names a cached picture after its content and rewrites the file in place, so when
    two students get the same figure at once, one download can catch the file while the
    other request is rewriting it (seen as an empty image.webp at 32 clients in
    benchmarks/load.py). Files it copies (``save_file_to_cache``) are already renamed into place.
    """
    from gradio import processing_utils

    processing_utils.save_pil_to_cache = _save_pil_atomically


def build_demo() -> gr.Blocks:
    """The whole app as a Blocks (no model is loaded here)."""
    return_freed_memory()
    atomic_image_cache()
    # Uploads and results older than 10 minutes are removed every 5 minutes: a class uploads a lot.
    with gr.Blocks(title="vitviz: how a Vision Transformer sees", delete_cache=(300, 600)) as demo:
        gr.Markdown("# vitviz: how a Vision Transformer sees an image\n"
                    "From pixels to patch tokens, position embeddings, attention and a prediction. "
                    "Pick a tab, then click an example or upload your own picture.")
        with gr.Tab("Patches"):
            patches_tab()
        with gr.Tab("Position embeddings") as pe_tab:
            posembed_tab(pe_tab)
        with gr.Tab("Attention"):
            attention_tab()
        with gr.Tab("Classify"):
            classify_tab()
    demo.queue(default_concurrency_limit=2, max_size=QUEUE_SIZE)
    return demo


def launch_kwargs() -> dict:
    """Theme, CSS and the light-mode switch (Gradio 6 takes these in launch()); with VITVIZ_MCP=1 an MCP server."""
    theme = gr.themes.Default(text_size=gr.themes.sizes.text_lg, primary_hue="blue")
    kwargs = dict(theme=theme, css_paths=[resources.assets() / "theme.css"], js=FORCE_LIGHT,
                  max_file_size="50mb", server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    if os.environ.get("VITVIZ_MCP") == "1":  # an assistant can call the named endpoints as tools
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            raise SystemExit("VITVIZ_MCP=1 needs gradio's MCP extra: pip install 'gradio[mcp]==6.31.0'.")
        kwargs["mcp_server"] = True
    return kwargs


def __getattr__(name: str):
    """``app.demo``, built on first use: what ``gradio app.py`` (reload mode) looks for; importing stays light."""
    if name == "demo":
        globals()["demo"] = built = build_demo()
        return built
    raise AttributeError(name)


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    build_demo().launch(**launch_kwargs())
