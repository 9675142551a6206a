"""vitviz.assets: the files that ship inside the package (example pictures, the embedded model, the theme).

They live in the package itself, so an installed vitviz finds them from any working folder.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def assets() -> Path:
    """The folder of shipped files (``examples/``, ``tiny/``, ``theme.css``)."""
    return ROOT


def examples() -> Path:
    """The example pictures."""
    return ROOT / "examples"
