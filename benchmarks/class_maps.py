"""What the maps every test of the map ranks patches by cost (vitviz.analyses.maps.class_maps), against one fused
forward of the same model at the same side, in the same run.

    python -m benchmarks.class_maps            # times
    python -m benchmarks.class_maps --memory   # peak memory, each part in a process of its own

The offline model at its 64 px, and random-weight timm classifiers of ViT-B/16's and ViT-S/8's shapes at 224 px
(197 and 785 tokens). Times: the model's fused forward in inference mode (median of 11), then class_maps with grad
on (median of 5) and, inside it, the mean time spent in relevance's backward, LeGrad's backwards and AttnLRP's
forward and backward. Memory: the rise of the process's peak resident size over a warmed fused forward (weights loaded),
for a fused forward, class_maps, and class_maps' parts; beside it what :func:`vitviz.analyses.maps.maps_bytes`
estimates.

Measured 2026-12-02 on two cores (other work on the machine; ms, and × the fused forward of the same run), beside
what :func:`vitviz.analyses.maps.maps_work` counts (token-wise passes, attention's T² products, relevance's T³
rolling, in fused forwards) and the bound :func:`~vitviz.analyses.maps.maps_forwards` charges (⌈2 × the count⌉):

| model | fused forward ms | class_maps ms | relevance's backward | LeGrad's backwards | AttnLRP | counted, bound |
|---|---|---|---|---|---|---|
| offline | 1.8 | 16 (9.0×) | 2 (1.3×) | 3 (1.5×) | 7 (4.0×) | 5.4, bound 11 |
| ViT-B/16 | 177.8 | 919 (5.2×) | 184 (1.0×) | 144 (0.8×) | 406 (2.3×) | 5.1, bound 11 |
| ViT-S/8 | 190.6 | 1768 (9.3×) | 807 (4.2×) | 308 (1.6×) | 774 (4.1×) | 6.3, bound 13 |

An earlier run of the same code measured 9.4×, 5.3× and 8.8× (AttnLRP 6.0× on ViT-S/8): the parts move between
runs, the totals stay within the bound. The count leaves out the eager attention's element-wise steps over
(H, T, T) and each operation's fixed overhead (the offline model's 16 ms are mostly that): the safety factor 2 is
what covers them, stated in :data:`vitviz.analyses.maps.SAFETY`, not fitted.

| model | tokens | fused forward | class_maps | without AttnLRP | AttnLRP alone | maps_bytes estimate |
|---|---|---|---|---|---|---|
| offline | 65 | 0 MiB | 11 MiB | 9 MiB | 9 MiB | 21 MiB |
| ViT-B/16 | 197 | 0 MiB | 234 MiB | 197 MiB | 232 MiB | 342 MiB |
| ViT-S/8 | 785 | 0 MiB | 565 MiB | 587 MiB | 257 MiB | 1058 MiB |

(Earlier runs measured 605 and 811 MiB for ViT-S/8 without AttnLRP: the allocator's peaks vary from run to run.
The estimate multiplies the counted graphs by :data:`~vitviz.analyses.maps.MEMORY_SAFETY` 1.25 and adds
:data:`~vitviz.analyses.maps.ALLOCATOR_SLACK` 16 MiB, the allocator's own blocks, which are most of the offline
model's 11 MiB.)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

MODELS = ("offline", "ViT-B/16", "ViT-S/8")


def build(name: str):
    """(model, its forward, prefix, the picture x (1, 3, S, S), its spec)."""
    import timm
    import torch

    from vitviz.models import loaders
    from vitviz.specs.registry import ModelSpec

    if name == "offline":
        runner = loaders.load_embedded()
        side = runner.spec.resolution
        model, spec = runner._module, runner.spec
    else:
        torch.manual_seed(0)
        source, patch, dim, heads, params = {"ViT-B/16": ("vit_base_patch16_224", 16, 768, 12, 86.6),
                                             "ViT-S/8": ("vit_small_patch8_224", 8, 384, 6, 21.7)}[name]
        model = timm.create_model(source, pretrained=False, num_classes=1000).eval()
        side = 224
        spec = ModelSpec(name, "timm", source, patch, 1, side, params, "classify", dim=dim, heads=heads)
    x = torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(1))
    return model.eval(), loaders.forward_of(model), 1, x, spec


def times(name: str) -> list[str]:
    import torch

    from vitviz.analyses import maps

    model, forward, prefix, x, spec = build(name)
    tokens = (x.shape[-1] // spec.patch) ** 2 + prefix
    fused = []
    with torch.inference_mode():
        forward(x)
        for _ in range(11):
            t0 = time.perf_counter()
            forward(x)
            fused.append(time.perf_counter() - t0)
    spent: dict[str, float] = {}

    def timed(fn, key):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
        return run

    parts = {"relevance": maps.relevance, "legrad": maps.legrad, "attnlrp": maps.attnlrp}
    total = []
    try:
        for key, fn in parts.items():
            setattr(maps, key, timed(fn, key))
        with torch.enable_grad():
            maps.class_maps(model, x, forward, prefix)
            spent.clear()
            for _ in range(5):
                t0 = time.perf_counter()
                maps.class_maps(model, x, forward, prefix)
                total.append(time.perf_counter() - t0)
    finally:
        for key, fn in parts.items():
            setattr(maps, key, fn)
    f = statistics.median(fused)
    cells = [statistics.median(total)] + [spent.get(k, 0.0) / 5 for k in parts]
    counted = f"{maps.maps_work(spec.dim, tokens):.1f}, bound {maps.maps_forwards(spec, tokens)}"
    return [name, f"{f * 1000:.1f}"] + [f"{c * 1000:.0f} ({c / f:.1f}×)" for c in cells] + [counted]


def measure(name: str, part: str) -> int:
    """Bytes the peak resident size rose by for ``part`` over a warmed fused forward (this process)."""
    import resource

    import torch

    from vitviz.analyses import maps
    from vitviz.models import hooks

    model, forward, prefix, x, _ = build(name)
    with torch.inference_mode():
        forward(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.enable_grad():
        if part == "fused forward":
            with torch.inference_mode():
                forward(x)
        elif part == "class_maps":
            maps.class_maps(model, x, forward, prefix)
        elif part == "without AttnLRP":
            hooks.lrp_refusal = lambda _model: "left out to measure"
            maps.class_maps(model, x, forward, prefix)
        elif part == "AttnLRP alone":
            maps.attnlrp(model, x, forward, 0, prefix)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


def memory() -> None:
    from vitviz.analyses import maps

    parts = ("fused forward", "class_maps", "without AttnLRP", "AttnLRP alone")
    print("| model | tokens | " + " | ".join(parts) + " | maps_bytes estimate |")
    print("|---" * (len(parts) + 3) + "|")
    for name in MODELS:
        _, _, _, x, spec = build(name)
        tokens = (x.shape[-1] // spec.patch) ** 2 + 1
        cells = []
        for part in parts:
            out = subprocess.run([sys.executable, "-m", "benchmarks.class_maps", "--measure", name, part],
                                 check=True, capture_output=True, text=True).stdout
            cells.append(f"{int(out.split()[-1]) / 2**20:.0f} MiB")
        print(f"| {name} | {tokens} | " + " | ".join(cells) + f" | {maps.maps_bytes(spec, tokens) / 2**20:.0f} MiB |")


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        print(measure(sys.argv[2], sys.argv[3]))
        return
    if sys.argv[1:2] == ["--memory"]:
        memory()
        return
    print("| model | fused forward ms | class_maps ms | relevance's backward | LeGrad's backwards | AttnLRP "
          "| counted (maps_work), bound (maps_forwards) |")
    print("|---|---|---|---|---|---|---|")
    for name in MODELS:
        print("| " + " | ".join(times(name)) + " |")


if __name__ == "__main__":
    main()
