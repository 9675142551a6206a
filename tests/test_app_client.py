"""End to end: the real app on 127.0.0.1, driven through gradio_client like any API user.

Every public endpoint is a declared view: its parameters are the view's settings (named, typed, with defaults),
and it answers with data: {"model", "notice", "settings" (as used), "adjusted", "texts", "figures", "numbers"}.
"""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES, ROOT, local_client
from gradio_client import handle_file
from PIL import Image

from vitviz import assets
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.views import RECORDS, VIEWS


@pytest.fixture(scope="module")
def client(app_url):
    return local_client(app_url)


def picture(name: str):
    return handle_file(str(EXAMPLES / name))


def projector_sized(path) -> None:
    with Image.open(path) as im:
        assert im.format == "PNG" and im.width <= 790 and im.height <= 660
        assert float(im.info["vitviz:text_px"]) >= 19.95


def test_every_declared_view_is_an_endpoint_with_its_declared_parameters(client):
    """view_api() is the declaration: names, types, choices and defaults, for every view (and the bundles)."""
    api = client.view_api(return_format="dict", print_info=False)
    named = api["named_endpoints"]
    expected = {f"/{name}" for name in VIEWS} | {f"/bundle_{r.name}" for r in RECORDS.values() if r.bundle} \
        | {"/explorer", "/device_model"}
    assert set(named) == expected and not api["unnamed_endpoints"]
    for name, view in VIEWS.items():
        params = named[f"/{name}"]["parameters"]
        assert [p["parameter_name"] for p in params] == [*view.names, "figures"]
        *params, drawn = params  # the answer's own last parameter: the view's figures drawn, or only its numbers
        assert drawn["type"] == {"type": "boolean"} and drawn["parameter_default"] is True
        for p, f in zip(params, view.fields):
            if f.kind == "image":
                assert not p["parameter_has_default"]
                continue
            default = f.to_link(f.default) or "" if f.kind == "cells" else f.default  # a set of patches as text
            assert p["parameter_has_default"] and p["parameter_default"] == default
            if f.kind == "int":
                assert p["type"] == {"type": "integer"}
            elif f.kind == "float":
                assert p["type"] == {"type": "number"}
            elif f.kind == "choice":
                assert p["type"]["enum"] == list(f.options())


def test_patches_endpoint(client):
    r = client.predict(picture("cat.png"), 16, 224, "crop", "ViT-B", api_name="/patches")
    summary, costs = r["texts"]["summary"], r["texts"]["costs"]
    assert "14·14 = 196" in summary and "N + 1 = 197" in summary and "38,809" in summary
    assert "4.1%" in costs and "17.56 G" in costs
    assert "e-0" in r["texts"]["equivalence"]  # max |difference|, float32 rounding
    assert r["numbers"]["patches"] == 196 and r["settings"]["resolution"] == 224 and r["adjusted"] == {}
    for path in r["figures"].values():
        assert path.endswith(".png")


def test_a_resolution_that_is_not_whole_patches_says_what_was_used(client):
    r = client.predict(picture("cat.png"), resolution=230, api_name="/patches")
    assert r["settings"]["resolution"] == 224 and r["adjusted"]["resolution"]["asked"] == 230
    assert "rounded down" in r["notice"] and r["numbers"]["patches"] == 196


def test_toy_patches(client):
    r = client.predict(picture("toy_8x8.png"), 4, 8, "stretch", "ViT-Ti", api_name="/patches")
    assert "2·2 = 4" in r["texts"]["summary"] and "N + 1 = 5" in r["texts"]["summary"]


def test_position_embeddings_endpoint(client):
    r = client.predict("2D sinusoidal", 2, 2, 8, "dot", 4, 4, 0, "viridis", api_name="/position_embeddings")
    assert "2×2 grid of 8-dimensional" in r["texts"]["summary"] and len(r["figures"]) == 5


def test_learned_position_embeddings_of_the_embedded_model(client):
    r = client.predict(source="learned: " + registry.OFFLINE_KEY, api_name="/position_embeddings")
    assert "8×8 grid of 96-dimensional" in r["texts"]["summary"]
    assert r["settings"]["rows"] == 8 and r["settings"]["dim"] == 96  # its own grid, said so
    assert "not set here" in r["adjusted"]["dim"]["why"]


def test_attention_offline_says_which_model_and_what_was_used(client):
    r = client.predict(picture("scene_star.png"), "DINO ViT-S/8", 224, 12, -1, 0.6, 0.6, "inferno", None,
                       api_name="/attention")
    assert r["model"] == registry.OFFLINE_KEY
    assert "Showing vitviz tiny" in r["notice"] and "not DINO ViT-S/8" in r["notice"]
    assert r["settings"]["resolution"] == 64 and r["settings"]["layer"] == 4  # what was used, not what was asked
    assert r["adjusted"]["resolution"] == {"asked": 224, "used": 64, "why": r["adjusted"]["resolution"]["why"]}
    heads = assets.tiny_info()["kwargs"]["num_heads"]
    table = r["texts"]["table"]
    assert "mass kept" in table and table.count("| head ") == heads + 1 and "layer 4 of 4" in table
    assert r["numbers"]["layer"] == 4 and len(r["numbers"]["maps"]) == heads + 1
    assert set(r["figures"]) == {"heads", "box", "crop"}  # one fused forward: nothing that needs every row
    projector_sized(r["figures"]["heads"])
    d = client.predict(picture("scene_star.png"), "DINO ViT-S/8", 224, api_name="/attention_distance")
    assert d["model"] == registry.OFFLINE_KEY and len(d["numbers"]["mean_attention_distance_px"]) == 4 * heads
    projector_sized(d["figures"]["distance"])


def test_an_answer_without_figures_says_the_same_and_draws_nothing(client):
    """figures=False: the same numbers, texts and settings as the answer with its figures, and no figure, for a
    view that can skip drawing (attention) and for one that draws and leaves them out (patches)."""
    for api, args in (("/attention", (registry.OFFLINE_KEY, 64, 3, -1, 0.5, 0.6, "magma", "2,5")),
                      ("/patches", (16, 224, "crop", "ViT-B"))):
        pic = "scene_star.png" if api == "/attention" else "cat.png"
        full = client.predict(picture(pic), *args, api_name=api)
        bare = client.predict(picture(pic), *args, figures=False, api_name=api)
        assert full["figures"] and bare["figures"] == {}
        for key in ("model", "notice", "settings", "adjusted", "texts", "numbers"):
            assert bare[key] == full[key], (api, key)
    with pytest.raises(Exception, match="`figures` .* must be true or false; got 'maybe'"):
        client.predict(picture("cat.png"), figures="maybe", api_name="/patches")


def test_attention_with_a_pinned_patch_draws_its_maps(client):
    r = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, 64, 2, 1, 0.5, 0.6, "magma", "3,4",
                       api_name="/attention")
    assert r["settings"]["query"] == [3, 4] and set(r["figures"]) == {"query", "heads", "box", "crop"}
    roll = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, 64, "max", 0.3, api_name="/rollout")
    assert roll["settings"]["fusion"] == "max" and len(roll["numbers"]["rollout"]) == 8 and "rollout" in roll["figures"]
    far = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, query="40,40", api_name="/attention")
    assert far["settings"]["query"] == [7, 7] and "8×8 patches" in far["adjusted"]["query"]["why"]


def test_classify_offline(client):
    r = client.predict(picture("scene_star.png"), "ViT-B/16 (ImageNet-1k)", api_name="/classify")
    assert "Showing vitviz tiny" in r["notice"]
    assert set(r["numbers"]["top5"]) <= {"circle", "square", "triangle", "star", "cross", "ring"}
    assert len(r["numbers"]["top5"]) == 5 and "parameters" in r["texts"]["facts"]


@pytest.mark.parametrize("picture, words", [
    ('{"url": "http://127.0.0.1:9/cat.png", "meta": {"_type": "gradio.FileData"}}', "does not fetch pictures from web"),
    ('{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}', "was not uploaded by a user"),
    ('"data:image/png;base64,!!!"', "not valid base64"),
])
def test_a_picture_that_did_not_arrive_as_an_upload_is_refused_with_words(app_url, picture, words):
    from conftest import raw_call

    answer = raw_call(app_url, "patches", f'{picture}, 16, 224, "crop", "ViT-B", true')
    assert "event: error" in answer and words in answer


SHAPES_ONLY = "was trained only on generated shape scenes"


def test_a_photo_shown_to_the_shapes_model_is_flagged_in_every_view_that_answers_for_it(client):
    cat = picture("cat.png")
    r = client.predict(cat, registry.OFFLINE_KEY, api_name="/classify")
    assert SHAPES_ONLY in r["notice"] and SHAPES_ONLY in r["numbers"]["notice"]
    assert all(k.startswith("nearest shape: ") for k in r["numbers"]["top5"])  # not presented as a label
    for api in ("/attention", "/relevance", "/shuffle", "/inside_head", "/feature_pca"):
        assert SHAPES_ONLY in client.predict(cat, api_name=api)["notice"], api
    scene = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, api_name="/classify")
    assert SHAPES_ONLY not in scene["notice"] and "star" in scene["numbers"]["top5"]  # its own kind of picture
    assert SHAPES_ONLY not in client.predict(cat, api_name="/patches")["notice"]  # no model answered


def test_shuffle_experiment_endpoint(client):
    r = client.predict(picture("scene_ring.png"), registry.OFFLINE_KEY, 0, api_name="/shuffle")
    assert r["numbers"]["diff_without_positions"] < 1e-4
    diff = float(r["texts"]["text"].split("between original and shuffled = **")[1].split("**")[0])
    assert diff < 1e-4


def test_bad_upload_gives_a_clear_error_and_app_keeps_serving(client, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("this is a text file, not a picture")
    with pytest.raises(Exception, match="not an image vitviz can read"):
        client.predict(handle_file(str(bad)), 16, 224, "crop", "ViT-B", api_name="/patches")
    r = client.predict(picture("coffee.png"), 32, 224, "crop", "ViT-B", api_name="/patches")
    assert "7·7 = 49" in r["texts"]["summary"]


@pytest.mark.parametrize("endpoint, kwargs, words", [
    ("/patches", {"patch": None}, "`patch` (patch size P (pixels)) must be one of 4, 8, 14, 16, 32; got None"),
    ("/attention", {"resolution": "abc"}, "`resolution` (short side"),
    ("/attention", {"layer": 2.5}, "`layer` (layer (1 = first)) must be a whole number from 1 to 12"),
    ("/attention", {"cmap": "jet"}, "`cmap` (colormap) must be one of 'viridis'"),
    ("/attention", {"query": "a,b"}, "`query`"),
    ("/rotary", {"dim": 30}, "a multiple of 4"),
])
def test_a_wrong_value_gets_a_message_naming_the_parameter_and_what_it_accepts(client, endpoint, kwargs, words):
    args = (picture("scene_star.png"),) if endpoint != "/rotary" else ()
    with pytest.raises(Exception) as err:
        client.predict(*args, **kwargs, api_name=endpoint)
    assert words in str(err.value)


@pytest.fixture(scope="module")
def uploaded_star(app_url) -> str:
    """The star scene uploaded as a script uploads it, as the JSON an endpoint takes."""
    import json

    import httpx

    with open(EXAMPLES / "scene_star.png", "rb") as f:
        path = httpx.post(f"{app_url}gradio_api/upload", files={"files": ("star.png", f, "image/png")}).json()[0]
    return json.dumps({"path": path, "meta": {"_type": "gradio.FileData"}})


@pytest.mark.parametrize("settings, words", [
    ('64, 4, -1, NaN, 0.6', "`keep` (keep this share of attention mass) must be a number from 0.1 to 0.95; got nan"),
    ('64, 4, -1, 0.6, Infinity', "`alpha` (overlay opacity) must be a number from 0 to 1; got inf"),
    ('NaN, 4, -1, 0.6, 0.6', "`resolution` (short side (pixels, rounded to the patch size)) must be a whole number"),
    ('64, [4], -1, 0.6, 0.6', "`layer` (layer (1 = first)) must be a whole number from 1 to 12"),
    ('64, {"a": 1}, -1, 0.6, 0.6', "`layer` (layer (1 = first)) must be a whole number from 1 to 12"),
])
def test_odd_values_in_raw_json_get_a_message_naming_the_parameter(app_url, uploaded_star, settings, words):
    """NaN, Infinity, lists and objects in numeric slots, as any script may send them: a message, never a bare
    error."""
    from conftest import raw_call

    star = uploaded_star
    answer = raw_call(app_url, "attention", f'{star}, "{registry.OFFLINE_KEY}", {settings}, "inferno", null, '
                                            'true')
    assert "event: error" in answer and words in answer


def test_registers_comparison_refuses_a_stand_in(client):
    r = client.predict(picture("cat.png"), 224, 0.6, "inferno", api_name="/registers")
    assert "cannot be loaded" in r["texts"]["note"] and r["figures"] == {}


@pytest.mark.slow  # two runs of every endpoint the example calls: with the slow set
def test_readme_client_example_runs_twice_in_one_session(app_url, monkeypatch):
    """The example in docs/using.md, run twice with one client (one session): data only, so nothing changes in between."""
    import gradio_client

    readme = (ROOT / "docs" / "using.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'api_name="/patches"' in code and 'api_name="/attention"' in code
    monkeypatch.chdir(ROOT)
    shared = local_client(app_url)
    monkeypatch.setattr(gradio_client, "Client", lambda *args, **kwargs: shared)
    answers = []
    for _ in range(2):
        scope: dict = {}
        exec(code, scope)
        assert scope["client"] is shared
        assert "14×14 grid of 64-dimensional" in scope["positions"]["texts"]["summary"]
        assert scope["classified"]["numbers"]["top5"] and "Showing" in scope["classified"]["notice"]
        bare, attention = scope["bare"], scope["attention"]
        assert bare["figures"] == {} and bare["numbers"]["maps"] == attention["numbers"]["maps"]
        answers.append((scope["attention"]["numbers"], scope["classified"]["numbers"]["top5"]))
    assert answers[0] == answers[1]


def test_timeline_endpoint(client):
    """Six checkpoints (180-px panels at most, two-line captions) in a figure that fits 1280×720, and the chosen one
    per head."""
    r = client.predict(picture("scene_ring.png"), 0, 0.6, "inferno", api_name="/timeline")
    n = len(assets.tiny_checkpoints())
    with Image.open(r["figures"]["strip"]) as s, Image.open(r["figures"]["heads"]) as h:
        assert n == 6 and s.width <= 790 and s.height <= 660
        assert s.width >= 3 * 180 and s.height > 2 * (180 + 2 * 25)  # three panels a row: two rows
        assert float(s.info["vitviz:text_px"]) == 20
        assert h.width > 0 and h.height > 0


def test_position_embedding_similarity_summary_matches_the_card(client):
    import json

    r = client.predict(declared.TIMELINE, 8, 8, 8, "cosine", 8, 8, 5, "viridis", api_name="/position_embeddings")
    pe = json.loads((assets.TINY / "quality.json").read_text())["position_embeddings"]
    summary = r["texts"]["summary"]
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
    """VITVIZ_MCP=1 serves the declared views as MCP tools (needs gradio's optional mcp extra)."""
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
        assert {"attention", "classify", "bundle_attention"} <= tools
    finally:
        demo.close()


def test_a_layer_past_the_models_depth_is_clamped_and_said(client):
    """Seen in CI once: the page opened on the 4-layer offline model while a request still carried layer 12. The
    view clamps it, and says so, instead of refusing it."""
    r = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, 64, 12, api_name="/inside_head")
    assert r["settings"]["layer"] == 4 and "4 layers" in r["adjusted"]["layer"]["why"]


def test_patch_filters_and_rotary_endpoints(client):
    r = client.predict(registry.OFFLINE_KEY, api_name="/patch_filters")
    tiny = assets.tiny_info()["kwargs"]
    assert f"is {tiny['embed_dim']} filters of 8×8×3 numbers" in r["texts"]["text"]
    rope = client.predict(16, 3, 100, "viridis", api_name="/rotary")
    for path in (r["figures"]["filters"], rope["figures"]["rotary"]):
        projector_sized(path)


def test_inside_head_endpoint_checks_itself_against_the_model(client):
    star = picture("scene_star.png")
    r = client.predict(star, "DINO ViT-S/8", 64, 12, 1, 3, 4, False, "inferno", api_name="/inside_head")
    note = r["texts"]["text"]
    assert "Showing vitviz tiny" in r["notice"]  # offline: the stand-in, said so
    assert r["numbers"]["softmax_error"] < 1e-5 and r["numbers"]["output_error"] < 1e-4
    errors = [float(e) for e in re.findall(r"≤ \*\*([0-9.e+-]+)\*\*", note)]
    assert len(errors) == 2 and errors[0] < 1e-5 and errors[1] < 1e-4  # softmax and weighted sum vs the model
    assert "sum to 1" in note and "65 keys" in note  # 8×8 patches + [CLS]
    projector_sized(r["figures"]["inside_head"])
    cls = client.predict(star, "DINO ViT-S/8", 64, 2, 0, 0, 0, True, "inferno", api_name="/inside_head")
    assert cls["texts"]["text"] != note and cls["numbers"]["query"] == 0


def test_feature_pca_endpoint(client):
    r = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, 64, 4, api_name="/feature_pca")
    shares = [int(v) for v in re.findall(r"PC[123] (\d+)%", r["texts"]["text"])]
    assert len(shares) == 3 and shares[0] >= shares[1] >= shares[2] > 0
    projector_sized(r["figures"]["feature_pca"])


def test_compare_models_endpoint_on_one_scale(client):
    steps = [c for c in declared.comparison_choices() if " @ step " in c]
    r = client.predict(picture("scene_star.png"), steps[0], steps[-1], 64, 1.0, 0.6, "inferno",
                       api_name="/compare_models")
    rows = [line for line in r["texts"]["table"].splitlines() if line.startswith("| vitviz")]
    assert len(rows) == 2 and "@ step 0 |" in rows[0] and "4 of 4" in rows[1]
    peaks = [float(row.split("|")[4].strip().rstrip("×")) for row in rows]
    assert peaks[0] < peaks[1]  # random weights spread attention evenly; trained ones gather it
    projector_sized(r["figures"]["pair"])
    with pytest.raises(Exception, match="`model_a` \\(left model\\) must be one of"):
        client.predict(picture("scene_star.png"), "some/other-model", steps[-1], api_name="/compare_models")


def test_relevance_endpoint(client):
    star = picture("scene_star.png")
    r = client.predict(star, registry.OFFLINE_KEY, 1, api_name="/relevance")
    assert "**star**" in r["texts"]["text"] and "None of them proves what the model used" in r["texts"]["text"]
    assert {"relevance", "attnlrp", "legrad", "rollout"} <= set(r["numbers"]["maps"]) and r["numbers"]["class"] == "star"
    projector_sized(r["figures"]["relevance"])
    second = client.predict(star, registry.OFFLINE_KEY, 2, api_name="/relevance")
    assert second["texts"]["text"] != r["texts"]["text"]


def test_windows_and_relative_bias_endpoints(client):
    r = client.predict(picture("cat.png"), 16, 224, "crop", "ViT-B", 7, 3, 5, api_name="/windows")
    assert "each of the 196 patches" in r["texts"]["text"] and "sees 49 keys" in r["texts"]["text"]
    for path in r["figures"].values():
        projector_sized(path)
    bias = client.predict(declared.RPB_FORMULA, 7, 3, 1, 0, 1, 2, "viridis", api_name="/relative_bias")
    assert "169 possible offsets" in bias["texts"]["text"] and "**formula, 3 heads.**" in bias["texts"]["text"]
    swin = client.predict("Swin-T (ImageNet-1k)", 5, 3, 4, 2, 1, 2, "viridis", api_name="/relative_bias")
    assert "cannot be loaded here" in swin["notice"] and "81 possible offsets" in swin["texts"]["text"]
    projector_sized(bias["figures"]["relative_bias"])


def test_a_picture_sent_as_a_data_url_is_the_same_picture(app_url, client):
    """A picture may come as a data: URL in the request (a webcam frame, a script): through the same intake, with
    the same limits, the same answer. A path typed into a request reads nothing outside the app's uploads."""
    import base64
    import json

    from conftest import raw_call

    data = (EXAMPLES / "coffee.png").read_bytes()
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    answer = raw_call(app_url, "patches", json.dumps(url) + ', 16, 224, "crop", "ViT-B", true')
    assert "event: complete" in answer
    via_url = json.loads(answer.split("data: ", 1)[1].strip())[0]
    via_file = client.predict(picture("coffee.png"), api_name="/patches")
    assert via_url["numbers"] == via_file["numbers"]
    elsewhere = raw_call(app_url, "patches", '"/etc/hostname", 16, 224, "crop", "ViT-B", true')
    assert "event: error" in elsewhere and "not uploaded to this app" in elsewhere


def test_an_upload_is_decoded_once_and_shared_read_only():
    """The check on arrival and the tab's work use one decoding, which no request may change."""
    from vitviz.app import uploads

    path = str(EXAMPLES / "coffee.png")
    first, again = uploads.picture(path), uploads.picture({"path": path})
    assert first is again and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0, 0, 0] = 1


def test_the_explorer_endpoint_stands_alone_and_its_parts_are_served_with_a_long_cache(client, app_url):
    """/explorer answers with the first map's data inline (base64); the page fetches the same parts by name, and
    the server lets browsers keep them: a part never changes under its name."""
    import base64

    import httpx
    import numpy as np

    p = client.predict(picture("scene_star.png"), registry.OFFLINE_KEY, 64, api_name="/explorer")
    assert p["model"] == registry.OFFLINE_KEY and p["grid"] == [8, 8] and p["layers"] == 4
    assert p["first"] == [0, 1, 2, 3] and sorted(p["data"]) == sorted(
        ["cls.f4", "image.png"] + [f"keys-{i}.f4" for i in range(4)])  # the rollout: computed when fetched
    for name in ("cls.f4", "keys-2.f4"):
        r = httpx.get(f"{app_url}{p['base']}{name}")
        assert r.status_code == 200 and r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.content == base64.b64decode(p["data"][name])  # the same bytes, inline or fetched
    cls = np.frombuffer(base64.b64decode(p["data"]["cls.f4"]), "<f4").reshape(4, p["heads"] + 1, 64)
    assert np.allclose(cls[:, -1], cls[:, :-1].mean(1), atol=1e-7)  # the head mean travels with the heads
    assert p["bytes"] == cls.nbytes + len(base64.b64decode(p["data"]["image.png"].split(",")[1])) + 4 * (
        2 * p["heads"] * p["tokens"] * p["head_dim"] * 4)
    roll = httpx.get(f"{app_url}{p['base']}rollout.f4")  # computed from the kept keys when first asked for
    from vitviz.analyses.attention import find

    a = find(p["token"])  # the app runs in this process: the analysis it keeps
    assert roll.status_code == 200 and np.array_equal(np.frombuffer(roll.content, "<f4"),
                                                      a.maps.rollout("mean").astype(np.float32).ravel())
    gone = httpx.get(f"{app_url}vitviz/explorer/{'0' * 16}/cls.f4")
    assert gone.status_code == 404 and gone.headers["cache-control"] == "no-store"
    assert httpx.get(f"{app_url}vitviz/explorer/{p['token']}/..%2Fsecret").status_code == 404
    for missing in ("keys-9.f4", "keys-2.f2"):  # a part this analysis does not have: not found, not "busy"
        r = httpx.get(f"{app_url}{p['base']}{missing}")
        assert r.status_code == 404 and r.headers["cache-control"] == "no-store"


def test_the_page_is_sent_compressed(app_url):
    """gzip for the page (its HTML carries the app's configuration) when the browser accepts it."""
    import httpx

    r = httpx.get(app_url, headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    raw = httpx.get(app_url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in raw.headers and len(raw.content) > 4 * int(r.headers["content-length"])
    assert r.text == raw.text  # httpx undid the gzip: the same page

@pytest.mark.parametrize("example", ["cat.png", "scene_star.png"])
def test_the_vit_vs_cnn_endpoints_answer_offline(client, example):
    """The four named endpoints of the ViT-vs-CNN tab, offline (the shapes models stand in), on a photo and a scene."""
    rf = client.predict(picture(example), api_name="/receptive_field")
    assert rf["numbers"]["cnn"] == registry.CNN_OFFLINE_KEY and rf["numbers"]["vit"] == registry.OFFLINE_KEY
    assert [s["theoretical_rf_px"] for s in rf["numbers"]["cnn_stages"]] == [3, 9, 21, 45, 93]
    assert "not ResNet-50" in rf["notice"] and set(rf["figures"]) == {"reach", "maps"}
    photo = example == "cat.png"
    assert ("trained only on generated shape scenes" in rf["notice"]) == photo
    tr = client.predict(picture(example), api_name="/translation")
    assert tr["numbers"]["shifts"] == list(range(17)) and max(tr["numbers"]["cnn_errors"]["stem"]) < 1e-6
    assert all(e < 1e-6 for d, e in zip(tr["numbers"]["shifts"], tr["numbers"]["vit_token_errors"]) if d % 8 == 0)
    de = client.predict(True, api_name="/data_efficiency")
    assert len(de["numbers"]["runs"]) == 8 and "no crossover" in de["numbers"]["verdict"]
    hy = client.predict(224, api_name="/hybrid_stages")
    assert [n["macs"] for n in hy["numbers"]["networks"]] == [17_563_828_224, 4_089_184_256, 4_406_300_928]
    for r in (rf, tr, de, hy):
        for path in r["figures"].values():
            projector_sized(path)


def test_a_wrong_side_for_the_stage_calculator_names_the_parameter(client):
    with pytest.raises(Exception, match="`side`.*multiple of 32"):
        client.predict(100, api_name="/hybrid_stages")


def test_the_test_the_map_endpoints_answer_and_refuse_in_words(client):
    """/deletion, /randomise and /predict through the API, with their declared parameters; a patch set outside the
    grid or empty, and a class outside the top 5, are refused naming the parameter."""
    from gradio_client.exceptions import AppError

    scene = picture("scene_star.png")
    d = client.predict(scene, model=registry.OFFLINE_KEY, api_name="/deletion")
    assert set(d["numbers"]["auc"]) >= {"attention", "rollout", "relevance", "occlusion", "random 1"}
    assert d["numbers"]["deletion"]["attention"][0] == d["numbers"]["full"] and d["figures"]["curves"]
    r = client.predict(scene, model=registry.OFFLINE_KEY, step=3, draws=2, samples=2, api_name="/randomise")
    assert r["numbers"]["step"] == 3 and r["numbers"]["spearman"]["relevance"][0] == [1.0, 1.0]  # [step][draw]
    p = client.predict(scene, model=registry.OFFLINE_KEY, patches="3,3;3,4", mode="keep", api_name="/predict")
    assert p["numbers"]["patches"] == [[3, 3], [3, 4]] and 1 <= p["numbers"]["rank"] <= p["numbers"]["of"]
    for bad, words in (({"patches": ""}, "`patches`"), ({"patches": "9,0"}, "outside this 8×8 grid"),
                       ({"patches": "3,3", "rank": 6}, "`rank`")):
        with pytest.raises(AppError, match=words):
            client.predict(scene, model=registry.OFFLINE_KEY, api_name="/predict", **bad)
