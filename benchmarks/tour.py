"""The guided tour in headless Chromium: how long after Next a step's view is there.

    python -m benchmarks.tour              # the offline model (what a class without the internet sees)

The app runs as its own process (offline); the tour is walked once (each step's analysis made), then walked again
``--rounds`` times, and for each step the time from Next's click to (a) the lesson bar showing the new step and
(b) the page quiet: no gradio output pending for 300 ms. Also whether the page reloaded (a marker on ``window``).
Prints the median and p95 per step and overall, and (c) the step's view drawn: the last change to what the step is
about (its section when the step opens one, else what its tab shows once answered: ``TabSpec.shows``), its
figures loaded and no gradio output pending on it; measured once the page is quiet, so an early moment that
later changes does not count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request

QUIET = """() => new Promise((ok) => {
  const busy = () => document.querySelector('.pending, .generating, .progress-text, .eta-bar') !== null;
  let calm = 0;
  const tick = () => { calm = busy() ? 0 : calm + 50; if (calm >= 300) ok(performance.now()); else setTimeout(tick, 50); };
  tick();
})"""


WATCH = """() => {  // the last change to the step's view (window.__vx.sel): its content, an image loaded in it,
  // or the class or style of an element around it (its tab shown, its pending mark gone)
  if (window.__vx) return;
  window.__vx = { sel: null, last: 0 };
  const mine = (node) => { const el = window.__vx.sel && document.querySelector(window.__vx.sel);
    return el && node && (el.contains(node) || node.contains(el)); };
  new MutationObserver((changes) => {
    for (const c of changes) {
      const around = c.target.nodeType === 1 && c.target.contains(document.querySelector(window.__vx.sel));
      if (mine(c.target) && (!around || c.type === "attributes" || c.target === document.querySelector(window.__vx.sel))) {
        window.__vx.last = performance.now(); return;
      }
    }
  }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true,
                              attributeFilter: ["class", "style", "src", "hidden", "open"] });
  document.addEventListener("load", (e) => { if (mine(e.target)) window.__vx.last = performance.now(); }, true);
}"""

DRAWN = """(sel) => { const el = document.querySelector(sel);
  const block = el?.closest('.block') || el;
  const ready = el && el.offsetParent !== null && [...el.querySelectorAll('img')].every((i) => i.complete)
    && !block.matches('.pending, .generating') && !block.querySelector('.pending, .generating, .progress-text, .eta-bar');
  return ready ? window.__vx.last : null; }"""


def view_of(step) -> str:
    """The CSS selector of what a step is about: its section, else the figure it names (``show=``), else what its
    tab shows once answered."""
    from vitviz.specs.tabs import TABS

    section, tab = step.query.get("open"), TABS[step.query.get("tab", "patches")]
    return f"#{section}-box" if section else dict(tab.figures).get(step.query.get("show"), tab.shows)


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user + system), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(port: int) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", GRADIO_SERVER_PORT=str(port))
    proc = subprocess.Popen([sys.executable, "-m", "vitviz.app", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the app did not start")


def main(argv: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright

    from vitviz.tools import lesson

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=7871)
    ap.add_argument("--events", action="store_true",
                    help="also list the events each step sends in the last walk, each with when it was sent "
                         "(seconds after Next)")
    args = ap.parse_args(argv)
    steps = len(lesson.tour().steps)
    proc = serve(args.port)
    tour = lesson.tour()
    bar, quiet = {k: [] for k in range(2, steps + 1)}, {k: [] for k in range(2, steps + 1)}
    drawn: dict[int, list[float]] = {k: [] for k in range(2, steps + 1)}
    cold: dict[int, float] = {}
    loads: list[float] = []
    sent: dict[int, list[list[tuple[str, float]]]] = {k: [] for k in range(2, steps + 1)}
    joins: list[tuple[str, float]] = []
    reloaded = 0
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            names: dict[int, str] = {}

            def joined(request) -> None:  # one event sent to the server's queue: named by what it does
                if request.method == "POST" and "/queue/join" in request.url:
                    import json

                    fn = json.loads(request.post_data or "{}").get("fn_index")
                    joins.append((names.get(fn, str(fn)), time.perf_counter()))

            page.on("request", joined)
            cpu = 0.0
            for round_ in range(args.rounds + 1):
                if round_ == 1:
                    cpu = cpu_seconds(proc.pid)
                began = time.perf_counter()
                page.goto(f"http://127.0.0.1:{args.port}/?tab=forward&image=scene_star&lesson=tour&step=1")
                page.wait_for_function("() => document.querySelector('#lesson-bar')?.innerText.includes('step 1 of')",
                                       timeout=120_000)
                page.evaluate(QUIET)
                loads.append(time.perf_counter() - began - 0.3)
                if not names:
                    deps = page.evaluate("() => window.gradio_config.dependencies.map((d) => [d.id, d.api_name, "
                                         "(d.targets || []).map((t) => t[1]).join('+')])")
                    names.update({i: api or trig or str(i) for i, api, trig in deps})
                page.evaluate("() => { window.__stayed = 1; }")
                page.evaluate(WATCH)
                for k in range(2, steps + 1):
                    sel = view_of(tour.steps[k - 1])
                    t0 = page.evaluate("(sel) => { window.__vx.sel = sel; window.__vx.last = 0; "
                                       "return performance.now(); }", sel)
                    joins.clear()
                    clicked = time.perf_counter()
                    page.locator("#lesson-bar a", has_text="Next").click()
                    shown = page.evaluate(f"""() => new Promise((ok) => {{ const t = () => document.querySelector(
                        '#lesson-bar')?.innerText.includes('step {k} of') ? ok(performance.now()) : setTimeout(t, 20);
                        t(); }})""")
                    page.wait_for_timeout(100)
                    calm = page.evaluate(QUIET)
                    page.wait_for_function(DRAWN, arg=sel, timeout=60_000)
                    last = page.evaluate(DRAWN, sel)
                    sent[k].append([(name, at - clicked) for name, at in joins])
                    if not round_:  # the first walk makes each step's analyses (the page loaded once)
                        cold[k] = max(last - t0, shown - t0) / 1000
                    if round_:  # the others are what is measured
                        bar[k].append((shown - t0) / 1000)
                        quiet[k].append((calm - t0 - 300) / 1000)
                        drawn[k].append(max(last - t0, shown - t0) / 1000)
                reloaded += page.evaluate("() => window.__stayed") != 1
            cpu = (cpu_seconds(proc.pid) - cpu) / args.rounds
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    every = sorted(v for vs in quiet.values() for v in vs)
    views = sorted(v for vs in drawn.values() for v in vs)

    def p95(values: list[float]) -> float:
        return values[min(len(values) - 1, int(0.95 * len(values)))]

    print(f"The tour in headless Chromium, {args.rounds} walks after a first (each step's analysis made once); "
          f"walks that reloaded the page: {reloaded}; the server's CPU per walk (its first step's load included): "
          f"{cpu:.2f} s.")
    print()
    print("| step | its view | events sent (warm) | lesson bar shows it (median) | view drawn, cold | view drawn "
          "(median) | view drawn (slowest) | page quiet (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for k in range(2, steps + 1):
        print(f"| {k} | `{view_of(tour.steps[k - 1])}` | {statistics.median(len(e) for e in sent[k][1:])} "
              f"| {statistics.median(bar[k]):.2f} s | {cold[k]:.2f} s "
              f"| {statistics.median(drawn[k]):.2f} s | {max(drawn[k]):.2f} s | {statistics.median(quiet[k]):.2f} s |")
    colds = sorted(cold.values())
    print(f"| all | | | | p50 {statistics.median(colds):.2f} s, p95 {p95(colds):.2f} s "
          f"| p50 {statistics.median(views):.2f} s, p95 {p95(views):.2f} s | "
          f"| p50 {statistics.median(every):.2f} s, p95 {p95(every):.2f} s |")
    print()
    print(f"The first step (the page loaded: its address opened until the page is quiet): first walk "
          f"{loads[0]:.2f} s, then median {statistics.median(loads[1:]):.2f} s.")
    if args.events:
        print()
        for k in range(2, steps + 1):
            print(f"step {k} (drawn {drawn[k][-1]:.2f} s): "
                  + ", ".join(f"{name} +{at:.2f} s" for name, at in sent[k][-1]))


if __name__ == "__main__":
    main()
