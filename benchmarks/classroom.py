"""A class at once: N students each calling ``/attention`` with a picture of their own, against the app as its own
process, with the default model's architecture (a DINO ViT-S/8-shaped checkpoint with random weights, laid out as
``facebook/dino-vits8`` in a private Hugging Face cache, so the registry loads it through the real loader).

    python -m benchmarks.classroom                   # 1 and 30 students at 224 and 480 px, 100 at 224
    python -m benchmarks.classroom --students 30 --sides 224
    python -m benchmarks.classroom --device          # the device path too: 30 and 100 students at 224 and 480
    python -m benchmarks.classroom --device-only

The device path ("compute on this device", issue 35): each student's browser asks the server for the model's
manifest (``/device_model``, through the queue like the page's own event) and, the first time only, downloads
ONNX Runtime Web and the model's graph; the forward then runs in the browser. Measured here: the server's side
with N students at once (the page, the manifest, and on a first visit the files: time and CPU-seconds per
student), and the forward in headless Chromium on this machine (its own column: a student's laptop is not this
machine). A student's first map = the server's side + the device's preparation and forward.

For each case: every student's time from sending the picture to the answer (the first map the page would show:
the same analysis), p50 / p95 / last, and the server's CPU-seconds per student (/proc: user + system of the app's
process over the case). The yardstick is the same model's fused forward, timed in this process in the same run
(median of 5 after a warm-up, at each side). Each case starts with a warm-up request on a picture of its own
(model loaded, first-call costs paid): start-up and warm-up are excluded, as the goals ask.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pictures(n: int, folder: Path, square: bool, seed: int) -> list[Path]:
    """``n`` different photo-like pictures (the shipped photos, each moved, flipped and tinted its own way); square
    ones (as the yardstick's forward is square: a 4:3 picture at a 224 short side has a third more tokens)."""
    import numpy as np
    from PIL import Image

    from vitviz import assets

    rng = np.random.default_rng(seed)
    photos = [np.asarray(Image.open(assets.example(n)).convert("RGB")) for n in ("cat", "coffee", "astronaut")]
    out = []
    for i in range(n):
        src = photos[i % len(photos)]
        h, w = src.shape[:2]
        side = min(h, w)
        if square:
            top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
            crop = src[top:top + side, left:left + side]
        else:
            ch, cw = int(h * rng.uniform(0.8, 1.0)), int(w * rng.uniform(0.8, 1.0))
            top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
            crop = src[top:top + ch, left:left + cw]
        tint = np.clip(crop * rng.uniform(0.85, 1.15, 3), 0, 255).astype(np.uint8)
        path = folder / f"student{i:03d}.png"
        Image.fromarray(tint[:, ::-1] if i % 2 else tint).save(path)
        out.append(path)
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(hf_home: Path) -> tuple[subprocess.Popen, str]:
    from benchmarks.load import free_port

    port = free_port()
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False",
               VITVIZ_DEVICE_DIR=str(Path(hf_home).parent / "device-graphs"))  # the graphs made here, removed after
    proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    import httpx

    for _ in range(300):
        try:
            if httpx.get(url + "config", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the app did not start")


def fused_forward(checkpoint: Path, side: int) -> float:
    """Median seconds of the model's own fused forward at ``side`` (square), through vitviz's loader and Runner."""
    import torch

    from vitviz.models import loaders
    from vitviz.models.runner import Call
    from vitviz.specs import registry

    runner = loaders.load_hf(checkpoint, spec=registry.REGISTRY["DINO ViT-S/8"])
    x = torch.randn(1, 3, side, side)
    call = Call(lambda model, x, forward: forward(x))
    runner.run(call, x)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        runner.run(call, x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def case(url: str, pid: int, students: int, side: int, folder: Path, seed: int) -> dict:
    from gradio_client import Client, handle_file

    pics = pictures(students + 1, folder, square=True, seed=seed)
    clients = [Client(url, verbose=False) for _ in range(students + 1)]
    clients[0].predict(handle_file(str(pics[0])), "DINO ViT-S/8", side, api_name="/attention")  # warm-up
    start = threading.Barrier(students)
    times: list[float] = [0.0] * students

    def student(i: int) -> None:
        start.wait()
        t0 = time.perf_counter()
        answer = clients[i + 1].predict(handle_file(str(pics[i + 1])), "DINO ViT-S/8", side, api_name="/attention")
        times[i] = time.perf_counter() - t0
        assert answer["model"] == "DINO ViT-S/8" and not answer["notice"], answer["notice"]

    cpu0 = cpu_seconds(pid)
    with ThreadPoolExecutor(students) as pool:
        list(pool.map(student, range(students)))
    cpu = cpu_seconds(pid) - cpu0
    times.sort()
    return {"students": students, "side": side, "p50": statistics.median(times),
            "p95": times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], "last": times[-1],
            "cpu": cpu / students}


DEVICE_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")


def device_case(url: str, pid: int, students: int, side: int, first_visit: bool) -> dict:
    """``students`` browsers at once on the device path: the page, the manifest and (``first_visit``) the runtime
    and the graph. Per student: seconds until it could run its forward, and the server's CPU-seconds."""
    import httpx
    from gradio_client import Client

    warm = Client(url, verbose=False).predict("DINO ViT-S/8", side, api_name="/device_model")  # the graph made
    assert warm.get("file") and not warm.get("notice"), warm
    clients = [Client(url, verbose=False) for _ in range(students)]
    start = threading.Barrier(students)
    times, fetched = [0.0] * students, [0] * students

    def size(http, address: str) -> int:  # read as a browser does, without keeping it
        with http.stream("GET", address) as r:
            r.raise_for_status()
            return sum(len(chunk) for chunk in r.iter_bytes(1 << 20))

    def student(i: int) -> None:
        with httpx.Client(timeout=600) as http:
            start.wait()
            t0 = time.perf_counter()
            got = size(http, url) + size(http, url + "config")
            m = clients[i].predict("DINO ViT-S/8", side, api_name="/device_model")
            if first_visit:
                got += sum(size(http, url + f"vitviz/ort/{name}") for name in DEVICE_FILES)
                got += size(http, url + f"vitviz/device/{m['file']}")
            times[i], fetched[i] = time.perf_counter() - t0, got

    cpu0 = cpu_seconds(pid)
    with ThreadPoolExecutor(students) as pool:
        list(pool.map(student, range(students)))
    cpu = cpu_seconds(pid) - cpu0
    times.sort()
    return {"students": students, "side": side, "first": first_visit, "p50": statistics.median(times),
            "p95": times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], "cpu": cpu / students,
            "mb": statistics.mean(fetched) / 1e6, "graph_mb": warm["bytes"] / 1e6}


def device_forward(url: str, side: int, picture: Path) -> dict:
    """The device path in headless Chromium on this machine: milliseconds of the first and the second forward
    (the second steady), and of preparing the picture, for one picture at ``side``."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}?tab=attention&device=1&side={side}")
        page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", polling=500, timeout=600_000)
        out = {}
        for run in (1, 2):
            page.locator("#device-picture").set_input_files(str(picture))
            try:
                page.wait_for_function(f"() => window.vitvizDevice?.done >= {run}", polling=500, timeout=600_000)
            except Exception:  # say where it stopped
                raise SystemExit(f"the device path did not answer at {side} px: " + page.evaluate(
                    "() => JSON.stringify({status: document.querySelector('#device-panel .vx-dev-status')"
                    "?.textContent, state: Object.keys(window.vitvizDevice || {}), "
                    "classify: !!window.vitvizClassifyDevice})")) from None
            failed = page.evaluate("() => window.vitvizDevice.failed")
            assert not failed and page.locator("#device-switch input").is_checked(), (
                failed or page.locator("#device-panel .vx-dev-status").inner_text())
            out[run] = page.evaluate("() => ({ms: window.vitvizDevice.last.ms, prep: window.vitvizDevice.last.prep,"
                                     " load: window.vitvizDevice.last.load})")
        browser.close()
    return {"first_ms": out[1]["ms"], "ms": out[2]["ms"], "prep_ms": out[2]["prep"], "load_ms": out[1]["load"]}


def device_table(url: str, pid: int, sides: list[int], folder: Path) -> None:
    picture = pictures(1, folder, square=True, seed=99)[0]
    forward = {s: device_forward(url, s, picture) for s in sides}
    rows = [device_case(url, pid, n, s, first) for s in sides for n in (30, 100) for first in (False, True)]
    print()
    print("Device path. The forward in headless Chromium here (ONNX Runtime Web 1.30, WebAssembly SIMD, one thread; "
          "second run; first run in brackets; preparing the picture): "
          + "; ".join(f"{s} px {forward[s]['ms']:,.0f} ms ({forward[s]['first_ms']:,.0f} ms), prep "
                      f"{forward[s]['prep_ms']:,.0f} ms" for s in sides))
    print()
    print("| students | short side | visit | server's side p50 | p95 | first map p95 (+ device here) | server CPU "
          "per student | downloaded per student |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = forward[r["side"]]
        total = r["p95"] + (f["prep_ms"] + f["ms"]) / 1000
        print(f"| {r['students']} | {r['side']} | {'first (files)' if r['first'] else 'again (cached)'} | "
              f"{r['p50']:.2f} s | {r['p95']:.2f} s | {'' if r['first'] else f'{total:.2f} s'} | "
              f"{r['cpu'] * 1000:.0f} ms | {r['mb']:.1f} MB |")


def main(argv: list[str] | None = None) -> None:
    from benchmarks import hubcache

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, nargs="+", default=None)
    ap.add_argument("--sides", type=int, nargs="+", default=[224, 480])
    ap.add_argument("--device", action="store_true", help="the device path too")
    ap.add_argument("--device-only", action="store_true", help="the device path only")
    args = ap.parse_args(argv)
    plan = [] if args.device_only else [
        (n, s) for s in args.sides for n in (args.students or ([1, 30, 100] if s == 224 else [1, 30]))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        checkpoint = hubcache.dino_vits8(tmp / "checkpoint")
        hubcache.install(tmp / "hf", "facebook/dino-vits8", checkpoint)
        forward = {s: fused_forward(checkpoint, s) for s in args.sides}
        proc, url = serve(tmp / "hf")
        try:
            rows = []
            for i, (n, s) in enumerate(plan):
                (tmp / f"case{i}").mkdir()
                rows.append(case(url, proc.pid, n, s, tmp / f"case{i}", seed=i))
                print(f"… {n} students at {s} px: p95 {rows[-1]['p95']:.2f} s", file=sys.stderr)
            if args.device or args.device_only:
                (tmp / "device").mkdir()
                device_table(url, proc.pid, args.sides, tmp / "device")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    if not rows:
        return
    print("Fused forward of DINO ViT-S/8's shape here (median of 5): "
          + ", ".join(f"{s} px {forward[s] * 1000:,.0f} ms" for s in args.sides))
    print()
    print("| students | short side | first answer p50 | p95 | last | server CPU per student | one request ÷ fused "
          "forward |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['p50'] / forward[r['side']]:.2f}×" if r["students"] == 1 else ""
        spread = ("", "") if r["students"] == 1 else (f"{r['p95']:.1f} s", f"{r['last']:.1f} s")
        print(f"| {r['students']} | {r['side']} | {r['p50']:.2f} s | {spread[0]} | {spread[1]} | {r['cpu']:.2f} s | "
              f"{ratio} |")


if __name__ == "__main__":
    main()
