"""A view is one record and a tab one declaration: a throwaway view, declared and recorded in a module of its own
(two edits: its declaration and its code), is found everywhere a view is (its endpoint and its bundle's, a panel in
its tab, the page's link keys, the bundles, ``vitviz view`` on the command line), and a throwaway tab (its
declaration and its layout module) is on the page with its view's panel, both found by the package's discovery."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

THROWAWAY = '''
"""Throwaway views: their declarations and their code, nothing else. The second one's tab is declared here too."""
import numpy as np
from PIL import Image

from vitviz.specs import tabs
from vitviz.specs.state import Field, View
from vitviz.specs.views import IMAGE
from vitviz.views import Shown, record

SQUARES = View("squares", "squares of a picture", (
    IMAGE, Field("size", "int", 3, "square side (pixels)", 1, 9, 1, link="sq_size")))
CORNERS = View("corners", "corners of a picture", (
    IMAGE, Field("corner", "int", 1, "which corner (1 to 4)", 1, 4, 1, link="corner")))
tabs.declare(tabs.TabSpec("sandbox", "Sandbox", CORNERS, shows="#corners-corner img"))


@record(SQUARES, tab="patches", bundle=True, runs_model=False, figures=("mean",))
def show_squares(rgb, values, progress=None):
    side = values["size"]
    mean = rgb[:side, :side].reshape(-1, 3).mean(0)
    picture = Image.new("RGB", (120, 120), tuple(int(v) for v in mean))
    return Shown({"mean": picture}, {"text": f"The top-left {side}×{side} pixels average {mean.round(1).tolist()}."},
                 {"mean": mean.tolist(), "size": side}, settled=None)


@record(CORNERS, tab="sandbox", bundle=False, runs_model=False, figures=("corner",))
def show_corners(rgb, values, progress=None):
    h, w = rgb.shape[:2]
    r, c = [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)][values["corner"] - 1]
    colour = tuple(int(v) for v in rgb[r, c])
    return Shown({"corner": Image.new("RGB", (60, 60), colour)}, {"text": f"corner {values['corner']}: {colour}"},
                 {"colour": list(colour)}, settled=None)
'''

THROWAWAY_TAB = '''
"""A throwaway tab's layout: found in the app's package by its mark, its panels made from its views' records."""
import gradio as gr

from vitviz.app.components import Form
from vitviz.app.tab import Tab, layout


@layout("sandbox")
def build(gr_tab: gr.Tab) -> Tab:
    form = Form("sandbox")
    note = gr.Markdown(elem_id="sandbox-note")
    tab = Tab("sandbox", form, note, gr_tab)
    tab.finish()
    return tab
'''

CHECK = '''
import json, sys, tempfile
from pathlib import Path
sys.path.append(sys.argv[1])  # a vitviz/views and a vitviz/app folder there: the package's discovery finds them

from vitviz import views
from vitviz.app import build_demo, links
from vitviz.specs import tabs
from vitviz.tools import bundle, cli
from vitviz.core import images
from vitviz import assets

demo = build_demo()
api = demo.get_api_info()["named_endpoints"]
params = [p["parameter_name"] for p in api["/squares"]["parameters"]]
ids = [c.get("props", {}).get("elem_id") for c in demo.config["components"]]
tab_items = [(c["props"].get("id"), c["props"].get("label")) for c in demo.config["components"] if c["type"] == "tabitem"]
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
    "tab_last": tab_items[-1], "tab_panel": "corners-corner" in ids, "tab_endpoint": "/corners" in api,
    "tab_link": views.LINK["corner"].name, "tab_views": [v.name for v in views.tab_views("sandbox")],
    "declared": list(tabs.TABS)[-1], "shows": tabs.TABS["sandbox"].shows,
    "corner": views.show("corners", rgb, {"corner": 4}).numbers["colour"] == rgb[-1, -1].tolist(),
}))
'''


@pytest.mark.slow  # builds the whole demo in a new process (9 s): with the full run, not the fast set
def test_a_view_and_a_tab_added_in_modules_of_their_own_are_found_everywhere(tmp_path):
    """Through the package's own discovery (a vitviz/views and a vitviz/app folder on the path), not an import by
    name: a view in a new module (its declaration and code) and a tab (its declaration and its layout module)."""
    (tmp_path / "vitviz" / "views").mkdir(parents=True)
    (tmp_path / "vitviz" / "app").mkdir()
    (tmp_path / "vitviz" / "views" / "throwaway_views.py").write_text(textwrap.dedent(THROWAWAY))
    (tmp_path / "vitviz" / "app" / "throwaway_tab.py").write_text(textwrap.dedent(THROWAWAY_TAB))
    run = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {"record": "patches", "shown": 2, "endpoints": ["/bundle_squares", "/squares"],
                   "params": ["image", "size", "figures"], "panel": True, "link": "size", "bundled": True, "zip": ".zip",
                   "cli": 0, "cli_size": 5, "cli_refuses": 2, "tab_last": ["sandbox", "Sandbox"], "tab_panel": True,
                   "tab_endpoint": True, "tab_link": "corner", "tab_views": ["corners"], "declared": "sandbox",
                   "shows": "#corners-corner img", "corner": True}


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
    for p, text in sources.items():  # modules are imported only as the package's listing finds them (pkgutil)
        for line in re.findall(r"^.*import_module.*$", text, re.M):
            assert 'import_module(f"{__name__}.{info.name}")' in line and "pkgutil.iter_modules" in text, (p, line)
        assert 'f"show_{' not in text, p
