"""The windowed-attention view: Swin's windows and shifted windows on the picture, and what attention costs."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vitviz.core import windows
from vitviz.core.images import Fitted
from vitviz.render import plotting
from vitviz.specs import registry
from vitviz.specs import views as declared
from vitviz.views.shown import Shown, record

SIDES = list(range(64, 1025, 16))
"""Input sides (pixels) of the cost plot."""


def _window_panel(fitted: Fitted, labels: np.ndarray, row: int, col: int, size: tuple[int, int]) -> np.ndarray:
    """The picture with the window borders drawn and every key the query may not attend to darkened."""
    gh, gw = labels.shape
    keys = windows.allowed_keys(labels, row, col)
    dark = np.asarray(Image.fromarray((~keys).astype(np.uint8)).resize(size, Image.NEAREST)) > 0
    out = np.asarray(Image.fromarray(fitted.image).resize(size, Image.BILINEAR)).copy()
    out[dark] = (out[dark] * 0.3).astype(np.uint8)
    img = Image.fromarray(out)
    draw = ImageDraw.Draw(img)
    sx, sy = size[0] / gw, size[1] / gh
    for r in range(gh):  # a border wherever two neighbours are in different windows
        for c in range(gw):
            if c + 1 < gw and labels[r, c] != labels[r, c + 1]:
                draw.line([((c + 1) * sx, r * sy), ((c + 1) * sx, (r + 1) * sy)], fill=(255, 200, 0), width=3)
            if r + 1 < gh and labels[r, c] != labels[r + 1, c]:
                draw.line([(c * sx, (r + 1) * sy), ((c + 1) * sx, (r + 1) * sy)], fill=(255, 200, 0), width=3)
    draw.rectangle([col * sx, row * sy, (col + 1) * sx, (row + 1) * sy], outline=(0, 229, 255), width=3)
    return np.asarray(img)


def render_windows(fitted: Fitted, m: int, row: int, col: int) -> tuple[Image.Image, str]:
    """Two panels (block l: windows; block l + 1: windows shifted by M // 2) and a summary."""
    gh, gw = fitted.grid
    m = int(np.clip(m, 1, max(gh, gw)))
    row, col = int(np.clip(row, 0, gh - 1)), int(np.clip(col, 0, gw - 1))
    shift = m // 2
    size = plotting.panel_size(*fitted.image.shape[:2], 340)
    plain, shifted = windows.window_labels(gh, gw, m), windows.window_labels(gh, gw, m, shift)
    moved = any(windows.swin_window(side, m, shift)[1] for side in (gh, gw))
    n_plain = int(windows.allowed_keys(plain, row, col).sum())
    n_shift = int(windows.allowed_keys(shifted, row, col).sum())
    image = plotting.panels([_window_panel(fitted, plain, row, col, size), _window_panel(fitted, shifted, row, col, size)],
                            [f"block 1: {m}×{m} windows\nquery sees {n_plain} keys",
                             (f"block 2: shifted by {shift}" if moved else "block 2: no shift (window ≥ grid)")
                             + f"\nquery sees {n_shift} keys"],
                            f"Patch ({row}, {col}) as the query, {gh}×{gw} patches", cols=2, panel_px=340)
    text = (f"Global attention lets each of the {gh * gw} patches look at all {gh * gw}. Swin cuts the grid into "
            f"{m}×{m} windows (yellow borders) and a patch looks only inside its own: the query (cyan) sees "
            f"{n_plain} keys, the rest is dark. The next block shifts the windows by {shift} patches, so patches "
            "that sat on either side of a border now share a window and information crosses it. The groups are "
            "timm's: roll the grid back by the shift, pad to whole windows, then mask apart the patches the roll "
            "brought together from opposite edges. Along a side no longer than the window, the window shrinks to "
            "the grid and does not shift, as in Swin.")
    return image, text


def render_costs(patch: int, dim: int, m: int, side: int) -> Image.Image:
    """One layer's attention MACs against the input side: global (grows with N²) and windowed (with N)."""
    c = windows.cost_curve(SIDES, patch, dim, m)
    here = windows.cost_curve([max(side, patch)], patch, dim, m)
    with plotting.figure(figsize=(plotting.fig_width(7.0), 5.0)) as (fig, ax):
        ax.plot(c["side"], c["global"] / 1e9, color="#d55e00", linewidth=3, label="global: 4ND² + 2N²D")
        ax.plot(c["side"], c["windowed"] / 1e9, color="#0072b2", linewidth=3, label=f"{m}×{m} windows: 4ND² + 2NM²D")
        for key, colour in (("global", "#d55e00"), ("windowed", "#0072b2")):
            ax.plot(here["side"], here[key] / 1e9, "o", color=colour, markersize=10)
        ax.axvline(here["side"][0], color="grey", linestyle=":", linewidth=1.5)
        ax.set_xlabel(f"input side (pixels), patches of {patch}")
        ax.set_ylabel("GMACs per layer")
        ax.set_title(f"One attention layer, D = {dim}")
        ax.legend(frameon=False, loc="upper left")
        ax.grid(alpha=0.3)
        return plotting.to_image(fig)


@record(declared.WINDOWS, tab="patches", runs_model=False)
def show_windows(rgb: np.ndarray, values: dict, progress=None) -> Shown:
    """Swin's windows and shifted windows on the fitted picture, and one attention layer's cost against the side."""
    from vitviz.views.patches import fitted_for

    fitted, s = fitted_for(rgb, values)
    gh, gw = fitted.grid
    m = s.within("window", max(gh, gw), f"The picture is {gh}×{gw} patches.", lo=1)
    row = s.within("row", gh - 1, f"The picture is {gh}×{gw} patches.")
    col = s.within("col", gw - 1, f"The picture is {gh}×{gw} patches.")
    image, text = render_windows(fitted, m, row, col)
    dim = registry.VIT_SIZES[values["model_size"]].dim
    cost = render_costs(values["patch"], dim, m, min(fitted.image.shape[:2]))
    return Shown({"windows": image, "cost": cost}, {"text": text}, {"grid": [gh, gw], "window": m}, s)
