"""The page at /next's panels that are not a view's: the lesson maker (:func:`maker`) and the device panels
(:func:`device`). Each is a ``gr.HTML`` whose ``js_on_load`` imports its module from the package (render/web/app/),
as every panel does; :func:`vitviz.app.panels.build` places them."""

from __future__ import annotations


def maker() -> None:
    """The lesson maker on /next (render/web/app/maker.mjs): nothing yet."""


def device() -> None:
    """The "compute on this device" panels on /next (render/web/app/device.mjs): nothing yet."""
