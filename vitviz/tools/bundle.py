"""A view as files: every figure as PNG and PDF, its numbers as JSON, and the parameters to make it again.

``make(view, params, rgb)`` computes one tab's figures and numbers from plain
parameters (the same names as the app's API inputs). ``write`` packs them into
a ZIP named after the view and its settings, with ``params.json`` and the
picture as it was used (``input.png``, lossless), and ``reproduce`` (the
command ``vitviz bundle params.json``) makes the same figures again from those
two files, pixel for pixel. Figures that matplotlib draws travel as vector
PDFs; the maps over pictures are pictures, so their PDFs hold the picture.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from vitviz.analyses import attention as analysis
from vitviz.models import budget
from vitviz.core import images
from vitviz.models import cache as models
from vitviz.core import patches
from vitviz.render import plotting
from vitviz.core import posembed
from vitviz.views import attention as attention_view
from vitviz.views import classify as classify_view
from vitviz.views import patches as patches_view
from vitviz.views import posembed as posembed_view
from vitviz.specs import registry

Made = tuple[dict[str, Image.Image], dict]
"""(figures by name, numbers): what one view makes."""


def _attention(p: dict, rgb: np.ndarray) -> Made:
    loaded = models.get_model(p["model"])
    a = analysis.analyse(loaded, rgb, budget.number(p["resolution"], "short side", 8, 512, integer=True))
    keep, alpha = budget.number(p["keep"], "share of mass", 0.01, 1), budget.number(p["alpha"], "opacity", 0, 1)
    heads = attention_view.render_heads(a, p["layer"], keep, p["cmap"], alpha)
    rollout = attention_view.render_rollout(a, p["fusion"], budget.number(p["discard"], "discard share", 0, 0.9),
                                            p["cmap"], alpha)
    numbers = {"model": loaded.spec.key, "notice": loaded.notice, "input": a.fitted.note,
               **attention_view.numbers(a, p["layer"], keep),
               "mean_attention_distance_px": [{"layer": layer, "head": head, "distance": d}
                                              for layer, head, d in attention_view.distance_table(a)]}
    figures = {"heads": heads.heads, "rollout": rollout, "box": heads.box, "crop": heads.crop,
               "distance": attention_view.render_distance(a)}
    return figures, numbers


def _patches(p: dict, rgb: np.ndarray) -> Made:
    fitted = patches_view.fit(rgb, budget.number(p["resolution"], "resolution", 8, 640, integer=True), int(p["patch"]),
                              p["policy"])
    v = patches_view.render(fitted, p["model_size"])
    h, w = fitted.image.shape[:2]
    size = registry.VIT_SIZES[p["model_size"]]
    numbers = {"input": fitted.note, **patches.token_counts(h, w, fitted.patch, size.heads, size.depth),
               "macs": patches.vit_macs(size, fitted.patch, h, w)}
    return {"grid": v.grid, "costs": v.cost_chart}, numbers


def _position_embeddings(p: dict, rgb: None) -> Made:
    grid, name, notice = posembed_view.grid_for(p["source"], p["rows"], p["cols"], p["dim"], p.get("step", 0))
    new = (budget.number(p["new_rows"], "rows to resample to", 1, 40, integer=True),
           budget.number(p["new_cols"], "columns to resample to", 1, 40, integer=True))
    v = posembed_view.render(grid, name, p["kind"], new, p["cmap"])
    r, c, d = grid.shape
    tile = posembed_view.tile_figure(grid, p["kind"], r // 2, c // 2, p["cmap"])
    numbers = {"name": name, "notice": notice, "grid": [r, c], "dim": d, "similarity": p["kind"],
               "neighbourhood": posembed.neighbourhood(grid)}
    return {"mosaic": v.mosaic, "tile": tile, "matrix": v.matrix, "similarity": v.sim, "resampled": v.resampled}, numbers


def _classify(p: dict, rgb: np.ndarray) -> Made:
    loaded = models.get_model(p["model"])
    v = classify_view.render(loaded, rgb)
    x = loaded.preprocess(rgb)
    numbers = {"model": loaded.spec.key, "notice": loaded.notice, "top5": v.top5, "input_size": list(x.shape[-2:]),
               "parameters": loaded.params}
    return {"maps": v.maps}, numbers


VIEWS: dict[str, tuple[Callable[[dict, np.ndarray | None], Made], bool]] = {
    "attention": (_attention, True), "patches": (_patches, True),
    "position_embeddings": (_position_embeddings, False), "classify": (_classify, True),
}
"""view name -> (what makes it, whether it takes a picture)."""


def make(view: str, params: dict, rgb: np.ndarray | None) -> Made:
    """Figures (each keeping a vector PDF when matplotlib drew it) and numbers of ``view`` for ``params``."""
    if view not in VIEWS:
        raise ValueError(f"Unknown view {view!r}; choose one of {sorted(VIEWS)}.")
    with plotting.keep_vectors():
        return VIEWS[view][0](params, rgb)


def name_for(view: str, params: dict) -> str:
    """A file name from the view and its settings, e.g. ``vitviz_attention_DINO-ViT-S-8_resolution224_layer12_keep0.6``."""
    parts = [f"{k}{v}" if isinstance(v, (int, float)) else str(v) for k, v in params.items()
             if k not in ("image", "alpha", "cmap")]
    return f"vitviz_{view}_" + "_".join(re.sub(r"[^A-Za-z0-9.]+", "-", p).strip("-") for p in parts)[:120]


def _pdf(image: Image.Image) -> bytes:
    if "pdf" in image.info:
        return image.info["pdf"]
    buf = io.BytesIO()
    image.save(buf, format="PDF", resolution=100.0)
    return buf.getvalue()


def write(view: str, params: dict, rgb: np.ndarray | None, folder: Path) -> Path:
    """The ZIP of ``view``: figures/*.png and *.pdf, numbers.json, params.json (and input.png). Returns its path."""
    figures, numbers = make(view, params, rgb)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name_for(view, params)}.zip"
    stored = {"view": view, **params} | ({"image": "input.png"} if rgb is not None else {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("params.json", json.dumps(stored, indent=2))
        z.writestr("numbers.json", json.dumps(numbers, indent=2, default=float))
        if rgb is not None:
            buf = io.BytesIO()
            Image.fromarray(rgb).save(buf, format="PNG")
            z.writestr("input.png", buf.getvalue())
        for name, image in figures.items():
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            z.writestr(f"figures/{name}.png", buf.getvalue())
            z.writestr(f"figures/{name}.pdf", _pdf(image))
    return path


def reproduce(params_file: Path, out: Path) -> list[Path]:
    """Make a bundle's figures again from its params.json (and input.png beside it); returns the PNGs written."""
    params = json.loads(Path(params_file).read_text())
    view = params.pop("view", None)
    picture = params.pop("image", None)
    rgb = images.load_rgb(Path(params_file).parent / picture, images.INTAKE_SHORT_SIDE) if picture else None
    if VIEWS.get(view, (None, False))[1] and rgb is None:
        raise ValueError(f"The {view} view needs its picture: input.png beside params.json.")
    figures, numbers = make(view, params, rgb)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, image in figures.items():
        image.save(out / f"{name}.png")
        (out / f"{name}.pdf").write_bytes(_pdf(image))
        written.append(out / f"{name}.png")
    (out / "numbers.json").write_text(json.dumps(numbers, indent=2, default=float))
    return written
