"""``vitviz crop``'s engine: inputs from a tree or a list, outputs mirroring the tree, batches of one shape, a rerun
that skips what is done, an interrupted run that loses nothing already written, and the Ray engine (slow) giving
the local engine's files byte for byte."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from PIL import Image

from vitviz.analyses.crops import ClassTokenProbe, box_of
from vitviz.embedded import scenes
from vitviz.models import loaders
from vitviz.tools import cli, crop


def make_tree(root: Path, n: int = 6) -> dict[str, scenes.Scene]:
    """Scenes in a small tree: two folders, two sizes, one stem twice (a.jpg and a.png), one broken file."""
    made = {}
    for i in range(n):
        scene = scenes.make_scene(500 + i, size=128 if i % 3 else 96)
        rel = f"{'north' if i % 2 else 'south'}/cam{i}.png"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scene.image).save(root / rel)
        made[rel] = scene
    for rel, seed in (("south/a.png", 601), ("south/a.jpg", 602)):
        scene = scenes.make_scene(seed, size=128)
        Image.fromarray(scene.image).save(root / rel, **({"quality": 95} if rel.endswith("jpg") else {}))
        made[rel] = scene
    wide = scenes.make_scene(603, size=128)  # 128×96: the model sees it at another shape (64×80)
    Image.fromarray(wide.image[16:112]).save(root / "north" / "wide.png")
    made["north/wide.png"] = wide
    (root / "north" / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (root / ".hidden").mkdir()
    Image.fromarray(scenes.make_scene(9, size=96).image).save(root / ".hidden" / "skip.png")
    return made


def outputs(out: Path) -> dict[str, bytes]:
    """Every file a run leaves that a person reads: the crops and boxes.csv, by path."""
    files = sorted(p for p in (out / "crops").rglob("*") if p.is_file()) + [out / "boxes.csv"]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in files}


def view_box(path: Path) -> tuple[int, ...]:
    """The box the Attention view's numbers give one picture alone (60% of the head mean, last layer), in its
    own pixels: an independent path to the same answer."""
    from vitviz.core import images
    from vitviz.views.attention import analysis_for, numbers

    rgb = images.load_rgb(path)
    a, _ = analysis_for(rgb, {"model": "DINO ViT-S/8", "resolution": 224, "layer": 4, "head": -1, "query": None})
    box = numbers(a, a.maps.layers, 0.6)["box"] or (0, 0, a.fitted.image.shape[1], a.fitted.image.shape[0])
    return a.fitted.box_in_source(box)


def cli_run(*args: str) -> int:
    return cli.main(list(args))


def test_the_probe_equals_the_attention_views_mask_and_box(rgb_cat):
    """One batch through ClassTokenProbe gives each picture the box the Attention view's numbers give it alone."""
    from vitviz.views.attention import analysis_for, numbers

    tiny = loaders.load_embedded()
    pictures = [scenes.make_scene(700 + i, size=96).image for i in range(3)]
    x = np.concatenate([tiny.normalise(tiny.fit(p, 64)[0].image).numpy() for p in pictures])
    rows = tiny.run(ClassTokenProbe(tiny.spec.prefix), __import__("torch").from_numpy(x)).numpy()
    for rgb, row in zip(pictures, rows):
        a, _ = analysis_for(rgb, {"model": tiny.spec.key, "resolution": 64, "layer": 4, "head": -1, "query": None})
        want = numbers(a, a.maps.layers, 0.6)
        got = box_of(row, a.maps.grid, a.maps.patch, 0.6)
        assert list(got.box) == want["box"]
        assert got.mass_kept == pytest.approx(want["maps"][-1]["mass_kept"], abs=1e-6)


def test_a_tree_is_mirrored_and_nothing_collides(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    made = make_tree(src)
    assert cli_run("crop", str(src), "--out", str(out), "--batch", "4") == cli.PARTLY  # the broken file
    crops = sorted(p.relative_to(out / "crops").as_posix() for p in (out / "crops").rglob("*") if p.is_file())
    assert crops == sorted(made)  # each crop keeps its picture's name: a.jpg and a.png both; hidden folder left out
    with open(out / "boxes.csv", newline="") as f:
        rows = {r["file"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(made)
    for rel, scene in made.items():
        r = rows[rel]
        assert r["crop"] == f"crops/{rel}"
        left, top, right, bottom = (int(r[k]) for k in ("left", "top", "right", "bottom"))
        with Image.open(out / r["crop"]) as im, Image.open(src / rel) as original:
            assert im.format == original.format  # the picture's own format
            got = np.asarray(im.convert("RGB")).astype(int)
            want = np.asarray(original.convert("RGB"))[top:bottom, left:right].astype(int)
            if im.format == "JPEG":  # re-encoded with the picture's own tables: lossy, by as much as the original
                assert im.quantization == original.quantization
                saved = np.abs(want - scene.image[top:bottom, left:right].astype(int)).mean()  # the file's own loss
                assert got.shape == want.shape and np.abs(got - want).mean() <= 1.5 * saved, saved
            else:
                assert np.array_equal(got, want)
        assert (left, top, right, bottom) == view_box(src / rel), rel  # the Attention view's own box


def test_a_csv_list_gives_the_same_crops_as_the_folder(tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    listing = tmp_path / "list.csv"
    paths = sorted(p.relative_to(tmp_path).as_posix() for p in src.rglob("*") if p.is_file() and ".hidden" not in
                   p.parts)
    listing.write_text("path,note\n" + "".join(f"{p},x\n" for p in paths))
    assert cli_run("crop", str(src), "--out", str(tmp_path / "a")) == cli.PARTLY
    assert cli_run("crop", str(listing), "--out", str(tmp_path / "b")) == cli.PARTLY
    a, b = outputs(tmp_path / "a"), outputs(tmp_path / "b")
    assert [k.replace("crops/", "crops/src/") if k != "boxes.csv" else k for k in a] == list(b)
    assert list(a.values())[:-1] == list(b.values())[:-1]  # the same pixels; the table names paths from the list


def test_batching_groups_one_shape_and_changes_no_answer(tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    from vitviz.core.images import fitted_shape

    items = crop.list_inputs(src)
    batches, skipped = crop.plan(items, lambda h, w: fitted_shape(h, w, 64, 8, "keep"), 3)
    assert [s.rel for s in skipped] == ["north/broken.jpg"] and "not a picture" in skipped[0].why
    shapes = [{fitted_shape(*crop.header_shape(i.path), 64, 8, "keep") for i in b} for b in batches]
    assert all(len(b) <= 3 for b in batches) and all(len(s) == 1 for s in shapes)
    assert sum(len(b) for b in batches) == len(items) - 1
    one, many = tmp_path / "one", tmp_path / "many"
    cli_run("crop", str(src), "--out", str(one), "--batch", "1")
    with mock.patch.object(crop, "crop_batch", wraps=crop.crop_batch) as spy:
        cli_run("crop", str(src), "--out", str(many), "--batch", "8")
    assert spy.call_count == 2  # 9 pictures, all 64×64 for the offline model (its own centre crop): batches of 8 and 1
    assert outputs(one) == outputs(many)


def test_an_interrupted_run_keeps_what_it_wrote_and_the_rerun_finishes(tmp_path):
    src, out, clean = tmp_path / "src", tmp_path / "out", tmp_path / "clean"
    make_tree(src)
    real, calls = crop.crop_batch, []

    def dies_on_the_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with mock.patch.object(crop, "crop_batch", dies_on_the_third), pytest.raises(KeyboardInterrupt):
        cli_run("crop", str(src), "--out", str(out), "--batch", "2")
    kept = sorted(p.name for p in (out / "crops").rglob("*") if p.is_file())
    assert len(kept) == 4 and not list(out.rglob(".tmp-*"))  # two batches of two, whole files only
    assert cli_run("crop", str(src), "--out", str(out), "--batch", "2") == cli.PARTLY
    cli_run("crop", str(src), "--out", str(clean), "--batch", "2")
    assert outputs(out) == outputs(clean)


def test_a_rerun_skips_every_finished_picture(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    made = make_tree(src)
    cli_run("crop", str(src), "--out", str(out))
    capsys.readouterr()
    with mock.patch.object(crop, "crop_batch", wraps=crop.crop_batch) as spy:
        assert cli_run("crop", str(src), "--out", str(out)) == cli.PARTLY
    assert spy.call_count == 0
    assert f"0 cropped, {len(made)} already done, 1 skipped" in capsys.readouterr().out


# ---- the Ray engine (slow: a local Ray cluster starts in several seconds) -----------------------------------------

def _ray_or_skip():
    try:
        import ray as _ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the Ray engine's tests must run in CI: pip install -r requirements-dev.txt", pytrace=False)
        pytest.skip("pip install 'vitviz[ray]'")


@pytest.mark.slow
def test_the_ray_engine_writes_the_local_engines_files_byte_for_byte(tmp_path):
    _ray_or_skip()
    src = tmp_path / "src"
    make_tree(src)
    assert cli_run("crop", str(src), "--out", str(tmp_path / "local"), "--batch", "2") == cli.PARTLY
    assert cli_run("crop", str(src), "--out", str(tmp_path / "ray"), "--batch", "2", "--engine", "ray",
                   "--workers", "2") == cli.PARTLY
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "local")


@pytest.mark.slow
def test_a_ray_run_interrupted_by_a_signal_resumes(tmp_path):
    _ray_or_skip()
    src, out = tmp_path / "src", tmp_path / "out"
    N = 120  # enough that a loaded machine cannot finish them all between the fifth record and the signal
    for i in range(N):
        rel = f"d{i % 3}/cam{i}.png"
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scenes.make_scene(800 + i, size=96).image).save(src / rel)
    cmd = [sys.executable, "-m", "vitviz.tools.cli", "crop", str(src), "--out", str(out), "--batch", "1",
           "--engine", "ray", "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / crop.RECORDS).rglob("*.json"))) < 5:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=60)
    kept = len(list((out / crop.RECORDS).rglob("*.json")))
    assert 5 <= kept < N, kept  # stopped part way, with what it finished on disk
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{N - kept} cropped, {kept} already done" in again.stdout
    assert not list(out.rglob(".tmp-*"))  # a write cut short by the signal was cleared by the rerun
    clean = tmp_path / "clean"
    assert cli_run("crop", str(src), "--out", str(clean), "--batch", "1") == cli.DONE
    assert outputs(out) == outputs(clean)


def test_listed_paths_never_share_an_output():
    from pathlib import PurePosixPath as P

    written = ("a.jpg", "../a.jpg", "/a.jpg", "./sub/a.jpg", "sub/../a.jpg", "_up_/a.jpg", "_root_/a.jpg",
               "__up_/a.jpg")
    rels = [crop.list_rel(P(p)) for p in written]
    assert rels == ["a.jpg", "_up_/a.jpg", "_root_/a.jpg", "sub/a.jpg", "sub/_up_/a.jpg", "__up_/a.jpg",
                    "__root_/a.jpg", "___up_/a.jpg"]
    assert len(set(rels)) == len(rels)


# ---- a real archive's surprises (issue: what a class would hit) -----------------------------------------------

def bomb_png(path: Path, side: int = 60000) -> None:
    """A tiny PNG whose header declares side×side pixels (no pixel data): opening it must not be attempted."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                     + chunk(b"IEND", b""))


def test_a_header_that_declares_a_huge_picture_is_skipped_with_its_reason(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    for i in range(2):
        Image.fromarray(scenes.make_scene(900 + i, size=96).image).save(src / f"ok{i}.png")
    bomb_png(src / "bomb.png")
    assert (src / "bomb.png").stat().st_size < 100
    assert cli_run("crop", str(src), "--out", str(out)) == cli.PARTLY
    err = capsys.readouterr().err
    assert "skipped bomb.png: too large" in err and "Traceback" not in err
    assert sorted(p.name for p in (out / "crops").iterdir()) == ["ok0.png", "ok1.png"]
    items = crop.list_inputs(src)  # the planning step itself, as both engines use it
    _, skipped = crop.plan(items, lambda h, w: (64, 64), 8)
    assert [s.rel for s in skipped] == ["bomb.png"] and "megapixels" in skipped[0].why


def test_a_name_too_long_for_the_file_system_keeps_a_one_to_one_output(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    long_a, long_b = "a" * 250 + ".png", "a" * 249 + "b.png"  # legal names (254 bytes) sharing their start
    for i, name in enumerate((long_a, long_b, "short.png")):
        Image.fromarray(scenes.make_scene(910 + i, size=96).image).save(src / name)
    assert cli_run("crop", str(src), "--out", str(out)) == cli.DONE
    crops = sorted(p.name for p in (out / "crops").iterdir())
    assert len(crops) == 3 and all(len(n.encode()) <= 255 for n in crops) and "short.png" in crops
    with open(out / "boxes.csv", newline="") as f:
        rows = {r["file"]: r for r in csv.DictReader(f)}
    assert set(rows) == {long_a, long_b, "short.png"}
    assert len({rows[n]["crop"] for n in rows}) == 3 and all((out / rows[n]["crop"]).is_file() for n in rows)
    assert cli_run("crop", str(src), "--out", str(out)) == cli.DONE  # found again: done


def test_what_a_folder_holds_besides_pictures_is_listed_with_its_reason(tmp_path, capsys):
    """A FIFO and a link to nothing are skipped and said (exit 3: done in part); hidden files and folders are left
    out and said, without counting as failures; a picture whose format Pillow cannot write gets a PNG crop."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    Image.fromarray(scenes.make_scene(950, size=96).image).save(src / "ok.png")
    os.mkfifo(src / "pipe.jpg")
    (src / "gone.jpg").symlink_to(src / "nowhere.jpg")
    (src / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (src / ".git").mkdir()
    (src / ".git" / "x.png").write_bytes(b"")
    assert cli_run("crop", str(src), "--out", str(out)) == cli.PARTLY
    err = capsys.readouterr().err
    assert "skipped pipe.jpg: not a regular file" in err and "skipped gone.jpg: a link to nothing" in err
    assert "left out .DS_Store: a hidden file" in err and "left out .git: a hidden folder" in err
    assert ".git/x.png" not in err
    assert sorted(p.name for p in (out / "crops").iterdir()) == ["ok.png"]
    assert crop.crop_format("a/b.psd") is None and crop.crop_file(out, "a/b.psd") == out / "crops" / "a" / "b.psd.png"
    assert crop.crop_format("b.JPG") == "JPEG" and crop.crop_file(out, "b.JPG") == out / "crops" / "b.JPG"


@pytest.mark.parametrize("where", [".", "results", "deeper/results"])
def test_an_output_folder_inside_the_source_is_refused(tmp_path, capsys, where):
    src = tmp_path / "src"
    src.mkdir()
    Image.fromarray(scenes.make_scene(920, size=96).image).save(src / "x.png")
    (src / "crops").mkdir()
    (src / "crops" / "x.png").write_bytes(b"the user's own file")
    before = sorted(str(p) for p in src.rglob("*"))
    assert cli_run("crop", str(src), "--out", str(src / where)) == cli.USAGE
    assert "inside it" in capsys.readouterr().err
    assert sorted(str(p) for p in src.rglob("*")) == before and (src / "crops" / "x.png").read_bytes() == \
        b"the user's own file"


def test_listed_paths_that_name_different_files_get_different_outputs(tmp_path, capsys):
    """``../elsewhere/b.png`` and a folder really called ``_up_`` are two pictures; an absolute path is one more;
    the same file written twice (``..\\elsewhere\\b.png``) is cropped once and said so."""
    lists, elsewhere = tmp_path / "lists", tmp_path / "elsewhere"
    for folder in (lists / "_up_" / "elsewhere", elsewhere, lists / "_root_" / str(tmp_path).lstrip("/")):
        folder.mkdir(parents=True)
    pictures = {elsewhere / "b.png": 930, lists / "_up_" / "elsewhere" / "b.png": 931, tmp_path / "abs.png": 932,
                lists / "_root_" / str(tmp_path).lstrip("/") / "abs.png": 933}
    for path, seed in pictures.items():
        Image.fromarray(scenes.make_scene(seed, size=96).image).save(path)
    listing = lists / "list.csv"
    listing.write_text("path\n../elsewhere/b.png\n_up_/elsewhere/b.png\n..\\elsewhere\\b.png\n"
                       f"{tmp_path / 'abs.png'}\n_root_{tmp_path}/abs.png\n")
    out = tmp_path / "out"
    assert cli_run("crop", str(listing), "--out", str(out)) == cli.DONE
    assert "../elsewhere/b.png" not in capsys.readouterr().err.replace("_up_/elsewhere/b.png is listed 2 times", "")
    with open(out / "boxes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and len({r["crop"] for r in rows}) == 4  # four files, four outputs
    for r in rows:  # each crop is of its own picture
        with Image.open(out / r["crop"]) as im:
            got = np.asarray(im.convert("RGB"))
        box = tuple(int(r[k]) for k in ("left", "top", "right", "bottom"))
        source = {crop.list_rel(__import__("pathlib").PurePosixPath(p)): p for p in
                  ("../elsewhere/b.png", "_up_/elsewhere/b.png", str(tmp_path / "abs.png"),
                   f"_root_{tmp_path}/abs.png")}[r["file"]]
        path = Path(source) if source.startswith("/") else lists / source
        with Image.open(path) as im:
            assert np.array_equal(got, np.asarray(im.convert("RGB"))[box[1]:box[3], box[0]:box[2]])
    assert crop.duplicates(listing) == {"_up_/elsewhere/b.png": 2}


def test_a_rerun_with_other_settings_redoes_the_crops(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    Image.fromarray(scenes.make_scene(940, size=128).image).save(src / "x.png")
    assert cli_run("crop", str(src), "--out", str(out), "--keep", "0.3") == cli.DONE
    narrow = (out / "crops" / "x.png").read_bytes()
    capsys.readouterr()
    assert cli_run("crop", str(src), "--out", str(out), "--keep", "0.95") == cli.DONE
    said = capsys.readouterr().out
    assert "1 cropped (1 redone" in said and "0 already done" in said
    assert (out / "crops" / "x.png").read_bytes() != narrow
    with open(out / "boxes.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    wide = Image.open(out / "crops" / "x.png").size
    assert (int(row["right"]) - int(row["left"]), int(row["bottom"]) - int(row["top"])) == wide
    assert cli_run("crop", str(src), "--out", str(out), "--keep", "0.95") == cli.DONE
    assert "0 cropped, 1 already done" in capsys.readouterr().out


def test_the_progress_bar_counts_pictures(tmp_path, capsys):
    src = tmp_path / "src"
    make_tree(src)
    cli_run("crop", str(src), "--out", str(tmp_path / "out"), "--batch", "4")
    err = capsys.readouterr().err
    assert "9/9" in err and "picture/s" in err  # 9 readable pictures in 3 batches, counted as pictures
