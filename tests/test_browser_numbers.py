"""The browser prints the digits the server prints: one number, one rounding (Python's, ties to even)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vitviz.render import web

pytestmark = pytest.mark.browser


def test_the_browsers_digits_are_pythons(browser):
    """``fixed`` and ``percent`` (render/web/lib/numbers.mjs, as the page gets it) in Chromium against Python's format on every share k/n of up to 400
    patches (where halves occur: 1/8 is 12.5%) and on numbers whose decimal looks like a tie but is not."""
    assert web  # the scripts ship inside the package
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=web.library() + "\nwindow.fixed = fixed; window.percent = percent;")
    shares = sorted({Fraction(k, n) for n in range(1, 401) for k in range(n + 1)})
    values = [float(f) for f in shares][::7] + [0.125, 0.375, 0.625, 0.0625, 1 / 3, 2.675, 0.145, 1.005, 1e-9]
    got = page.evaluate("(vs) => vs.map((v) => [percent(v, 0), percent(v, 1), fixed(v, 2), fixed(100 * v, 3), "
                        "fixed(-v, 1)])", values)
    want = [[f"{v:.0%}", f"{v:.1%}", f"{v:.2f}", f"{100 * v:.3f}", f"{-v:.1f}"] for v in values]
    assert got == want
    assert page.evaluate("percent(0.125, 0)") == "12%" and page.evaluate("(0.125 * 100).toFixed(0)") == "13"
    page.close()
