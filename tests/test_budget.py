"""Request budgets: refused before the work with a message that says what to change; intake keeps only what it needs."""

from __future__ import annotations

import io
import logging
import math

import numpy as np
import pytest
from conftest import module_of
from PIL import Image

from vitviz.core import owned
from vitviz.analyses import attention as analysis
from vitviz.analyses.attention import attention_bytes
from vitviz.core import images
from vitviz.models import budget, loaders
from vitviz.models import cache as models
from vitviz.specs import registry
from vitviz.specs.state import Field
from vitviz.specs.views import FIT_POLICIES
from vitviz.views import patches as patches_view

S8 = registry.REGISTRY["DINO ViT-S/8"]


def test_attention_bytes_by_hand():
    """DINO ViT-S/8 at 224 px, 785 tokens: a fused forward (24 float32 (T, D) tensors at its peak, no (H, T, T)
    matrix), every layer's q and k in float32 while they are packed (twice: the model's and the packed copy), and the
    class token's rows (12 layers × 6 heads × 784 patches)."""
    t, n = 785, 784
    keys = 12 * 2 * t * 384 * 4
    expected = 24 * t * 384 * 4 + 2 * keys + 12 * 6 * n * 4
    assert attention_bytes(S8, t) == expected
    assert budget.eager_bytes(S8, t) == 24 * t * 384 * 4 + 2 * 6 * t * t * 4  # a view that needs the matrices


def test_token_limits_follow_the_heads():
    s8 = budget.max_tokens(S8, attention_bytes)
    b8 = budget.max_tokens(registry.REGISTRY["DINO ViT-B/8"], attention_bytes)
    assert s8 >= 64 * 64 + 1  # a 512-pixel square with 8-pixel patches fits S/8
    assert b8 < s8  # twice the heads, fewer tokens
    assert attention_bytes(S8, s8) <= budget.REQUEST_BYTES < attention_bytes(S8, s8 + 1)


def test_the_ten_to_one_picture_at_the_largest_side_is_refused_at_once(dino_s8_dir, caplog):
    """512-pixel short side on a 10:1 picture: 64×640 patches. Refused from the shapes, before any forward."""
    loaded = loaders.load_hf(dino_s8_dir, spec=S8)
    calls = []
    module_of(loaded).register_forward_pre_hook(lambda *a: calls.append(1))
    rgb = np.zeros((60, 600, 3), np.uint8)
    with caplog.at_level(logging.INFO, logger="vitviz"), pytest.raises(ValueError) as err:
        analysis.analyse(loaded, rgb, 512)
    assert calls == []  # refused from the shapes: no forward ran
    msg = str(err.value)
    assert "64×640 = 40,960 patches" in msg and "40,961 tokens" in msg and "smaller short side" in msg
    assert f"{budget.max_tokens(S8, attention_bytes):,} tokens" in msg
    assert "refused DINO ViT-S/8: 64×640 patches (40961 tokens" in caplog.text


def test_the_token_limit_is_the_largest_count_whose_estimate_fits_and_takes_the_largest_square():
    limit = budget.max_tokens(S8, attention_bytes)
    assert attention_bytes(S8, limit) <= budget.REQUEST_BYTES < attention_bytes(S8, limit + 1)
    assert limit >= 64 * 64 + 1  # a square at the largest short side (512 px) fits
    budget.check_tokens(S8, (64, 64), 512, attention_bytes)
    over = (limit // 64 + 1, 64)  # one row of patches more than the limit allows
    with pytest.raises(ValueError, match=f"The limit for this model is {limit:,} tokens"):
        budget.check_tokens(S8, over, None, attention_bytes)


def test_patch_grid_budget():
    rgb = np.zeros((100, 1000, 3), np.uint8)
    with pytest.raises(ValueError, match="160×1600 = 256,000 patches"):
        patches_view.fit(rgb, 640, 4, "keep")
    assert patches_view.fit(rgb, 640, 4, "crop").grid == (160, 160)


@pytest.mark.parametrize("policy", list(FIT_POLICIES))
def test_fitted_shape_predicts_fit_to_patches(policy):
    rng = np.random.default_rng(0)
    for _ in range(25):
        h, w = (int(v) for v in rng.integers(20, 400, 2))
        if max(h, w) / min(h, w) > images.MAX_ASPECT:
            continue
        size, patch = int(rng.integers(16, 300)), int(rng.choice([4, 8, 14, 16, 32]))
        if size < patch:
            continue
        fitted = images.fit_to_patches(np.zeros((h, w, 3), np.uint8), size, patch, policy)
        assert images.fitted_shape(h, w, size, patch, policy) == fitted.image.shape[:2]


LAYER = Field("layer", "int", 4, "layer", lo=1, hi=12)
OPACITY = Field("alpha", "float", 0.5, "opacity", lo=0, hi=1)


@pytest.mark.parametrize("value", [float("nan"), math.inf, -math.inf, "abc", None, True, [3], {"v": 3}, 1.5, 13, 0])
def test_numbers_from_outside_are_checked(value):
    with pytest.raises(ValueError, match=r"`layer` \(layer\) must be a whole number from 1 to 12; got"):
        LAYER.check(value)


def test_numbers_that_fit_pass_through():
    assert LAYER.check("7") == 7 and isinstance(LAYER.check(7.0), int)
    assert OPACITY.check(0.25) == 0.25


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def test_intake_shrinks_a_huge_png_while_decoding():
    """6320×6320 (under the 40 MP limit) comes out no bigger than twice the largest short side used."""
    big = Image.new("RGB", (6320, 6320), (40, 90, 200))
    big.paste((250, 200, 0), (1000, 1000, 5000, 3000))
    rgb = images.load_rgb(_png(big), images.INTAKE_SHORT_SIDE)
    assert rgb.shape == (703, 703, 3)  # reduced by 9 (6320 // 640), the last partial block kept
    assert tuple(rgb[10, 10]) == (40, 90, 200) and tuple(rgb[200, 300]) == (250, 200, 0)


def test_shrunk_intake_fits_like_the_full_picture():
    """The fitted 224-pixel input from a shrunk decode differs from the full decode by rounding only."""
    y, x = np.mgrid[0:1800, 0:2400]
    smooth = np.stack([x / 2400 * 255, y / 1800 * 255, (x + y) / 4200 * 255], -1).astype(np.uint8)
    for fmt in ("PNG", "JPEG"):
        buf = io.BytesIO()
        Image.fromarray(smooth).save(buf, format=fmt, quality=95)
        full = images.fit_to_patches(images.load_rgb(buf.getvalue()), 224, 16, "crop").image
        small_rgb = images.load_rgb(buf.getvalue(), 640)
        assert 640 <= min(small_rgb.shape[:2]) < 1280
        small = images.fit_to_patches(small_rgb, 224, 16, "crop").image
        assert np.abs(full.astype(int) - small.astype(int)).mean() < 1.5


def test_shrunk_intake_keeps_exif_orientation_and_palette_colours():
    img = Image.new("RGB", (1600, 1300), (255, 0, 0))
    img.paste((0, 0, 255), (0, 0, 800, 1300))  # left half blue
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise on display
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif, quality=95)
    rgb = images.load_rgb(buf.getvalue(), 640)
    assert rgb.shape[0] > rgb.shape[1]  # portrait after orientation
    assert rgb[5, rgb.shape[1] // 2, 2] > 200  # blue on top after the turn
    pal = img.convert("P", palette=Image.Palette.ADAPTIVE, colors=4)
    rgb = images.load_rgb(_png(pal), 640)
    assert rgb.shape == (650, 800, 3) and rgb[10, 10, 2] > 200 and rgb[10, 790, 0] > 200


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_pixels_are_refused_not_shown_black(bad, tmp_path):
    a = np.linspace(0, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
    a[3, 4] = bad
    with pytest.raises(ValueError, match="3 of this image's 3,072 values are not numbers"):
        images.load_rgb(np.repeat(a[..., None], 3, 2))
    path = tmp_path / "float.tif"
    Image.fromarray(a, mode="F").save(path)
    with pytest.raises(ValueError, match="not numbers"):
        images.load_rgb(path)


def test_failed_loads_are_remembered_for_a_while(monkeypatch, caplog):
    calls = []

    def failing(source, local_only=False, spec=None):
        calls.append(source)
        raise OSError("no weights here")

    monkeypatch.setattr(loaders, "load_hf", failing)
    owned.reset("models")
    with caplog.at_level(logging.INFO, logger="vitviz"):
        for _ in range(5):  # a slider dragged across five values
            assert "Showing" in models.get_model("DINO ViT-S/16").notice
    assert len(calls) == 1 and caplog.text.count("cannot load DINO ViT-S/16") == 1
    monkeypatch.setattr(models, "FAILURE_TTL", 0.0)
    models.get_model("DINO ViT-S/16")
    assert len(calls) == 2  # after the time is up it is tried again
    owned.reset("models")
