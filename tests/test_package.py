"""vitviz as a package: the wheel carries what the library needs, and importing it changes nothing global."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vitviz import assets
from vitviz.specs import registry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel, built from a copy of the tracked files in a temporary folder (nothing written into the checkout)."""
    import shutil

    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        if name.startswith(("vitviz/", "pyproject.toml", "README.md")):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)], check=True,
                   capture_output=True, timeout=600)
    return zipfile.ZipFile(next(out.glob("vitviz-*.whl")))


@pytest.mark.slow
def test_the_wheel_carries_the_offline_model_examples_and_scripts(wheel):
    names = set(wheel.namelist())
    tiny = {f"vitviz/assets/tiny/{f}" for f in ("model.safetensors", "train_info.json", "quality.json")}
    steps = {f"vitviz/assets/tiny/checkpoints/{p.name}" for _, p in assets.tiny_checkpoints()}
    steps |= {f"vitviz/assets/sweep/{r['file']}" for r in assets.sweep_results()["runs"]}
    steps |= {"vitviz/assets/sweep/results.json"}
    examples = {f"vitviz/assets/examples/{p.relative_to(assets.EXAMPLES).as_posix()}"
                for p in assets.EXAMPLES.rglob("*") if p.is_file() and p.suffix != ".py"}
    web = {f"vitviz/render/web/{n}" for n in ("common.js", "explorer.js", "explorer.css", "posembed.js", "patches.js",
                                              "page.js", "carrier.js", "inside.js", "inside.css", "lib/numbers.mjs",
                                              "lib/maps.mjs", "lib/picture.mjs", "lib/server.mjs")}
    packages = {f"vitviz/{p}/__init__.py" for p in ("specs", "core", "models", "analyses", "embedded", "render",
                                                    "views", "tools", "app")}
    assert tiny | steps | examples | web | packages | {"vitviz/assets/theme.css", "vitviz/tools/cli.py"} <= names
    assert len(steps) >= 4 and len(examples) >= 13  # 9 pictures and the photos' 4 small copies
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "vitviz = vitviz.tools.cli:main" in wheel.read(entry).decode()
    size = wheel.getinfo("vitviz/assets/tiny/model.safetensors").file_size
    assert size == (assets.TINY / "model.safetensors").stat().st_size


def test_the_installed_package_finds_its_files_from_any_folder(tmp_path):
    """The package data is found next to the installed package, whatever the working folder."""
    code = ("import vitviz, pathlib; from vitviz import assets; pkg = pathlib.Path(vitviz.__file__).parent; "
            "print(assets.ROOT == pkg / 'assets', (assets.TINY / 'model.safetensors').is_file(), "
            "len(assets.example_names()), len(assets.tiny_checkpoints()), (assets.SWEEP / 'results.json').is_file())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", str(len(list(assets.EXAMPLES.glob("*.[pj][np]g")))),
                                  str(len(list((assets.TINY / "checkpoints").glob("*.safetensors")))), "True"]
    assert len(assets.example_names()) >= 9


@pytest.mark.slow  # a new interpreter importing torch: with the slow set, as the wheel
def test_importing_vitviz_changes_nothing_global():
    code = """
import logging, sys, warnings
import matplotlib, numpy as np, torch
before = (dict(matplotlib.rcParams), torch.get_num_threads(), torch.get_default_dtype(), np.geterr(),
          list(logging.getLogger().handlers), len(warnings.filters), torch.is_grad_enabled())
import vitviz.analyses.attention, vitviz.core.attention, vitviz.models.budget, vitviz.analyses.classify
import vitviz.tools.cli, vitviz.tools.bundle, vitviz.render.browser, vitviz.specs.views, vitviz.models.runner
import vitviz.core.images, vitviz.models.loaders, vitviz.models.cache, vitviz.core.patches, vitviz.render.plotting
import vitviz.core.posembed, vitviz.views.attention, vitviz.views.classify, vitviz.views.patches, vitviz.views.posembed
vitviz.render.plotting.heatmap([[0, 1], [2, 3]], "t", "x", "y", "v")  # drawing a figure changes nothing either
after = (dict(matplotlib.rcParams), torch.get_num_threads(), torch.get_default_dtype(), np.geterr(),
         list(logging.getLogger().handlers), len(warnings.filters), torch.is_grad_enabled())
print([a == b for a, b in zip(before, after)], "matplotlib.pyplot" in sys.modules, "gradio" in sys.modules,
      matplotlib.rcParams["backend"])
"""
    import os

    env = dict(os.environ, MPLBACKEND="svg")  # reading an undecided backend would itself import pyplot
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.split("]")
    assert out[0] == "[True, True, True, True, True, True, True" and out[1].split() == ["False", "False", "svg"]


def test_the_space_preloads_every_hub_model_of_the_registry():
    import timm

    front = (ROOT / "README.md").read_text().split("---")[1]
    listed = {line.strip()[2:] for line in front.splitlines() if line.strip().startswith("- ")}
    wanted = {s.source if s.family == "hf" else timm.models.get_pretrained_cfg(s.source).hf_hub_id
              for s in registry.REGISTRY.values() if s.family != "embedded"}
    assert listed == wanted
