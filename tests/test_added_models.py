"""A server's own models (a models file): read, checked, on every list, shown by every view that can use them,
on the command line and in bundles; a broken entry reported and left out; a model object from a notebook."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from vitviz.models import listing
from vitviz.models import added, cache
from vitviz.specs import registry

LAB = "Lab ViT-S/16 (camera traps)"
XRAY = "X-ray ViT (3 findings)"
ROOT = Path(__file__).resolve().parents[1]


def build_checkpoints(folder: Path) -> Path:
    """Random-weight checkpoints of the real architectures, saved as an operator would, and a models file naming
    them (relative paths) with three broken entries. Returns the models file."""
    import timm
    import torch
    from safetensors.torch import save_file
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    torch.manual_seed(0)
    save_file(timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=3).state_dict(),
              str(folder / "lab.safetensors"))
    (folder / "labels.txt").write_text("deer\nfox\nempty frame\n")
    (folder / "four.txt").write_text("a\nb\nc\nd\n")
    cfg = ViTConfig(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                    intermediate_size=768, num_labels=3, id2label={0: "normal", 1: "nodule", 2: "effusion"},
                    label2id={"normal": 0, "nodule": 1, "effusion": 2})
    ViTForImageClassification(cfg).save_pretrained(folder / "xray")
    ViTImageProcessor(size={"height": 224, "width": 224}, image_mean=[0.5, 0.5, 0.5],
                      image_std=[0.5, 0.5, 0.5]).save_pretrained(folder / "xray")
    (folder / "old.bin").write_bytes(b"not loaded")
    path = folder / "models.toml"
    path.write_text(f"""
[[model]]
name = "{LAB}"
timm = "vit_small_patch16_224"
weights = "lab.safetensors"
labels = "labels.txt"

[[model]]
name = "{XRAY}"
transformers = "xray"

[[model]]
name = "Wrong architecture"
timm = "vit_base_patch16_224"
weights = "lab.safetensors"

[[model]]
name = "Pickled"
timm = "vit_small_patch16_224"
weights = "old.bin"

[[model]]
name = "Four labels"
timm = "vit_small_patch16_224"
weights = "lab.safetensors"
labels = "four.txt"
""")
    return path


@pytest.fixture(scope="module")
def models_file(tmp_path_factory) -> Path:
    return build_checkpoints(tmp_path_factory.mktemp("operator"))


@pytest.fixture(scope="module")
def installed(models_file):
    report = added.install(models_file, adopt=cache.adopt, forget=cache.forget)
    yield report
    added.remove(forget=cache.forget)


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
def test_a_models_file_adds_its_good_models_and_reports_each_broken_one_with_its_field(installed):
    assert list(installed.added) == [LAB, XRAY]
    faults = {p.name: (p.field, p.why) for p in installed.problems}
    assert faults["Wrong architecture"][0] == "weights" and "size mismatch" in faults["Wrong architecture"][1]
    assert faults["Pickled"] == ("weights", "only .safetensors files are loaded (no pickled checkpoints).")
    assert faults["Four labels"][0] == "labels" and "4 labels" in faults["Four labels"][1]
    assert set(faults) == {"Wrong architecture", "Pickled", "Four labels"}
    lab, xray = registry.spec(LAB), registry.spec(XRAY)
    assert lab.added and lab.family == "timm" and lab.task == "both" and (lab.patch, lab.depth, lab.heads) == (16, 12, 6)
    assert xray.added and xray.family == "hf" and xray.task == "both" and (xray.depth, xray.heads, xray.dim) == (4, 3, 192)
    assert cache.get_model(LAB).labels == ["deer", "fox", "empty frame"]
    assert cache.get_model(XRAY).labels == ["normal", "nodule", "effusion"]  # from the folder's config
    assert cache.get_model(XRAY).mean == (0.5, 0.5, 0.5)  # its own preprocessing


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
def test_the_added_models_are_on_every_list_that_can_use_them_after_vitvizs_own(installed):
    from vitviz.specs import views as declared

    for field in (declared.ATTENTION["model"], declared.CLASSIFY["model"], declared.FORWARD["model"],
                  declared.INSIDE_HEAD["model"], declared.FEATURE_PCA["model"], declared.RELEVANCE["model"],
                  declared.VS_VIT):
        options = list(field.options())
        assert options[-2:] == [LAB, XRAY], (field.name, options)
    assert LAB in declared.VS_CLASSIFIER.options() and XRAY not in declared.VS_CLASSIFIER.options()  # timm only
    assert LAB not in declared.VS_CNN.options()
    assert cache.choice_label(LAB) == f"{LAB} (added by this server)"
    assert cache.choice_label("DINO ViT-S/8") in ("DINO ViT-S/8", "DINO ViT-S/8: needs download")


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
@pytest.mark.parametrize("key", [LAB, XRAY])
def test_every_view_that_can_use_an_added_model_answers_with_it(installed, key):
    from vitviz.views import VIEWS, show

    rgb = np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)
    answered = {}
    for name, view in VIEWS.items():
        fields = [f for f in view.fields if f.kind == "choice" and key in f.options()]
        if not fields:
            continue
        picture = rgb if any(f.kind == "image" for f in view.fields) else None
        given = {"predict": {"patches": "1,1;2,2"}}.get(name, {})  # a view with nothing to test by default
        values = view.check({f.name: key for f in fields} | given)
        if name == "shuffle" and key == XRAY:  # takes a timm ViT apart: refused in words, naming the model
            with pytest.raises(ValueError, match="transformers model: choose another model"):
                show(name, picture, values)
            continue
        shown = show(name, picture, values)
        answered[name] = shown
        assert shown.figures, name
        if name != "compare_models":
            assert shown.model == key, (name, shown.model)
    wanted = {"attention", "rollout", "attention_distance", "inside_head", "feature_pca", "classify", "relevance",
              "forward_pass", "compare_models", "receptive_field", "deletion", "randomise", "predict"}
    assert wanted <= set(answered), wanted - set(answered)
    labels = cache.get_model(key).labels
    assert set(answered["forward_pass"].numbers["top5"]) <= set(labels) or answered["forward_pass"].numbers


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
def test_classify_answers_with_the_added_labels(installed):
    from vitviz.views import VIEWS, show

    rgb = np.random.default_rng(1).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    for key, labels in ((LAB, {"deer", "fox", "empty frame"}), (XRAY, {"normal", "nodule", "effusion"})):
        shown = show("classify", rgb, VIEWS["classify"].check({"model": key}))
        top = shown.numbers["top5"]
        assert set(top) == labels and abs(sum(top.values()) - 1) < 1e-6, top


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
def test_the_command_line_lists_the_added_models_and_why_the_rest_were_left_out(models_file):
    out = subprocess.run([sys.executable, "-m", "vitviz.tools.cli", "models", "--models", str(models_file)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 3, out.stderr  # done in part: some entries were left out
    assert f"added    {LAB}" in out.stdout and f"added    {XRAY}" in out.stdout
    assert "left out Pickled: weights: only .safetensors files are loaded" in out.stdout
    assert "left out of" in out.stderr and "Four labels: labels:" in out.stderr


@pytest.mark.slow  # builds and checks a ViT-S/16 checkpoint (about 7 s), then runs every view
def test_a_bundle_made_with_an_added_model_is_made_again_byte_for_byte_with_the_models_file(installed, models_file,
                                                                                         tmp_path):
    from vitviz.core import images
    from vitviz.tools import bundle
    from vitviz.views import VIEWS

    rgb = images.load_rgb(ROOT / "vitviz" / "assets" / "examples" / "cat.png", images.INTAKE_SHORT_SIDE)
    made = bundle.write("attention", VIEWS["attention"].check({"model": LAB, "layer": 5}), rgb, tmp_path)
    with zipfile.ZipFile(made) as z:
        params = json.loads(z.read("params.json"))
        pngs = {Path(n).name: z.read(n) for n in z.namelist() if n.endswith(".png") and n.startswith("figures/")}
    assert params["model"] == LAB and pngs
    out = subprocess.run([sys.executable, "-m", "vitviz.tools.cli", "bundle", str(made), "--out",
                          str(tmp_path / "again"), "--models", str(models_file)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    again = {p.name: p.read_bytes() for p in (tmp_path / "again").rglob("*.png")}
    assert set(pngs) <= set(again)
    for name, data in pngs.items():
        assert again[name] == data, name
    without = subprocess.run([sys.executable, "-m", "vitviz.tools.cli", "bundle", str(made), "--out",
                              str(tmp_path / "none")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert without.returncode != 0 and LAB in without.stderr  # without the file the model is unknown, said so


def test_a_models_file_that_cannot_be_read_is_refused_in_words(tmp_path):
    with pytest.raises(ValueError, match="Cannot read the models file"):
        added.parse(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[model]\nname = 1")
    with pytest.raises(ValueError, match="not valid TOML"):
        added.parse(bad)
    odd = tmp_path / "odd.toml"
    odd.write_text('[[model]]\nname = "A"\ntimm = "vit_small_patch16_224"\nhub = "org/a"\nweights = "x.bin"\n'
                   '[[model]]\nname = "B"\ncolour = "red"\n[[model]]\ntimm = "vit_small_patch16_224"\n'
                   '[[model]]\nname = "C"\ntimm = "vit_small_patch16_224"\nhub = "org/c"\nmean = [1, 2]\n')
    entries, problems = added.parse(odd)
    assert entries == []
    assert [(p.name, p.field) for p in problems] == [("A", "weights"), ("B", "colour"), ("model #3", "name"),
                                                     ("C", "mean")]


def test_a_model_object_from_a_notebook_is_recorded_as_an_independent_computation_says(rgb_cat):
    """``attention_maps`` on a timm model object: its class-token attention equals timm's own attention
    probabilities (``timm.utils.AttentionExtract``, the eager path) for every layer and head."""
    import timm
    import torch
    from timm.utils import AttentionExtract

    from vitviz.analyses.attention import analyse
    from vitviz.views import attention_maps

    torch.manual_seed(3)
    model = timm.create_model("vit_small_patch16_224", pretrained=False, dynamic_img_size=True).eval()
    shown = attention_maps(model, rgb_cat, name="notebook ViT-S/16", layer=11)
    assert shown.model == "notebook ViT-S/16" and shown.figures["heads"].size[0] > 300
    try:
        runner = cache.get_model("notebook ViT-S/16")
        a = analyse(runner, rgb_cat, 224)
        x = runner.normalise(a.fitted.image)
        for blk in model.blocks:  # timm's own eager softmax, which the fused path skips
            blk.attn.fused_attn = False
        with torch.no_grad():
            probs = AttentionExtract(model, method="fx")(x)
        for layer, name in enumerate(sorted(probs, key=lambda n: int(n.split(".")[1]))):
            want = probs[name][0, :, 0, 1:].reshape(-1, *a.maps.grid).numpy()
            got = np.stack([a.maps.cls_map(layer, h) for h in range(6)])
            np.testing.assert_allclose(got, want, atol=2e-5, err_msg=f"layer {layer}")
    finally:
        for blk in model.blocks:
            blk.attn.fused_attn = True
        listing.remove("notebook ViT-S/16")
        cache.forget("notebook ViT-S/16")


def test_a_model_vitviz_cannot_record_is_refused_with_why():
    import torch

    from vitviz.views import use_model

    with pytest.raises(ValueError, match="cannot record the attention of Linear"):
        use_model(torch.nn.Linear(3, 3), "a line")
    assert "a line" not in registry.REGISTRY


def _tiny_hf(kind: str):
    import torch
    from transformers import (DeiTConfig, DeiTModel, Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig,
                              Dinov2WithRegistersModel)

    torch.manual_seed(0)
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, image_size=112)
    if kind == "dinov2":
        return Dinov2Model(Dinov2Config(patch_size=14, **small))
    if kind == "dinov2+registers":
        return Dinov2WithRegistersModel(Dinov2WithRegistersConfig(patch_size=14, num_register_tokens=4, **small))
    return DeiTModel(DeiTConfig(patch_size=16, **small), add_pooling_layer=False)


@pytest.mark.parametrize("make, prefix", [
    (lambda: __import__("timm").create_model("vit_small_patch14_reg4_dinov2", pretrained=False, img_size=112,
                                             dynamic_img_size=True), 5),
    (lambda: __import__("timm").create_model("deit_tiny_patch16_224", pretrained=False, dynamic_img_size=True), 1),
    (lambda: _tiny_hf("dinov2"), 1),
    (lambda: _tiny_hf("dinov2+registers"), 5),
    (lambda: _tiny_hf("deit"), 2),  # DeiT's class and distillation tokens
], ids=["timm DINOv2+registers", "timm DeiT", "transformers DINOv2", "transformers DINOv2+registers",
        "transformers DeiT"])
def test_the_vit_families_vitviz_records_are_accepted_and_their_attention_recorded(make, prefix):
    """Each family: its prefix tokens found, a recorded forward passes the start check, and the Attention view's
    class-token rows are distributions over the patches (with the prefix's share left out, at most 1)."""
    from vitviz.analyses.attention import analyse
    from vitviz.views import use_model

    name = f"family probe {prefix}"
    try:
        key = use_model(make(), name, resolution=112)
        runner = cache.get_model(key)
        assert runner.spec.prefix == prefix
        added.check(runner)
        rgb = np.random.default_rng(5).integers(0, 256, (112, 112, 3), dtype=np.uint8)
        a = analyse(runner, rgb, 112)
        sums = a.maps.cls.sum(-1)  # (L, H): the class token's attention to the patches
        assert a.maps.layers == runner.depth and np.all(sums > 0) and np.all(sums <= 1 + 1e-5)
    finally:
        listing.remove(name)
        cache.forget(name)


def test_hostile_entries_are_each_reported_with_their_field_and_the_server_starts_with_the_rest(tmp_path):
    """Every way one entry can be broken leaves that entry out, named with the field at fault and why; none stops
    the server (a 0-d head, a pickle renamed .safetensors, a header claiming 1 TB, a CNN with weights, a hub name
    offline, nan/inf/zero statistics, a position table of another size, a labels file of 5 MB)."""
    import struct

    import timm
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    good = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=2).state_dict()
    save_file(good, str(tmp_path / "good.safetensors"))
    save_file({**good, "head.weight": torch.tensor(1.0)}, str(tmp_path / "zero_d.safetensors"))
    torch.save(good, tmp_path / "pickled.safetensors")
    (tmp_path / "huge.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}" * 10)
    save_file(timm.create_model("resnet18", pretrained=False).state_dict(), str(tmp_path / "cnn.safetensors"))
    at384 = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=2, img_size=384).state_dict()
    save_file(at384, str(tmp_path / "at384.safetensors"))
    (tmp_path / "two.txt").write_text("cat\ndog\n")
    (tmp_path / "big.txt").write_text("x\n" * (2_600_000))
    entry = 'timm = "vit_tiny_patch16_224"\nweights = "good.safetensors"\nlabels = "two.txt"'
    (tmp_path / "models.toml").write_text(f"""
[[model]]
name = "Good"
{entry}
[[model]]
name = "Zero-d head"
timm = "vit_tiny_patch16_224"
weights = "zero_d.safetensors"
[[model]]
name = "Renamed pickle"
timm = "vit_tiny_patch16_224"
weights = "pickled.safetensors"
[[model]]
name = "Huge header"
timm = "vit_tiny_patch16_224"
weights = "huge.safetensors"
[[model]]
name = "A CNN"
timm = "resnet18"
weights = "cnn.safetensors"
[[model]]
name = "Hub offline"
timm = "vit_tiny_patch16_224"
hub = "someone/some-vit"
[[model]]
name = "NaN mean"
{entry}
mean = [nan, 0.5, 0.5]
[[model]]
name = "Inf std"
{entry}
std = [inf, 0.5, 0.5]
[[model]]
name = "Zero std"
{entry}
std = [0.0, 0.5, 0.5]
[[model]]
name = "Other position table"
timm = "vit_tiny_patch16_224"
weights = "at384.safetensors"
[[model]]
name = "Huge labels"
timm = "vit_tiny_patch16_224"
weights = "good.safetensors"
labels = "big.txt"
""")
    try:
        report = added.install(tmp_path / "models.toml", adopt=cache.adopt, forget=cache.forget)
        assert list(report.added) == ["Good"]
        faults = {p.name: (p.field, p.why) for p in report.problems}
        assert faults["Zero-d head"] == ("weights", "head.weight has shape (); a classifier's head is (classes, width).")
        assert faults["Renamed pickle"][0] == "weights" and "not a safetensors file" in faults["Renamed pickle"][1]
        assert faults["Huge header"][0] == "weights" and "header is missing, too large" in faults["Huge header"][1]
        assert faults["A CNN"][0] == "timm" and "not a Vision Transformer" in faults["A CNN"][1]
        assert faults["Hub offline"][0] == "hub" and "cannot be reached" in faults["Hub offline"][1]
        assert faults["NaN mean"] == ("mean", "must be three finite numbers (not nan or inf).")
        assert faults["Inf std"] == ("std", "must be three finite numbers (not nan or inf).")
        assert faults["Zero std"][0] == "std" and "positive" in faults["Zero std"][1]
        assert faults["Other position table"][0] == "weights" and "(1, 577, 192)" in faults["Other position table"][1]
        assert faults["Huge labels"][0] == "labels" and "at most 4 MiB" in faults["Huge labels"][1]
        assert len(faults) == 10
        # the cache keeps the checked model; once it lets it go, the spec's own loader loads it again (the cache
        # knows nothing of models files), and taking the file's models off the list takes them out of the cache
        first = cache.get_model("Good")
        assert cache.loaded("Good") and registry.REGISTRY["Good"].loader is not None
        cache.forget("Good")
        again = cache.get_model("Good")
        assert again is not first and again.spec.key == "Good" and again.weights_id == first.weights_id
        added.remove(forget=cache.forget)
        assert not cache.loaded("Good") and "Good" not in registry.REGISTRY
    finally:
        added.remove(forget=cache.forget)


def test_the_specs_hold_no_run_time_models():
    """vitviz's own models are read-only data in specs; what is added while the server runs lives in
    vitviz.models.listing, and the registry lists it after vitviz's own."""
    import dataclasses

    from vitviz.models import listing

    with pytest.raises(TypeError):
        registry.OWN["x"] = registry.OWN[registry.OFFLINE_KEY]  # type: ignore[index]
    assert not hasattr(registry.REGISTRY, "__setitem__") and not hasattr(registry, "add")
    extra = dataclasses.replace(registry.OWN[registry.OFFLINE_KEY], key="listed for a moment", added=True)
    try:
        listing.add(extra)
        assert registry.REGISTRY["listed for a moment"] is extra and "listed for a moment" not in registry.OWN
        assert registry.keys("attention")[-1] == "listed for a moment"  # after vitviz's own
        with pytest.raises(ValueError, match="already one of vitviz's own"):
            listing.add(dataclasses.replace(extra, key=registry.OFFLINE_KEY))
    finally:
        listing.remove("listed for a moment")
    assert "listed for a moment" not in registry.REGISTRY and len(registry.REGISTRY) >= len(registry.OWN)


@pytest.mark.parametrize("change, field, why", [
    ({"name": 3}, "name", "every model needs a name (the text shown in the lists)."),
    ({"name": "  "}, "name", "every model needs a name (the text shown in the lists)."),
    ({"timm": ""}, "timm", "must be a non-empty text."),
    ({"labels": 7}, "labels", "must be a non-empty text."),
    ({"mean": [1, 2]}, "mean", "must be three numbers, one per colour channel."),
    ({"mean": [True, 1, 2]}, "mean", "must be three numbers, one per colour channel."),
    ({"mean": "0.5"}, "mean", "must be three numbers, one per colour channel."),
    ({"std": [0, 1, 1]}, "std", "must be three positive numbers (a picture is divided by them)."),
    ({"std": [1, float("nan"), 1]}, "std", "must be three finite numbers (not nan or inf)."),
    ({"resolution": True}, "resolution", "must be a whole number of pixels from 16 to 1024."),
    ({"resolution": 224.0}, "resolution", "must be a whole number of pixels from 16 to 1024."),
    ({"resolution": 1025}, "resolution", "must be a whole number of pixels from 16 to 1024."),
    ({"colour": "red", "resolution": 3}, "colour", "not a field of a model (the fields are name, timm, transformers, "
                                                   "weights, hub, labels, mean, std, resolution)."),
])
def test_each_field_of_an_entry_is_checked_and_named(tmp_path, change, field, why):
    """One fault at a time in an otherwise good entry: the field named and the sentence a reader is told (the
    types by pydantic in strict mode, so TOML's true is not 1 and 224.0 is not a whole number)."""
    (tmp_path / "w.safetensors").write_bytes(b"")
    good = {"name": " Lab ViT ", "timm": "vit_small_patch16_224", "weights": "w.safetensors",
            "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "resolution": 224}
    e = added._entry(good, tmp_path)
    assert (e.name, e.mean, e.std, e.resolution) == ("Lab ViT", (0.5,) * 3, (0.25,) * 3, 224)
    assert e.weights == (tmp_path / "w.safetensors").resolve()
    with pytest.raises(added.EntryError) as err:
        added._entry({**good, **change}, tmp_path)
    assert (err.value.field, str(err.value)) == (field, why)


def _header_only(path: Path, tensors: dict, claimed_end: int | None = None) -> Path:
    """A safetensors file of ``tensors`` (name -> (dtype, shape)) whose data is a hole: the header is written and the
    file truncated to the length the data takes (a sparse file: no disk used), or to ``claimed_end`` bytes of data."""
    import math
    import struct

    sizes = {"F32": 4, "F16": 2}
    header, at = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = math.prod(shape) * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + (at if claimed_end is None else claimed_end))
    return path


def _vit_tiny_tensors(classes: int) -> dict:
    import timm
    import torch

    with torch.device("meta"):
        model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=classes)
    return {k: ("F32", tuple(v.shape)) for k, v in model.state_dict().items()}


def test_weights_larger_than_a_model_may_take_are_refused_from_their_header_before_anything_is_allocated(tmp_path,
                                                                                                       monkeypatch):
    """issue 68 item 16: a sparse 8 GB safetensors in a models file made timm build a head of 402,653,184 classes
    ("can't allocate memory: you tried to allocate 1649267441664 bytes"). The header's sizes are checked against
    the file and against the budget (added.MODEL_BYTES) first, in vitviz's words; nothing is allocated (files of
    8 GiB and 1.5 TiB claimed are sparse: no disk is used). A spy on timm's model building and on safetensors'
    loading fails the test if either is reached with real tensors (only the meta device may be used)."""
    import safetensors.torch
    import timm
    import torch

    reached: list[str] = []
    build = timm.create_model

    def spy_build(name, *args, pretrained=False, **kwargs):
        if pretrained or torch.empty(0).device.type != "meta":
            reached.append(f"timm.create_model({name!r}, pretrained={pretrained})")
            raise AssertionError("a model was built with real tensors")
        return build(name, *args, pretrained=pretrained, **kwargs)

    def spy_load(*args, **kwargs):
        reached.append("safetensors.torch.load_file")
        raise AssertionError("the weights were read")

    monkeypatch.setattr(timm, "create_model", spy_build)
    monkeypatch.setattr(safetensors.torch, "load_file", spy_load)
    liar = _header_only(tmp_path / "liar.safetensors",
                        {**_vit_tiny_tensors(2), "head.weight": ("F32", (402_653_184, 1024))}, claimed_end=8 * 2**30)
    big = _header_only(tmp_path / "big.safetensors", {**_vit_tiny_tensors(2), "head.weight": ("F16", (22_369_622, 192)),
                                                      "head.bias": ("F16", (22_369_622,))})
    assert big.stat().st_size > 8 * 2**30 and big.stat().st_blocks * 512 < 2**20  # 8 GiB, sparse
    (tmp_path / "models.toml").write_text("""
[[model]]
name = "Liar"
timm = "vit_tiny_patch16_224"
weights = "liar.safetensors"
[[model]]
name = "Big"
timm = "vit_tiny_patch16_224"
weights = "big.safetensors"
""")
    try:
        report = added.install(tmp_path / "models.toml", adopt=cache.adopt, forget=cache.forget)
    finally:
        added.remove(forget=cache.forget)
    assert reached == []
    faults = {p.name: (p.field, p.why) for p in report.problems}
    assert not report.added and set(faults) == {"Liar", "Big"}
    assert faults["Liar"] == ("weights", "the header says its tensors take 1,536.0 GiB, but the file holds 8.0 GiB "
                                         "after it: the file is cut short, or not what it claims.")
    field, why = faults["Big"]
    numbers = sum(int(np.prod(shape)) for name, (_, shape) in _vit_tiny_tensors(2).items()
                  if not name.startswith("head.")) + 22_369_622 * 193  # the tiny ViT with the big head
    assert field == "weights" and why.startswith(f"its tensors hold {numbers:,} numbers, 16.1 GiB once loaded as "
                                                 "float32")
    assert "at most 4.0 GiB (VITVIZ_MODEL_MB)" in why
    for said in faults.values():
        assert "allocate" not in said[1] and "RuntimeError" not in said[1]


def test_a_safetensors_header_whose_sizes_do_not_add_up_is_not_a_safetensors_file(tmp_path):
    import struct

    path = tmp_path / "w.safetensors"
    text = json.dumps({"w": {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(16))
    with pytest.raises(added.EntryError, match=r"tensor 'w', \(1000, 1000\) as F32, takes 4,000,000 bytes, but its "
                                               r"byte range holds 16"):
        added.safetensors_header(path)
    text = json.dumps({"w": {"shape": [2], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(8))
    with pytest.raises(added.EntryError, match="has no dtype or byte range safetensors writes"):
        added.safetensors_header(path)


@pytest.mark.parametrize("dtype", sorted(added.DTYPE_BITS))
def test_every_dtype_safetensors_knows_is_sized_from_the_header_as_safetensors_sizes_it(tmp_path, dtype):
    """The newer dtypes (F8_E8M0, 4- and 6-bit floats, complex) were 'not a safetensors file'. Each is sized by its
    bits, packed across bytes, and safetensors itself (its own header check, in Rust) opens the same file."""
    import struct

    from safetensors import safe_open

    shape = [4, 4]
    nbytes = 16 * added.DTYPE_BITS[dtype] // 8
    path = tmp_path / "w.safetensors"
    text = json.dumps({"w": {"dtype": dtype, "shape": shape, "data_offsets": [0, nbytes]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(nbytes))
    assert added.safetensors_header(path) == {"w": (dtype, shape, nbytes)}
    with safe_open(str(path), framework="numpy") as f:
        assert f.get_slice("w").get_dtype() == dtype and f.get_slice("w").get_shape() == shape


def test_an_unknown_dtype_is_said_as_one(tmp_path):
    import struct

    path = tmp_path / "w.safetensors"
    text = json.dumps({"w": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(8))
    with pytest.raises(added.EntryError, match=r"^unknown dtype 'Q7' \(tensor 'w'\): not one of the 22 safetensors "
                                               "knows") as caught:
        added.safetensors_header(path)
    assert caught.value.field == "weights"
    text = json.dumps({"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(2))
    with pytest.raises(added.EntryError, match=r"\(3,\) as F4, does not fill whole bytes"):
        added.safetensors_header(path)


def test_a_local_folder_whose_config_needs_its_own_code_is_refused_in_its_own_field(tmp_path, monkeypatch):
    """A local folder's config that transformers refuses for wanting its own code was blamed on the 'hub' field."""
    from transformers import AutoConfig

    _tiny_hf("dinov2").save_pretrained(tmp_path / "folder", safe_serialization=True)

    def wants_code(*args, **kwargs):
        raise ValueError("... set the option `trust_remote_code=True` to remove this error.")

    monkeypatch.setattr(AutoConfig, "from_pretrained", wants_code)
    entry = added.Entry(name="Folder", transformers=tmp_path / "folder")
    with pytest.raises(added.EntryError) as caught:
        added._hf_module(entry, None)
    assert caught.value.field == "transformers"
    assert str(caught.value).startswith("the checkpoint asks for its own code")


def test_a_transformers_folder_with_code_of_its_own_is_refused_in_vitvizs_words(tmp_path):
    """issue 68 item 16: a folder whose config.json names its own code (auto_map) got transformers' advice to pass
    trust_remote_code=True and a link to hf.co. vitviz refuses it before transformers reads it."""
    folder = tmp_path / "custom"
    _tiny_hf("dinov2").save_pretrained(folder, safe_serialization=True)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "my-vit", "auto_map": {
        "AutoConfig": "configuration_my.MyConfig", "AutoModel": "modeling_my.MyModel"}}))
    (folder / "modeling_my.py").write_text("raise SystemExit('this must never run')\n")
    (tmp_path / "models.toml").write_text('[[model]]\nname = "Custom"\ntransformers = "custom"\n')
    try:
        report = added.install(tmp_path / "models.toml", adopt=cache.adopt, forget=cache.forget)
    finally:
        added.remove(forget=cache.forget)
    (problem,) = report.problems
    assert problem.field == "transformers" and problem.why.startswith(
        "its config.json asks for the checkpoint's own code (auto_map): vitviz runs only transformers' own classes")
    assert "trust_remote_code" not in problem.why and "hf.co" not in problem.why and not report.added


def _dinov2_folder(folder: Path, layers_said: int) -> Path:
    """A tiny transformers DINOv2 folder whose weights hold 2 layers and whose config.json says ``layers_said``."""
    import shutil

    from transformers import Dinov2Config, Dinov2Model

    _tiny_hf("dinov2").save_pretrained(folder.with_name("two"), safe_serialization=True)
    config = Dinov2Config.from_pretrained(folder.with_name("two"))
    config.num_hidden_layers = layers_said
    config.stage_names = ["stem"] + [f"stage{i}" for i in range(1, layers_said + 1)]
    config.out_features = config.out_indices = None
    config.save_pretrained(folder)
    shutil.copy(folder.with_name("two") / "model.safetensors", folder / "model.safetensors")
    return folder


def test_a_transformers_config_is_counted_against_the_budget_before_its_weights_are_loaded(tmp_path, monkeypatch):
    """The reviewer's case: weights of 2 layers under a config.json of 200 passed the header's count (the weights
    are small) and transformers built 200 layers. The architecture the config describes is counted on the meta
    device against VITVIZ_MODEL_MB (here 1 MiB: 20 layers of width 64 take about 4 MB, the weights 0.5 MB) and
    nothing is loaded."""
    from transformers import AutoModel

    _dinov2_folder(tmp_path / "tall", 20)
    (tmp_path / "models.toml").write_text('[[model]]\nname = "Tall"\ntransformers = "tall"\n')
    monkeypatch.setattr(added, "MODEL_BYTES", 2**20)

    def never(*args, **kwargs):
        raise AssertionError("the weights were loaded before the architecture was counted")

    monkeypatch.setattr(AutoModel, "from_pretrained", never)
    try:
        report = added.install(tmp_path / "models.toml", adopt=cache.adopt, forget=cache.forget)
    finally:
        added.remove(forget=cache.forget)
    (problem,) = report.problems
    assert not report.added and problem.field == "transformers"
    assert problem.why.startswith("the architecture its config.json describes (dinov2, 20 layers) holds ")
    assert "at most 1 MiB (VITVIZ_MODEL_MB)" in problem.why


@pytest.mark.parametrize("layers_said, said", [
    (3, "(3 layers): 18 of the model's tensors ("),
    (1, "(1 layers): 18 tensors of the weights (e.g. 'encoder.layer.1."),
], ids=["weights missing", "weights left over"])
def test_a_transformers_folder_whose_weights_do_not_cover_its_config_is_refused_in_words(tmp_path, layers_said, said):
    """Weights of 2 layers under a config.json of 3 were added without a word, the third layer random (served under
    the entry's name); of 1, the second layer's weights went unused. Both are refused, with the counts."""
    _dinov2_folder(tmp_path / "odd", layers_said)
    (tmp_path / "models.toml").write_text('[[model]]\nname = "Odd"\ntransformers = "odd"\n')
    try:
        report = added.install(tmp_path / "models.toml", adopt=cache.adopt, forget=cache.forget)
    finally:
        added.remove(forget=cache.forget)
    assert not report.added and len(report.problems) == 1
    (problem,) = report.problems
    assert problem.field == "weights" and said in problem.why, problem.why
    assert problem.why.startswith("the weights do not cover the architecture its config.json describes")
    if layers_said == 3:
        layer = _tiny_hf("dinov2").encoder.layer[0]
        assert f"({sum(p.numel() for p in layer.parameters()):,} numbers" in problem.why
