"""Procedural scenes: one shape on a textured, cluttered background.

The embedded offline model (``vitviz.embedded.train``) learns from these scenes, and the
example gallery shows a few of them, so the offline model is demonstrated on
the kind of picture it knows. Every scene comes with its class and the
object's pixel mask, which is what lets us *measure* whether attention lands
on the object.

Everything is numpy and seeded: ``make_scene(seed)`` always returns the same
picture.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLASSES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross", "ring")
"""The K = 6 shape classes, in label order."""

SCENE_SIZE = 64
"""Default side length of a generated scene in pixels."""


@dataclass(frozen=True)
class Scene:
    """One generated picture.

    Attributes:
        image: (H, W, 3) uint8 RGB.
        label: index into :data:`CLASSES`.
        mask: (H, W) bool, True on the object's pixels.
    """

    image: np.ndarray
    label: int
    mask: np.ndarray

    @property
    def name(self) -> str:
        return CLASSES[self.label]


def _shape_mask(kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Mask of a unit-size shape in rotated, scaled coordinates (u, v) in [-1, 1]."""
    r = np.hypot(u, v)
    if kind == "circle":
        return r <= 1.0
    if kind == "ring":
        return (r <= 1.0) & (r >= 0.55)
    if kind == "square":
        return (np.abs(u) <= 0.8) & (np.abs(v) <= 0.8)
    if kind == "triangle":
        # Equilateral triangle, circumradius 1.15, one vertex up (v grows downwards).
        a, b = u / 1.15, v / 1.15
        return (b <= 0.5) & (0.866 * a - 0.5 * b <= 0.5) & (-0.866 * a - 0.5 * b <= 0.5)
    if kind == "cross":
        return ((np.abs(u) <= 0.3) & (np.abs(v) <= 1.0)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 1.0))
    if kind == "star":
        theta = np.arctan2(v, u)
        # Five-pointed star: radius oscillates between inner and outer.
        edge = 0.45 + 0.55 * (0.5 + 0.5 * np.cos(5 * theta)) ** 2
        return r <= edge
    raise ValueError(f"unknown shape {kind!r}")


def _background(rng: np.random.Generator, size: int, clutter: float = 1.0) -> np.ndarray:
    """Textured background: two blended colours under a random low-frequency pattern, (H, W, 3) float.

    ``clutter`` in [0, 1] scales the texture's contrast (0 = one flat colour plus noise).
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    c1 = rng.uniform(0.1, 0.9, size=3)
    c2 = np.clip(c1 + rng.uniform(-0.25, 0.25, size=3), 0, 1)  # textured, but quieter than the object
    pattern = np.zeros((size, size), np.float32)
    for _ in range(3):
        fx, fy = rng.uniform(-6, 6, size=2)
        pattern += np.sin(2 * np.pi * (fx * xx + fy * yy) + rng.uniform(0, 2 * np.pi))
    if rng.random() < 0.4:  # stripes or checks now and then
        period = rng.integers(4, 12)
        pattern += 1.0 * (((np.arange(size)[:, None] // period) + (np.arange(size)[None, :] // period)) % 2)
    lo, hi = float(pattern.min()), float(pattern.max())
    t = (pattern - lo) / (hi - lo if hi > lo else 1.0)
    c2 = c1 + clutter * (c2 - c1)
    bg = c1[None, None, :] * (1 - t[..., None]) + c2[None, None, :] * t[..., None]
    bg += rng.normal(0.0, 0.04, size=bg.shape)
    return bg


def _clutter(rng: np.random.Generator, img: np.ndarray, clutter: float = 1.0) -> None:
    """Draw distractors in place: short strokes and small blobs (never a whole shape class).

    ``clutter`` in [0, 1] is the share of the drawn distractors that are painted (the random
    numbers are drawn either way, so the rest of the scene does not depend on it).
    """
    size = img.shape[0]
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    count = int(rng.integers(3, 8))
    for i in range(count):
        colour = rng.uniform(0, 1, 3)
        if rng.random() < 0.5:  # stroke
            x0, y0 = rng.uniform(0, size, 2)
            ang = rng.uniform(0, np.pi)
            length = rng.uniform(4, size * 0.35)
            dx, dy = np.cos(ang), np.sin(ang)
            t = np.clip((xx - x0) * dx + (yy - y0) * dy, 0, length)
            d = np.hypot(xx - (x0 + t * dx), yy - (y0 + t * dy))
            m = d <= rng.uniform(0.5, 1.3)
        else:  # small blob
            cx, cy = rng.uniform(0, size, 2)
            m = np.hypot(xx - cx, yy - cy) <= rng.uniform(1.0, 2.5)
        if i < round(clutter * count):
            img[m] = colour


def make_scene(seed: int, size: int = SCENE_SIZE, label: int | None = None, clutter: float = 1.0) -> Scene:
    """Draw scene number ``seed``.

    Args:
        seed: any integer; the same seed gives the same scene.
        size: side length H = W in pixels.
        label: force a class (index into :data:`CLASSES`); random when None.
        clutter: how busy the background is, from 0 (flat colour, no distractors) to 1 (the default;
            what the model is measured on). Training starts on calmer scenes (a curriculum).

    Returns:
        A :class:`Scene` with image (size, size, 3) uint8 and mask (size, size) bool.
    """
    rng = np.random.default_rng(seed)
    k = int(rng.integers(len(CLASSES))) if label is None else int(label)
    img = _background(rng, size, clutter)
    _clutter(rng, img, clutter)

    radius = rng.uniform(0.22, 0.34) * size
    cx, cy = rng.uniform(radius, size - radius, 2)
    ang = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    dx, dy = (xx - cx) / radius, (yy - cy) / radius
    u = np.cos(ang) * dx + np.sin(ang) * dy
    v = -np.sin(ang) * dx + np.cos(ang) * dy
    mask = _shape_mask(CLASSES[k], u, v)

    # Object colour: far enough from the local background that the shape is visible.
    local = img[mask].mean(axis=0) if mask.any() else img.reshape(-1, 3).mean(axis=0)
    colour = rng.uniform(0, 1, 3)
    for _ in range(20):
        if np.abs(colour - local).sum() > 0.9:
            break
        colour = rng.uniform(0, 1, 3)
    shade = 1.0 + 0.15 * (u[mask] * 0.5)  # gentle shading so the object is not flat
    img[mask] = np.clip(colour[None, :] * shade[:, None], 0, 1)
    image = (np.clip(img, 0, 1) * 255).round().astype(np.uint8)
    return Scene(image=image, label=k, mask=mask)


def patch_cover(masks: np.ndarray, patch: int) -> np.ndarray:
    """How much of each patch is object: (B, H, W) bool masks -> (B, H/patch, W/patch) float32 in [0, 1]."""
    b, h, w = masks.shape
    return masks.reshape(b, h // patch, patch, w // patch, patch).mean(axis=(2, 4), dtype=np.float32)


def make_batch(seed: int, n: int, size: int = SCENE_SIZE,
               clutter: np.ndarray | float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` scenes from seeds ``seed*1_000_003 + i``; ``clutter`` is one value or one per scene.

    Returns:
        images (n, H, W, 3) uint8, labels (n,) int64, masks (n, H, W) bool.
    """
    levels = np.broadcast_to(np.asarray(clutter, dtype=np.float64), (n,))
    scenes = [make_scene(seed * 1_000_003 + i, size, clutter=float(levels[i])) for i in range(n)]
    return (
        np.stack([s.image for s in scenes]),
        np.array([s.label for s in scenes], dtype=np.int64),
        np.stack([s.mask for s in scenes]),
    )
