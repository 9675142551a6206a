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

from vitviz.analyses import attention as analysis
from vitviz.models import budget
from vitviz.tools import bundle
from vitviz.render import browser as explorer
from vitviz.analyses import features
from vitviz.core import images
from vitviz.models import loaders
from vitviz.models import cache as models
from vitviz.core import patches
from vitviz.render import plotting
from vitviz.specs import registry
from vitviz import assets
from vitviz.specs import views as views_spec
from vitviz.render import web
from vitviz.views import attention as attention_view
from vitviz.views import classify as classify_view
from vitviz.views import features as features_view
from vitviz.views import heads as heads_view
from vitviz.views import patches as patches_view
from vitviz.views import posembed as posembed_view
from vitviz.views import windows as windows_view

EXAMPLES = assets.EXAMPLES
PHOTOS = ["cat.png", "coffee.png", "astronaut.png", "rocket.jpg"]
SCENES = ["scene_star.png", "scene_ring.png", "scene_triangle.png", "scene_cross.png"]
LEARNED, TIMELINE = views_spec.LEARNED, views_spec.TIMELINE
PE_SOURCES = list(views_spec.SINUSOIDAL) + [TIMELINE] + [LEARNED + k for k, s in registry.REGISTRY.items()
                                                             if s.task != "relative"]  # a Swin has no absolute table
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


class FollowingSlider(gr.Slider):
    """A slider whose range follows the model or picture shown (layers, heads, patch rows): a request sent just
    before the range shrank (layer 12 of a model that turned out to have 4) is clamped, as the library clamps
    layers, not refused."""

    is_template = True  # reuse the front end of gr.Slider

    def preprocess(self, payload):  # noqa: D102
        if isinstance(payload, (int, float)) and self.minimum is not None and self.maximum is not None:
            payload = min(max(payload, self.minimum), self.maximum)
        return super().preprocess(payload)


@functools.lru_cache(maxsize=8)
def _decoded(src: str | bytes):
    rgb = images.load_rgb(src, images.INTAKE_SHORT_SIDE)
    rgb.flags.writeable = False  # shared by the requests that use this file: nobody may change it
    return rgb


def load(src):
    """The upload as a read-only RGB array, shrunk while decoding to what the largest view uses.

    Decoded once per file (uploads are immutable files in gradio's cache): the check that clears
    a bad picture (:func:`accept`) and the tab's work that follows share the decoding.
    """
    return _decoded(src) if isinstance(src, (str, bytes)) else images.load_rgb(src, images.INTAKE_SHORT_SIDE)


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


def figure(elem_id: str, caption: str | None = None, **kwargs) -> gr.Image:
    """A server-drawn figure: PNG (sharp text; it carries its smallest text size), never shown larger than drawn.

    Figures carry their own titles; ``caption`` (for pictures without one) goes above, never over, the figure.
    """
    if caption:
        gr.Markdown(caption, elem_classes="vx-caption")
    return gr.Image(show_label=False, label=caption or elem_id, elem_id=elem_id, elem_classes="vx-fig",
                    interactive=False, type="pil", format="png", buttons=["download", "fullscreen"], **kwargs)


def explain(text: str) -> gr.Markdown:
    """A short explanation beside the figures, in the large 'explain' style."""
    return gr.Markdown(text, elem_classes="explain")


def example_paths(names: list[str]) -> list[str]:
    return [str(EXAMPLES / n) for n in names]


@functools.lru_cache(maxsize=1)
def example_keys() -> dict[str, str]:
    """Fingerprint of each shipped example -> its name in a link (the file name without extension)."""
    return {images.fingerprint(path): path.stem for path in sorted(EXAMPLES.iterdir()) if path.suffix in (".png", ".jpg")}


def image_key(src) -> str:
    """How a link names the picture: an example's name, or 'upload-<hash>' for an upload (which cannot travel)."""
    if src is None:
        return ""
    fp = images.fingerprint(src)
    return example_keys().get(fp, f"upload-{fp}")


def example_for(key: str | None) -> str | None:
    """The example file a link names, or None (no such example, or an upload)."""
    if not key or key.startswith("upload-"):
        return None
    for path in EXAMPLES.iterdir():
        if path.stem == key and path.suffix in (".png", ".jpg"):
            return str(path)
    return None


def accept(src):
    """UI step before a tab's work: a picture vitviz cannot use is cleared (with a warning), not left broken.

    Returns the picture's link key, or clears the input."""
    if src is None:
        return gr.skip(), ""
    try:
        load(src)
    except ValueError as err:
        gr.Warning(str(err), title="Cannot use this picture")
        return None, ""
    return gr.skip(), image_key(src)


def quiet(fn):
    """For events a change triggers: with no picture yet there is nothing to do (every output is left as it is)."""
    @functools.wraps(fn)
    def wrapper(src, *args, **kwargs):
        return gr.skip() if src is None else fn(src, *args, **kwargs)  # one skip() leaves every output alone
    return wrapper


def reveal(selector: str) -> str:
    """JavaScript for a UI-only step: on a phone, scroll the result into view after the control that asked."""
    return f"() => window.vitvizLink?.reveal({selector!r})"


def remember(key: str) -> str:
    """JavaScript for a UI-only step: write a control's value into the page's link."""
    return f"(v) => {{ window.vitvizLink?.set({{{key}: v}}); }}"


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


@friendly
def run_toy(step):
    """One step of the 8×8 toy walk-through: its figure and a sentence."""
    figures = patches_view.toy_figures()
    step = budget.number(step, "step", 1, len(figures), integer=True)
    image, caption = figures[step - 1]
    return image, f"**Step {step} of {len(figures)}.** {caption}"


@friendly
def run_filters(model_key, progress=gr.Progress()):
    """The principal components of a registry model's patch filters (the embedded model's offline)."""
    loaded = models.get_model(model_key, lambda f, msg: progress(f, desc=msg))
    image, text = patches_view.render_filters(loaded)
    return image, (f"{loaded.notice}\n\n" if loaded.notice else "") + text


@friendly
def run_windows(src, patch, resolution, policy, size_name, window, row, col):
    """Swin's windows and shifted windows on the fitted picture, and one attention layer's cost against the side."""
    fitted = _fitted(src, patch, resolution, policy)
    window = budget.number(window, "window side M", 1, 32, integer=True)
    row, col = (budget.number(v, name, 0, 999, integer=True) for v, name in ((row, "query row"), (col, "query column")))
    image, text = windows_view.render_windows(fitted, window, row, col)
    dim = registry.VIT_SIZES[size_name].dim if size_name in registry.VIT_SIZES else 768
    side = min(fitted.image.shape[:2])
    return image, text, windows_view.render_costs(int(patch), dim, window, side)


def patches_tab() -> dict:
    with gr.Row():
        with gr.Column(scale=1):
            src = image_input()
            patch = NumberChoice(PATCH_SIZES, value=16, label="patch size P (pixels)")
            resolution = gr.Slider(8, 640, value=224, step=1, label="input resolution (pixels, rounded down to a multiple of P)")
            policy = gr.Radio(list(images.POLICIES), value="crop", label="how the image is made to fit",
                              info="; ".join(f"{k}: {v}" for k, v in images.POLICIES.items()))
            size_name = gr.Dropdown(list(registry.VIT_SIZES), value="ViT-B", label="model size for the counts")
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
            summary = gr.Markdown(elem_id="patch-summary")
            grid = figure("patch-grid", "The patch grid: click a patch (labels where they fit)")
            inspector = browser_view("patches", "patch-inspector", "patch inspector: point at a patch or use the "
                                     "arrow keys")
            equivalence = gr.Markdown()
            with gr.Accordion("The clicked patch, drawn on the server (to download)", open=False):
                vectors = figure("patch-vectors")
            costs = gr.Markdown(elem_classes="vx-table", elem_id="cost-table")
            chart = figure("cost-chart")
    with gr.Accordion("The 8×8 toy, step by step", open=False) as toy_box:
        toy_step = gr.Slider(1, 7, value=1, step=1, label="step of the walk-through (pixels → patches → vectors → "
                             "embeddings → + position → [CLS] → position similarity)")
        toy_caption = gr.Markdown()
        toy = figure("toy-step")
    with gr.Accordion("What a trained patch projection learned: its filters' principal components",
                      open=False) as filt_box:
        explain("Each embedding dimension has its own P×P×3 filter: the patch's pixels, weighted and summed. "
                "Principal components show what the filters share. The ViT paper found colour blobs and stripes "
                "at several frequencies, like a CNN's first layer; that comes from training, not from the design.")
        with gr.Row():
            filt_model = gr.Dropdown(registry.keys("attention") + [k for k in registry.keys("classify")
                                                                   if k not in registry.keys("attention")],
                                     value=registry.OFFLINE_KEY, label="model")
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
            win_m = gr.Slider(2, 14, value=7, step=1, label="window side M (patches)")
            win_row = gr.Slider(0, 63, value=3, step=1, label="query row (clamped to the grid)")
            win_col = gr.Slider(0, 63, value=5, step=1, label="query column")
        win_note = gr.Markdown()
        win_fig = figure("swin-windows")
        win_cost = figure("swin-cost")
    key = gr.Textbox(visible="hidden", elem_id="patches-image-key")
    inputs = [src, patch, resolution, policy, size_name]
    outputs = [grid, summary, costs, chart, equivalence, vectors]
    fit_in = [src, patch, resolution, policy]
    go.click(run_patches, inputs, outputs, api_name="patches").success(
        run_patch_inspector, fit_in, inspector, api_visibility="private")
    src.change(accept, src, [src, key], api_visibility="private", concurrency_limit=None).success(
        quiet(run_patches), inputs, outputs, api_visibility="private", trigger_mode="always_last").success(
        quiet(run_patch_inspector), fit_in, inspector, api_visibility="private").then(
        None, None, None, js=reveal("#patch-summary"))
    gr.on([c.change for c in (patch, policy, size_name, resolution)], quiet(run_patches), inputs, outputs,
          api_visibility="private", trigger_mode="always_last").success(
        quiet(run_patch_inspector), fit_in, inspector, api_visibility="private")
    grid.select(click_patch, inputs, [grid, vectors], api_visibility="private")
    wire_download(dl_button, dl_file, bundle_patches, inputs, "bundle_patches")
    toy_step.change(run_toy, toy_step, [toy, toy_caption], api_name="toy")
    filt_btn.click(run_filters, filt_model, [filters, filt_note], api_name="patch_filters", concurrency_id="model",
                   concurrency_limit=MODEL_CONCURRENCY)
    filt_box.expand(run_filters, filt_model, [filters, filt_note], api_visibility="private", concurrency_id="model",
                    concurrency_limit=MODEL_CONCURRENCY)
    toy_box.expand(run_toy, toy_step, [toy, toy_caption], api_visibility="private")
    win_in, win_out = inputs + [win_m, win_row, win_col], [win_fig, win_note, win_cost]
    win_box.expand(quiet(run_windows), win_in, win_out, api_visibility="private")
    gr.on([c.change for c in (win_m, win_row, win_col)], quiet(run_windows), win_in, win_out, api_name="windows",
          trigger_mode="always_last")
    toy_setup.click(lambda: (str(EXAMPLES / "toy_8x8.png"), 4, 8, "stretch"), None,
                    [src, patch, resolution, policy], api_visibility="private")
    key.change(None, key, None, js="(k) => window.vitvizLink?.image('patches', k)")
    patch.change(None, patch, None, js=remember("patch"))
    resolution.change(None, resolution, None, js=remember("res"))
    return {"src": src, "patch": patch, "resolution": resolution}


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


@friendly
def run_rotary(dim, reach, base, cmap):
    dim = budget.number(dim, "size D", 4, 512, integer=True)
    if dim % 4:
        raise ValueError(f"2D rotary encoding splits D into row and column halves of pairs: D must be a multiple "
                         f"of 4, not {dim}.")
    return posembed_view.render_rotary(dim, budget.number(reach, "offsets shown", 1, 12, integer=True),
                                       budget.number(base, "base", 2, 100000), cmap)


@friendly
def run_relative_bias(source, window, heads, block, head, row, col, cmap):
    window = budget.number(window, "window side M", 2, 16, integer=True)
    heads = budget.number(heads, "heads", 1, 16, integer=True)
    block, head, row, col = (budget.number(v, name, 0, 99, integer=True) for v, name in (
        (block, "block"), (head, "head"), (row, "query row"), (col, "query column")))
    table, m, name, notice = posembed_view.relative_bias_table(source, window, heads, block)
    image, text = posembed_view.render_relative_bias(table, m, name, head, row, col, cmap)
    return image, (f"{notice}\n\n" if notice else "") + text


def rpb_controls(source):
    """UI only: window side and head count shape the formula table; a Swin's tables come with their own."""
    formula = source == views_spec.RPB_FORMULA
    return gr.Slider(visible=formula), gr.Slider(visible=formula), gr.Slider(visible=not formula)


def pe_controls(source):
    """UI only: the grid and D sliders matter for sinusoidal tables only; the checkpoint slider for the timeline."""
    formula = source in views_spec.SINUSOIDAL
    return (gr.Slider(visible=formula), gr.Slider(visible=formula), gr.Slider(visible=formula),
            gr.Slider(visible=source == TIMELINE))


def posembed_tab(tab: gr.Tab) -> dict:
    n_ckpt = max(1, len(assets.tiny_checkpoints()))
    with gr.Row():
        with gr.Column(scale=1):
            source = gr.Dropdown(PE_SOURCES, value="2D sinusoidal",
                                 label="position embedding")
            with gr.Row():
                rows = gr.Slider(1, 32, value=14, step=1, label="grid rows")
                cols = gr.Slider(1, 32, value=14, step=1, label="grid columns")
            dim = gr.Slider(8, 768, value=64, step=4, label="embedding size D (sinusoidal)")
            step_index = gr.Slider(0, n_ckpt - 1, value=n_ckpt - 1, step=1, visible=False,
                                   label="training timeline: checkpoint (0 = random initial weights)")
            kind = gr.Radio(["cosine", "dot"], value="cosine", label="similarity")
            with gr.Row():
                new_rows = gr.Slider(1, 40, value=20, step=1, label="resample to rows")
                new_cols = gr.Slider(1, 40, value=20, step=1, label="resample to columns")
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
            rope_dim = gr.Slider(8, 128, value=32, step=4, label="size D (a multiple of 4)")
            rope_reach = gr.Slider(1, 12, value=6, step=1, label="offsets shown (±)")
            rope_base = gr.Slider(10, 10000, value=100, step=10, label="base of the frequencies")
        rope = figure("pe-rotary")
    with gr.Accordion("Relative positions: Swin's relative position bias", open=False) as rpb_box:
        explain("Swin adds no position vector to the tokens either. Inside a window, each head adds a number to every "
                "query-key score, looked up in a table by their offset. The same table serves every query, so what "
                "a head prefers depends on where a key is relative to the query, never on where it is in the image.")
        with gr.Row():
            rpb_source = gr.Dropdown(list(views_spec.relative_bias_sources()), value=views_spec.RPB_FORMULA,
                                     label="bias table")
            rpb_m = gr.Slider(2, 12, value=7, step=1, label="window side M")
            rpb_heads = gr.Slider(1, 8, value=3, step=1, label="heads")
            rpb_block = gr.Slider(1, 12, value=1, step=1, label="block (1 = first)", visible=False)
        with gr.Row():
            rpb_head = gr.Slider(0, 23, value=0, step=1, label="head shown")
            rpb_row = gr.Slider(0, 11, value=1, step=1, label="query row")
            rpb_col = gr.Slider(0, 11, value=2, step=1, label="query column")
        rpb_note = gr.Markdown()
        rpb = figure("pe-relative-bias")
    inputs = [source, rows, cols, dim, kind, new_rows, new_cols, step_index, cmap]
    outputs = [summary, mosaic, tile, matrix, sim, resampled]
    map_in = [source, rows, cols, dim, kind, step_index, cmap]
    go.click(run_posembed, inputs, outputs, api_name="position_embeddings").success(
        run_pe_map, map_in, pe_map, api_visibility="private")
    tab.select(run_posembed, inputs, outputs, api_visibility="private").success(
        run_pe_map, map_in, pe_map, api_visibility="private")
    gr.on([c.change for c in (source, kind, cmap, rows, cols, dim, new_rows, new_cols, step_index)], run_posembed,
          inputs, outputs, api_visibility="private", trigger_mode="always_last").success(  # one run per burst
        run_pe_map, map_in, pe_map, api_visibility="private").then(None, None, None, js=reveal("#pe-summary"))
    source.change(pe_controls, source, [rows, cols, dim, step_index], api_visibility="private", queue=False)
    rope_in = [rope_dim, rope_reach, rope_base, cmap]
    gr.on([c.change for c in (rope_dim, rope_reach, rope_base)], run_rotary, rope_in, rope, api_name="rotary",
          trigger_mode="always_last")
    rope_box.expand(run_rotary, rope_in, rope, api_visibility="private")
    rpb_in = [rpb_source, rpb_m, rpb_heads, rpb_block, rpb_head, rpb_row, rpb_col, cmap]
    rpb_source.change(rpb_controls, rpb_source, [rpb_m, rpb_heads, rpb_block], api_visibility="private", queue=False)
    gr.on([c.change for c in (rpb_source, rpb_m, rpb_heads, rpb_block, rpb_head, rpb_row, rpb_col)],
          run_relative_bias, rpb_in,
          [rpb, rpb_note], api_name="relative_bias", trigger_mode="always_last")
    rpb_box.expand(run_relative_bias, rpb_in, [rpb, rpb_note], api_visibility="private")
    source.change(None, source, None, js=remember("pe"))
    wire_download(dl_button, dl_file, bundle_posembed, inputs, "bundle_position_embeddings")
    mosaic.select(click_tile, [source, rows, cols, dim, kind, step_index, cmap], tile, api_visibility="private")
    return {"source": source, "inputs": inputs, "outputs": outputs, "map_in": map_in, "map": pe_map}


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
    dist = attention_view.render_distance(a)
    info = (f"{notice}\n\n" if notice else "") + (
        f"**{a.runner.spec.key}** ({a.runner.origin}); input {a.fitted.note}")
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


def inside_limits(src, model_key, resolution, layer, head, row, col, pca_layer):
    """UI only: the sliders of 'inside one head' and 'feature PCA' span the layers, heads and grid of what is shown."""
    if src is None:
        return gr.skip()
    try:
        a, _ = _analysis(src, model_key, resolution)
    except ValueError:
        return gr.skip()
    (gh, gw), depth, heads = a.maps.grid, a.maps.layers, a.maps.heads

    def fit(v, hi):
        return min(max(int(v), 0), hi)

    return (gr.Slider(maximum=depth, value=max(1, fit(layer, depth))), gr.Slider(maximum=heads - 1, value=fit(head, heads - 1)),
            gr.Slider(maximum=gh - 1, value=fit(row, gh - 1)), gr.Slider(maximum=gw - 1, value=fit(col, gw - 1)),
            gr.Slider(maximum=depth, value=max(1, fit(pca_layer, depth))))


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


@friendly
def run_inside_head(src, model_key, resolution, layer, head, row, col, cls, cmap, progress=gr.Progress()):
    """One head's arithmetic for one query, with the real numbers of this picture."""
    from vitviz.analyses import heads

    loaded = models.get_model(model_key, lambda f, msg: progress(f, desc=msg))
    resolution = budget.number(resolution, "short side", 8, 512, integer=True)
    layer, head, row, col = (budget.number(v, name, lo, 999, integer=True) for v, name, lo in (
        (layer, "layer", 1), (head, "head", 0), (row, "query row", 0), (col, "query column", 0)))
    fitted, record = heads.layer_record(loaded, load(src), resolution, layer)
    token, where = heads_view.query_token(record, row, col, bool(cls))
    image, text = heads_view.render(fitted, heads.trace(record, head, token), where, cmap)
    return image, (f"{loaded.notice}\n\n" if loaded.notice else "") + text


@friendly
def run_feature_pca(src, model_key, resolution, layer, progress=gr.Progress()):
    """A layer's patch tokens on their first three principal components, as colour, and the foreground."""
    loaded = models.get_model(model_key, lambda f, msg: progress(f, desc=msg))
    resolution = budget.number(resolution, "short side", 8, 512, integer=True)
    fitted, streams = features.tokens_for(loaded, load(src), resolution)
    image, text = features_view.render(loaded, fitted, streams, budget.number(layer, "layer", 1, 999, integer=True))
    return image, (f"{loaded.notice}\n\n" if loaded.notice else "") + text


@friendly
def run_compare(src, model_a, model_b, resolution, fraction, keep, cmap, progress=gr.Progress()):
    """Two models on the same picture, at the same share of their depth, on one colour scale."""
    resolution = budget.number(resolution, "short side", 8, 512, integer=True)
    fraction = budget.number(fraction, "share of the depth", 0.05, 1)
    keep = budget.number(keep, "share of mass", 0.01, 1)
    rgb = load(src)
    pair, notes = [], []
    for choice in (model_a, model_b):
        loaded = attention_view.comparison_model(choice, lambda f, msg: progress(f, desc=msg))
        name = choice if not loaded.notice else f"{loaded.spec.key} (for {choice})"
        if loaded.notice:
            notes.append(loaded.notice)
        pair.append((name, analysis.analyse(loaded, rgb, resolution)))
    image, text = attention_view.render_pair(pair, fraction, keep, cmap)
    return image, "\n\n".join(dict.fromkeys(notes)) + ("\n\n" if notes else "") + text


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


def attention_tab() -> dict:
    n_ckpt = max(1, len(assets.tiny_checkpoints()))
    spread_from = assets.tiny_info().get("spread_from_step")
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
            notice = gr.Markdown(elem_id="attention-notice")
            explorer_view = explorer_component()
            with gr.Row():
                with gr.Column(min_width=200):
                    box = figure("attn-box", "Box around the head-mean mask")
                with gr.Column(min_width=200):
                    crop = figure("attn-crop", "Free crop from attention")
            dist = figure("attn-distance")
    with gr.Accordion("Figures drawn on the server (to download, and what the /attention API returns)", open=False):
        with gr.Row():
            layer = FollowingSlider(1, 12, value=12, step=1, label="layer (1 = first)")
            keep = gr.Slider(0.1, 0.95, value=0.6, step=0.05, label="keep this share of attention mass")
            alpha = gr.Slider(0, 1, value=0.6, step=0.05, label="overlay opacity")
            cmap = gr.Dropdown(list(plotting.SEQUENTIAL), value="inferno", label="colormap")
        with gr.Row():
            fusion = gr.Radio(["mean", "max", "min"], value="mean", label="rollout: fuse heads by")
            discard = gr.Slider(0, 0.9, value=0.0, step=0.1, label="rollout: discard weakest share")
        heads = figure("attn-heads")
        table = gr.Markdown(elem_classes="vx-table")
        roll = figure("attn-rollout")
        query = figure("attn-query", "Click a patch in the box view above: its attention per head is drawn here")
    with gr.Accordion("Registers: DINOv2 with and without", open=False):
        with gr.Row():
            reg_btn = gr.Button("Compare on this image", scale=0, min_width=260)
            reg_note = gr.Markdown()
        reg_img = figure("registers")
    with gr.Accordion("Training timeline of the offline model", open=False):
        gr.Markdown("The embedded tiny ViT at each saved training step, on the current image (seen at 64 px), "
                    "all on one colour scale. Step 0 is the random initialisation: its attention is nearly even, "
                    "so 60% of it needs more than half the patches; training gathers it onto the shape." + (
                        f" From step {spread_from:,} on, training also charges any last-layer head that looks at "
                        "nearly the whole picture (not told where to look; see the model card), so a head that "
                        "stayed spread out until then has to pick a place." if spread_from else ""))
        step_index = gr.Slider(0, n_ckpt - 1, value=n_ckpt - 1, step=1, label="checkpoint")
        tl_btn = gr.Button("Show the timeline")
        tl_strip = figure("timeline-strip")
        tl_heads = figure("timeline-heads")
    with gr.Accordion("Inside one head: q·k, softmax, weighted sum", open=False) as head_box:
        explain("One head of one layer, for one query, with this picture's real numbers: the query vector q meets "
                "every key k, each score q·k/√d says how well they match, the softmax turns the scores into "
                "weights that sum to 1 (the attention row), and the head's output is the values added up with "
                "those weights. The last panel checks our sum against what the model itself computed.")
        with gr.Row():
            in_layer = FollowingSlider(1, 12, value=12, step=1, label="layer", elem_id="inside-layer")
            in_head = FollowingSlider(0, 11, value=0, step=1, label="head")
            in_row = FollowingSlider(0, 63, value=3, step=1, label="query row")
            in_col = FollowingSlider(0, 63, value=4, step=1, label="query column")
            in_cls = gr.Checkbox(False, label="the [CLS] token as the query")
        in_note = gr.Markdown()
        in_fig = figure("inside-head")
    with gr.Accordion("Patch-feature PCA: what the tokens have in common (DINOv2's colour view)", open=False) as pca_box:
        pca_layer = FollowingSlider(1, 12, value=12, step=1, label="tokens after layer")
        pca_note = gr.Markdown()
        pca_fig = figure("feature-pca")
    with gr.Accordion("Two models side by side, on one scale", open=False) as pair_box:
        choices = list(views_spec.comparison_choices())
        steps = [c for c in choices if " @ step " in c]
        with gr.Row():
            pair_a = gr.Dropdown(choices, value=steps[len(steps) // 2] if steps else choices[0], label="left model")
            pair_b = gr.Dropdown(choices, value=steps[-1] if steps else choices[-1], label="right model")
            pair_frac = gr.Slider(0.1, 1.0, value=1.0, step=0.05, label="layer, as a share of each model's depth")
        pair_btn = gr.Button("Compare")
        pair_note = gr.Markdown(elem_classes="vx-table")
        pair_fig = figure("attn-pair")
    key = gr.Textbox(visible="hidden", elem_id="attention-image-key")

    inputs = [src, model_key, resolution, layer, keep, alpha, cmap, fusion, discard]
    outputs = [notice, heads, table, roll, box, crop, dist]
    model = dict(concurrency_id="model", concurrency_limit=MODEL_CONCURRENCY)
    wire_download(dl_button, dl_file, bundle_attention, inputs, "bundle_attention", **model)

    head_in = [src, model_key, resolution, layer, keep, alpha, cmap]

    def analyse_on(trigger, public: bool = False):
        """Run the forward (or reuse it); then the explorer's data and the layer slider's range (UI only)."""
        named = dict(api_name="attention") if public else dict(api_visibility="private")
        run, explore = (run_attention, run_explorer) if public else (quiet(run_attention), quiet(run_explorer))
        done = trigger(run, inputs, outputs, **model, **named)
        shown = done.success(explore, [src, model_key, resolution, keep, alpha, cmap], explorer_view, **model,
                             **(dict(api_name="explorer") if public else dict(api_visibility="private")))
        shown.then(None, None, None, js=reveal("#attention-notice"))
        done.success(layer_slider, [model_key, layer], layer, api_visibility="private", **model)
        done.success(inside_limits, [src, model_key, resolution, in_layer, in_head, in_row, in_col, pca_layer],
                     [in_layer, in_head, in_row, in_col, pca_layer], api_visibility="private", **model)

    analyse_on(go.click, public=True)
    accepted = src.change(accept, src, [src, key], api_visibility="private", concurrency_limit=None)
    analyse_on(accepted.success)
    analyse_on(lambda *a, **k: model_key.change(*a, **k, trigger_mode="always_last"))
    analyse_on(resolution.release)
    for comp in (layer, keep, alpha):
        comp.release(quiet(rerender_heads), head_in, [heads, table, box, crop], api_visibility="private", **model)
    cmap.change(quiet(rerender_heads), head_in, [heads, table, box, crop], api_visibility="private", **model)
    roll_in = [src, model_key, resolution, alpha, cmap, fusion, discard]
    fusion.change(quiet(rerender_rollout), roll_in, roll, api_visibility="private", **model)
    discard.release(quiet(rerender_rollout), roll_in, roll, api_visibility="private", **model)
    box.select(click_query, [src, model_key, resolution, layer, alpha, cmap], query, api_visibility="private", **model)
    reg_btn.click(run_registers, [src, resolution, alpha, cmap], [reg_note, reg_img], api_name="registers", **model)
    tl_btn.click(run_timeline, [src, step_index, alpha, cmap], [tl_strip, tl_heads], api_name="timeline", **model)
    step_index.release(quiet(run_timeline), [src, step_index, alpha, cmap], [tl_strip, tl_heads],
                       api_visibility="private", **model)
    head_in = [src, model_key, resolution, in_layer, in_head, in_row, in_col, in_cls, cmap]
    # .input: a person moving a control (the sliders' ranges follow the model without running anything)
    gr.on([c.input for c in (in_layer, in_head, in_row, in_col, in_cls)], quiet(run_inside_head), head_in,
          [in_fig, in_note], api_name="inside_head", trigger_mode="always_last", **model)
    head_box.expand(quiet(run_inside_head), head_in, [in_fig, in_note], api_visibility="private", **model)
    pca_in = [src, model_key, resolution, pca_layer]
    pca_layer.input(quiet(run_feature_pca), pca_in, [pca_fig, pca_note], api_name="feature_pca",
                     trigger_mode="always_last", **model)
    pca_box.expand(quiet(run_feature_pca), pca_in, [pca_fig, pca_note], api_visibility="private", **model)
    pair_in = [src, pair_a, pair_b, resolution, pair_frac, keep, cmap]
    pair_btn.click(run_compare, pair_in, [pair_fig, pair_note], api_name="compare_models", **model)
    pair_box.expand(quiet(run_compare), pair_in, [pair_fig, pair_note], api_visibility="private", **model)
    key.change(None, key, None, js="(k) => window.vitvizLink?.image('attention', k)")
    model_key.change(None, model_key, None, js=remember("model"))
    resolution.change(None, resolution, None, js=remember("side"))
    return {"src": src, "model": model_key, "layer": layer, "keep": keep, "registers": reg_btn,
            "registers_note": reg_note, "resolution": resolution}


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
    from vitviz.analyses import classify

    seed = budget.number(seed, "shuffle seed", 0, 2**31 - 1, integer=True)
    r = classify.shuffle_experiment(models.get_model(model_key), load(src), seed)
    h, w = r.scrambled.shape[:2]  # the model's input (64 px for the offline model): enlarged, patch edges kept
    return plotting.upscale(r.scrambled, plotting.display_scale(h, w, 384)), classify_view.shuffle_markdown(r)


@friendly
def run_relevance(src, model_key, rank, progress=gr.Progress()):
    """Class-specific relevance for one of the top 5, beside plain rollout."""
    loaded = models.get_model(model_key, lambda f, msg: progress(f, desc=msg))
    image, text = classify_view.render_relevance(loaded, load(src), budget.number(rank, "rank", 1, 5, integer=True))
    return image, (f"{loaded.notice}\n\n" if loaded.notice else "") + text


def run_tradeoff():
    from vitviz.analyses import classify

    return classify_view.tradeoff_markdown(classify.patch_size_tradeoff())


def classify_tab() -> dict:
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
            notice = gr.Markdown(elem_id="classify-notice")
            top5 = gr.Label(num_top_classes=5, label="top 5", elem_id="classify-top5")
            maps = figure("classify-maps")
            facts = gr.Markdown(elem_classes="vx-table")
    with gr.Accordion("Class-specific relevance: which patches raised this class's score", open=False) as rel_box:
        rel_rank = gr.Radio([1, 2, 3, 4, 5], value=1, label="class: its place in the top 5")
        rel_note = gr.Markdown()
        rel_fig = figure("classify-relevance")
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
            with gr.Column(min_width=300):
                scrambled = figure("shuffled", "The patches, shuffled")
            sh_md = gr.Markdown(elem_classes="vx-table")
    with gr.Accordion("Experiment: patch size trade-off", open=False):
        explain("Same ViT-S body with patches of 8, 16 and 32 pixels at 224 px, timed on this machine.")
        tr_btn = gr.Button("Measure (takes a few seconds)")
        tr_md = gr.Markdown(elem_classes="vx-table")
    key = gr.Textbox(visible="hidden", elem_id="classify-image-key")
    model = dict(concurrency_id="model", concurrency_limit=MODEL_CONCURRENCY)
    outputs = [notice, top5, maps, facts]
    go.click(run_classify, [src, model_key], outputs, api_name="classify", **model)
    src.change(accept, src, [src, key], api_visibility="private", concurrency_limit=None).success(
        quiet(run_classify), [src, model_key], outputs, api_visibility="private", **model).then(
        None, None, None, js=reveal("#classify-notice"))
    model_key.change(quiet(run_classify), [src, model_key], outputs, api_visibility="private",
                     trigger_mode="always_last", **model)
    wire_download(dl_button, dl_file, bundle_classify, [src, model_key], "bundle_classify", **model)
    sh_btn.click(run_shuffle, [src, model_key, seed], [scrambled, sh_md], api_name="shuffle", **model)
    tr_btn.click(run_tradeoff, None, tr_md, api_name="patch_size_tradeoff", **model)
    rel_in = [src, model_key, rel_rank]
    rel_rank.change(quiet(run_relevance), rel_in, [rel_fig, rel_note], api_name="relevance", **model)
    rel_box.expand(quiet(run_relevance), rel_in, [rel_fig, rel_note], api_visibility="private", **model)
    key.change(None, key, None, js="(k) => window.vitvizLink?.image('classify', k)")
    model_key.change(None, model_key, None, js=remember("classifier"))
    return {"src": src, "model": model_key}


# ---- the app --------------------------------------------------------------------------------

TABS = ("patches", "positions", "attention", "classify")
"""Tab ids, as links name them (?tab=...)."""
DEFAULT_MODELS = {"attention": "DINO ViT-S/8", "classify": "ViT-B/16 (ImageNet-1k)"}
OFFLINE_SCENE = "scene_star.png"
"""What the Attention and Classify tabs open on when only the offline model can be had: a scene it knows."""


def model_choices(task: str) -> list[tuple[str, str]]:
    """(label, key) pairs: a model that cannot be had now says so ('…: needs download'); the value stays the key."""
    return [(models.choice_label(k), k) for k in registry.keys(task)]


def page_opener(c: dict):
    """The page-load callback for the components ``c`` (tabs, projector, notice, and each tab's parts)."""

    def on_load(request: gr.Request) -> dict:
        """Open the page as its link says (tab, picture, model, settings), or on a computed example.

        Only the open tab gets its picture now (which starts its work); the others get theirs when first
        opened (:func:`open_tab`). Model lists learn once per process which models need a download. Only
        what the link sets is returned; every other component keeps its value.
        """
        q = dict(request.query_params) if request is not None else {}
        tab = q.get("tab") if q.get("tab") in TABS else "patches"
        available = models.available_now()
        offline = {task: not available.get(DEFAULT_MODELS[task], False) for task in DEFAULT_MODELS}
        defaults = {"patches": str(EXAMPLES / "cat.png"), **{
            task: str(EXAMPLES / (OFFLINE_SCENE if offline[task] else "cat.png")) for task in DEFAULT_MODELS}}
        out = {}
        wanted = q.get("image")
        if wanted and tab in defaults:
            if example_for(wanted):
                defaults[tab] = example_for(wanted)
            elif wanted.startswith("upload-"):
                out[c["notice"]] = gr.Markdown(
                    f"This link was made with an uploaded picture ({wanted}). Pictures cannot travel in a link, so "
                    "it opens on an example instead: upload the picture again to see it. Every other setting in "
                    "the link is restored.", visible=True)
        if tab in defaults:
            out[c[tab]["src"]] = defaults.pop(tab)
        if "tab" in q:
            out[c["tabs"]] = gr.Tabs(selected=tab)
        if q.get("projector") == "1":
            out[c["projector"]] = True
        if q.get("patch") in {str(p) for p in PATCH_SIZES}:
            out[c["patches"]["patch"]] = int(q["patch"])
        if q.get("pe") in PE_SOURCES:
            out[c["positions"]["source"]] = q["pe"]
        for task, param in (("attention", "model"), ("classify", "classifier")):
            chosen = q[param] if q.get(param) in registry.keys(task) else (
                registry.OFFLINE_KEY if offline[task] else DEFAULT_MODELS[task])
            out[c[task]["model"]] = gr.Dropdown(choices=model_choices(task), value=chosen)
        for component, name, lo, hi, integer in ((c["patches"]["resolution"], "res", 8, 640, True),
                                                 (c["attention"]["resolution"], "side", 64, 512, True),
                                                 (c["attention"]["layer"], "layer", 1, 64, True),
                                                 (c["attention"]["keep"], "keep", 0.1, 0.95, False)):
            try:
                out[component] = budget.number(q[name], name, lo, hi, integer=integer)
            except (KeyError, ValueError):
                pass
        registers_ok = all(available.get(k, False) for k in attention_view.REGISTER_PAIR)
        out[c["attention"]["registers"]] = gr.Button(interactive=registers_ok)
        if not registers_ok:
            out[c["attention"]["registers_note"]] = "Not available here: " + attention_view.REGISTERS_UNAVAILABLE
        out[c["opened"]], out[c["defaults"]] = tab, defaults
        return out

    return on_load


def open_tab(name: str):
    """UI only: the first time a tab is opened it gets its example picture (which starts its work)."""
    def opener(src, defaults):
        if src is not None or name not in defaults:
            return gr.skip(), gr.skip()
        defaults = dict(defaults)
        return defaults.pop(name), defaults
    return opener


def open_positions(opened, *args):
    """UI only: the page opened on the Position-embeddings tab draws it straight away."""
    return run_posembed(*args) if opened == "positions" else gr.skip()


def open_positions_map(opened, *args):
    return run_pe_map(*args) if opened == "positions" else gr.skip()


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


def _encode(img, format: str) -> bytes:
    """gradio's encoding, but PNG at zlib level 1: the figures' PNG took 82 ms at level 6 and takes 22 ms (a
    636×649 heads figure, 20% larger file); the text chunks (the recorded text size) are kept."""
    import io

    from gradio import processing_utils

    if format.lower() != "png":
        return processing_utils.encode_pil_to_bytes(img, format)
    buf = io.BytesIO()
    img.save(buf, "png", pnginfo=processing_utils.get_pil_metadata(img), compress_level=1)
    return buf.getvalue()


def _save_pil_atomically(img, cache_dir: str, name: str = "image", format: str = "webp") -> str:
    """gradio's ``save_pil_to_cache``, but written under a temporary name and renamed into place."""
    import uuid

    from gradio import processing_utils

    data = _encode(img, format)
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
        with gr.Row():
            with gr.Column(scale=5, min_width=300):
                gr.Markdown("# vitviz: how a Vision Transformer sees an image\n"
                            "From pixels to patch tokens, position embeddings, attention and a prediction. "
                            "Pick a tab, then click an example or upload your own picture. The address bar always "
                            "holds a link to what you see.", elem_id="intro")
            with gr.Column(scale=1, min_width=240):
                projector = gr.Checkbox(False, label="Projector mode (large text)", elem_id="projector",
                                        container=False)
        link_notice = gr.Markdown(visible=False, elem_id="link-notice", elem_classes="vx-note")
        with gr.Tabs(overflow_behavior="wrap") as tabs:
            with gr.Tab("Patches", id="patches") as t_patches:
                pt = patches_tab()
            with gr.Tab("Position embeddings", id="positions") as t_positions:
                pe = posembed_tab(t_positions)
            with gr.Tab("Attention", id="attention") as t_attention:
                at = attention_tab()
            with gr.Tab("Classify", id="classify") as t_classify:
                cl = classify_tab()
        opened, defaults = gr.State(), gr.State({})
        parts = {"tabs": tabs, "projector": projector, "notice": link_notice, "opened": opened, "defaults": defaults,
                 "patches": pt, "positions": pe, "attention": at, "classify": cl}
        loads = [tabs, projector, link_notice, opened, defaults, pt["src"], pt["patch"], pt["resolution"],
                 pe["source"], at["src"], at["model"], at["resolution"], at["layer"], at["keep"], at["registers"],
                 at["registers_note"], cl["src"], cl["model"]]
        demo.load(page_opener(parts), None, loads, api_visibility="private").then(
            open_positions, [opened] + pe["inputs"], pe["outputs"], api_visibility="private").success(
            open_positions_map, [opened] + pe["map_in"], pe["map"], api_visibility="private")
        for tab, name in ((t_patches, "patches"), (t_attention, "attention"), (t_classify, "classify")):
            src = parts[name]["src"]
            tab.select(open_tab(name), [src, defaults], [src, defaults], api_visibility="private", queue=False)
        for tab, name in zip((t_patches, t_positions, t_attention, t_classify), TABS):
            tab.select(None, None, None, js=f"() => window.vitvizLink?.tab({name!r})")
        projector.change(None, projector, None, js="(on) => window.vitvizLink?.projector(on)")
    demo.queue(default_concurrency_limit=2, max_size=QUEUE_SIZE)
    return demo


def light_only(theme: gr.themes.Base) -> gr.themes.Base:
    """The theme with its dark palette replaced by the light one: a dark-mode browser gets the light page at once.

    (The figures are drawn on white; forcing light mode by reloading with ?__theme=light flashed for ~1.3 s.)
    """
    same = {name: getattr(theme, name[:-len("_dark")]) for name in vars(theme)
            if name.endswith("_dark") and hasattr(theme, name[:-len("_dark")])}
    return theme.set(**same)


PROJECTOR_PX = {"text_xxs": 18, "text_xs": 20, "text_sm": 20, "text_md": 22, "text_lg": 24, "text_xl": 28,
                "text_xxl": 32}
"""Projector mode's page text sizes: nothing under 20 px but the smallest print (slider ends)."""


def projector_css(theme: gr.themes.Base) -> str:
    """CSS for body.vx-projector: the theme's text sizes, and every size defined from them, made large."""
    sizes = {f"--{k.replace('_', '-')}": f"{v}px" for k, v in PROJECTOR_PX.items()}
    for name, value in vars(theme).items():  # e.g. block_label_text_size = "*text_sm"
        if name.endswith("text_size") and isinstance(value, str) and value.startswith("*"):
            px = PROJECTOR_PX.get(value[1:])
            if px:
                sizes[f"--{name.replace('_', '-')}"] = f"{px}px"
    return "body.vx-projector, body.vx-projector .gradio-container {" + "; ".join(
        f"{k}: {v}" for k, v in sizes.items()) + "}"


def launch_kwargs() -> dict:
    """Theme, CSS and the page script (Gradio 6 takes these in launch()); with VITVIZ_MCP=1 an MCP server."""
    theme = light_only(gr.themes.Default(text_size=gr.themes.sizes.text_lg, primary_hue="blue"))
    kwargs = dict(theme=theme, css=projector_css(theme), css_paths=[assets.THEME],
                  js=(WEB / "page.js").read_text(), max_file_size="50mb",
                  server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    if os.environ.get("VITVIZ_MCP") == "1":  # an assistant can call the named endpoints as tools
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            raise SystemExit("VITVIZ_MCP=1 needs gradio's MCP extra: pip install 'gradio[mcp]==6.31.0'.")
        kwargs["mcp_server"] = True
    return kwargs


def main() -> None:
    """Serve the app (``python app.py``): the library's log lines on the console."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    build_demo().launch(**launch_kwargs())
