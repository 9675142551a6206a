"""The vitviz command: outputs, numbers, reruns and exit codes, run in-process (one subprocess test checks the
installed console script itself)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, local_client
from PIL import Image

from vitviz.core import patches
from vitviz.embedded import scenes
from vitviz.specs import registry
from vitviz.tools import cli

VITVIZ = Path(sys.executable).parent / "vitviz"  # the console script pip install put beside this Python


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(*args: str) -> Ran:
    """``vitviz ARGS`` in this process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as stop:  # argparse's own refusals
            code = stop.code
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.mark.slow
def test_the_console_script_is_installed_and_answers_help_without_loading_torch():
    assert VITVIZ.is_file(), "pip install -e . installs the vitviz command"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPROFILEIMPORTTIME="1")
    out = subprocess.run([str(VITVIZ), "attention", "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and "--keep" in out.stdout and "--threshold" in out.stdout
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "import time:" in line}
    assert "torch" not in imported and "numpy" not in imported and "gradio" not in imported


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, list]:
    """Five shape scenes (their object masks known) and one file that is not a picture."""
    d = tmp_path_factory.mktemp("trap")
    made = []
    for i in range(5):
        scene = scenes.make_scene(300 + i, size=128)
        Image.fromarray(scene.image).save(d / f"cam{i}.png")
        made.append(scene)
    (d / "cam9.jpg").write_bytes(b"\xff\xd8 this is not really a jpeg")
    return d, made


def test_crop_a_folder_skips_the_broken_file_and_a_rerun_does_nothing(folder, tmp_path):
    d, made = folder
    out = tmp_path / "out"
    first = run("crop", str(d), "--out", str(out))
    assert first.returncode == 3  # done in part: one input skipped (documented in --help)
    assert "5 cropped, 0 already done, 1 skipped" in first.stdout
    assert re.search(r"skipped .*cam9\.jpg: not a picture vitviz can read", first.stderr)
    crops = sorted(p.name for p in (out / "crops").iterdir())
    assert crops == [f"cam{i}.png" for i in range(5)]
    with open(out / "boxes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["file"] for r in rows] == [f"cam{i}.png" for i in range(5)]
    for row, scene in zip(rows, made):  # the box is where the object is
        l, t, r, b = (int(row[k]) for k in ("left", "top", "right", "bottom"))
        assert row["crop"] == f"crops/{row['file']}"
        with Image.open(out / row["crop"]) as im:
            assert im.size == (r - l, b - t)
        inside = scene.mask[t:b, l:r].sum() / scene.mask.sum()
        assert inside > 0.5, f"{row['file']}: only {inside:.0%} of the object is inside the box"
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "crops").iterdir()}
    again = run("crop", str(d), "--out", str(out))
    assert "0 cropped, 5 already done, 1 skipped" in again.stdout and again.returncode == 3
    assert {p.name: p.stat().st_mtime_ns for p in (out / "crops").iterdir()} == stamps


def test_crop_keeps_a_jpg_and_a_png_with_one_stem_apart_and_the_table_points_at_each(tmp_path):
    d = tmp_path / "trap"
    d.mkdir()
    one, two = scenes.make_scene(401, size=128), scenes.make_scene(402, size=128)
    Image.fromarray(one.image).save(d / "a.png")
    Image.fromarray(two.image).save(d / "a.jpg", quality=95)
    out = run("crop", str(d), "--out", str(tmp_path / "out"))
    assert out.returncode == 0 and "2 cropped, 0 already done, 0 skipped" in out.stdout
    with open(tmp_path / "out" / "boxes.csv", newline="") as f:
        rows = {r["file"]: r for r in csv.DictReader(f)}
    assert sorted(p.name for p in (tmp_path / "out" / "crops").iterdir()) == ["a.jpg", "a.png"]
    for name, scene in (("a.png", one), ("a.jpg", two)):
        r = rows[name]
        l, t, rr, b = (int(r[k]) for k in ("left", "top", "right", "bottom"))
        with Image.open(tmp_path / "out" / r["crop"]) as im:
            crop = np.asarray(im.convert("RGB")).astype(int)
        with Image.open(d / name) as im:
            want = np.asarray(im.convert("RGB"))[t:b, l:rr].astype(int)
        if name.endswith(".png"):
            assert np.array_equal(crop, want)  # each crop is cut from its own file
        else:  # a JPEG crop is re-encoded with the file's tables: it moves the pixels about as much as saving the
            # picture did (measured against the scene it was saved from), and is far from the other picture's pixels
            saved = np.abs(want - np.asarray(two.image)[t:b, l:rr].astype(int)).mean()
            other = np.abs(crop - np.asarray(one.image)[t:b, l:rr].astype(int)).mean()
            assert np.abs(crop - want).mean() <= 1.5 * saved and 10 * saved < other, (saved, other)


def test_a_photo_is_flagged_on_the_command_line_and_in_its_json(tmp_path):
    out = run("attention", str(EXAMPLES / "cat.png"), str(EXAMPLES / "scene_ring.png"), "--out", str(tmp_path))
    assert out.returncode == 0 and "was trained only on generated shape scenes" in out.stderr
    cat = json.loads((tmp_path / "cat.png.json").read_text())
    ring = json.loads((tmp_path / "scene_ring.png.json").read_text())
    assert cat["model"] == registry.OFFLINE_KEY and "trained only on generated shape scenes" in cat["notice"]
    assert "trained only on generated shape scenes" not in ring["notice"]


def test_crop_of_an_empty_folder_does_nothing_and_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    out = run("crop", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert out.returncode == 1 and "has no pictures to crop" in out.stderr


def test_a_missing_file_is_named_in_command_line_words(tmp_path):
    out = run("attention", str(tmp_path / "nowhere.png"), "--out", str(tmp_path / "out"))
    assert out.returncode == 1 and re.search(r"skipped .*nowhere\.png: no such file", out.stderr)
    assert "upload" not in out.stderr.lower()


def test_attention_files_hold_the_apps_numbers_and_the_settings_used(app_url, tmp_path):
    from gradio_client import handle_file

    star = EXAMPLES / "scene_star.png"
    out = run("attention", str(star), "--layer", "3", "--threshold", "0.7", "--resolution", "512", "--out",
              str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "Showing vitviz tiny" in out.stderr  # the same offline notice as the app
    for suffix in (".heads.png", ".rollout.png", ".mask.png", ".json"):
        assert (tmp_path / f"scene_star.png{suffix}").stat().st_size > 100
    record = json.loads((tmp_path / "scene_star.png.json").read_text())
    assert record["model"] == registry.OFFLINE_KEY and record["layer"] == 3 and record["threshold"] == 0.7
    assert record["settings"]["resolution"] == 64  # what was used, not the 512 asked for, and why
    assert record["adjusted"]["resolution"]["asked"] == 512 and "64 px only" in record["adjusted"]["resolution"]["why"]
    answer = local_client(app_url).predict(handle_file(str(star)), "DINO ViT-S/8", 224, 3, -1, 0.7,
                                                    api_name="/attention")
    rows = re.findall(r"\| (head \d|head mean) \| ([\d.]+)% \| ([\d.]+)% \| (\d+) \|", answer["texts"]["table"])
    assert len(rows) == len(record["maps"]) == 4 and answer["numbers"]["maps"] == record["maps"]
    for (name, mass, frac, count), m in zip(rows, record["maps"]):
        assert name == m["map"] and count == str(m["patches"])
        assert mass == f"{m['mass_kept']:.1%}"[:-1] and frac == f"{m['patches_kept']:.1%}"[:-1]
    with Image.open(tmp_path / "scene_star.png.mask.png") as mask:  # the head-mean mask, patch by patch
        kept = np.asarray(mask)[::8, ::8] > 0
    assert int(kept.sum()) == record["maps"][-1]["patches"]


def test_costs_and_models_print_the_librarys_numbers():
    out = run("costs", "--model-size", "ViT-S", "--patch", "16", "--resolution", "224", "--format", "json")
    data = json.loads(out.stdout)
    assert data["macs"] == patches.vit_macs(registry.VIT_SIZES["ViT-S"], 16, 224, 224)
    assert data["macs"]["attention scores QKᵀ"] == 12 * 6 * 197 * 197 * 64  # by hand
    listing = run("models").stdout
    assert all(key in listing for key in registry.REGISTRY)
    assert re.search(re.escape(registry.OFFLINE_KEY) + r".*ships with vitviz", listing)


@pytest.mark.parametrize("args, code, words", [
    (["crop", "/no/such/folder", "--out", "/tmp/x"], 1, "no such folder or file"),
    (["attention", "README.md", "--out", "/tmp/x"], 1, "not an image vitviz can read"),
    (["attention", "x.png", "--threshold", "1.5", "--out", "/tmp/x"], 2,
     "`--keep` (keep this share of attention mass) must be a number from 0.1 to 0.95; got '1.5'"),
    (["costs", "--model-size", "ViT-Z"], 2, "`--model-size` (model size for the counts) must be one of 'ViT-Ti'"),
    (["patches", "x.png", "--patch", "12"], 2, "`--patch` (patch size P (pixels)) must be one of 4, 8, 14, 16, 32"),
    (["serve", "--port", "99999"], 2, "99999 is not a port: a whole number from 1 to 65535"),
    (["patches", "missing.jpg"], 1, "missing.jpg: no such file."),
])
def test_exit_codes_scripts_can_rely_on(args, code, words):
    out = run(*args)
    assert out.returncode == code and words in out.stderr
    assert "Traceback" not in out.stderr and "`model_size`" not in out.stderr and "choose it again" not in out.stderr


def test_patches_keeps_a_jpg_and_a_png_with_one_stem_apart(tmp_path):
    scene = scenes.make_scene(3, size=96).image
    Image.fromarray(scene).save(tmp_path / "coins.png")
    Image.fromarray(scene[:, ::-1]).save(tmp_path / "coins.jpg", quality=95)
    for name in ("coins.png", "coins.jpg"):
        out = run("patches", str(tmp_path / name), "--out", str(tmp_path / "out"))
        assert out.returncode == 0, out.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["coins.jpg.patches.json", "coins.jpg.patches.png", "coins.png.patches.json",
                       "coins.png.patches.png"]
    assert json.loads((tmp_path / "out" / "coins.jpg.patches.json").read_text())["image"].endswith("coins.jpg")


def test_bundle_says_what_is_wrong_with_what_it_was_given(tmp_path):
    (tmp_path / "notes.jpg").write_text("not a bundle")
    out = run("bundle", str(tmp_path / "notes.jpg"), "--out", str(tmp_path / "x"))
    assert out.returncode == 1 and "is not a vitviz bundle's params.json" in out.stderr
    assert "Expecting value" not in out.stderr
    (tmp_path / "params.json").write_text(json.dumps({"view": "patches", "image": "input.png"}))
    out = run("bundle", str(tmp_path / "params.json"), "--out", str(tmp_path / "x"))
    assert out.returncode == 1 and "names its picture input.png, which is not beside it" in out.stderr
    assert "choose it again" not in out.stderr and "Patches tab" not in out.stderr
    out = run("patches", str(EXAMPLES / "cat.png"), "--patch", "4", "--resolution", "640", "--policy", "keep")
    assert out.returncode in (0, 1) and "tab" not in out.stderr  # no web words on the command line


def test_every_argument_of_every_command_has_help():
    import argparse

    def walk(p: argparse.ArgumentParser, where: str):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{where} {name}")
            elif not isinstance(action, argparse._HelpAction):
                yield where, action

    missing = [(where, a.dest) for where, a in walk(cli.parser(), "vitviz") if not (a.help or "").strip()]
    assert missing == []


def test_models_lists_a_cnn_by_its_stride():
    listing = run("models").stdout
    assert re.search(r"ResNet-50 \(ImageNet-1k\)\s+cnn\s+25.6 M\s+stride 32", listing)
    assert re.search(r"DINO ViT-S/8\s+attention\s+21.7 M\s+P=8 ", listing)


def test_every_flag_is_a_declared_setting_with_its_range():
    """The flags come from the declarations: each view's settings, with the range or choices in the help."""
    from vitviz.specs import views as declared

    helps = {}
    for command in ("attention", "patches"):
        buf = io.StringIO()
        with redirect_stdout(buf), pytest.raises(SystemExit):
            cli.main([command, "--help"])
        helps[command] = re.sub(r"\s+", " ", buf.getvalue())
    for command, view in (("attention", declared.ATTENTION), ("patches", declared.PATCHES)):
        for f in view.settings():
            assert f"--{f.name.replace('_', '-')}" in helps[command]
            assert re.sub(r"\s+", " ", f.accepts())[:30] in helps[command]


@pytest.mark.parametrize("api, args", [
    ("/bundle_attention", ("star", "DINO ViT-S/8", 224, 3, -1, 0.7, 0.5, "viridis", "2,3", "mean", 0.0)),
    ("/bundle_patches", ("cat", 16, 224, "crop", "ViT-S")),
    ("/bundle_position_embeddings", ("2D sinusoidal", 6, 6, 32, "cosine", 8, 8, 0, "magma")),
    ("/bundle_classify", ("star", registry.OFFLINE_KEY)),
])
def test_a_downloaded_view_is_made_again_by_the_command_pixel_for_pixel(app_url, tmp_path, api, args):
    from gradio_client import handle_file

    pictures = {"star": EXAMPLES / "scene_star.png", "cat": EXAMPLES / "cat.png"}
    sent = tuple(handle_file(str(pictures[a])) if a in pictures else a for a in args)
    path = local_client(app_url).predict(*sent, api_name=api)
    assert Path(path).name.startswith("vitviz_" + api.split("_", 1)[1]) and path.endswith(".zip")
    unpacked = tmp_path / "bundle"
    with zipfile.ZipFile(path) as z:
        z.extractall(unpacked)
    pngs = sorted((unpacked / "figures").glob("*.png"))
    assert pngs and all((unpacked / "figures" / f"{p.stem}.pdf").read_bytes().startswith(b"%PDF") for p in pngs)
    assert json.loads((unpacked / "numbers.json").read_text())
    out = run("bundle", str(unpacked / "params.json"), "--out", str(tmp_path / "again"))
    assert out.returncode == 0, out.stderr
    assert f"wrote {len(pngs)} figure{'s' if len(pngs) != 1 else ''} (PNG and PDF)" in out.stdout
    for png in pngs:
        with Image.open(png) as a, Image.open(tmp_path / "again" / png.name) as b:
            assert np.array_equal(np.asarray(a), np.asarray(b)), png.name
    if api == "/bundle_patches":  # matplotlib's figures travel as vectors: text, not a picture of text
        pdf = (unpacked / "figures" / "costs.pdf").read_bytes()
        assert b"/Subtype /Image" not in pdf and b"/Font" in pdf
    if api == "/bundle_attention":  # params.json holds the settings as used, the reasons are in numbers.json
        params = json.loads((unpacked / "params.json").read_text())
        assert params["resolution"] == 64 and params["layer"] == 3 and params["query"] == [2, 3]
        assert json.loads((unpacked / "numbers.json").read_text())["adjusted"]["resolution"]["used"] == 64


def test_a_bundle_holds_the_figures_the_page_shows(app_url, tmp_path):
    """The same settings through /attention (what the page shows) and /bundle_attention: the same figures, pixel
    for pixel."""
    from gradio_client import handle_file

    client = local_client(app_url)
    args = (handle_file(str(EXAMPLES / "scene_ring.png")), "DINO ViT-S/8", 224, 2, 1, 0.55, 0.7, "cividis", "4,4")
    shown = client.predict(*args, api_name="/attention")
    with zipfile.ZipFile(client.predict(*args, api_name="/bundle_attention")) as z:
        z.extractall(tmp_path)
    assert set(shown["figures"]) == {p.stem for p in (tmp_path / "figures").glob("*.png")}
    for name, page in shown["figures"].items():
        with Image.open(page) as a, Image.open(tmp_path / "figures" / f"{name}.png") as b:
            assert np.array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB"))), name


def test_serve_takes_its_port_from_gradio_server_port_and_app_py_reads_its_own_arguments(monkeypatch, tmp_path):
    """``vitviz serve`` listens where GRADIO_SERVER_PORT says (a flag still wins); ``python app.py --models FILE``
    hands the file to the server (app.py once called main([]), which dropped every argument)."""
    import runpy

    import vitviz.app

    seen: list = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, **kw: seen.append(cmd) or 0)
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    assert run("serve").returncode == 0 and seen[-1][-2:] == ["--port", "7999"]
    assert run("serve", "--port", "8001").returncode == 0 and seen[-1][-2:] == ["--port", "8001"]
    monkeypatch.setenv("GRADIO_SERVER_PORT", "99999")
    assert run("serve").returncode == 2  # refused in words, as a flag would be

    built: list = []

    class Stop(Exception):
        pass

    def build(models_file=None):
        built.append(models_file)
        raise Stop

    monkeypatch.setattr(vitviz.app, "build_demo", build)
    monkeypatch.setattr(vitviz.app.files, "stop_on_sigterm", lambda: None)
    models = tmp_path / "models.toml"
    monkeypatch.setattr(sys, "argv", ["app.py", "--models", str(models), "--port", "8002"])
    with pytest.raises(Stop):
        runpy.run_path(str(Path(__file__).resolve().parent.parent / "app.py"), run_name="__main__")
    assert built == [str(models)]


def test_vitviz_forward_prints_no_words_meant_for_the_page(tmp_path):
    """The command line prints the view's texts: none of them may ask the reader to open, click or point at
    something only the page has."""
    out = run("forward", str(EXAMPLES / "scene_ring.png"), "--out", str(tmp_path))
    assert out.returncode == 0 and "blocks" in out.stdout
    assert not re.search(r"\b(Open a stage|click|point at|tab)\b", out.stdout, re.I), out.stdout


def test_the_test_the_map_verbs_write_their_figures_and_numbers(tmp_path):
    out = run("view", "predict", str(EXAMPLES / "scene_star.png"), "--model", registry.OFFLINE_KEY, "--patches",
              "3,3;4,4", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    numbers = json.loads((tmp_path / "predict.json").read_text())
    assert numbers["patches"] == [[3, 3], [4, 4]] and numbers["mode"] == "drop" and (tmp_path / "predict_choice.png").is_file()
    bad = run("view", "predict", str(EXAMPLES / "scene_star.png"), "--patches", "x", "--out", str(tmp_path))
    assert bad.returncode == 2 and "`--patches`" in bad.stderr
