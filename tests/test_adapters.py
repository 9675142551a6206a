"""vitviz's adapters to gradio internals (vitviz/app/adapters.py) against the pinned gradio: when gradio changes,
these fail first and say which adapter to look at (what each relies on is behaviour, checked in test_files.py)."""

from __future__ import annotations

import inspect

import gradio

from vitviz.app import adapters


def test_the_adapters_are_written_for_this_gradio():
    assert gradio.__version__ == adapters.GRADIO, (
        f"gradio {gradio.__version__}: check vitviz/app/adapters.py against it (written for {adapters.GRADIO})")


def test_what_the_adapters_reach_into_is_there():
    from gradio.components.api_component import Api
    from gradio.route_utils import delete_files_created_by_app
    from gradio.state_holder import SessionState, StateHolder

    assert issubclass(Api, gradio.components.Component)
    assert list(inspect.signature(delete_files_created_by_app).parameters) == ["blocks", "age"]
    assert "session_data" in inspect.getsource(StateHolder.__init__)
    assert "config_values" in inspect.getsource(SessionState.__init__)
    assert "_update_value_in_config" in inspect.getsource(gradio.blocks.Blocks.preprocess_data)


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
