"""What drawing costs: every view's figures on this machine, the offline model, each view's default settings.

    python -m benchmarks.figures            # median of 3 draws per view (after one that makes its analyses)
    python -m benchmarks.figures --rounds 5

For each view: the time ``views.show`` takes once its analysis is held (the library caches analyses, not figures:
what is left is mostly matplotlib), and the part of it spent in ``plotting.to_image`` (matplotlib's figures: their
layout measured, drawn, cut and encoded). Views drawn in the browser or with PIL alone spend little there. A view
whose settings hold a picture gets the cat; the others are shown without one.

Then every figure those views made, encoded to PNG as the server sends it (``vitviz.render.png.encode``: every
row Up-filtered, zlib level 1) and as Pillow writes it at the same level (it tries five filters on every row):
the total time (median of the rounds) and bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time

from PIL import Image

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GIVEN = {"predict": {"patches": "3,3;4,4;5,5"}}  # a view with nothing to show by default


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from vitviz import assets, views
    from vitviz.core import images
    from vitviz.render import plotting
    from vitviz.views import RECORDS, VIEWS

    spent = [0.0]
    inner = plotting.to_image

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    plotting.to_image = timed  # the views call it through the module
    rgb = images.load_rgb(assets.example("cat"))
    rows, figures = [], []
    for name in sorted(VIEWS):
        v = VIEWS[name]
        values = v.check(v.defaults() | GIVEN.get(name, {}))
        picture = rgb if RECORDS[name].needs_picture else None  # as its declaration says
        views.show(name, picture, values)  # its model loaded, its analyses made
        walls, drawing = [], []
        for _ in range(args.rounds):
            spent[0] = 0.0
            t = time.perf_counter()
            shown = views.show(name, picture, values)
            walls.append(time.perf_counter() - t)
            drawing.append(spent[0])
        rows.append((name, len(shown.figures), statistics.median(walls), statistics.median(drawing)))
        figures += [f for f in shown.figures.values() if isinstance(f, Image.Image)]
    print(f"Every view shown again with its analysis held (median of {args.rounds}), on {os.cpu_count()} CPUs.\n")
    print("| view | figures | shown | of which matplotlib's figures (to_image) |")
    print("|---|---|---|---|")
    for name, n, wall, draw in rows:
        print(f"| `{name}` | {n} | {wall * 1000:,.0f} ms | {draw * 1000:,.0f} ms |")
    print(f"| all | {sum(r[1] for r in rows)} | {sum(r[2] for r in rows):.2f} s | {sum(r[3] for r in rows):.2f} s |")
    encode_table(figures, args.rounds)


def pillow_png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "png", compress_level=1)
    return buf.getvalue()


def encode_table(figures: list[Image.Image], rounds: int) -> None:
    """Every figure encoded by each encoder, ``rounds`` times: the median total time and the bytes."""
    from vitviz.render import png

    pixels = sum(f.width * f.height for f in figures)
    print(f"\n{len(figures)} figures ({pixels / 1e6:.1f} megapixels) encoded to PNG (median of {rounds}):\n")
    print("| encoder | time, all figures | bytes |")
    print("|---|---|---|")
    for label, encode in (("Pillow, zlib level 1 (five filters tried per row)", pillow_png),
                          ("vitviz.render.png (Up filter, zlib level 1)", png.encode)):
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            size = sum(len(encode(f)) for f in figures)
            times.append(time.perf_counter() - t)
        print(f"| {label} | {statistics.median(times) * 1000:,.0f} ms | {size / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
