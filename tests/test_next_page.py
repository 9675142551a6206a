"""The /next page's structure (issue 69), from the configuration gradio serves for it: within its budget of blocks,
events and bytes; no hidden component and no ``gr.State`` (the page's state lives in the browser's one store);
every panel mounted by a one-line import (no library text joined into the configuration); the page's spec what the
view records declare. And a static check that the page's own code (vitviz/app/panels.py and its modules, the
browser modules under vitviz/render/web/app) reaches no gradio internals and makes no ``window`` global."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from vitviz.app import panels
from vitviz.specs import tabs as declared_tabs
from vitviz.views import RECORDS

BLOCKS, EVENTS, CONFIG_BYTES = 150, 100, 300_000
"""The page's budget (issue 69's goals): at most this many blocks, events and configuration bytes."""

PACKAGE = Path(panels.__file__).resolve().parent.parent
"""The installed vitviz package (the files the static check reads)."""

PAGE_PY = ("app/panels.py", "app/next_extras.py", "app/browser_views.py")
"""The page's server modules (those present are checked)."""


@pytest.fixture(scope="module")
def next_config(served) -> dict:
    """The configuration gradio serves for the /next page (``GET /config?page=next``): its bytes and its JSON."""
    _, url = served
    with urllib.request.urlopen(f"{url}config?page={panels.ROUTE}", timeout=60) as got:
        raw = got.read()
    config = json.loads(raw)
    assert config["current_page"] == panels.ROUTE
    return {"bytes": len(raw), "config": config}


def components(page: dict) -> list[dict]:
    return page["config"]["components"]


def props(c: dict) -> dict:
    """A gr.HTML subclass's own properties (its ``props=``), where gradio puts them in the configuration."""
    return c["props"].get("props") or {}


def by_elem(page: dict) -> dict[str, dict]:
    return {c["props"]["elem_id"]: c for c in components(page) if c["props"].get("elem_id")}


PANELED = [r for r in RECORDS.values() if r.api or r.name == "explorer"]


def test_the_page_is_within_its_budget_of_blocks_events_and_bytes(next_config):
    blocks, events = len(components(next_config)), len(next_config["config"]["dependencies"])
    assert blocks <= BLOCKS, f"{blocks} blocks"
    assert events <= EVENTS, f"{events} events"
    assert next_config["bytes"] <= CONFIG_BYTES, f"{next_config['bytes']:,} configuration bytes"
    assert blocks >= len(PANELED) + 1 and events >= len(PANELED)  # the page is there: a panel and an event per view


def test_no_hidden_component_and_no_state(next_config):
    # gradio's bar of pages (gr.Navbar(visible=False)) is the route's own setting, holding nothing of the page's
    hidden = [(c["type"], c["props"].get("elem_id")) for c in components(next_config)
              if c["props"].get("visible") in (False, "hidden") and c["type"] != "navbar"]
    assert hidden == []
    kinds = {c["type"] for c in components(next_config)}
    assert "state" not in kinds and "browserstate" not in kinds, kinds


ONE_LINE = re.compile("^" + re.escape(panels.MOUNT).replace("main\\.mjs", r"[a-z_]+\.mjs")
                      .replace("mountPanel", r"mount[A-Z][A-Za-z]*")
                      .replace(re.escape("{ element, props, trigger, watch, upload }"), r"\{ [a-z]+(, [a-z]+)* \}")
                      + "$")
"""A panel's ``js_on_load``: panels.MOUNT, the import of one of the page's modules and its mount function with
the names gradio hands a ``js_on_load`` (element, props, trigger, watch, upload, server)."""


def test_every_panel_is_mounted_by_a_one_line_import(next_config):
    mounted = [c for c in components(next_config) if c["props"].get("js_on_load")]
    assert len(mounted) >= len(PANELED) + 1
    assert {c["props"]["js_on_load"] for c in mounted} >= {panels.MOUNT, panels.PAGE_MOUNT}
    for c in mounted:
        js = c["props"]["js_on_load"]
        assert ONE_LINE.match(js), (c["props"].get("elem_id"), js[:200])
        assert "\n" not in js and len(js) < 400 and "export " not in js
    assert all(len(c["props"].get("html_template") or "") < 400 for c in components(next_config))


def test_every_view_has_its_panel_made_from_its_record(next_config):
    found = by_elem(next_config)
    assert {e for e in found if e.startswith("panel-")} == {f"panel-{r.name}" for r in PANELED}
    for r in PANELED:
        spec = props(found[f"panel-{r.name}"])["spec"]
        assert (spec["view"], spec["title"], spec["tab"]) == (r.name, r.view.title, r.tab)
        assert (spec["picture"], spec["bundle"], spec["long"]) == (r.needs_picture, r.bundle, r.long)
        assert spec["main"] == (declared_tabs.TABS[r.tab].opens_with.name == r.name)
        settings = list(r.view.settings())
        assert [f["name"] for f in spec["fields"]] == [f.name for f in settings]
        for f, got in zip(settings, spec["fields"]):
            assert (got["kind"], got["label"], got["link"]) == (f.kind, f.label, f.link), f.name
            if f.kind in ("int", "float"):
                assert (got["lo"], got["hi"]) == (f.lo, f.hi), f.name
            if f.kind == "choice":
                assert [v for _, v in got["choices"]] == [str(c) for c in f.options()], f.name
    # each panel answers through its own one event, the panel its input and its output
    ids = {c["id"]: c["props"].get("elem_id") for c in components(next_config)}
    answered = sorted(ids[d["inputs"][0]] for d in next_config["config"]["dependencies"]
                      if d.get("backend_fn") and d["inputs"] == d["outputs"] and len(d["inputs"]) == 1
                      and (ids[d["inputs"][0]] or "").startswith("panel-"))
    assert answered == sorted(f"panel-{r.name}" for r in PANELED)


def test_the_page_spec_is_what_the_records_declare(next_config):
    spec = props(by_elem(next_config)["vx-page"])["spec"]
    assert [t["id"] for t in spec["tabs"]] == list(declared_tabs.TABS) and spec["first"] == declared_tabs.FIRST
    for t in spec["tabs"]:
        declared = [r.name for r in RECORDS.values() if r.tab == t["id"]]
        assert t["views"] == declared and t["views"][0] == declared_tabs.TABS[t["id"]].opens_with.name
        assert set(t["views"]) <= {r.name for r in PANELED}, t["id"]  # every view it lists has a panel
    links = {}
    for r in RECORDS.values():
        for f in r.view.settings():
            if f.link:
                links.setdefault(f.link, (r.tab, f))
    assert set(spec["keys"]) == set(links)
    for key, (tab, f) in links.items():
        got = spec["keys"][key]
        assert (got["name"], got["kind"], got["tab"]) == (f.name, f.kind, tab), key
        if f.kind in ("int", "float"):
            assert (got["lo"], got["hi"]) == (f.lo, f.hi), key


# ---- the page's own code reaches no gradio internals ----------------------------------------------------------

PY_INTERNALS = [
    (r"\bstate_holder\b", "gradio's per-session state holder"),
    (r"\bsession_data\b", "gradio's per-session data"),
    (r"\bSessionState\b", "gradio's SessionState"),
    (r"\b_queue\b", "gradio's private queue"),
    (r"\bblocks\.fns\b|\bdemo\.fns\b|\.fns\[", "gradio's event-listener internals (Blocks.fns)"),
    (r"\bget_config_file\b|\.config\s*=(?!=)", "gradio's configuration rebuilt while serving"),
    (r"^\s*from\s+gradio\b|^\s*import\s+gradio\.", "a gradio module imported (only `import gradio as gr`)"),
    (r"\bgr\._|\bgradio\._", "a private name of gradio's"),
    (r"\bgr\.(routes|utils|blocks|queueing|context|helpers|processing_utils|route_utils|data_classes|"
     r"server_messages|networking|http_server|state_holder)\b", "a gradio module that is not its documented API"),
]
"""What the page's Python may not say: gradio's internals, by pattern, each with what it reaches."""

WINDOW_OK = {"location", "history", "document", "gradio_config", "addEventListener", "removeEventListener",
             "scrollX", "scrollY", "scrollTo", "scrollBy", "innerWidth", "innerHeight", "matchMedia",
             "requestAnimationFrame", "getComputedStyle", "performance", "devicePixelRatio", "getSelection",
             "confirm"}
"""What a page module may read on ``window``: the address and history, the document, gradio's root, and the
browser's own members (events, scrolling, sizes); nothing the page makes itself."""

JS_INTERNALS = [
    (r"\bwindow\s*\.\s*(?!(?:" + "|".join(sorted(WINDOW_OK)) + r")\b)[A-Za-z_$][\w$]*", "a window global"),
    (r"\bwindow\s*\.\s*[A-Za-z_$][\w$]*\s*=(?!=)", "a value put on window"),
    (r"\bwindow\s*\[", "a window global by name"),
    (r"\bglobalThis\b|\bself\s*\.\s*[A-Za-z_$]", "a global by another name"),
    (r"\bgradio_config\s*\.\s*(?!root\b)[A-Za-z_$]", "gradio's configuration beyond its root"),
    (r"__gradio|\bsvelte\b|\.\$\$|\bstructuredClone\s*=", "gradio's front end internals"),
]
"""What the page's browser modules may not say."""


def reaches(text: str, patterns: list[tuple[str, str]], comment: str) -> list[str]:
    """Every line of ``text`` (its comments left out: ``comment`` starts one) saying one of ``patterns``, as
    ``line N: what it reaches: the line``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split(comment, 1)[0] if comment == "#" else re.sub(r"(^|\s)//.*$", "", line)
        for pattern, what in patterns:
            if re.search(pattern, code):
                found.append(f"line {n}: {what}: {line.strip()[:120]}")
    return found


def page_files() -> list[Path]:
    py = [PACKAGE / p for p in PAGE_PY if (PACKAGE / p).exists()]
    return py + sorted((PACKAGE / "render" / "web" / "app").rglob("*.mjs"))


def test_the_pages_code_reaches_no_gradio_internals_and_makes_no_window_global():
    files = page_files()
    assert PACKAGE / "app/panels.py" in files and PACKAGE / "render/web/app/main.mjs" in files
    found = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            text = _code_only(text)
            got = reaches(text, PY_INTERNALS, "#")
        else:
            got = reaches(text, JS_INTERNALS, "//")
        if got:
            found[str(path.relative_to(PACKAGE))] = got
    assert found == {}


def _code_only(source: str) -> str:
    """``source`` with its docstrings blanked (each line kept, so line numbers stay), by Python's own tokenizer:
    a docstring may name what the code must not do."""
    import ast
    import io
    import tokenize

    lines = source.splitlines()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            for i in range(body[0].lineno - 1, body[0].end_lineno):
                lines[i] = ""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):  # attribute docstrings: strings alone
        if tok.type == tokenize.STRING and tok.line.strip().startswith(('"""', "'''")):
            for i in range(tok.start[0] - 1, tok.end[0]):
                lines[i] = ""
    return "\n".join(lines)


@pytest.mark.parametrize("line", [
    "from gradio.utils import safe_deepcopy",
    "import gradio.routes",
    "demo.state_holder.session_data[h].config_values = {}",
    "gradio.state_holder.SessionState.__init__ = fast",
    "blocks._queue.__class__ = Quiet",
    "demo.config = demo.get_config_file()",
    "fn = demo.fns[3]",
    "gr._docs",
])
def test_the_static_check_catches_a_reach_into_gradio(line):
    assert reaches(_code_only(f"x = 1\n{line}\n"), PY_INTERNALS, "#"), line


@pytest.mark.parametrize("line", [
    "window.vitvizLink = { open };",
    "const s = window.vitvizState;",
    "window['vitvizDoors'] = doors;",
    "globalThis.store = store;",
    "const c = window.gradio_config.components;",
    "window.location = '/';",
])
def test_the_static_check_catches_a_window_global(line):
    assert reaches(line, JS_INTERNALS, "//"), line


def test_the_static_check_lets_the_documented_means_pass():
    js = ("const base = (window.gradio_config && window.gradio_config.root) || location.origin;\n"
          "const url = new URL(window.location.href); history.replaceState(history.state, '', url.href);\n"
          "window.addEventListener('popstate', () => 1); // window.vitvizLink was the old page's\n")
    assert reaches(js, JS_INTERNALS, "//") == []
    py = '"""No state_holder here."""\nimport gradio as gr\npanel.submit(fn, panel, panel)\n'
    assert reaches(_code_only(py), PY_INTERNALS, "#") == []
