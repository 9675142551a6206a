"""A class at once: N students each calling ``/attention`` with a picture of their own, against the app as its own
process, with the default model's architecture (a DINO ViT-S/8-shaped checkpoint with random weights, laid out as
``facebook/dino-vits8`` in a private Hugging Face cache, so the registry loads it through the real loader).

    python -m benchmarks.classroom                   # 1 and 30 students at 224 and 480 px, 100 at 224
    python -m benchmarks.classroom --students 30 --sides 224

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
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
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


def main(argv: list[str] | None = None) -> None:
    from benchmarks import hubcache

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, nargs="+", default=None)
    ap.add_argument("--sides", type=int, nargs="+", default=[224, 480])
    args = ap.parse_args(argv)
    plan = [(n, s) for s in args.sides for n in (args.students or ([1, 30, 100] if s == 224 else [1, 30]))]
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
        finally:
            proc.terminate()
            proc.wait(timeout=60)
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
