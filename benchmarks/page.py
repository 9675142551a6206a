"""Today's page (``/``) beside the page rebuilt as one store and one panel per view (``/next``, issue 69), in one run.

    python -m benchmarks.page                       # both pages, every row (offline; ~10 min on 2 cores)
    python -m benchmarks.page --class-size 10       # a smaller class

For each page a fresh ``python app.py`` is started (offline), and in headless Chromium:

- **blocks, events, configuration bytes**: from the configuration gradio serves for that page (``GET
  /config?page=`` and ``?page=next``: only the page's components and events); blocks that are API placeholders
  (gradio's ``api`` components, one per endpoint parameter) are counted apart.
- **first HTML**: ``GET /`` and ``GET /next`` as a browser asks (``Accept: text/html``), without and with gzip.
- **start to first figure**: from ``python app.py`` started to the first tab's first figure drawn (its ``img``
  loaded) in a page opened as soon as the server answers.
- **control change to request**: the patch size changed by hand (16 ↔ 8) on the first tab, from the control's
  input event to the request leaving: on ``/next`` the panel's ``vx-asked`` event, and for both pages the
  fetch that joins gradio's queue (its resource timing start, the page's own clock); median and p95 of ``--changes``.
- **warm tour step**: the guided tour walked twice from its first step; in the second walk, for each step, from
  Next's click to the step's view drawn (its section, or its tab's main view: the last change to it, its images
  loaded, nothing pending); p95 over the steps.
- **a class opening the page**, two ways. (a) ``--class-size`` Chromium contexts in one browser open the page at
  the same moment; each one's time to its first figure drawn, p95, against one student alone (the same, once, just
  before). One Chromium on the machine's cores draws every page, so this includes the browsers' own work, which a
  real class does on its own machines. (b) The server's share: one page load recorded in Chromium (every request
  it sent until the first figure) is replayed over HTTP, each student in a session of its own (the page's files
  fetched together, each event joined and awaited on the session's stream, as the browser did), alone and
  ``--class-size`` at once: seconds to the first figure's bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("/", "/next")

FIRST_FIGURE = {"/": "#patch-grid img", "/next": "#panel-patches .vx-figures img"}
"""The first tab's first figure on each page (today's: the tab declaration's ``shows``)."""

MARK_FIRST = """(sel) => {  // when `sel` is first drawn (an image loaded, in the page's clock since its start)
  const drawn = () => { const i = document.querySelector(sel);
    if (i && i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().height > 0 && window.__vxFirst == null)
      window.__vxFirst = performance.now(); };
  document.addEventListener("load", drawn, true);
  const watch = () => new MutationObserver(drawn).observe(document.documentElement,
    { subtree: true, childList: true, attributes: true, attributeFilter: ["src", "class", "style", "hidden"] });
  if (document.documentElement) watch(); else document.addEventListener("DOMContentLoaded", watch);
}"""

ARM_CHANGE = """() => {  // the next input event's time, the next queue join's start and the next vx-asked
  window.__vxChange = { input: null, join: null, asked: null };
  const c = window.__vxChange;
  if (!window.__vxArmed) {
    window.__vxArmed = true;
    for (const kind of ["input", "change"]) document.addEventListener(kind, (e) => {
      if (window.__vxChange.input == null) window.__vxChange.input = e.timeStamp; }, true);
    document.addEventListener("vx-asked", (e) => {
      if (window.__vxChange.asked == null) window.__vxChange.asked = e.detail.at; }, true);
    new PerformanceObserver((list) => { for (const e of list.getEntries()) {
      const x = window.__vxChange;
      if (x.input != null && x.join == null && e.startTime >= x.input - 1 &&
          /\\/gradio_api\\/(queue\\/join|run\\/)/.test(e.name)) x.join = e.startTime; } })
      .observe({ type: "resource" });
  }
  return c;
}"""

WATCH_NEXT = """() => {  // the last change to the step's view (window.__vx.sel), or an image loaded in it
  if (window.__vx) return;
  window.__vx = { sel: null, last: 0 };
  const mine = (node) => { const el = window.__vx.sel && document.querySelector(window.__vx.sel);
    return el && node && node.nodeType === 1 ? el.contains(node) : el && node && el.contains(node.parentNode); };
  new MutationObserver((changes) => { for (const c of changes) if (mine(c.target)) {
    window.__vx.last = performance.now(); return; } })
    .observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true,
                              attributeFilter: ["src", "hidden", "aria-busy", "class"] });
  document.addEventListener("load", (e) => { if (mine(e.target)) window.__vx.last = performance.now(); }, true);
}"""

DRAWN_NEXT = """(sel) => { const el = document.querySelector(sel);  // its images on screen loaded (others load lazily)
  const seen = (i) => { const r = i.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; };
  const ready = el && el.offsetParent !== null && !el.closest('[aria-busy]') && !el.querySelector('[aria-busy]')
    && [...el.querySelectorAll('img')].filter(seen).every((i) => i.complete);
  return ready ? window.__vx.last : null; }"""

QUIET_NEXT = """() => new Promise((ok) => {
  let calm = 0;
  const tick = () => { calm = document.querySelector('[aria-busy]') ? 0 : calm + 50;
    if (calm >= 300) ok(performance.now()); else setTimeout(tick, 50); };
  tick(); })"""


# ---- the server --------------------------------------------------------------------------------------------------

def start(port: int) -> tuple[subprocess.Popen, float]:
    """``python app.py --port PORT`` (offline), started now: (the process, the moment it was started)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, began


def answers(url: str, timeout: float = 240) -> None:
    """Wait until ``url`` answers (the server is up)."""
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in {timeout:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


# ---- what the server sends -----------------------------------------------------------------------------------

def fetch(url: str, gz: bool) -> bytes:
    """``url``'s body as sent (compressed when the server compressed it), asked as a browser asks."""
    req = urllib.request.Request(url, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8",
                                               "Accept-Encoding": "gzip" if gz else "identity"})
    with urllib.request.urlopen(req, timeout=60) as got:
        return got.read()


def structure(base: str, page: str) -> dict:
    """The page's configuration as gradio serves it for that page: blocks (API placeholders apart), events,
    bytes; its first HTML's bytes without and with gzip."""
    raw = fetch(f"{base}/config?page={page.strip('/')}", gz=False)
    config = json.loads(raw)
    placeholders = sum(c["type"] == "api" for c in config["components"])
    html, zipped = fetch(base + page, gz=False), fetch(base + page, gz=True)
    compressed = zipped[:2] == b"\x1f\x8b"
    return {"blocks": len(config["components"]) - placeholders, "placeholders": placeholders,
            "events": len(config["dependencies"]), "config": len(raw), "html": len(html),
            "html_gz": len(zipped) if compressed else len(gzip.compress(html)), "gz_served": compressed}


# ---- in Chromium --------------------------------------------------------------------------------------------------

def first_figure(browser, url: str, page: str, began: float | None = None) -> float:
    """Seconds from ``began`` (else the page's navigation) to ``page``'s first figure drawn, in a new context."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        tab = ctx.new_page()
        tab.add_init_script(f"({MARK_FIRST})({json.dumps(FIRST_FIGURE[page])})")
        opened = time.perf_counter()
        tab.goto(url + page.lstrip("/"), wait_until="commit", timeout=120_000)
        tab.wait_for_function("() => window.__vxFirst != null", timeout=180_000, polling=50)
        drawn_ms = tab.evaluate("() => window.__vxFirst")
        nav_ms = tab.evaluate("() => performance.now()") - drawn_ms  # ms since drawn
        seconds_since_open = time.perf_counter() - opened - nav_ms / 1000
        return seconds_since_open + (opened - began if began is not None else 0.0)
    finally:
        ctx.close()


def control_changes(browser, url: str, page: str, changes: int) -> dict[str, list[float]]:
    """The patch size changed by hand ``changes`` times (16 -> 8 -> 16...) on the first tab: ms from the input
    event to the queue join's start (both pages) and to the panel's ``vx-asked`` (``/next``)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    out: dict[str, list[float]] = {"join": [], "asked": []}
    try:
        tab = ctx.new_page()
        tab.add_init_script(f"({MARK_FIRST})({json.dumps(FIRST_FIGURE[page])})")
        tab.goto(f"{url}{page.lstrip('/')}?tab=patches", wait_until="commit")
        tab.wait_for_function("() => window.__vxFirst != null", timeout=180_000, polling=50)
        settle(tab, page)
        for k in range(changes):
            size = "8" if k % 2 == 0 else "16"
            tab.evaluate(ARM_CHANGE)
            if page == "/":
                tab.locator(".tabitem:visible").get_by_label(size, exact=True).first.check()
            else:
                tab.locator("#vx-patches-patch").select_option(size)
            try:
                tab.wait_for_function("() => window.__vxChange.join != null", timeout=30_000, polling=20)
            except PlaywrightError:
                out["missed"] = out.get("missed", []) + [k]  # no request left within 30 s: said in the table
            got = tab.evaluate("() => window.__vxChange")
            if got["join"] is not None:
                out["join"].append(got["join"] - got["input"])
            if got["asked"] is not None:
                out["asked"].append(got["asked"] - got["input"])
            settle(tab, page)
    finally:
        ctx.close()
    return out


def settle(tab, page: str) -> None:
    """Wait until the page has nothing pending (gradio's marks on ``/``, a busy panel on ``/next``)."""
    if page == "/":
        from benchmarks.tour import QUIET

        tab.evaluate(QUIET)
    else:
        tab.evaluate(QUIET_NEXT)


def next_target(step) -> str:
    """The selector of what a tour step is about on ``/next``: the view its link opens, else its tab's main view."""
    from vitviz.specs.tabs import TABS
    from vitviz.views import RECORDS

    opened, tab = step.query.get("open"), step.query.get("tab", "patches")
    view = opened if opened in RECORDS else TABS[tab].opens_with.name
    return f"#panel-{view} .vx-panel"


def tour_steps(browser, url: str, page: str) -> list[float]:
    """The tour walked twice from its first step; the second walk's seconds from Next to each step's view drawn."""
    from benchmarks import tour as old
    from vitviz.tools import lesson

    steps = lesson.tour().steps
    first = steps[0].link.lstrip("?") + "&lesson=tour&step=1"
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    times: list[float] = []
    try:
        tab = ctx.new_page()
        for walk in range(2):
            tab.goto(f"{url}{page.lstrip('/')}?{first}")
            bar = "#lesson-bar" if page == "/" else "nav.vx-lesson"
            tab.wait_for_function(f"() => document.querySelector('{bar}')?.innerText.includes('step 1 of')",
                                  timeout=180_000)
            settle(tab, page)
            tab.evaluate(old.WATCH if page == "/" else WATCH_NEXT)
            for k in range(2, len(steps) + 1):
                sel = old.view_of(steps[k - 1]) if page == "/" else next_target(steps[k - 1])
                t0 = tab.evaluate("(sel) => { window.__vx.sel = sel; window.__vx.last = 0; return performance.now(); }",
                                  sel)
                if page == "/":
                    tab.locator("#lesson-bar a", has_text="Next").click()
                else:
                    tab.locator("nav.vx-lesson button[data-go=next]").click()
                shown = tab.evaluate(f"""() => new Promise((ok) => {{ const t = () => document.querySelector(
                    '{bar}')?.innerText.includes('step {k} of') ? ok(performance.now()) : setTimeout(t, 20);
                    t(); }})""")
                tab.wait_for_timeout(100)
                settle(tab, page)
                drawn = old.DRAWN if page == "/" else DRAWN_NEXT
                tab.wait_for_function(drawn, arg=sel, timeout=120_000)
                last = tab.evaluate(drawn, sel)
                if walk == 1:
                    times.append(max(last - t0, shown - t0) / 1000)
    finally:
        ctx.close()
    return times


def a_class(browser, url: str, page: str, size: int) -> list[float]:
    """``size`` contexts open ``page`` at the same moment: each one's seconds to its first figure drawn."""
    ctxs = [browser.new_context(viewport={"width": 1280, "height": 720}) for _ in range(size)]
    try:
        tabs = []
        for ctx in ctxs:
            tab = ctx.new_page()
            tab.add_init_script(f"({MARK_FIRST})({json.dumps(FIRST_FIGURE[page])})")
            tab.goto("about:blank")
            tabs.append(tab)
        target = json.dumps(url + page.lstrip("/"))
        at = time.time() * 1000 + 300  # every page goes at this moment (epoch ms), each by its own timer
        for tab in tabs:
            tab.evaluate(f"() => {{ setTimeout(() => {{ location.href = {target}; }}, {at} - Date.now()); }}")
        got = []
        for tab in tabs:
            tab.wait_for_function("() => window.__vxFirst != null", timeout=600_000, polling=100)
            origin, first = tab.evaluate("() => [performance.timeOrigin, window.__vxFirst]")
            got.append((origin + first - at) / 1000)
        return got
    finally:
        for ctx in ctxs:
            ctx.close()


# ---- a class over HTTP: what one page load asks the server, asked by many at once ------------------------------

STREAMS = ("/queue/data", "/heartbeat/")
"""Requests that stay open (gradio's event stream, its heartbeat): the replay opens its own event stream."""


def record_load(browser, url: str, page: str) -> tuple[list[dict], str, str]:
    """One real page load in Chromium until its first figure is drawn: every request it sent to the server (method,
    address, body, in order), its session, and the first figure's address."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    sent: list[dict] = []
    try:
        tab = ctx.new_page()
        tab.add_init_script(f"({MARK_FIRST})({json.dumps(FIRST_FIGURE[page])})")
        tab.on("request", lambda r: sent.append({"method": r.method, "url": r.url, "body": r.post_data_buffer,
                                                 "type": r.headers.get("content-type")})
               if r.url.startswith(url) else None)
        tab.goto(url + page.lstrip("/"), wait_until="commit")
        tab.wait_for_function("() => window.__vxFirst != null", timeout=180_000, polling=50)
        figure = tab.evaluate(f"() => document.querySelector({json.dumps(FIRST_FIGURE[page])}).src")
        session = tab.evaluate("() => window.gradio_config?.session_hash || ''")
    finally:
        ctx.close()
    if not session:
        joined = [r for r in sent if "/queue/join" in r["url"] and r["body"]]
        session = json.loads(joined[0]["body"])["session_hash"] if joined else ""
    cut = next((i for i, r in enumerate(sent) if r["url"] == figure), len(sent) - 1)
    return sent[:cut + 1], session, figure


RETRIED: list[str] = []
"""The replay's requests the server dropped (a connection closed before its answer), each asked once more."""


async def patient(send, *args, **kwargs):
    """``send(*args)``; a connection the server closed before answering is asked again once (and counted)."""
    import httpx

    try:
        return await send(*args, **kwargs)
    except httpx.TransportError as err:
        RETRIED.append(f"{type(err).__name__} {args[-1]}")
        return await send(*args, **kwargs)


async def replay(requests: list[dict], session: str, figure: str, at: float) -> float:
    """One student's page load over HTTP, as the browser asked it (a new session): the page's files fetched
    together, each event joined and its completion awaited on the session's event stream; seconds from ``at``
    (``time.perf_counter``) to the first figure's bytes received."""
    import asyncio
    import secrets

    import httpx

    mine = secrets.token_hex(6)
    done: dict[str, asyncio.Future] = {}
    loop = asyncio.get_running_loop()

    def future(eid: str) -> asyncio.Future:
        return done.setdefault(eid, loop.create_future())

    async def stream(client, base: str) -> None:
        async with client.stream("GET", f"{base}gradio_api/queue/data?session_hash={mine}", timeout=None) as got:
            async for line in got.aiter_lines():
                if line.startswith("data:"):
                    msg = json.loads(line[5:])
                    if msg.get("msg") == "process_completed" and not future(msg["event_id"]).done():
                        future(msg["event_id"]).set_result(msg)

    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    base = requests[0]["url"].split("//", 1)[1].split("/", 1)[0]
    base = f"http://{base}/"
    listening = None
    async with httpx.AsyncClient(timeout=600) as client:
        try:
            pending: list = []
            for r in requests:
                address = r["url"].replace(session, mine) if session else r["url"]
                if any(s in address for s in STREAMS):
                    continue
                body = r["body"].replace(session.encode(), mine.encode()) if (r["body"] and session) else r["body"]
                headers = {"content-type": r["type"]} if r["type"] else {}
                if r["method"] == "GET" and address != figure:  # the page's files: together, as a browser does
                    pending.append(patient(client.get, address))
                    continue
                if pending:
                    await asyncio.gather(*pending)
                    pending = []
                if r["method"] == "GET":  # the first figure
                    await patient(client.get, address)
                    return time.perf_counter() - at
                got = await patient(client.request, r["method"], address, content=body, headers=headers)
                if "/queue/join" in address:
                    listening = listening or asyncio.create_task(stream(client, base))
                    await asyncio.wait_for(future(got.json()["event_id"]), 600)
            if pending:
                await asyncio.gather(*pending)
            return time.perf_counter() - at
        finally:
            if listening:
                listening.cancel()


def a_class_over_http(browser, url: str, page: str, size: int) -> tuple[float, list[float]]:
    """One page load recorded in Chromium, then replayed over HTTP by one student alone and by ``size`` at once:
    (alone, each of the class's seconds to the first figure)."""
    import asyncio

    requests, session, figure = record_load(browser, url, page)

    async def together(n: int) -> list[float]:
        at = time.perf_counter() + 0.2
        return list(await asyncio.gather(*(replay(requests, session, figure, at) for _ in range(n))))

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as other:  # a loop of its own: Playwright's sync API runs one in this thread
        alone = other.submit(asyncio.run, together(1)).result()[0]
        try:
            return alone, other.submit(asyncio.run, together(size)).result()
        except Exception as err:  # noqa: BLE001 - the class's row says it failed, the others stay
            print(f"{page}: the class over HTTP failed: {err!r}", file=sys.stderr)
            return alone, []


# ---- the run ------------------------------------------------------------------------------------------------------

def p95(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.95 * len(s)))]


def measure(browser, page: str, port: int, args) -> dict:
    """Every row for ``page``, on a server of its own started now."""
    proc, began = start(port)
    url = f"http://127.0.0.1:{port}/"
    try:
        answers(url)
        got = {"start": first_figure(browser, url, page, began)}
        got |= structure(url.rstrip("/"), page)
        got["changes"] = control_changes(browser, url, page, args.changes)
        got["tour"] = tour_steps(browser, url, page) if not args.no_tour else []
        if args.class_size and args.class_ways in ("both", "chromium"):
            got["alone"] = first_figure(browser, url, page)
            got["class"] = a_class(browser, url, page, args.class_size)
        if args.class_size and args.class_ways in ("both", "http"):
            got["http_alone"], got["http_class"] = a_class_over_http(browser, url, page, args.class_size)
        return got
    finally:
        stop(proc)


def table(rows: dict[str, dict], args) -> str:
    """The two pages side by side, in Markdown."""
    def both(fn) -> str:
        return " | ".join(fn(rows[p]) for p in PAGES)

    def ms(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.0f} ms, p95 {p95(xs):.0f} ms" if xs else "n/a"

    def html(r: dict) -> str:
        note = "" if r["gz_served"] else " (not served gzipped)"
        return f"{r['html'] / 1000:,.0f} KB / {r['html_gz'] / 1000:,.0f} KB{note}"

    def crowd(r: dict) -> str:
        return f"{p95(r['class']):.2f} s ({p95(r['class']) / r['alone']:.1f}× alone)"

    lines = ["| measure | `/` (today) | `/next` | goal |", "|---|---|---|---|"]
    rows_of = [
        ("page blocks (+ API placeholders)", lambda r: f"{r['blocks']} (+{r['placeholders']})", "≤ 150"),
        ("events", lambda r: str(r["events"]), "≤ 100"),
        ("configuration", lambda r: f"{r['config'] / 1000:,.0f} KB", "≤ 300 KB"),
        ("first HTML, plain / gzip", html, "≤ 400 KB"),
        ("`python app.py` to the first tab's figure drawn", lambda r: f"{r['start']:.1f} s", "≤ 50% of today's"),
        ("control change to its request leaving (queue join starts)", lambda r: ms(r["changes"]["join"])
         + (f" ({len(r['changes']['missed'])} of {args.changes} sent none)" if r["changes"].get("missed") else ""),
         "≤ 30 ms"),
        ("control change to the panel's `vx-asked`", lambda r: ms(r["changes"]["asked"]), "≤ 30 ms"),
    ]
    if not args.no_tour:
        rows_of.append((f"warm tour step's view drawn (second walk, {len(rows['/']['tour'])} steps)",
                        lambda r: f"p50 {statistics.median(r['tour']):.2f} s, p95 {p95(r['tour']):.2f} s",
                        "p95 ≤ 0.4 s"))
    if args.class_size and args.class_ways in ("both", "chromium"):
        rows_of.append(("one student alone: first figure (Chromium)", lambda r: f"{r['alone']:.2f} s", ""))
        rows_of.append((f"a class of {args.class_size} at once: first figure, p95 (Chromium contexts)", crowd,
                        "≤ 2× alone"))
    if args.class_size and args.class_ways in ("both", "http"):
        rows_of.append(("one student alone: first figure (HTTP replay)", lambda r: f"{r['http_alone']:.2f} s", ""))
        rows_of.append((f"a class of {args.class_size} at once: first figure, p95 (HTTP replay)",
                        lambda r: (f"{p95(r['http_class']):.2f} s ({p95(r['http_class']) / r['http_alone']:.1f}× "
                                   f"alone)" if r["http_class"] else "failed (see the log)"),
                        "≤ 2× alone"))
    lines += [f"| {name} | {both(fn)} | {goal} |" for name, fn, goal in rows_of]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=7883)
    ap.add_argument("--changes", type=int, default=10, help="control changes per page")
    ap.add_argument("--class-size", type=int, default=30, help="students opening the page at once (0: none)")
    ap.add_argument("--class-ways", choices=("both", "chromium", "http"), default="both",
                    help="the class in Chromium contexts, replayed over HTTP, or both")
    ap.add_argument("--no-tour", action="store_true", help="leave out the tour's walks")
    ap.add_argument("--pages", nargs="+", default=list(PAGES), choices=PAGES)
    args = ap.parse_args(argv)
    rows: dict[str, dict] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            for page in args.pages:
                rows[page] = measure(browser, page, args.port, args)
                print(f"{page}: {json.dumps(rows[page])}", file=sys.stderr, flush=True)  # kept if a later row fails
        finally:
            browser.close()
    if RETRIED:
        print(f"requests the server dropped in the HTTP class, asked again: {len(RETRIED)}: {RETRIED[:5]}",
              file=sys.stderr)
    if set(rows) == set(PAGES):
        print(f"vitviz's page today (/) and rebuilt (/next), one run, offline model, headless Chromium 1280×720, "
              f"{os.cpu_count()} cores; the class: {args.class_size} contexts in one Chromium.")
        print()
        print(table(rows, args))
    else:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
