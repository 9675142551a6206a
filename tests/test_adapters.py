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


def test_a_calmed_queue_leaves_an_idle_server_quiet_and_still_answers_at_once():
    """gradio's free queue looks for events every millisecond: its server's thread keeps a share of a core busy
    with nothing to do (10% here), and a forward beside it runs slower. ``calm_queue`` makes it look every 10 ms:
    the same idle server then spends a fraction of that (8.5% against 2.5% of a core here, counted in 10-ms ticks),
    and an event still starts at once."""
    import os
    import threading
    import time

    import httpx

    from conftest import free_port

    def thread_cpu(thread: threading.Thread) -> float:
        with open(f"/proc/self/task/{thread.native_id}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def idle_share(thread: threading.Thread, seconds: float = 2.0) -> float:
        c0 = thread_cpu(thread)
        time.sleep(seconds)
        return (thread_cpu(thread) - c0) / seconds

    with gradio.Blocks() as demo:
        box = gradio.Number()
        gradio.Button().click(lambda x: x + 1, box, box, api_name="add")
    demo.queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        loop = next(t for t in threading.enumerate() if t is getattr(demo.server, "thread", None))
        time.sleep(0.5)
        busy = idle_share(loop)  # gradio's own polling
        adapters.calm_queue(demo)
        time.sleep(0.2)
        calm = idle_share(loop)
        assert busy > 0.03 and calm < busy / 2, (busy, calm)
        url = f"http://127.0.0.1:{port}/gradio_api/call/add"
        waits = []
        for k in range(5):
            t0 = time.perf_counter()
            event = httpx.post(url, json={"data": [k]}).json()["event_id"]
            body = httpx.get(f"{url}/{event}", timeout=30).text
            waits.append(time.perf_counter() - t0)
            assert f"[{k + 1}]" in body.replace(".0", ""), body
        assert sorted(waits)[2] < 0.5, waits  # answered at once (a poll is 10 ms)
    finally:
        demo.close()
