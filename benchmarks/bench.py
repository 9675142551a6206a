"""Speed and memory of vitviz on this machine; prints tables.

    python -m benchmarks.bench            # everything (a few minutes on 2 cores)
    python -m benchmarks.bench --quick    # skip the 480-pixel attention runs

Attention figures use a DINO ViT-S/8-shaped transformers model (the real
config, random weights: speed and memory do not depend on the weights) loaded
through vitviz's own loader. Each memory figure is measured in a fresh
subprocess as the peak resident memory during the call minus the resident
memory just before it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class PeakRSS:
    """Track peak resident set size (bytes) of this process while the block runs."""

    def __enter__(self):
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())
        self.delta = self.peak - self.start


def dino_checkpoint(path: Path) -> Path:
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    if not (path / "config.json").exists():
        cfg = ViTConfig(image_size=224, patch_size=8, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                        intermediate_size=1536, qkv_bias=True, layer_norm_eps=1e-6)
        ViTModel(cfg, add_pooling_layer=False).save_pretrained(path)
        ViTImageProcessor(size={"height": 224, "width": 224}, image_mean=[0.485, 0.456, 0.406],
                          image_std=[0.229, 0.224, 0.225]).save_pretrained(path)
    return path


def one(kind: str, size: int, ckpt: str) -> dict:
    """One measurement in this (fresh) process."""
    import numpy as np

    from vitviz import assets
    from vitviz.analyses import attention as analysis
    from vitviz.core import images
    from vitviz.models import loaders
    from vitviz.models.runner import Call
    from vitviz.core import owned
    from vitviz.views import attention as view

    loaded = loaders.load_hf(ckpt)
    plain = Call(lambda m, x, _f: m(pixel_values=x, interpolate_pos_encoding=True))  # the model's own call, locked
    rgb = images.load_rgb(assets.EXAMPLES / "cat.png")
    side = min(rgb.shape[:2])
    rgb = rgb[:side, (rgb.shape[1] - side) // 2:][:, :side]  # square, so 480 px gives the 60×60 grid of the issue
    fitted = images.fit_to_patches(rgb, size, 8, "keep")
    x = loaded.normalise(fitted.image)
    loaded.run(plain, x[..., :64, :64])  # warm-up at a small size (memory is measured on the first full-size call)
    out: dict = {"tokens": fitted.grid[0] * fitted.grid[1] + 1}
    repeats = 3 if size <= 256 else 1

    def timed(fn) -> float:  # median wall time; the first call is the one measured for memory
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    if kind == "output_attentions":
        def naive():
            res = loaded.run(Call(lambda m, x, _f: m(pixel_values=x, output_attentions=True,
                                                       interpolate_pos_encoding=True)), x)
            return np.stack([a[0, :, 0, 1:].numpy() for a in res.attentions]), res
        with PeakRSS() as mem:
            kept = naive()
        del kept
        out["seconds"] = timed(naive)
    elif kind == "vitviz":
        def request():
            owned.reset("results")
            a = analysis.analyse(loaded, rgb, size)
            view.render_heads(a, 12, 0.6)  # the first answer's figure; rollout and distance wait for their panels
            return a
        def bare():
            loaded.run(plain, x)

        with PeakRSS() as mem:
            a = request()
        # bare forward and full request alternate in this one process, so machine noise hits both alike
        pairs = [(timed(bare), timed(request)) for _ in range(2)]
        out["bare_seconds"] = float(np.median([p[0] for p in pairs]))
        out["seconds"] = float(np.median([p[1] for p in pairs]))
        a = analysis.analyse(loaded, rgb, size)
        reps = 5
        t0 = time.perf_counter()
        for i in range(reps):  # what moving the layer / threshold / opacity / colormap controls costs
            view.render_heads(analysis.analyse(loaded, rgb, size), 11 - i, 0.5 + 0.05 * i, "viridis", 0.5)
        out["rerender_seconds"] = (time.perf_counter() - t0) / reps
        out["kept_mb"] = a.maps.nbytes / 2**20
    out["peak_mb"] = mem.delta / 2**20
    return out


def subprocess_one(kind: str, size: int, ckpt: Path) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench", "--one", kind, str(size), str(ckpt)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(res.stdout.strip().splitlines()[-1])


def startup() -> float:
    code = ("import time; t=time.perf_counter(); from vitviz import app; app.build_demo(); "
            "print(time.perf_counter()-t)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(res.stdout.strip().splitlines()[-1])


def timed_view(view: str, picture, **settings):
    """A callable showing one declared view as every door does (vitviz.views.show with checked settings)."""
    from vitviz.views import VIEWS
    from vitviz.views import show

    values = VIEWS[view].check(settings)
    return lambda: show(view, picture, values)


def tab_times() -> list[tuple[str, float]]:
    """Each tab's main view, warm (models loaded, nothing kept from before)."""
    from vitviz import assets
    from vitviz.core import images
    from vitviz.core import owned
    from vitviz.specs import registry

    cat = images.load_rgb(assets.EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE)
    scene = images.load_rgb(assets.EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    tiny = registry.OFFLINE_KEY
    calls = [
        ("Patches /patches (cat, P=16, 224 px)", timed_view("patches", cat, patch=16, resolution=224)),
        ("Position embeddings (2D, 14×14, D=64)", timed_view("position_embeddings", None)),
        ("Attention /attention (offline tiny model, scene)", timed_view("attention", scene, model=tiny, layer=4)),
        ("Classify /classify (offline tiny model, scene)", timed_view("classify", scene, model=tiny)),
    ]
    rows = []
    for name, fn in calls:
        fn()  # first call loads models and warms caches
        owned.reset("results")
        t0 = time.perf_counter()
        fn()
        rows.append((name, time.perf_counter() - t0))
    return rows


def view_times(ckpt: Path) -> list[tuple[str, str, float, float]]:
    """The views beyond the four ideas: (view, case, first call, next call) in seconds.

    The first call runs the model (a forward, or a forward and a backward for relevance); the next
    asks for another head, class or query, which the kept results answer without a forward where they can.
    Models: the offline tiny model; a DINO ViT-S/8-shaped and a ViT-B/16-shaped model (random weights,
    the real architectures) put in the model cache, as if downloaded.
    """
    import timm

    from vitviz import assets
    from vitviz.core import images
    from vitviz.models import cache as models
    from vitviz.models import loaders
    from vitviz.core import owned
    from vitviz.specs import registry
    from vitviz.specs import views as spec

    with models._cache_lock:
        models._cache["DINO ViT-S/8"] = loaders.load_hf(ckpt, spec=registry.REGISTRY["DINO ViT-S/8"])
        vitb = registry.REGISTRY["ViT-B/16 (ImageNet-1k)"]
        weights = Path(ckpt).parent / "vit_b16.safetensors"
        if not weights.exists():
            from safetensors.torch import save_file

            save_file(timm.create_model("vit_base_patch16_224", pretrained=False).state_dict(), str(weights))
        models._cache[vitb.key] = loaders.load_timm(vitb.source, file=weights, spec=vitb)
    cat = images.load_rgb(assets.EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE)
    scene = images.load_rgb(assets.EXAMPLES / "scene_star.png", images.INTAKE_SHORT_SIDE)
    tiny = registry.OFFLINE_KEY
    steps = [c for c in spec.comparison_choices() if " @ step " in c]
    cases = [
        ("/windows", "cat, P = 16, 224 px, M = 7", lambda i: timed_view("windows", cat, col=5 + i)),
        ("/relative_bias", "formula, M = 7", lambda i: timed_view("relative_bias", None, head=i)),
        ("/inside_head", "offline tiny, 64 px", lambda i: timed_view("inside_head", scene, model=tiny, layer=4,
                                                                      head=i)),
        ("/inside_head", "DINO ViT-S/8 shape, 224 px", lambda i: timed_view("inside_head", cat, head=i, row=10,
                                                                             col=12)),
        ("/feature_pca", "offline tiny, 64 px", lambda i: timed_view("feature_pca", scene, model=tiny, layer=4 - i)),
        ("/feature_pca", "DINO ViT-S/8 shape, 224 px", lambda i: timed_view("feature_pca", cat, layer=12 - i)),
        ("/compare_models", "two tiny checkpoints", lambda i: timed_view(
            "compare_models", scene, model_a=steps[0], model_b=steps[-1], fraction=1.0 - 0.25 * i)),
        ("/relevance", "offline tiny", lambda i: timed_view("relevance", scene, model=tiny, rank=1 + i)),
        ("/relevance", "ViT-B/16 shape, 224 px", lambda i: timed_view("relevance", cat, model=vitb.key, rank=1 + i)),
    ]
    rows = []
    for view, case, make in cases:
        make(0)()  # loads models, warms code paths
        owned.reset("results")
        t0 = time.perf_counter()
        make(0)()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        make(1)()
        rows.append((view, case, first, time.perf_counter() - t0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--one", nargs=3, metavar=("KIND", "SIZE", "CKPT"))
    args = ap.parse_args()
    if args.one:
        kind, size, ckpt = args.one
        print(json.dumps(one(kind, int(size), ckpt)))
        return

    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs\n")
    print(f"| app start-up (import + build_demo) | {startup():.2f} s |\n|---|---|")
    for name, secs in tab_times():
        print(f"| {name} | {secs * 1000:.0f} ms |")
    print()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = dino_checkpoint(Path(tmp) / "dino_vits8")
        print("| view | case | first call | next (another head, class, layer or query) |\n|---|---|---|---|")
        for view, case, first, again in view_times(ckpt):
            print(f"| {view} | {case} | {first * 1000:.0f} ms | {again * 1000:.0f} ms |")
        print()
        sizes = [224] if args.quick else [224, 480]
        print("| DINO ViT-S/8 shape | tokens | bare forward | full request | ratio | re-render | re-render / forward "
              "| peak MiB (vitviz) | peak MiB (output_attentions) | memory ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for size in sizes:
            naive = subprocess_one("output_attentions", size, ckpt)
            ours = subprocess_one("vitviz", size, ckpt)
            bare = ours["bare_seconds"]
            print(f"| {size} px | {ours['tokens']:,} | {bare:.2f} s | {ours['seconds']:.2f} s | "
                  f"{ours['seconds'] / bare:.2f}× | {ours['rerender_seconds'] * 1000:.0f} ms | "
                  f"{ours['rerender_seconds'] / bare:.1%} | {ours['peak_mb']:.0f} | {naive['peak_mb']:.0f} | "
                  f"{ours['peak_mb'] / naive['peak_mb']:.0%} |")
    print("\nTargets: full request ≤ 1.2× bare forward; re-render ≤ 10% of a forward; "
          "peak memory at 480 ≤ 40% of output_attentions=True.")


if __name__ == "__main__":
    main()
