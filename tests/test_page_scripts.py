"""The page scripts' twins of library functions (render/web/lib), checked under Node's test runner against vectors
the library writes (tests/js): a twin that drifts fails here in seconds, not only in a browser."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vitviz.render import web

JS = Path(__file__).parent / "js"
NODE = shutil.which("node")


def _vectors_module(name: str = "vectors"):
    """tests/js/<name>.py, which writes the vectors the Node tests read (vectors.py: the library's twins;
    store_vectors.py: the page's store against Field.from_link and the shipped lessons)."""
    spec = importlib.util.spec_from_file_location(f"vitviz_js_{name}", JS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed (.ci/run installs it and fails on this skip)")
def test_the_page_scripts_twins_agree_with_the_library_under_node(tmp_path):
    vectors, store = tmp_path / "vectors.json", tmp_path / "store.json"
    _vectors_module().write(vectors)
    _vectors_module("store_vectors").write(store)
    run = subprocess.run([NODE, "--test", str(JS)], cwd=JS.parent.parent, capture_output=True, text=True, timeout=120,
                         env=os.environ | {"VITVIZ_VECTORS": str(vectors), "VITVIZ_STORE_VECTORS": str(store)})
    declared = sum(len(re.findall(r"^test\(", p.read_text(), re.M)) for p in JS.glob("*.test.mjs"))
    counted = {k: int(v) for k, v in re.findall(r"^# (pass|todo) (\d+)$", run.stdout, re.M)}
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"^ok \d+ - gText writes", run.stdout, re.M), run.stdout[-2000:]  # store.test.mjs ran
    # a test marked todo names a known defect: it is reported, and does not count as passed
    assert declared >= 10 and counted.get("pass", 0) + counted.get("todo", 0) == declared, run.stdout[-2000:]


def test_the_page_gets_each_library_module_as_plain_script():
    """Every exported function of lib/ is in the page's script, with no ES syntax left a function body cannot hold;
    the modules stand alone (the page joins them)."""
    text = web.library()
    exported = [n for name in web.LIB
                for n in re.findall(r"^export (?:function|const) (\w+)", (web.WEB / "lib" / f"{name}.mjs").read_text(),
                                    re.M)]
    assert {"fixed", "massMask", "queryRows", "headTrace", "resample", "prepare", "top5", "appRoot"} <= set(exported)
    for name in exported:
        assert re.search(rf"^(function|const) {name}\b", text, re.M), name
    assert not re.search(r"^\s*(export|import)\b", text, re.M)
    assert web.script("common.js", "explorer.js").startswith(text)


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed (.ci/run installs it and fails on this skip)")
def _printed(program: str):
    """What a Node program printed last, as JSON (it fails the test when Node does)."""
    import json

    run = subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_settle_script_puts_the_openers_values_where_they_go_and_leaves_the_rest():
    """The page-only event that puts a link's settings into the controls (links.settle_script): each value at its
    index (null and false are values too), ``undefined`` (gradio leaves the component as it is) everywhere else;
    an index past the list and text that is no JSON set nothing. Each time, it tells the page that the link's
    settings are in (``vitvizLink.settled``), and runs where the page has no such object."""
    import json

    from vitviz.app.links import settle_script

    cases = {"given": json.dumps({"at": 1.0, "set": {"0": 32, "2": None, "3": False, "9": 1}}),
             "broken": "{not json", "empty": ""}
    program = (f"const f = {settle_script(5)};\n"
               f"const cases = {json.dumps(cases)};\n"
               "const out = {};\n"
               "f('');  // no page object yet: nothing to tell\n"
               "let told = 0; globalThis.vitvizLink = { settled() { told += 1; } };\n"
               "for (const [k, t] of Object.entries(cases)) out[k] = f(t).map((v) => v === undefined ? 'undefined' : v);\n"
               "out.told = told;\n"
               "console.log(JSON.stringify(out));")
    out = _printed(program)
    u = "undefined"
    assert out["given"] == [32, u, None, False, u]
    assert out["broken"] == out["empty"] == [u] * 5
    assert out["told"] == 3


@pytest.mark.parametrize("shift", [0, 2])
def test_the_settle_script_opens_the_doors_a_hand_would_have_opened_and_only_those(shift):
    """A link within the page that changes a control only a hand asks for (a slider's release) opens that event's
    door, once the values are in: not when one of the event's change triggers changed too (that asks it anyway),
    not when the value is the one shown (a number equal to its text counts as the same), not when its condition
    (a section open) does not hold as the values go in (a section opened later asks itself), and not when the
    screen shows what the answer used for the value the link asks again (the shapes model's 64 px for 224), unless
    a hand set it since. With ``shift``, the controls compared are not the first ones set: the event reads only
    those (links.watched), and their values are matched to them, not to the first indices."""
    import json

    from vitviz.app.links import settle_script, watched

    table = [{"door": "main", "when": None, "user": [[1 + shift, "res", 224]], "change": [shift]},
             {"door": "section", "when": "globalThis.open", "user": [[2 + shift, "ih_layer", 1]], "change": [shift]}]
    assert watched(table) == [shift, 1 + shift, 2 + shift]
    steps = [  # (values now, the link's, section open, a hand set res since) -> doors opened; one page, in order
        ([["cat", 224, 1], {"1": 320}, False, False], ["main"]),
        ([["cat", 320, 1], {"1": 480, "0": "dog"}, False, False], []),  # a new picture: its answer reads 480
        ([["dog", 480, 1], {"1": "480"}, False, False], []),  # the value shown
        ([["dog", 480, 1], {"2": 2}, False, False], []),  # a closed section: it asks when opened
        ([["dog", 480, 1], {"2": 3, "1": 224}, True, False], ["main", "section"]),
        ([["dog", 64, 3], {"1": 224}, False, False], []),  # 64 shown for 224 asked: the same answer
        ([["dog", 64, 3], {"1": 224}, False, True], ["main"]),  # a hand moved it meanwhile (its answer shows 64)
    ]
    steps = [([now, {str(int(k) + shift): v for k, v in link.items()}, *rest], doors)
             for (now, link, *rest), doors in steps]
    program = (f"const f = {settle_script(3 + shift, table, watched(table))};\n"
               f"const steps = {json.dumps([c for c, _ in steps])};\n"
               "globalThis.window = globalThis; const out = []; let hand = false;\n"
               "globalThis.vitvizLink = { putIn: {}, touched: (k) => k === 'res' && hand,\n"
               "                          settled() { hand = false; } };\n"
               "(async () => { for (const [now, set, open, touched] of steps) { const opened = [];\n"
               "  globalThis.vitvizDoors = { main: () => opened.push('main'),\n"
               "                             section: () => opened.push('section') };\n"
               "  hand = touched; globalThis.open = open; f(JSON.stringify({ at: 1, set }), ...now);\n"
               "  globalThis.open = !open; await new Promise((r) => setTimeout(r, 20)); out.push(opened); }\n"
               "  console.log(JSON.stringify(out)); })();")
    assert _printed(program) == [doors for _, doors in steps]
