"""What one event costs gradio's page as more components have taken part in events (the tour's floor).

    python -m benchmarks.gradio_dispatch

A page of N Markdown components, each the input and output of its own event, all run once; then a button whose
event touches none of them is clicked ten times. For each N: ``structuredClone`` calls per click (gradio 6's page
refreshes the loading status of every component that has ever been an event's input or output on every event,
and each refresh copies that component's properties) and the time from the click to the answer on the page, in
headless Chromium. The app runs in this process (offline, nothing of vitviz's).
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

COUNT = """(() => { const orig = window.structuredClone; window.__clones = 0;
  window.structuredClone = function (v, o) { window.__clones++; return orig.call(this, v, o); }; })()"""


def measure(n: int, browser, port: int) -> tuple[float, float]:
    import gradio as gr

    with gr.Blocks() as demo:
        go = gr.Button("go", elem_id="go")
        out = gr.Markdown("", elem_id="out")
        for i in range(n):
            c = gr.Markdown(f"component {i}")
            gr.Button(f"b{i}").click(lambda v: v, c, c)
        go.click(lambda: f"answer {time.time()}", None, out)
    demo.queue()
    _, url, _ = demo.launch(prevent_thread_lock=True, server_port=port, quiet=True)
    try:
        page = browser.new_page()
        page.add_init_script(COUNT)
        page.goto(url)
        page.locator("#go").wait_for()
        for i in range(n):  # every component takes part in an event once
            page.get_by_role("button", name=f"b{i}", exact=True).click()
        page.wait_for_timeout(1000)
        page.evaluate("() => { window.__clones = 0; }")
        times = []
        for _ in range(10):
            before = page.locator("#out").inner_text()
            t0 = time.perf_counter()
            page.locator("#go").click()
            page.wait_for_function("(b) => document.querySelector('#out').innerText !== b", arg=before)
            times.append(time.perf_counter() - t0)
        clones = page.evaluate("() => window.__clones") / 10
        page.close()
        return clones, statistics.median(times)
    finally:
        demo.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    print("| components that took part | structuredClone calls per event | click to answer (median of 10) |")
    print("|---|---|---|")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        for i, n in enumerate((0, 100, 200, 400)):
            clones, seconds = measure(n, browser, 7920 + i)
            print(f"| {n} | {clones:,.0f} | {seconds * 1000:.0f} ms |")
        browser.close()


if __name__ == "__main__":
    main()
