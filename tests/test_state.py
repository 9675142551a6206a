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
