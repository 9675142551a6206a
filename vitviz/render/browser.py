"""What the views drawn in the browser receive: packed once, compact, with the library's own numbers.

Three views run in the browser (``web/*.js`` beside this module): the attention explorer,
the position-similarity map and the patch inspector. This module packs their
data; nothing here imports gradio.

The attention explorer receives one analysis.
The explorer (``web/explorer.js``) draws every map, contour and
percentage in the browser from this payload, so pointing at a patch or moving a
slider needs no server call. The class token's maps travel as float32 with the
head mean computed here, so the browser's "% of mass / % of patches" are the
library's :func:`vitviz.core.attention.mass_mask` digit for digit. Patch-to-patch rows
(every patch as the query) are large, (H + 1)·N² values per layer: they travel
as float32 while small, as float16 otherwise, only for the layer being looked
at unless all layers together are small; past ``ROWS_MAX_BYTES`` only the head
mean's rows travel, and past that again none (the explorer then says so and
offers the class token only). Another layer's rows, asked for later, are written
once into a file the server streams (:func:`rows_for`), never held in memory per
request. Packing reserves its estimate from the server-wide budget.
"""

from __future__ import annotations

import base64
import io
import os
import threading
import time
import uuid
from functools import lru_cache
from pathlib import Path

import matplotlib
import numpy as np
from PIL import Image

from vitviz.analyses.attention import Analysis, find
from vitviz.core import posembed
from vitviz.core.images import Fitted
from vitviz.models import budget
from vitviz.render.plotting import DIVERGING
from vitviz.specs.views import COLORMAPS

ROWS_EXACT_BYTES = 4 * 2**20
"""A layer's patch-to-patch rows under this many float32 bytes travel exactly; above, as float16."""
ROWS_MAX_BYTES = 32 * 2**20
"""A layer's rows over this many bytes (after float16) are not sent at all."""
ALL_LAYERS_BYTES = 8 * 2**20
"""When every layer's rows together are under this, all travel with the first answer."""


def b64(a: np.ndarray) -> str:
    """Little-endian bytes of a contiguous array, base64."""
    return base64.b64encode(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()).decode()


@lru_cache(maxsize=1)
def colormaps() -> dict[str, str]:
    """matplotlib's 256-entry tables of the offered colormaps and the signed one, (256, 3) uint8 each."""
    return {name: b64((matplotlib.colormaps[name](np.arange(256))[:, :3] * 255).round().astype(np.uint8))
            for name in COLORMAPS + (DIVERGING,)}


def png_data_url(rgb: np.ndarray) -> str:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _rows_array(a: Analysis, layer: int) -> np.ndarray | str:
    """Patch-to-patch rows of 0-based ``layer`` as they travel ((heads, N, N) float32 or float16), or why not."""
    rows = a.maps.query_rows(layer)
    if rows is None:
        return "patch-to-patch attention was not kept at this resolution"
    if rows.nbytes <= ROWS_EXACT_BYTES:
        return rows.astype(np.float32)
    if rows.nbytes // 2 > ROWS_MAX_BYTES:
        rows = rows[-1:]  # the head mean alone
        if rows.nbytes // 2 > ROWS_MAX_BYTES:
            return (f"patch-to-patch attention at {a.maps.cls.shape[-1]:,} patches is too large to send; choose a "
                    "smaller short side to point at patches")
    return rows.astype(np.float16)


def _dtype(rows: np.ndarray) -> str:
    return "f4" if rows.dtype == np.float32 else "f2"


def layer_rows(a: Analysis, layer: int) -> dict:
    """Patch-to-patch rows of 0-based ``layer`` inside a payload: {"heads", "dtype", "data"} or {"missing": why}."""
    rows = _rows_array(a, layer)
    if isinstance(rows, str):
        return {"missing": rows}
    return {"heads": rows.shape[0], "dtype": _dtype(rows), "data": b64(rows)}


def rows_bytes(a: Analysis) -> int:
    """Bytes of one layer's rows as they would travel (before base64), at most (per-head rows in float16)."""
    n, heads = a.maps.cls.shape[-1], a.maps.heads + 1
    exact = heads * n * n * 4
    return exact if exact <= ROWS_EXACT_BYTES else exact // 2


def attention_payload(a: Analysis, values: dict, fields: dict) -> dict:
    """Everything the explorer draws, opening on the Attention view's settings ``values`` (as used).

    Keys: grid (gh, gw), patch, layers, heads, image (PNG data URL of the fitted picture), cls (base64 float32
    (L, H + 1, N), the last of the H + 1 being the head mean), rollout (base64 float32 (N,), head-mean rollout),
    rows {layer: layer_rows}, token (to fetch other layers' rows), ``state`` (the settings the explorer holds:
    layer counted from 1, head with -1 for the mean, keep, alpha, cmap, query as [row, col] or None), ``fields``
    (for each of them its link key, and for numbers their range and step: the declaration, so the browser writes
    the same link and offers the same range as everything else), colormaps and the byte count.
    """
    maps = a.maps
    start = int(np.clip(int(values["layer"]), 1, maps.layers)) - 1
    send = range(maps.layers) if rows_bytes(a) * maps.layers <= ALL_LAYERS_BYTES else [start]
    with budget.reserve(payload_bytes(a, len(send)), "packing the explorer's data"):
        return _payload(a, values, fields, start, send)


def payload_bytes(a: Analysis, layers_of_rows: int) -> int:
    """Estimated peak bytes of packing a payload with ``layers_of_rows`` layers of rows: each array, its copy as
    sent and its base64 text (4/3), twice over for the JSON the server then writes."""
    maps = a.maps
    n = maps.cls.shape[-1]
    arrays = maps.layers * (maps.heads + 1) * n * 4 + layers_of_rows * rows_bytes(a) + a.fitted.image.nbytes
    return int(arrays * (1 + 4 / 3) * 2)


def _payload(a: Analysis, values: dict, fields: dict, start: int, send) -> dict:
    maps = a.maps
    means = np.stack([maps.cls_map(i).ravel() for i in range(maps.layers)])[:, None]  # the library's own head mean
    cls = np.concatenate([maps.cls, means], axis=1).astype(np.float32)
    query = values.get("query")
    state = {"layer": start + 1, "head": int(values["head"]), "keep": float(values["keep"]),
             "alpha": float(values["alpha"]), "cmap": values["cmap"], "query": None if query is None else list(query)}
    out = {
        "token": a.token, "model": a.runner.spec.key, "grid": list(maps.grid), "patch": maps.patch,
        "layers": maps.layers, "heads": maps.heads, "image": png_data_url(a.fitted.image),
        "cls": b64(cls), "rollout": b64(maps.rollout("mean").astype(np.float32).ravel()),
        "rows": {str(i): layer_rows(a, i) for i in send}, "state": state,
        "fields": {name: {"link": f.link, "lo": f.lo, "hi": f.hi, "step": f.step, "default": f.default,
                          "words": dict(f.words), "choices": list(f.options()) if f.kind == "choice" else None}
                   for name, f in fields.items()},
        "colormaps": colormaps(),
    }
    out["bytes"] = sum(len(v) for v in (out["cls"], out["rollout"], out["image"])) + sum(
        len(r.get("data", "")) for r in out["rows"].values())
    return out


def rows_for(token: str, layer: int, folder: Path) -> dict:
    """The browser's fetch of one more layer's rows (``layer`` 0-based), named by the analysis ``token``.

    The rows go into a file in ``folder`` (raw little-endian values, written once per analysis and layer, renamed
    into place), and the answer names it: {"layer", "heads", "dtype", "file"} or {"layer", "missing": why}. The
    server then streams the file from disk, however many students ask at once; building it reserves its size
    from the server-wide budget.
    """
    layer = int(layer)
    a = find(str(token))
    if a is None:
        return {"layer": layer, "missing": "this picture's analysis has left the server's memory; show it again"}
    if not 0 <= layer < a.maps.layers:
        return {"layer": layer, "missing": f"there is no layer {layer + 1}"}
    with _ROW_LOCKS[hash((a.token, layer)) % len(_ROW_LOCKS)]:  # one student builds it; the others find it
        return _rows_file(a, layer, Path(folder))


_ROW_LOCKS = tuple(threading.Lock() for _ in range(16))
_PROCESS = uuid.uuid4().hex[:8]
"""Names this server process in row files: a file left by an earlier process (other weights, perhaps) never
answers for this one."""


def _rows_file(a: Analysis, layer: int, folder: Path) -> dict:
    heads = a.maps.heads + 1
    for dtype in ("f4", "f2"):
        path = folder / f"rows-{a.token}-{_PROCESS}-{layer}.{dtype}"
        if path.exists():  # made for another student already
            n = a.maps.cls.shape[-1]
            return {"layer": layer, "heads": path.stat().st_size // (n * n * int(dtype[1])), "dtype": dtype,
                    "file": str(path)}
    with budget.reserve(2 * rows_bytes(a) + heads * a.maps.cls.shape[-1] ** 2 * 4, "a layer's patch rows"):
        rows = _rows_array(a, layer)
        if isinstance(rows, str):
            return {"layer": layer, "missing": rows}
        path = folder / f"rows-{a.token}-{_PROCESS}-{layer}.{_dtype(rows)}"
        path.parent.mkdir(parents=True, exist_ok=True)
        prune(path.parent, ROWS_FILE_SECONDS)
        part = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        part.write_bytes(np.ascontiguousarray(rows).astype(rows.dtype.newbyteorder("<")).tobytes())
        os.replace(part, path)  # a reader sees the whole file or none
    return {"layer": layer, "heads": rows.shape[0], "dtype": _dtype(rows), "file": str(path)}


ROWS_FILE_SECONDS = 900
"""Row files older than this are removed when new ones are written (a browser keeps what it fetched)."""


def prune(folder: Path, age: float) -> int:
    """Remove files in ``folder`` last changed more than ``age`` seconds ago; files another request removes at the
    same moment are skipped, never an error. Returns how many this call removed."""
    now, removed = time.time(), 0
    for path in Path(folder).iterdir():
        try:
            if now - path.stat().st_mtime > age:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def posembed_payload(grid: np.ndarray, kind: str, name: str, cmap: str = "viridis") -> dict:
    """The whole (R·C, R·C) similarity table of a (R, C, D) embedding grid, for pointing at positions.

    float32 (exact) up to 1 MiB, float16 above (a 32×32 grid: 2 MiB).
    """
    r, c, d = grid.shape
    sim = posembed.similarity(grid.reshape(r * c, d), kind).astype(np.float32)
    exact = sim.nbytes <= 2**20
    return {"grid": [r, c], "kind": kind, "name": name, "dtype": "f4" if exact else "f2",
            "sim": b64(sim if exact else sim.astype(np.float16)), "cmap": cmap, "colormaps": colormaps()}


def patches_payload(fitted: Fitted, weight: np.ndarray, bias: np.ndarray) -> dict:
    """The fitted picture and the patch projection (D, 3, P, P) + (D,), so the browser cuts and embeds any patch."""
    gh, gw = fitted.grid
    return {"grid": [gh, gw], "patch": fitted.patch, "image": png_data_url(fitted.image),
            "dim": int(weight.shape[0]), "weight": b64(np.asarray(weight, np.float32).reshape(weight.shape[0], -1)),
            "bias": b64(np.asarray(bias, np.float32)), "colormaps": colormaps()}
