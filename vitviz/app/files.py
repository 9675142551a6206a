"""The files a server writes and keeps: what it hands out, the pictures its pages use, and how long each stays.

- **This server's folder** (:class:`Server`, ``vitviz-server-<pid>-<random>`` inside gradio's cache folder): a lock
  held while the process lives, the list of the files it made gradio keep (each upload as it arrives), and its
  outputs. The next server to start removes what a dead one left (SIGKILL runs no cleanup): its folder and the files
  it listed that no live server lists, that the new server's own app does not hold and that nothing changed after
  the dead one last wrote its list (:func:`sweep_stale`); a live server's lock cannot be taken, so its folder stays.
- **Outputs** (the PNG figures an API or MCP client receives, the bundles): written into this server's folder (so
  gradio serves them), named by content. The folder is swept every minute:
  a file not handed out for ``OUTPUT_SECONDS`` goes, the folder stays under ``OUTPUT_BYTES`` (oldest first), empty
  folders go, and the whole folder goes when the server stops (also on SIGTERM: :func:`stop_on_sigterm`).
- **Pictures a page uses** (an upload, an example the page received): gradio removes the files it made for this app
  once they are ``PICTURE_SECONDS`` old, counted from their last change of status (ctime). A page that uses a picture
  holds it (:meth:`Pictures.hold`): every sweep touches the held files, so they outlive gradio's limit while the page
  is open, however long a class works on one picture; when the page closes (its heartbeat stream ends:
  ``serving.PageClosed``) it lets go and the file ages out as usual. Together the held files stay under
  ``HELD_BYTES``: past that, the least recently used are no longer kept alive.

Nothing here knows about views or models; :func:`lifespan` is what the app hands to its server (a FastAPI lifespan).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from vitviz.core import digest, owned

OUTPUT_SECONDS = float(os.environ.get("VITVIZ_OUTPUT_SECONDS", "600"))
"""A file handed out (a figure for an API client, a bundle) is kept this long after it was last handed out."""
OUTPUT_BYTES = int(float(os.environ.get("VITVIZ_OUTPUT_BYTES", str(512 * 2**20))))
"""All outputs together stay under this many bytes on disk (the oldest go first)."""
PICTURE_SECONDS = 600
"""gradio's cleaner removes a picture file this long after its last change of status, unless a page holds it."""
HELD_BYTES = int(float(os.environ.get("VITVIZ_HELD_BYTES", str(2 * 2**30))))
"""The pictures open pages hold together stay under this many bytes; past it the least recently used are let go."""
SWEEP_SECONDS = 60.0
log = logging.getLogger("vitviz")


def _touch(path: Path) -> None:
    """Mark ``path`` as used now (its status changes, so its ctime is now), keeping its modification time (which
    the decode cache's key holds)."""
    st = path.stat()
    os.utime(path, ns=(time.time_ns(), st.st_mtime_ns))


class Outputs:
    """One folder of files this server hands out, swept by age and size, removed when the server stops."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()

    def figure(self, data: bytes, suffix: str = ".png") -> Path:
        """A file holding ``data`` (named by its content: the same figure twice is one file, handed out again)."""
        path = self.root / "figures" / (digest.content(data) + suffix)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_file():
                _touch(path)
                return path
        part = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        part.write_bytes(data)
        os.replace(part, path)  # a reader sees the whole file or none
        return path

    def folder(self) -> Path:
        """A new folder for one request's files (a bundle keeps its readable name inside it)."""
        path = self.root / "bundles" / uuid.uuid4().hex
        path.mkdir(parents=True, exist_ok=True)
        return path

    def files(self) -> list[tuple[float, int, Path]]:
        """(last handed out, bytes, path) of every file, oldest first."""
        out = []
        for path in self.root.rglob("*") if self.root.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.is_file():
                    st = path.stat()
                    out.append((st.st_ctime, st.st_size, path))
        return sorted(out)

    def sweep(self, now: float | None = None) -> int:
        """Remove files not handed out for :data:`OUTPUT_SECONDS`, then the oldest until the rest fit
        :data:`OUTPUT_BYTES`, then empty folders. Returns the number of files removed."""
        now = time.time() if now is None else now
        with self._lock:
            files = self.files()
            total = sum(size for _, size, _ in files)
            gone = 0
            for seen, size, path in files:
                if now - seen > OUTPUT_SECONDS or total > OUTPUT_BYTES:
                    with contextlib.suppress(OSError):
                        path.unlink()
                        total -= size
                        gone += 1
            for folder in sorted((p for p in self.root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only empty ones: rmdir refuses the rest
        return gone

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class Pictures:
    """The picture files open pages use, kept alive while their page is open (see the module's text)."""

    def __init__(self) -> None:
        self._pages: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def hold(self, page: str, path: str | os.PathLike) -> None:
        """Page ``page`` (gradio's session) uses the picture at ``path`` (kept alive, and marked used now)."""
        path = str(path)
        with self._lock:
            self._pages.setdefault(page, {})[path] = time.monotonic()
        with contextlib.suppress(OSError):
            _touch(Path(path))
        if _server is not None:  # its list is as new as the touch: killed now, the next start still removes it
            _server.touched()

    def used(self, path: str | os.PathLike) -> None:
        """The picture at ``path`` was used again (by any page holding it): it is the last to be let go."""
        path, now = str(path), time.monotonic()
        with self._lock:
            for paths in self._pages.values():
                if path in paths:
                    paths[path] = now

    def release(self, page: str) -> None:
        """Page ``page`` closed: its pictures age out as usual."""
        with self._lock:
            self._pages.pop(page, None)

    def clear(self) -> None:
        """Forget what every page holds (the files then age out as usual)."""
        with self._lock:
            self._pages.clear()

    def held(self) -> list[str]:
        """The files kept alive now: the most recently used first, within :data:`HELD_BYTES` together."""
        with self._lock:
            last: dict[str, float] = {}
            for paths in self._pages.values():
                for path, when in paths.items():
                    last[path] = max(when, last.get(path, 0.0))
        kept, total = [], 0
        for path in sorted(last, key=last.get, reverse=True):
            try:
                size = Path(path).stat().st_size
            except OSError:
                continue
            if total + size > HELD_BYTES:
                continue
            total += size
            kept.append(path)
        return kept

    def keep_alive(self) -> int:
        """Touch every held file (so gradio's cleaner, which counts age from the last change, leaves them)."""
        kept = 0
        for path in self.held():
            with contextlib.suppress(OSError):
                _touch(Path(path))
                kept += 1
        return kept


_zipped: dict[Path, bytes] = {}
_zip_lock = threading.Lock()
owned.keep("files.zipped", "results", _zipped, "compressed copies of served files",
           owned.cleared_under(_zip_lock, _zipped))


def compressed(path: Path) -> bytes:
    """The file's bytes gzip-compressed (level 9), made once per process and kept (a few small files of the
    package: ONNX Runtime Web)."""
    import gzip

    with _zip_lock:
        if path not in _zipped:
            _zipped[path] = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
        return _zipped[path]


_zipping: dict[str, threading.Lock] = owned.keep("files.zipping", "gates", {}, "one lock per graph being compressed")
_zipping_lock = threading.Lock()


def compressed_file(path: Path) -> Path:
    """A gzip-compressed copy of a model's graph (``<name>.gz`` in the device graphs' folder, made once, whole or
    not at all, and again when the graph's content is newer than it: a package's graph rewritten under its name;
    removed with its graph when the folder is pruned). A class's first visits ask for it at the same moment: one
    request compresses it (a 43 MB graph: about two seconds of CPU) and the others wait for that copy."""
    from vitviz.models import device

    target = device.DEVICE_DIR / (path.name + ".gz")

    def fresh() -> bool:
        return target.is_file() and target.stat().st_mtime >= path.stat().st_mtime

    if fresh():
        return target
    with _zipping_lock:
        lock = _zipping.setdefault(target.name, threading.Lock())
    with lock:
        if not fresh():
            _compress(path, target)
    return target


def _compress(path: Path, target: Path) -> None:
    """``path`` gzip-compressed into ``target``, whole or not at all."""
    import gzip

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    try:
        with path.open("rb") as src, gzip.GzipFile(part, "wb", compresslevel=6, mtime=0) as dst:
            shutil.copyfileobj(src, dst, 2**20)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def sweep_once(outputs: Outputs, pictures: Pictures) -> None:
    gone = outputs.sweep()
    kept = pictures.keep_alive()
    if gone:
        log.info("removed %d output file(s); %d picture(s) kept for open pages", gone, kept)


_server: "Server | None" = None
_running = 0
_state_lock = threading.Lock()
PICTURES = owned.keep("files.pictures", "pages", Pictures(), "the pictures open pages hold")
"""The pictures this process's open pages hold."""


OUTPUTS_PREFIX = "vitviz-outputs-"
"""The outputs folders of servers before 2026-12-01 (``vitviz-outputs-<pid>``): removed when their process is gone."""
SERVER_PREFIX = "vitviz-server-"
"""A server's own folder in gradio's: ``vitviz-server-<pid>-<random>``, holding ``lock``, ``files`` and ``outputs/``."""
NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
"""The errors of ``flock`` that mean a file system without locks (a server then starts unlocked, warned); any other
(a lock another process holds) stops the start."""
UNLOCKED_SECONDS = 60.0
"""A server folder without its lock file this long (its server died while making it) is a dead server's."""


class Server:
    """This process's folder in gradio's upload folder, kept while the process lives: ``lock`` (held with
    ``flock`` from before the folder has its name: the kernel lets go of it however the process ends, SIGKILL
    included, so a lock that can be taken is a dead server's), ``files`` (the files this server made gradio keep:
    every upload as it arrives, and at start and once a minute the files gradio made for the app; one path a line)
    and ``outputs/`` (:class:`Outputs`). Another vitviz server sharing gradio's folder removes none of the files a
    live one lists; one a live server made in the minute before its next list and a dead server listed too can go
    (see :func:`sweep_stale`)."""

    def __init__(self, parent: Path) -> None:
        parent.mkdir(parents=True, exist_ok=True)
        making = parent / f".{SERVER_PREFIX}{uuid.uuid4().hex}"
        making.mkdir()
        # locked under a name of its own, then named ``lock``: a server starting at the same moment finds no lock it
        # could take (a folder without one is young, so alive), never one made but not yet locked
        taking = making / f"lock.{uuid.uuid4().hex}"
        self._fd = os.open(taking, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in NO_LOCKS:
                os.close(self._fd)
                shutil.rmtree(making, ignore_errors=True)
                raise
            # a file system without locks: no other server can take it either, so it stays
            log.warning("cannot lock %s (%s): what this server leaves if it is killed stays", making, err)
        os.rename(taking, making / "lock")
        self.folder = parent / f"{SERVER_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(making, self.folder)  # the lock is on the file, whatever the folder's name
        self.outputs = Outputs(self.folder / "outputs")
        self.listed: set[str] = set()
        self._lock = threading.Lock()

    def note(self, paths) -> None:
        """Files this server made gradio keep (an upload's): listed at once, for whoever finds this server dead. A
        file gradio keeps for the app's own blocks (an example's cached copy: an upload of the same picture is that
        very file) is not listed: it is every server's, and no other server may remove it."""
        keep = own_files()[0]
        paths = [str(p) for p in paths if "\n" not in str(p) and str(p) not in keep]
        with self._lock:
            fresh = [p for p in paths if p not in self.listed]
            if not fresh:
                return
            self.listed.update(fresh)
            with (self.folder / "files").open("a", encoding="utf-8") as f:
                f.write("".join(p + "\n" for p in fresh))

    def touched(self) -> None:
        """A file this server lists was touched (a page holds it): the list's time follows, since the next server
        removes only what nothing changed after it (:func:`sweep_stale`)."""
        with self._lock, contextlib.suppress(OSError):
            os.utime(self.folder / "files")

    def relist(self, also=()) -> None:
        """The list written again: what is still on disk of what it named, and ``also`` (the files gradio made for
        the app now)."""
        with self._lock:
            self.listed = {p for p in self.listed | {str(a) for a in also if "\n" not in str(a)}
                           if os.path.isfile(p)}
            part = self.folder / f".files.{uuid.uuid4().hex}"
            part.write_text("".join(p + "\n" for p in sorted(self.listed)), encoding="utf-8")
            os.replace(part, self.folder / "files")

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._fd)


_blocks = None


def watch(blocks) -> None:
    """The app's gradio Blocks, whose files (:func:`own_files`) this process's server keeps (set before it starts)."""
    global _blocks
    _blocks = blocks


def own_files(blocks=None) -> tuple[set[str], set[str]]:
    """(the files gradio keeps for the blocks' components: the examples' cached copies, ``keep_in_cache``; the files
    gradio made for the app: ``temp_file_sets``) of ``blocks``, else of the Blocks this process serves
    (:func:`watch`). gradio names such a file by its bytes and name, so the same picture has the same path on every
    server: these are this process's, whoever listed them."""
    blocks = _blocks if blocks is None else blocks
    keep: set[str] = set()
    made: set[str] = set()
    if blocks is None:
        return keep, made
    for component in list(blocks.blocks.values()):
        keep.update(str(p) for p in list(getattr(component, "keep_in_cache", ())))
    for group in list(blocks.temp_file_sets):
        made.update(str(f) for f in list(group))
    return keep, made


def server() -> Server:
    """This process's :class:`Server` folder (made on first use; the folders of servers that died without removing
    theirs, and what they listed, are removed then: :func:`sweep_stale`, sparing this process's own blocks' files)."""
    global _server
    with _state_lock:
        if _server is None:
            from gradio import utils

            folder = Path(utils.get_upload_folder())
            keep, made = own_files()
            sweep_stale(folder, live=keep | made)
            _server = Server(folder)
        return _server


def listed_by_others() -> set[str]:
    """Every file another server sharing gradio's folder lists (its uploads, the files gradio made for it): this
    server never removes them while making room (a dead server's list too, until the next start sweeps it)."""
    from gradio import utils

    parent = Path(utils.get_upload_folder())
    own = _server.folder if _server is not None else None
    out: set[str] = set()
    for path in [*parent.glob(f"{SERVER_PREFIX}*"), *parent.glob(f".{SERVER_PREFIX}*")] if parent.is_dir() else ():
        if path != own:
            out.update(_listed(path))
    return out


def outputs() -> Outputs:
    """This process's outputs (in its :class:`Server` folder, made on first use)."""
    return server().outputs


def close() -> None:
    """This process's server folder removed, its outputs with it (the server stopped); a later use makes another."""
    global _server
    with _state_lock:
        if _server is not None:
            _server.close()
            _server = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _dead_lock(folder: Path) -> int | None:
    """The lock of a server folder, taken (a file descriptor; -1 for a folder that never had one): its server is
    gone. None while its server lives (or is still making it)."""
    try:
        fd = os.open(folder / "lock", os.O_RDWR)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            if time.time() - folder.stat().st_mtime > UNLOCKED_SECONDS:
                return -1
        return None
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its server lives (this process's own folder included)
        os.close(fd)
        return None
    return fd


def _listed(folder: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return (folder / "files").read_text(encoding="utf-8").splitlines()
    return []


def _remove_listed(path: str, root: Path, before: float) -> bool:
    """Remove a file a dead server listed: only inside gradio's folder ``root``, and only if nothing changed it
    after ``before`` (the dead server's last write of its list: a file written, cached or held since belongs to
    someone alive); its content's folder too, if empty."""
    p = Path(path)
    try:
        if not p.resolve().is_relative_to(root) or p.resolve() == root or p.is_symlink() or not p.is_file():
            return False
        if p.stat().st_ctime > before:
            return False
        p.unlink()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        if p.parent.resolve() != root:
            p.parent.rmdir()  # only when empty
    return True


def sweep_stale(folder: Path, live=()) -> list[Path]:
    """Remove what servers that are gone (killed with SIGKILL, the machine stopped: nothing ran their cleanup) left
    in gradio's ``folder``: each dead server's folder, and the files it listed (its uploads, the files gradio made for
    it) that no live server lists, that are not in ``live`` (this process's own blocks' files) and that nothing
    changed after the dead server last wrote its list (gradio names a file by its bytes and name, so another server
    may have received or cached the same picture at the same path since); also the outputs folders of servers
    before server folders whose process is gone. A live server's folder and files stay. Returns the folders
    removed."""
    gone, started = [], time.time()
    root = folder.resolve() if folder.is_dir() else folder
    for path in folder.glob(f"{OUTPUTS_PREFIX}*") if folder.is_dir() else ():
        pid = path.name[len(OUTPUTS_PREFIX):]
        if path.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    dead, live_files = [], {str(p) for p in live}
    servers = [*folder.glob(f"{SERVER_PREFIX}*"), *folder.glob(f".{SERVER_PREFIX}*")] if folder.is_dir() else []
    for path in servers:
        if not path.is_dir():
            continue
        fd = _dead_lock(path)
        if fd is None:
            live_files.update(_listed(path))
        else:
            dead.append((path, fd))
    removed = 0
    for path, fd in dead:
        try:
            try:
                before = min(started, (path / "files").stat().st_mtime)
            except OSError:
                before = started
            for listed in _listed(path):
                if listed not in live_files:
                    removed += _remove_listed(listed, root, before)
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
        finally:
            if fd >= 0:
                os.close(fd)
    if gone:
        log.info("removed %d folder(s) and %d file(s) of servers that are gone: %s", len(gone), removed,
                 ", ".join(p.name for p in gone))
    return gone


@contextlib.asynccontextmanager
async def lifespan(app=None) -> AsyncIterator[None]:
    """While a server runs: sweep every :data:`SWEEP_SECONDS` (outputs, held pictures, the answers gradio keeps
    per session: :func:`vitviz.app.adapters.forget_api_values`, and this server's list of files written again with
    the files gradio made for the app); when the last server of this process stops, remove its folder and outputs
    (a FastAPI lifespan: the app gives it to gradio's server). At start, what dead servers left is removed."""
    global _running
    from vitviz.app import adapters

    def sweep() -> None:
        sweep_once(outputs(), PICTURES)
        get = getattr(app, "get_blocks", None)
        blocks = get() if callable(get) else None
        adapters.forget_api_values(blocks)
        server().relist(gradios_files(blocks))

    async def every_minute() -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            await asyncio.to_thread(sweep)

    get = getattr(app, "get_blocks", None)
    if callable(get):
        watch(get())  # its files are this server's: spared by the sweep at start, never noted as uploads
    await asyncio.to_thread(server)  # made now: what servers that died left is removed at start
    # listed at once: gradio's files of a server killed before its first relist would stay for ever
    await asyncio.to_thread(lambda: server().relist(gradios_files(_blocks)))
    with _state_lock:
        _running += 1
    task = asyncio.create_task(every_minute())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with _state_lock:
            _running -= 1
            last = _running == 0
        if last:
            close()


def gradios_files(blocks) -> set[str]:
    """The files gradio made for the app and would remove when it stops (its uploads and its copies of outputs;
    not those it keeps for the examples), as this server lists them."""
    if blocks is None:
        return set()
    keep, made = own_files(blocks)
    return made - keep


def stop_on_sigterm() -> None:
    """SIGTERM (a Space restarting, ``kill``, a container stopping) stops the server the way Ctrl-C does, so it shuts
    down cleanly: gradio removes the files it made and this server removes its outputs. Main thread only."""
    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)
