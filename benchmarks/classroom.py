"""A class at once: N students each calling ``/attention`` with a picture of their own, against the app as its own
process, with the default model's architecture (a DINO ViT-S/8-shaped checkpoint with random weights, laid out as
``facebook/dino-vits8`` in a private Hugging Face cache, so the registry loads it through the real loader).

    python -m benchmarks.classroom                   # 1 and 30 students at 224 and 480 px, 100 at 224
    python -m benchmarks.classroom --students 30 --sides 224
    python -m benchmarks.classroom --device          # the device path too: 30 and 100 students at 224 and 480
    python -m benchmarks.classroom --device-only --device-students 30

The device path ("compute on this device", issue 35): a real visit is recorded in headless Chromium (the page
opened with ``?tab=attention&device=1`` until the model's manifest is there; the first visit and a later one, whose
files the browser kept), and the server's CPU over a visit is measured there (idle polling included, said apart). Then N students replay that visit at
once, each with a session of its own (every request that reached the server, in order; events waited for as the
page waits for them; the heartbeat left out), and on a first visit also fetch the runtime and the graph. The
forward itself is timed in headless Chromium on this machine (its own table: a student's laptop is not this
machine) with one and two WebAssembly threads and on WebGPU (SwiftShader), with the renderer's peak memory. A
student's first map = the time until the manifest is there + the device's preparation and forward (two threads).
Bytes are counted as transferred (the runtime and the graph gzip-compressed, as a browser asks for them).

For each case: every student's time from sending the picture to the answer (the first map the page would show:
the same analysis), p50 / p95 / last (one student: five requests one after another), and the server's CPU-seconds
per answer (/proc: user + system of the app's
process over the case). The yardstick is the same model's fused forward, timed in this process just before and just after
each case (median of 3 + 3 after a warm-up, the server idle; :class:`Yardstick`): its wall time for the answers, its
CPU-seconds (both cores' threads) for the server's CPU. Each case runs through both doors (gradio_client, and HTTP
as a page speaks it), and says how much CPU its students (threads of this process, on the server's two cores) used. Each case starts with a warm-up request on a picture of its own
(model loaded, first-call costs paid): start-up and warm-up are excluded, as the goals ask.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import httpx

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pictures(n: int, folder: Path, square: bool, seed: int) -> list[Path]:
    """``n`` different photo-like pictures (the shipped photos, each moved, flipped and tinted its own way); square
    ones (as the yardstick's forward is square: a 4:3 picture at a 224 short side has a third more tokens)."""
    import numpy as np
    from PIL import Image

    from vitviz import assets

    rng = np.random.default_rng(seed)
    photos = [np.asarray(Image.open(assets.example(n)).convert("RGB")) for n in ("cat", "coffee", "astronaut")]
    out = []
    for i in range(n):
        src = photos[i % len(photos)]
        h, w = src.shape[:2]
        side = min(h, w)
        if square:
            top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
            crop = src[top:top + side, left:left + side]
        else:
            ch, cw = int(h * rng.uniform(0.8, 1.0)), int(w * rng.uniform(0.8, 1.0))
            top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
            crop = src[top:top + ch, left:left + cw]
        tint = np.clip(crop * rng.uniform(0.85, 1.15, 3), 0, 255).astype(np.uint8)
        path = folder / f"student{i:03d}.png"
        Image.fromarray(tint[:, ::-1] if i % 2 else tint).save(path)
        out.append(path)
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(hf_home: Path) -> tuple[subprocess.Popen, str]:
    from benchmarks.load import free_port

    port = free_port()
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False",
               VITVIZ_DEVICE_DIR=str(Path(hf_home).parent / "device-graphs"))  # the graphs made here, removed after
    proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    import httpx

    for _ in range(300):
        try:
            if httpx.get(url + "config", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the app did not start")


class Yardstick:
    """The model's own fused forward (square pictures), through vitviz's loader and Runner, in this process (the
    server idle meanwhile): ``wall`` seconds and ``cpu`` seconds (both cores' threads, what a server's CPU per
    student compares with), each the median of the runs. Measured again around every case (:meth:`around`): this
    kind of machine's speed drifts by a third over minutes (a neighbour's load), and a ratio means something only
    when both sides ran at the same time."""

    def __init__(self, checkpoint: Path) -> None:
        from vitviz.models import loaders
        from vitviz.models.runner import Call
        from vitviz.specs import registry

        self.runner = loaders.load_hf(checkpoint, spec=registry.REGISTRY["DINO ViT-S/8"])
        self.call = Call(lambda model, x, forward: forward(x))
        self.warm: set[int] = set()

    def runs(self, side: int, n: int) -> list[tuple[float, float]]:
        import torch

        x = torch.randn(1, 3, side, side)
        if side not in self.warm:
            self.runner.run(self.call, x)
            self.warm.add(side)
        out = []
        for _ in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            self.runner.run(self.call, x)
            out.append((time.perf_counter() - t0, time.process_time() - c0))
        return out

    @staticmethod
    def summary(runs: list[tuple[float, float]]) -> dict:
        return {"wall": statistics.median(w for w, _ in runs), "cpu": statistics.median(c for _, c in runs)}

    def measure(self, side: int, n: int = 5) -> dict:
        return self.summary(self.runs(side, n))

    def around(self, side: int, work: Callable[[], dict], n: int = 3) -> dict:
        """``work()``'s result with ``forward``: the yardstick's median over ``n`` runs just before it and ``n``
        just after."""
        before = self.runs(side, n)
        result = work()
        return result | {"forward": self.summary(before + self.runs(side, n))}


def batched_forward(checkpoint: Path, side: int, batch: int = 4) -> dict:
    """Whether waiting students' forwards would be cheaper as one batch: median seconds of one fused forward of
    ``batch`` pictures against ``batch`` forwards of one, at ``side`` (same run, same process)."""
    import torch

    from vitviz.models import loaders
    from vitviz.models.runner import Call
    from vitviz.specs import registry

    runner = loaders.load_hf(checkpoint, spec=registry.REGISTRY["DINO ViT-S/8"])
    call = Call(lambda model, x, forward: forward(x))
    one, many = torch.randn(1, 3, side, side), torch.randn(batch, 3, side, side)
    runner.run(call, one)
    runner.run(call, many)
    apart, together = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(batch):
            runner.run(call, many[i:i + 1])
        apart.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        runner.run(call, many)
        together.append(time.perf_counter() - t0)
    return {"apart": statistics.median(apart), "together": statistics.median(together), "batch": batch}


ENDPOINTS = {"/explorer": ("/explorer", {}, "the page's first map (its data; the browser draws it)"),
             "/attention": ("/attention", {}, "the API's answer with its three figures drawn"),
             "/attention figures=false": ("/attention", {"figures": False},
                                          "the same answer's settings, texts and numbers, no figure drawn")}
"""Each row's name: its endpoint, the arguments it adds to the picture, the model and the side, and what it is."""


KEEP = httpx.Limits(keepalive_expiry=2.0)
"""The students' connections: an idle one is dropped by the client after 2 s, before uvicorn closes it after 5 s.
With httpx's own 5 s the two raced, and a student reusing a connection the server was closing got "Server
disconnected" (seen once, 100 students at 224 px, whose connections had idled since the students were made)."""


def call(http: httpx.Client, url: str, api: str, data: list) -> dict:
    """One queued call of endpoint ``api`` (its name without the slash) over gradio's documented HTTP door: post
    ``data``, then read the event stream until its answer (the first output), raising on an error event."""
    import json

    event = http.post(url + f"gradio_api/call/{api}", json={"data": data}).json()["event_id"]
    with http.stream("GET", url + f"gradio_api/call/{api}/{event}") as r:
        kind = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind in ("complete", "error"):
                if kind == "error":
                    raise RuntimeError(line[5:])
                return json.loads(line[5:])[0]
    raise RuntimeError("the event stream ended without an answer")


class HttpStudent:
    """A student who speaks gradio's documented HTTP API as a page does (upload, ``/call/<api>``, its event stream
    pushed): no client-side polling. gradio_client reads its stream's messages every 50 ms, about 0.05 s a request
    (a trivial endpoint answers it in 0.11 s, over HTTP in 0.02 s)."""

    def __init__(self, url: str, api: str, extra: dict | None = None) -> None:
        import httpx

        self.url, self.api, self.http = url, api.lstrip("/"), httpx.Client(timeout=600, limits=KEEP)
        info = self.http.get(url + "gradio_api/info").json()["named_endpoints"][api]["parameters"]
        self.names = [p["parameter_name"] for p in info]
        self.defaults = [p.get("parameter_default") for p in info]
        for name, value in (extra or {}).items():
            self.defaults[self.names.index(name)] = value

    def predict(self, picture: Path, model: str, side: int) -> dict:
        with picture.open("rb") as f:
            path = self.http.post(self.url + "gradio_api/upload", files={"files": (picture.name, f, "image/png")})
        data = list(self.defaults)
        data[0] = {"path": path.json()[0], "meta": {"_type": "gradio.FileData"}}
        data[self.names.index("model")], data[self.names.index("resolution")] = model, side
        return call(self.http, self.url, self.api, data)


class ClientStudent:
    """A student through ``gradio_client`` (one client, so one session, per student). Its requests wait as long as
    the HTTP door's (600 s): httpx's default of 5 s once cut a picture's upload short with 100 students at once,
    whose 100 threads share this process and the server's two cores (a real class's students do not)."""

    def __init__(self, url: str, api: str, extra: dict | None = None) -> None:
        from gradio_client import Client

        self.client, self.api = Client(url, verbose=False, httpx_kwargs={"timeout": 600}), api
        self.extra = dict(extra or {})

    def predict(self, picture: Path, model: str, side: int) -> dict:
        from gradio_client import handle_file

        return self.client.predict(handle_file(str(picture)), model, side, api_name=self.api, **self.extra)


DOORS = {"gradio_client": ClientStudent, "HTTP": HttpStudent}


def case(url: str, pid: int, students: int, side: int, folder: Path, seed: int, api: str = "/explorer",
         door: str = "gradio_client") -> dict:
    repeats = 5 if students == 1 else 1  # one student: five requests one after another, each a new picture
    pics = pictures(students * repeats + 1, folder, square=True, seed=seed)
    endpoint, extra, _ = ENDPOINTS[api]
    clients = [DOORS[door](url, endpoint, extra) for _ in range(students + 1)]
    clients[0].predict(pics[0], "DINO ViT-S/8", side)  # warm-up
    start = threading.Barrier(students)
    times: list[float] = [0.0] * (students * repeats)

    def student(i: int) -> None:
        start.wait()
        for k in range(repeats):
            t0 = time.perf_counter()
            answer = clients[i + 1].predict(pics[1 + i * repeats + k], "DINO ViT-S/8", side)
            times[i * repeats + k] = time.perf_counter() - t0
            assert answer["model"] == "DINO ViT-S/8", answer.get("model")

    cpu0, mine0 = cpu_seconds(pid), time.process_time()
    with ThreadPoolExecutor(students) as pool:
        list(pool.map(student, range(students)))
    cpu, mine = cpu_seconds(pid) - cpu0, time.process_time() - mine0
    times.sort()
    return {"students": students, "side": side, "p50": statistics.median(times), "api": api, "door": door,
            "p95": times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], "last": times[-1],
            "cpu": cpu / len(times), "best": times[0], "clients": mine}


DEVICE_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")


def record_visit(url: str, side: int, pid: int, visits: int = 5) -> dict:
    """A real visit of the device path in headless Chromium: the page opened with ``?tab=attention&device=1`` until
    the model's manifest is there (the moment a chosen picture can run). Returns the requests that reached the
    server on the first visit and on a later one (the browser's cache kept what it may), in order, for
    :func:`replay`; and the server's CPU per later visit, measured here over ``visits`` visits minus what the idle
    server spends in the same time (gradio's queue polls its loops)."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    address = f"{url}?tab=attention&device=1&side={side}"
    ready = ("() => document.querySelector('#device-panel .vx-dev-what')?.textContent.includes('MB')")
    out: dict = {"cpu": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        for visit in range(visits + 1):
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("Network.enable")
            sent, cached = {}, set()
            cdp.on("Network.requestWillBeSent", lambda e: sent.setdefault(e["requestId"], e["request"]))
            cdp.on("Network.requestServedFromCache", lambda e: cached.add(e["requestId"]))
            cdp.on("Network.responseReceived",
                   lambda e: cached.add(e["requestId"]) if e["response"].get("fromDiskCache") else None)
            time.sleep(2)
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            time.sleep(3)
            idle = (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            page.goto(address)
            page.wait_for_function(ready, polling=200, timeout=600_000)
            page.wait_for_timeout(3000)  # the page's own events after the manifest (the link's tab opened, ...)
            # the server's CPU over the visit's window, as measured (its idle polling included: never below zero)
            spent = cpu_seconds(pid) - c0
            out.setdefault("idle", []).append(idle * (time.perf_counter() - t0))
            reached = [dict(method=r["method"], url=r["url"], body=r.get("postData")) for i, r in sent.items()
                       if i not in cached and r["url"].startswith(url)]
            if visit == 0:
                out["first"] = reached
            else:
                out["again"], out["cpu"] = reached, out["cpu"] + [spent]
            page.close()
        browser.close()
    return out


def replay(url: str, requests: list[dict], session: str) -> tuple[float, int]:
    """One student's visit as recorded (:func:`record_visit`), with a session of its own: each GET read to its end,
    each event sent and waited for (through gradio's event stream, as the page does: the page's events follow one
    another), the heartbeat left out (it only keeps a page's session alive). Returns the seconds until the
    manifest was there, and the bytes received."""
    import json

    import httpx

    got, ready = 0, None
    t0 = time.perf_counter()
    with httpx.Client(timeout=600, limits=KEEP) as http:
        for r in requests:
            address = r["url"]
            if "/heartbeat/" in address or "/queue/data" in address:
                continue
            if r["method"] == "GET":
                with http.stream("GET", address) as answer:
                    got += sum(len(chunk) for chunk in answer.iter_bytes(1 << 20))
                if "/vitviz/device-manifest" in address:
                    ready = time.perf_counter() - t0
                continue
            body = json.loads(r["body"] or "{}")
            body["session_hash"] = session
            answer = http.post(address, json=body)
            got += len(answer.content)
            if "/queue/join" in address:
                event = answer.json().get("event_id")
                with http.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}) as stream:
                    for line in stream.iter_lines():
                        got += len(line)
                        if event in line and '"process_completed"' in line:
                            break
                if "device_model" in r["body"] and ready is None:
                    ready = time.perf_counter() - t0
    return (ready if ready is not None else time.perf_counter() - t0), got


def device_case(url: str, pid: int, students: int, side: int, visit: dict, first_visit: bool, graph: str) -> dict:
    """``students`` browsers at once on the device path, each doing what a recorded visit did (the first visit
    also fetches the runtime and the graph). Per student: seconds until the manifest was there, the server's
    CPU-seconds, the bytes downloaded."""
    import httpx

    requests = visit["first" if first_visit else "again"]
    start = threading.Barrier(students)
    times, fetched = [0.0] * students, [0] * students

    def student(i: int) -> None:
        start.wait()
        ready, got = replay(url, requests, f"student{i:03d}x{int(first_visit)}")
        if first_visit:
            with httpx.Client(timeout=600, limits=KEEP) as http:
                for address in [f"vitviz/ort/{name}" for name in DEVICE_FILES] + [f"vitviz/device/{graph}"]:
                    with http.stream("GET", url + address, headers={"accept-encoding": "gzip"}) as r:
                        r.raise_for_status()
                        for _ in r.iter_raw(1 << 20):
                            pass
                        got += r.num_bytes_downloaded  # as transferred: gzip-compressed, as a browser gets them
        times[i], fetched[i] = ready, got

    cpu0 = cpu_seconds(pid)
    with ThreadPoolExecutor(students) as pool:
        list(pool.map(student, range(students)))
    cpu = cpu_seconds(pid) - cpu0
    times.sort()
    return {"students": students, "side": side, "first": first_visit, "p50": statistics.median(times),
            "p95": times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)], "cpu": cpu / students,
            "mb": statistics.mean(fetched) / 1e6}


def renderer_bytes() -> int:
    """The resident bytes of every Chromium renderer and GPU process on this machine (the benchmark's only
    browser while it measures): what a page's WebAssembly memory and WebGPU buffers occupy."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            if b"chromium" not in cmd or not (b"--type=renderer" in cmd or b"--type=gpu-process" in cmd):
                continue
            total += int((d / "statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


GPU_ARGS = ["--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking", "--disable-component-update"]
"""Chromium with WebGPU on SwiftShader (Vulkan on the CPU): an adapter, so the page runs its WebGPU build."""


def device_forward(url: str, side: int, picture: Path, threads: int | None = None, gpu: bool = False,
                   limit_s: float = 300, probe: bool = False) -> dict | None:
    """The device path in headless Chromium on this machine: milliseconds of the first and the second forward
    (the second steady), of preparing the picture, and the renderer's peak resident bytes, for one picture at
    ``side``, with ``threads`` WebAssembly threads (the page takes ``navigator.hardwareConcurrency``; None: this
    machine's) or WebGPU (``gpu``: SwiftShader here, a CPU standing in for a GPU). ``probe``: the page measures the
    device and runs the largest side it affords (``side`` in the answer), as a student's page does; else ``side``
    itself, whatever it takes. None when the first forward has not finished within ``limit_s`` seconds."""
    from playwright.sync_api import sync_playwright

    args = GPU_ARGS if gpu else ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                 "--disable-component-update"]
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], renderer_bytes())

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        if threads:
            page.add_init_script(f"Object.defineProperty(navigator, 'hardwareConcurrency', {{get: () => {threads}}})")
        if not probe:
            page.add_init_script("window.vitvizDeviceProbe = false")
        page.goto(f"{url}?tab=attention&device=1&side={side}")
        page.wait_for_function("() => document.querySelector('#device-panel .vx-dev-what')?.textContent"
                               ".includes('MB')", polling=500, timeout=600_000)
        base = renderer_bytes()
        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        out = {}
        try:
            for run in (1, 2):
                page.locator("#device-picture").set_input_files(str(picture))
                try:
                    page.wait_for_function(f"() => window.vitvizDevice?.done >= {run}", polling=500,
                                           timeout=limit_s * 1000)
                except Exception:  # say where it stopped
                    if run == 1 and page.evaluate("() => !window.vitvizDevice?.failed"):
                        return None  # still computing
                    raise SystemExit(f"the device path did not answer at {side} px: " + page.evaluate(
                        "() => JSON.stringify({status: document.querySelector('#device-panel .vx-dev-status')"
                        "?.textContent, state: Object.keys(window.vitvizDevice || {})})")) from None
                failed = page.evaluate("() => window.vitvizDevice.failed")
                status = page.locator("#device-panel .vx-dev-status").inner_text()
                last = page.evaluate("() => window.vitvizDevice.last ? ({ms: window.vitvizDevice.last.ms, "
                                     "prep: window.vitvizDevice.last.prep, load: window.vitvizDevice.last.load, "
                                     "first: window.vitvizDevice.last.first, backend: window.vitvizDevice.backend, "
                                     "side: window.vitvizDevice.last.side, probed: window.vitvizDevice.probed || null, "
                                     "threads: window.vitvizDevice.threads}) : ({ms: "
                                     "window.vitvizDevice.timings.slice(-1)[0], backend: window.vitvizDevice.backend,"
                                     " threads: window.vitvizDevice.threads})")
                if "slower than the server" in (failed or status):  # the page's own fallback, as a student sees it
                    return {"fallback": failed or status, "ms": last and last["ms"], "backend": last and last["backend"],
                            "threads": last and last["threads"], "peak": peak[0], "base": base}
                assert not failed and page.locator("#device-switch input").is_checked(), failed or status
                out[run] = last
        finally:
            stop.set()
            watcher.join()
            browser.close()
    first = out[1]["first"] if out[1]["first"] is not None else out[1]["ms"]
    return {"first_ms": first, "ms": out[2]["ms"], "prep_ms": out[2]["prep"], "load_ms": out[1]["load"],
            "backend": out[2]["backend"], "threads": out[2]["threads"], "peak": peak[0], "base": base,
            "side": out[2]["side"], "probed": out[1]["probed"]}


def device_table(url: str, pid: int, sides: list[int], folder: Path, fused: dict, students: list[int]) -> None:
    from gradio_client import Client

    picture = pictures(1, folder, square=True, seed=99)[0]
    made = {s: Client(url, verbose=False).predict("DINO ViT-S/8", s, api_name="/device_model") for s in sides}
    assert all(m.get("file") and not m.get("notice") for m in made.values()), made
    visits = {s: record_visit(url, s, pid) for s in sides}
    kinds = (("WebAssembly, 1 thread", 1, False, False), ("WebAssembly, 2 threads", 2, False, False),
             ("the page's own side (its probe), 2 threads", 2, False, True), ("WebGPU (SwiftShader)", None, True, False))
    # WebGPU at the smallest side only: SwiftShader computes on the CPU (minutes), and says nothing of a GPU; the
    # probe where a side is larger than the one it measures at
    runs = {(s, k): device_forward(url, s, picture, threads=t, gpu=g, limit_s=120 if g else 300, probe=pr)
            for s in sides for k, t, g, pr in kinds if (not g or s == min(sides)) and (not pr or s > 224)}
    rows = [device_case(url, pid, n, s, visits[s], first, made[s]["file"]) for s in sides for n in students
            for first in (False, True)]
    print()
    print("Device path: the forward in headless Chromium here (ONNX Runtime Web 1.30; the page cross-origin "
          "isolated; WebGPU on SwiftShader is a CPU standing in for a GPU: it shows the path works, not a GPU's "
          "speed). Steady = the second picture; renderer peak = the resident bytes of Chromium's page and GPU "
          "processes while it ran (before: with the page open).")
    print()
    print("| short side | backend asked | ran | first run | steady | prep | steady ÷ server's fused forward | "
          "renderer peak (before) |")
    print("|---|---|---|---|---|---|---|---|")
    for (s, kind), r in runs.items():
        if r is None:
            print(f"| {s} | {kind} |  | did not finish in {120 if 'GPU' in kind else 300} s |  |  |  |  |")
            continue
        ran = f"{r.get('backend')}, {r.get('threads')} threads" if r.get("backend") == "wasm" else r.get("backend")
        if r.get("side") and r["side"] != s:  # the page ran a smaller side than the one asked: said
            probed = r.get("probed") or {}
            ran += f", at {r['side']} px (probe: {probed.get('ms', 0):,.0f} ms at {probed.get('side')} px)"
        if "fallback" in r:
            if r.get("ms"):
                print(f"| {s} | {kind} | {ran} | {r['ms']:,.0f} ms: more than 3× the server's, the page fell back to "
                      f"the server |  |  | {r['ms'] / 1000 / fused[s]['wall']:.2f}× | {r['peak'] / 1e6:,.0f} MB "
                      f"({r['base'] / 1e6:,.0f} MB) |")
            else:
                print(f"| {s} | {kind} | {ran} | fell back: {r['fallback'][:80]} |  |  |  |  |")
            continue
        print(f"| {s} | {kind} | {ran} | {r['first_ms']:,.0f} ms | {r['ms']:,.0f} ms | {r['prep_ms']:,.0f} ms | "
              f"{r['ms'] / 1000 / fused[s]['wall']:.2f}× | {r['peak'] / 1e6:,.0f} MB ({r['base'] / 1e6:,.0f} MB) |")
    print()
    print("A real later visit in Chromium (the page cached by the browser, until the manifest is there): the server's "
          "CPU over the visit, its idle polling included (the idle server's share in brackets) "
          + "; ".join(f"{s} px {statistics.median(visits[s]['cpu']) * 1000:.0f} ms "
                      f"({statistics.median(visits[s]['idle']) * 1000:.0f} ms; median of {len(visits[s]['cpu'])}), "
                      f"{len(visits[s]['again'])} requests reached the server ({len(visits[s]['first'])} on a first "
                      "visit)" for s in sides))
    for s in sides:
        print(f"What reached the server on a later visit at {s} px: "
              + ", ".join(f"{r['method']} {r['url'][len(url) - 1:].split('?')[0]}" for r in visits[s]["again"]))
    print("Files of a first visit (the WebAssembly build and the model's graph), stored / as transferred (gzip): "
          + "; ".join(f"{s} px graph {made[s]['bytes'] / 1e6:.1f} MB" for s in sides)
          + f"; runtime {sum((assets_ort() / n).stat().st_size for n in DEVICE_FILES) / 1e6:.1f} MB")
    print()
    print("| students | short side | visit | manifest there p50 | p95 | first map p95 (+ device here, 2 threads) | "
          "server CPU per student | transferred per student |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = runs.get((r["side"], "the page's own side (its probe), 2 threads")) or runs.get((r["side"],
                                                                                          "WebAssembly, 2 threads"))
        total = (f"{r['p95'] + (f['prep_ms'] + f['ms']) / 1000:.2f} s" if f and "prep_ms" in f
                 else "(the server answers)" if f else "(no forward here)")
        print(f"| {r['students']} | {r['side']} | {'first (files)' if r['first'] else 'again (cached)'} | "
              f"{r['p50']:.2f} s | {r['p95']:.2f} s | {'' if r['first'] else total} | "
              f"{r['cpu'] * 1000:.0f} ms | {r['mb']:.1f} MB |")


def assets_ort() -> Path:
    from vitviz import assets

    return assets.ORT


def main(argv: list[str] | None = None) -> None:
    from benchmarks import hubcache

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, nargs="+", default=None)
    ap.add_argument("--sides", type=int, nargs="+", default=[224, 480])
    ap.add_argument("--device", action="store_true", help="the device path too")
    ap.add_argument("--device-only", action="store_true", help="the device path only")
    ap.add_argument("--batching", action="store_true",
                    help="only: one fused forward of 4 pictures against 4 of one, at each side")
    ap.add_argument("--device-students", type=int, nargs="+", default=[30, 100],
                    help="how many students replay a device visit at once")
    ap.add_argument("--endpoints", nargs="+", default=list(ENDPOINTS), choices=list(ENDPOINTS),
                    help="what each student asks for (default: all three; the /attention rows for one student only)")
    args = ap.parse_args(argv)
    plan = [] if args.device_only else [
        (n, s, api, door) for s in args.sides for api in args.endpoints
        for n in (args.students or ([1, 30, 100] if s == 224 else [1, 30]))
        for door in DOORS
        if api == "/explorer" or n == 1]  # the API's answers: one student
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        checkpoint = hubcache.dino_vits8(tmp / "checkpoint")
        hubcache.install(tmp / "hf", "facebook/dino-vits8", checkpoint)
        if args.batching:
            print("| short side | 4 forwards of one picture | one forward of 4 | saved |")
            print("|---|---|---|---|")
            for s in args.sides:
                b = batched_forward(checkpoint, s)
                print(f"| {s} | {b['apart'] * 1000:,.0f} ms | {b['together'] * 1000:,.0f} ms | "
                      f"{1 - b['together'] / b['apart']:.0%} |")
            return
        yard = Yardstick(checkpoint)
        forward = {s: yard.measure(s) for s in args.sides}
        proc, url = serve(tmp / "hf")
        try:
            rows = []
            for i, (n, s, api, door) in enumerate(plan):
                (tmp / f"case{i}").mkdir()
                rows.append(yard.around(s, functools.partial(case, url, proc.pid, n, s, tmp / f"case{i}", seed=i,
                                                             api=api, door=door)))
                print(f"… {n} students at {s} px ({api}, {door}): p95 {rows[-1]['p95']:.2f} s", file=sys.stderr)
            if args.device or args.device_only:
                (tmp / "device").mkdir()
                device_table(url, proc.pid, args.sides, tmp / "device", forward, args.device_students)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    if not rows:
        return
    print("Fused forward of DINO ViT-S/8's shape here at the start (median of 5): "
          + ", ".join(f"{s} px {forward[s]['wall'] * 1000:,.0f} ms ({forward[s]['cpu'] * 1000:,.0f} ms of CPU)"
                      for s in args.sides))
    print()
    print("; ".join(f"`{k}`: {v[2]}" for k, v in ENDPOINTS.items() if k in args.endpoints) + ". One student: five "
          "requests one after another (median, slowest), through gradio_client and through the HTTP API as a page "
          "speaks it (gradio_client polls its event stream every 50 ms). Each row's yardstick is the fused forward "
          "measured just before and just after it (three runs each, the server idle): its wall time for the "
          "answers, its CPU-seconds for the server's CPU. The students are threads of this process, on the same two "
          "cores as the server: their CPU-seconds over the case are the last column (part of a class's wait here, "
          "none of it on a real class's server).")
    print()
    print("| request | client | students | short side | fused forward (its CPU) | answer p50 | p95 | last | ÷ fused "
          "forward (one: p50; class: p95 ÷ students) | server CPU per answer | ÷ the forward's CPU | the students' "
          "CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = r["forward"]
        one = r["students"] == 1
        ratio = r["p50"] / f["wall"] if one else r["p95"] / (r["students"] * f["wall"])
        print(f"| `{r['api']}` | {r['door']} | {r['students']} | {r['side']} | {f['wall'] * 1000:,.0f} ms "
              f"({f['cpu'] * 1000:,.0f} ms) | {r['p50']:.2f} s | {r['p95']:.2f} s | {r['last']:.2f} s | {ratio:.2f}× | "
              f"{r['cpu']:.2f} s | {r['cpu'] / f['cpu']:.2f}× | {r['clients']:.1f} s |")


if __name__ == "__main__":
    main()
