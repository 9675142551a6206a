"""The peer libraries the slow tests use as referees (requirements-peers.txt): quantus, captum, pytorch-grad-cam,
torchcam and lxt. Where one is missing, a test is skipped on a developer's machine and fails in CI (``CI`` set, as
.ci/run sets it): a referee that does not run referees nothing."""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path

import pytest

INSTALL = "pip install --no-deps -r requirements-peers.txt"


def peer(module: str):
    """The peer's module, imported; skipped (failed in CI) when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the referee {module} must run in CI ({INSTALL}): {e}", pytrace=False)
        pytest.skip(f"{module} is not installed ({INSTALL})")


def lxt_efficient(name: str):
    """One module of lxt's efficient package (``rules`` or ``patches``), imported without the package's
    ``__init__``: lxt 2.1's ``lxt.efficient`` imports its BERT patch, which imports a name transformers 5 removed
    (``find_pruneable_heads_and_indices``); the rule functions themselves need torch alone."""
    base = peer("lxt")
    if "lxt.efficient" not in sys.modules or not hasattr(sys.modules["lxt.efficient"], "__path__"):
        package = types.ModuleType("lxt.efficient")
        package.__path__ = [str(Path(base.__file__).parent / "efficient")]
        sys.modules["lxt.efficient"] = package
    return importlib.import_module(f"lxt.efficient.{name}")
