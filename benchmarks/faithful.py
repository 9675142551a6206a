"""What testing a map costs: each "Test the map" view at its default settings, in fused forwards of the same model at
the same side, measured in the same run.

    python -m benchmarks.faithful

DINO ViT-S/8 (transformers) and ViT-B/16 (timm) shapes at 224 px (random weights, the real architectures, put in a
private Hugging Face cache and loaded by the registry's real loaders) and the offline model at its 64 px. For each:
the model's own fused forward (median of 5), then each view on a new picture (nothing kept from the last), median
of 3, and its cost as a multiple of the forward; the deletion view's tokens through the model (its cost in tokens,
as the view reports it) and its occlusion grid.
"""

from __future__ import annotations

from benchmarks import hubcache

HOME = hubcache.offline_home()


def main() -> None:
    import numpy as np
    import torch

    from vitviz import views
    from vitviz.models import cache as models
    from vitviz.models.runner import Call
    from vitviz.specs import registry

    hubcache.two_models(HOME)
    rng = np.random.default_rng(0)
    cases = {"deletion": {}, "deletion (both curves)": {"curves": "both"}, "deletion (21 points)": {"points": 21},
             "randomise": {"step": 6}, "predict": {"patches": "3,3;3,4;4,3;4,4"}}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| model | side | fused forward | view | seconds | in forwards | tokens through the model (deletion) |")
    print("|---|---|---|---|---|---|---|")
    for key in ("DINO ViT-S/8", "ViT-B/16 (ImageNet-1k)", registry.OFFLINE_KEY):
        runner = models.get_model(key)
        assert runner.spec.key == key, runner.notice
        side = runner.resolution
        x = torch.randn(1, 3, side, side)
        bare = hubcache.median_seconds(lambda: runner.run(Call(lambda m, x, forward: forward(x)), x))
        for name, extra in cases.items():
            view = name.split(" (")[0]
            values = views.VIEWS[view].check({"model": key, **extra})
            pictures = iter([rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(4)])
            shown = views.show(view, next(pictures), values)  # warm
            seconds = hubcache.median_seconds(lambda: views.show(view, next(pictures), values), n=3, warm=False)
            cost = shown.numbers.get("cost", {})
            tokens = (f"{cost['tokens']:,} ({cost['forwards']:.0f} forwards' worth; occlusion "
                      f"{shown.numbers['occlusion']['regions']} regions)") if cost else ""
            print(f"| {key} | {side} | {bare * 1000:.0f} ms | {name} | {seconds:.2f} s | {seconds / bare:.1f} | "
                  f"{tokens} |")


if __name__ == "__main__":
    main()
