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


def test_a_sessions_configuration_copies_made_on_demand_are_gradios():
    """lazy_session_configs: gradio's SessionState.__init__ is replaced by one that sets the same attributes and
    makes each configuration copy when used: nothing at first, then exactly what gradio's own init makes."""
    from gradio.state_holder import SessionState

    assert adapters.lazy_session_configs() and adapters.lazy_session_configs()  # applied once, idempotent
    gradios = SessionState._vitviz_gradio_init
    source = inspect.getsource(gradios)
    for line in ("self.blocks_config = copy(blocks.default_config)", "self.config_values = {",
                 "self.state_data: dict[int, Any] = {}", "self._state_ttl = {}", "self.is_closed = False",
                 "self.STATE_TTL_WHEN_CLOSED = ("):
        assert line in source, line
    assert source.count("self.") == 6 + 2  # six attributes (and two reads making the copies): nothing else

    with gradio.Blocks() as demo:
        box = gradio.Textbox("a", label="words")
        choice = gradio.Dropdown(["x", "y"], value="y")
        gradio.State([1, 2])
        gradio.Slider(0, 10, value=3)
    eager = SessionState.__new__(SessionState)
    gradios(eager, demo)
    lazy = SessionState(demo)
    assert set(vars(lazy)) == set(vars(eager))
    assert dict.__len__(lazy.config_values) == 0  # nothing made before use
    assert lazy.config_values[box._id] == eager.config_values[box._id]
    assert dict.__len__(lazy.config_values) == 1
    assert choice._id in lazy.config_values and lazy.config_values.get(choice._id) is None  # .get: not made
    lazy._update_value_in_config(choice._id, "x")
    eager._update_value_in_config(choice._id, "x")
    assert lazy.config_values[choice._id]["props"]["value"] == "x"
    assert dict(lazy.config_values.items()) == eager.config_values
    assert list(lazy.components) == list(eager.components) and len(lazy.config_values) == len(eager.config_values)
