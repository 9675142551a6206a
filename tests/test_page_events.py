"""What a step of a lesson costs the page: which events the page's opener starts and what they touch (issue 43.2).

gradio's page refreshes, at every status message of every event, each component that has ever been an output of an
event, and everything inside it: a container among the outputs makes every later event pay for the whole page.
"""

from __future__ import annotations

import json
import types

import pytest


def _layout_children(config: dict) -> dict[int, int]:
    """Each component's number of children in the page's layout."""
    counts: dict[int, int] = {}

    def walk(node: dict) -> None:
        counts[node["id"]] = len(node.get("children") or [])
        for child in node.get("children") or []:
            walk(child)

    walk(config["layout"])
    return counts


def test_no_event_that_reaches_the_server_has_a_container_among_its_outputs(served):
    demo, _ = served
    config = demo.get_config_file()
    children = _layout_children(config)
    kinds = {c["id"]: c["type"] for c in config["components"]}
    found = [(d.get("api_name"), kinds[o]) for d in config["dependencies"] if d.get("backend_fn")
             for o in d["outputs"] if children.get(o)]
    assert found == []
    # the check sees a container: the tabs, what the opener set before (with 600+ components inside)
    tabs = next(c["id"] for c in config["components"] if c["type"] == "tabs")
    assert children[tabs] >= 6


def test_an_events_progress_is_shown_only_on_what_a_person_sees_being_made(served):
    """gradio's page keeps a status for each component an event's progress was ever shown on and sets every one
    again, each found by a walk through the whole layout, at every status message of every later event. So each
    event the page sends to the server shows its progress on its figures, views, texts and files only
    (serving.progress_on), never on its controls, states or hidden carriers; the opener, a few ms, on none."""
    from vitviz.app import serving

    demo, _ = served
    config = demo.get_config_file()
    kinds = {c["id"]: c["type"] for c in config["components"]}
    shown, unset = set(), []
    for fn in demo.fns.values():
        if fn.fn is None or not [o for o in fn.outputs if kinds.get(o._id) != "api"]:
            continue  # the page's own events, and the API's (the page never sends those)
        if fn.name == "load_example":  # gr.Examples' own event (Position embeddings' examples: its four controls)
            continue
        if fn.show_progress_on is None:
            unset.append(fn.name)
            continue
        assert set(fn.show_progress_on) <= set(serving.progress_on(fn.outputs)), fn.name
        shown |= {o._id for o in fn.show_progress_on}
    assert unset == []
    assert {kinds[i] for i in shown} <= {"image", "html", "markdown", "plot", "gallery", "dataframe", "file",
                                         "label", "json"}
    everything = {o._id for fn in demo.fns.values() if fn.fn is not None for o in fn.outputs
                  if kinds.get(o._id) != "api"}
    assert len(shown) <= 120 < len(everything), (len(shown), len(everything))  # 106 of 290 here
    assert _opener(demo).show_progress_on == []
    # a section's answer shows it on its figure, not on its open flag or its sliders
    inside = next(fn for fn in demo.fns.values() if fn.name == "answer_inside_head"
                  and any(getattr(demo.blocks.get(t[0]), "elem_id", None) == "inside_head-box" for t in fn.targets))
    ids = {getattr(o, "elem_id", None) for o in inside.show_progress_on}
    assert "inside-head" in ids and "inside-layer" not in ids, ids


def test_the_settle_event_reads_only_the_controls_it_compares(served):
    """The page-only event that puts a link's settings in sets every tab's controls, but reads (each found by a walk
    through the layout) only those a hand's events ask with, which it compares with the link's values."""
    from vitviz.app import links

    demo, _ = served
    settle, put = _settled(demo)
    event = next(f for f in demo.fns.values() if [tuple(t) for t in f.targets] == [(settle._id, "change")])
    read = event.inputs[1:]
    assert event.inputs[0] is settle and 0 < len(read) < len(put)
    index = {id(c): i for i, c in enumerate(put)}
    assert [index[id(c)] for c in read] == sorted(index[id(c)] for c in read)
    sliders = {id(c) for c in read if type(c).__name__ == "Slider"}
    assert len(sliders) >= len(read) // 2  # a slider's release is what only a hand fires
    assert links.watched([{"user": [[5, "k", 1]], "change": [2, 5]}]) == [2, 5]


def _opener(demo):
    fns = [f for f in demo.fns.values() if getattr(f, "name", "") == "on_load"]
    assert len(fns) == 1
    return fns[0]


def _settled(demo) -> list:
    """The components the page itself sets from the opener's JSON (its page-only event on ``#page-settle``)."""
    settle = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "page-settle")
    put = [f for f in demo.fns.values() if [tuple(t) for t in f.targets] == [(settle._id, "change")]]
    assert len(put) == 1 and put[0].fn is None and put[0].js  # the page's own event: no server
    return settle, put[0].outputs


def test_the_opener_event_sets_no_setting_of_a_section_itself(served):
    """Every component of an event the server answered is refreshed by gradio's page at every later event: the
    opener's own outputs are the page's parts, the pictures, the model lists and the carriers; a link's settings
    go through ``#page-settle`` into the controls, in one page-only event (with the picture's name, so the tab's
    answer reads them as set)."""
    demo, _ = served
    opener = _opener(demo)
    settle, put = _settled(demo)
    kinds = {type(c).__name__ for c in opener.outputs}
    assert len(opener.outputs) <= 40 and not kinds & {"Slider", "Radio", "Number"}, (len(opener.outputs), kinds)
    assert settle in opener.outputs and not set(put) & set(opener.outputs) - {
        c for c in put if type(c).__name__ == "Dropdown"}  # a model list: its choices when the server's changed
    query = {"tab": "patches", "image": "scene_star", "win": "3", "patch": "32"}
    out = _open(opener, query, {}, "page-windows", demo)
    by_id = {getattr(c, "elem_id", None) or getattr(c, "label", None): v for c, v in out.items()}
    assert by_id.get("patches-image-key") == "scene_star", by_id
    assert by_id.get("patch size P (pixels)") == 32 and by_id.get("window side M (patches)") == 3, by_id
    raw = opener.fn({c: "" for c in opener.inputs},
                    types.SimpleNamespace(query_params=query, session_hash="page-windows-raw"))
    assert not any(c in put for c in raw if type(c).__name__ != "Dropdown")  # none set by the server's event


def _open(opener, query: dict, shows: dict[str, str], session: str, demo=None) -> dict:
    """The opener's answer for a page at ``?query`` whose tabs show the pictures ``shows`` (tab -> link name), with
    the values it sends through ``#page-settle`` as the components the page puts them in."""
    keys = {c: shows.get(c.elem_id.removesuffix("-image-key"), "") for c in opener.inputs}
    out = dict(opener.fn(keys, types.SimpleNamespace(query_params=query, session_hash=session)))
    if demo is not None:
        settle, put = _settled(demo)
        for i, value in json.loads(out.pop(settle, None) or '{"set": {}}')["set"].items():
            out[put[int(i)]] = value
    return out


@pytest.mark.parametrize("tab", ["patches", "attention", "classify"])
def test_the_opener_sends_a_picture_once_and_names_it_at_once(served, tab):
    demo, _ = served
    opener = _opener(demo)
    query = {"tab": tab, "image": "scene_star"}
    first = _open(opener, query, {}, f"page-{tab}", demo)
    pictures = [v for k, v in first.items() if type(k).__name__ == "Image"]
    named = {k.elem_id: v for k, v in first.items() if getattr(k, "elem_id", "") == f"{tab}-image-key"}
    assert len(pictures) == 1 and str(pictures[0]).endswith("scene_star.png")
    assert named == {f"{tab}-image-key": "scene_star"}  # the tab's answer starts from the name, not after a check
    # and it is the tab's last good picture (a refused upload later brings it back): the page checks it no more
    kept = [v for k, v in first.items() if type(k).__name__ == "State" and isinstance(v, dict) and "path" in v]
    assert [str(v["path"]).endswith("scene_star.png") for v in kept] == [True], kept
    # the same link opened again within the page, the tab showing that picture: no picture, no name sent again
    again = _open(opener, query, {tab: "scene_star"}, f"page-{tab}", demo)
    assert not [k for k in again if type(k).__name__ == "Image" or getattr(k, "elem_id", "") == f"{tab}-image-key"]
    # another picture asked: it is sent, and named
    other = _open(opener, {"tab": tab, "image": "scene_ring"}, {tab: "scene_star"}, f"page-{tab}", demo)
    assert [str(v).endswith("scene_ring.png") for k, v in other.items() if type(k).__name__ == "Image"] == [True]
    assert [v for k, v in other.items() if getattr(k, "elem_id", "") == f"{tab}-image-key"] == ["scene_ring"]



def test_an_open_panel_follows_the_picture_and_its_refresh_sets_it_open(served):
    """A panel a link opens before the page's picture is set answered without one: while open, the picture's arrival
    (the tab's checked picture name) asks it again, once per panel; and its refresh marks it open on the server first
    (gradio's expand and collapse can arrive in either order as the tab mounts), then asks for its answer."""
    demo, _ = served
    config = demo.get_config_file()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    deps = {d["id"]: d for d in config["dependencies"]}
    for box, tab in (("inside_head-box", "attention"), ("deletion-box", "classify"), ("randomise-box", "classify")):
        asks = [d for d in deps.values() if f'vitvizDoors?.["{box}-refresh"]' in (d.get("js") or "")]
        targets = [(ids.get(t[0]), t[1]) for d in asks for t in d["targets"]]
        assert targets.count((f"{tab}-image-key", "change")) == 1, (box, targets)
    for name in ("inside_head-box-refresh", "deletion-box-refresh", "randomise-box-refresh",
                 "patch-vectors-box-refresh", "predict-box-grid"):
        door = next(i for i, e in ids.items() if e == name)
        flag = [d for d in deps.values() if [tuple(t) for t in d["targets"]] == [(door, "click")]]
        assert len(flag) == 1 and flag[0]["queue"] is False, flag  # the flag is set first, queue-less
        answer = [d for d in deps.values() if d.get("trigger_after") == flag[0]["id"]]
        assert len(answer) == 1 and answer[0]["backend_fn"] and answer[0]["queue"] is not False, answer  # then asks


def test_a_device_tab_is_wired_from_its_declaration_and_its_select_sets_its_own_switch_in_the_page(served):
    """Each device tab's switch, panel and picture carry the ids its declaration gives (``TabSpec.device_key``),
    and its select is the page's own event (no server) whose one output is that switch (so a device page turns
    it on through gradio, tests/test_browser_device.py); a tab without one has an output-less select."""
    from vitviz.specs import tabs as declared_tabs

    demo, _ = served
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    tab_items = {getattr(b, "id", None): b for b in demo.blocks.values() if type(b).__name__ == "Tab"}
    seen = {}
    for spec in declared_tabs.TABS.values():
        selects = [f for f in demo.fns.values()
                   if [tuple(t) for t in f.targets] == [(tab_items[spec.id]._id, "select")]]
        assert len(selects) == 1 and selects[0].fn is None and "vitvizLink?.selected" in selects[0].js
        outputs = [getattr(o, "elem_id", None) for o in selects[0].outputs]
        seen[spec.id] = outputs
        if spec.device_key:
            key = spec.device_key
            assert {f"{key}-switch", f"{key}-panel"} <= set(by_id), spec.id
            assert f'id="{key}-picture"' in by_id[f"{key}-panel"].html_template
            assert f"KEY = {json.dumps(key)}" in by_id[f"{key}-panel"].js_on_load
    assert seen == {t: ([f"{s.device_key}-switch"] if s.device_key else []) for t, s in declared_tabs.TABS.items()}
    assert seen["attention"] == ["device-switch"] and seen["forward"] == ["forward-device-switch"]


def test_opening_a_section_marks_it_open_and_answers_in_one_event(served):
    """A section's opening (its accordion's expand) is one event that sets the server's flag (its first output) and
    asks the answer: no queue-less flag event before it (each event costs the page)."""
    demo, _ = served
    config = demo.get_config_file()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    types_ = {c["id"]: c["type"] for c in config["components"]}
    for box in ("inside_head-box", "patch_filters-box", "rollout-box", "deletion-box"):
        acc = next(i for i, e in ids.items() if e == box)
        opened = [d for d in config["dependencies"] if [tuple(t) for t in d["targets"]] == [(acc, "expand")]]
        assert len(opened) == 1 and opened[0]["backend_fn"] and opened[0]["queue"] is not False, (box, opened)
        assert types_[opened[0]["outputs"][0]] == "state" and len(opened[0]["outputs"]) > 1, box
        assert not [d for d in config["dependencies"] if d.get("trigger_after") == opened[0]["id"]
                    and d.get("backend_fn")], box  # nothing asked after it
    fn = next(b for b in demo.fns.values() if b.name == "answer_inside_head" and b.targets
              and ids.get(b.targets[0][0]) == "inside_head-box")
    assert fn.outputs and type(fn.outputs[0]).__name__ == "State"
