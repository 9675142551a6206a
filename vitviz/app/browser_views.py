"""What a view drawn in the browser needs before its view has answered (the page at ``/next``).

Predict-then-test's patch picker must show the picture as the model sees it, with its patch grid, before the
student has pressed "Test my choice" (the test runs many forwards, so it is never asked by itself): this module
gives that, without the test. Everything else a browser view draws comes with its view's answer (``Shown.data``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def preview(view: str, picture: np.ndarray | None, values: dict) -> dict:
    """``Shown.data``-like data for ``view`` drawn before its answer (``values``: the view's checked settings):
    ``{"picker": ...}`` for ``predict`` (:func:`vitviz.views.faithful.picker_payload`: the fitted picture, its
    grid, the patch size, the marked patches, the model); ``{}`` for a view that needs nothing before it answers.
    ``ValueError`` in words for a model predict refuses."""
    if view != "predict" or picture is None:
        return {}
    from vitviz.views import faithful

    runner = faithful._runner(values)
    return {"picker": faithful.picker_payload(runner, picture, values.get("patches") or ())}


def plain_preview(view: str, picture: np.ndarray | None, values: dict) -> dict[str, Any]:
    """:func:`preview`, JSON-ready (what the panel's answer carries as ``data``)."""
    from vitviz.views import plain

    return plain(preview(view, picture, values))
