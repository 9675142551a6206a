"""``vitviz crop`` on a camera-trap-like folder: pictures per second and memory, local engine and Ray; prints a table.

    python -m benchmarks.crop                 # 500 pictures: local batch 1 and 8, Ray with 1 and 2 workers
    python -m benchmarks.crop --pictures 100 --engines local

The pictures are generated: vitviz's shape scenes (an object on clutter), enlarged to 640×480 with sensor noise
and saved as JPEG, like a camera trap's frames. Offline, the model is the embedded one (64 px), so decoding and
resizing weigh as much as the forward; with DINO ViT-S/8 online the forward dominates and batching matters more.
Each run starts from an empty output folder and is timed as a whole command (``vitviz crop`` in a subprocess,
Ray's start-up included, since that is what a person waits for). Memory is the peak resident set of the command
and, for Ray, of each actor process (read from /proc while it runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def make_pictures(folder: Path, n: int) -> None:
    from vitviz.embedded import scenes

    rng = np.random.default_rng(0)
    for i in range(n):
        scene = scenes.make_scene(10_000 + i, size=96)
        big = np.asarray(Image.fromarray(scene.image).resize((640, 480), Image.BICUBIC), dtype=np.float32)
        noisy = np.clip(big + rng.normal(0, 6, big.shape), 0, 255).astype(np.uint8)
        (folder / f"site{i % 5}").mkdir(parents=True, exist_ok=True)
        Image.fromarray(noisy).save(folder / f"site{i % 5}" / f"IMG_{i:05d}.jpg", quality=90)


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def actor_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"CropActor" in cmd:
                pids.append(int(entry))
    return pids


def timed(cmd: list[str]) -> tuple[float, int, dict[int, int], str]:
    """(seconds, peak RSS of the command's own process in KiB, peak RSS per Ray actor, its stdout)."""
    peaks: dict[int, int] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    own = [0]

    def watch() -> None:
        while proc.poll() is None:
            own[0] = max(own[0], rss_kib(proc.pid))
            for pid in actor_pids():
                peaks[pid] = max(peaks.get(pid, 0), rss_kib(pid))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    seconds = time.perf_counter() - t0
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {out}")
    return seconds, own[0], peaks, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pictures", type=int, default=500)
    ap.add_argument("--engines", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    args = ap.parse_args()
    cases = []
    if "local" in args.engines:
        cases += [("local, batch 1", ["--batch", "1"]), ("local, batch 8", ["--batch", "8"])]
    if "ray" in args.engines:
        cases += [(f"Ray, {w} worker{'s' if w > 1 else ''}, batch 8", ["--engine", "ray", "--workers", str(w),
                                                                      "--batch", "8"]) for w in (1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "trap"
        make_pictures(src, args.pictures)
        print(f"{args.pictures} camera-trap-like JPEGs (640×480) in {len({p.parent for p in src.rglob('*.jpg')})} "
              f"folders; {os.cpu_count()} CPU cores; model: the embedded one (offline)\n")
        print("| engine | seconds | pictures/s | peak RSS of the command | peak RSS per Ray worker |")
        print("|---|---|---|---|---|")
        reference = None
        for name, flags in cases:
            out = Path(tmp) / "out"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "vitviz.tools.cli", "crop", str(src), "--out", str(out), *flags]
            seconds, own, actors, _ = timed(cmd)
            table = (out / "boxes.csv").read_bytes()
            same = "" if reference is None or table == reference else " (boxes.csv differs!)"
            reference = reference or table
            workers = ", ".join(f"{kib / 1024:.0f} MiB" for kib in sorted(actors.values(), reverse=True)) or "–"
            print(f"| {name}{same} | {seconds:.1f} | {args.pictures / seconds:.1f} | {own / 1024:.0f} MiB | "
                  f"{workers} |")


if __name__ == "__main__":
    main()
