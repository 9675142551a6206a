"""What a server keeps, and for how long: request bodies bounded before parsing, nothing kept after a refusal, the
files it hands out swept and removed when it stops (SIGTERM included), pictures kept while their page is open."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, free_port, local_client

from vitviz.app import adapters, files, serving


def _join(app_url: str, api_name: str, data: list) -> str:
    """Queue one call of a named endpoint with raw data (as a script would) and return its completion message."""
    cfg = httpx.get(f"{app_url}config").json()
    fn = next(d["id"] for d in cfg["dependencies"] if d.get("api_name") == api_name)
    session = uuid.uuid4().hex[:10]
    body = json.dumps({"data": data, "fn_index": fn, "session_hash": session, "event_data": None, "trigger_id": None})
    r = httpx.post(f"{app_url}gradio_api/queue/join", content=body, headers={"content-type": "application/json"},
                   timeout=60)
    r.raise_for_status()
    with httpx.stream("GET", f"{app_url}gradio_api/queue/data?session_hash={session}", timeout=60) as s:
        for line in s.iter_lines():
            if "process_completed" in line:
                return session, json.loads(line.removeprefix("data: "))
    raise AssertionError("no answer")


# ---- request bodies -----------------------------------------------------------------------------------------------

def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(app_url):
    host, port = app_url.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n{\"data\": [" % (100 * 2**20))
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413") and "at most 50 MiB" in answer  # answered with 99.99 MB still unsent


def test_a_body_sent_without_a_length_is_cut_off_at_the_limit(app_url):
    sent = [0]

    def chunks():
        while sent[0] < serving.MAX_BODY_BYTES + 4 * 2**20:
            sent[0] += 2**20
            yield b"x" * 2**20

    try:
        r = httpx.post(f"{app_url}gradio_api/queue/join", content=chunks(), timeout=30)
        assert r.status_code == 413
    except httpx.HTTPError:  # the server answered and closed while the client was still sending
        pass
    assert httpx.get(f"{app_url}config").status_code == 200  # and it goes on serving


@pytest.mark.slow  # a memory goal measured over seconds: with the slow set, as the crowd tests
def test_a_refused_request_keeps_nothing(served, app_url):
    """A 30 MB string where a patch size belongs: refused with a message, and neither gradio's per-session copy of
    the inputs nor the error's traceback keeps the string. (gradio's queue loop holds the last event it ran in its
    local variables until the next one: a small request follows, as any would.)"""
    demo, _ = served
    session, done = _join(app_url, "patches", [None, "x" * (30 * 2**20), 224, "crop", "ViT-B", True])
    assert not done["success"] and "`patch`" in done["output"]["error"]
    assert _join(app_url, "toy", [3, True])[1]["success"]
    state = demo.state_holder.session_data.get(session)
    kept = [c["props"].get("value") for c in (state.config_values.values() if state else ()) if c.get("props")]
    assert not any(isinstance(v, str) and len(v) > 2**20 for v in kept)
    # the worker lets go of the call a moment after the answer is sent: within 10 s as a rule, but once, in a CI
    # rehearsal running 27% slower than usual after 140 tests on the same server, gradio's Request of the call was
    # still held then; a string kept for good still fails after 20 s
    for _ in range(80):
        time.sleep(0.25)
        big = _holding_big_strings()
        if not big:
            break
        if _ % 8 == 7:  # one more small request: a loop that keeps its last event in its locals lets go of it
            _join(app_url, "toy", [3, True])
    assert big == [], _who_holds(big[0])


def _holding_big_strings() -> list:
    """The lists, tuples and dicts alive in this process that hold a string of more than 1 MiB."""
    import gc
    import warnings

    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects() if type(o) in (list, tuple, dict) and any(
            isinstance(x, str) and len(x) > 2**20 for x in (o.values() if isinstance(o, dict) else o))]


def _who_holds(obj, depth: int = 4) -> str:
    """What refers to ``obj``, ``depth`` links up: types, and the code of frames (for a failure's message)."""
    import gc

    lines, level, seen = [], [obj], {id(obj)}
    for d in range(depth):
        up = []
        for o in level:
            for r in gc.get_referrers(o):
                if id(r) in seen or r is level or type(r).__name__ == "frame" and r.f_code.co_name == "_who_holds":
                    continue
                seen.add(id(r))
                up.append(r)
                name = type(r).__name__
                if name == "frame":
                    name += f" {r.f_code.co_name} ({r.f_code.co_filename.rsplit('/', 2)[-1]}:{r.f_lineno})"
                elif name == "coroutine":
                    name += f" {r.__qualname__}"
                lines.append("  " * d + name)
        level = up[:12]
    return "held by:\n" + "\n".join(lines[:60])


def test_a_refusal_carries_no_traceback_of_the_request():
    import gradio as gr

    def refuse(value):
        raise ValueError("no")

    with pytest.raises(gr.Error) as err:
        serving.friendly(refuse)("x" * 1000)
    assert err.value.__context__ is None and err.value.__cause__ is None


def test_the_answers_gradio_keeps_per_session_are_dropped(served, app_url):
    from gradio_client import handle_file

    demo, _ = served
    client = local_client(app_url)
    client.predict(handle_file(str(EXAMPLES / "scene_star.png")), api_name="/explorer")
    state = demo.state_holder.session_data[client.session_hash]
    api = adapters._api_ids(demo)

    def kept() -> int:
        return sum(1 for i in api if ((state.config_values.get(i) or {}).get("props") or {}).get("value") is not None)

    assert kept() >= 1  # the answer (the explorer's data, inline) is kept by gradio...
    assert adapters.forget_api_values(demo) >= 1 and kept() == 0  # ...until the sweep drops it


# ---- files handed out -------------------------------------------------------------------------------------------

def test_outputs_are_swept_by_age_and_size_and_leave_no_empty_folder(tmp_path, monkeypatch):
    out = files.Outputs(tmp_path / "out")
    a = out.figure(b"a" * 1000)
    assert out.figure(b"a" * 1000) == a and a.read_bytes() == b"a" * 1000  # one file per content
    b = out.folder() / "view.zip"
    b.write_bytes(b"b" * 3000)
    assert out.sweep() == 0 and a.is_file() and b.is_file()  # new: kept
    monkeypatch.setattr(files, "OUTPUT_BYTES", 3500)
    assert out.sweep() == 1 and not a.is_file() and b.is_file()  # over the bytes: the oldest goes
    assert out.sweep(now=time.time() + files.OUTPUT_SECONDS + 1) == 1 and not b.exists()
    assert not b.parent.exists() and [p for p in (tmp_path / "out").rglob("*")] == []  # the empty folders too
    out.close()
    assert not (tmp_path / "out").exists()


def test_the_outputs_of_a_server_that_died_are_removed_when_the_next_one_starts(tmp_path):
    """A server killed with SIGKILL runs no cleanup: its outputs folder stayed for ever. The next server's first use
    of its outputs removes every such folder whose process is gone; a live server's folder stays."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    dead = tmp_path / f"{files.OUTPUTS_PREFIX}{done.pid}"
    (dead / "figures").mkdir(parents=True)
    (dead / "figures" / "a.png").write_bytes(b"x" * 100)
    live = tmp_path / f"{files.OUTPUTS_PREFIX}{os.getppid()}"
    live.mkdir()
    other = tmp_path / "vitviz-outputs-notapid"
    other.mkdir()
    assert files.sweep_stale(tmp_path) == [dead]
    assert not dead.exists() and live.is_dir() and other.is_dir()


def test_what_a_dead_server_listed_is_removed_and_a_live_servers_files_stay(tmp_path):
    """A server folder whose lock can be taken is a dead server's (the kernel lets go of a lock however its process
    ends: closing the descriptor here is what SIGKILL does): its listed uploads go, with their content folders; a
    file a live server lists too, a file outside gradio's folder and the live server's own stay."""
    root = tmp_path / "gradio"
    dead, live = files.Server(root), files.Server(root)
    made = {}
    for name in ("dead", "live", "both"):
        made[name] = root / (name[0] * 64) / f"{name}.png"
        made[name].parent.mkdir(parents=True)
        made[name].write_bytes(b"x" * 100)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"o")
    dead.note([made["dead"], made["both"], outside])
    live.note([made["live"], made["both"]])
    assert files.sweep_stale(root) == []  # both alive: nothing goes
    os.close(dead._fd)  # its process ended
    try:
        assert files.sweep_stale(root) == [dead.folder]
        assert not made["dead"].exists() and not made["dead"].parent.exists()
        assert made["live"].is_file() and made["both"].is_file() and outside.is_file() and live.folder.is_dir()
    finally:
        live.close()
    assert not live.folder.exists()


def test_a_figure_written_by_many_at_once_is_read_whole(tmp_path):
    out = files.Outputs(tmp_path)
    data = os.urandom(300_000)
    path = out.figure(data)
    sizes, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            sizes.append(len(path.read_bytes()))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: out.figure(data), range(300))) == {path}
    stop.set()
    for t in readers:
        t.join()
    assert len(sizes) > 50 and set(sizes) == {len(data)}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left


def test_a_held_picture_outlives_gradios_cleaner_and_ages_out_when_its_page_closes(tmp_path):
    """gradio's own cleaner (route_utils.delete_files_created_by_app: age by ctime) against a page that holds its
    picture for longer than the cleaner's age."""
    from gradio.route_utils import delete_files_created_by_app

    picture, other = tmp_path / "held.png", tmp_path / "other.png"
    picture.write_bytes(b"p")
    other.write_bytes(b"o")
    app = types.SimpleNamespace(blocks={}, temp_file_sets=[{str(picture), str(other)}])
    pictures = files.Pictures()
    pictures.hold("page-1", picture)
    time.sleep(1.2)
    assert pictures.keep_alive() == 1
    delete_files_created_by_app(app, age=1)
    assert picture.is_file() and not other.exists()  # held: kept; the other: aged out
    pictures.release("page-1")
    time.sleep(1.2)
    assert pictures.keep_alive() == 0
    delete_files_created_by_app(app, age=1)
    assert not picture.exists()


def test_held_pictures_are_bounded_in_bytes_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "HELD_BYTES", 250)
    pictures = files.Pictures()
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.png")
        paths[-1].write_bytes(b"x" * 100)
        pictures.hold(f"page-{i}", paths[-1])
        time.sleep(0.01)
    pictures.used(paths[0])  # the first page uses its picture again
    assert sorted(pictures.held()) == sorted(map(str, (paths[0], paths[2])))


def test_an_accepted_upload_is_held_by_its_page(app_url):
    """The page's picture check holds the picture for the page's session."""
    from vitviz.app.tab import Tab

    request = types.SimpleNamespace(session_hash="page-xyz")
    upload = httpx.post(f"{app_url}gradio_api/upload",
                        files={"files": ("star.png", (EXAMPLES / "scene_star.png").read_bytes(), "image/png")}).json()[0]
    Tab.accept({"path": upload, "meta": {"_type": "gradio.FileData"}}, None, request)
    try:
        assert upload in files.PICTURES.held()
    finally:
        files.PICTURES.release("page-xyz")
    assert upload not in files.PICTURES.held()


def test_a_file_that_is_no_picture_checked_twice_before_its_state_returns_is_refused_once_per_page(app_url):
    """Two checks of one refused file on one page, the second before the first's state reached it (``kept`` still
    None: two triggers in flight at once): the page is warned once; another page is warned too."""
    import warnings

    from vitviz.app.tab import Tab

    path = httpx.post(f"{app_url}gradio_api/upload",
                      files={"files": ("notes.jpg", b"this is not a picture", "image/jpeg")}).json()[0]
    notes = {"path": path, "meta": {"_type": "gradio.FileData"}}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        answers = [Tab.accept(notes, None, types.SimpleNamespace(session_hash=page))
                   for page in ("page-twice", "page-twice", "page-other")]
    told = [str(w.message) for w in said if "not an image vitviz can read" in str(w.message)]
    assert len(told) == 2, [str(w.message) for w in said]
    assert all(kept == {"refused": path} for _, _, kept in answers)  # each remembers what it refused


def test_a_page_closing_lets_its_pictures_go(app_url):
    """A page's heartbeat stream (gradio's, which stays open while the page is) ends: its pictures are let go."""
    session = "page-closing"
    files.PICTURES.hold(session, EXAMPLES / "scene_star.png")
    assert str(EXAMPLES / "scene_star.png") in files.PICTURES.held()
    with httpx.stream("GET", f"{app_url}gradio_api/heartbeat/{session}", timeout=10) as beat:
        assert next(beat.iter_text()).startswith("data: ALIVE")
    deadline = time.monotonic() + 10
    while session in files.PICTURES._pages and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session not in files.PICTURES._pages


# ---- the whole server (slow: a process of its own) ------------------------------------------------------------

def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.fixture
def server(tmp_path):
    """``python -m vitviz.app`` in a process of its own, with its own gradio folder: (url, process, folder)."""
    url, proc = _serve(tmp_path / "gradio")
    yield url, proc, tmp_path / "gradio"
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_the_servers_memory_comes_back_after_large_refused_requests(server):
    """Ten 100 MB bodies are refused at the door; then a 60 MB string and a 60 MB data: URL, refused by the
    declarations, round after round: the memory after 12 rounds is within one round's bodies of what it was after
    3 (nothing of a refused request stays: 9 rounds of 120 MB kept would be 1 GB), and close to where it started
    (each new session costs gradio its small copy of the page's configuration; its queue holds the last event
    until the next one)."""
    url, proc, _ = server
    _join(url, "patches", [None, "warm", 224, "crop", "ViT-B", True])
    start = rss_mib(proc.pid)
    for _ in range(10):  # over the limit: refused before parsing
        try:
            r = httpx.post(f"{url}gradio_api/queue/join", content=b"x" * (100 * 2**20), timeout=60)
            assert r.status_code == 413
        except httpx.HTTPError:
            pass
    assert rss_mib(proc.pid) - start < 30

    def rounds(n: int) -> float:
        for _ in range(n):
            _join(url, "patches", [None, "x" * (60 * 2**20), 224, "crop", "ViT-B", True])
            _join(url, "patches", [{"url": "data:image/png;base64," + "A" * (60 * 2**20),
                                    "meta": {"_type": "gradio.FileData"}}, 16, 224, "crop", "ViT-B", True])
        _join(url, "toy", [3, True])  # a small request follows, as any would
        time.sleep(2)
        return rss_mib(proc.pid)

    three = rounds(3)
    twelve = rounds(9)
    print(f"server RSS: {start:.0f} MiB before, {three:.0f} after 3 rounds, {twelve:.0f} after 12")
    # kept bodies would add 120 MB a round (1 GB over the 9); the allocator and gradio's per-session copies move
    # the figure by 30-60 MiB from run to run, so less than one round's bodies is the line
    assert twelve - three < 120 and twelve - start < 250, (start, three, twelve)


@pytest.mark.slow
def test_sigterm_stops_the_server_and_leaves_no_file(server):
    from gradio_client import handle_file

    url, proc, temp = server
    client = local_client(url)
    answer = client.predict(handle_file(str(EXAMPLES / "scene_star.png")), api_name="/attention")
    client.predict(handle_file(str(EXAMPLES / "scene_star.png")), api_name="/bundle_attention")
    assert Path(answer["figures"]["heads"]).is_file()  # downloaded by the client
    assert len([p for p in temp.rglob("*") if p.is_file()]) >= 3  # the upload, figures, the bundle
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) is not None
    shipped = {p.read_bytes() for p in EXAMPLES.rglob("*") if p.is_file()}
    left = [p for p in temp.rglob("*") if p.is_file() and p.read_bytes() not in shipped]
    assert left == [], left[:5]  # gradio keeps its copies of the app's own examples (its example cache); nothing else


def _serve(temp: Path) -> tuple[str, subprocess.Popen]:
    """``python -m vitviz.app`` in a process of its own with gradio's folder ``temp``, answering: (url, process)."""
    port = free_port()
    env = dict(os.environ, GRADIO_TEMP_DIR=str(temp), GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if httpx.get(url + "config", timeout=2).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError("the server did not start")


@pytest.mark.slow
def test_a_server_killed_with_sigkill_leaves_nothing_once_the_next_one_starts(tmp_path):
    """A server killed with SIGKILL ran no cleanup: its uploads stayed in gradio's folder for ever (only outputs
    folders were swept). The next server removes them at start; a live server sharing the folder keeps its own
    files, and a picture uploaded to both."""
    temp = tmp_path / "gradio"
    procs = []

    def upload(url: str, data: bytes) -> Path:
        r = httpx.post(f"{url}gradio_api/upload", files={"files": ("p.png", data, "image/png")}, timeout=30)
        r.raise_for_status()
        return Path(r.json()[0])

    try:
        killed_url, killed = _serve(temp)
        procs.append(killed)
        live_url, live = _serve(temp)
        procs.append(live)
        shared = os.urandom(5000)
        killed_own, killed_shared = upload(killed_url, os.urandom(100_000)), upload(killed_url, shared)
        live_own, live_shared = upload(live_url, os.urandom(100_000)), upload(live_url, shared)
        assert killed_shared == live_shared and killed_own.is_file() and live_own.is_file()
        killed_folders = sorted(temp.glob(f"{files.SERVER_PREFIX}{killed.pid}-*"))
        assert len(killed_folders) == 1
        killed.kill()
        killed.wait()
        _, after = _serve(temp)
        procs.append(after)
        assert not killed_own.exists() and not killed_own.parent.exists(), "the dead server's upload stayed"
        assert not killed_folders[0].exists()
        assert live_own.is_file() and live_shared.is_file()  # the live server's files untouched
        assert len(list(temp.glob(f"{files.SERVER_PREFIX}{live.pid}-*"))) == 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_thirty_two_clients_starting_at_once_all_connect(server):
    """Every gradio_client asks for /config first (859 KB, 0.67 s to build): 32 at once took 11–15 s, past the
    client's 5 s, and with its retries nobody got through for minutes. Served from the page cache, all connect."""

    url, _, _ = server
    first = httpx.get(url + "config", timeout=30).content
    errors: list = []

    def connect(_i: int) -> str:
        try:
            return local_client(url).view_api(return_format="dict", print_info=False) and "ok"
        except Exception as err:  # noqa: BLE001 - counted
            errors.append(repr(err)[:200])
            return "failed"

    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(connect, range(32)))
    assert errors == [] and got == ["ok"] * 32, errors[:3]
    assert httpx.get(url + "config", timeout=30).content == first  # the same configuration, made once


# ---- review of issue 68 items 11 and 12: what the sweeps and the uploads' budget may remove ----------------------

def _dead_server_listing(root: Path, path: Path) -> files.Server:
    """A server that listed ``path`` and was killed (its lock let go), its list written 10 s ago."""
    dead = files.Server(root)
    dead.note([path])
    os.close(dead._fd)
    then = time.time() - 10
    os.utime(dead.folder / "files", (then, then))
    return dead


def test_a_file_cached_at_a_dead_servers_path_after_its_last_list_stays(tmp_path):
    """gradio names a cached copy by its bytes and name, so the new server's build caches its example at the very
    path a killed server listed (touching it): the start's sweep removed it (its ctime was before the sweep). Only
    what nothing changed after the dead server's last list goes."""
    root = tmp_path / "gradio"
    example, upload = root / ("e" * 64) / "scene_star.png", root / ("u" * 64) / "photo.png"
    for p in (example, upload):
        p.parent.mkdir(parents=True)
        p.write_bytes(b"x" * 100)
    dead = files.Server(root)
    dead.note([upload])
    os.close(dead._fd)
    later = time.time() + 1  # its list was written after its upload's last change...
    os.utime(dead.folder / "files", (later, later))
    assert files.sweep_stale(root) == [dead.folder] and not upload.exists()  # ...so its own upload goes
    dead = _dead_server_listing(root, example)  # listed 10 s ago
    os.utime(example, (time.time(), example.stat().st_mtime))  # the new server's build caches it: ctime is now
    assert files.sweep_stale(root) == [dead.folder]
    assert example.is_file()


def test_this_processs_own_blocks_files_are_spared_and_never_listed(tmp_path, monkeypatch):
    """The start's sweep spares the files this process's blocks hold (an example's cached copy, a file gradio made)
    even when a dead server listed them before they changed; and an upload that is an example's cached file is
    not listed (it is every server's, and the next start would remove it)."""
    root = tmp_path / "gradio"
    kept, made, upload = (root / (c * 64) / f"{c}.png" for c in "kmu")
    for p in (kept, made, upload):
        p.parent.mkdir(parents=True)
        p.write_bytes(b"x")
    blocks = types.SimpleNamespace(blocks={1: types.SimpleNamespace(keep_in_cache={str(kept)}), 2: object()},
                                   temp_file_sets=[{str(made)}])
    monkeypatch.setattr(files, "_blocks", blocks)
    assert files.own_files() == ({str(kept)}, {str(made)})
    dead = files.Server(root)
    dead.note([kept, made, upload])
    os.close(dead._fd)
    later = time.time() + 1
    os.utime(dead.folder / "files", (later, later))
    keep, made_now = files.own_files()
    assert files.sweep_stale(root, live=keep | made_now) == [dead.folder]
    assert kept.is_file() and made.is_file() and not upload.exists()
    alive = files.Server(root)
    try:
        alive.note([kept, made])
        assert (alive.folder / "files").read_text().splitlines() == [str(made)]
    finally:
        alive.close()


def test_a_server_starting_beside_another_never_takes_its_half_made_folder(tmp_path, monkeypatch):
    """Between making its lock file and locking it, a server starting at the same moment could take that lock,
    judge the folder dead and remove it (the first then failed to start). The lock is made under a name of its own
    and named ``lock`` only once held."""
    root = tmp_path / "gradio"
    real, swept = files.fcntl.flock, []

    def flock(fd, op):
        if not swept:  # the other server's sweep, at the worst moment
            swept.append(None)
            swept[0] = files.sweep_stale(root)
        return real(fd, op)

    monkeypatch.setattr(files.fcntl, "flock", flock)
    server = files.Server(root)
    try:
        assert swept == [[]] and (server.folder / "lock").is_file()
        assert files.sweep_stale(root) == [] and server.folder.is_dir()
    finally:
        server.close()


def test_a_lock_held_elsewhere_stops_the_start_and_a_file_system_without_locks_does_not(tmp_path, monkeypatch):
    """Only a file system without locks (ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL) starts unlocked; any other error (a
    lock another process holds: EWOULDBLOCK) was taken for one too."""
    import errno as e

    root = tmp_path / "gradio"
    for code, starts in ((e.ENOLCK, True), (e.EOPNOTSUPP, True), (e.EWOULDBLOCK, False), (e.EBADF, False)):
        def flock(fd, op, code=code):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(files.fcntl, "flock", flock)
        if starts:
            server = files.Server(root)
            assert (server.folder / "lock").is_file()
            server.close()
        else:
            with pytest.raises(OSError):
                files.Server(root)
            assert list(root.iterdir()) == []  # nothing half made is left


def test_making_room_never_removes_an_example_another_servers_file_or_a_file_replaced_since(monkeypatch):
    """The oldest uploads go to make room, but not the file gradio keeps for an example (an upload of the same
    picture is that file), one another server sharing gradio's folder lists, or one at an upload's path that is no
    longer the file received there (the same picture uploaded again is renamed to the same path)."""
    from gradio import utils

    from vitviz.app import uploads

    root = Path(utils.get_upload_folder())
    monkeypatch.setattr(uploads, "UPLOAD_BYTES", 1000)
    received = uploads.Received()
    paths = []
    for name in ("example", "other", "replaced", "plain"):
        p = root / uuid.uuid4().hex / f"{name}.png"
        p.parent.mkdir(parents=True)
        p.write_bytes(os.urandom(200))
        paths.append(p)
    example, other, replaced, plain = paths
    monkeypatch.setattr(files, "_blocks", types.SimpleNamespace(
        blocks={1: types.SimpleNamespace(keep_in_cache={str(example)})}, temp_file_sets=[]), raising=False)
    neighbour = files.Server(root)
    try:
        neighbour.note([other])
        received.received(paths, 0)
        assert received.held() == 600  # the example's file is not this server's upload
        part = replaced.with_name("part")
        part.write_bytes(replaced.read_bytes())
        os.replace(part, replaced)  # an identical upload renamed into its path, not yet counted
        assert received.make_room(700) is None  # the other's spared, the replaced one uncounted, plain goes
        assert example.is_file() and other.is_file() and replaced.is_file() and not plain.exists()
        assert received.held() == 200
    finally:
        neighbour.close()
        for p in paths:
            p.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                p.parent.rmdir()


def test_the_budgets_refusal_never_says_0_mib(monkeypatch):
    """A budget under 1 MiB was said as "at most 0 MiB"."""
    from vitviz.app import uploads

    monkeypatch.setattr(uploads, "UPLOAD_BYTES", 300 * 2**10)
    said = uploads.Received().make_room(400 * 2**10)
    assert "at most 300 KiB" in said and "400 KiB" in said and "0 MiB" not in said, said
    assert [uploads._size(n) for n in (2**31, 2**20, 1_153_434, 512, 2**19)] == [
        "2 GiB", "1 MiB", "1.1 MiB", "512 bytes", "512 KiB"]


def test_the_gradio_and_uvicorn_attributes_the_server_reads_exist():
    """files reads a Blocks' ``blocks``, ``temp_file_sets`` and its components' ``keep_in_cache``; serving sets
    uvicorn's ``h11_max_incomplete_event_size`` on the server's config: a rename in an upgrade fails here instead of
    silently turning off the sweep or the long links' words."""
    import gradio as gr
    import uvicorn

    with gr.Blocks() as demo:
        image = gr.Image(type="filepath")
    assert isinstance(demo.blocks, dict) and image in demo.blocks.values()
    assert isinstance(demo.temp_file_sets, list) and isinstance(image.keep_in_cache, set)
    assert files.own_files(demo) == (set(), set())
    config = uvicorn.Config(app=lambda *a: None)
    assert hasattr(config, "h11_max_incomplete_event_size")
    from gradio import http_server

    assert "config" in http_server.Server.__init__.__code__.co_names or issubclass(http_server.Server, uvicorn.Server)


def test_the_start_lists_the_files_gradio_made_before_the_first_minute(monkeypatch):
    """The files gradio made for the app were listed only by the once-a-minute sweep: a server killed before it left
    them for ever. The lifespan lists them as it starts."""
    import asyncio

    from gradio import utils

    made = Path(utils.get_upload_folder()) / uuid.uuid4().hex / "made.png"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"x")
    blocks = types.SimpleNamespace(blocks={}, temp_file_sets=[{str(made)}])
    monkeypatch.setattr(files, "_blocks", getattr(files, "_blocks", None), raising=False)
    app = types.SimpleNamespace(get_blocks=lambda: blocks)

    async def run():
        async with files.lifespan(app):
            return (files.server().folder / "files").read_text().splitlines()

    try:
        assert str(made) in asyncio.run(run())
    finally:
        made.unlink()
        made.parent.rmdir()


def test_a_cors_preflight_is_gradios_answer_and_carries_no_nosniff_as_the_operators_guide_says(app_url):
    """docs/operators.md says every response the app gives is marked nosniff, except CORS preflights, which gradio's
    own middleware answers from outside vitviz's: checked, so the guide is corrected when gradio's order changes."""
    r = httpx.options(f"{app_url}gradio_api/upload", timeout=10, headers={
        "Origin": "http://localhost:9", "Access-Control-Request-Method": "POST"})
    assert r.headers.get("access-control-allow-origin") == "http://localhost:9", r.headers
    assert "x-content-type-options" not in r.headers, r.headers
    assert httpx.get(f"{app_url}config", timeout=30).headers.get("x-content-type-options") == "nosniff"


def test_an_upload_a_page_held_just_before_the_kill_is_still_removed(tmp_path, monkeypatch):
    """Only what nothing changed after a dead server's last list goes; a page holding an upload touches it, so one
    held in the minute before the kill (before the next list) stayed for ever. Holding makes the list as new."""
    root = tmp_path / "gradio"
    upload = root / ("u" * 64) / "photo.png"
    upload.parent.mkdir(parents=True)
    upload.write_bytes(b"x")
    dead = files.Server(root)
    dead.note([upload])
    then = time.time() - 30
    os.utime(dead.folder / "files", (then, then))  # listed 30 s ago
    monkeypatch.setattr(files, "_server", dead)
    files.Pictures().hold("page", upload)  # a page uses it now
    os.close(dead._fd)
    monkeypatch.setattr(files, "_server", None)
    assert files.sweep_stale(root) == [dead.folder] and not upload.exists()
