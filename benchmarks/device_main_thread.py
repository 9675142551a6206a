"""How long the page's main thread is blocked while the device path prepares and computes a picture, by picture size:
the app in this process, headless Chromium (Debian's, as the browser tests), the Attention tab's device link with
the offline model, each picture chosen in the device's own box on a new page.

    python -m benchmarks.device_main_thread
    python -m benchmarks.device_main_thread --big 4000x3000

Columns: the picture and its size; the longest main-thread task (Chromium's long tasks, PerformanceObserver) begun
from the choice until the forward's outputs are back (reading the file: decode, RGBA -> RGB; the Pillow-exact resize
and normalisation, ``prepare``; the session, whose preparation and forward run in ONNX Runtime's proxy worker);
the longest while the explorer draws the answer afterwards; ``prepare``'s own time (the resize, on the main thread);
the session's preparation and the forward as the page measured them. The first row is a first visit (ONNX Runtime and
the model downloaded); the others read both from the browser's cache.

This is where the device path's main-thread figures are measured (issue 68 item 8's goal was a longest task of at
most 200 ms); the browser tests only check that the work happens in the proxy worker, not how fast.

2026-12-01, this 2-core machine (loaded by other runs), the offline model, WebAssembly in the proxy worker:

    | picture               | size      | visit  | longest task (ms) | drawing (ms) | prepare (ms) | forward (ms) |
    | scene_star.png        | 64×64     | first  | 0                 | 101          | 2            | 112.6        |
    | chelsea.png           | 451×300   | cached | 97                | 74           | 96           | 141.7        |
    | coffee.png            | 600×400   | cached | 120               | 55           | 109          | 115.2        |
    | chelsea-4000x3000.jpg | 4000×3000 | cached | 385               | 139          | 384          | 128.1        |

The large photo's longest task is ``prepare`` on the main thread (the resize of 12 million pixels): over the goal
until the reading and ``prepare`` move into a Worker.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

WATCH = """window.__long = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]); })
  .observe({ type: 'longtask', buffered: true });"""
READY = "() => document.querySelector('#device-panel .vx-dev-what')?.textContent.includes('MB')"
DONE = "(n) => Number(document.querySelector('#device-panel .vx-device')?.dataset.done) >= n"


def pictures(folder: Path, big: tuple[int, int]) -> list[Path]:
    """The pictures timed: an example scene, scikit-image's chelsea and coffee as PNG, and chelsea upscaled (Pillow's
    bicubic) to ``big`` as a JPEG (a phone photo's size)."""
    from PIL import Image
    from skimage import data

    from vitviz import assets

    out = [assets.EXAMPLES / "scene_star.png"]
    for name in ("chelsea", "coffee"):
        path = folder / f"{name}.png"
        Image.fromarray(getattr(data, name)()).save(path)
        out.append(path)
    path = folder / f"chelsea-{big[0]}x{big[1]}.jpg"
    Image.fromarray(data.chelsea()).resize(big, Image.BICUBIC).save(path, quality=90)
    out.append(path)
    return out


def measure(ctx, url: str, picture: Path) -> dict:
    """One new page of ``ctx`` at the device link, ``picture`` chosen and computed: the figures of one row."""
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url + "?tab=attention&device=1")
        page.wait_for_function(READY, timeout=180_000)
        page.wait_for_timeout(1000)
        since = page.evaluate("() => performance.now()")
        page.locator("#device-picture").set_input_files(str(picture))
        page.wait_for_function(DONE, arg=1, timeout=300_000)
        page.wait_for_timeout(1500)  # the explorer's drawing, and the long tasks' reports
        got = page.evaluate("""(t) => { const D = window.vitvizDevice, L = D.last || {};
            return { ran: D.ranAt, long: window.__long.filter(([s]) => s >= t), prep: L.prep, load: L.load, ms: L.ms,
                     backend: L.backend, proxy: !!window.ort?.env?.wasm?.proxy }; }""", since)
    finally:
        page.close()
    working = [d for s, d in got["long"] if s < got["ran"]]
    drawing = [d for s, d in got["long"] if s >= got["ran"]]
    return got | {"working": max(working, default=0.0), "drawing": max(drawing, default=0.0), "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--big", default="4000x3000", help="the large photo's size, WxH (default 4000x3000)")
    args = parser.parse_args()
    big = tuple(int(v) for v in args.big.lower().split("x"))

    from PIL import Image
    from playwright.sync_api import sync_playwright

    from vitviz import app
    from vitviz.app import serving
    from benchmarks.load import free_port

    demo = app.build_demo()
    serving.freeze_what_lasts()
    port = free_port()
    kwargs = app.launch_kwargs() | {"server_name": "127.0.0.1", "server_port": port, "prevent_thread_lock": True,
                                    "quiet": True}
    demo.launch(**kwargs)
    serving.read_long_heads(demo)
    url = f"http://127.0.0.1:{port}/"
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                              "--disable-component-update"])
            ctx = browser.new_context(viewport={"width": 1280, "height": 720})
            ctx.add_init_script(WATCH)
            for k, picture in enumerate(pictures(Path(tmp), big)):
                with Image.open(picture) as im:
                    size = f"{im.width}×{im.height}"
                got = measure(ctx, url, picture)
                rows.append((picture.name, size, picture.stat().st_size, "first" if k == 0 else "cached", got))
            ctx.close()
            browser.close()
    finally:
        demo.close()
    print("| picture | size | bytes | visit | longest task while preparing and computing (ms) | longest while drawing "
          "(ms) | prepare (ms) | session (ms) | forward (ms) | backend, proxy | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, size, nbytes, visit, g in rows:
        print(f"| {name} | {size} | {nbytes:,} | {visit} | {g['working']:.0f} | {g['drawing']:.0f} | {g['prep']:.0f} | "
              f"{g['load']:.0f} | {g['ms']:.1f} | {g['backend']}, {g['proxy']} | {len(g['errors'])} |")


if __name__ == "__main__":
    main()
