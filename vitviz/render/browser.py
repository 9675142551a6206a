"""What the views drawn in the browser receive: packed once, compact, with the library's own numbers.

Three views run in the browser (``web/*.js`` beside this module): the attention explorer,
the position-similarity map and the patch inspector. This module packs their
data; nothing here imports gradio.

The attention explorer (``web/explorer.js``) draws every map, contour and percentage in the browser, so pointing
at a patch or moving a slider needs no server call. What it receives for one analysis:

- the class token's maps, (L, H + 1, N) float32 with the head mean computed here, so the browser's
  "% of mass / % of patches" are :func:`vitviz.core.attention.mass_mask`'s digit for digit; the fitted picture
  as a PNG;
- per layer, its queries and keys (:class:`vitviz.core.attention.LayerKeys`, 2·H·T·d values: linear in the
  number of patches): the browser computes any patch's row, softmax(q_i·Kᵀ), for every head at pointing time.
  float16 where rows from float16 stay within :data:`vitviz.core.attention.F16_TOLERANCE` of the float32 ones
  (measured when the layer is kept), float32 for sharp layers;
- the head-mean rollout, (N,) float32, only when asked for (it needs every row of every layer: computed from the
  kept queries and keys when its part is first fetched);
- the class maps (:data:`vitviz.analyses.maps.NEED_A_CLASS`: relevance, AttnLRP, LeGrad), (N,) float32 each, for
  the model's top class in this analysis, only when asked for: one more forward and its backwards with the model
  alone (:class:`vitviz.analyses.relevance.ClassMapsProbe`), made when the first of them is fetched and kept for
  the others (:func:`class_maps_of`). A model without classes (DINO) has none, and the payload says so.

The JSON answer is small (but for a first map within :data:`INLINE_BYTES`, which it holds): names of these parts,
served by :func:`explorer_part` under ``/vitviz/explorer/<token>/``
with a long-lived cache (the token names the model's weights, the picture and the short side, keyed with the
server's secret: a part never changes under its name, so the same example in 30 browsers is computed once and each
browser fetches it once).
The first answer lists every layer's keys when together they fit :data:`FIRST_KEYS_BYTES`, else the layer on
screen; another layer's keys are fetched when first needed. When the server no longer holds the analysis (it
restarted, or another process answers) the browser sends the fitted picture back and gets a new analysis.
"""

from __future__ import annotations

import base64
import re
from functools import lru_cache

import matplotlib
import numpy as np
from PIL import Image

from vitviz.analyses import maps as made
from vitviz.analyses.attention import Analysis, find, rollout
from vitviz.core import owned
from vitviz.core import posembed
from vitviz.core.images import Fitted
from vitviz.core.lru import LRU
from vitviz.models import budget
from vitviz.render import png
from vitviz.render.plotting import DIVERGING
from vitviz.specs.views import COLORMAPS

FIRST_KEYS_BYTES = 4 * 2**20
"""Every layer's queries and keys come with the first answer when together they are under this many bytes (the
embedded model on the cat: 0.28 MiB for its 4 layers); otherwise the first answer has the layer on screen and the
others follow when first looked at (DINO ViT-S/8 on the cat at 224 px: 1.7 MiB per layer)."""
INLINE_BYTES = 256 * 2**10
"""A first map this small (its class-token maps, picture and first keys together: the embedded model's, about
210 kB) comes in the page's answer itself, as the API's always does: the explorer draws it without asking the
server for anything more (the parts' fetches after the answer were most of a tour step's wait)."""
ROUTE = "vitviz/explorer"
"""Where the explorer's parts are served, under the app's root: ``ROUTE/<token>/<part>``."""
PART = re.compile(r"^(cls\.f4|rollout\.f4|image\.png|keys-(\d{1,3})\.f[24]|class-(" + "|".join(made.NEED_A_CLASS)
                  + r")\.f4)$")


def b64(a: np.ndarray) -> str:
    """Little-endian bytes of a contiguous array, base64."""
    return base64.b64encode(raw(a)).decode()


def raw(a: np.ndarray) -> bytes:
    """Little-endian bytes of an array, C order."""
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


@lru_cache(maxsize=1)
def colormaps() -> dict[str, str]:
    """matplotlib's 256-entry tables of the offered colormaps and the signed one, (256, 3) uint8 each."""
    return {name: b64((matplotlib.colormaps[name](np.arange(256))[:, :3] * 255).round().astype(np.uint8))
            for name in COLORMAPS + (DIVERGING,)}


def png_bytes(rgb: np.ndarray) -> bytes:
    """(H, W, 3) uint8 -> PNG, compressed lightly (:func:`vitviz.render.png.encode`): it is sent once per analysis
    and drawn under the browser's maps, so its time counts and a few percent more bytes do not."""
    return png.encode(Image.fromarray(rgb))


def png_data_url(rgb: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode()


def _dt(a: np.ndarray) -> str:
    return "f4" if a.dtype == np.float32 else "f2"


def key_parts(a: Analysis) -> list[str]:
    """The part name of each layer's queries and keys (``keys-<layer>.<f4|f2>``, layers from 0)."""
    return [f"keys-{i}.{_dt(k.q)}" for i, k in enumerate(a.maps.keys)]


def layer_bytes(a: Analysis, layer: int) -> int:
    """Bytes of one layer's queries and keys as they travel."""
    return a.maps.keys[layer].nbytes if a.maps.keys else 0


def keys_bytes(a: Analysis) -> int:
    """Bytes of the largest layer's queries and keys as they travel."""
    return max((k.nbytes for k in a.maps.keys), default=0)


def first_layers(a: Analysis, start: int) -> list[int]:
    """The layers (from 0) whose keys the first answer brings: all of them when within :data:`FIRST_KEYS_BYTES`."""
    if not a.maps.keys:
        return []
    whole = sum(k.nbytes for k in a.maps.keys)
    return list(range(a.maps.layers)) if whole <= FIRST_KEYS_BYTES else [start]


def attention_payload(a: Analysis, values: dict, fields: dict, inline: bool = False) -> dict:
    """What the explorer draws, opening on the Attention view's settings ``values`` (as used).

    Keys: token, model, grid (gh, gw), patch, layers, heads, prefix, tokens (T), head_dim (d); ``parts``: the
    names of the data (cls: (L, H + 1, N) float32, the last of the H + 1 being the head mean; rollout: (N,) float32;
    image: the fitted picture, PNG; keys: per layer, q then k, each (H, T, d), float32 or float16 as the name says,
    q already scaled; rollout: computed when first fetched); ``first``: the layers whose keys come with the first
    map; ``base``: where the parts are
    served (``ROUTE/<token>/``); ``state`` (the settings the explorer holds: layer counted from 1, head with -1 for
    the mean, keep, alpha, cmap, query as [row, col] or None); ``fields`` (for each of them its link key, and for
    numbers their range and step: the declaration, so the browser offers the same range as everything else);
    colormaps; ``bytes``: what the first map needs, in bytes (:func:`first_bytes`). With ``inline`` (the API's
    answer), or when they are within :data:`INLINE_BYTES`, ``data`` also holds those parts (the class token's
    maps, the picture and the first layers' keys), base64 (the image as a data URL), so the answer stands alone.
    """
    maps = a.maps
    start = int(np.clip(int(values["layer"]), 1, maps.layers)) - 1
    first = first_layers(a, start)
    inline = inline or first_bytes(a, first) <= INLINE_BYTES
    with budget.reserve(payload_bytes(a, len(first) if inline else 0), "packing the explorer's data"):
        return _payload(a, values, fields, start, first, inline)


def first_bytes(a: Analysis, first: list[int]) -> int:
    """Bytes of what the first map needs: the class token's maps with the head mean, the picture's PNG and the
    ``first`` layers' queries and keys."""
    maps = a.maps
    return (maps.layers * (maps.heads + 1) * maps.cls.shape[-1] * 4 + len(_png(a.token, a.fitted.image))
            + sum(layer_bytes(a, i) for i in first))


def payload_bytes(a: Analysis, inline_layers: int) -> int:
    """Estimated peak bytes of packing a payload: the picture's PNG (encoding holds about three copies of it), and
    with ``inline_layers`` layers of keys in the answer (the API's), each part, its copy and its base64 text (4/3),
    twice over for the JSON the server then writes."""
    maps = a.maps
    inline = (maps.cls.nbytes * (maps.heads + 1) // maps.heads + inline_layers * keys_bytes(a)
              + a.fitted.image.nbytes) if inline_layers else 0
    return 3 * a.fitted.image.nbytes + int(inline * (1 + 4 / 3) * 2)


def explorer_template(values: dict, fields: dict, layers: int | None = None) -> dict:
    """What the explorer needs besides an analysis's data: ``state`` (the settings it opens on, the layer counted
    from 1, within ``layers`` when given), ``fields`` (each held setting's link key, range, step, default, words and
    choices: the declaration) and ``colormaps``. The server's payloads and the device path's manifests carry it."""
    query = values.get("query")
    layer = int(values["layer"]) if layers is None else int(np.clip(int(values["layer"]), 1, layers))
    state = {"layer": layer, "head": int(values["head"]), "keep": float(values["keep"]),
             "alpha": float(values["alpha"]), "cmap": values["cmap"], "query": None if query is None else list(query)}
    return {"state": state,
            "fields": {name: {"link": f.link, "lo": f.lo, "hi": f.hi, "step": f.step, "default": f.default,
                              "words": dict(f.words), "choices": list(f.options()) if f.kind == "choice" else None}
                       for name, f in fields.items()},
            "colormaps": colormaps()}


def _payload(a: Analysis, values: dict, fields: dict, start: int, first: list[int], inline: bool) -> dict:
    maps = a.maps
    k0 = maps.keys[0] if maps.keys else None
    out = {
        "token": a.token, "model": a.runner.spec.key, "grid": list(maps.grid), "patch": maps.patch,
        "layers": maps.layers, "heads": maps.heads, "prefix": maps.prefix,
        "tokens": maps.prefix + maps.cls.shape[-1], "head_dim": 0 if k0 is None else int(k0.q.shape[-1]),
        "parts": {"cls": "cls.f4", "rollout": "rollout.f4", "image": "image.png", "keys": key_parts(a)},
        "class_maps": class_maps_payload(a),
        "first": first, "base": f"{ROUTE}/{a.token}/",
        **explorer_template({**values, "layer": start + 1}, fields),
    }
    out["bytes"] = first_bytes(a, first)
    if inline:
        data = {"cls.f4": b64(np.frombuffer(part(a, "cls.f4"), np.uint8))}
        data |= {key_parts(a)[i]: b64(np.frombuffer(part(a, key_parts(a)[i]), np.uint8)) for i in first}
        data["image.png"] = "data:image/png;base64," + base64.b64encode(_png(a.token, a.fitted.image)).decode()
        out["data"] = data
    return out


def part(a: Analysis, name: str) -> bytes:
    """One part of an analysis's explorer data, as bytes (see :func:`attention_payload`); ValueError for a name
    that is not a part of it."""
    m = PART.match(name)
    if m is None:
        raise ValueError(f"{name!r} is not a part of the explorer's data")
    maps = a.maps
    if name == "image.png":
        return _png(a.token, a.fitted.image)
    if name == "rollout.f4":
        return raw(rollout(a, "mean").astype(np.float32).ravel())
    if m.group(3):
        got = class_maps_of(a)
        if m.group(3) not in got:
            raise KeyError(f"this analysis has no part {name!r}")
        return raw(got[m.group(3)])
    if name == "cls.f4":
        means = np.stack([maps.cls_map(i).ravel() for i in range(maps.layers)])[:, None]  # the library's head mean
        return raw(np.concatenate([maps.cls, means], axis=1).astype(np.float32))
    layer = int(m.group(2))
    if layer >= len(maps.keys) or name != key_parts(a)[layer]:
        raise KeyError(f"this analysis has no part {name!r}")
    k = maps.keys[layer]
    return raw(k.q) + raw(k.k)


def top_class(a: Analysis) -> int | None:
    """The class with the largest logit in the analysis's forward (the first of equal ones), None without classes."""
    logits = a.maps.logits
    return None if logits is None else int(np.argmax(np.asarray(logits).reshape(-1)))


def class_maps_payload(a: Analysis) -> dict:
    """What the explorer's strip says of the class maps: ``names`` (:data:`vitviz.analyses.maps.NEED_A_CLASS`),
    ``labels`` (as the page writes them), ``parts`` (name -> part), ``target`` and ``class`` (the top class, its
    index and label; both None for a model without classes: the strip says there is no class to explain) and
    ``left_out`` (name -> why, for a map this model cannot have: AttnLRP on layers its rules do not cover)."""
    from vitviz.models import hooks
    from vitviz.specs.views import MAP_LABELS

    target = top_class(a)
    why = a.runner.read(hooks.lrp_refusal) if target is not None else None
    return {"names": list(made.NEED_A_CLASS), "labels": {n: MAP_LABELS.get(n, n) for n in made.NEED_A_CLASS},
            "parts": {n: f"class-{n}.f4" for n in made.NEED_A_CLASS}, "target": target,
            "class": None if target is None else a.runner.labels[target] if a.runner.labels else f"class {target}",
            "left_out": {"attnlrp": why} if why and "attnlrp" in made.NEED_A_CLASS else {}}


_CLASS_MAPS: LRU[dict] = owned.keep("browser.class_maps", "results", LRU(32, 32 * 2**20),
                                    "the explorer's class maps, per analysis")


def class_maps_of(a: Analysis) -> dict[str, np.ndarray]:
    """The class maps of the analysis's picture as the explorer draws them: name -> (N,) float32, for its top
    class (:func:`top_class`), from one :class:`vitviz.analyses.relevance.ClassMapsProbe` on the analysis's own
    input (its fitted picture at its side), made once per analysis however many parts are asked for at once;
    empty for a model without classes."""
    from vitviz.analyses import relevance

    def make() -> dict[str, np.ndarray]:
        target = top_class(a)
        if target is None:
            return {}
        c = a.runner.run(relevance.ClassMapsProbe(a.maps.prefix, target=target), a.runner.normalise(a.fitted.image))
        return {k: v.astype(np.float32) for k, v in c.maps.items() if k in made.NEED_A_CLASS}

    return _CLASS_MAPS.get_or_make(a.token, make)


_PNGS: LRU[bytes] = owned.keep("browser.pngs", "results", LRU(32, 64 * 2**20, len), "fitted pictures as PNG parts")


def _png(token: str, rgb: np.ndarray) -> bytes:
    """The fitted picture as PNG, encoded once per analysis (the first answer counts its bytes, then it is served)."""
    got = _PNGS.get(token)
    return got if got is not None else _PNGS.put(token, png_bytes(rgb))


def explorer_part(token: str, name: str) -> tuple[bytes, str] | None:
    """The bytes and media type of part ``name`` of the analysis ``token`` (what ``ROUTE/<token>/<name>`` serves),
    or None when the server does not hold that analysis (any more) or the analysis has no such part (a layer it
    does not have, keys in the other precision). Reserves the part's size from the server-wide budget while it is
    made (ValueError when the budget stays full)."""
    if not PART.match(name):
        return None
    a = find(str(token))
    if a is None:
        return None
    maps = a.maps
    if PART.match(name).group(3):  # the model runs: its probe reserves its own estimate, with the model alone
        try:
            return part(a, name), "application/octet-stream"
        except KeyError:
            return None
    size = 2 * max(keys_bytes(a), maps.cls.nbytes * (maps.heads + 1) // maps.heads, a.fitted.image.nbytes)
    with budget.reserve(size, "a part of the explorer's data"):
        try:
            return part(a, name), ("image/png" if name.endswith(".png") else "application/octet-stream")
        except KeyError:
            return None


def inside_payload(fitted: Fitted, record, head: int, query: int, cmap: str) -> dict:
    """One head of one layer for the 'inside one head' view, so the browser redoes any query's arithmetic.

    ``record`` is a :class:`vitviz.analyses.heads.LayerRecord`. Keys: grid, prefix, patch, layer (from 0), head,
    query (the token the settings chose), scale, d, tokens (T), image (PNG data URL of the fitted picture), and
    q, k, v, out: that head's (T, d) float32 queries, keys, values and its output in the model (before the output
    projection), base64: exactly the numbers :func:`vitviz.analyses.heads.trace` uses, so the browser's scores,
    softmax and weighted sum equal the library's and are checked against the model's own output.
    """
    h = int(head)
    parts = {name: b64(getattr(record, attr)[h].float().numpy().astype(np.float32))
             for name, attr in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "heads_out"))}
    gh, gw = record.grid
    return {"grid": [gh, gw], "prefix": record.prefix, "patch": fitted.image.shape[0] // gh, "layer": record.layer,
            "head": h, "query": int(query), "scale": float(record.scale), "d": int(record.q.shape[-1]),
            "tokens": int(record.q.shape[1]), "image": png_data_url(fitted.image), "cmap": cmap,
            "colormaps": colormaps(), **parts}


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
