"""Write the vectors the page scripts' twins are checked against (tests/js/twins.test.mjs), computed by the library.

    python tests/js/vectors.py OUT.json

Each section holds inputs and what vitviz (or the library it follows: Python's format, matplotlib, Pillow, torch)
makes of them, with the tolerance each comparison may use, derived from float64's or float32's precision.
"""
from __future__ import annotations

import base64
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

EPS64 = 2.0 ** -53  # float64's unit roundoff
EPS32 = 2.0 ** -24  # float32's


def _num(v: float) -> float | str:
    """A float JSON can carry and JavaScript's Number() reads back exactly."""
    return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def numbers() -> dict:
    """Python's format with d decimals and as a percentage, on shares k/n (where ties occur), numbers that look like
    ties but are not, negatives, zero's sign, huge and tiny values and the non-finite ones."""
    from fractions import Fraction

    shares = sorted({float(Fraction(k, n)) for n in range(1, 97) for k in range(n + 1)})
    odd = [0.125, 0.375, 2.5, 3.5, 12.5, 2.675, 0.145, 1.005, 1e-9, 123456.789, 1e21, -0.0, -2.5, -0.125,
           5e-324, 0.5, 1.5, float("nan"), float("inf"), float("-inf")]
    values = shares + odd + [-v for v in shares[1::5]]
    rows = []
    for v in values:
        rows.append({"v": _num(v), "fixed": [format(v, f".{d}f") for d in range(4)],
                     "percent": [format(v, f".{d}%") for d in range(3)]})
    return {"rows": rows}


def halves() -> dict:
    """float16 bits (normals, subnormals, zeros of both signs, infinities, NaN) and numpy's float32 of each."""
    bits = np.concatenate([np.arange(0, 0x10000, 97, dtype=np.uint16),
                           np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00],
                                    dtype=np.uint16)])
    wide = bits.view(np.float16).astype(np.float32)
    return {"b64": _b64(bits), "f32_b64": _b64(wide), "count": int(bits.size)}


def colours() -> dict:
    """matplotlib's colormap lookup: the table entry a value takes between lo and hi (clipped), found by comparing
    the colour matplotlib gives the value with its 256 entries."""
    import matplotlib
    from matplotlib.colors import Normalize

    cmap = matplotlib.colormaps["inferno"]
    table = cmap(np.arange(256))
    cases = []
    rng = np.random.default_rng(5)
    for lo, hi in ((0.0, 1.0), (-0.3, 0.7), (0.001, 0.0123), (2.0, 2.0)):
        vals = np.concatenate([lo + (hi - lo) * np.arange(257) / 256, rng.uniform(lo - 0.2, hi + 0.2, 200),
                               [lo, hi, np.nextafter(hi, -np.inf), np.nextafter(lo, np.inf)]])
        rgba = cmap(Normalize(lo, hi, clip=True)(vals))
        index = [int(np.flatnonzero((table == c).all(1))[0]) for c in rgba]
        cases.append({"lo": lo, "hi": hi, "values": vals.tolist(), "index": index})
    return {"cases": cases}


def mass_masks() -> dict:
    """vitviz.core.attention.mass_mask on float32 rows: random, with many ties, one-hot, all zero."""
    from vitviz.core.attention import mass_mask

    rng = np.random.default_rng(7)
    rows = [rng.random(n).astype(np.float32) for n in (1, 2, 17, 196, 400)]
    rows += [np.round(rng.random(196) * 4).astype(np.float32) / 4, np.eye(1, 64, 9, dtype=np.float32)[0],
             np.zeros(49, np.float32), (rng.random(1176) ** 8).astype(np.float32)]
    cases = []
    for row in rows:
        for keep in (0.1, 0.3, 0.6, 0.9, 0.95):
            mask, mass, frac = mass_mask(row, keep)
            cases.append({"b64": _b64(row), "keep": keep, "mask": np.flatnonzero(mask).tolist(), "mass": mass,
                          "frac": frac})
    return {"cases": cases}


def query_rows() -> dict:
    """vitviz.core.attention.LayerKeys.rows for chosen query patches (prefix keys dropped, the head mean after the
    heads). Both sides sum the same float64 products in different orders: each entry may differ by the rounding of
    a d-term dot product carried through the softmax, then by float32's rounding of the page's result."""
    from vitviz.core.attention import LayerKeys

    rng = np.random.default_rng(11)
    cases = []
    for heads, prefix, n, d in ((3, 1, 16, 8), (2, 5, 12, 16), (6, 1, 49, 64)):
        t = prefix + n
        q = (rng.standard_normal((heads, t, d)) * 2).astype(np.float32)
        k = rng.standard_normal((heads, t, d)).astype(np.float32)
        keys = LayerKeys(q, k, 1.0)
        for qi in (0, n // 2, n - 1):
            r = keys.rows(np.array([prefix + qi]))[:, 0, prefix:]  # (H, N) float64
            rows = np.concatenate([r, r.mean(0, keepdims=True)])
            mags = np.abs(q[:, prefix + qi].astype(np.float64)) @ np.abs(k.astype(np.float64)).transpose(0, 2, 1)
            dot = 2 * d * EPS64 * mags.max()  # both sides' dot products, each within d·u·Σ|q||k|
            # through exp and the sum, then float32's rounding (relative, and half its smallest step below its normals)
            bound = rows * (2 * dot + 4 * t * EPS64) + EPS32 * rows + 2.0 ** -150
            cases.append({"heads": heads, "tokens": t, "d": d, "prefix": prefix, "qi": qi, "q_b64": _b64(q),
                          "k_b64": _b64(k), "rows": rows.ravel().tolist(), "bound": bound.ravel().tolist()})
    return {"cases": cases}


def head_traces() -> dict:
    """vitviz.analyses.heads.trace (one head's scores, softmax weights and weighted sum of values, float64) and the
    largest gap to the model's own output, with the float64 rounding each may differ by."""
    import torch

    from vitviz.analyses.heads import trace

    rng = np.random.default_rng(13)
    cases = []
    for t, d, scale in ((17, 8, 8 ** -0.5), (50, 64, 0.125)):
        q, k, v = (rng.standard_normal((1, t, d)).astype(np.float32) for _ in range(3))
        out = rng.standard_normal((1, t, d)).astype(np.float32)
        record = SimpleNamespace(heads=1, layer=0, prefix=1, grid=(1, t - 1), scale=scale,
                                 q=torch.from_numpy(q), k=torch.from_numpy(k), v=torch.from_numpy(v),
                                 attn=torch.zeros(1, t, t), heads_out=torch.from_numpy(out))
        for query in (0, t // 2, t - 1):
            tr = trace(record, 0, query)
            mags = (np.abs(k[0].astype(np.float64)) @ np.abs(q[0, query].astype(np.float64))) * scale
            score_bound = 2 * d * EPS64 * mags + 2 * EPS64 * np.abs(tr.scores)
            w = tr.weights
            weight_bound = w * (4 * score_bound.max() + 4 * t * EPS64)
            mixed_bound = weight_bound @ np.abs(v[0].astype(np.float64)) + 2 * t * EPS64 * (w @ np.abs(v[0]))
            cases.append({"tokens": t, "d": d, "scale": scale, "t": query, "q_b64": _b64(q), "k_b64": _b64(k),
                          "v_b64": _b64(v), "out_b64": _b64(out), "scores": tr.scores.tolist(),
                          "score_bound": score_bound.tolist(), "weights": w.tolist(),
                          "weight_bound": weight_bound.tolist(), "mixed": tr.mixed.tolist(),
                          "mixed_bound": mixed_bound.tolist(),
                          "error": float(np.abs(tr.mixed - out[0, query]).max())})
    return {"cases": cases}


def logits() -> dict:
    """A softmax of logits and the five likeliest classes, as torch computes them in float64."""
    import torch

    rng = np.random.default_rng(17)
    z = (rng.standard_normal(100) * 4).astype(np.float32)
    p = torch.softmax(torch.from_numpy(z).double(), 0).numpy()
    labels = [f"label {i}" for i in range(100)]
    order = np.argsort(-p, kind="stable")[:5]
    return {"logits": z.astype(np.float64).tolist(), "labels": labels, "probs": p.tolist(),
            "bound": (p * 4 * 100 * EPS64).tolist(), "top5": [[labels[i], float(p[i])] for i in order]}


def pictures() -> dict:
    """Pillow's resize (bicubic, bilinear; up, down, one side only) and the models' input policies: the fitted
    picture and the normalised float32 input the server makes (vitviz.models.runner, vitviz.models.device's
    preprocessing), for odd-sized pictures."""
    from PIL import Image

    from vitviz.core.images import fit_to_patches
    from vitviz.models import cache, device
    from vitviz.specs import registry

    rng = np.random.default_rng(19)
    resizes = []
    for (h, w), (oh, ow), name in (((23, 37), (40, 64), "bicubic"), ((61, 97), (19, 31), "bicubic"),
                                   ((61, 97), (19, 31), "bilinear"), ((30, 30), (30, 45), "bicubic"),
                                   ((45, 20), (13, 20), "bilinear")):
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        filt = Image.BICUBIC if name == "bicubic" else Image.BILINEAR
        want = np.asarray(Image.fromarray(rgb).resize((ow, oh), filt, reducing_gap=None))
        resizes.append({"w": w, "h": h, "ow": ow, "oh": oh, "name": name, "b64": _b64(rgb), "want_b64": _b64(want)})
    runner = cache.get_model(registry.OFFLINE_KEY)
    side = runner.resolution
    fits = []
    for h, w in ((53, 71), (90, 41), (64, 64)):
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        m = device.preprocessing(runner, side) | {"patch": runner.spec.patch}
        assert m["policy"] == "checkpoint"
        fitted = runner.fit_at(rgb, side).image
        fits.append({"m": m, "w": w, "h": h, "b64": _b64(rgb), "rgb_b64": _b64(fitted),
                     "x_b64": _b64(runner.normalise(fitted).numpy()), "H": fitted.shape[0], "W": fitted.shape[1]})
        keep = m | {"policy": "keep", "interpolation": "bicubic", "resize": side, "crop_pct": 1.0}
        fitted = fit_to_patches(rgb, side, runner.spec.patch, "keep").image  # a model without classes fits so
        fits.append({"m": keep, "w": w, "h": h, "b64": _b64(rgb), "rgb_b64": _b64(fitted),
                     "x_b64": _b64(runner.normalise(fitted).numpy()), "H": fitted.shape[0], "W": fitted.shape[1]})
    from vitviz.models.runner import image_key

    keys = []
    for h, w in ((8, 8), (33, 17)):
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        keys.append({"h": h, "w": w, "b64": _b64(rgb), "key": image_key(rgb)})
    return {"resizes": resizes, "fits": fits, "keys": keys}


def lessons() -> dict:
    """Lessons as vitviz/tools/lesson.py writes them (title, own picture, captions with brackets) and what its parser
    reads back: the lesson maker's Markdown must be the same text."""
    from vitviz.tools import lesson

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
    cases = []
    for title, steps, picture in [
            ("Patches then attention", [("Cut into patches.", "?tab=patches&patch=16"),
                                        ("Where [CLS] looks.", "?tab=attention&image=lesson&layer=6")], png),
            ("Ünïcode — and a long title " * 3, [("One step", "?tab=positions")], None)]:
        made = lesson.Lesson(title, tuple(lesson.Step(c, k) for c, k in steps), picture)
        text = lesson.write(made)
        back = lesson.parse(text)
        cases.append({"title": title, "steps": [{"caption": c, "link": k} for c, k in steps],
                      "picture": made.picture_url, "markdown": text,
                      "parsed_steps": [{"caption": s.caption, "link": s.link} for s in back.steps]})
    return {"cases": cases, "own": lesson.OWN, "limits": lesson.limits(), "checks": lesson_checks()}


def lesson_checks() -> list[dict]:
    """Lessons a teacher (or a prank) may open, each with what lesson.parse makes of it: its title, steps and
    picture, or its message. The page's reader (lib/lessons.mjs's parseLesson) must say the same (issue 68 item 15:
    the reader said "Opened steps41.md: 41 steps", then the bar refused it)."""
    from vitviz.tools import lesson

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
    own = f"![the lesson's picture](data:image/png;base64,{png})"
    step = "1. [Cut into patches.](?tab=patches&patch=16)"
    many = lambda n, caption="A step.": "# Many\n" + "\n".join(f"{i}. [{caption}](?tab=patches&step={i})"
                                                              for i in range(1, n + 1))
    texts = {
        "forty steps": many(40), "41 steps": many(41),
        "600-character caption": many(1, "c" * 600), "601-character caption": many(1, "c" * 601),
        "600 emoji caption": many(1, "\U0001F600" * 600), "601 emoji caption": many(1, "\U0001F600" * 601),
        "SVG picture line": "# Drawn\n\n![p](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+)\n" + step,
        "javascript: step": "# Prank\n1. [Click me](javascript:alert(document.cookie))\n",
        "a link with a space": "# t\n1. [a](?tab=patches&image=my cat)\n",
        "bad base64 (Incorrect padding)": f"# Cut\n![p](data:image/png;base64,{png[:-3]})\n{step}\n",
        "raw data URL": f"# Raw\n![p](data:image/png,{png})\n{step}\n",
        "a picture linked, not carried": f"# Linked\n![p](https://example.org/cat.png)\n{step}\n",
        "a second picture": f"# Two\n{own}\n{own}\n{step}\n",
        "its own picture": f"# Mine\n\n{own}\n\n{step}\n2. [Mine.](?tab=patches&image=lesson)\n",
        "text over 32 KiB": "# Long\n" + "x" * (32 * 1024) + "\n" + step,
        "text of 32 KiB and a half": "# L\n" + "x" * (32 * 1024 + 512 - 4 - 1) + "\n",
        "no step": "# Only a title\n\nSome words.\n",
        "nothing": "", "CRLF lines": f"# Windows\r\n\r\n{step}\r\n2. [b](?tab=positions)\r\n",
        "a byte order mark": "\ufeff# Notepad\n" + step,
        "Unicode line breaks": f"# Breaks\u2028{step}\u20292. [b](?tab=positions)\x85\r3. [c](?tab=forward)",
        "Unicode spaces": f"#  Spaced\u3000\n\u3000{step}\u2003\n\x1f2. [ b\xa0](?tab=positions)\t",
        "a space JavaScript has and Python not": f"# t\n\ufeff{step}\n",
        "Arabic-Indic digits": "# t\n\u0661. [a](?tab=patches)\n",
        "a second title": f"# One\n{step}\n# Two\n",
        "a bullet and a parenthesis": "# t\n- [a](?tab=patches)\n2) [b](?tab=positions)\n* [c](?)\n",
        "brackets in a caption": "# t\n1. [[CLS] looks (here)](?tab=attention&layer=6)\n",
        "a picture line cut": f"# t\n![p](data:image/png;base64,{png}\n{step}\n",
    }
    out = []
    for name, text in texts.items():
        try:
            made = lesson.parse(text)
        except ValueError as err:
            out.append({"name": name, "text": text, "error": str(err)})
            continue
        out.append({"name": name, "text": text, "title": made.title, "picture": made.picture_url,
                    "steps": [{"caption": s.caption, "link": s.link} for s in made.steps]})
    return out


def addresses() -> dict:
    """The link keys of every setting and their tab (what the server gives page.js), and the tour's step links:
    the page's address twin (lib/address.mjs) must read each into its state and write it back with the same
    parameters, which the server's opener then reads as it reads the link."""
    from vitviz.app.links import tab_keys
    from vitviz.tools import lesson

    tour = lesson.tour()
    links = [s.link + f"&lesson=tour&step={i}" for i, s in enumerate(tour.steps, 1)]
    return {"tab_keys": tab_keys(), "links": links}


def forward() -> dict:
    """The offline model's device graph on a photo and on a scene (ONNX Runtime, as the page runs it), with what the
    server's Forward-pass view makes of the same picture: the stages at the picture's sizes, the first sentence,
    the lens table's classes (of the graph's own lens), each flattened patch's norm; and names and ties for the
    shortening and ordering helpers."""
    import onnxruntime as ort

    from vitviz import assets
    from vitviz.analyses.forward import forward_pass
    from vitviz.core.images import load_rgb
    from vitviz.models import cache, device
    from vitviz.specs import registry
    from vitviz.views import forward as view

    runner = cache.get_model(registry.OFFLINE_KEY)
    m = device.manifest(runner, 224)
    sess = ort.InferenceSession(str(assets.TINY / m["file"]), providers=["CPUExecutionProvider"])
    cases = []
    for name in ("cat.png", "scene_ring.png"):
        rgb = load_rgb(assets.example(name.split(".")[0]), 640)
        _fitted, fp = forward_pass(runner, rgb, 224)
        x = device.reference_input(runner, rgb, 224)
        out = dict(zip(m["outputs"], sess.run(None, {"pixels": x, "pos": device.position_embedding(runner, fp.grid)})))
        z = out["logits"].reshape(-1).astype(np.float64)
        probs = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        shown = view.show_forward_pass(rgb, {"model": runner.spec.key, "resolution": 224, "layer": 4,
                                             "cmap": "viridis"})
        cases.append({
            "x_b64": _b64(x), "H": int(x.shape[2]), "W": int(x.shape[3]), "grid": list(fp.grid),
            "outputs": {k: _b64(v.astype(np.float32)) for k, v in out.items() if not k.startswith(("q", "k", "cls"))},
            "patch_norms": fp.stages[1].glimpse.reshape(-1).astype(np.float64).tolist(),
            "stages": [{"name": st.name, "shape": list(st.shape), "axes": list(st.axes)} for st in fp.stages],
            "summary": shown.texts["text"], "chosen": view.lens_classes(out["lens"], probs), "probs": probs.tolist(),
            "target": int(np.argmax(probs)),
        })
    plan = view.device_plan(runner, 224, m["width"])
    names = ["tabby, tabby cat", "Granny Smith", "a very long class name without commas", "x", "",
             "seventeen letters", "eighteen letters!!", "nineteen letters!!!"]
    ties = [[0.1, 0.3, 0.3, 0.2, 0.3, 0.0], [1.0, 1.0, 1.0], [0.5, -1.0, 2.0, 2.0, -1.0, 0.5, 7.0]]
    return {"plan": plan, "model": runner.spec.key, "patch": runner.spec.patch, "width": m["width"],
            "layers": runner.depth, "prefix": runner.spec.prefix, "cases": cases,
            "names": [[n, view._short(n), view._short(n, 24)] for n in names],
            "ties": [[t, np.argsort(-np.array(t), kind="stable")[:5].tolist()] for t in ties]}


def class_maps() -> dict:
    """vitviz.analyses.relevance.top_patch on float32 maps as the explorer receives them (random, signed as AttnLRP's,
    with ties, nothing positive, all zero), with the float64 rounding a sum of n terms in another order may differ
    by; and render/browser.py's class_maps_payload for a model with classes, one whose AttnLRP is refused and one
    without classes."""
    from vitviz.analyses.relevance import top_patch
    from vitviz.render.browser import class_maps_payload

    rng = np.random.default_rng(13)
    rows = [(rng.random(64).astype(np.float32), (8, 8)), (rng.standard_normal(196).astype(np.float32), (14, 14)),
            (np.round(rng.random(48) * 3).astype(np.float32), (6, 8)), (-rng.random(12).astype(np.float32), (3, 4)),
            (np.zeros(9, np.float32), (3, 3)), ((rng.random(784) ** 6).astype(np.float32), (28, 28))]
    cases = []
    for row, grid in rows:
        r, c, share = top_patch(row, grid)
        total = float(np.clip(row.astype(np.float64), 0, None).sum())
        cases.append({"b64": _b64(row), "gw": grid[1], "row": r, "col": c, "share": share,
                      "bound": 2 * len(row) * EPS64 * share + 2.0 ** -1074 if total > 0 else 0.0})

    def analysis(logits, labels, refusal=None):
        runner = SimpleNamespace(labels=labels, read=lambda fn: refusal)
        return SimpleNamespace(maps=SimpleNamespace(logits=logits, prefix=1), runner=runner)

    payloads = {"classes": class_maps_payload(analysis(np.array([[0.1, 2.0, -1.0]]), ["ring", "star", "cross"])),
                "refused": class_maps_payload(analysis(np.array([[3.0, 2.0]]), None, "AttnLRP: not these layers.")),
                "none": class_maps_payload(analysis(None, None))}
    return {"cases": cases, "payloads": payloads}


def write(path: Path) -> None:
    """Every section, as one JSON file."""
    sections = {f.__name__: f() for f in (numbers, halves, colours, mass_masks, query_rows, head_traces, logits,
                                          pictures, lessons, addresses, forward, class_maps)}
    path.write_text(json.dumps(sections))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
