"""A model for the student's device: the same forward as an ONNX graph that ONNX Runtime Web runs in the browser.

One graph per model (its weights and this module's version), for every side and shape: it takes

- ``pixels``: (1, 3, H, W) the picture, fitted and normalised by the model's one input policy
  (:attr:`vitviz.models.runner.Runner.input_policy`: a classifier's own eval transform, a square; the whole picture
  for a model without classes, any shape of whole patches), and
- ``pos``: (1, T', D) the position embedding for that grid, exactly as the model's own forward makes it (timm's and
  transformers' resampling of the learned table, done by the server once per grid: :func:`position_embedding`,
  served at ``/vitviz/device-pos/<graph>/<gh>x<gw>``). The resampling stays out of the graph: ONNX lacks
  antialiased bicubic (DINOv2's), and a graph that did it for one grid would be a graph per side.

and gives what the browser's views draw, from the same forward the server runs:

- ``cls``: (L, H, N) the class token's attention to the patches in every layer and head (prefix keys dropped, rows
  not renormalised: exactly :func:`vitviz.core.attention.class_rows`);
- ``q0`` … ``q{L-1}`` and ``k0`` … ``k{L-1}``: (H, T, d) each layer's queries (already multiplied by the layer's
  scale) and keys, what the explorer turns into any patch's rows (the server's :class:`LayerKeys`, in float32);
- ``logits``: (1, C), for a model with a classifier;
- the Forward pass's residual stream (:func:`vitviz.models.parts.stream`, the server's own maths): ``norms``
  (L + 1, T), ``updates`` (2, L), ``cosine`` (L + 1,), ``embedded`` (N,), ``final`` (T,); and for a classifier the
  logit lens, ``lens`` (L, C) and ``lens_patches`` (L, N) (:func:`output_names`).

Weights are stored as float16 only where measuring shows that the maps still agree with the server's
(:func:`choose_precision`: every layer's and head's class-token map within :data:`AGREEMENT` of its largest value,
on the shipped cat photo, against the model's own float32 forward): all of them, or all but the query and key
projections, or none. Every sum in the graph is float32. A graph is made once and kept on disk under its content
hash (``VITVIZ_DEVICE_DIR``, by default ``~/.cache/vitviz/device``), the least recently used removed past
:data:`DEVICE_BYTES`; the embedded model's graph ships in ``vitviz/assets/tiny``.
"""

from __future__ import annotations

import copy
import io
import logging
import math
import os
import re
import threading
import time
import types
from pathlib import Path

import numpy as np
import torch

from vitviz import assets
from vitviz.core import digest
from vitviz.core import owned
from vitviz.core.lru import LRU
from vitviz.models import hooks, loaders, parts
from vitviz.models.runner import Call, Runner, forward_ms
from vitviz.specs import views as declared

log = logging.getLogger("vitviz")

VERSION = 5
"""Bumped when the graph's inputs, outputs or computation change (part of every graph's name)."""
CHUNKS = 8
"""The graph's attention takes a block of query rows at a time, in this many blocks: no layer ever holds every
head's T × T scores (311 MB for DINO ViT-S/8 at 480 px, 3,601 tokens), one block's at most."""
OPSET = 17
DEVICE_DIR = Path(os.environ.get("VITVIZ_DEVICE_DIR") or Path.home() / ".cache" / "vitviz" / "device")
DEVICE_BYTES = int(float(os.environ.get("VITVIZ_DEVICE_MB", "4096")) * 2**20)
"""The graphs made here stay under this many bytes on disk together (the least recently used go first)."""
AGREEMENT = 1e-3
"""A weight precision is used only when every class-token map it gives is within this share of the map's largest
value of the server's own float32 forward (:func:`choose_precision`)."""
PRECISIONS = ("float16", "float16, q and k in float32", "float32")
"""The weight precisions tried, smallest download first."""
_QK = re.compile(r"(attn\.qkv|attention\.(query|key)|\.q_proj|\.k_proj)\.(weight|bias)$")
"""The parameters that make the queries and keys (timm's joint projection includes the values)."""
_locks: dict[str, threading.Lock] = owned.keep("device.locks", "gates", {}, "one lock per graph file being made")
_locks_lock = threading.Lock()


# ---- the position embedding, outside the graph ------------------------------------------------------------------

def _hf_base(module: torch.nn.Module) -> torch.nn.Module:
    return getattr(module, "base_model", module)


def _pos_prefix(module: torch.nn.Module) -> int:
    """How many prefix tokens the position table covers (timm: all, or none with ``no_embed_class``;
    transformers: [CLS] and a distillation token, never the registers)."""
    if hasattr(module, "pos_embed"):
        return 0 if getattr(module, "no_embed_class", False) else int(module.num_prefix_tokens)
    return 1 + int(hasattr(_hf_base(module).embeddings, "distillation_token"))


def position_table(module: torch.nn.Module, grid: tuple[int, int], patch: int) -> torch.Tensor:
    """(1, T', D) float32: the position embedding ``module``'s own forward adds for a ``grid`` of patches (T' =
    the prefix tokens the table covers + gh·gw), by the library's own resampling."""
    gh, gw = grid
    if hasattr(module, "pos_embed"):  # timm
        if module.pos_embed is None:
            raise ValueError("this model has no learned position table to give the device")
        from timm.layers import resample_abs_pos_embed

        table = resample_abs_pos_embed(module.pos_embed, new_size=(gh, gw),
                                       old_size=tuple(module.patch_embed.grid_size),
                                       num_prefix_tokens=_pos_prefix(module))
        return table.detach().float().clone()  # at the model's own grid, timm hands back the parameter itself
    emb = _hf_base(module).embeddings  # transformers: its interpolation, given tokens of the grid's length
    tokens = torch.zeros(1, _pos_prefix(module) + gh * gw, int(_hf_base(module).config.hidden_size))
    return emb.interpolate_pos_encoding(tokens, gh * patch, gw * patch).detach().float().clone()


_tables: LRU[np.ndarray] = owned.keep("device.tables", "results", LRU(4096, 256 * 2**20, lambda a: a.nbytes),
                                      "position tables resampled for a grid")


def position_embedding(runner: Runner, grid: tuple[int, int]) -> np.ndarray:
    """:func:`position_table` of ``runner``'s model for ``grid``, as float32 numpy (kept: a class asks for the same
    few grids)."""
    key = (runner.spec.key, runner.weights_id, tuple(grid))
    return _tables.get_or_make(key, lambda: runner.read(
        lambda m: position_table(m, grid, runner.spec.patch).numpy().astype(np.float32)))


def chunked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q·kᵀ · scale)·v for (B, H, T, d) queries, keys and values, :data:`CHUNKS` blocks of query rows at a
    time (the block bounds follow T, whatever the picture: the graph works at every size)."""
    t = q.shape[2]
    outs = []
    for i in range(CHUNKS):
        start, end = (t * i) // CHUNKS, (t * (i + 1)) // CHUNKS
        rows = q.narrow(2, start, end - start)
        outs.append(torch.softmax((rows * scale) @ k.transpose(-2, -1), -1) @ v)
    return torch.cat(outs, 2)


def _hf_chunked(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **_kwargs):
    """transformers' attention interface for :func:`chunked_attention` (registered as "vitviz_chunked")."""
    out = chunked_attention(query, key, value, scaling if scaling is not None else query.shape[-1] ** -0.5)
    return out.transpose(1, 2).contiguous(), None


def _timm_chunked(self, x: torch.Tensor, attn_mask=None, is_causal: bool = False) -> torch.Tensor:
    """timm's ``Attention.forward`` (no mask, no gate: the ViTs vitviz records) with :func:`chunked_attention`."""
    b, n, _ = x.shape
    qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = self.q_norm(q), self.k_norm(k)
    x = chunked_attention(q, k, v, self.scale).transpose(1, 2).reshape(b, n, self.attn_dim)
    return self.proj_drop(self.proj(self.norm(x)))


def _with_pos_input(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` for the device: it adds ``copy._vx_pos`` (set before each forward) where it would
    resample its own table (timm's ``_pos_embed``, transformers' ``interpolate_pos_encoding``), and computes its
    attention a block of query rows at a time (:func:`chunked_attention`)."""
    twin = copy.deepcopy(module).eval()
    for attn in hooks.attention_modules(twin):
        if hasattr(attn, "qkv") and getattr(attn, "gate", None) is None:  # timm
            attn.forward = types.MethodType(_timm_chunked, attn)
    from transformers import AttentionInterface

    AttentionInterface.register("vitviz_chunked", _hf_chunked)
    for sub in twin.modules():
        cfg = getattr(sub, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            cfg._attn_implementation = "vitviz_chunked"
    if hasattr(twin, "pos_embed"):
        def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:  # timm's, with the table given
            b, _h, _w, c = x.shape
            x = x.view(b, -1, c)
            front = [t.expand(b, -1, -1) for t in (getattr(self, "cls_token", None), getattr(self, "dist_token", None),
                                                   getattr(self, "reg_token", None)) if t is not None]
            if self.no_embed_class:
                x = x + self._vx_pos
                return self.pos_drop(torch.cat(front + [x], 1) if front else x)
            x = torch.cat(front + [x], 1) if front else x
            return self.pos_drop(x + self._vx_pos)
        twin._pos_embed = types.MethodType(_pos_embed, twin)
        twin.dynamic_img_size = True
    else:
        emb = _hf_base(twin).embeddings
        emb.interpolate_pos_encoding = lambda _embeddings, _h, _w: twin._vx_pos
    return twin


# ---- the graph ----------------------------------------------------------------------------------------------------

class Graph(torch.nn.Module):
    """The model's forward with its attention and its residual stream recorded, as the graph's outputs (see the
    module's text and :func:`output_names`)."""

    def __init__(self, module: torch.nn.Module, prefix: int, classifier: bool) -> None:
        super().__init__()
        self.module, self.prefix, self.classifier = module, prefix, classifier
        self._forward = loaders.forward_of(module)
        self.parts = parts.parts_of(module)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(1, 3, H, W), (1, T', D) -> the outputs :func:`output_names` lists, in its order."""
        qs: list[torch.Tensor] = []
        ks: list[torch.Tensor] = []

        def keep(_layer: int, q: torch.Tensor, k: torch.Tensor, scale: float) -> None:
            qs.append(q[0] * scale)
            ks.append(k[0])

        self.module._vx_pos = pos
        with hooks.record_keys(self.module, keep), hooks.capture(parts.stream_targets(self.parts)) as seen:
            logits, _ = self._forward(x)
        cls = torch.stack([torch.softmax(q[:, :1] @ k.transpose(-1, -2), -1)[:, 0, self.prefix:]
                           for q, k in zip(qs, ks)])
        st = parts.stream(self.parts, seen, self.prefix)
        flow = (st.norms, torch.stack([st.attn_update, st.mlp_update]), st.cosine, st.embedded.norm(dim=-1),
                st.final.norm(dim=-1))
        if not (self.classifier and logits is not None):
            return (cls, *qs, *ks, *flow)
        target = logits.reshape(-1, logits.shape[-1])[0].argmax()
        lens, lens_patches = parts.lens(self.parts, st.tokens[1:], self.prefix, target, step=0, dtype=torch.float32)
        return (logits, cls, *qs, *ks, *flow, lens, lens_patches)


def output_names(layers: int, classifier: bool) -> list[str]:
    """The graph's outputs, in order (see the module's text): [``logits``], ``cls``, the queries and keys, then the
    residual stream (:func:`vitviz.models.parts.stream`): ``norms`` (L + 1, T) every token's norm entering block 1
    and after each block, ``updates`` (2, L) what attention and the MLP add to the token the head reads,
    ``cosine`` (L + 1,), ``embedded`` (N,) the patch embeddings' norms, ``final`` (T,) the final norm's; and for a
    classifier the logit lens, ``lens`` (L, C) and ``lens_patches`` (L, N) (float32)."""
    flow = ["norms", "updates", "cosine", "embedded", "final"]
    return (["logits"] if classifier else []) + ["cls"] + [f"q{i}" for i in range(layers)] + \
        [f"k{i}" for i in range(layers)] + flow + (["lens", "lens_patches"] if classifier else [])


def _check_exportable(runner: Runner) -> None:
    if runner.spec.task in ("cnn", "relative"):
        raise ValueError(f"{runner.spec.key} cannot run on this device: its attention is not a class token's.")


def export(runner: Runner) -> bytes:
    """The runner's model as float32 ONNX bytes, for any picture size (see the module's text); the parameters keep
    their names (no constant folding: ONNX Runtime folds at load), so their precision can be chosen by name.
    ``ValueError`` when the model cannot be made into a graph (a CNN, a Swin, or an export failure, with why)."""
    _check_exportable(runner)
    classifier = bool(runner.labels)
    names = output_names(runner.depth, classifier)
    p = runner.spec.patch
    side = runner.side(runner.resolution)

    def make(module: torch.nn.Module, _forward) -> bytes:
        graph = Graph(_with_pos_input(module), runner.spec.prefix, classifier).eval()
        pos = position_table(module, (side // p, side // p), p)
        buf = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(graph, (torch.zeros(1, 3, side, side), pos), buf, dynamo=False, opset_version=OPSET,
                              input_names=["pixels", "pos"], output_names=names, do_constant_folding=False,
                              dynamic_axes={"pixels": {2: "height", 3: "width"}, "pos": {1: "positions"}})
        return buf.getvalue()

    try:
        return runner.trace(make)
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - an operator ONNX lacks, a layout the exporter cannot trace: said
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ValueError(f"{runner.spec.key} could not be made into a graph for this device ({type(err).__name__}: "
                         f"{first})") from None


def half_weights(data: bytes, keep: re.Pattern | None = None, smallest: int = 1024) -> bytes:
    """ONNX bytes with every float32 weight of at least ``smallest`` values stored as float16 (but those whose name
    ``keep`` matches) and cast back to float32 where it is used (the download about halves; the sums stay
    float32)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(data)
    g = model.graph
    casts = []
    for init in g.initializer:
        if init.data_type != onnx.TensorProto.FLOAT or (keep is not None and keep.search(init.name)):
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


def with_precision(data: bytes, precision: str) -> bytes:
    """The float32 graph ``data`` stored at ``precision`` (one of :data:`PRECISIONS`)."""
    if precision == "float32":
        return data
    return half_weights(data, _QK if precision == "float16, q and k in float32" else None)


# ---- which precision: measured ---------------------------------------------------------------------------------

def _rounded(module: torch.nn.Module, precision: str, smallest: int = 1024) -> torch.nn.Module:
    """A copy of ``module`` whose weights are what a graph at ``precision`` holds (float16 and back)."""
    twin = copy.deepcopy(module)
    keep = _QK if precision == "float16, q and k in float32" else None
    with torch.no_grad():
        for name, p in twin.named_parameters():
            if p.dtype == torch.float32 and p.numel() >= smallest and not (keep and keep.search(name)):
                p.copy_(p.half().float())
    return twin


def _class_maps(module: torch.nn.Module, x: torch.Tensor, prefix: int) -> torch.Tensor:
    """(L, H, N) the class token's attention of one forward of ``module`` (float64)."""
    rows: list[torch.Tensor] = []

    def keep(_layer, q, k, scale):
        rows.append(torch.softmax((q[0, :, :1].double() * scale) @ k[0].double().transpose(-1, -2), -1)[:, 0, prefix:])

    with hooks.record_keys(module, keep):
        loaders.forward_of(module)(x)
    return torch.stack(rows)


def measure_precision(runner: Runner, x: torch.Tensor) -> dict[str, float]:
    """For each of :data:`PRECISIONS`: the largest difference, over every layer and head, between the class-token
    map a graph at that precision gives for the input ``x`` and the server's own float32 map, as a share of that
    map's largest value."""
    def measure(module: torch.nn.Module, _forward) -> dict[str, float]:
        with torch.inference_mode():
            exact = _class_maps(module, x, runner.spec.prefix)
            out = {}
            for precision in PRECISIONS[:-1]:
                got = _class_maps(_rounded(module, precision), x, runner.spec.prefix)
                out[precision] = float(((got - exact).abs().amax(-1) / exact.amax(-1)).max())
        return out | {"float32": 0.0}
    return runner.trace(measure)


def choose_precision(runner: Runner) -> tuple[str, float]:
    """The smallest weight precision whose maps agree with the server's within :data:`AGREEMENT` (measured on the
    shipped cat photo, fitted for this model as every view fits it), and the agreement measured."""
    from vitviz.core.images import load_rgb

    rgb = load_rgb(assets.example("cat"), 640)
    x = runner.preprocess(rgb, runner.resolution)
    measured = measure_precision(runner, x)
    for precision in PRECISIONS:
        if measured[precision] <= AGREEMENT:
            return precision, measured[precision]
    return "float32", 0.0


# ---- files on disk --------------------------------------------------------------------------------------------

GRAPH_NAME = re.compile(r"^[0-9a-f]{20}\.onnx$")
"""What :func:`graph_name` makes: nothing else is looked for on disk."""


def graph_name(runner: Runner) -> str:
    """The graph's file name: a hash of what it is made from (the model and its weights, this module's version)."""
    return digest.content("device graph", runner.spec.key, runner.weights_id, VERSION) + ".onnx"


_precisions: LRU[tuple[str, float]] = owned.keep("device.precisions", "results", LRU(256),
                                                  "each graph's measured weight precision")


def graph_file(runner: Runner) -> tuple[Path, str, float]:
    """The graph of ``runner`` on disk (made the first time it is asked for; others asking at the same moment wait),
    its weights' precision and the agreement measured; the embedded model's shipped graph when it is that one."""
    name = graph_name(runner)
    for folder in (assets.TINY, DEVICE_DIR):
        path = folder / name
        if path.is_file():
            _touch(path)
            return (path, *_precisions.get_or_make(name, lambda: _read_precision(path)))
    with _locks_lock:
        lock = _locks.setdefault(name, threading.Lock())
    with lock:
        path = DEVICE_DIR / name
        if path.is_file():
            return (path, *_precisions.get_or_make(name, lambda: _read_precision(path)))
        precision, agreement = choose_precision(runner)
        data = _stamped(with_precision(export(runner), precision), precision, agreement)
        DEVICE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        tmp.write_bytes(data)
        tmp.replace(path)  # whole or not at all: a half-written graph is never served
        log.info("made the device graph of %s: %s (%.1f MB, weights %s, maps within %.1e of the server's)",
                 runner.spec.key, name, len(data) / 1e6, precision, agreement)
        prune(keep=path)
        _precisions.put(name, (precision, agreement))
        return path, precision, agreement


def _stamped(data: bytes, precision: str, agreement: float) -> bytes:
    """The graph with its weights' precision and the agreement measured written into its metadata."""
    import onnx

    model = onnx.load_from_string(data)
    for key, value in (("vitviz_precision", precision), ("vitviz_agreement", repr(agreement))):
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


def _read_precision(path: Path) -> tuple[str, float]:
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return meta.get("vitviz_precision", "float16"), float(meta.get("vitviz_agreement", "nan"))


def _touch(path: Path) -> None:
    """Mark a graph as used now, in its access time (the pruning removes the least recently used first). Its
    modification time stays the time its content was written: its compressed copy is made again only when the
    graph is newer than it (:func:`vitviz.app.files.compressed_file`), never because it was served."""
    try:
        st = path.stat()
        os.utime(path, ns=(time.time_ns(), st.st_mtime_ns))
    except OSError:
        pass


def prune(limit: int | None = None, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used graphs made here until the rest fit ``limit`` bytes (:data:`DEVICE_BYTES`);
    ``keep`` (the one just made) stays. Returns what was removed."""
    limit = DEVICE_BYTES if limit is None else limit
    files = []
    for path in DEVICE_DIR.glob("*.onnx") if DEVICE_DIR.is_dir() else ():
        try:
            st = path.stat()
        except OSError:
            continue
        zipped = path.with_name(path.name + ".gz")  # its compressed copy goes with it
        used = max(st.st_atime, st.st_mtime)  # served (:func:`_touch`) or written, whichever was later
        files.append((used, st.st_size + (zipped.stat().st_size if zipped.is_file() else 0), path))
    total, gone = sum(size for _, size, _ in files), []
    for _, size, path in sorted(files):
        if total <= limit:
            break
        if path == keep:
            continue
        try:
            path.unlink()
            path.with_name(path.name + ".gz").unlink(missing_ok=True)
        except OSError:
            continue
        total -= size
        gone.append(path)
    if gone:
        log.info("removed %d device graph(s) to stay under %.0f MB", len(gone), limit / 2**20)
    return gone


def find(name: str) -> Path | None:
    """The graph file named ``name`` (as :func:`graph_name` makes them), shipped or made here, or None."""
    if not GRAPH_NAME.match(name):  # before the file system is asked (a 5,000-character name is no file's)
        return None
    for folder in (assets.TINY, DEVICE_DIR):
        path = folder / name
        if path.is_file():
            _touch(path)
            return path
    return None


# ---- what the browser is told ----------------------------------------------------------------------------------

def server_ms(runner: Runner, side: int) -> float:
    """Milliseconds of the server's forward of ``runner`` at ``side``×``side``: the median of its latest forwards'
    milliseconds per multiply-accumulate (:func:`vitviz.models.runner.forward_ms`, the requests' own forwards of any
    shape: a 3:2 photo's as well as a square's) times that side's (:func:`recent_ms`), what a device's forward is
    compared with. While fewer than three are known, the model's forward at that side is timed (after a first run,
    which is not counted) until there are: one slow run (a busy moment) is not the figure."""
    tokens = square_tokens(runner, side)
    if len(forward_ms(runner.timing_key)) < 3:
        x = torch.zeros(1, 3, int(side), int(side))
        runner.run(Call(lambda _m, x, forward: forward(x)), x)
        timed = Call(lambda _m, x, forward: forward(x), timed=True)  # Runner.run notes its forward's time
        while len(forward_ms(runner.timing_key)) < 3:
            runner.run(timed, x)
    return recent_ms(runner.timing_key, cost(runner), tokens)


def square_tokens(runner: Runner, side: int) -> int:
    """Tokens of a ``side``×``side`` input to ``runner``: its prefix and (side // patch)² patches."""
    return runner.spec.prefix + (int(side) // runner.spec.patch) ** 2


def recent_ms(key, costs: dict[str, int], tokens: int) -> float | None:
    """What the latest forwards kept for ``key`` (a runner's ``timing_key``) say a forward of ``tokens`` tokens
    takes: the median of their milliseconds per multiply-accumulate (``costs``, :func:`cost`: token·T + pair·T²,
    each at its own token count) times ``tokens``' multiply-accumulates; None when none is kept."""
    def macs(t: int) -> int:
        return costs["token"] * t + costs["pair"] * t * t

    kept = forward_ms(key)
    return float(np.median([ms / macs(t) for t, ms in kept])) * macs(tokens) if kept else None


RESAMPLING = ("bicubic", "bilinear")
"""The resize filters the browser does as Pillow does (render/web/device.js)."""


def preprocessing(runner: Runner, side: int) -> dict:
    """How the device prepares a picture for ``runner`` at ``side``, by the model's input policy: "checkpoint",
    timm's eval transform (the short side resized to ``floor(side / crop_pct)`` with the checkpoint's filter, the
    centre ``side``×``side`` cropped); "keep", the whole picture (the short side resized to ``side`` with Pillow's
    bicubic, aspect kept, the long side cut to whole patches, centred). Then (x / 255 − mean) / std. ``ValueError``
    for a filter the browser does not do."""
    dc = runner.data_config
    policy = runner.input_policy
    interpolation = (dc.get("interpolation") or "bicubic") if policy == "checkpoint" else "bicubic"
    if interpolation not in RESAMPLING:
        raise ValueError(f"{runner.spec.key} resizes its pictures with {interpolation!r}, which this device path "
                         f"does not do (it does {', '.join(RESAMPLING)}).")
    crop_pct = float(dc.get("crop_pct") or 1.0) if policy == "checkpoint" else 1.0
    return {"policy": policy, "side": int(side), "resize": math.floor(side / crop_pct), "crop_pct": crop_pct,
            "interpolation": interpolation, "mean": list(runner.mean), "std": list(runner.std)}


def reference_input(runner: Runner, rgb: np.ndarray, side: int) -> np.ndarray:
    """(1, 3, H, W) float32 numpy: the picture prepared on the server exactly as every view prepares it (the
    model's input policy), what the browser's preparation is checked against."""
    return runner.preprocess(rgb, side).numpy()


_by_graph: LRU[Runner] = owned.keep("device.by_graph", "results", LRU(256), "the model of each graph named")
"""The model of each graph a manifest named (what ``/vitviz/device-pos/<graph>/`` resamples the table of)."""
SMALLEST_SIDE = int(declared.SIDE.lo)
"""The smallest short side a device's probe goes down to (the declared short side's lower bound)."""
MAX_POSITIONS = 16_384
"""The largest grid whose position table is handed out (128 × 128 patches)."""


def table_bytes(name: str, grid: tuple[int, int]) -> bytes | None:
    """The position table of graph ``name``'s model for ``grid`` as little-endian float32 bytes, or None (no such
    graph named by a manifest of this process, or a grid outside 1 … :data:`MAX_POSITIONS` patches)."""
    runner = _by_graph.get(name) if GRAPH_NAME.match(name) else None
    gh, gw = grid
    if runner is None or not (1 <= gh and 1 <= gw and gh * gw <= MAX_POSITIONS):
        return None
    return position_embedding(runner, (gh, gw)).astype("<f4").tobytes()


def cost(runner: Runner) -> dict[str, int]:
    """A forward's multiply-accumulates for T tokens as ``token``·T + ``pair``·T², what a device's probe scales its
    measured time by to find the largest side it can afford: every linear layer and the patch embedding act once
    per token (their weights' sizes; the head's counted per token too, a percent or two too many), attention's two
    products (q·kᵀ and the weighted sum of v) take D per pair of tokens each, in every layer
    (:func:`vitviz.core.patches.vit_macs` counts the same)."""
    def weights(module: torch.nn.Module) -> int:
        return sum(m.weight.numel() for m in module.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)))

    return {"token": int(runner.read(weights)), "pair": 2 * runner.depth * runner.spec.dim}


def manifest(runner: Runner, side: int) -> dict:
    """What the browser needs to run the graph and draw it: the graph's file, size and weights' precision (with the
    agreement measured), the preprocessing (:func:`preprocessing`), where the position tables are, the labels, the
    shapes of the outputs. ``side`` is the side asked; the manifest's is the side used (:meth:`Runner.side`)."""
    prep = preprocessing(runner, runner.side(side))
    path, precision, agreement = graph_file(runner)
    _by_graph.put(path.name, runner)
    pos = runner.read(lambda m: _pos_prefix(m))
    return {
        "model": runner.spec.key, "file": path.name, "bytes": path.stat().st_size, **prep,
        "precision": precision, "agreement": agreement, "pos_prefix": pos, "width": runner.spec.dim,
        "labels": runner.labels, "layers": runner.depth, "heads": runner.heads, "prefix": runner.spec.prefix,
        "patch": runner.spec.patch, "outputs": output_names(runner.depth, bool(runner.labels)),
        "cost": cost(runner), "smallest": SMALLEST_SIDE,
    }


def ship_embedded() -> Path:
    """Write the embedded model's graph into the package (``vitviz/assets/tiny``), where :func:`graph_file` finds it
    before making one, and remove the graphs of earlier versions there. ``python -m vitviz.models.device``."""
    global DEVICE_DIR
    runner = loaders.load_embedded()
    for old in assets.TINY.glob("*.onnx"):
        old.unlink()
    made_in, DEVICE_DIR = DEVICE_DIR, assets.TINY
    try:
        path, precision, agreement = graph_file(runner)
    finally:
        DEVICE_DIR = made_in
    print(f"{path} ({path.stat().st_size:,} bytes, weights {precision}, maps within {agreement:.1e} of the server's)")
    return path


if __name__ == "__main__":
    ship_embedded()
