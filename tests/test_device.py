"""The device path's server side: the graphs (ONNX) give the server's numbers, the embedded model's ships, the
runtime files are the ones the README names, and the app serves both with an immutable cache."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from vitviz import assets
from vitviz.models import cache, device
from vitviz.specs import registry

ort = pytest.importorskip("onnxruntime")


def _run(path, x: np.ndarray, names: list[str]) -> dict:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(None, {"pixels": x})))


def test_the_embedded_models_graph_ships_and_gives_the_servers_numbers(rgb_cat):
    """The graph of the offline model at its size is in the package under its content name; run on the CPU it
    gives the server's class-token maps, queries, keys and logits for the checkpoint's own input."""
    from vitviz.analyses.attention import analyse

    runner = cache.get_model(registry.OFFLINE_KEY)
    name = device.graph_name(runner, runner.resolution)
    assert (assets.TINY / name).is_file() and device.graph_file(runner, runner.resolution) == assets.TINY / name
    m = device.manifest(runner, runner.resolution)
    assert m["file"] == name and m["bytes"] == (assets.TINY / name).stat().st_size < 1_200_000
    assert m["labels"] == runner.labels and m["outputs"][:2] == ["logits", "cls"] and len(m["outputs"]) == 2 + 2 * 4
    a = analyse(runner, rgb_cat, checkpoint_input=True)
    x = device.reference_input(runner, rgb_cat, runner.resolution)
    assert np.array_equal(x, runner.preprocess(rgb_cat).numpy())  # the checkpoint path's own input
    out = _run(assets.TINY / name, x, m["outputs"])
    np.testing.assert_allclose(out["cls"], a.maps.cls, atol=1e-6)
    np.testing.assert_allclose(out["logits"], a.maps.logits, atol=1e-4)
    for layer, keys in enumerate(a.maps.keys):
        np.testing.assert_allclose(out[f"q{layer}"], keys.q, atol=1e-5)
        centred = out[f"k{layer}"] - out[f"k{layer}"].mean(1, keepdims=True)  # the server keeps its keys centred
        np.testing.assert_allclose(centred, keys.k, atol=1e-5)


@pytest.mark.slow  # exports a 22 M-parameter graph (about 5 s)
def test_a_registry_models_graph_is_made_once_with_half_weights_and_agrees_with_the_server(tmp_path, monkeypatch,
                                                                                         dino_s8_dir, rgb_cat):
    """DINO ViT-S/8's architecture (random weights, the real config) loaded by the registry's loader: its graph is
    made on first use, named by content, stored with float16 weights (half the bytes), and its class-token maps
    stay within 1e-3 of each map's largest value of the server's."""
    import torch

    from vitviz.analyses.attention import probe_for
    from vitviz.models import loaders

    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
    m = device.manifest(runner, 224)
    assert (tmp_path / m["file"]).is_file() and re.fullmatch(r"[0-9a-f]{20}\.onnx", m["file"])
    params = sum(p.numel() for p in runner.trace(lambda module, _f: list(module.parameters())))
    assert m["bytes"] < 2.2 * params  # float16 weights: about 2 bytes each (float32 would be 4)
    assert device.manifest(runner, 224)["file"] == m["file"]  # made once: the same file again
    x = device.reference_input(runner, rgb_cat, 224)
    maps = runner.run(probe_for(runner, checkpoint_input=True), torch.from_numpy(x))  # the server's own forward
    out = _run(tmp_path / m["file"], x, m["outputs"])
    worst = np.abs(out["cls"] - maps.cls).max(-1) / maps.cls.max(-1)
    assert worst.max() < 1e-3, worst.max()


def test_a_model_without_class_token_attention_is_not_made_into_a_graph():
    from vitviz.models import loaders

    cnn = loaders.load_embedded_cnn()
    with pytest.raises(ValueError, match="cannot run on this device"):
        device.export(cnn, 64)


def test_the_runtime_files_are_the_ones_the_readme_names():
    table = (assets.ORT / "README.md").read_text()
    for name in assets.ORT_FILES:
        data = (assets.ORT / name).read_bytes()
        row = re.search(rf"`{re.escape(name)}` \| ([\d,]+) \| `([0-9a-f]{{64}})`", table)
        assert row, name
        assert int(row[1].replace(",", "")) == len(data) and row[2] == hashlib.sha256(data).hexdigest(), name


def test_the_app_serves_the_runtime_and_the_graphs_with_an_immutable_cache(app_url):
    import httpx

    runner = cache.get_model(registry.OFFLINE_KEY)
    name = device.graph_name(runner, runner.resolution)
    for path, media in ((f"vitviz/ort/{assets.ORT_FILES[0]}", "text/javascript"),
                        (f"vitviz/ort/{assets.ORT_FILES[2]}", "application/wasm"),
                        (f"vitviz/device/{name}", "application/octet-stream")):
        r = httpx.get(app_url + path, timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith(media), path
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert len(httpx.get(app_url + f"vitviz/device/{name}", timeout=30).content) == (assets.TINY / name).stat().st_size
    for bad in ("vitviz/ort/../../__init__.py", "vitviz/ort/README.md", "vitviz/device/..%2Fmodel.safetensors",
                "vitviz/device/model.safetensors", "vitviz/device/0000.onnx", "vitviz/device/" + "a" * 5000 + ".onnx"):
        assert httpx.get(app_url + bad, timeout=30).status_code == 404, bad[:40]
