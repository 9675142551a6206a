"""A view as files: every figure as PNG and PDF, its numbers as JSON, and the settings to make it again.

``write(view, values, rgb)`` shows one view through the same function the page and the API use
(:func:`vitviz.views.show`), and packs what it shows into a ZIP named after the view and its settings:
``figures/*.png`` and ``*.pdf``, ``numbers.json`` (with the model shown, any notice, and every setting that was
not used as asked, with the reason), ``params.json`` (the declared settings as *used*) and the picture as it was
used (``input.png``, lossless). ``reproduce`` (the command ``vitviz bundle params.json``) makes the same figures
again from those two files, pixel for pixel. Figures that matplotlib draws travel as vector PDFs; the maps over
pictures are pictures, so their PDFs hold the picture.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

from vitviz.core import images
from vitviz.render import plotting
from vitviz.views import RECORDS, VIEWS, Shown, plain, show


def bundled() -> tuple[str, ...]:
    """The views with a 'Download this view' button, from their records (every view can be bundled from Python)."""
    return tuple(name for name, r in RECORDS.items() if r.bundle)


def make(view: str, values: dict, rgb: np.ndarray | None) -> Shown:
    """What ``view`` shows for ``values`` (checked against its declaration here), figures keeping vector PDFs."""
    if view not in VIEWS:
        raise ValueError(f"Unknown view {view!r}; choose one of {sorted(VIEWS)}.")
    checked = VIEWS[view].check(values)
    if any(f.kind == "image" for f in VIEWS[view].fields) and rgb is None:
        raise ValueError(f"The {view} view needs its picture.")
    with plotting.keep_vectors():
        return show(view, rgb, checked)


def name_for(view: str, params: dict) -> str:
    """A file name from the view and its settings, e.g. ``vitviz_attention_DINO-ViT-S-8_resolution224_layer12_keep0.6``."""
    def word(k, v):
        if k == "head" and v == -1:
            return "headmean"
        if isinstance(v, (list, tuple)):
            return f"{k}{'-'.join(map(str, v))}"
        return f"{k}{v}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)

    parts = [word(k, v) for k, v in params.items() if k not in ("image", "alpha", "cmap") and v is not None]
    return f"vitviz_{view}_" + "_".join(re.sub(r"[^A-Za-z0-9.]+", "-", p).strip("-") for p in parts)[:120]


def _pdf(image: Image.Image) -> bytes:
    if "pdf" in image.info:
        return image.info["pdf"]
    buf = io.BytesIO()
    image.save(buf, format="PDF", resolution=100.0)
    return buf.getvalue()


def numbers_of(shown: Shown) -> dict:
    """numbers.json: the view's numbers, the model shown, the notice, and the settings not used as asked."""
    extra = {"model": shown.model, "notice": shown.note(),
             "adjusted": shown.settled.adjusted() if shown.settled else {}}
    return plain({**shown.numbers, **{k: v for k, v in extra.items() if k not in shown.numbers or v}})


def write(view: str, values: dict, rgb: np.ndarray | None, folder: Path) -> Path:
    """The ZIP of ``view``: figures/*.png and *.pdf, numbers.json, params.json (and input.png). Returns its path."""
    shown = make(view, values, rgb)
    used = plain(shown.settled.values if shown.settled else values)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name_for(view, used)}.zip"
    stored = {"view": view, **used} | ({"image": "input.png"} if rgb is not None else {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("params.json", json.dumps(stored, indent=2, allow_nan=False))
        z.writestr("numbers.json", json.dumps(numbers_of(shown), indent=2, allow_nan=False))
        if rgb is not None:
            buf = io.BytesIO()
            Image.fromarray(rgb).save(buf, format="PNG")
            z.writestr("input.png", buf.getvalue())
        for name, image in shown.figures.items():
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            z.writestr(f"figures/{name}.png", buf.getvalue())
            z.writestr(f"figures/{name}.pdf", _pdf(image))
    return path


def reproduce(params_file: Path, out: Path) -> list[Path]:
    """Make a bundle's figures again from its params.json (and input.png beside it); returns the PNGs written."""
    try:
        params = json.loads(Path(params_file).read_text())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{params_file} is not a vitviz bundle's params.json (it is not JSON text): give the "
                         "params.json of a downloaded view, or the ZIP itself.") from None
    if not isinstance(params, dict):
        raise ValueError(f"{params_file} is not a vitviz bundle's params.json (no settings in it).")
    view = params.pop("view", None)
    picture = params.pop("image", None)
    if view not in VIEWS:
        raise ValueError(f"{params_file} names no view vitviz knows ({view!r}); it is not a vitviz bundle's params.json.")
    rgb = None
    if picture:
        path = Path(params_file).parent / str(picture)
        if not path.is_file():
            raise ValueError(f"{params_file} names its picture {picture}, which is not beside it ({path}): put it "
                             "back, or give the bundle's ZIP.")
        rgb = images.load_rgb(path, images.INTAKE_SHORT_SIDE)
    shown = make(view, params, rgb)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, image in shown.figures.items():
        image.save(out / f"{name}.png")
        (out / f"{name}.pdf").write_bytes(_pdf(image))
        written.append(out / f"{name}.png")
    (out / "numbers.json").write_text(json.dumps(numbers_of(shown), indent=2, allow_nan=False))
    return written
