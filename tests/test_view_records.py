"""A view is one record: a throwaway view, declared and recorded in a module of its own (two edits: its
declaration and its code), is found everywhere a view is: its endpoint and its bundle's, a panel in its tab, the
page's link keys, the bundles, ``vitviz view`` on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

THROWAWAY = '''
"""A throwaway view: its declaration and its code, nothing else."""
import numpy as np
from PIL import Image

from vitviz.specs.state import Field, View
from vitviz.specs.views import IMAGE
from vitviz.views import Shown, record

SQUARES = View("squares", "squares of a picture", (
    IMAGE, Field("size", "int", 3, "square side (pixels)", 1, 9, 1, link="sq_size")))


@record(SQUARES, tab="patches", bundle=True, runs_model=False, figures=("mean",))
def show_squares(rgb, values, progress=None):
    side = values["size"]
    mean = rgb[:side, :side].reshape(-1, 3).mean(0)
    picture = Image.new("RGB", (120, 120), tuple(int(v) for v in mean))
    return Shown({"mean": picture}, {"text": f"The top-left {side}×{side} pixels average {mean.round(1).tolist()}."},
                 {"mean": mean.tolist(), "size": side}, settled=None)
'''

CHECK = '''
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import squares_view  # the throwaway module: importing it records the view

from vitviz import views
from vitviz.app import build_demo
from vitviz.tools import bundle, cli
from vitviz.core import images
from vitviz import assets

demo = build_demo()
api = demo.get_api_info()["named_endpoints"]
params = [p["parameter_name"] for p in api["/squares"]["parameters"]]
ids = [c.get("props", {}).get("elem_id") for c in demo.config["components"]]
rgb = images.load_rgb(assets.example("cat"))
out = Path(tempfile.mkdtemp())
zipped = bundle.write("squares", {"size": 4}, rgb, out)
code = cli.main(["view", "squares", str(assets.example("cat")), "--size", "5", "--out", str(out / "cli")])
made = json.loads((out / "cli" / "squares.json").read_text())
print(json.dumps({
    "record": views.RECORDS["squares"].tab, "shown": views.show("squares", rgb, {"size": 2}).numbers["size"],
    "endpoints": sorted(n for n in api if "squares" in n), "params": params,
    "panel": "squares-mean" in ids, "link": views.LINK["sq_size"].name, "bundled": "squares" in bundle.bundled(),
    "zip": zipped.suffix, "cli": code, "cli_size": made["size"],
    "cli_refuses": cli.main(["view", "squares", str(assets.example("cat")), "--size", "12", "--out", str(out)]),
}))
'''


@pytest.mark.slow  # builds the whole demo in a new process (9 s): with the full run, not the fast set
def test_a_view_added_in_a_module_of_its_own_is_found_everywhere(tmp_path):
    (tmp_path / "squares_view.py").write_text(textwrap.dedent(THROWAWAY))
    run = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {"record": "patches", "shown": 2, "endpoints": ["/bundle_squares", "/squares"],
                   "params": ["image", "size"], "panel": True, "link": "size", "bundled": True, "zip": ".zip",
                   "cli": 0, "cli_size": 5, "cli_refuses": 2}


def test_a_view_is_wired_in_at_most_three_files_and_never_found_by_its_name():
    """Adding a view touches its declaration, its code and (when it lays it out) its tab; no list elsewhere names
    it and no code finds a show function by building its name. A name that is also a plain word of the code
    (attention, patches, rollout: a tab, a model's task, a figure's key) cannot be counted this way; every name
    with an underscore is one only a view has."""
    import re

    from vitviz.views import RECORDS

    package = ROOT / "vitviz"
    sources = {p: p.read_text() for p in package.rglob("*.py")}
    named = [n for n in RECORDS if "_" in n]
    assert len(named) >= 10
    for name in named:
        where = [p for p, text in sources.items() if re.search(rf"\b{re.escape(name)}\b", text)]
        assert len(where) <= 3, (name, sorted(str(p.relative_to(package)) for p in where))
    for p, text in sources.items():
        assert "import_module" not in text and 'f"show_{' not in text, p
