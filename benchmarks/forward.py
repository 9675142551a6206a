"""The Forward-pass view against a bare forward: one forward records every stage, the residual stream and the lens.

    python -m benchmarks.forward

DINO ViT-S/8 (transformers) and ViT-B/16 (timm) shapes at 224 px, random weights, put in a private Hugging Face
cache and loaded by the registry's real loaders. For each: the model's own fused forward (median of 5), the
recording forward (the probe), the whole view (figures and diagram; a new picture each time, so nothing is kept),
and what the page receives (the diagram's HTML and the figures' PNG bytes). Then the device's graph (ONNX Runtime
on this CPU, two threads, as a page's WebAssembly runs it with two): the graph every device tab shares, which also
gives the Forward pass's residual stream and logit lens, against the same graph with the attention's outputs only
(what the Attention tab needs): what the Forward pass on the device costs the other tabs.
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



def device_graphs() -> None:
    """The device graph with and without the Forward pass's outputs (see the module's text), median of 15 runs
    each, taken in turn."""
    import time

    import numpy as np
    import onnxruntime as ort

    from vitviz.models import cache as models
    from vitviz.models import device

    names, graph = device.output_names, device.Graph

    class AttentionOnly(device.Graph):  # the graph as it was before it carried the Forward pass
        def forward(self, x, pos):
            flow = 5 + 2 * self.classifier  # the residual stream's outputs and the lens's, last
            return super().forward(x, pos)[:len(names(len(self.parts.blocks), self.classifier)) - flow]

    print("\n| model (224 px) | device graph | attention's outputs only | ratio |")
    print("|---|---|---|---|")
    for key in ("DINO ViT-S/8", "ViT-B/16 (ImageNet-1k)"):
        runner = models.get_model(key)
        side = runner.side(224)
        grid = (side // runner.spec.patch, side // runner.spec.patch)
        feeds = {"pixels": np.random.default_rng(0).standard_normal((1, 3, side, side), np.float32),
                 "pos": device.position_embedding(runner, grid)}
        sessions = []
        for variant in (graph, AttentionOnly):
            device.Graph = variant
            if variant is AttentionOnly:
                device.output_names = lambda layers, classifier: names(layers, classifier)[:1 + classifier + 2 * layers]
            try:
                data = device.export(runner)
            finally:
                device.Graph, device.output_names = graph, names
            options = ort.SessionOptions()
            options.intra_op_num_threads = 2
            sessions.append(ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]))
        runs: list[list[float]] = [[], []]
        for _ in range(2):  # warm
            for sess in sessions:
                sess.run(None, feeds)
        for _ in range(15):  # the two in turn, so a noisy neighbour slows both alike
            for i, sess in enumerate(sessions):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                runs[i].append(time.perf_counter() - t0)
        times = [float(np.median(r)) for r in runs]
        print(f"| {key} | {times[0] * 1000:.0f} ms | {times[1] * 1000:.0f} ms | {times[0] / times[1]:.2f}× |")


if __name__ == "__main__":
    main()
    device_graphs()
