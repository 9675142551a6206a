"""How fast the device path can be here: the model's graph in ONNX Runtime Web against the forward's matrix
products alone, both in headless Chromium, next to the server's fused forward, all in one run.

    python -m benchmarks.device_floor                  # 224 and 480 px, 1 and 2 threads
    python -m benchmarks.device_floor --sides 480 --threads 2

The device's goal at 480 px is a forward within 3× the server's (issue 45.3). The products graph holds only the
forward's matrix products at the same shapes (per layer: the q, k, v and output projections, the MLP's two, and
q·kᵀ and the scores times v, a block of query rows at a time as the device graph does), with no softmax, norm or
GELU: no graph that computes the forward can be faster than it in the same runtime. When the products alone take
more than 3× the server's whole forward, the goal is below what ONNX Runtime Web's WebAssembly kernels give on
this machine, by the printed factor. The torch column times the same products module in this process (two
threads), so the table also says how much faster the server's kernels are at the very same sums.

The page is a bare one (this script's own server, cross-origin isolated so ONNX Runtime Web may use threads,
the runtime served from ``vitviz/assets/ort``); DINO ViT-S/8's architecture with random weights, through the real
loader, as in ``benchmarks.classroom``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import hubcache

HOME = hubcache.offline_home()

PAGE = """<!doctype html><meta charset="utf-8"><title>device floor</title><script src="ort.wasm.min.js"></script>
<script>
window.runGraph = async (graph, side, threads, runs, width) => {
  ort.env.wasm.wasmPaths = "./"; ort.env.wasm.numThreads = threads;
  const session = await ort.InferenceSession.create(graph, {executionProviders: ["wasm"],
                                                            graphOptimizationLevel: "all"});
  const feeds = {};
  for (const name of session.inputNames) {
    const shape = name === "pixels" ? [1, 3, side, side] : [1, (side / 8) ** 2 + 1, width];
    const data = new Float32Array(shape.reduce((a, b) => a * b));
    for (let i = 0; i < data.length; i++) data[i] = Math.sin(i) * 0.5;
    feeds[name] = new ort.Tensor("float32", data, shape);
  }
  const times = [];
  for (let r = 0; r < runs; r++) {
    const t = performance.now();
    await session.run(feeds);
    times.push(performance.now() - t);
  }
  await session.release();
  return {times, threads: ort.env.wasm.numThreads, isolated: crossOriginIsolated};
};
</script>"""


class Isolated(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *_args) -> None:
        pass


def products_module(depth: int, width: int, heads: int, hidden: int, chunks: int):
    """A torch module computing only a ViT's matrix products, on (1, T, width) tokens (see the module's text)."""
    import torch

    class Products(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(0)
            def w(*shape):
                return torch.nn.Parameter(torch.randn(*shape, generator=g) * shape[0] ** -0.5)
            self.qkvo = torch.nn.ParameterList([w(width, width) for _ in range(4 * depth)])
            self.mlp = torch.nn.ParameterList([w(width, hidden) if i % 2 == 0 else w(hidden, width)
                                               for i in range(2 * depth)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t, d = x.shape[1], width // heads
            for layer in range(depth):
                q, k, v = (x @ self.qkvo[4 * layer + i] for i in range(3))
                q, k, v = (y.reshape(1, t, heads, d).transpose(1, 2) for y in (q, k, v))
                kt = k.transpose(-2, -1)
                rows = [(q.narrow(2, (t * i) // chunks, (t * (i + 1)) // chunks - (t * i) // chunks) @ kt) @ v
                        for i in range(chunks)]
                a = torch.cat(rows, 2).transpose(1, 2).reshape(1, t, width)
                x = (a @ self.qkvo[4 * layer + 3]) @ self.mlp[2 * layer] @ self.mlp[2 * layer + 1]
            return x

    return Products().eval()


def chromium_runs(url: str, graph: str, side: int, threads: int, width: int, runs: int = 3) -> float:
    """The median milliseconds of the steady runs (the first left out) of ``graph`` in headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(url + "index.html")
            out = page.evaluate(f"runGraph('{graph}', {side}, {threads}, {runs}, {width})")
        finally:
            browser.close()
    assert out["isolated"] and out["threads"] == threads, out
    return statistics.median(out["times"][1:])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sides", type=int, nargs="+", default=[224, 480])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)

    import torch

    from benchmarks.classroom import Yardstick
    from vitviz import assets
    from vitviz.models import device

    torch.set_num_threads(2)
    checkpoint = hubcache.install(HOME, "facebook/dino-vits8", hubcache.dino_vits8(HOME / "dino"))
    ruler = Yardstick(checkpoint)
    runner = ruler.runner
    width, depth = 384, 12
    folder = Path(tempfile.mkdtemp(prefix="vitviz-floor-"))
    try:
        for name in assets.ORT_FILES[:3]:
            shutil.copy(assets.ORT / name, folder / name)
        (folder / "index.html").write_text(PAGE)
        (folder / "model.onnx").write_bytes(device.export(runner))
        products = products_module(depth, width, heads=6, hidden=1536, chunks=device.CHUNKS)
        with torch.no_grad():
            torch.onnx.export(products, (torch.zeros(1, 785, width),), str(folder / "products.onnx"), dynamo=False,
                              opset_version=device.OPSET, input_names=["tokens"],
                              dynamic_axes={"tokens": {1: "positions"}})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                 functools.partial(Isolated, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"

        print("| short side | what | torch here, 2 threads | ORT Web, "
              + " | ORT Web, ".join(f"{t} thread{'s' * (t > 1)}" for t in args.threads)
              + " | ORT Web ÷ the server's fused forward |")
        print("|---|---|---|" + "---|" * len(args.threads) + "---|")
        for side in args.sides:
            tokens = torch.randn(1, (side // 8) ** 2 + 1, width)
            with torch.inference_mode():
                torch_products = hubcache.median_seconds(lambda: products(tokens), n=3) * 1000
            web = {(g, t): chromium_runs(url, g, side, t, width) for g in ("model.onnx", "products.onnx")
                   for t in args.threads}
            fused = ruler.measure(side, n=3)["wall"] * 1000  # after: the browser's runs and this one apart
            best = min(args.threads, key=lambda t: web[("products.onnx", t)])
            for label, graph, here in (("the model's graph (the device's)", "model.onnx", None),
                                       ("its matrix products only", "products.onnx", torch_products)):
                cells = " | ".join(f"{web[(graph, t)]:,.0f} ms" for t in args.threads)
                ratios = ", ".join(f"{web[(graph, t)] / fused:.2f}× ({t})" for t in args.threads)
                print(f"| {side} | {label} | {f'{here:,.0f} ms' if here else f'fused forward {fused:,.0f} ms'} | "
                      f"{cells} | {ratios} |")
            floor = web[("products.onnx", best)] / fused
            print(f"| {side} | the products alone: ORT Web ÷ torch, same sums | | "
                  + " | ".join(f"{web[('products.onnx', t)] / torch_products:.1f}×" for t in args.threads)
                  + f" | floor {floor:.2f}× the fused forward"
                  + " (over 3×: the goal is below this floor)" * (floor > 3) + " |")
        server.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M"), "sides": args.sides, "threads": args.threads}))


if __name__ == "__main__":
    main()
