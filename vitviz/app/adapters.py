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

**The queue's polling.** gradio's queue looks for new events every millisecond while it is free (and for progress
every 10 ms): a thousand wake-ups a second, each taking the interpreter's lock. An idle server used 10% of a core
doing it, and a forward running beside it took 15-20% longer (DINO ViT-S/8 at 224 px, the same process, the two
settings alternated: 411-506 ms against 374-428 ms at 10 ms). :func:`calm_queue` makes it look every
:data:`QUEUE_POLL_S` (an event then waits at most that long to start). The upstream change that would remove it:
gradio's queue waking when an event is pushed (an ``asyncio.Event``) instead of polling.

**An API endpoint's parameters from the declarations.** ``gr.api`` makes an endpoint's schema from its function's
signature and type hints; a view's parameters are data (its declared settings), so :func:`typed` gives a function
the signature the declarations make (``__signature__``, which ``inspect.signature`` honours, PEP 362, and the
matching ``__annotations__`` that ``typing.get_type_hints`` reads). The upstream change that would remove it:
``gr.api`` taking a parameter list.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

QUEUE_POLL_S = 0.01
"""How often gradio's free queue looks for a new event (gradio's own: 1 ms on Linux)."""
PROGRESS_POLL_S = 0.05
"""How often it looks for progress to send (gradio's own: 10 ms)."""


def calm_queue(blocks: Any, poll: float = QUEUE_POLL_S, progress: float = PROGRESS_POLL_S) -> None:
    """Make the queue of ``blocks`` (after ``blocks.queue()``) look for new events every ``poll`` seconds and for
    progress every ``progress`` seconds while free, instead of gradio's 1 ms and 10 ms."""
    queue = blocks._queue
    for name in ("sleep_when_free", "progress_update_sleep_when_free"):
        if not isinstance(getattr(queue, name, None), (int, float)):
            raise RuntimeError(f"gradio's queue no longer has {name!r}: see vitviz/app/adapters.py")
    queue.sleep_when_free, queue.progress_update_sleep_when_free = poll, progress


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

