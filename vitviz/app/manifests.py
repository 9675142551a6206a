"""The device path's manifests, a leaf of the app: what a browser downloads to compute the Attention or Classify
view itself (the graph, the preprocessing, the labels, the explorer's settings), made through the queue the first
time and answered from memory after that (``GET /vitviz/device-manifest``, :mod:`vitviz.app.serving`). Imports no
other module of the app, so the route, the Attention tab and the Classify tab can all use it without a circle."""

from __future__ import annotations

import logging

import numpy as np

from vitviz import assets
from vitviz.core import owned
from vitviz.core.lru import LRU
from vitviz.models import budget, device
from vitviz.models import cache as models
from vitviz.render import browser
from vitviz.specs import tabs as declared_tabs
from vitviz.specs import views as declared
from vitviz.views.shown import scene_keys, shapes_only

log = logging.getLogger("vitviz")

A = declared.ATTENTION
HELD = tuple(A[n] for n in ("layer", "head", "keep", "alpha", "cmap", "query"))
"""The Attention view's settings the explorer holds in the browser."""
SIDED = ("attention", "forward")
"""The tabs whose device manifest follows the short side asked (Classify's is its classifier's own size)."""
RUNTIME_WASM = {"wasm": "ort-wasm-simd-threaded.wasm", "webgpu": "ort-wasm-simd-threaded.asyncify.wasm"}
"""ONNX Runtime Web's WebAssembly file of each build (render/web/device.js names the same)."""
TABS = tuple(t.id for t in declared_tabs.TABS.values() if t.device)
"""The tabs that compute on a device (a "compute on this device" switch: ``TabSpec.device``)."""


MADE: LRU[dict] = owned.keep("manifests.made", "results", LRU(256), "device manifests made so far")
"""The manifests made so far, by (tab, model asked, short side asked or ''): what ``GET /vitviz/device-manifest``
answers from without any work (:func:`made_manifest`)."""


def made_manifest(tab: str, model: str, side: str = "") -> dict | None:
    """A manifest already made for ``tab`` (one of :data:`TABS`), ``model`` and (:data:`SIDED`) ``side``, with the
    explorer's settings at their defaults (the page puts its own over them); None when it has not been made (the
    page then asks through the queue, which makes it)."""
    made = MADE.get((tab, model, side))
    if made is None:
        return None
    # the server's forward as it is now: the median of its latest (made once, the manifest would keep one moment's)
    timing = made.get("timing")
    now = device.recent_ms(tuple(timing[0]), made["cost"], timing[1]) if timing else None
    made = made | ({"server_ms": now} if now else {})
    return made | browser.explorer_template({f.name: f.default for f in HELD}, {f.name: f for f in HELD},
                                            made.get("layers"))


def device_manifest(values: dict, progress=None, tab: str = "attention") -> dict:
    """What a device downloads to compute ``tab``'s view (Attention, Classify or the Forward pass) itself, for the
    checked settings ``values`` (model, short side, the explorer's): the graph's file and size, the preprocessing,
    the labels (:func:`vitviz.models.device.manifest`), the explorer's settings, the Forward pass's stages, the
    server's own forward time and the notice
    when another model stands in; or ``{"error": why}`` when the model cannot run on a device. The graph is made the
    first time (seconds), within the server's memory budget."""
    runner = models.get_model(values["model"], progress)
    side = runner.side(values["resolution"])
    tokens = (side // runner.spec.patch) ** 2 + runner.spec.prefix
    try:
        # making the graph holds the model twice more (a copy for the export, one with its weights rounded)
        with budget.reserve(2 * runner.nbytes + 2 * budget.forward_bytes(runner.spec, tokens),
                            "making the model's file for this device"):
            made = device.manifest(runner, side)
    except Exception as err:  # noqa: BLE001 - whatever stops the export, the page falls back to the server, said
        log.info("no device graph for %s: %s", runner.spec.key, err)
        return {"error": str(err), "model": runner.spec.key}
    warning = shapes_only(runner.spec.key, np.zeros((1, 1, 3), np.uint8))  # what a photo gets from this model
    # the examples a link may name (image=), where the page fetches them (gradio's file route: the package's
    # examples are the app's allowed paths): a device page computes the link's picture when none was chosen by hand
    made["examples"] = {p.stem: f"gradio_api/file={p}" for p in sorted(assets.EXAMPLES.iterdir())
                        if p.suffix.lower() in (".png", ".jpg", ".jpeg")}
    # ONNX Runtime's WebAssembly for each build, which a first visit downloads (the page counts it as it comes)
    made["runtime_bytes"] = {build: (assets.ORT / name).stat().st_size for build, name in RUNTIME_WASM.items()}
    made |= {"notice": runner.notice, "server_ms": device.server_ms(runner, side),
             # what the server's time is kept under, and the tokens of the side it is said at (scaled by the cost)
             "timing": [list(runner.timing_key), device.square_tokens(runner, side)],
             "side_note": runner.side_reason(values["resolution"]), "shapes_warning": warning.replace("**", ""),
             "scenes": sorted(scene_keys()) if warning else []}
    if tab == "forward":  # its stages, their words and links, what the residual view follows, the lens's caveat
        from vitviz.views.forward import device_plan

        made["forward"] = device_plan(runner, side, made["width"])
    MADE.put((tab, str(values["model"]), str(int(values["resolution"])) if tab in SIDED else ""), made)
    return made | browser.explorer_template({f.name: values.get(f.name, f.default) for f in HELD},
                                            {f.name: f for f in HELD}, runner.depth)
