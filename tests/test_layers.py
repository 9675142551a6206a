"""The folder layout is the architecture: every sub-package imports only from the floors below it.

    assets < specs < core < models < analyses < embedded < render < views < tools < app

(A package may import itself.) Only vitviz/app imports gradio, and the floors below views import no matplotlib
pyplot. Read from the source with ``ast``, function-level imports included, so a late import cannot hide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vitviz

FLOORS = ["assets", "specs", "core", "models", "analyses", "embedded", "render", "views", "tools", "app"]
PACKAGE = Path(vitviz.__file__).resolve().parent


def imports_of(path: Path) -> set[str]:
    """Every module an (absolute) import in ``path`` names, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def floor_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "vitviz" or len(parts) < 2 or parts[1] not in FLOORS:
        return None
    return FLOORS.index(parts[1])


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_is_on_a_floor():
    loose = [p.relative_to(PACKAGE).as_posix() for p in sources()
             if p.parent == PACKAGE and p.name != "__init__.py"]
    assert loose == [], "modules belong in a sub-package (a floor)"
    assert {p.relative_to(PACKAGE).parts[0] for p in sources() if p.parent != PACKAGE} <= set(FLOORS) | {"render"}


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_point_down(path: Path):
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return  # vitviz/__init__.py: only text
    own = FLOORS.index(rel.parts[0])
    for module in imports_of(path):
        floor = floor_of(module)
        assert floor is None or floor <= own, f"{rel} (floor {FLOORS[own]}) imports {module} (floor {FLOORS[floor]})"
        if own < FLOORS.index("app"):
            assert module.split(".")[0] != "gradio", f"{rel} imports gradio: only vitviz/app may"
        assert module != "matplotlib.pyplot", f"{rel} imports pyplot: figures are matplotlib.figure.Figure objects"


def test_the_layer_test_catches_an_upward_import(tmp_path):
    """A planted core module that imports the app is caught (so the test above can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from vitviz.app import serving\n    import gradio\n")
    modules = imports_of(bad)
    assert "vitviz.app.serving" in modules and "gradio" in modules
    assert max(floor_of(m) or 0 for m in modules) == FLOORS.index("app") > FLOORS.index("core")


def test_the_entry_file_is_short_and_only_hands_over():
    entry = PACKAGE.parent / "app.py"
    text = entry.read_text()
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 20 and "import gradio" not in text and "from vitviz.app import" in text
