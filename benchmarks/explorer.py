"""Interaction latency of the attention explorer in a real (headless) Chromium; prints a table.

    python -m benchmarks.explorer          # the tiny model, DINO ViT-S/8 shape at 224 and 480 px (about 2 minutes)

The explorer is the app's own component (``app.explorer_component``: the same
JS, CSS and server function), served by a small Blocks that loads one analysis
per case; the DINO ViT-S/8-shaped model is a local checkpoint (the real config,
random weights: speed does not depend on the weights). Latency is measured in
the page: from the input event's timestamp to the end of the animation frame
that drew the answer. "Round trip today" is the server-drawn path it replaces:
the same change sent to the server and the new figure drawn there (one warm
``/attention`` call through gradio_client, the analysis already cached).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
CASES = {"vitviz tiny, 64 px": ("tiny", 64), "DINO ViT-S/8 shape, 224 px": ("dino", 224),
         "DINO ViT-S/8 shape, 480 px": ("dino", 480)}


def serve(dino_dir: Path):
    """A Blocks with the app's explorer and a case picker; returns (demo, url, loaded models, the picture)."""
    import gradio as gr

    from vitviz import assets
    from vitviz.analyses import attention as analysis
    from vitviz.app import attention as attention_tab
    from vitviz.app.components import browser_view
    from vitviz.core import images
    from vitviz.models import loaders
    from vitviz.render import browser as explorer
    from vitviz.specs import views as spec

    loaded = {"tiny": loaders.load_embedded(), "dino": loaders.load_hf(dino_dir)}
    rgb = images.load_rgb(assets.EXAMPLES / "cat.png")
    side = min(rgb.shape[:2])
    rgb = rgb[:side, :side]

    def show(case: str) -> dict:
        kind, size = CASES[case]
        a = analysis.analyse(loaded[kind], rgb, size)  # the forward (not part of what is timed here)
        t0 = time.perf_counter()
        values = spec.ATTENTION.check({"layer": 12})
        payload = explorer.attention_payload(a, values, {f.name: f for f in attention_tab.HELD})
        payload["server_seconds"] = time.perf_counter() - t0
        payload["json_bytes"] = len(json.dumps(payload))
        return payload

    with gr.Blocks() as demo:
        case = gr.Radio(list(CASES), label="case", elem_id="case")
        view = browser_view("explorer", "attention-explorer", "attention explorer",
                            server_functions=[attention_tab.explorer_rows])
        case.change(show, case, view)
    demo.queue()
    from benchmarks.load import free_port

    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return demo, f"http://127.0.0.1:{port}/", loaded, rgb


def measure(page, case: str, dino_dir) -> dict:
    """Load one case, then 20 hovers, layer switches without a fetch, and one layer switch that fetches."""
    page.get_by_label(case).check()
    t0 = time.perf_counter()
    page.wait_for_function(f"(c) => {{ const s = document.querySelector('#attention-explorer .vx')?.__vx;"
                           f" return s && s.p && s.n && document.querySelector('#attention-explorer .vx-big "
                           f"figcaption')?.dataset.count > 0 && s.p.grid[0] === {CASES[case][1]} / "
                           "8; }", arg=case, timeout=600_000)
    ready = time.perf_counter() - t0
    meta = page.evaluate("() => { const s = document.querySelector('#attention-explorer .vx').__vx;"
                         " return {bytes: s.p.bytes, json: s.p.json_bytes, server: s.p.server_seconds, n: s.n,"
                         " sent: Object.keys(s.p.rows).length, layers: s.p.layers}; }")
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    reset = "() => { const s = document.querySelector('#attention-explorer .vx').__vx; s.timings.length = 0; }"
    timings = "() => document.querySelector('#attention-explorer .vx').__vx.timings.slice()"
    page.evaluate(reset)
    for i in range(20):
        page.mouse.move(box["x"] + box["width"] * (0.1 + 0.8 * ((i * 7) % 20) / 20),
                        box["y"] + box["height"] * (0.1 + 0.8 * ((i * 3) % 20) / 20))
        page.wait_for_timeout(40)
    hover = page.evaluate(timings)
    page.mouse.move(0, 0)  # the class token: switching layer draws from what was sent
    page.wait_for_timeout(100)
    page.locator("#attention-explorer .vx").focus()
    page.evaluate(reset)
    for key in "[[[]]]":
        page.keyboard.press(key)
        page.wait_for_timeout(60)
    layer = page.evaluate(timings)
    fetch = None
    if meta["sent"] < meta["layers"]:  # pin a patch, switch to a layer whose rows were not sent: one fetch
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.locator("#attention-explorer .vx").focus()
        t0 = time.perf_counter()
        page.keyboard.press("[")
        page.wait_for_function(f"() => {{ const d = document.querySelector('#attention-explorer .vx-big "
                               f"figcaption').dataset; return d.layer === '{meta['layers'] - 1}' && d.count > 0; }}",
                               timeout=120_000)
        fetch = time.perf_counter() - t0
    return {"ready": ready, "hover": hover, "layer": layer, "fetch": fetch, **meta}


def round_trip(dino_dir: Path) -> dict:
    """Today's server path: a warm /attention call (analysis cached, figures drawn on the server)."""
    from gradio_client import Client, handle_file

    from benchmarks.load import free_port
    from vitviz import app, assets
    from vitviz.models import cache as models
    from vitviz.models import loaders
    from vitviz.specs import registry

    with models._cache_lock:
        models._cache["DINO ViT-S/8"] = loaders.load_hf(dino_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    demo = app.build_demo()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    from PIL import Image

    square = dino_dir.parent / "cat_square.png"  # the explorer's cases use the same square crop
    with Image.open(assets.EXAMPLES / "cat.png") as im:
        side = min(im.size)
        im.convert("RGB").crop((0, 0, side, side)).save(square)
    cat = handle_file(str(square))
    out = {}
    for key, model, size in [("tiny", registry.OFFLINE_KEY, 64), ("dino224", "DINO ViT-S/8", 224),
                             ("dino480", "DINO ViT-S/8", 480)]:
        client.predict(cat, model, size, api_name="/attention")  # the forward, once
        t0 = time.perf_counter()
        client.predict(cat, model, size, keep=0.55, api_name="/attention")  # a slider moved: redrawn on the server
        out[key] = time.perf_counter() - t0
    demo.close()
    return out


def ms(values: list[float], q: int) -> str:
    if not values:
        return "–"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[q - 1] if len(values) > 1 else values[0]:.1f}"


def main() -> None:
    from playwright.sync_api import sync_playwright

    from benchmarks.bench import dino_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        dino_dir = dino_checkpoint(Path(tmp) / "dino")
        trips = round_trip(dino_dir)
        demo, url, _, _ = serve(dino_dir)
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(url)
            for case in CASES:
                rows.append((case, measure(page, case, dino_dir)))
            browser.close()
        demo.close()
    print("| case | patches | sent per analysis (JSON) | server packs it | forward + pack + transfer + decode | hover p50 / p95 | "
          "layer switch p50 / p95 | layer switch with a fetch | round trip today |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (case, m), trip in zip(rows, trips.values()):
        fetch = f"{m['fetch'] * 1000:.0f} ms" if m["fetch"] is not None else "not needed (all layers sent)"
        print(f"| {case} | {m['n']:,} | {m['json'] / 2**20:.2f} MiB ({m['sent']} of {m['layers']} layers' rows) | "
              f"{m['server'] * 1000:.0f} ms | {m['ready']:.2f} s | {ms(m['hover'], 50)} / {ms(m['hover'], 95)} ms | "
              f"{ms(m['layer'], 50)} / {ms(m['layer'], 95)} ms | {fetch} | {trip * 1000:.0f} ms |")
    print("\nGoals: hover ≤ 16 ms at 224 px; a layer switch that needs no fetch ≤ 50 ms.")


if __name__ == "__main__":
    main()
