"""The Forward-pass view against a bare forward: one forward records every stage, the residual stream and the lens.

    python -m benchmarks.forward

DINO ViT-S/8 (transformers) and ViT-B/16 (timm) shapes at 224 px, random weights, put in a private Hugging Face
cache and loaded by the registry's real loaders. For each: the model's own fused forward (median of 5), the
recording forward (the probe), the whole view (figures and diagram; a new picture each time, so nothing is kept),
and what the page receives (the diagram's HTML and the figures' PNG bytes).
"""

from __future__ import annotations

from benchmarks import hubcache

HOME = hubcache.offline_home()


def main() -> None:
    import numpy as np
    import torch

    from vitviz import views
    from vitviz.analyses.forward import ForwardProbe
    from vitviz.models import cache as models
    from vitviz.models.runner import Call
    from vitviz.render.browser import png_bytes
    from vitviz.specs import views as spec

    hubcache.two_models(HOME)
    rng = np.random.default_rng(0)
    print("| model (224 px) | tokens | fused forward | recording forward | ratio | whole view | diagram | figures |")
    print("|---|---|---|---|---|---|---|---|")
    for key in ("DINO ViT-S/8", "ViT-B/16 (ImageNet-1k)"):
        runner = models.get_model(key)
        assert runner.spec.key == key, runner.notice
        x = torch.randn(1, 3, 224, 224)
        bare = hubcache.median_seconds(lambda: runner.run(Call(lambda m, x, forward: forward(x)), x))
        probe = ForwardProbe(runner.spec.prefix, runner.spec.patch, tuple(runner.labels or ()) or None)
        recorded = hubcache.median_seconds(lambda: runner.run(probe, x))
        values = spec.FORWARD.check({"model": key, "resolution": 224})
        pictures = iter([rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for _ in range(7)])
        shown = views.show("forward_pass", next(pictures), values)
        whole = hubcache.median_seconds(lambda: views.show("forward_pass", next(pictures), values))
        diagram = len(shown.data["diagram"].encode())
        figures = sum(len(png_bytes(np.asarray(im.convert("RGB")))) for im in shown.figures.values())
        tokens = (224 // runner.spec.patch) ** 2 + runner.spec.prefix
        print(f"| {key} | {tokens} | {bare * 1000:.0f} ms | {recorded * 1000:.0f} ms | {recorded / bare:.2f}× | "
              f"{whole * 1000:.0f} ms | {diagram / 1024:.0f} KiB | {figures / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
