"""A class at once: N concurrent clients × M requests against a launched app; prints tables.

    python -m benchmarks.load                    # 1, 4, 16 and 32 clients × 5 requests (a few minutes)
    python -m benchmarks.load --clients 16 --concurrency 1 2 4   # compare the model group's size
    python -m benchmarks.load --forwards         # why a lock per model: serial vs parallel forwards
    python -m benchmarks.load --worst            # peak memory of the largest request the budget accepts
    python -m benchmarks.load --side-doors       # the paths around the queue: row fetches, large pictures,
                                                 # downloads after a pause, fresh sessions (peak RSS each)

The app runs as its own process (``python app.py``, offline: the Attention and
Classify requests use the embedded model), so the server's resident memory is
read from /proc for that process alone. Each request mixes /attention,
/classify, /shuffle and /patches over 16 different pictures in four aspect
ratios. Every answer is compared with the answer to the same request made
alone, one at a time ("wrong" counts differences; timings in the text are
left out of the comparison).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ENDPOINTS = ("/attention", "/classify", "/shuffle", "/patches")


# ---- the app as a separate process -----------------------------------------------------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The app (``python -m vitviz.app``) on a free port; ``peak_mb`` tracks its resident memory while ``watching``."""

    def __init__(self, concurrency: int):
        self.port = free_port()
        env = dict(os.environ, GRADIO_SERVER_PORT=str(self.port), VITVIZ_MODEL_CONCURRENCY=str(concurrency))
        self.proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(self.port)], cwd=ROOT,
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/"
        self._wait()
        self.peak_mb = self.rss_mb()
        self._stop = threading.Event()

    def _wait(self, timeout: float = 120) -> None:
        import httpx

        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                if httpx.get(self.url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError("the app did not start")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return kb / 1024

    def watch(self) -> threading.Thread:
        self._stop.clear()
        self.peak_mb = self.rss_mb()

        def loop() -> None:
            while not self._stop.is_set():
                self.peak_mb = max(self.peak_mb, self.rss_mb())
                time.sleep(0.01)

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        return t

    def stop_watching(self, t: threading.Thread) -> None:
        self._stop.set()
        t.join()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


# ---- the requests ------------------------------------------------------------------------------

def pictures(folder: Path, count: int = 16) -> list[str]:
    """``count`` different pictures, four aspect ratios: generated scenes and cuts of the example photos."""
    from PIL import Image

    from vitviz import assets
    from vitviz.embedded import scenes

    photos = [Image.open(assets.EXAMPLES / n).convert("RGB") for n in ("cat.png", "coffee.png")]
    shapes = [(64, 64), (64, 96), (96, 64), (80, 120)]
    paths = []
    for i in range(count):
        h, w = shapes[i % 4]
        if i < count - 4:
            img = Image.fromarray(scenes.make_scene(200 + i).image).resize((w, h), Image.BICUBIC)
        else:
            img = photos[i % 2].resize((w * 4, h * 4), Image.BICUBIC)
        paths.append(str(folder / f"p{i:02d}.png"))
        img.save(paths[-1])
    return paths


def request(k: int, pics: list[str]) -> tuple[str, list]:
    """The k-th request of the mix (JSON-able arguments; the picture as a path)."""
    from vitviz.specs.registry import OFFLINE_KEY

    pic, api = pics[k % len(pics)], ENDPOINTS[(k // len(pics) + k) % 4]
    if api == "/attention":
        return api, [pic, "DINO ViT-S/8", 64, 4 - k % 4, -1, 0.6, 0.6, "inferno", None]
    if api == "/classify":
        return api, [pic, OFFLINE_KEY]
    if api == "/shuffle":
        return api, [pic, OFFLINE_KEY, k % 3]
    return api, [pic, (8, 16)[k % 2], 96, "crop", "ViT-S"]


def call(client, api: str, args: list):
    from gradio_client import handle_file

    return client.predict(handle_file(args[0]), *args[1:], api_name=api)


def fingerprint(answer):
    """An answer as plain data to compare: pictures by a digest of their pixels, text without the timing line."""
    from PIL import Image

    def walk(v):
        if isinstance(v, dict) and "path" in v:
            v = v["path"]
        if isinstance(v, str) and os.path.isfile(v):
            with Image.open(v) as im:
                return hashlib.sha1(im.convert("RGB").tobytes()).hexdigest()
        if isinstance(v, str):
            return [line for line in v.splitlines() if "this forward on this machine" not in line]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(answer)


def first_difference(a, b, where: str = "") -> str:
    """Where two fingerprints first differ, and how (for the benchmark's 'wrong' lines)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{where}/{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{where}[{i}]")
    return f"{where}: {str(a)[:160]!r} alone, {str(b)[:160]!r} in the crowd"


def explorer_parts(client, args: list) -> list[str]:
    """What a student's page fetches after an attention answer: the explorer's answer for the same settings, and
    the paths of its parts (the class token's maps, the picture, each layer's keys) as the page asks for them
    (the page's own answer names them; the API's carries the first ones inline, so they are asked for again)."""
    got = call(client, "/explorer", args)
    names = [got["parts"]["cls"], got["parts"]["image"], *got["parts"]["keys"]]
    return [got["base"].lstrip("/") + n for n in names]


def fetch_part(url: str, path: str) -> int:
    import httpx

    return httpx.get(url + path, timeout=120).status_code


def run(url: str, clients: int, per_client: int, pics: list[str], reference: dict) -> dict:
    """``clients`` threads, each its own gradio_client, ``per_client`` requests each, started together. After
    each /attention answer the client asks for the explorer's data too, and before each of its next requests
    fetches one of those parts (a student moving to another layer while others work): ``parts`` counts the
    fetches and their 404s (the server no longer holding that analysis)."""
    from gradio_client import Client

    conns = [Client(url, verbose=False) for _ in range(clients)]
    barrier = threading.Barrier(clients)
    latencies: dict[str, list[float]] = {api: [] for api in ENDPOINTS}
    errors, wrong = [], []
    parts = {"fetched": 0, "missing": 0}

    def one_client(i: int) -> None:
        barrier.wait()
        pending: list[str] = []
        for j in range(per_client):
            if pending:
                status = fetch_part(url, pending.pop(0))
                parts["fetched"] += 1
                parts["missing"] += status == 404
            api, args = request(i * per_client + j, pics)
            t0 = time.perf_counter()
            try:
                digest = fingerprint(call(conns[i], api, args))
            except Exception as err:  # noqa: BLE001  (counted and printed)
                errors.append(f"{api}: {type(err).__name__}: {err}")
                continue
            latencies[api].append(time.perf_counter() - t0)
            if api == "/attention":
                try:
                    pending += explorer_parts(conns[i], args)
                except Exception as err:  # noqa: BLE001  (counted and printed)
                    errors.append(f"/explorer: {type(err).__name__}: {err}")
            alone = reference[(api, json.dumps(args))]
            if digest != alone:
                wrong.append(f"{api}: {first_difference(alone, digest)}")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one_client, range(clients)))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "done": sum(map(len, latencies.values())), "latencies": latencies,
            "errors": errors, "wrong": wrong, "parts": parts}


def reference_answers(url: str, pics: list[str], total: int) -> tuple[dict, float]:
    """Every distinct request of the mix, once, one after another: the answers and requests per second."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    for k in range(4):  # warm-up: models loaded, caches filled
        call(client, *request(k, pics))
    ref, t0 = {}, time.perf_counter()
    for k in range(total):
        api, args = request(k, pics)
        key = (api, json.dumps(args))
        if key not in ref:
            ref[key] = fingerprint(call(client, api, args))
    return ref, len(ref) / (time.perf_counter() - t0)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def load_tables(client_counts: list[int], per_client: int, concurrency: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pics = pictures(Path(tmp), max(16, max(client_counts)))  # a picture of its own for each client
        total = max(client_counts) * per_client
        for conc in concurrency:
            server = Server(conc)
            try:
                idle = server.rss_mb()
                ref, seq_rate = reference_answers(server.url, pics, total)
                print(f"\nModel concurrency group of {conc}. Sequential (one client, every distinct request "
                      f"once): {seq_rate:.1f} requests/s; server {idle:.0f} MiB idle.\n")
                print("| clients × requests | requests/s | vs sequential | " +
                      " | ".join(f"{api} p50 / p95" for api in ENDPOINTS) + " | errors | wrong | explorer parts 404 | server peak RSS |")
                print("|---|---|---|" + "---|" * len(ENDPOINTS) + "---|---|---|---|")
                for n in client_counts:
                    watcher = server.watch()
                    r = run(server.url, n, per_client, pics, ref)
                    server.stop_watching(watcher)
                    rate = r["done"] / r["seconds"]
                    fetched, missing = r["parts"]["fetched"], r["parts"]["missing"]
                    share = missing / fetched if fetched else 0.0
                    cells = [f"{pct(v, 50) * 1000:.0f} / {pct(v, 95) * 1000:.0f} ms" if v else "–"
                             for v in r["latencies"].values()]
                    print(f"| {n} × {per_client} | {rate:.1f} | {rate / seq_rate:.0%} | " + " | ".join(cells) +
                          f" | {len(r['errors'])} | {len(r['wrong'])} | {missing} of {fetched} ({share:.1%}) | "
                          f"{server.peak_mb:.0f} MiB |")
                    for e in r["errors"][:3]:
                        print(f"  error: {e}")
                    for w in r["wrong"][:3]:
                        print(f"  wrong: {w}")
            finally:
                server.close()


# ---- why a lock: two forwards side by side are no faster on two cores ------------------------------

def forwards_table(repeats: int = 8) -> None:
    import torch

    from benchmarks.bench import dino_checkpoint
    from vitviz.analyses import attention as analysis
    from vitviz.models import loaders

    with tempfile.TemporaryDirectory() as tmp:
        dino = loaders.load_hf(dino_checkpoint(Path(tmp) / "dino"))
        tiny = loaders.load_embedded()
        cases = [("DINO ViT-S/8 shape, 224 px", dino, torch.randn(1, 3, 224, 224)),
                 ("vitviz tiny, 64 px", tiny, tiny.normalise(torch.zeros(64, 64, 3, dtype=torch.uint8).numpy()))]
        print("| model (forwards/s) | captures, serial (the lock) | plain forwards, serial | plain forwards, "
              "2 threads in parallel | the same, 1 intra-op thread each |")
        print("|---|---|---|---|---|")
        threads0 = torch.get_num_threads()
        for name, loaded, x in cases:

            module = loaded._module  # the benchmark alone calls the module outside the Runner: it measures what a
            # lock-free design could at best reach (forwards with nothing recorded), which vitviz itself never does

            def plain():
                with torch.inference_mode():
                    module(pixel_values=x, interpolate_pos_encoding=True) if loaded.spec.family == "hf" else module(x)

            def rate(fn, threads: int) -> float:
                fn()
                t0 = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(lambda _: [fn() for _ in range(repeats // threads)], range(threads)))
                return repeats / (time.perf_counter() - t0)

            captures = rate(lambda: loaded.run(analysis.probe_for(loaded), x), 1)
            serial, parallel = rate(plain, 1), rate(plain, 2)
            torch.set_num_threads(1)
            parallel_one = rate(plain, 2)
            torch.set_num_threads(threads0)
            print(f"| {name} | {captures:.1f} | {serial:.1f} | {parallel:.1f} | {parallel_one:.1f} |")


# ---- the largest request the budget lets through --------------------------------------------------

def worst_one(ckpt: str) -> dict:
    """In a fresh process: peak memory of analyse() on DINO ViT-S/8 at its token limit."""
    import numpy as np

    from benchmarks.bench import PeakRSS
    from vitviz.analyses import attention as analysis
    from vitviz.models import budget, loaders
    from vitviz.specs import registry

    spec = registry.REGISTRY["DINO ViT-S/8"]
    loaded = loaders.load_hf(ckpt, spec=spec)
    limit = budget.max_tokens(spec, analysis.attention_bytes)
    gw = (limit - 1) // 64  # 64 rows of patches (512 px short side) and as many columns as the limit allows
    rgb = np.random.default_rng(0).integers(0, 256, (512, gw * 8, 3), dtype=np.uint8)
    with PeakRSS() as mem:
        a = analysis.analyse(loaded, rgb, 512)
    tokens = a.maps.grid[0] * a.maps.grid[1] + 1
    return {"tokens": tokens, "limit": limit, "peak_mb": mem.delta / 2**20,
            "estimate_mb": analysis.attention_bytes(spec, tokens) / 2**20}


def worst_table() -> None:
    from benchmarks.bench import dino_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = dino_checkpoint(Path(tmp) / "dino")
        out = subprocess.run([sys.executable, "-m", "benchmarks.load", "--worst-one", str(ckpt)], capture_output=True,
                             text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1]
    r = json.loads(out)
    print("| worst accepted request (DINO ViT-S/8 shape) | tokens (limit) | measured peak | budget's estimate |")
    print("|---|---|---|---|")
    print(f"| 512 px short side, widest picture under the limit | {r['tokens']:,} ({r['limit']:,}) | "
          f"{r['peak_mb']:.0f} MiB | {r['estimate_mb']:.0f} MiB |")


# ---- the side doors ---------------------------------------------------------------------------

def side_doors() -> None:
    """The app launched in this process (so the model cache can hold a DINO ViT-S/8-shaped checkpoint with random
    weights, and the session store can be counted); requests from threads; the process's peak RSS for each case."""
    import base64
    import uuid

    import httpx
    import numpy as np
    from PIL import Image

    from benchmarks.bench import PeakRSS, dino_checkpoint
    from vitviz import app, assets
    from vitviz.app import serving
    from vitviz.core import images
    from vitviz.models import budget, loaders
    from vitviz.models import cache as models
    from vitviz.render import browser
    from vitviz.specs import registry
    from vitviz.specs import views as spec
    from vitviz.views import attention as attention_view

    tmp = Path(tempfile.mkdtemp(prefix="vitviz-doors-"))
    s8 = registry.REGISTRY["DINO ViT-S/8"]
    models._cache["DINO ViT-S/8"] = loaders.load_hf(dino_checkpoint(tmp / "dino"), spec=s8)
    demo = app.build_demo()
    port = free_port()
    demo.launch(**{**app.launch_kwargs(), "server_port": port, "prevent_thread_lock": True, "quiet": True})
    url = f"http://127.0.0.1:{port}/"
    http = httpx.Client(timeout=600)
    rows = []

    def case(name: str, n: int, fn) -> None:
        budget.SERVER.peak = 0
        with PeakRSS() as mem, ThreadPoolExecutor(min(n, 48)) as pool:
            t0 = time.perf_counter()
            results = list(pool.map(fn, range(n)))
            seconds = time.perf_counter() - t0
        errors = sum(1 for r in results if r is not True)
        rows.append((name, n, errors, seconds, mem.start / 2**20, mem.peak / 2**20, budget.SERVER.peak / 2**20))

    # 1. 48 fetches of the explorer's layer keys at once on a 512-px analysis of the cat cut square (DINO ViT-S/8 shape: 64×64 patches, under
    #    its token limit), spread over the 12 layers
    cat = images.load_rgb(assets.EXAMPLES / "cat.png", images.INTAKE_SHORT_SIDE)
    side = min(cat.shape[:2])
    cat = np.ascontiguousarray(cat[:side, (cat.shape[1] - side) // 2:][:, :side])
    values = spec.ATTENTION.check({"model": "DINO ViT-S/8", "resolution": 512})
    a, _ = attention_view.analysis_for(cat, values)

    def fetch_keys(i: int):
        name = browser.key_parts(a)[i % a.maps.layers]
        with http.stream("GET", f"{url}{browser.ROUTE}/{a.token}/{name}") as got:  # read as a browser does, not kept
            size = sum(len(chunk) for chunk in got.iter_bytes())
        return size == browser.keys_bytes(a)

    case(f"explorer key fetches, 512-px DINO ViT-S/8 shape ({a.maps.grid[0]}×{a.maps.grid[1]} patches)", 48,
         fetch_keys)

    # 2. 32 large pictures at once (40 megapixels each, half uploaded, half as data: URLs in the request)
    big = []
    kept = Path(tempfile.gettempdir()) / "vitviz-bench-large"  # kept between runs: they take a minute to make
    kept.mkdir(exist_ok=True)
    for i in range(32):
        path = kept / f"big{i}.png"
        if not path.exists():
            rgb = np.empty((5000, 8000, 3), np.uint8)
            rgb[..., 0] = (np.arange(8000) * 255 // 8000).astype(np.uint8)
            rgb[..., 1] = (np.arange(5000) * 255 // 5000).astype(np.uint8)[:, None]
            rgb[..., 2] = i * 7
            Image.fromarray(rgb).save(path, compress_level=1)
        big.append(path)

    def large_picture(i: int):
        data = big[i].read_bytes()
        if i % 2:
            picture = {"url": "data:image/png;base64," + base64.b64encode(data).decode(),
                       "meta": {"_type": "gradio.FileData"}}
        else:
            path = http.post(f"{url}gradio_api/upload", files={"files": (big[i].name, data, "image/png")}).json()[0]
            picture = {"path": path, "meta": {"_type": "gradio.FileData"}}
        answer = _raw(http, url, "patches", [picture, 16, 224, "crop", "ViT-B", True])
        return "event: complete" in answer or answer[:300]

    case("large pictures at once (8000×5000 PNG)", 32, large_picture)

    # 3. 16 downloads at once after a pause (many old bundle folders in the cache)
    old = serving.cache_dir() / "vitviz-bundles"
    for i in range(200):
        (old / f"old{i}").mkdir(parents=True, exist_ok=True)
        (old / f"old{i}" / "x.zip").write_bytes(b"x")
        os.utime(old / f"old{i}", (0, 0))
    star = {"path": http.post(f"{url}gradio_api/upload", files={"files": (
        "star.png", (assets.EXAMPLES / "scene_star.png").read_bytes(), "image/png")}).json()[0],
        "meta": {"_type": "gradio.FileData"}}

    def download(i: int):
        answer = _raw(http, url, "bundle_patches", [star, 16, 224, "crop", "ViT-B"])
        return "event: complete" in answer and ".zip" in answer or answer[:300]

    case("downloads at once after a pause", 16, download)

    # 4. 2,000 fresh sessions, each one queued event that is answered at once (the explorer's send-back, empty)
    again = next(b._id for b in demo.blocks.values() if getattr(b, "elem_id", None) == "attention-again")
    dep = next(i for i, d in enumerate(demo.config["dependencies"])
               if [again, "change"] in [list(t) for t in d["targets"]])

    def session(i: int):
        hash_ = uuid.uuid4().hex
        r = http.post(f"{url}gradio_api/queue/join", json={"session_hash": hash_, "fn_index": dep, "trigger_id": again,
                                                            "data": ["", registry.OFFLINE_KEY, 64, "mean", 0.0, "{}"]})
        if r.status_code != 200:
            return False
        with http.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": hash_}) as events:
            return any("process_completed" in line for line in events.iter_lines())

    before = len(demo.state_holder.session_data)
    case("fresh sessions (one request each)", 2000, session)
    kept = len(demo.state_holder.session_data) - before

    print(f"server-wide budget {budget.mib(budget.SERVER.total)}, session cap {serving.SESSIONS}, "
          f"{kept} sessions kept after 2,000")
    print("| case | at once | errors | seconds | RSS before | peak RSS | budget peak |")
    print("|---|---|---|---|---|---|---|")
    for name, n, errors, seconds, start, peak, reserved in rows:
        print(f"| {name} | {n:,} | {errors} | {seconds:.1f} | {start:,.0f} MiB | {peak:,.0f} MiB | {reserved:,.0f} MiB |")
    demo.close()


def _raw(http, url: str, api: str, args: list) -> str:
    r = http.post(f"{url}gradio_api/call/{api}", json={"data": args})
    r.raise_for_status()
    return http.get(f"{url}gradio_api/call/{api}/{r.json()['event_id']}").text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--requests", type=int, default=5, help="requests per client")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[2], help="model concurrency group sizes")
    ap.add_argument("--forwards", action="store_true")
    ap.add_argument("--worst", action="store_true")
    ap.add_argument("--worst-one", metavar="CKPT")
    ap.add_argument("--side-doors", action="store_true")
    args = ap.parse_args()
    if args.worst_one:
        print(json.dumps(worst_one(args.worst_one)))
        return
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    if args.side_doors:
        side_doors()
    elif args.forwards:
        forwards_table()
    elif args.worst:
        worst_table()
    else:
        load_tables(args.clients, args.requests, args.concurrency)


if __name__ == "__main__":
    main()
