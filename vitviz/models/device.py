"""A model for the student's device: the same forward as an ONNX graph that ONNX Runtime Web runs in the browser.

The graph takes one (1, 3, S, S) picture, normalised as the checkpoint's data config says, and gives what the
browser's views draw, from the same forward the server runs:

- ``cls``: (L, H, N) the class token's attention to the patches in every layer and head (prefix keys dropped, rows
  not renormalised: exactly :func:`vitviz.core.attention.class_rows`);
- ``q0`` … ``q{L-1}`` and ``k0`` … ``k{L-1}``: (H, T, d) each layer's queries (already multiplied by the layer's
  scale) and keys, what the explorer turns into any patch's rows (the server's :class:`LayerKeys`, in float32);
- ``logits``: (1, C), for a model with a classifier.

A graph is made once per (model, weights, side) and kept on disk under its content hash (``VITVIZ_DEVICE_DIR``,
by default ``~/.cache/vitviz/device``); the embedded model's graph at its one size ships in ``vitviz/assets/tiny``.
Weights are stored as float16 where the agreement with the server still holds (:data:`HALF_WEIGHTS`: measured by
the tests), and turned back to float32 in the graph (every sum is in float32).
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import re
import threading
import time
from pathlib import Path

import torch

from vitviz import assets
from vitviz.models import hooks, loaders
from vitviz.core.lru import LRU
from vitviz.models.runner import Call, Runner

log = logging.getLogger("vitviz")

VERSION = 1
"""Bumped when the graph's inputs or outputs change (part of every graph's name)."""
OPSET = 17
DEVICE_DIR = Path(os.environ.get("VITVIZ_DEVICE_DIR") or Path.home() / ".cache" / "vitviz" / "device")
_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


class Graph(torch.nn.Module):
    """The model's forward with its attention recorded, as the graph's outputs (see the module's text)."""

    def __init__(self, module: torch.nn.Module, forward, prefix: int, classifier: bool) -> None:
        super().__init__()
        self.module, self.prefix, self.classifier = module, prefix, classifier
        self._forward = forward

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(1, 3, S, S) -> ([logits (1, C)], cls (L, H, N), q_0..q_{L-1}, k_0..k_{L-1} each (H, T, d))."""
        qs: list[torch.Tensor] = []
        ks: list[torch.Tensor] = []

        def keep(_layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:
            qs.append(q[0] * scale)
            ks.append(k[0])

        with hooks.record_keys(self.module, keep):
            logits, _ = self._forward(x)
        cls = torch.stack([torch.softmax(q[:, :1] @ k.transpose(-1, -2), -1)[:, 0, self.prefix:]
                           for q, k in zip(qs, ks)])
        head = (logits,) if self.classifier and logits is not None else ()
        return (*head, cls, *qs, *ks)


def output_names(layers: int, classifier: bool) -> list[str]:
    return (["logits"] if classifier else []) + ["cls"] + [f"q{i}" for i in range(layers)] + \
        [f"k{i}" for i in range(layers)]


def graph_name(runner: Runner, side: int) -> str:
    """The graph's file name: a hash of what it is made from (model, weights, side, this module's version)."""
    named = repr((runner.spec.key, runner.weights_id, int(side), VERSION, HALF_WEIGHTS))
    return hashlib.sha1(named.encode()).hexdigest()[:20] + ".onnx"


HALF_WEIGHTS = True
"""Store the weights in float16 (half the download); the graph computes in float32."""


def export(runner: Runner, side: int) -> bytes:
    """The runner's model at ``side``×``side`` as ONNX bytes (see the module's text). ``ValueError`` when this model
    cannot be made into a graph (a CNN, a Swin: no class-token attention to record)."""
    if runner.spec.task in ("cnn", "relative"):
        raise ValueError(f"{runner.spec.key} cannot run on this device: its attention is not a class token's.")
    classifier = bool(runner.labels)
    names = output_names(runner.depth, classifier)

    def make(module: torch.nn.Module, forward) -> bytes:
        fixed = at_side(module, side, runner.spec.patch)
        if fixed is not module:
            forward = loaders.forward_of(fixed)
        graph = Graph(fixed, forward, runner.spec.prefix, classifier).eval()
        buf = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(graph, (torch.zeros(1, 3, side, side),), buf, dynamo=False, opset_version=OPSET,
                              input_names=["pixels"], output_names=names, do_constant_folding=True)
        return buf.getvalue()

    data = runner.trace(make)
    return half_weights(data) if HALF_WEIGHTS else data


def at_side(module: torch.nn.Module, side: int, patch: int) -> torch.nn.Module:
    """The module to trace at ``side``: for a timm ViT whose position embeddings would be resampled in every
    forward (an operation ONNX lacks: antialiased bicubic), a copy holding them resampled once for this grid by
    timm's own function, exactly as each forward on the server resamples them; else ``module`` itself."""
    import copy

    grid = side // patch
    pos = getattr(module, "pos_embed", None)
    if not (getattr(module, "dynamic_img_size", False) and pos is not None):
        return module
    old = tuple(module.patch_embed.grid_size)
    if old == (grid, grid):
        return module
    from timm.layers import resample_abs_pos_embed

    prefix = 0 if module.no_embed_class else module.num_prefix_tokens
    fixed = copy.deepcopy(module)
    with torch.no_grad():
        fixed.pos_embed = torch.nn.Parameter(resample_abs_pos_embed(pos, new_size=(grid, grid), old_size=old,
                                                                    num_prefix_tokens=prefix))
    fixed.patch_embed.grid_size = (grid, grid)
    return fixed


def half_weights(data: bytes, smallest: int = 1024) -> bytes:
    """ONNX bytes with every float32 weight of at least ``smallest`` values stored as float16 and cast back to
    float32 where it is used (the download halves; the sums stay float32)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(data)
    g = model.graph
    casts = []
    for init in g.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        arr = numpy_helper.to_array(init)
        if arr.size < smallest:
            continue
        name = init.name
        init.CopyFrom(numpy_helper.from_array(arr.astype(np.float16), name + "__f16"))
        casts.append(helper.make_node("Cast", [name + "__f16"], [name], to=onnx.TensorProto.FLOAT))
    for c in reversed(casts):
        g.node.insert(0, c)
    return model.SerializeToString()


def graph_file(runner: Runner, side: int) -> Path:
    """The graph of ``runner`` at ``side`` on disk, made the first time it is asked for (others asking at the same
    moment wait for it); the embedded model's shipped graph when it is that one."""
    name = graph_name(runner, side)
    shipped = assets.TINY / name
    if shipped.is_file():
        return shipped
    path = DEVICE_DIR / name
    if path.is_file():
        return path
    with _locks_lock:
        lock = _locks.setdefault(name, threading.Lock())
    with lock:
        if path.is_file():
            return path
        data = export(runner, side)
        DEVICE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        tmp.write_bytes(data)
        tmp.replace(path)  # whole or not at all: a half-written graph is never served
        log.info("made the device graph of %s at %d px: %s (%.1f MB)", runner.spec.key, side, name, len(data) / 1e6)
        return path


GRAPH_NAME = re.compile(r"^[0-9a-f]{20}\.onnx$")
"""What :func:`graph_name` makes: nothing else is looked for on disk."""


def find(name: str) -> Path | None:
    """The graph file named ``name`` (as :func:`graph_name` makes them), shipped or made here, or None."""
    if not GRAPH_NAME.match(name):  # before the file system is asked (a 5,000-character name is no file's)
        return None
    for folder in (assets.TINY, DEVICE_DIR):
        path = folder / name
        if path.is_file():
            return path
    return None


_server_ms: LRU[float] = LRU(256)


def server_ms(runner: Runner, side: int) -> float:
    """Milliseconds of the server's own fused forward of ``runner`` at ``side``×``side`` (measured once, after a
    first run): what a device's forward is compared with."""
    def measure() -> float:
        x = torch.zeros(1, 3, side, side)
        probe = Call(lambda _m, x, forward: forward(x))
        runner.run(probe, x)
        t0 = time.perf_counter()
        runner.run(probe, x)
        return (time.perf_counter() - t0) * 1000
    return _server_ms.get_or_make((runner.spec.key, runner.weights_id, int(side)), measure)


RESAMPLING = ("bicubic", "bilinear")
"""The resize filters the browser does as Pillow does (render/web/device.js)."""


def preprocessing(runner: Runner, side: int) -> dict:
    """How the device prepares a picture for ``runner`` at ``side``: timm's eval transform with the checkpoint's
    interpolation, crop fraction, mean and std (the short side resized to ``floor(side / crop_pct)``, the centre
    ``side``×``side`` cropped). ``ValueError`` for a filter the browser does not do."""
    dc = runner.data_config
    interpolation = dc.get("interpolation") or "bicubic"
    if interpolation not in RESAMPLING:
        raise ValueError(f"{runner.spec.key} resizes its pictures with {interpolation!r}, which this device path "
                         f"does not do (it does {', '.join(RESAMPLING)}).")
    crop_pct = float(dc.get("crop_pct") or 1.0)
    return {"side": int(side), "resize": math.floor(side / crop_pct), "crop_pct": crop_pct,
            "interpolation": interpolation, "mean": list(runner.mean), "std": list(runner.std)}


def reference_input(runner: Runner, rgb, side: int):
    """(1, 3, side, side) float32 numpy: the picture prepared on the server exactly as :func:`preprocessing` says
    (timm's ``create_transform`` through PIL), what the browser's preparation is checked against."""
    from PIL import Image
    from timm.data import create_transform

    p = preprocessing(runner, side)
    transform = create_transform(input_size=(3, side, side), interpolation=p["interpolation"], crop_pct=p["crop_pct"],
                                 crop_mode="center", mean=tuple(p["mean"]), std=tuple(p["std"]))
    return transform(Image.fromarray(rgb))[None].numpy()


def manifest(runner: Runner, side: int) -> dict:
    """What the browser needs to run the graph and draw it: the graph's file name and size, the preprocessing
    (:func:`preprocessing`), the labels, the shapes of the outputs."""
    prep = preprocessing(runner, side)
    path = graph_file(runner, side)
    return {
        "model": runner.spec.key, "file": path.name, "bytes": path.stat().st_size, **prep,
        "labels": runner.labels, "layers": runner.depth, "heads": runner.heads, "prefix": runner.spec.prefix,
        "patch": runner.spec.patch, "outputs": output_names(runner.depth, bool(runner.labels)),
    }
