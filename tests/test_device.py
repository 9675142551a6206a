"""The device path's server side: the graphs (ONNX) give the server's numbers, the embedded model's ships, the
runtime files are the ones the README names, and the app serves both with an immutable cache."""

from __future__ import annotations

import hashlib
import os
import re
import time

import numpy as np
import pytest
import torch

from vitviz import assets
from vitviz.models import cache, device
from vitviz.specs import registry

ort = pytest.importorskip("onnxruntime")


def _run(path, x: np.ndarray, pos: np.ndarray, names: list[str]) -> dict:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(None, {"pixels": x, "pos": pos})))


def _agrees(out: dict, a, rel: float) -> None:
    """The graph's class-token maps within ``rel`` of each map's largest value of the server's, and its queries
    and (centred) keys within ``rel`` of their largest size: the measured agreement the manifest states."""
    worst = np.abs(out["cls"] - a.maps.cls).max(-1) / a.maps.cls.max(-1)
    assert worst.max() <= rel, worst.max()
    for layer, keys in enumerate(a.maps.keys):
        q, k = out[f"q{layer}"], out[f"k{layer}"] - out[f"k{layer}"].mean(1, keepdims=True)  # the server centres
        assert np.abs(q - keys.q).max() <= rel * np.abs(keys.q).max(), layer
        assert np.abs(k - keys.k).max() <= rel * np.abs(keys.k).max(), layer


def test_the_embedded_models_graph_ships_and_gives_the_servers_numbers(rgb_cat):
    """The graph of the offline model is in the package under its content name; run on the CPU it gives the
    server's class-token maps, queries, keys and logits for the model's one input (its own 64-px centre crop)."""
    from vitviz.analyses.attention import analyse

    runner = cache.get_model(registry.OFFLINE_KEY)
    name = device.graph_name(runner)
    assert (assets.TINY / name).is_file() and device.graph_file(runner)[0] == assets.TINY / name
    assert sorted(p.name for p in assets.TINY.glob("*.onnx")) == [name]  # no graph of an earlier version ships
    m = device.manifest(runner, 224)
    assert m["file"] == name and m["bytes"] == (assets.TINY / name).stat().st_size < 1_200_000
    assert m["labels"] == runner.labels and m["outputs"][:2] == ["logits", "cls"]
    assert m["outputs"][2 + 2 * 4:] == ["norms", "updates", "cosine", "embedded", "final", "lens", "lens_patches"]
    assert m["policy"] == "checkpoint" and m["side"] == 64 and m["pos_prefix"] == 1 and m["width"] == 96  # its own 64
    a = analyse(runner, rgb_cat, 224)  # the Attention tab's analysis: the model's one input, at its own 64 px
    assert a.maps.grid == (8, 8)
    x = device.reference_input(runner, rgb_cat, 224)
    assert np.array_equal(x, runner.normalise(a.fitted.image).numpy())  # every view's own input
    pos = device.position_embedding(runner, a.maps.grid)
    out = _run(assets.TINY / name, x, pos, m["outputs"])
    _agrees(out, a, 1e-5)
    assert np.abs(out["logits"] - a.maps.logits).max() <= 1e-5 * np.abs(a.maps.logits).max()


@pytest.mark.slow  # exports a 22 M-parameter graph twice (about 10 s)
def test_the_weights_precision_is_decided_by_measuring_and_the_graph_serves_every_side_and_shape(
        tmp_path, monkeypatch, dino_s8_dir, rgb_cat):
    """DINO ViT-S/8's architecture (random weights, the real config) loaded by the registry's loader: its graph is
    made on first use, named by content, one for every side and aspect (the whole picture: 28×42 patches at 224,
    20×30 at 160). Float16 weights are used only where measuring shows the maps still agree within 1e-3 of their
    largest value: with random weights they do (half the bytes); with the query and key projections ×8 (sharp
    heads, as trained DINO's) neither float16 nor float16 with q and k in float32 does, so the graph is float32."""
    import re

    import torch

    from vitviz.analyses.attention import analyse
    from vitviz.models import loaders

    from conftest import module_of

    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    for sharp in (False, True):
        runner = loaders.load_hf(dino_s8_dir, spec=registry.REGISTRY["DINO ViT-S/8"])
        if sharp:
            with torch.no_grad():
                for n, p in module_of(runner).named_parameters():
                    if re.search(r"(q_proj|k_proj)", n):
                        p.mul_(8.0)
            runner.weights_id = "sharpened"
        m = device.manifest(runner, 224)
        assert (tmp_path / m["file"]).is_file() and re.fullmatch(r"[0-9a-f]{20}\.onnx", m["file"])
        assert device.manifest(runner, 160)["file"] == m["file"]  # one graph for every side
        params = sum(p.numel() for p in module_of(runner).parameters())
        assert m["policy"] == "keep" and m["agreement"] <= device.AGREEMENT
        if sharp:
            assert m["precision"] == "float32" and m["bytes"] > 3.5 * params  # 4 bytes a weight
        else:
            assert m["precision"] == "float16" and m["bytes"] < 2.2 * params
        for side, grid in ((224, (28, 42)), (160, (20, 30))):
            a = analyse(runner, rgb_cat, side)
            assert a.maps.grid == grid
            out = _run(tmp_path / m["file"], device.reference_input(runner, rgb_cat, side),
                       device.position_embedding(runner, grid), m["outputs"])
            _agrees(out, a, device.AGREEMENT)


def test_dinov2_with_registers_is_made_into_a_graph_and_agrees_at_any_shape(tmp_path, monkeypatch, dinov2_reg_dir,
                                                                             rgb_cat):
    """Its position table is resampled with antialiased bicubic, which ONNX lacks (the export failed at opset 17):
    the server resamples it once per grid and the graph takes it as an input."""
    from vitviz.analyses.attention import analyse
    from vitviz.analyses.forward import forward_pass
    from vitviz.models import loaders

    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    runner = loaders.load_hf(dinov2_reg_dir)
    m = device.manifest(runner, 56)
    assert m["prefix"] == 5 and m["pos_prefix"] == 1  # the registers get no position embedding
    for side in (56, 112):
        a = analyse(runner, rgb_cat, side)
        pos = device.position_embedding(runner, a.maps.grid)
        assert pos.shape == (1, 1 + a.maps.grid[0] * a.maps.grid[1], 64)
        out = _run(tmp_path / m["file"], device.reference_input(runner, rgb_cat, side), pos, m["outputs"])
        _agrees(out, a, device.AGREEMENT)
        _same_forward_pass(out, forward_pass(runner, rgb_cat, side)[1], device.AGREEMENT)  # registers: 4 of 5


def test_an_export_that_fails_falls_back_in_words_and_graphs_on_disk_are_bounded(tmp_path, monkeypatch):
    from vitviz.app import manifests as attention

    runner = cache.get_model(registry.OFFLINE_KEY)
    with monkeypatch.context() as m:
        m.setattr(device, "graph_file", lambda r: (_ for _ in ()).throw(RuntimeError("aten::op unsupported")))
        made = attention.device_manifest({"model": registry.OFFLINE_KEY, "resolution": 64})
    assert "aten::op unsupported" in made["error"] and made["model"] == registry.OFFLINE_KEY
    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    for i, age in enumerate((300, 200, 100)):  # three graphs of 1 MB, the first the least recently used
        path = tmp_path / f"{i:020x}.onnx"
        path.write_bytes(b"x" * 2**20)
        os.utime(path, (time.time() - age, time.time() - age))
    assert device.find(f"{0:020x}.onnx") is not None  # served now: the most recently used
    gone = device.prune(limit=2 * 2**20 + 10)
    assert [p.name for p in gone] == [f"{1:020x}.onnx"]
    assert device.table_bytes("0" * 20 + ".onnx", (8, 8)) is None  # no manifest named that graph here
    name = device.manifest(runner, 64)["file"]
    assert len(device.table_bytes(name, (8, 8))) == 4 * 65 * 96
    assert device.table_bytes(name, (0, 8)) is None and device.table_bytes(name, (200, 200)) is None


def test_a_graph_served_again_is_not_compressed_again_and_a_class_compresses_it_once(tmp_path, monkeypatch):
    """Serving a graph marks it used (for the pruning) in its access time, not its modification time: the
    compressed copy is made again only when the graph's content is newer (it was made again for every request,
    about two seconds of CPU for each first visit of a 43 MB graph). A class asking at one moment compresses it
    once; the others wait for that copy."""
    import gzip
    from concurrent.futures import ThreadPoolExecutor

    from vitviz.app import files

    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    name = f"{7:020x}.onnx"
    graph = tmp_path / name
    graph.write_bytes(os.urandom(2**20) + b"y" * 2**20)
    written = time.time() - 100
    os.utime(graph, (written, written))
    made, real = [], files._compress

    def counted(path, target):
        made.append(path)
        time.sleep(0.2)  # long enough for every other request to arrive meanwhile
        real(path, target)

    monkeypatch.setattr(files, "_compress", counted)
    with ThreadPoolExecutor(8) as pool:  # a class's first visits at one moment
        got = list(pool.map(lambda _: files.compressed_file(device.find(name)), range(8)))
    assert len(made) == 1 and set(got) == {tmp_path / (name + ".gz")}
    assert gzip.decompress(got[0].read_bytes()) == graph.read_bytes()
    for _ in range(3):  # later visits: served from the copy
        files.compressed_file(device.find(name))
    assert len(made) == 1
    st = graph.stat()
    assert st.st_atime > written + 50 and abs(st.st_mtime - written) < 1  # used now, written then
    graph.write_bytes(b"z" * 2**20)  # rewritten under its name (a package's graph): compressed again
    later = time.time() + 5
    os.utime(graph, (later, later))
    assert gzip.decompress(files.compressed_file(device.find(name)).read_bytes()) == b"z" * 2**20
    assert len(made) == 2


def _same_forward_pass(out: dict, fp, rel: float) -> None:
    """The graph's residual stream and logit lens are the server's Forward-pass numbers (:class:`ForwardPass`),
    each within ``rel`` of its largest value (float32 sums in another order: a few units of float32's 6e-8 per
    value, times the length of the sums)."""
    def close(got, want, what):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        assert got.shape == want.shape, (what, got.shape, want.shape)
        assert np.abs(got - want).max() <= rel * np.abs(want).max(), (what, np.abs(got - want).max())

    p = fp.prefix
    close(out["norms"][:, p:], fp.norms, "patch norms")
    close(out["norms"][:, :p], fp.prefix_norms, "prefix norms")
    close(out["updates"][0], fp.attn_update, "attention's update")
    close(out["updates"][1], fp.mlp_update, "the MLP's update")
    close(out["cosine"], fp.cls_cosine, "cosine with the last value")
    close(out["embedded"].reshape(fp.grid), fp.stages[2].glimpse, "patch embeddings' norms")
    final = next(s for s in fp.stages if s.name == "final LayerNorm")
    close(out["final"][p:].reshape(fp.grid), final.glimpse, "the final norm's")
    if fp.probs is not None:
        close(out["lens"], fp.lens, "logit lens")
        close(out["lens_patches"], fp.lens_patches, "each patch's lens")
        assert np.array_equal(out["lens"].argmax(-1), fp.lens.argmax(-1))
    else:
        assert "lens" not in out


def test_the_graph_gives_the_forward_pass_views_numbers(rgb_cat):
    """The device's Forward-pass view draws from the same graph: every token's norm per layer, what attention and
    the MLP add, the cosine with the last value, the norms of the embeddings and of the final norm, the logit lens
    and each patch's lens equal the server's :func:`forward_pass` on the same input."""
    from vitviz.analyses.forward import forward_pass

    runner = cache.get_model(registry.OFFLINE_KEY)
    m = device.manifest(runner, 224)
    _fitted, fp = forward_pass(runner, rgb_cat, 224)
    x = device.reference_input(runner, rgb_cat, 224)
    out = _run(assets.TINY / m["file"], x, device.position_embedding(runner, fp.grid), m["outputs"])
    _same_forward_pass(out, fp, 1e-5)
    assert out["lens"].shape == (4, len(runner.labels)) and out["norms"].shape == (5, 65)
    # nothing in float64: ONNX Runtime Web's builds cannot cast it (a Python float in the maths became one)
    import onnx

    graph = onnx.load(str(assets.TINY / m["file"])).graph
    doubles = [i.name for i in graph.initializer if i.data_type == onnx.TensorProto.DOUBLE]
    doubles += [n.name for n in graph.node for a in n.attribute
                if a.t.data_type == onnx.TensorProto.DOUBLE or (n.op_type == "Cast" and a.name == "to"
                                                                and a.i == onnx.TensorProto.DOUBLE)]
    assert doubles == []


def test_a_model_without_class_token_attention_is_not_made_into_a_graph():
    from vitviz.models import loaders

    cnn = loaders.load_embedded_cnn()
    with pytest.raises(ValueError, match="cannot run on this device"):
        device.export(cnn)


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
    name = device.graph_name(runner)
    for path, media in ((f"vitviz/ort/{assets.ORT_FILES[0]}", "text/javascript"),
                        (f"vitviz/ort/{assets.ORT_FILES[2]}", "application/wasm"),
                        (f"vitviz/device/{name}", "application/octet-stream")):
        r = httpx.get(app_url + path, timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith(media), path
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert len(httpx.get(app_url + f"vitviz/device/{name}", timeout=30).content) == (assets.TINY / name).stat().st_size
    # a first visit's bytes: the runtime and the graph travel compressed once, decoded by the browser to the same bytes
    for path, size in ((f"vitviz/ort/{assets.ORT_FILES[2]}", (assets.ORT / assets.ORT_FILES[2]).stat().st_size),
                       (f"vitviz/device/{name}", (assets.TINY / name).stat().st_size)):
        with httpx.stream("GET", app_url + path, timeout=60, headers={"accept-encoding": "gzip"}) as r:
            body = r.read()
            assert r.headers["content-encoding"] == "gzip" and r.headers["vary"] == "Accept-Encoding", path
            assert len(body) == size and r.num_bytes_downloaded < 0.9 * size, (path, r.num_bytes_downloaded)
        plain = httpx.get(app_url + path, timeout=60, headers={"accept-encoding": "identity"})
        assert "content-encoding" not in plain.headers and len(plain.content) == size
    for bad in ("vitviz/ort/../../__init__.py", "vitviz/ort/README.md", "vitviz/device/..%2Fmodel.safetensors",
                "vitviz/device/model.safetensors", "vitviz/device/0000.onnx", "vitviz/device/" + "a" * 5000 + ".onnx"):
        assert httpx.get(app_url + bad, timeout=30).status_code == 404, bad[:40]


def test_a_forwards_cost_for_the_probe_is_the_architectures_multiply_accumulates():
    """``device.cost`` (what a device's probe scales its measured time by) against vitviz.core.patches.vit_macs for
    ViT-S/16 at 224 and 480 px: within 2% (the head counted per token), and the pairs' part exactly vit_macs'
    attention products."""
    import types

    import timm

    from vitviz.core import patches
    from vitviz.specs.registry import VIT_SIZES

    module = timm.create_model("vit_small_patch16_224", pretrained=False, dynamic_img_size=True).eval()
    runner = types.SimpleNamespace(read=lambda fn: fn(module), depth=12, spec=types.SimpleNamespace(dim=384))
    c = device.cost(runner)
    size = next(s for s in VIT_SIZES.values() if s.dim == 384 and s.depth == 12)
    for side in (224, 480):
        t = (side // 16) ** 2 + 1
        want = patches.vit_macs(size, 16, side, side)
        assert c["pair"] * t * t == want["attention scores QKᵀ"] + want["attention × V"]
        got = c["token"] * t + c["pair"] * t * t
        assert abs(got / sum(want.values()) - 1) < 0.02, (side, got, sum(want.values()))


def test_the_servers_forward_time_is_the_median_of_its_latest_forwards_per_model(rgb_cat):
    """What a device's forward is compared with (and the panel says) is the median of the server's latest forwards
    of that model: one slow moment does not stick for the process (a single run kept for good said 534 ms beside
    Classify's 40-51 ms), the requests' own forwards count, and the manifest a page gets answers with the median as it
    is now, not as it was when the manifest was made."""
    from vitviz.analyses.attention import analyse
    from vitviz.app.manifests import device_manifest, made_manifest
    from vitviz.core import owned
    from vitviz.models import runner as runners

    owned.reset("results")
    tiny = cache.get_model(registry.OFFLINE_KEY)
    key, tokens = tiny.timing_key, device.square_tokens(tiny, 64)
    first = device.server_ms(tiny, 64)  # measured: three timed forwards after a first one
    kept = runners.forward_ms(key)
    assert [t for t, _ in kept] == [tokens] * 3 and first == pytest.approx(float(np.median([ms for _, ms in kept])))
    runners.note_forward(key, tokens, 534.0)  # one slow moment
    assert device.server_ms(tiny, 64) < 534.0 and len(runners.forward_ms(key)) == 4
    analyse(tiny, rgb_cat)  # a request's own forward (the attention probe at 64 px) is one of the latest
    assert len(runners.forward_ms(key)) == 5
    for _ in range(runners.FORWARD_SAMPLES):  # the server gets busy: its latest forwards take 40 ms
        runners.note_forward(key, tokens, 40.0)
    assert device.server_ms(tiny, 64) == pytest.approx(40.0) and runners.forward_ms(("other", "")) == ()
    made = device_manifest({"model": registry.OFFLINE_KEY, "resolution": 224}, tab="classify")
    assert made["server_ms"] == pytest.approx(40.0)
    for _ in range(5):  # quiet again: the manifest already made says so
        runners.note_forward(key, tokens, 2.0)
    assert made_manifest("classify", registry.OFFLINE_KEY)["server_ms"] == pytest.approx(2.0)
    owned.reset("results")


def test_a_photos_forward_feeds_the_servers_time_at_a_square_side_scaled_by_the_cost_model():
    """A DINO-type model ("keep") runs a 3:2 photo at (224, 336), not (side, side): its forward is kept by its token
    count and read at the square side through the cost model (ms per multiply-accumulate × the side's), so the photos
    of a class feed the figure (kept by shape, only square pictures did; the rest fell back to the three forwards
    timed when the manifest was made)."""
    from vitviz.core import owned
    from vitviz.models import runner as runners

    owned.reset("results")
    tiny = cache.get_model(registry.OFFLINE_KEY)
    key, p, prefix = tiny.timing_key, tiny.spec.patch, tiny.spec.prefix
    costs = device.cost(tiny)

    def macs(t: int) -> int:
        return costs["token"] * t + costs["pair"] * t * t

    wide = prefix + (64 // p) * (96 // p)
    tiny.run(runners.Call(lambda _m, x, forward: forward(x), timed=True), torch.zeros(1, 3, 64, 96))
    assert [t for t, _ in runners.forward_ms(key)] == [wide]  # a non-square forward, by its tokens
    for ms in (30.0, 30.0):
        runners.note_forward(key, wide, ms)
    kept = runners.forward_ms(key)
    want = float(np.median([ms / macs(t) for t, ms in kept])) * macs(device.square_tokens(tiny, 64))
    assert device.server_ms(tiny, 64) == pytest.approx(want, rel=1e-12)
    assert runners.forward_ms(key) == kept  # nothing timed again: the photos' forwards were enough
    owned.reset("results")


def test_the_servers_forward_time_is_the_models_forward_not_the_probes_work_around_it(monkeypatch):
    """Only the model's forward is timed: the Forward pass's logit lens after it (every block through the head) and
    the attention probe's float16 packing inside its hooks are not (both were: an inflated server time keeps a slower
    device). Here each of them is made to take 1000 s of a fake clock (the clock moves only then: the forward itself
    takes none of it), so what is noted is the forward's own time, none of theirs."""
    from vitviz.analyses import attention, forward
    from vitviz.core import owned
    from vitviz.models import runner as runners

    owned.reset("results")
    tiny = cache.get_model(registry.OFFLINE_KEY)
    x = torch.zeros(1, 3, 64, 64)
    assemble, pack = forward._assemble, attention.LayerKeys.pack
    now = [0.0]

    def slow_assemble(*a, **k):
        now[0] += 1000.0
        return assemble(*a, **k)

    def slow_pack(*a, **k):
        now[0] += 1000.0 / tiny.depth
        return pack(*a, **k)

    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(forward, "_assemble", slow_assemble)
    monkeypatch.setattr(attention.LayerKeys, "pack", staticmethod(slow_pack))
    tiny.run(forward.ForwardProbe(tiny.spec.prefix, tiny.spec.patch), x)
    tiny.run(attention.AttentionProbe(tiny.spec.patch, tiny.spec.prefix), x)
    kept = runners.forward_ms(tiny.timing_key)
    monkeypatch.undo()
    assert kept == ((65, 0.0), (65, 0.0)), kept  # timed around the probe: 1000 s each
    owned.reset("results")
