"""The attention explorer in a real (headless) Chromium, on the real app: bytes sent and latency; prints a table.

    python -m benchmarks.explorer          # the embedded model, DINO ViT-S/8 shape at 224, 384, 512 px (~3 min)

The app runs as it is served (``vitviz.app.build_demo``) with a DINO ViT-S/8-shaped checkpoint (the real config,
random weights: bytes and speed do not depend on the weights) put into its model cache under the registry's key.
Each case opens its own link, ``?tab=attention&image=…&model=…&side=…``, in a fresh browser context (an
empty HTTP cache), on the full cat example (28×42 patches at 224 px for /8; at 512 px the cat is over the model's
token budget, so the square astronaut, 64×64 patches).

Columns:
- page: every byte the browser received for the page (Chrome's encoded, on-the-wire counts) except the
  explorer's payload, until 1.5 s after the first map (the app's JS and CSS, example thumbnails, the server's
  figures of the same view, events).
- payload: the explorer's data: its JSON (as the page received it) and any files it fetched for the first map.
- first map: from opening the link to the explorer's first drawn map (page load, forward, packing, transfer);
  another picture: on the open page, from clicking another example (the star scene) to its first map.
- hover, key, layer: from the input event to the map drawn (p50 / p95; before the explorer drew in the input handler,
  to the end of the animation frame that drew it):
  40 pointer moves over the big map, 20 arrow keys, and 22 layer switches ([ and ], a patch pinned) of which the
  first visit of each layer may need data from the server (reported apart as "new layer").
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
VX = "document.querySelector('#attention-explorer .vx')"


def serve(dino_dir: Path):
    """The app, with the DINO ViT-S/8-shaped checkpoint cached as DINO ViT-S/8; returns (demo, url)."""
    from benchmarks.load import free_port
    from vitviz import app
    from vitviz.models import cache as models
    from vitviz.models import loaders
    from vitviz.specs import registry

    models.adopt("DINO ViT-S/8", loaders.load_hf(dino_dir, spec=registry.REGISTRY["DINO ViT-S/8"]))
    demo = app.build_demo()
    port = free_port()
    kwargs = app.launch_kwargs()
    kwargs.update(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    demo.launch(**kwargs)
    return demo, f"http://127.0.0.1:{port}/"


def cases() -> dict[str, tuple[str, int, str]]:
    """(model, short side, example) per case; at 512 px the cat (64×96 patches) is over S/8's token budget, so the
    square astronaut (64×64)."""
    from vitviz.specs import registry

    return {"embedded, 64 px, cat": (registry.OFFLINE_KEY, 64, "cat"),
            "DINO ViT-S/8 shape, 224 px, cat": ("DINO ViT-S/8", 224, "cat"),
            "DINO ViT-S/8 shape, 384 px, cat": ("DINO ViT-S/8", 384, "cat"),
            "DINO ViT-S/8 shape, 512 px, astronaut": ("DINO ViT-S/8", 512, "astronaut")}


def received(page):
    """Start counting the bytes the page receives (CDP); returns a function giving the total so far."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    chunks: dict[str, int] = {}
    done: dict[str, int] = {}
    cdp.on("Network.dataReceived", lambda e: chunks.__setitem__(e["requestId"], chunks.get(e["requestId"], 0)
                                                                 + e["encodedDataLength"]))
    cdp.on("Network.loadingFinished", lambda e: done.__setitem__(e["requestId"], e["encodedDataLength"]))
    return lambda: sum(max(chunks.get(k, 0), done.get(k, 0)) for k in set(chunks) | set(done))


def measure(browser, url: str, model: str, side: int, image: str) -> dict:
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    total = received(page)
    t0 = time.perf_counter()
    page.goto(f"{url}?tab=attention&image={image}&model={quote(model)}&side={side}", wait_until="commit")
    page.wait_for_function(f"() => {{ const s = {VX}?.__vx, c = document.querySelector('#attention-explorer "
                           f".vx-big figcaption'); return s && s.p && s.p.model === {model!r} && c && "
                           "c.dataset.count > 0; }", timeout=180_000, polling=20)
    first = time.perf_counter() - t0
    page.wait_for_timeout(1500)  # the server's figures of the same view arrive after the map
    at_first_map = total()  # everything so far: the page, its figures and the explorer's first data
    meta = page.evaluate(f"""() => {{ const s = {VX}.__vx;
        const files = performance.getEntriesByType('resource').filter((r) => /vitviz-rows|vitviz\/explorer\//.test(r.name));
        return {{ json: s.jsonBytes || JSON.stringify(s.p).length, n: s.n, layers: s.p.layers,
                  files: files.reduce((a, r) => a + (r.encodedBodySize || r.transferSize), 0) }}; }}""")
    cv = page.locator("#attention-explorer .vx-big canvas")
    cv.scroll_into_view_if_needed()
    box = cv.bounding_box()
    reset = f"() => {{ {VX}.__vx.timings.length = 0; }}"
    timings = f"() => {VX}.__vx.timings.slice()"
    page.evaluate(reset)
    for i in range(40):
        page.mouse.move(box["x"] + box["width"] * (0.05 + 0.9 * ((i * 7) % 40) / 40),
                        box["y"] + box["height"] * (0.05 + 0.9 * ((i * 13) % 40) / 40))
        page.wait_for_timeout(50)
    hover = page.evaluate(timings)
    pointing = page.evaluate("() => document.querySelector('#attention-explorer .vx-big figcaption').dataset.count "
                             "> 0")  # the last hover drew a patch's map (not "too large to send")
    per_head = page.evaluate("() => /%/.test(document.querySelector('#attention-explorer .vx-head[data-h=\"0\"] "
                             "figcaption').textContent)")  # head 0's own map for the patch, not only the mean
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # pin the centre patch
    page.locator("#attention-explorer .vx").focus()
    page.wait_for_timeout(200)
    page.evaluate(reset)
    for i in range(20):
        page.keyboard.press("ArrowRight" if i % 4 < 2 else "ArrowDown")
        page.wait_for_timeout(50)
    keys = page.evaluate(timings)
    new_layer, revisit = [], []
    seen = {page.evaluate(f"() => {VX}.__vx.layer")}
    layers = meta["layers"]
    for key in "[" * (layers - 1) + "]" * (layers - 1):
        before = page.evaluate(f"() => {VX}.__vx.layer")
        target = max(0, min(layers - 1, before + (1 if key == "]" else -1)))
        t1 = time.perf_counter()
        page.keyboard.press(key)
        try:
            page.wait_for_function(f"() => {{ const d = document.querySelector('#attention-explorer .vx-big "
                                   f"figcaption').dataset; return d.layer === '{target + 1}' && d.count > 0; }}",
                                   timeout=20_000 if not pointing else 120_000, polling=5)
        except Exception:  # noqa: BLE001  (no map for a pinned patch at this size: nothing to time)
            break
        if target in seen:  # drawn in the key's handler, from data already here: the page's own timing
            revisit.append(page.evaluate(f"() => {VX}.__vx.timings.at(-1)"))
        else:  # the layer's data came from the server first: timed from the key press to the map, here
            new_layer.append((time.perf_counter() - t1) * 1000)
        seen.add(target)
    token = page.evaluate(f"() => {VX}.__vx.p.token")
    t2 = time.perf_counter()  # another picture, on the open page: click the star scene in the examples (square,
    # so within the token budget at every side)
    page.locator(".tabitem:visible").first.locator(".gallery-item").nth(0).click()
    page.wait_for_function(f"(t) => {{ const s = {VX}.__vx, c = document.querySelector('#attention-explorer "
                           ".vx-big figcaption'); return s.p && s.p.token !== t && s.cls && c.dataset.count > 0; }",
                           arg=token, timeout=180_000, polling=20)
    meta["another"] = time.perf_counter() - t2
    meta["later"] = page.evaluate("""() => performance.getEntriesByType('resource')
        .filter((r) => /vitviz-rows|vitviz\/explorer\//.test(r.name)).reduce((a, r) => a + (r.encodedBodySize || 0), 0)""")
    out = {"pointing": pointing, "per_head": per_head, "first": first, "total": at_first_map, "all": total(), "hover": hover, "keys": keys, "new": new_layer, "revisit": revisit,
           **meta}
    ctx.close()
    return out


def pct(values: list[float], q: int) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[q - 1]:.1f}"


def both(values: list[float]) -> str:
    return f"{pct(values, 50)} / {pct(values, 95)}" if values else "–"


def main() -> None:
    from playwright.sync_api import sync_playwright

    from benchmarks.bench import dino_checkpoint

    label = sys.argv[1] if len(sys.argv) > 1 else ""
    with tempfile.TemporaryDirectory() as tmp:
        demo, url = serve(dino_checkpoint(Path(tmp) / "dino"))
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            warm = browser.new_context()
            warm.new_page().goto(url)  # the server's first page build is not what a student waits for
            warm.close()
            for case, (model, side, image) in cases().items():
                try:
                    rows.append((case, measure(browser, url, model, side, image)))
                except Exception as err:  # noqa: BLE001  (a case that never drew is reported, not fatal)
                    print(f"{case}: no first map ({type(err).__name__})", file=sys.stderr)
                    continue
                print(case, "done", rows[-1][1], file=sys.stderr)
            browser.close()
        demo.close()
    mib = lambda b: f"{b / 2**20:.2f} MiB"  # noqa: E731
    print(f"| case {label}| patches | page | payload (first map) | first map | hover p50 / p95 | key p50 / p95 | "
          "layer p50 / p95 | new layer p50 / p95 (ms) | another picture | a patch as the query |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case, m in rows:
        payload = m["json"] + m["files"]
        print(f"| {case} | {m['n']:,} | {mib(m['total'] - payload)} | {mib(payload)} | {m['first']:.2f} s | "
              f"{both(m['hover'])} ms | {both(m['keys'])} ms | {both(m['revisit'])} ms | {both(m['new'])} | {m['another']:.2f} s | "
              f"{'every head' if m['per_head'] else 'head mean only' if m['pointing'] else 'not available'} |")


if __name__ == "__main__":
    main()
