"""Image intake: every mode a student might upload, and every way an upload can be bad."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from conftest import EXAMPLES

from vitviz.core import images
from vitviz.specs.views import FIT_POLICIES


def png_bytes(img: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_rgba_is_composited_over_white():
    im = Image.new("RGBA", (16, 16), (255, 0, 0, 0))  # fully transparent red
    im.putpixel((0, 0), (0, 0, 255, 255))
    rgb = images.load_rgb(png_bytes(im))
    assert rgb.shape == (16, 16, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[5, 5]) == (255, 255, 255)
    assert tuple(rgb[0, 0]) == (0, 0, 255)


def test_palette_with_transparency_and_la():
    p = Image.new("P", (16, 16), 0)
    p.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    p.putpixel((3, 3), 1)
    p.info["transparency"] = 0
    rgb = images.load_rgb(png_bytes(p))
    assert tuple(rgb[0, 0]) == (255, 255, 255) and tuple(rgb[3, 3]) == (10, 200, 30)
    la = Image.new("LA", (16, 16), (100, 255))
    assert tuple(images.load_rgb(png_bytes(la))[0, 0]) == (100, 100, 100)


def test_sixteen_bit_and_float_are_stretched():
    a = (np.arange(256, dtype=np.uint16).reshape(16, 16) * 256)
    rgb = images.load_rgb(png_bytes(Image.fromarray(a)))
    assert rgb[0, 0, 0] == 0 and rgb[-1, -1, 0] == 255 and (rgb[..., 0] == rgb[..., 2]).all()
    f = Image.fromarray(np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16))
    rgbf = images.load_rgb(f)
    assert rgbf[0, 0, 0] == 0 and rgbf[-1, -1, 0] == 255


def test_constant_float_image_has_no_division_by_zero():
    f = Image.fromarray(np.full((16, 16), 3.5, np.float32))
    rgb = images.load_rgb(f)
    assert np.isfinite(rgb).all() and rgb.shape == (16, 16, 3)


def test_cmyk_and_grey():
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # red in CMYK
    r, g, b = images.load_rgb(png_bytes(cmyk, "JPEG", quality=100))[8, 8]
    assert r > 200 and g < 60 and b < 60
    assert tuple(images.load_rgb(Image.new("L", (16, 16), 77))[0, 0]) == (77, 77, 77)


def test_exif_orientation_is_applied():
    im = Image.new("RGB", (32, 16), (0, 0, 0))
    im.paste((255, 0, 0), (0, 0, 16, 16))  # left half red
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise on display
    rgb = images.load_rgb(png_bytes(im, "JPEG", exif=exif.tobytes(), quality=100))
    assert rgb.shape[:2] == (32, 16)  # portrait after orientation
    assert rgb[2, 8, 0] > 200  # the red half is now on top


def test_animated_gif_takes_first_frame():
    frames = [Image.new("RGB", (16, 16), c) for c in ((255, 0, 0), (0, 255, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    r, g, _ = images.load_rgb(buf.getvalue())[0, 0]
    assert r > 200 and g < 50


@pytest.mark.parametrize("data, words", [
    (b"this is not an image at all", "not an image"),
    (b"", "empty"),
])
def test_bad_bytes_give_a_clear_message(data, words):
    with pytest.raises(ValueError, match=words):
        images.load_rgb(data)


def test_truncated_file(tmp_path):
    good = png_bytes(Image.effect_noise((64, 64), 50).convert("RGB"))
    path = tmp_path / "cut.png"
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="damaged or incomplete"):
        images.load_rgb(path)


def test_decompression_bomb_rejected_from_header(tmp_path):
    # A 10000×10000 PNG of one colour: tiny on disk, 100 Mpx decoded.
    path = tmp_path / "bomb.png"
    Image.new("1", (10_000, 10_000)).save(path, optimize=True)
    assert path.stat().st_size < 200_000
    with pytest.raises(ValueError, match="megapixels"):
        images.load_rgb(path)


def test_too_small_and_absurd_aspect():
    with pytest.raises(ValueError, match="smaller than one"):
        images.load_rgb(Image.new("RGB", (5, 40)))
    with pytest.raises(ValueError, match="times longer"):
        images.load_rgb(Image.new("RGB", (2000, 20)))
    with pytest.raises(ValueError, match="choose an image"):
        images.load_rgb(None)


@pytest.mark.parametrize("policy", list(FIT_POLICIES))
def test_fit_policies_give_whole_patches(policy):
    rgb = np.random.default_rng(0).integers(0, 255, (300, 451, 3), dtype=np.uint8)
    f = images.fit_to_patches(rgb, 224, 16, policy)
    h, w = f.image.shape[:2]
    assert h % 16 == 0 and w % 16 == 0
    if policy == "keep":
        assert min(h, w) == 224 and w > h and abs(w / h - 451 / 300) < 16 / 224
    else:
        assert (h, w) == (224, 224)
    assert f.grid == (h // 16, w // 16) and str(f.grid[0] * f.grid[1]) in f.note


def test_pad_keeps_whole_picture_in_grey_frame():
    rgb = np.full((100, 200, 3), 255, np.uint8)
    f = images.fit_to_patches(rgb, 64, 16, "pad")
    assert (f.image[0, :, 0] == 128).all() and (f.image[32, :, 0] == 255).all()


def test_a_box_on_the_fitted_picture_is_found_in_the_original_by_hand():
    """170×100 at short side 64 with 16-px patches: resized to 109×64, trimmed to 96×64 (6 px off the left)."""
    from vitviz.core.images import fit_to_patches

    fitted = fit_to_patches(np.zeros((100, 170, 3), np.uint8), 64, 16, "keep")
    assert fitted.image.shape[:2] == (64, 96)
    # x: (16 + 6) · 170/109 = 34.3 → 34, (32 + 6) · 170/109 = 59.3 → 60; y: 16 · 100/64 = 25, 32 · 100/64 = 50
    assert fitted.box_in_source((16, 16, 32, 32)) == (34, 25, 60, 50)
    assert fitted.box_in_source((0, 0, 96, 64)) == (9, 0, 160, 100)  # the trimmed margins stay out


def test_a_picture_read_at_a_fraction_of_its_size_is_reported_at_its_own_size(tmp_path):
    """A 1411×1411 JPEG is decoded at 706×706 (draft mode) for a 640-px intake; the views say 1411×1411."""
    from vitviz.core import images

    path = tmp_path / "big.jpg"
    Image.effect_noise((1411, 1411), 40).convert("RGB").save(path, quality=90)
    rgb = images.load_rgb(path, images.INTAKE_SHORT_SIDE)
    assert rgb.shape[:2] == (706, 706) and images.source_size(rgb) == (1411, 1411)
    note = images.fit_to_patches(rgb, 224, 16, "crop").note
    assert note.startswith("1411×1411 picture, read at 706×706 → 224×224")
    assert images.source_size(rgb[:100]) == (706, 100)  # a part of it does not claim the file's size
    assert images.source_size(np.zeros((30, 40, 3), np.uint8)) == (40, 30)
    turned = tmp_path / "turned.jpg"  # EXIF orientation 6: the file is 1411 wide, the picture 1411 tall
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.effect_noise((1411, 900), 40).convert("RGB").save(turned, quality=90, exif=exif)
    rgb = images.load_rgb(turned, images.INTAKE_SHORT_SIDE)
    assert images.source_size(rgb) == (900, 1411) and rgb.shape[0] > rgb.shape[1]
    full = images.load_rgb(EXAMPLES / "cat.png")
    assert images.fit_to_patches(full, 224, 16).note.startswith(f"{full.shape[1]}×{full.shape[0]} picture → ")


def _with_chunk(png: bytes, kind: bytes, data: bytes, after_pixels: bool) -> bytes:
    """``png`` with one more chunk (its length, type, data and CRC), just after IHDR or just before IEND."""
    import struct
    import zlib

    chunk = struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    at = len(png) - 12 if after_pixels else 8 + 25  # IEND is the last 12 bytes; IHDR ends at byte 33
    return png[:at] + chunk + png[at:]


@pytest.mark.parametrize("kind, head, after", [(b"zTXt", b"Comment\0\0", False), (b"zTXt", b"Comment\0\0", True),
                                               (b"iCCP", b"icc\0\0", False), (b"iTXt", b"XML\0\1\0\0\0", False)])
def test_a_png_whose_text_or_colour_profile_unpacks_huge_is_refused_in_vitvizs_words(kind, head, after):
    """issue 68 item 16: a PNG with a zTXt or iCCP chunk of 2 kB that unpacks to 8 MiB said Pillow's "Decompressed
    data too large for PngImagePlugin.MAX_TEXT_CHUNK". Now a sentence for a student: what is wrong, what to do."""
    import zlib

    from PIL import PngImagePlugin

    plain = png_bytes(Image.new("RGB", (16, 16), (200, 30, 30)))
    bomb = zlib.compress(b"\0" * (8 * PngImagePlugin.MAX_TEXT_CHUNK), 9)
    assert len(bomb) < 10_000  # a small file
    hostile = _with_chunk(plain, kind, head + bomb, after)
    with pytest.raises(ValueError) as err:
        images.load_rgb(hostile)
    said = str(err.value)
    assert "MAX_TEXT_CHUNK" not in said and "Decompressed" not in said
    assert said.startswith("This PNG carries text or a colour profile that unpacks to more than 1 MiB") and \
        "Save the picture again without its metadata" in said
    # the same chunk at a size a photo's has is read as ever
    fine = _with_chunk(plain, kind, head + zlib.compress(b"a few words", 9), after)
    assert images.load_rgb(fine)[0, 0].tolist() == [200, 30, 30]


def test_a_value_error_pillow_raises_is_said_in_vitvizs_words_and_vitvizs_own_pass_through(monkeypatch):
    def layout(*args, **kwargs):
        raise ValueError("Unsupported BMP bitfields layout")

    monkeypatch.setattr(images, "_shrink", layout)
    with pytest.raises(ValueError, match="^The image file is damaged or laid out in a way vitviz cannot decode"):
        images.load_rgb(png_bytes(Image.new("RGB", (16, 16))))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="values are not numbers"):
        images.load_rgb(np.full((16, 16), np.nan))
    with pytest.raises(ValueError, match="^The file is empty"):
        images.load_rgb(b"")
