"""The declared settings: one link key per setting, and every setting survives a trip through the link."""

from __future__ import annotations

import pytest

from vitviz import views
from vitviz.specs.state import Field, View, link_keys


def test_two_settings_on_one_link_key_are_refused():
    a = Field("layer", "int", 4, "layer", lo=1, hi=12, link="l")
    b = Field("head", "int", 0, "head", lo=0, hi=5, link="l")
    with pytest.raises(ValueError, match="link key 'l' is used by two settings"):
        link_keys([View("one", "one", (a,)), View("two", "two", (b,))])
    assert link_keys([View("one", "one", (a,)), View("again", "again", (a,))]) == {"l": a}  # one field, two views


def test_every_link_key_of_the_app_names_one_setting():
    assert views.LINK == link_keys(r.view for r in views.RECORDS.values())
    assert len(views.LINK) == len({id(f) for f in views.LINK.values()})


def other_value(f: Field):
    """A value of ``f`` that is not its default (so the link writes it)."""
    if f.kind in ("int", "float"):
        v = f.hi if f.default != f.hi else f.lo
        return int(v) if f.kind == "int" else v
    if f.kind == "bool":
        return not f.default
    if f.kind == "choice":
        return next(o for o in f.options() if o != f.default)
    if f.kind == "cell":
        return (2, 3)
    if f.kind == "cells":
        return ((1, 2), (3, 4))
    raise AssertionError(f.kind)


@pytest.mark.parametrize("view", list(views.VIEWS.values()), ids=list(views.VIEWS))
def test_every_setting_survives_the_link(view):
    linked = view.settings()
    assert all(f.link for f in linked)  # every setting a person can change is in the link
    values = {f.name: other_value(f) for f in linked}
    query = view.link(values)
    assert set(query) == {f.link for f in linked}  # none left out
    assert view.from_link(query) == values
    assert view.link(view.defaults()) == {}  # defaults stay out of the link


def test_settings_as_used_name_the_model_that_answered_and_the_bounds_of_follow_fields(rgb_cat):
    from vitviz import views
    from vitviz.specs import views as declared
    from vitviz.specs.registry import OFFLINE_KEY

    v = declared.INSIDE_HEAD
    values = v.check(v.defaults() | {"row": 40, "col": 2})
    shown = views.show("inside_head", rgb_cat, values)  # offline: DINO cannot be had, the shapes model answers
    assert shown.model == OFFLINE_KEY and shown.settled.values["model"] == OFFLINE_KEY
    assert shown.settled.adjusted()["model"]["asked"] == "DINO ViT-S/8"
    assert shown.settled.bounds == {"layer": 4, "head": 2, "row": 7, "col": 7}  # the shapes model's 64×64 crop
    assert shown.settled.values["row"] == 7 and "8×8" in shown.settled.notes["row"]
    assert "cannot be loaded here" not in shown.note()  # the stand-in's notice already says so, once


def _whole_number_fields():
    """(view, field) for every setting whose values are whole numbers: an "int" or a choice of ints."""
    for name, view in views.VIEWS.items():
        for f in view.settings():
            if f.kind == "int" or (f.kind == "choice" and all(isinstance(o, int) for o in f.options())):
                yield name, f


def test_a_whole_number_setting_takes_1_0_as_1_and_refuses_1_5_naming_itself_and_its_range():
    """issue 68 item 17: rank=1.0 and points=21.0 were accepted as floats (a choice of ints compared 1.0 == 1)
    and echoed as 1.0 in settings and bundle names. Decided: an integral float or text is normalised to the int,
    silently; a fraction is refused with the parameter's name and what it accepts."""
    fields = list(_whole_number_fields())
    assert {("deletion", "points"), ("deletion", "rank"), ("predict", "rank")} <= {(v, f.name) for v, f in fields}
    for view, f in fields:
        good = f.options()[-1] if f.kind == "choice" else int(f.hi)
        for form in (float(good), f"{good}.0", str(good), good):
            got = f.check(form)
            assert got == good and type(got) is int, (view, f.name, form, got)
        with pytest.raises(ValueError) as err:
            f.check(good - 0.5)
        assert f"`{f.name}`" in str(err.value) and f.accepts() in str(err.value), (view, f.name)
        for bad in (True, float("nan"), "1e400", [good]):
            with pytest.raises(ValueError):
                f.check(bad)


def test_the_api_check_and_the_view_echo_ints_for_rank_and_points(rgb_cat):
    """Through the endpoints' check (``View.check``, which serving.endpoint calls) and views.show: settings, the
    link and the bundle's name say rank 2 and points 21, never 2.0 or 21.0."""
    from vitviz.specs.registry import OFFLINE_KEY
    from vitviz.tools import bundle

    d = views.VIEWS["deletion"]
    checked = d.check({"model": OFFLINE_KEY, "rank": 2.0, "points": 21.0})
    assert type(checked["rank"]) is int and type(checked["points"]) is int
    assert d.link(checked)["tm_points"] == "21" and d.link(checked)["tm_rank"] == "2"
    assert "points21" in bundle.name_for("deletion", checked) and "21.0" not in bundle.name_for("deletion", checked)
    with pytest.raises(ValueError, match=r"`points`.*one of 11, 21; got 21\.5"):
        d.check({"points": 21.5})
    r = views.VIEWS["relevance"]
    shown = views.show("relevance", rgb_cat, r.check({"model": OFFLINE_KEY, "rank": 2.0}))
    assert shown.settled.values["rank"] == 2 and type(shown.settled.values["rank"]) is int
    assert bundle.name_for("relevance", shown.settled.values).endswith("_rank2")


def test_a_pinned_patch_past_the_grid_is_used_at_the_edge_and_said_by_the_view_and_the_explorer_endpoint(rgb_cat):
    """issue 68 item 17: /explorer with query='99,99' on an 8×8 grid used [7,7] and did not say so (its answer,
    the browser's payload, had the settings as used and no ``adjusted``)."""
    from vitviz.app.attention import explorer_payload
    from vitviz.specs import views as declared
    from vitviz.specs.registry import OFFLINE_KEY

    values = declared.ATTENTION.check({"model": OFFLINE_KEY, "resolution": 64, "layer": 4, "query": "99,99"})
    for name in ("explorer", "attention"):
        s = views.show(name, rgb_cat, values).settled
        assert s.values["query"] == (7, 7)
        assert s.adjusted()["query"] == {"asked": (99, 99), "used": (7, 7), "why": "The picture is 8×8 patches."}
    from vitviz import assets

    sent = assets.example("cat").read_bytes()  # as the API receives a picture: its file's bytes
    got = explorer_payload(sent, values, inline=True)
    assert got["adjusted"] == {"query": {"asked": [99, 99], "used": [7, 7], "why": "The picture is 8×8 patches."}}
    assert explorer_payload(sent, declared.ATTENTION.check({"model": OFFLINE_KEY, "resolution": 64, "layer": 4}),
                            inline=True)["adjusted"] == {}
