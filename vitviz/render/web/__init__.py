"""The scripts and styles of the views drawn in the browser (the app gives them to gr.HTML components).

``lib/*.mjs`` are ES modules of pure functions, each the twin of a library function (number printing, the mass
mask, attention rows, one head's arithmetic, Pillow's resampling and the models' input policy, the forward pass's
numbers); Node's test runner checks them against vectors the library writes (``tests/js``). A page script is those modules' text, ``export``
taken off (gr.HTML runs its ``js_on_load`` as one function body, where ES imports cannot be), then its own files.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

WEB = Path(__file__).resolve().parent
LIB = ("numbers", "maps", "picture", "server", "lessons", "address", "forward", "device")
"""The modules every page script starts with, in this order (none imports another)."""


@cache
def library() -> str:
    """The text of :data:`LIB`'s modules as one script: their ``export`` keywords removed."""
    parts = []
    for name in LIB:
        text = (WEB / "lib" / f"{name}.mjs").read_text()
        if re.search(r"^\s*import\b", text, re.M):
            raise ValueError(f"lib/{name}.mjs imports: the page joins the modules, so each must stand alone")
        parts.append(re.sub(r"^export\s+", "", text, flags=re.M))
    return "\n".join(parts)


@cache
def version() -> str:
    """A name for this package's page files as they are (a hash of every module, script and style under
    render/web): the page imports its modules under it, so a browser caches them until the package changes."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(WEB.rglob("*")):
        if path.suffix in (".mjs", ".js", ".css") and path.is_file():
            h.update(path.relative_to(WEB).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def script(*files: str) -> str:
    """A ``js_on_load`` body: the library's modules, then ``files`` (names under render/web) in order."""
    return library() + "\n" + "".join((WEB / f).read_text() for f in files)
