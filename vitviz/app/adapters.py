"""Where vitviz needs something gradio has no public hook for: each adapter small, in this one module, and tested
by what it does (``tests/test_adapters.py`` and ``tests/test_files.py`` fail when gradio changes what it relies on).

**Per-session copies of the API's values.** gradio keeps, for every session, the last value of every input and
output of every event (its copy of the page's configuration, for deep links), until the session is evicted
(:data:`vitviz.app.serving.SESSIONS` sessions later). For the API endpoints (``gr.api``: its inputs and outputs are
``Api`` components) that is every picture, every parameter and every answer a client sent or got: a client's 60 MB
data: URL, refused or not, stayed in memory for as long as the server ran. :func:`forget_api_values` drops them:
each endpoint right after it has read its inputs, and the answers every minute. The upstream change that would
remove this adapter: gradio not keeping the values of ``gr.api`` endpoints (they have no page to link to).

**The files gradio made for the app, when the server stops.** gradio removes them in its server's shutdown, which
its Ctrl-C path cuts short (it stops waiting for the server after 5 s and the process ends): :func:`remove_app_files`
runs gradio's own cleanup once more after the server has stopped. The upstream change that would remove it: gradio
removing the files in ``Blocks.close``.

**An API endpoint's parameters from the declarations.** ``gr.api`` makes an endpoint's schema from its function's
signature and type hints; a view's parameters are data (its declared settings), so :func:`typed` gives a function
the signature the declarations make (``__signature__``, which ``inspect.signature`` honours, PEP 362, and the
matching ``__annotations__`` that ``typing.get_type_hints`` reads). The upstream change that would remove it:
``gr.api`` taking a parameter list.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

def typed(body: Callable[..., Any], sig: inspect.Signature, name: str, doc: str) -> Callable[..., Any]:
    """``body(**arguments)`` as a function whose signature (names, defaults, type hints, gradio's special
    parameters) is ``sig``: what gradio reads to describe and call an endpoint."""
    def call(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(**bound.arguments)

    call.__signature__ = sig
    call.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
    if sig.return_annotation is not inspect.Signature.empty:
        call.__annotations__["return"] = sig.return_annotation
    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    return call


def blocks_of(request: Any) -> Any | None:
    """The Blocks serving ``request`` (a ``gr.Request``), or None outside a server."""
    app = getattr(getattr(request, "request", None), "app", None)
    get = getattr(app, "get_blocks", None)
    return get() if callable(get) else None


def _api_ids(blocks: Any) -> set[int]:
    from gradio.components.api_component import Api

    return {i for i, b in blocks.blocks.items() if isinstance(b, Api)}


def forget_api_values(blocks: Any, session: str | None = None) -> int:
    """Drop the values gradio keeps for the API's inputs and outputs: of one session, or of all (None). Returns
    how many were dropped."""
    if blocks is None:
        return 0
    ids = _api_ids(blocks)
    holder = blocks.state_holder
    sessions = [session] if session is not None else list(holder.session_data)
    dropped = 0
    for name in sessions:
        state = holder.session_data.get(name)
        if state is None:
            continue
        for i in ids:
            props = (state.config_values.get(i) or {}).get("props")
            if props is not None and props.get("value") is not None:
                props["value"] = None
                dropped += 1
    return dropped


def remove_app_files(blocks: Any) -> None:
    """Remove every file gradio made for this app (uploads, examples it copied, pictures it cached): gradio's own
    cleanup, with no age limit."""
    from gradio.route_utils import delete_files_created_by_app

    delete_files_created_by_app(blocks, None)

