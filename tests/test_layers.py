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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """vitviz module -> the vitviz modules it imports (at any depth of the file, relative imports resolved; a name
    imported from a package counts as its module when it is one, else as the package)."""
    modules = {module_name(p): p for p in paths}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        out = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out |= {known(a.name) for a in node.names if a.name.startswith("vitviz")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        here = here.rpartition(".")[0]
                    base = here + ("." + base if base else "")
                if base.startswith("vitviz"):
                    out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names}
        graph[name] = out - {None, name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_imports_itself_round_a_circle():
    """No circle of imports anywhere in the package, function-level imports included (a late import hides a circle
    from Python, not from this test)."""
    assert circles(import_graph(sources())) == []


def test_the_circle_test_catches_a_planted_circle(tmp_path):
    package = tmp_path / "vitviz" / "models"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cache.py").write_text("from vitviz.models import added\n")
    (package / "added.py").write_text("def f():\n    from . import cache\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "vitviz"
    try:
        graph = import_graph(sorted(PACKAGE.rglob("*.py")))
    finally:
        PACKAGE = saved
    assert circles(graph) == [["vitviz.models.added", "vitviz.models.cache"]]
