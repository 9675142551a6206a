"""vitviz's adapters to gradio (vitviz/app/adapters.py), checked by what they do: each test fails when a gradio
upgrade breaks what its adapter relies on (no version pin, no search of gradio's source)."""

from __future__ import annotations

import inspect

import gradio

from vitviz.app import adapters


def test_the_files_gradio_made_for_an_app_are_removed_by_its_own_cleanup(tmp_path, monkeypatch):
    """``remove_app_files`` runs gradio's cleanup: a picture gradio copied into its cache for an answer is gone
    after it, and the picture it was copied from is left. (What the per-session adapter relies on is checked by
    behaviour in ``test_files.py``: an answer gradio keeps for a session, then dropped.)"""
    import shutil

    from conftest import EXAMPLES, free_port
    from gradio_client import Client

    cache = tmp_path / "cache"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    mine = tmp_path / "mine.png"
    shutil.copy(EXAMPLES / "scene_star.png", mine)
    with gradio.Blocks() as demo:
        out = gradio.Image(type="filepath")
        gradio.Button().click(lambda: str(mine), None, out, api_name="picture")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=False).predict(api_name="/picture")
        copies = [f for f in cache.rglob("mine.png")]
        assert copies  # gradio copied the answer's picture into its cache
        adapters.remove_app_files(demo)
        assert not [f for f in copies if f.exists()] and mine.is_file()
    finally:
        demo.close()


def test_an_endpoint_made_by_typed_has_the_declared_schema_and_gets_its_arguments_by_name():
    """gradio describes and calls a ``gr.api`` endpoint through its signature and type hints: a function made by
    ``adapters.typed`` must come out of ``view_api`` with the declared names, types and defaults."""
    from typing import Literal

    sig = inspect.Signature([
        inspect.Parameter("layer", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=3, annotation=int),
        inspect.Parameter("cmap", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="viridis",
                          annotation=Literal["viridis", "magma"]),
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                          annotation=gradio.Request)], return_annotation=dict)
    got = []
    fn = adapters.typed(lambda **kw: got.append(kw) or {"layer": kw["layer"]}, sig, "probe", "A probe.")
    assert fn(5) == {"layer": 5} and got[-1] == {"layer": 5, "cmap": "viridis", "request": None}
    with gradio.Blocks() as demo:
        gradio.api(fn, api_name="probe")
    params = demo.get_api_info()["named_endpoints"]["/probe"]["parameters"]
    assert [p["parameter_name"] for p in params] == ["layer", "cmap"]
    assert params[0]["python_type"]["type"] == "int" and params[0]["parameter_default"] == 3
    assert params[1]["type"].get("enum") == ["viridis", "magma"], params[1]
