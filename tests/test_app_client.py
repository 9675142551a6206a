"""End to end: the real app on 127.0.0.1, driven through gradio_client like any API user."""

from __future__ import annotations

import re
import time

import gradio as gr
import pytest
from conftest import EXAMPLES, ROOT
from gradio_client import Client, handle_file

from vitviz import assets
from vitviz.models import loaders
from vitviz.specs import registry


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def test_importing_and_building_the_app_loads_no_model():
    import subprocess
    import sys

    code = ("import sys, app, vitviz.models.cache as m; app.build_demo(); "
            "print(len(m._cache), 'transformers.models.vit.modeling_vit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(ROOT)).stdout.split()
    assert out[-2:] == ["0", "False"]


def test_named_endpoints_exist(client):
    names = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    assert {"/patches", "/position_embeddings", "/attention", "/classify", "/shuffle", "/registers",
            "/timeline", "/toy", "/patch_size_tradeoff", "/patch_filters", "/rotary", "/inside_head", "/feature_pca",
            "/compare_models", "/relevance", "/windows", "/relative_bias"} <= names


def test_patches_endpoint(client):
    grid, summary, costs, chart, equivalence, _ = client.predict(
        handle_file(str(EXAMPLES / "cat.png")), 16, 224, "crop", "ViT-B", api_name="/patches")
    assert "14·14 = 196" in summary and "N + 1 = 197" in summary and "38,809" in summary
    assert "4.1%" in costs and "17.56 G" in costs
    assert "e-0" in equivalence  # max |difference| printed in scientific notation, float32 rounding
    assert grid.endswith((".png", ".webp")) and chart.endswith((".png", ".webp"))


def test_toy_patches(client):
    _, summary, *_ = client.predict(handle_file(str(EXAMPLES / "toy_8x8.png")), 4, 8, "stretch", "ViT-Ti",
                                    api_name="/patches")
    assert "2·2 = 4" in summary and "N + 1 = 5" in summary


def test_position_embeddings_endpoint(client):
    summary, mosaic, tile, matrix, sim, resampled = client.predict(
        "2D sinusoidal", 2, 2, 8, "dot", 4, 4, 0, "viridis", api_name="/position_embeddings")
    assert "2×2 grid of 8-dimensional" in summary and all(p for p in (mosaic, tile, matrix, sim, resampled))


def test_learned_position_embeddings_of_the_embedded_model(client):
    summary, *_ = client.predict("learned: " + registry.OFFLINE_KEY, 8, 8, 8, "cosine", 12, 12, 0, "viridis",
                                 api_name="/position_embeddings")
    assert "8×8 grid of 96-dimensional" in summary


def test_attention_offline_answers_fast_with_notice(client):
    t0 = time.perf_counter()
    notice, heads, table, roll, box, crop, dist = client.predict(
        handle_file(str(EXAMPLES / "scene_star.png")), "DINO ViT-S/8", 64, 12, 0.6, 0.6, "inferno", "mean", 0.0,
        api_name="/attention")
    assert time.perf_counter() - t0 < 30
    assert "Showing vitviz tiny" in notice and "not DINO ViT-S/8" in notice
    heads_count = assets.tiny_info()["kwargs"]["num_heads"]
    assert "mass kept" in table and table.count("| head ") == heads_count + 1  # each head and the mean
    assert "layer 4 of 4" in table  # layer 12 asked of a 4-layer stand-in: the library clamps it
    from PIL import Image

    with Image.open(dist) as d:  # the distance chart, drawn at projector sizes and sent as PNG with its text size
        assert d.format == "PNG" and d.width <= 790 and d.height <= 660
        assert float(d.info["vitviz:text_px"]) >= 20


def test_classify_offline(client):
    notice, top5, maps, facts = client.predict(handle_file(str(EXAMPLES / "scene_star.png")),
                                               "ViT-B/16 (ImageNet-1k)", api_name="/classify")
    assert "Showing vitviz tiny" in notice
    assert top5["label"] in {"circle", "square", "triangle", "star", "cross", "ring"}
    assert len(top5["confidences"]) == 5 and "parameters" in facts


def test_shuffle_experiment_endpoint(client):
    _, md = client.predict(handle_file(str(EXAMPLES / "scene_ring.png")), registry.OFFLINE_KEY, 0, api_name="/shuffle")
    diff = float(md.split("between original and shuffled = **")[1].split("**")[0])
    assert diff < 1e-4


def test_bad_upload_gives_a_clear_error_and_app_keeps_serving(client, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("this is a text file, not a picture")
    with pytest.raises(Exception, match="not an image we can read"):
        client.predict(handle_file(str(bad)), 16, 224, "crop", "ViT-B", api_name="/patches")
    _, summary, *_ = client.predict(handle_file(str(EXAMPLES / "coffee.png")), 32, 224, "crop", "ViT-B",
                                    api_name="/patches")
    assert "7·7 = 49" in summary


def test_registers_comparison_refuses_a_stand_in(client):
    note, img = client.predict(handle_file(str(EXAMPLES / "cat.png")), 224, 0.6, "inferno", api_name="/registers")
    assert "cannot be loaded" in note and img is None


def test_readme_client_example_runs_twice_in_one_session(app_url, monkeypatch):
    """The README's example, run twice with one client (one session): data only, so nothing changes in between."""
    import gradio_client

    readme = (ROOT / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'api_name="/patches"' in code and 'api_name="/attention"' in code
    monkeypatch.chdir(ROOT)
    shared = Client(app_url, verbose=False)
    monkeypatch.setattr(gradio_client, "Client", lambda *args, **kwargs: shared)
    answers = []
    for _ in range(2):
        scope: dict = {}
        exec(code, scope)
        assert scope["client"] is shared
        assert "14×14 grid of 64-dimensional" in scope["summary"]  # the last summary: position embeddings
        assert scope["top5"]["label"] and "Showing" in scope["notice"]
        answers.append((scope["table"], scope["top5"], scope["distances"]))
    assert answers[0] == answers[1]


def test_intake_component_passes_uploads_undecoded(tmp_path):
    """Webcam and clipboard arrive as data URLs, uploads as files; neither is decoded by gradio."""
    import base64
    import io

    from gradio.data_classes import FileData
    from PIL import Image

    from vitviz import app

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (10, 20, 30)).save(buf, format="PNG")
    comp = app.image_input()
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    raw = comp.preprocess(FileData(path="", url=url))
    assert raw == buf.getvalue()
    from vitviz.core.images import load_rgb

    assert tuple(load_rgb(raw)[0, 0]) == (10, 20, 30)
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not a png")
    assert comp.preprocess(FileData(path=str(junk))) == str(junk)  # no decoding, no gradio error
    assert comp.preprocess(None) is None


def test_timeline_endpoint(client):
    """Six checkpoints (180-px panels at most, two-line captions) in a figure that fits 1280×720, and the chosen one
    per head."""
    from PIL import Image

    strip, heads = client.predict(handle_file(str(EXAMPLES / "scene_ring.png")), 0, 0.6, "inferno",
                                  api_name="/timeline")
    n = len(assets.tiny_checkpoints())
    with Image.open(strip) as s, Image.open(heads) as h:
        assert n == 6 and s.width <= 790 and s.height <= 660
        assert s.width >= 3 * 180 and s.height > 2 * (180 + 2 * 25)  # three panels a row: two rows
        assert float(s.info["vitviz:text_px"]) == 20
        assert h.width > 0 and h.height > 0


def test_position_embedding_similarity_summary_matches_the_card(client):
    import json

    summary, *_ = client.predict("learned: vitviz tiny, training timeline", 8, 8, 8, "cosine", 8, 8, 5, "viridis",
                                 api_name="/position_embeddings")
    pe = json.loads((assets.TINY / "quality.json").read_text())["position_embeddings"]
    assert f"next-door positions **{pe['next_door']:.2f}**" in summary
    assert f"equally far from the centre (not next door) **{pe['same_ring']:.2f}**" in summary


def test_a_module_level_demo_for_reload_mode_is_built_only_when_asked_for():
    import gradio as gr

    import app

    assert "demo" not in vars(app) or isinstance(vars(app)["demo"], gr.Blocks)
    assert isinstance(app.demo, gr.Blocks) and app.demo is app.demo  # built once, on first use
    with pytest.raises(AttributeError):
        app.no_such_thing  # noqa: B018


def test_mcp_server_behind_a_flag(monkeypatch):
    """VITVIZ_MCP=1 serves the named endpoints as MCP tools (needs gradio's optional mcp extra)."""
    import importlib.util

    from vitviz import app

    monkeypatch.delenv("VITVIZ_MCP", raising=False)
    assert "mcp_server" not in app.launch_kwargs()
    monkeypatch.setenv("VITVIZ_MCP", "1")
    if importlib.util.find_spec("mcp") is None:
        with pytest.raises(SystemExit, match="pip install 'gradio\\[mcp\\]"):
            app.launch_kwargs()
        return
    import httpx
    from conftest import free_port

    demo = app.build_demo()
    port = free_port()
    kwargs = app.launch_kwargs()
    kwargs.update(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    demo.launch(**kwargs)
    try:
        tools = {t["name"] for t in httpx.get(f"http://127.0.0.1:{port}/gradio_api/mcp/schema", timeout=30).json()}
        assert {"run_attention", "run_classify", "bundle_attention"} <= tools
    finally:
        demo.close()


def test_a_layer_asked_for_just_before_the_range_shrank_is_clamped_not_refused():
    """Seen in CI: the page opened on the 4-layer offline model while a request still carried layer 12; gradio's
    slider refused it ('Value 12 is greater than maximum value 4') and left an Error badge on the page."""
    from vitviz import app

    slider = app.FollowingSlider(1, 12, value=12, step=1)
    slider.maximum = 4  # what layer_slider's update does for the offline model
    assert slider.preprocess(12) == 4 and slider.preprocess(3) == 3 and slider.preprocess(0) == 1
    with pytest.raises(gr.Error):
        gr.Slider(1, 4, step=1).preprocess(12)  # the stock slider, for comparison


def test_patch_filters_and_rotary_endpoints(client):
    """The two newer views answer through their endpoints with figures at projector sizes, and explain bad input."""
    from PIL import Image

    picture, note = client.predict(registry.OFFLINE_KEY, api_name="/patch_filters")
    tiny = assets.tiny_info()["kwargs"]
    assert f"is {tiny['embed_dim']} filters of 8×8×3 numbers" in note
    rope = client.predict(16, 3, 100, "viridis", api_name="/rotary")
    for path in (picture, rope):
        with Image.open(path) as im:
            assert im.width <= 790 and im.height <= 660 and float(im.info["vitviz:text_px"]) >= 20
    with pytest.raises(Exception, match="multiple of 4"):
        client.predict(30, 3, 100, "viridis", api_name="/rotary")


def projector_sized(path) -> None:
    from PIL import Image

    with Image.open(path) as im:
        assert im.width <= 790 and im.height <= 660 and float(im.info["vitviz:text_px"]) >= 19.95


def test_inside_head_endpoint_checks_itself_against_the_model(client):
    star = handle_file(str(EXAMPLES / "scene_star.png"))
    picture, note = client.predict(star, "DINO ViT-S/8", 64, 12, 1, 3, 4, False, "inferno", api_name="/inside_head")
    assert "Showing vitviz tiny" in note  # offline: the stand-in, said so
    errors = [float(e) for e in re.findall(r"≤ \*\*([0-9.e+-]+)\*\*", note)]
    assert len(errors) == 2 and errors[0] < 1e-5 and errors[1] < 1e-4  # softmax and weighted sum vs the model
    assert "sum to 1" in note and "65 keys" in note  # 8×8 patches + [CLS]
    projector_sized(picture)
    _, cls_note = client.predict(star, "DINO ViT-S/8", 64, 2, 0, 0, 0, True, "inferno", api_name="/inside_head")
    assert cls_note != note


def test_feature_pca_endpoint(client):
    picture, note = client.predict(handle_file(str(EXAMPLES / "scene_star.png")), registry.OFFLINE_KEY, 64, 4,
                                   api_name="/feature_pca")
    shares = [int(v) for v in re.findall(r"PC[123] (\d+)%", note)]
    assert len(shares) == 3 and shares[0] >= shares[1] >= shares[2] > 0
    projector_sized(picture)


def test_compare_models_endpoint_on_one_scale(client):
    from vitviz.views import attention as attention_view

    steps = [c for c in attention_view.comparison_choices() if " @ step " in c]
    picture, note = client.predict(handle_file(str(EXAMPLES / "scene_star.png")), steps[0], steps[-1], 64, 1.0, 0.6,
                                   "inferno", api_name="/compare_models")
    rows = [line for line in note.splitlines() if line.startswith("| vitviz")]
    assert len(rows) == 2 and "@ step 0 |" in rows[0] and "4 of 4" in rows[1]
    peaks = [float(r.split("|")[4].strip().rstrip("×")) for r in rows]
    assert peaks[0] < peaks[1]  # random weights spread attention evenly; trained ones gather it
    projector_sized(picture)
    with pytest.raises(Exception, match="Value: some/other-model is not in the list|Unknown model"):
        client.predict(handle_file(str(EXAMPLES / "scene_star.png")), "some/other-model", steps[-1], 64, 1.0, 0.6,
                       "inferno", api_name="/compare_models")


def test_relevance_endpoint(client):
    star = handle_file(str(EXAMPLES / "scene_star.png"))
    picture, note = client.predict(star, registry.OFFLINE_KEY, 1, api_name="/relevance")
    assert "**star**" in note and "Neither map is proof" in note
    projector_sized(picture)
    _, second = client.predict(star, registry.OFFLINE_KEY, 2, api_name="/relevance")
    assert second != note


def test_windows_and_relative_bias_endpoints(client):
    picture, note, cost = client.predict(handle_file(str(EXAMPLES / "cat.png")), 16, 224, "crop", "ViT-B", 7, 3, 5,
                                         api_name="/windows")
    assert "each of the 196 patches" in note and "sees 49 keys" in note
    for path in (picture, cost):
        projector_sized(path)
    from vitviz.views import posembed as posembed_view

    bias, text = client.predict(posembed_view.RPB_FORMULA, 7, 3, 1, 0, 1, 2, "viridis", api_name="/relative_bias")
    assert "169 possible offsets" in text and "**formula, 3 heads.**" in text
    _, swin = client.predict("Swin-T (ImageNet-1k)", 5, 3, 4, 2, 1, 2, "viridis", api_name="/relative_bias")
    assert "cannot be loaded here" in swin and "169 possible offsets" not in swin  # offline: M = 5 formula, said so
    assert "81 possible offsets" in swin
    projector_sized(bias)


def test_an_upload_is_decoded_once_and_shared_read_only():
    """accept() checks a picture and the tab's work then uses it: one decoding, which no request may change."""
    from vitviz import app

    path = str(EXAMPLES / "coffee.png")
    first, again = app.load(path), app.load(path)
    assert first is again and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0, 0, 0] = 1
