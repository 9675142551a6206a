"""Names made from content: one recipe for what vitviz names by its bytes, and one for what a stranger must not be
able to name.

- :func:`content`: a SHA-256 digest of bytes and a few words (a figure file, a graph, a cache key). The same content
  gives the same name in every process, which is what a content address is for.
- :func:`keyed`: an HMAC-SHA-256 of the same, under this server's secret. What names another person's analysis
  or picture (the explorer's token, a picture's address) is keyed: whoever holds a picture cannot work out the name
  of someone else's analysis of it, nor learn whether one exists. The secret is made when the process starts
  (``VITVIZ_SECRET`` sets it, for several processes behind one address: they then name the same analysis alike).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

_SECRET = os.environ.get("VITVIZ_SECRET", "").encode() or secrets.token_bytes(32)


def _parts(parts: tuple) -> bytes:
    return b"\x1f".join(p if isinstance(p, (bytes, bytearray, memoryview)) else repr(p).encode() for p in parts)


def content(*parts: object, size: int = 20) -> str:
    """The first ``size`` hex digits of the SHA-256 of ``parts`` (bytes as they are, anything else by its repr)."""
    return hashlib.sha256(_parts(parts)).hexdigest()[:size]


def keyed(*parts: object, size: int = 16) -> str:
    """The first ``size`` hex digits of the HMAC-SHA-256 of ``parts`` under this server's secret."""
    return hmac.new(_SECRET, _parts(parts), hashlib.sha256).hexdigest()[:size]
