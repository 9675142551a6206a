"""Image intake: whatever a student uploads becomes a clean RGB array.

``load_rgb`` decodes (EXIF orientation, odd modes, animations, transparency)
and rejects what cannot or should not be decoded with a ``ValueError`` whose
message is fit to show a student. ``fit_to_patches`` then applies one explicit
policy that makes the image a whole number of patches, and says what it did.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from vitviz.core import digest
from vitviz.specs.views import FIT_POLICIES

MAX_PIXELS = 40_000_000
"""Pixel budget: larger images are refused from their header, before decoding."""
MAX_ASPECT = 10.0
"""Refuse images more than this many times wider than tall (or the reverse)."""
MIN_SIDE = 8
"""Nothing smaller than the smallest patch size we offer."""
INTAKE_SHORT_SIDE = 640
"""The largest short side any view asks for; the app's intake shrinks uploads to it while decoding."""

ImageSource = Union[str, Path, bytes, Image.Image, np.ndarray]


class Refused(ValueError):
    """A picture refused in vitviz's words (any other ValueError met while decoding is Pillow's, and is said anew:
    :func:`_in_our_words`)."""


def _in_our_words(err: ValueError) -> str:
    """What a ValueError Pillow raised while decoding means, for a student: a PNG text or colour-profile chunk that
    unpacks past Pillow's bound (``PngImagePlugin.MAX_TEXT_CHUNK``, 1 MiB; a photo's are a few kB: a decompression
    bomb), else a file Pillow cannot decode."""
    from PIL import PngImagePlugin

    text = str(err)
    if "MAX_TEXT_CHUNK" in text or "text chunks" in text or "Decompressed data too large" in text:
        most = PngImagePlugin.MAX_TEXT_CHUNK / 2**20
        return (f"This PNG carries text or a colour profile that unpacks to more than {most:g} MiB (a photo's takes a "
                "few kB), so vitviz does not open it. Save the picture again without its metadata, or as a JPEG, "
                "and upload it.")
    return ("The image file is damaged or laid out in a way vitviz cannot decode. Please save it again as a PNG or "
            "JPEG and upload it.")


class Decoded(np.ndarray):
    """An (H, W, 3) uint8 picture as :func:`load_rgb` decoded it, remembering the size of the picture in the file
    (``source``: (width, height), after EXIF rotation): a large upload is read at a fraction of its size, and a view
    still says how large the picture was. An array made from this one with another shape (a crop, a resize) does
    not claim that size (:func:`source_size`)."""

    source: tuple[int, int] | None = None
    decoded: tuple[int, int] | None = None

    def __array_finalize__(self, obj) -> None:
        self.source = getattr(obj, "source", None)
        self.decoded = getattr(obj, "decoded", None)


def source_size(rgb: np.ndarray) -> tuple[int, int]:
    """(width, height) of the picture ``rgb`` was decoded from: its file's size for an array :func:`load_rgb` made
    (and only while it keeps that shape), else the array's own."""
    if getattr(rgb, "source", None) and getattr(rgb, "decoded", None) == tuple(rgb.shape[:2]):
        return rgb.source
    return int(rgb.shape[1]), int(rgb.shape[0])

def _open(src: ImageSource) -> Image.Image:
    if isinstance(src, Image.Image):
        return src
    if isinstance(src, np.ndarray):
        arr = src
        if arr.dtype != np.uint8:
            arr = _to_uint8(arr.astype(np.float64))
        return Image.fromarray(arr)
    if isinstance(src, bytes):
        if not src:
            raise Refused("The file is empty.")
        return Image.open(io.BytesIO(src))
    path = Path(src)
    if not path.is_file():
        raise Refused("The picture's file is missing (it may have been removed); choose it again.")
    if path.stat().st_size == 0:
        raise Refused("The file is empty.")
    return Image.open(path)


def _to_uint8(a: np.ndarray) -> np.ndarray:
    """Stretch any numeric array to 0..255; a constant array keeps its byte value (else black).

    Raises ``ValueError`` when some values are not numbers (NaN or infinity): there is no
    honest way to show them, and stretching around them would paint the picture black.
    """
    a = a.astype(np.float64)
    bad = int(a.size - np.count_nonzero(np.isfinite(a)))
    if bad:
        raise Refused(f"{bad:,} of this image's {a.size:,} values are not numbers (NaN or infinity), so it "
                         "cannot be shown. Please save it with ordinary pixel values (for example as an 8-bit PNG).")
    lo, hi = float(a.min()), float(a.max())
    span = hi - lo
    if span <= 0:  # zero range: keep the value if it already is a byte, else black
        return np.full(a.shape, int(np.clip(lo, 0, 255)) if 0 <= lo <= 255 else 0, np.uint8)
    return ((a - lo) / span * 255.0).round().astype(np.uint8)


def _to_rgb(im: Image.Image) -> np.ndarray:
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        return np.repeat(_to_uint8(np.asarray(im))[..., None], 3, axis=2)
    if mode in ("RGBA", "LA", "PA", "La", "RGBa") or (mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))
    return np.asarray(im.convert("RGB"))


def _shrink(im: Image.Image, short_side: int | None) -> Image.Image:
    """Decode ``im`` no larger than needed: its short side stays at least ``short_side`` (None: full size).

    JPEGs are decoded at 1/2, 1/4 or 1/8 scale when that is enough (draft mode);
    anything else is decoded and then box-reduced by a whole factor before the
    conversions that would copy it at full size.
    """
    w, h = im.size
    factor = min(w, h) // short_side if short_side else 1
    if factor >= 2 and im.format == "JPEG":
        im.draft(None, (-(-w // factor), -(-h // factor)))
    im.load()
    factor = min(im.size) // short_side if short_side else 1
    if factor < 2:
        return im
    if im.mode in ("P", "PA"):  # averaging palette indices means nothing: convert first
        im = im.convert("RGBA" if im.mode == "PA" or "transparency" in im.info else "RGB")
    elif im.mode == "1":
        im = im.convert("L")
    elif im.mode.startswith("I;16"):
        im = im.convert("I")  # keeps all 16 bits; reduce has no 16-bit mode
    try:
        return im.reduce(factor)
    except ValueError:  # a mode reduce does not support
        return im.convert("RGB").reduce(factor)


def fingerprint(src: ImageSource) -> str:
    """The first 12 hex digits of the SHA-256 of the file's bytes: names an upload in a link without the upload."""
    if isinstance(src, (bytes, bytearray)):
        data = bytes(src)
    elif isinstance(src, (Image.Image, np.ndarray)):
        data = src.tobytes()
    else:
        data = Path(src).read_bytes()
    return digest.content(data, size=12)


def load_rgb(src: ImageSource, short_side: int | None = None) -> np.ndarray:
    """Decode ``src`` into an (H, W, 3) uint8 RGB array.

    Applies EXIF orientation, takes the first frame of an animation, composites
    transparency over white, and maps 16-bit / float images onto 0..255. With
    ``short_side``, a larger picture is shrunk while decoding by a whole factor
    (its short side stays at least ``short_side``), so a huge upload never
    exists as a full-size array.

    Raises:
        ValueError: with a short message for a student when the input is not a
            usable image (not an image, empty, truncated, too large, too small,
            absurd aspect ratio).
    """
    if src is None:
        raise ValueError("Please choose an image first: upload one, use the webcam, or click an example.")
    try:
        with warnings.catch_warnings():  # our own pixel budget (below) is stricter than PIL's warning
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = _open(src)
        w, h = im.size
        if w * h > MAX_PIXELS:
            raise Refused(
                f"This image is {w}×{h} = {w * h / 1e6:.0f} megapixels; the limit is {MAX_PIXELS / 1e6:.0f}. "
                "Please use a smaller picture."
            )
        if getattr(im, "n_frames", 1) > 1:
            im.seek(0)
        turned = im.getexif().get(0x0112, 1) in (5, 6, 7, 8) if hasattr(im, "getexif") else False
        im = _shrink(im, short_side)
        im = ImageOps.exif_transpose(im)
        rgb = _to_rgb(im)
    except Refused:
        raise
    except ValueError as err:  # Pillow's own words ("Decompressed data too large for PngImagePlugin.MAX_TEXT_CHUNK")
        raise Refused(_in_our_words(err)) from err
    except Image.DecompressionBombError as err:
        raise ValueError("This image is too large to open safely. Please use a smaller picture.") from err
    except UnidentifiedImageError as err:
        raise ValueError("That file is not an image vitviz can read: use a PNG, JPEG, GIF or WebP picture.") from err
    except (OSError, SyntaxError, EOFError) as err:
        raise ValueError("The image file is damaged or incomplete. Please try another file.") from err
    check_shape(rgb.shape[0], rgb.shape[1])
    out = np.ascontiguousarray(rgb).view(Decoded)
    out.source = (h, w) if turned else (w, h)
    out.decoded = tuple(out.shape[:2])
    return out


def decode_bytes(src: ImageSource, short_side: int | None = None) -> int:
    """Estimated peak bytes of :func:`load_rgb` on ``src``, read from the file's header (nothing is decoded).

    PIL holds a decoded picture at up to 4 bytes per pixel (RGB is stored as RGBX), and one conversion of it may be
    alive at once: 8 bytes per decoded pixel. A JPEG that draft mode decodes at 1/2, 1/4 or 1/8 scale counts at that
    scale. A header that cannot be read counts as 1 MiB (decoding will refuse it at once).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = _open(src)
    except Exception:  # noqa: BLE001 - load_rgb says what is wrong with it
        return 2**20
    w, h = im.size
    if im is not src:
        im.close()
    factor = min(w, h) // short_side if short_side else 1
    if im.format == "JPEG" and factor >= 2:
        scale = 8 if factor >= 8 else 4 if factor >= 4 else 2
        w, h = -(-w // scale), -(-h // scale)
    return max(8 * w * h, 2**20)


def check_shape(h: int, w: int, patch: int = MIN_SIDE) -> None:
    """Raise ``ValueError`` for an image smaller than one patch or with an absurd aspect ratio."""
    if h < patch or w < patch:
        raise ValueError(f"This image is only {w}×{h} pixels: smaller than one {patch}×{patch} patch.")
    if max(h, w) / min(h, w) > MAX_ASPECT:
        raise ValueError(
            f"This image is {w}×{h}: more than {MAX_ASPECT:.0f} times longer one way than the other. "
            "Please crop it to a more ordinary shape."
        )


@dataclass(frozen=True)
class Fitted:
    """An image made to fit a ViT.

    Attributes:
        image: (H, W, 3) uint8 with H and W multiples of ``patch``.
        patch: patch size P.
        policy: key of :data:`vitviz.specs.views.FIT_POLICIES`.
        note: one sentence saying what was done, for the UI.
    """

    image: np.ndarray
    patch: int
    policy: str
    note: str
    placement: tuple[float, float, float, float, int, int] | None = None
    """Where ``image`` came from in the array it was fitted from: (x scale, y scale, left, top, width, height): a
    pixel x of ``image`` is (x + left) · x scale of that array, which is width × height (None: not recorded)."""

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, cols) of the patch grid: (H / P, W / P)."""
        return self.image.shape[0] // self.patch, self.image.shape[1] // self.patch

    def box_in_source(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """A (left, top, right, bottom) box on ``image`` in the pixels of the array it was fitted from (rounded
        outward to whole pixels, clipped to that array)."""
        if self.placement is None:
            raise ValueError("This picture's fitting did not record where it came from.")
        sx, sy, left, top, w0, h0 = self.placement
        x0, y0, x1, y1 = box
        return (max(0, math.floor((x0 + left) * sx)), max(0, math.floor((y0 + top) * sy)),
                min(w0, math.ceil((x1 + left) * sx)), min(h0, math.ceil((y1 + top) * sy)))


def _short_side_to(h0: int, w0: int, side: int) -> tuple[int, int]:
    """(h, w) of an (h0, w0) picture resized so its short side is ``side`` (aspect kept): "crop" and "keep"."""
    s = side / min(h0, w0)
    return max(side, round(h0 * s)), max(side, round(w0 * s))


def fitted_shape(h0: int, w0: int, size: int, patch: int, policy: str = "crop") -> tuple[int, int]:
    """(H, W) that :func:`fit_to_patches` gives an (h0, w0) image, computed without touching pixels.

    Lets a caller check a budget before any resizing; both are multiples of ``patch``.
    """
    if policy not in FIT_POLICIES:
        raise ValueError(f"Unknown fitting policy {policy!r}; choose one of {sorted(FIT_POLICIES)}.")
    if size < patch:
        raise ValueError(f"The resolution {size} is smaller than one {patch}-pixel patch.")
    side = size // patch * patch
    if policy != "keep":
        return side, side
    rh, rw = _short_side_to(h0, w0, side)
    return rh // patch * patch, rw // patch * patch


def _resize(rgb: np.ndarray, w: int, h: int) -> np.ndarray:
    return np.asarray(Image.fromarray(rgb).resize((max(1, w), max(1, h)), Image.BICUBIC, reducing_gap=None))


def fit_to_patches(rgb: np.ndarray, size: int, patch: int, policy: str = "crop") -> Fitted:
    """Resize / crop / pad ``rgb`` so both sides are multiples of ``patch``.

    Args:
        rgb: (H0, W0, 3) uint8.
        size: target side in pixels (rounded down to a multiple of ``patch``);
            for ``keep`` it is the short side.
        patch: patch size P.
        policy: one of :data:`vitviz.specs.views.FIT_POLICIES`.

    Returns:
        :class:`Fitted` with image (H, W, 3), H % P == W % P == 0.
    """
    h0, w0 = rgb.shape[:2]
    check_shape(h0, w0, 1)
    hh, ww = fitted_shape(h0, w0, size, patch, policy)
    sw, sh = source_size(rgb)
    side = size // patch * patch
    if policy == "stretch":
        out = _resize(rgb, side, side)
    elif policy == "crop":
        rh, rw = _short_side_to(h0, w0, side)
        r = _resize(rgb, rw, rh)
        top, left = (r.shape[0] - side) // 2, (r.shape[1] - side) // 2
        out = r[top:top + side, left:left + side]
    elif policy == "pad":
        s = side / max(h0, w0)
        r = _resize(rgb, max(1, round(w0 * s)), max(1, round(h0 * s)))
        out = np.full((side, side, 3), 128, np.uint8)
        top, left = (side - r.shape[0]) // 2, (side - r.shape[1]) // 2
        out[top:top + r.shape[0], left:left + r.shape[1]] = r
    else:  # keep
        rh, rw = _short_side_to(h0, w0, side)
        r = _resize(rgb, rw, rh)
        top, left = (r.shape[0] - hh) // 2, (r.shape[1] - ww) // 2
        out = r[top:top + hh, left:left + ww]
    out = np.ascontiguousarray(out)
    gh, gw = out.shape[0] // patch, out.shape[1] // patch
    read = "" if (sw, sh) == (w0, h0) else f", read at {w0}×{h0}"
    note = (f"{sw}×{sh} picture{read} → {out.shape[1]}×{out.shape[0]} ({FIT_POLICIES[policy]}): "
            f"{gh}×{gw} = {gh * gw} patches of {patch}×{patch}.")
    placement = None
    if policy in ("keep", "crop"):
        placement = (w0 / rw, h0 / rh, float(left), float(top), w0, h0)
    return Fitted(out, patch, policy, note, placement)
