"""Write the vectors the page's store (vitviz/render/web/app/store.mjs) is checked against (tests/js/store.test.mjs).

    python tests/js/store_vectors.py OUT.json

The spec the store is made from (``vitviz.app.panels.page_spec()``); for every link key a set of texts a link may
carry (in range, out of range, halves, non-numbers, words, unknown choices, cells, Python's and JavaScript's
different whitespace) with what the library makes of each (``Field.from_link``, written back as the link writes it,
or refused); whole addresses (the shipped lessons' steps among them) with the state they read to and the address
written back; and floats with Python's ``f"{v:g}"``.
"""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from urllib.parse import parse_qsl

PAGE_KEYS = ("tab", "image", "open", "show", "lesson", "step", "projector", "contrast", "device")
MAX_CELLS = 4096


def _num(v: float) -> float | str:
    """A float JSON can carry (the non-finite ones by name, as JavaScript's Number() reads them)."""
    return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))


def fields() -> dict:
    """Every link key's field object, as the page's records declare it (the first record naming the key)."""
    from vitviz.views import RECORDS

    out = {}
    for r in RECORDS.values():
        for f in r.view.settings():
            if f.link and f.link not in out:
                out[f.link] = f
    return out


def number_texts(f) -> list[str]:
    """Texts for a number: bounds, inside, outside, halves (Python rounds them to even), spellings float() reads
    and JavaScript's Number() reads differently, and non-numbers."""
    lo, hi = f.lo, f.hi
    mid = (lo + hi) / 2
    values = [lo, hi, mid, lo - 1, hi + 1, hi * 10 + 7, lo - 0.5, lo + 0.5, lo + 1.5, lo + 2.5, hi - 0.5, -hi - 3,
              math.floor(mid) + 0.5, 1e308, -1e308, 0.0]
    texts = [format(v, "g") for v in values] + [repr(float(v)) for v in values[:4]]
    texts += [f"{int(lo)}", f" {int(hi)} ", f"+{int(lo)}", f"{int(lo)}.", f"{int(lo)}e0", f"0{int(lo)}",
              "1_0", "1__0", "_1", "1_", "0x10", "0b1", "1e", "e1", ".", "", " ", "abc", "inf", "-inf", "nan", "NaN",
              "Infinity", "1e400", "-0", "-0.0", "toString", "__proto__", "constructor", "hasOwnProperty",
              f"\u3000{int(lo)}\u3000", f"{int(lo)}\x1f", f"\x85{int(lo)}", f"\ufeff{int(lo)}", f"{int(lo)}\xa0",
              "3,4", "mean", " mean ", "MEAN"]
    if f.kind == "float":
        rng = random.Random(f.link)
        texts += [repr(rng.uniform(lo, hi)) for _ in range(12)]
        texts += ["0.30000000000000004", "1e-7", "0.000123456789", "1024.125", "1024.375", "9999.995", "123456.5",
                  "0.1", "0.60", "1.5e-5", "5e-324"]
    if f.multiple:
        texts += [str(int(lo) + k) for k in range(1, 2 * f.multiple + 1)] + [str(int(hi) - 1), str(int(hi) + 3)]
    return texts


def choice_texts(f) -> list[str]:
    """Texts for a choice: each value, each changed a little (spaces, case), an unknown one, and for a choice of
    whole numbers the spellings float() reads as one of them."""
    opts = f.options()
    texts = [str(o) for o in opts] + [f" {opts[0]}", f"{opts[0]} ", str(opts[-1]).upper(), str(opts[0]).lower(),
                                       "bogus", "", "learned", "toString", "__proto__"]
    if all(isinstance(o, int) and not isinstance(o, bool) for o in opts):
        o = opts[0]
        texts += [f"{o}.0", f"0{o}", f"+{o}", f"{o}e0", f"{o}.5", f" {o} ", f"{o}_0", "13", "-1", "0x4", "1e400"]
    return texts


BOOL_TEXTS = ["1", "0", "true", "False", "YES", "no", " 1 ", "\u30001", "2", "", "on", "off", "-1", "1.0"]
CELL_TEXTS = ["3,4", "0,0", " 3 , 4 ", "3.0,4", "1e1,2", "-1,2", "-0,2", "1024,0", "1023,1023", "3", "3,4,5", "a,b",
              "", " ", "3;4", "3,4.5", "1_0,2", "3,\u30004", "3 ,4", "inf,1", ",", "3,"]
CELLS_TEXTS = ["1,2;3,4", "3,4;1,2", "1,2;1,2", "1,2;", ";", ";;1,2;;", "", " ", "1,2;x", "1,2 ; 3,4", "10,2;9,3;9,1",
               "1,2;1024,0", "0.0,1.0;2e0,3", ";".join(f"{i // 64},{i % 64}" for i in range(MAX_CELLS)),
               ";".join(f"{i // 64},{i % 64}" for i in range(MAX_CELLS + 1)), "1,2;" * 13000]


def texts_for(f) -> list[str]:
    """The texts tried for field ``f``, each once."""
    kind = {"int": number_texts, "float": number_texts, "choice": choice_texts}
    got = kind[f.kind](f) if f.kind in kind else {"bool": BOOL_TEXTS, "cell": CELL_TEXTS, "cells": CELLS_TEXTS}[f.kind]
    return list(dict.fromkeys([*got, *(w for w in f.words), *(f" {w}" for w in f.words)]))


def reading(f, text: str) -> dict:
    """What the library makes of ``text`` for ``f``: the link's text of ``Field.from_link``'s value (or refused), and
    whether the value moved from the number the text says (out of range, or a half rounded)."""

    try:
        value = f.from_link(text)
    except ValueError:
        return {"in": text, "text": None, "moved": False}
    moved = False
    if f.kind in ("int", "float") and text.strip() not in f.words:
        moved = float(text) != value
    return {"in": text, "text": f.link_text(value), "moved": moved, "value": _json_value(value)}


def _json_value(value):
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, tuple):
        return [list(c) if isinstance(c, tuple) else c for c in value]
    return value


def settings_of(spec: dict, by_key: dict, query: list[tuple[str, str]]) -> tuple[dict, list[str]]:
    """The settings a link's pairs read to, as the library reads each key (refused ones left out, values at the
    page's default left out, compared as values the way ``Field.to_link`` compares), and the keys a notice must name."""
    settings, noticed = {}, []
    for key, text in query:
        if key in PAGE_KEYS:
            continue
        f = by_key.get(key)
        if f is None:
            noticed.append(key)
            continue
        got = reading(f, text)
        if got["text"] is None or got["moved"]:
            noticed.append(key)
        if got["text"] is None:
            continue
        if f.from_link(got["text"]) == f.from_link(spec["keys"][key]["default"]):
            settings.pop(key, None)
        else:
            settings[key] = got["text"]
    return settings, noticed


def address(spec: dict, by_key: dict, link: str) -> dict:
    """A whole address: the state the store must read (tab, picture, settings, open, lesson, step, modes), the keys
    its notices must name, and the pairs it must write back, in the store's order."""
    query = parse_qsl(link.lstrip("?"), keep_blank_values=True)
    q = dict(query)
    tabs = [t["id"] for t in spec["tabs"]]
    tab = q.get("tab") if q.get("tab") in tabs else spec["first"]
    picture = q.get("image") if q.get("image") in spec["examples"] else spec["picture"]
    from vitviz.views import RECORDS

    views = [r.name for r in RECORDS.values() if r.tab == tab]
    sections = [name for r in RECORDS.values() if r.tab == tab for name in r.sections if name]  # parts of a panel
    opened = q.get("open") if q.get("open") in views + sections else None
    settings, noticed = settings_of(spec, by_key, query)
    for key, field in spec["keys"].items():  # a model this server cannot have: its stand-in, held and named
        if "used" in field and key not in q:
            settings[key] = field["used"]
    state = {"tab": tab, "picture": picture, "settings": settings, "open": opened, "show": q.get("show"),
             "lesson": q.get("lesson"), "step": q.get("step"),
             "projector": q.get("projector") == "1", "contrast": q.get("contrast") == "1"}
    pairs = [["tab", tab]] + ([["image", picture]] if picture != spec["picture"] else [])
    pairs += [[k, state[k]] for k in ("open", "show", "lesson", "step") if state[k]]
    pairs += [[k, "1"] for k in ("projector", "contrast") if state[k]]
    pairs += [[k, v] for k, v in settings.items() if spec["keys"][k]["tab"] == tab]
    return {"link": link, "state": state, "noticed": noticed, "pairs": pairs}


def addresses(spec: dict, by_key: dict) -> list[dict]:
    """Hand-made addresses (bad values among good ones, every tab) and every shipped lesson's steps as the lesson
    bar links them (with lesson= and step=)."""
    links = ["", "?tab=attention", "?tab=attention&layer=99&head=mean&source=learned&cmap=bogus&alpha=0.25",
             "?tab=positions&pe=learned&rows=7&cols=40&dim=66&rope_b=1024.125&projector=1",
             "?tab=patches&patch=13&res=300.5&win_row=2&fit=pad&image=cat&contrast=1",
             "?tab=classify&tm_patches=3,4;1,2;1,2&tm_points=21.0&seed=1e12&rank=2&show=top5",
             "?tab=attention&query=+3+,+4+&ih_cls=true&keep=0.95000001&discard=-0&open=inside_head",
             "?tab=vitcnn&de_train=no&hy_side=100&vs_side=63&image=nowhere",
             "?tab=nowhere&layer=4&open=nothing", "?tab=forward&fp_layer=2.5&fp_side=3.5e2&fp_cmap=magma&open=lens"]
    for name, lesson in spec["lessons"].items():
        links += [f"{s['link']}&lesson={name}&step={k}" for k, s in enumerate(lesson["steps"], 1)]
    return [address(spec, by_key, link) for link in links]


def g_floats() -> list[dict]:
    """Floats and Python's f"{v:g}": ties at the sixth digit (dyadic values), values that round up to the next
    power of ten, the bounds of fixed notation, random magnitudes, subnormals, zeros and the non-finite ones."""
    rng = random.Random(69)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 1024.125, 1024.375, -1024.125, 1234565.0, 1234575.0, 999999.5,
              999999.4, 9999995.0, 0.0001, 0.00009999995, 0.0000999999, 1e-5, 123456.0, 1234567.0, 100000.0,
              1e16, 1e21, 1e22, 1e100, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 0.1 + 0.2,
              float("inf"), float("-inf"), float("nan"), 8.0, 224.0, 0.6, 0.95, 10000.0, 12345.65, 0.125, 3.0625]
    values += [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 25) for _ in range(400)]
    values += [rng.randint(1, 2 ** 20) / 2 ** rng.randint(0, 12) for _ in range(300)]  # dyadic: ties occur
    values += [float(rng.randint(10 ** 6, 10 ** 8)) for _ in range(100)]
    return [{"v": _num(v), "g": format(v, "g")} for v in values]


def build() -> dict:
    """Every section."""
    from vitviz.app.panels import page_spec

    spec = page_spec()
    by_key = fields()
    assert set(by_key) == set(spec["keys"]), "page_spec's keys are the records' link keys"
    readings = {key: [reading(f, t) for t in texts_for(f)] for key, f in by_key.items()}
    return {"spec": spec, "readings": readings, "addresses": addresses(spec, by_key), "g": g_floats(),
            "declared": declared_defaults(spec, by_key)}


def declared_defaults(spec: dict, by_key: dict) -> dict:
    """The keys whose page default (a model list's stand-in on a server without its model) is not the declared one,
    with the text ``Field.to_link`` writes for the page default: it leaves out only the declared default, so a link
    names the same model on every server."""
    out = {}
    for key, f in by_key.items():
        shown = spec["keys"][key]["default"]
        written = f.to_link(f.from_link(shown))
        if written is not None:
            out[key] = {"default": shown, "link": written}
    return out


def write(path: Path) -> None:
    path.write_text(json.dumps(build()))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
