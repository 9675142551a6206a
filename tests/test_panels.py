"""The /next page's server side (vitviz/app/panels.py, issue 69): a panel asked with its view's defaults, as the page's
store sends them (link texts), answers what the API answers for the same settings (screen = API); a value out of
its range is refused in words naming the parameter and its range; a download ask hands back a URL of a ZIP among
this server's outputs. No browser, no server: the panels' functions are called as gradio calls them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vitviz.app import files, panels, serving, uploads
from vitviz.views import RECORDS, Record, show

SLOW = {"patch_size_tradeoff"} | {r.name for r in RECORDS.values() if r.long}
"""Views whose default answer takes seconds here (the patch-size table times several models; a long view sends
many forwards): in the slow set (``-m slow``), keeping this file's fast set within ~15 s."""

PANELED = [r for r in RECORDS.values() if r.api or r.name == "explorer"]
"""The views the page gives a panel (panels.build: every view with an endpoint, and the explorer)."""

ASK_ALSO = {"predict": {"patches": "3,4"}}
"""Settings a view needs beyond its defaults to answer at all (predict's defaults mark no patch: refused)."""


def _params() -> list:
    return [pytest.param(r.name, marks=[pytest.mark.slow] if r.name in SLOW else []) for r in PANELED]


def page_settings(r: Record) -> dict[str, str]:
    """What the store sends for ``r`` when no link names a setting: each field's default as the link writes it
    (the model lists' defaults being what can be had here)."""
    spec = panels.view_spec(r, panels.model_defaults())
    return {f["name"]: f.get("used", f["default"]) for f in spec["fields"]}  # ("used": a stand-in here)


def api_settings(r: Record) -> dict[str, Any]:
    """What an API client sends for the same: each declared default as a typed value, the model lists' defaults
    being the ones that can be had here (by link key, as the page's)."""
    models = panels.model_defaults()
    return {f.name: models.get(f.link, f.default) for f in r.view.settings()}


def ask(r: Record, settings: dict, **extra) -> dict:
    """The panel's event, called as gradio calls it: the panel's value in, the panel's value out."""
    picture = panels.first_picture() if r.needs_picture else None
    return panels.respond(r)({"ask": {"n": 7, "picture": picture, "settings": settings, **extra}})


def api_answer(r: Record, settings: dict) -> dict:
    """The view's endpoint (serving.endpoints): its picture through the intake, its settings checked, the answer
    drawn or reused as the endpoint does."""
    picture = uploads.picture(uploads.example_path(panels.first_picture())) if r.needs_picture else None
    return serving.answer(show(r.name, picture, r.view.check(settings), reuse=True))


def _file_of(url: str) -> Path:
    """The file behind a panel's URL among this server's outputs."""
    prefix = f"/{panels.OUT_ROUTE}/"
    assert url.startswith(prefix), url
    return files.outputs().root / url[len(prefix):]


@pytest.mark.parametrize("name", _params())
def test_a_panel_answers_what_the_api_answers_for_the_defaults(name):
    r = RECORDS[name]
    page = page_settings(r) | ASK_ALSO.get(name, {})
    api = api_settings(r) | ASK_ALSO.get(name, {})
    got = ask(r, page)
    assert got["n"] == 7 and "error" not in got, got.get("error")
    screen, want = got["answer"], api_answer(r, api)
    for key in ("model", "notice", "settings", "adjusted", "texts", "numbers"):
        assert screen[key] == want[key], key
    assert set(screen["figures"]) == set(want["figures"]) == set(screen["alt"])
    for fig, url in screen["figures"].items():  # the same drawing: the API's file, served under the panel's URL
        assert url.startswith(f"/{panels.OUT_ROUTE}/figures/") and url.endswith(".png"), url
        assert _file_of(url).read_bytes() == Path(want["figures"][fig].path).read_bytes(), fig
    assert got["picture"] == (panels.first_picture() if r.needs_picture else None)


def test_predict_without_marks_is_refused_as_the_api_refuses_it():
    r = RECORDS["predict"]
    got = ask(r, page_settings(r))
    with pytest.raises(ValueError) as api:
        api_answer(r, api_settings(r))
    assert got == {"n": 7, "error": str(api.value)}
    assert "patches" in got["error"] and "row,column" in got["error"]


@pytest.mark.parametrize(("name", "setting", "value", "words"), [
    ("patches", "resolution", "9999", ("resolution", "8", "640")),
    ("attention", "keep", "1.5", ("keep",)),
    ("patches", "patch", "13", ("patch", "16")),
    ("rotary", "dim", "abc", ("dim",)),
])
def test_a_wrong_value_is_refused_in_words_naming_the_parameter_and_its_range(name, setting, value, words):
    r = RECORDS[name]
    field = next(f for f in r.view.settings() if f.name == setting)
    got = ask(r, page_settings(r) | {setting: value})
    assert set(got) == {"n", "error"} and got["n"] == 7
    for w in words:
        assert w in got["error"], (w, got["error"])
    if field.kind in ("int", "float"):  # its range, as declared
        assert f"{field.lo:g}" in got["error"] and f"{field.hi:g}" in got["error"], got["error"]
    with pytest.raises(ValueError) as api:  # the API refuses it in the same words
        r.view.check({setting: value})
    assert got["error"] == str(api.value)


def test_an_unknown_setting_and_a_question_without_ask_are_refused_in_words():
    r = RECORDS["patches"]
    got = ask(r, {"nonsense": "1"})
    assert "no setting 'nonsense'" in got["error"] and "resolution" in got["error"]
    assert panels.respond(r)({"value": 1}) == {"n": None, "error": "This panel sent no question."}
    refused = panels.respond(r)({"ask": {"n": 2, "picture": "no_such_picture", "settings": {}}})
    assert refused["n"] == 2 and "image" in refused["error"] and "no_such_picture" in refused["error"]


def test_a_bundle_ask_returns_a_zip_among_the_servers_bundles():
    import zipfile

    r = RECORDS["patches"]
    got = ask(r, page_settings(r), bundle=True)
    assert set(got) == {"n", "bundle", "picture"} and got["n"] == 7
    assert got["bundle"].startswith(f"/{panels.OUT_ROUTE}/bundles/") and got["bundle"].endswith(".zip")
    path = _file_of(got["bundle"])
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert "params.json" in [Path(n).name for n in names] and any(n.endswith(".png") for n in names), names
    refused = ask(RECORDS["rotary"], page_settings(RECORDS["rotary"]), bundle=True)  # a view without a download
    assert "no download" in refused["error"]
