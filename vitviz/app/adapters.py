"""Where vitviz needs something gradio has no public hook for: each adapter small, in this one module, and tested
by what it does (``tests/test_adapters.py`` and ``tests/test_files.py`` fail when gradio changes what it relies on).

**Per-session copies of the API's values.** gradio keeps, for every session, the last value of every input and
output of every event (its copy of the page's configuration, for deep links), until the session is evicted
(:data:`vitviz.app.serving.SESSIONS` sessions later). For the API endpoints (``gr.api``: its inputs and outputs are
``Api`` components) that is every picture, every parameter and every answer a client sent or got: a client's 60 MB
data: URL, refused or not, stayed in memory for as long as the server ran. :func:`forget_api_values` drops them:
each endpoint right after it has read its inputs, and the answers every minute. The upstream change that would
remove this adapter: gradio not keeping the values of ``gr.api`` endpoints (they have no page to link to).

**A session's copy of the page's configuration, made as it is read.** gradio gives every new session (a page
opened, each API call without a session, each MCP call) its own copy of every block's configuration, for its deep
links, at once: for this app's ~700 blocks that was 0.12 s of the event loop and 0.6 MB per session, about a third
of a DINO ViT-S/8 forward at 224 px for each student's first request. :func:`lazy_session_configs` makes each
block's copy when gradio first reads it (an input or answer it keeps, a deep link): the same values, from the
blocks as they were when the session began. The upstream change that would remove it: gradio making a session's
configuration copies on demand.

**The files gradio made for the app, when the server stops.** gradio removes them in its server's shutdown, which
its Ctrl-C path cuts short (it stops waiting for the server after 5 s and the process ends): :func:`remove_app_files`
runs gradio's own cleanup once more after the server has stopped. The upstream change that would remove it: gradio
removing the files in ``Blocks.close``.

**An API endpoint's parameters from the declarations.** ``gr.api`` makes an endpoint's schema from its function's
signature and type hints; a view's parameters are data (its declared settings), so :func:`typed` gives a function
the signature the declarations make (``__signature__``, which ``inspect.signature`` honours, PEP 362, and the
matching ``__annotations__`` that ``typing.get_type_hints`` reads). The upstream change that would remove it:
``gr.api`` taking a parameter list.

**gradio's queue, polled less while work runs.** gradio's queue looks for new events every millisecond while it has
none waiting (``Queue.sleep_when_free``, 1 ms on Linux), also while a forward runs: a thousand wake-ups a second
that take a core from torch's two threads, whose every operation then waits for the one left behind (the same
fused forward 15–20% slower in a launched server). :func:`poll_slower_while` makes the queue look every 10 ms
while the server's budget holds work (a forward, a figure, a decode), and every millisecond otherwise: a request
that comes in while the server is idle starts as soon as before, one that comes during work waits at most 10 ms
more, behind work that takes hundreds. The upstream change that would remove it: the queue woken by an event when a
request arrives or a job ends, instead of polling.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

NAVBAR_CSS = ".nav-holder { display: none !important; }"
"""gradio shows a bar of its pages on every page of a multi-page app, and ``gr.Navbar(visible=False)`` does not hide it
when the page loads (gradio-app/gradio#12532, open for 6.0–6.31): the page at /next (``demo.route``) made one appear
above the page at /. Hidden by its class until gradio honours ``visible=False`` on load (then drop this and keep the
``gr.Navbar(visible=False)`` each page has); ``tests/test_browser_next.py`` checks no page shows it."""

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


class _Configs(dict):
    """One session's configuration copies (gradio's ``SessionState.config_values``): ``make(id)`` for each block id in
    ``ids``, made when first read. Reading, ``in``, ``get`` and iterating behave as for the whole dict made at
    once; ``dict.get(configs, id)`` reads only what has been made."""

    def __init__(self, make: Callable[[int], dict], ids: Any) -> None:
        super().__init__()
        self._make, self._ids = make, ids

    def __missing__(self, key: int) -> dict:
        if key not in self._ids:
            raise KeyError(key)
        value = self[key] = self._make(key)
        return value

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self._ids

    def get(self, key: int, default: Any = None) -> Any:
        return self[key] if key in self else default

    def _whole(self) -> dict:
        for key in self._ids:
            if not dict.__contains__(self, key):
                self[key]
        return self

    def items(self):
        return dict.items(self._whole())

    def keys(self):
        return dict.keys(self._whole())

    def values(self):
        return dict.values(self._whole())

    def __iter__(self):
        return dict.__iter__(self._whole())

    def __len__(self) -> int:
        return dict.__len__(self._whole())


def lazy_session_configs() -> None:
    """Make gradio's sessions copy a block's configuration when it is first read, not every block's when the
    session begins (this module's docstring says why). Process-wide and idempotent; the values are the same. A
    gradio whose sessions read more of the Blocks than this knows makes them its own way (tests/test_adapters.py
    then fails)."""
    from gradio.state_holder import SessionState

    if getattr(SessionState.__init__, "_vitviz_lazy", False):
        return
    made_at_once = SessionState.__init__

    class _Bare:  # the Blocks as the copy sees it: its configuration, none of its blocks to copy yet
        def __init__(self, blocks: Any) -> None:
            self.default_config, self.blocks = blocks.default_config, {}

    def made_when_read(state: Any, blocks: Any) -> None:
        try:
            made_at_once(state, _Bare(blocks))
        except AttributeError:  # gradio reads more of the Blocks than this knows: its own way, whole
            made_at_once(state, blocks)
            return
        config = state.blocks_config
        then = {k: v for k, v in config.blocks.items() if k in blocks.blocks}  # the blocks as the session began
        state.config_values = _Configs(lambda k: config.config_for_block(k, [], then[k]), then)

    made_when_read._vitviz_lazy = True
    SessionState.__init__ = made_when_read


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
        for i in ids:  # only the copies made (dict.get: reading one would make it)
            props = (dict.get(state.config_values, i) or {}).get("props")
            if props is not None and props.get("value") is not None:
                props["value"] = None
                dropped += 1
    return dropped


def remove_app_files(blocks: Any) -> None:
    """Remove every file gradio made for this app (uploads, examples it copied, pictures it cached): gradio's own
    cleanup, with no age limit."""
    from gradio.route_utils import delete_files_created_by_app

    delete_files_created_by_app(blocks, None)


def poll_slower_while(blocks: Any, busy: Callable[[], bool], seconds: float = 0.01) -> None:
    """Make ``blocks``' queue (after ``blocks.queue()``) wait ``seconds`` between its looks for new events while
    ``busy()``, and its own interval otherwise (this module's docstring says why). Idempotent. gradio's loop reads
    ``sleep_when_free`` at every turn (tests/test_adapters.py fails if it stops)."""
    queue = blocks._queue
    if getattr(queue, "_vitviz_polled", False):
        return
    idle = queue.__dict__.pop("sleep_when_free", 0.001)

    class Polled(type(queue)):
        _vitviz_polled = True

        @property
        def sleep_when_free(self) -> float:
            return seconds if busy() else idle

        @sleep_when_free.setter
        def sleep_when_free(self, value: float) -> None:
            nonlocal idle
            idle = value

    Polled.__name__ = Polled.__qualname__ = type(queue).__name__
    queue.__class__ = Polled
