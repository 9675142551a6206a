"""Where vitviz's shipped files are: example pictures, the embedded model, the theme.

In a source checkout they are the repository's ``assets/`` folder; an installed
vitviz carries the same folder as the ``vitviz.assets`` package (pyproject.toml
maps one onto the other), found through ``importlib.resources``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path


@lru_cache(maxsize=1)
def assets() -> Path:
    """The folder of shipped files (``examples/``, ``tiny/``, ``theme.css``)."""
    try:
        return Path(str(resources.files("vitviz.assets")))
    except ModuleNotFoundError:  # a source checkout that is not installed
        return Path(__file__).resolve().parent.parent / "assets"


def examples() -> Path:
    """The example pictures."""
    return assets() / "examples"
