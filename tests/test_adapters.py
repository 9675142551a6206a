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
