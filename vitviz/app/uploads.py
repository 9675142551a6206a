"""Pictures arriving at the app: whatever way they come, decoded once by vitviz's intake, named for the link.

A picture comes as gradio's file record (an upload, an example, a client's ``handle_file``), a path the server set,
or a ``data:`` URL in the request body. All go through :func:`picture`: the same size limits, the same intake
(:func:`vitviz.core.images.load_rgb`, which refuses what cannot or should not be decoded with a message for a
student), the server-wide memory budget while decoding (:func:`vitviz.models.budget.reserve`, from an estimate
read in the file's header), and one decode cache bounded in bytes and keyed by a hash of the bytes.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from vitviz.core import digest, owned
from vitviz import assets
from vitviz.app import files
from vitviz.core import images
from vitviz.core.lru import LRU
from vitviz.models import budget, runner

MAX_UPLOAD_BYTES = 50 * 2**20
"""The largest file accepted, however it arrives (gradio's own upload limit is set to the same)."""
DECODED_BYTES = 256 * 2**20
"""Decoded pictures kept for the requests that follow (the check on upload, then the tab's work)."""
log = logging.getLogger("vitviz")
_decoded: LRU[np.ndarray] = owned.keep("uploads.decoded", "pictures", LRU(16, DECODED_BYTES, lambda a: a.nbytes),
                                       "pictures decoded, for the requests that follow")


UPLOAD_BYTES = int(float(os.environ.get("VITVIZ_UPLOADS_MB", "2048")) * 2**20)
"""The uploads this server keeps on disk together stay within this many bytes (``VITVIZ_UPLOADS_MB``, in MiB; 2 GiB
by default): past it the oldest an open page does not hold are removed first; an upload that still would not fit
is refused in words (:class:`Received`)."""


class Received:
    """The files uploaded to this server (gradio's ``/gradio_api/upload``), oldest first, within :data:`UPLOAD_BYTES`
    on disk. An upload reserves its declared size before its body is read (:meth:`make_room`: the oldest uploads no
    open page holds are removed until it fits, else it is refused), and its files are counted once received
    (:meth:`received`). gradio's own cleaner removes uploads too; what it removed is no longer counted."""

    def __init__(self) -> None:
        # path -> (bytes, inode, mtime in ns) as received, the oldest first: a file at that path later (the same
        # picture uploaded again is renamed to the same path) is another file, never removed for this one
        self._files: OrderedDict[str, tuple[int, int, int]] = OrderedDict()
        self._arriving = 0  # bytes reserved by uploads whose bodies are being read
        self._lock = threading.Lock()

    def held(self) -> int:
        """Bytes of the uploads kept now (those still on disk)."""
        with self._lock:
            self._forget_gone()
            return sum(size for size, _, _ in self._files.values())

    def _forget_gone(self) -> None:
        for path in [p for p in self._files if not os.path.isfile(p)]:
            del self._files[path]

    def make_room(self, nbytes: int) -> str | None:
        """Reserve ``nbytes`` for an upload arriving, removing the oldest uploads no open page holds until it fits;
        the refusal's words when it cannot (then nothing is reserved). Never removed: a file an open page holds, one
        gradio keeps for the app's blocks (an upload equal to an example is the example's cached file), one another
        server sharing gradio's folder lists, and one that is no longer the file received at that path (checked and
        removed under the lock :meth:`received` counts under)."""
        limit = UPLOAD_BYTES
        if nbytes > limit:
            return (f"This upload is {_size(nbytes)}; this server keeps at most {_size(limit)} of uploads in all. "
                    "Please send a smaller picture.")
        spared: set[str] | None = None
        gone = 0
        with self._lock:
            self._forget_gone()
            total = sum(size for size, _, _ in self._files.values()) + self._arriving
            for path in list(self._files):
                if total + nbytes <= limit:
                    break
                if spared is None:  # read only when room must be made
                    spared = set(files.PICTURES.held()) | files.own_files()[0] | files.listed_by_others()
                if path in spared:
                    continue
                size, ino, mtime = self._files[path]
                try:
                    st = os.stat(path)
                except OSError:
                    st = None
                if st is None or (st.st_ino, st.st_mtime_ns) != (ino, mtime):
                    del self._files[path]  # gone, or another file now (not this upload's to remove)
                    total -= size
                    continue
                del self._files[path]
                total -= size
                gone += _remove_upload(path)
            fits = total + nbytes <= limit
            if fits:
                self._arriving += nbytes
        if gone:
            log.info("removed %d upload(s), the oldest, to keep uploads within %s", gone, _size(limit))
        if fits:
            return None
        log.info("refused an upload of %d bytes: the uploads open pages use fill the %s", nbytes, _size(limit))
        return (f"This server keeps at most {_size(limit)} of uploaded pictures, and the pictures open "
                "pages use fill it now. Please try again in a few minutes, or use an example.")

    def received(self, paths, reserved: int) -> None:
        """An upload's files arrived (the newest; listed for whoever finds this server dead) and its reservation
        of ``reserved`` bytes ends."""
        stats = {}
        keep = files.own_files()[0]  # an upload equal to an example is the example's cached file: not this upload's
        with self._lock:
            for path in (str(p) for p in paths if str(p) not in keep):
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    stats[path] = (st.st_size, st.st_ino, st.st_mtime_ns)
            self._arriving = max(0, self._arriving - reserved)
            for path, stat in stats.items():
                self._files.pop(path, None)
                self._files[path] = stat
        if stats:
            files.server().note(stats)

    def ended(self, reserved: int) -> None:
        """An upload refused or failed: its reservation ends."""
        with self._lock:
            self._arriving = max(0, self._arriving - reserved)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()


def _remove_upload(path: str) -> bool:
    """An upload's file removed (and its content's folder, gradio's, when empty); whether it was."""
    p = Path(path)
    try:
        p.unlink()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        p.parent.rmdir()
    return True


def _size(n: int) -> str:
    """A size in words, never "0 MiB": 2 GiB, 1.1 MiB, 512 KiB, 300 bytes (one decimal at most, none when it is .0)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{n:,} bytes"


RECEIVED = owned.keep("uploads.received", "gates", Received(), "the uploads this server keeps, within their budget")
"""This server's uploads, within :data:`UPLOAD_BYTES`."""


def _source(payload: Any) -> tuple[str | bytes, str]:
    """(a path or the bytes, a key naming their content) for a picture however it arrived."""
    if isinstance(payload, dict):
        url = payload.get("url") or ""
        if url.startswith("data:"):
            payload = url
        elif url and not payload.get("path"):
            raise ValueError("vitviz does not fetch pictures from web addresses: upload the file, or send it as a "
                             "data: URL.")
        else:
            payload = payload.get("path")
    if isinstance(payload, str) and payload.startswith("data:"):
        head, _, body = payload.partition(",")
        if len(body) > MAX_UPLOAD_BYTES * 4 // 3 + 4:
            raise ValueError(f"This picture is larger than {MAX_UPLOAD_BYTES // 2**20} MiB, the limit for any "
                             "upload. Please send a smaller file.")
        try:
            data = base64.b64decode(body, validate=True) if ";base64" in head else body.encode()
        except (binascii.Error, ValueError):
            raise ValueError("That data: URL is not valid base64; please send the picture as a file.") from None
        return data, "sha:" + digest.content(data, size=40)
    if isinstance(payload, (bytes, bytearray)):
        data = bytes(payload)
        if len(data) > MAX_UPLOAD_BYTES:
            raise ValueError(f"This picture is larger than {MAX_UPLOAD_BYTES // 2**20} MiB, the limit for any "
                             "upload. Please send a smaller file.")
        return data, "sha:" + digest.content(data, size=40)
    if isinstance(payload, (str, Path)) and str(payload):
        path = Path(payload)
        if not _may_read(path):
            raise ValueError("That picture was not uploaded to this app; please upload it (or send it as a data: URL).")
        try:
            st = path.stat()
        except OSError:
            raise ValueError("No picture was received (the file is gone); please upload it again.") from None
        if st.st_size > MAX_UPLOAD_BYTES:
            raise ValueError(f"This picture is larger than {MAX_UPLOAD_BYTES // 2**20} MiB, the limit for any "
                             "upload. Please send a smaller file.")
        files.PICTURES.used(path)  # an open page holding it keeps it longest
        return str(path), f"file:{path}:{st.st_size}:{st.st_mtime_ns}"  # uploads are never rewritten in place
    raise ValueError("Please choose a picture first: upload one, use the webcam, or click an example.")


def _may_read(path: Path) -> bool:
    """Only files uploaded to this app (gradio checked them) and vitviz's own examples: a path typed into a request
    must not read anything else on the server."""
    from gradio import utils

    real = path.resolve()
    return any(real.is_relative_to(Path(root).resolve()) for root in (utils.get_upload_folder(), assets.ROOT))


def path_of(payload: Any) -> str | None:
    """The server file a picture payload names (an upload, an example), or None (a data: URL, nothing)."""
    if isinstance(payload, dict):
        payload = None if (payload.get("url") or "").startswith("data:") else payload.get("path")
    if isinstance(payload, (str, Path)) and str(payload) and not str(payload).startswith("data:"):
        return str(payload)
    return None


def picture(payload: Any) -> np.ndarray:
    """The picture as a read-only (H, W, 3) uint8 array, shrunk while decoding to what the largest view uses.

    Decoded once per content: the check that clears a bad picture and the tab's work that follows share it.
    Raises ``ValueError`` with a message for a student.
    """
    src, key = _source(payload)

    def decode() -> np.ndarray:
        with budget.reserve(images.decode_bytes(src, images.INTAKE_SHORT_SIDE), "decoding this picture"):
            rgb = images.load_rgb(src, images.INTAKE_SHORT_SIDE)
        if isinstance(src, str):  # a link naming this upload opens it again while the server holds the file
            _named.put(f"upload-{images.fingerprint(src)}", src)
        return runner.shared_picture(rgb)  # read-only, hashed once for the events that use it

    rgb = _decoded.get_or_make(key, decode)
    if isinstance(src, str):  # a file on this server: the picture can be read again by its content address
        _files.put(runner.picture_address(rgb), src)
    return rgb


_files: LRU[str] = owned.keep("uploads.files", "pictures", LRU(4096), "a picture's address -> its server file")
"""A decoded picture's address (:func:`vitviz.models.runner.picture_address`, keyed with the server's secret) -> the
server file it came from (an upload, an example)."""


_named: LRU[str] = owned.keep("uploads.named", "pictures", LRU(4096), "an upload's name in links -> its server file")
"""An upload's name in a link (``upload-<fingerprint>``, :func:`link_name`) -> the server file it was decoded from."""


def named_file(name: str | None) -> str | None:
    """The server file of the upload a link names (``upload-<fingerprint>``) while the server still holds it, else
    None: a link made on an upload opens on it again on this server (a reload, a lesson's step, a classmate's copy
    of the link) until the file is swept; elsewhere it opens on an example and says why."""
    path = _named.get(name) if isinstance(name, str) and name.startswith("upload-") else None
    return path if path is not None and Path(path).is_file() else None


def keep_lesson_picture(data_url: str) -> str:
    """A lesson's own picture (a ``data:`` URL from a lesson file the page opened), checked and decoded like any
    upload, kept as a file of this server's outputs and named as an upload: returns its name for links
    (``upload-<fingerprint>``). ``ValueError`` for a student when it is not a usable picture or over
    :data:`vitviz.tools.lesson.MAX_PICTURE_BYTES`."""
    from vitviz.tools import lesson

    if not isinstance(data_url, str) or not data_url.startswith("data:image/"):
        raise ValueError("A lesson's picture comes as a data: URL of a PNG, JPEG, GIF or WebP picture.")
    data, _ = _source(data_url)
    if len(data) > lesson.MAX_PICTURE_BYTES:
        raise ValueError(f"This lesson's picture is {len(data) / 2**20:.1f} MiB; a lesson carries at most "
                         f"{lesson.MAX_PICTURE_BYTES // 2**20} MiB. Save it smaller and open the lesson again.")
    picture(data_url)  # refused here, with the intake's message, if it cannot or should not be decoded
    kind = lesson.picture_kind(data)  # from its bytes, not the URL's words (a file name holds nothing a request wrote)
    path = str(files.outputs().figure(data, suffix=f".{kind}"))
    name = f"upload-{images.fingerprint(data)}"
    _named.put(name, path)
    return name


def lesson_picture(name: str) -> str:
    """The upload a link names as a ``data:`` URL a lesson file can carry: the file itself up to
    :data:`vitviz.tools.lesson.MAX_PICTURE_BYTES`, else the picture as every view uses it (decoded at the intake's
    size) in PNG, or JPEG (quality 95) when even that is larger. ``ValueError`` when the server no longer holds it."""
    import io

    from PIL import Image

    from vitviz.tools import lesson

    path = named_file(name)
    if path is None:
        raise ValueError("This server no longer holds that uploaded picture (pictures are let go a while after "
                         "their page closes): upload it again, then download the lesson.")
    data = Path(path).read_bytes() if Path(path).stat().st_size <= lesson.MAX_PICTURE_BYTES else b""
    if not data:
        rgb = picture(path)
        for fmt, opts in (("PNG", {"optimize": True}), ("JPEG", {"quality": 95})):
            out = io.BytesIO()
            Image.fromarray(np.asarray(rgb)).save(out, fmt, **opts)
            data = out.getvalue()
            if len(data) <= lesson.MAX_PICTURE_BYTES:
                break
    return lesson.data_url(data)


def file_of(picture_key: str) -> str | None:
    """The server file of the picture with content address ``picture_key`` while it is still there, or None."""
    path = _files.get(picture_key) if isinstance(picture_key, str) else None
    return path if path is not None and Path(path).is_file() else None


@functools.lru_cache(maxsize=1)
def example_keys() -> dict[str, str]:
    """Fingerprint of each shipped example -> its name in a link (the file name without extension)."""
    return {images.fingerprint(assets.example(name)): name for name in assets.example_names()}


def link_name(payload: Any) -> str:
    """How a link names the picture: an example's name, or 'upload-<hash>' for an upload (which cannot travel)."""
    if payload is None:
        return ""
    try:
        src, _ = _source(payload)
    except ValueError:
        return ""
    fp = images.fingerprint(src)
    return example_keys().get(fp, f"upload-{fp}")


def example_path(key: str | None) -> str | None:
    """The example file a link names, or None (no such example, or an upload)."""
    if not key or key.startswith("upload-"):
        return None
    try:
        return str(assets.example(key))
    except KeyError:
        return None


PHOTOS = ("cat.png", "coffee.png", "astronaut.png", "rocket.jpg")
"""The example photos: the hub's models answer for them; the embedded model knows only the scenes."""
SCENES = ("scene_star.png", "scene_ring.png", "scene_triangle.png", "scene_cross.png")
"""The example shape scenes the embedded model was trained on (offline, the model tabs open on the first)."""


def example(name: str) -> str:
    """An example picture's path by its file name (as the tabs list them)."""
    return os.fspath(assets.EXAMPLES / name)
