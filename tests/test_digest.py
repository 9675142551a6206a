"""Names of other people's analyses and pictures are keyed with the server's secret: whoever holds a picture cannot
name (or learn of) someone else's analysis of it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np

from vitviz.core import digest
from vitviz.models import loaders
from vitviz.models.runner import image_key, picture_address

SNIPPET = "from vitviz.core import digest; print(digest.keyed(b'a picture', 64))"


def _keyed_in_a_new_process(secret: str | None) -> str:
    """What a fresh server process names ``(b'a picture', 64)`` (only the digest module is imported: no torch)."""
    env = {k: v for k, v in os.environ.items() if k != "VITVIZ_SECRET"} | ({"VITVIZ_SECRET": secret} if secret else {})
    out = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_a_token_cannot_be_worked_out_from_the_picture_and_differs_between_servers(monkeypatch):
    from vitviz.analyses import attention

    rgb = np.zeros((64, 64, 3), np.uint8)
    rgb[16:48, 16:48] = 200
    runner = loaders.load_embedded()
    a = attention.analyse(runner, rgb, 64)
    named = (runner.spec.key, runner.weights_id, ("attention",), image_key(rgb), 64)
    assert len(a.token) == 16 and a.token != hashlib.sha1(repr(named).encode()).hexdigest()[:16]
    assert picture_address(rgb) != image_key(rgb) and len(picture_address(rgb)) == 32
    address = picture_address(rgb)
    # each server its own secret: two fresh processes and this one name the same thing three ways
    one, two = _keyed_in_a_new_process(None), _keyed_in_a_new_process(None)
    assert len({one, two, digest.keyed(b"a picture", 64)}) == 3
    # behind one address, processes given one secret name alike, and so does this one under it
    shared = "a secret several processes share"
    monkeypatch.setattr(digest, "_SECRET", shared.encode())
    assert _keyed_in_a_new_process(shared) == digest.keyed(b"a picture", 64)
    # and a picture's address follows the secret
    assert picture_address(rgb) != address and len(picture_address(rgb)) == 32


def test_the_page_cannot_ask_for_a_picture_by_its_plain_content_hash():
    from vitviz import assets
    from vitviz.app import uploads

    path = str(assets.example("scene_ring"))
    rgb = uploads.picture(path)
    assert uploads.file_of(picture_address(rgb)) == path
    assert uploads.file_of(image_key(rgb)) is None


def test_keyed_names_depend_on_the_secret_and_content_names_do_not():
    assert digest.content(b"a", 1) == digest.content(b"a", 1) != digest.content(b"a", 2)
    assert digest.keyed(b"a") != digest.content(b"a", size=16)
