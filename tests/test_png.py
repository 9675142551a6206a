"""The quick PNG encoder (vitviz.render.png): the pixels and text entries come back exactly, read by Pillow and by
an independent decoder written from the PNG specification here (inflate, then undo each row's filter)."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from vitviz.render import png, plotting


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk, each one's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, i = [], 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        assert struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0] == zlib.crc32(kind + body)
        out.append((kind, body))
        i += 12 + n
    return out


def decode(data: bytes) -> np.ndarray:
    """(H, W, C) uint8 from an 8-bit, non-interlaced PNG, every filter type undone as the specification says."""
    parts = chunks(data)
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", parts[0][1])
    assert depth == 8 and interlace == 0
    c = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(b for k, b in parts if k == b"IDAT")), np.uint8).reshape(h, -1)
    prior = np.zeros(w * c, np.int64)
    rows = []
    for line in raw:
        kind, x = int(line[0]), line[1:].astype(np.int64)
        cur = np.zeros_like(x)
        for j in range(x.size):
            a = cur[j - c] if j >= c else 0
            b, d = prior[j], (prior[j - c] if j >= c else 0)
            p = a + b - d
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
            pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else (b if pb <= pc else d)][kind]
            cur[j] = (x[j] + pred) % 256
        rows.append(cur)
        prior = cur
    return np.stack(rows).astype(np.uint8).reshape(h, w, c)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA"])
def test_every_pixel_comes_back_through_pillow_and_by_the_specification(mode):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (13, 17, len(mode)), dtype=np.uint8)
    a[4:9] = a[4]  # flat rows: Up makes them zeros
    image = Image.fromarray(a[..., 0] if mode == "L" else a, mode)
    data = png.encode(image)
    back = Image.open(io.BytesIO(data))
    assert back.mode == mode and back.size == (17, 13)
    assert np.array_equal(np.asarray(back), np.asarray(image))
    assert np.array_equal(decode(data).reshape(np.asarray(image).shape), np.asarray(image))
    kinds = [k for k, _ in chunks(data)]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and kinds.count(b"IDAT") == 1
    # every row carries the Up filter (type 2)
    rows = np.frombuffer(zlib.decompress(dict(chunks(data))[b"IDAT"]), np.uint8).reshape(13, -1)
    assert set(rows[:, 0].tolist()) == {2}


def test_a_figures_text_size_and_alternative_survive_even_outside_latin_1():
    image = plotting.described(plotting.fit_image(Image.new("RGB", (40, 30), "white"), 20.0),
                               "Figure: attention ÷ an even spread… (head 3 → 12%)")
    data = png.encode(image)
    back = Image.open(io.BytesIO(data))
    assert plotting.alt_of(back) == "Figure: attention ÷ an even spread… (head 3 → 12%)"
    assert plotting.text_px_of(back) == 20.0
    kinds = [k for k, _ in chunks(data)]
    assert b"tEXt" in kinds and b"iTXt" in kinds  # the size fits Latin-1; the arrow and the ellipsis do not


def test_other_modes_go_through_pillow():
    image = Image.fromarray(np.arange(12, dtype=np.uint8).reshape(3, 4)).convert("P")
    image.info["vitviz:alt"] = "palette"
    back = Image.open(io.BytesIO(png.encode(image)))
    assert back.mode == "P" and np.array_equal(np.asarray(back), np.asarray(image))
    assert back.info["vitviz:alt"] == "palette"


def test_a_figure_is_about_as_small_as_pillows_at_the_same_level():
    """The Up filter for every row instead of Pillow's per-row choice costs few bytes on a real figure."""
    from importlib.resources import files

    cat = np.asarray(Image.open(files("vitviz.assets") / "examples" / "cat.png").convert("RGB"))
    heat = np.linspace(0, 1, 14 * 14).reshape(14, 14)
    figure = plotting.panels([plotting.heat_overlay(cat, heat, "inferno", 0.6)] * 3, ["a", "b", "c"], "three",
                             "inferno", "attention")
    ours = len(png.encode(figure))
    buf = io.BytesIO()
    figure.save(buf, "png", compress_level=1)
    assert ours <= 1.25 * len(buf.getvalue())
