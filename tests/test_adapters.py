"""vitviz's adapters to gradio (vitviz/app/adapters.py), checked by what they do: each test fails when a gradio
upgrade breaks what its adapter relies on (no version pin, no search of gradio's source)."""

from __future__ import annotations

import inspect

import gradio
from conftest import local_client

from vitviz.app import adapters


def test_the_files_gradio_made_for_an_app_are_removed_by_its_own_cleanup(tmp_path, monkeypatch):
    """``remove_app_files`` runs gradio's cleanup: a picture gradio copied into its cache for an answer is gone
    after it, and the picture it was copied from is left. (What the per-session adapter relies on is checked by
    behaviour in ``test_files.py``: an answer gradio keeps for a session, then dropped.)"""
    import shutil

    from conftest import EXAMPLES, free_port

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
        local_client(f"http://127.0.0.1:{port}/", download_files=False).predict(api_name="/picture")
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


def test_a_new_session_copies_a_blocks_configuration_only_when_gradio_reads_it():
    """``lazy_session_configs``: a session that calls one endpoint holds copies of that endpoint's blocks only (not
    of every block, as gradio made them at once), keeps the value it sent and got as before, and still gives a deep
    link every block's configuration, equal to the copies made at once. Fails when a gradio upgrade makes sessions
    some other way (the copies then made at once: all of them)."""
    from conftest import free_port
    from gradio.state_holder import SessionState

    adapters.lazy_session_configs()
    with gradio.Blocks() as demo:
        for i in range(40):
            gradio.Textbox(f"box {i}", label=f"box {i}")
        src, out = gradio.Textbox(label="in"), gradio.Textbox(label="out")
        gradio.Button().click(lambda s: s.upper(), src, out, api_name="upper")
    eager = {k: demo.default_config.config_for_block(k, [], v) for k, v in demo.blocks.items()}
    fresh = SessionState(demo)
    assert dict.__len__(fresh.config_values) == 0  # nothing copied yet
    assert [c["id"] for c in fresh.components] == list(eager) and list(fresh.components) == list(eager.values())
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = local_client(f"http://127.0.0.1:{port}/")
        assert client.predict("abc", api_name="/upper") == "ABC"
        state = demo.state_holder.session_data[client.session_hash]
        made = dict.__len__(state.config_values)
        assert 1 <= made <= 4 < len(demo.blocks), made  # the event's input and output (and its trigger)
        assert state.config_values[out._id]["props"]["value"] == "ABC"  # what gradio keeps per session, as before
        assert state.config_values[src._id]["props"]["value"] == "abc"
        whole = {c["id"]: c for c in state.components}  # a deep link: every block
        assert set(whole) == set(eager)
        assert all(whole[k] == eager[k] for k in eager if k not in (src._id, out._id))
    finally:
        demo.close()


def test_gradios_queue_looks_for_events_every_10_ms_while_work_runs_and_every_ms_otherwise(monkeypatch):
    """The loop gradio runs reads ``sleep_when_free`` at every turn; while ``busy()`` it is 10 ms, else gradio's own
    1 ms: what gradio's real loop sleeps over 0.3 s with no event, busy and then idle."""
    import asyncio
    import time

    from gradio import queueing

    with gradio.Blocks() as demo:
        gradio.Button().click(lambda: None)
    demo.queue()
    busy = [True]
    adapters.poll_slower_while(demo, lambda: busy[0])
    adapters.poll_slower_while(demo, lambda: False)  # idempotent: the first stays
    q = demo._queue
    assert q.sleep_when_free == 0.01
    busy[0] = False
    assert q.sleep_when_free == 0.001
    q.sleep_when_free = 0.002  # gradio setting its own interval sets the idle one
    assert q.sleep_when_free == 0.002
    q.sleep_when_free = 0.001

    real_sleep, slept = asyncio.sleep, []

    async def counted(delay, *args, **kwargs):
        slept.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(queueing.asyncio, "sleep", counted)

    async def run(is_busy: bool) -> tuple[list[float], float]:
        busy[0] = is_busy
        slept.clear()
        q.stopped = False
        t = time.monotonic()
        loop = asyncio.ensure_future(q.start_processing())
        await real_sleep(0.3)
        q.stopped = True
        await loop
        return list(slept), time.monotonic() - t

    # the values its loop slept, turn by turn; a busy machine may make the turns longer, never more of them than
    # 10 ms sleeps fit in the time the loop ran
    (working, ran), (idle, _) = asyncio.run(run(True)), asyncio.run(run(False))
    assert set(working) == {0.01} and 5 <= len(working) <= ran / 0.01 + 1
    assert set(idle) == {0.001} and len(idle) >= 5
