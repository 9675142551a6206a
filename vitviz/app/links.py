"""The page's link: every setting a person can change is in the address, and opening the address restores it.

Writing happens in the browser (``render/web/page.js``: each control, and the explorer, set their declared link
key as they change; defaults are left out). Reading happens here, once per page load, from the same
declarations: :meth:`vitviz.specs.state.View.from_link` reads each key leniently (an old link's value out of range
is brought into range; one that cannot be read is skipped).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import gradio as gr

from vitviz.app import lessons, uploads
from vitviz.app.components import folded
from vitviz.app.tab import Tab
from vitviz.core.lru import LRU
from vitviz.models import cache as models
from vitviz.specs import registry
from vitviz.specs import tabs as declared_tabs
from vitviz.specs import views as declared
from vitviz import views
from vitviz.views.attention import REGISTER_PAIR, REGISTERS_UNAVAILABLE

MODEL_LISTS = tuple((t.id, field, task) for t in declared_tabs.TABS.values() for field, task in t.models)
"""(tab, setting, registry task) of every model list (each tab's declaration): each offers its task's models and,
when its default cannot be had, opens on the stand-in for that task."""


HERE = (declared.SIDE,)
"""The settings a device link may carry and the page still opens it by itself (``page.js``: a whole number in
range, which the page reads as :meth:`~vitviz.specs.state.Field.from_link` does; anything else goes to the
server's opener). Whole-number settings of the Attention tab only, in the order of the load's outputs."""


DEVICE_TABS = {t.id: t.device for t in declared_tabs.TABS.values() if t.device}
"""The tabs that can compute on this device (``device=1`` in their link), and their switch in the page."""


def page_script() -> str:
    """The page's script (``launch(js=...)``): one function whose body is the library's modules (``render/web/lib``,
    among them the page's state and its address), the tab each link key belongs to (the address shows the open
    tab's settings only, and every tab's again when it is opened), the ranges of :data:`HERE`, what each tab shows
    once answered (``TabSpec.shows``: a lesson step brings it up), the other figures a link can name
    (``TabSpec.figures``, ``show=<name>``) and the tabs that can compute on the device, then
    ``render/web/page.js``."""
    from vitviz.render import web

    here = {f.link: {"lo": f.lo, "hi": f.hi} for f in HERE}
    shows = {t.id: t.shows for t in declared_tabs.TABS.values() if t.shows}
    figures = {t.id: dict(t.figures) for t in declared_tabs.TABS.values() if t.figures}
    from vitviz.app import panels

    # the page at /next (vitviz.app.panels) is its own: this script leaves it alone
    guard = f"  if (/\\/{panels.ROUTE}\\/?$/.test(window.location.pathname)) return;\n"
    return (f"() => {{\n{guard}{web.library()}\n  const TAB_KEYS = {json.dumps(tab_keys(), sort_keys=True)};\n"
            f"  const SETTINGS = {json.dumps(here)};\n  const SHOWS = {json.dumps(shows, sort_keys=True)};\n"
            f"  const FIGURES = {json.dumps(figures, sort_keys=True)};\n"
            f"  const DEVICE_TABS = {json.dumps(sorted(DEVICE_TABS))};\n"
            f"{(web.WEB / 'page.js').read_text()}}}\n")


def tab_keys() -> dict[str, str]:
    """Each declared setting's link key and the tab it belongs to (the page's address shows the open tab's)."""
    return {f.link: r.tab for r in views.RECORDS.values() for f in r.view.settings() if f.link}


def model_choices(field) -> list[tuple[str, str]]:
    """(label, key) pairs of a model setting's choices: a model that cannot be had now says so ('…: needs
    download'), one this server added says that; the value stays the key."""
    return [(models.choice_label(k), k) for k in field.options()]


def model_list(field, task: str, available: dict[str, bool], asked: str | None = None) -> tuple[list, str]:
    """A model setting's (label, key) choices and its value: the model ``asked`` (by a link), else the default when
    it can be had now, else the stand-in for its ``task`` (the offline model)."""
    stand_in = registry.CNN_OFFLINE_KEY if task == "cnn" else registry.OFFLINE_KEY
    return model_choices(field), asked or (field.default if available.get(field.default, False) else stand_in)


def label_page(tabs: dict[str, Tab], page: dict[str, Any]) -> dict[str, bool]:
    """Give the page, as it is built, what a page load would set from what this server has now: every model list's
    labels and value, each tab's note on photos that need a download, the registers button. A load then changes
    them only when something changed since (a model downloaded): each model list's change would start its tab's
    work, and a page the browser opens by itself (``page.js``: the device link) needs them right. Returns the
    availability used."""
    available = models.available_now()
    for name, field, task in MODEL_LISTS:
        control = tabs[name].form[field]
        control.choices, control.value = model_list(field, task, available)
        note = tabs[name].extras.get("photos_note") if field is tabs[name].model_field else None
        if note is not None:
            note.value, note.visible = photos_note(field.default), not available.get(field.default, False)
    registers_ok = all(available.get(k, False) for k in REGISTER_PAIR)
    page["registers"].interactive = registers_ok
    page["registers_note"].value = "" if registers_ok else REGISTERS_UNAVAILABLE
    return available


def photos_note(model: str) -> str:
    """What the examples list says when a tab's own model cannot be had here."""
    return (f"**Offline here:** {model} is not available, so this tab opens on a shape scene with "
            f"{registry.OFFLINE_KEY}. The photos ({', '.join(n.split('.')[0] for n in uploads.PHOTOS)}) need "
            f"{model} from the hub; shown to the shapes model, they get its nearest shape, marked as such.")


OPENED_PAGES = 4096
"""How many pages' sessions the opener remembers having opened (to tell a first load from a link opened within the
page); a page forgotten is opened as a first load: only what its link sets changes."""


def opener(tabs: dict[str, Tab], page: dict[str, Any], relabel: Callable[[], dict] | None = None) -> Callable:
    """The page-load callback: open the page as its link says (tab, picture, every setting), or on an example.

    ``relabel`` re-makes the page as served (:func:`label_page`, then the served configuration) and returns the
    availability it used: called when a load finds the server's models changed since the page was made, after this
    page's own changes are worked out (this page was served as made before).

    The values of :func:`settled` components travel as one JSON text in ``page["settle"]`` (``{"at": time,
    "set": {index: value}}``), which the page's own event puts into them (:func:`settle_script`)."""
    built = {"available": models.available_now()}
    settle = {c: i for i, c in enumerate(settled(tabs))}
    opened_pages: LRU[bool] = LRU(OPENED_PAGES, size=None, pool=None)  # sessions whose page was opened here

    def on_load(shown: dict, request: gr.Request) -> dict:
        """``shown``: gradio's dictionary of :func:`inputs`, the link's name of the picture each tab with one
        shows now (empty before any). Only the open tab gets its picture now (which starts its work), and only
        when it shows another one (the same picture sent again would start the tab's work again for nothing); the
        others get theirs when first opened. On a page's first load only what the link sets (and the model lists'
        labels) is returned; the rest keeps its value as built. A link opened again within the same page (a
        lesson's Back and Next, the browser's history: page.js moves the address, then asks here) also sets every
        setting the link leaves out back to its default, so a step shows what its link says whatever the step
        before it set."""
        q = dict(request.query_params) if request is not None else {}
        session = getattr(request, "session_hash", None) or ""
        again = bool(session) and opened_pages.get(session) is not None
        if session:
            opened_pages.put(session, True)
        tab = q.get("tab") if q.get("tab") in declared_tabs.TABS else declared_tabs.FIRST
        available = models.available_now()
        out: dict = {}
        for name in declared_tabs.TABS:
            form, held = tabs[name].form, {}
            listed = {field for n, field, _ in MODEL_LISTS if n == name}
            for view in views.tab_views(name):
                for key, value in view.from_link(q).items():
                    field = view[key]
                    if field in form.controls:
                        out[form[field]] = list(value) if isinstance(value, tuple) else value
                    elif field in form.browser:
                        held[field.name] = value
                if again and name == tab:  # what the link leaves out is the default, not what a step before
                    # set (in the tab it opens: the others are set when a link opens them); a model list's
                    # default is decided below (the stand-in when its default cannot be had here)
                    for field in view.fields:
                        control = form.controls.get(field)
                        if control is not None and control not in out and field.kind != "image" and \
                                field not in listed:
                            out[control] = list(field.default) if isinstance(field.default, tuple) else field.default
            if form.carrier is not None:  # set on every load, defaults too: the browser view's changes reach
                # the server through this carrier's change event only once a load has set it
                # (tests/test_browser_explorer.py)
                start = {f.name: f.default for f in form.browser} | held
                out[form.carrier] = json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in start.items()})
        said = []
        for name, field, task in MODEL_LISTS:  # each says which models need a download; offline: the stand-in
            control = tabs[name].form[field]
            asked = q.get(field.link) if field.link else None
            if asked and asked not in field.options() and name == tab:
                said.append(f"This link names the model “{asked[:80]}”, which this server does not have, so the "
                            "tab opens on its usual model instead (a server's own models are on its lists).")
            choices, chosen = model_list(field, task, available, out.get(control))
            if choices != [tuple(c) for c in control.choices]:  # the server's models changed since the page was
                # made (rare): the list itself is sent
                out[control] = gr.Dropdown(choices=choices, value=chosen)
            elif (again and name == tab) or chosen != control.value or control in out:
                # within the page, the opened tab's list shows the model its link says (or the default that can be
                # had), whatever a step before chose; the page starts no work when that is what it shows already
                out[control] = chosen  # else as built: no change event
            note = tabs[name].extras.get("photos_note") if field is tabs[name].model_field else None
            if note is not None and (not available.get(field.default, False)) != bool(note.visible):
                out[note] = gr.Markdown(photos_note(field.default), visible=not available.get(field.default, False))
        picture = tabs[tab].src
        if q.get("device") == "1" and tab in DEVICE_TABS:
            # compute on this device: the server computes nothing for this page (the tab waits for the picture
            # chosen in its device panel)
            picture = None
        if picture is not None:
            wanted, name = q.get("image"), q.get("image")  # the picture and its name in a link
            if uploads.example_path(wanted):
                out[picture] = uploads.example_path(wanted)
            elif uploads.named_file(wanted):  # an upload this server still holds (a reload, a lesson's picture)
                out[picture] = uploads.named_file(wanted)
            else:
                example = tabs[tab].example(available)
                out[picture], name = uploads.example(example), Path(example).stem
                if wanted and wanted.startswith("upload-"):
                    said.append(
                        f"This link was made with an uploaded picture ({wanted}). Pictures cannot travel in a link, "
                        "so it opens on an example instead: upload the picture again to see it. Every other "
                        "setting in the link is restored.")
            on_screen = shown.get(tabs[tab].key) or ""
            if on_screen and name == on_screen:
                del out[picture]  # the tab shows this picture already
            else:  # an example or a picture this server holds (checked when it came): its name given at once
                # starts the tab's answer now, and it is the page's last good picture (no check on the way: the
                # page's picture check passes over a picture this names, vitvizLink.named)
                out[tabs[tab].key], out[tabs[tab].kept] = name, {"path": out[picture]}
        if said:
            out[page["notice"]] = gr.Markdown(folded("\n\n".join(said)), visible=True)
        if q.get("lesson"):
            out[page["lesson"]] = gr.HTML(lessons.bar(q), visible=True)
        elif again:  # a lesson left within the page
            out[page["lesson"]] = gr.HTML("", visible=False)
        if again and not said:
            out[page["notice"]] = gr.Markdown("", visible=False)
        if q.get("projector") == "1":
            out[page["projector"]] = True
        if q.get("contrast") == "1":
            out[page["contrast"]] = True
        if q.get("device") == "1" and tab in DEVICE_TABS:  # compute on this device (that tab's switch)
            out[page[DEVICE_TABS[tab]]] = True
        registers_ok = all(available.get(k, False) for k in REGISTER_PAIR)
        if registers_ok != page["registers"].interactive:  # else as built
            out[page["registers"]] = gr.Button(interactive=registers_ok)
            out[page["registers_note"]] = "" if registers_ok else REGISTERS_UNAVAILABLE
        out[page["opened"]] = tab
        if relabel is not None and available != built["available"]:
            built["available"] = relabel()
        given = {str(settle[c]): out.pop(c) for c in list(out) if c in settle and not isinstance(out[c], gr.Dropdown)}
        # sent even when empty: the page's event that takes it says the link's settings are in (vitvizLink.settled)
        out[page["settle"]] = json.dumps({"at": time.time(), "set": given})
        return out

    return on_load


def inputs(tabs: dict[str, Tab]) -> set:
    """What :func:`opener`'s callback reads (gradio's dictionary form): the link's name of the picture each tab
    with one shows (its hidden ``<tab>-image-key`` box, which follows its picture)."""
    return {t.key for t in tabs.values() if t.key is not None}


def outputs(tabs: dict[str, Tab], page: dict[str, Any]) -> list:
    """Every component :func:`opener`'s event sets itself: the page's own, each tab's picture, photos note, model
    lists (only when the server's models changed since the page was made) and browser views' carriers, and
    ``page["settle"]``, which carries the values of the :func:`settled` components."""
    comps = [page[k] for k in ("projector", "contrast", "notice", "lesson", "registers", "registers_note",
                               *DEVICE_TABS.values(), "opened", "settle")]
    for tab in tabs.values():
        comps += [tab.extras["photos_note"]] if "photos_note" in tab.extras else []
        comps += [tab.src, tab.kept] if tab.src is not None else []
        comps += [tab.form[field] for n, field, _ in MODEL_LISTS if n == tab.name]
        comps += [tab.form.carrier] if tab.form.carrier is not None else []
    return list(dict.fromkeys(comps))


def settled(tabs: dict[str, Tab]) -> list:
    """The components whose values the opener sends as one JSON text, which the page's own event (no server)
    puts into them: every tab's controls but its picture, and its picture's name. gradio's page refreshes, at
    every later event, every component that was ever the input or output of an event the server answered (about
    0.1 s more per event for every 50 on this machine: ``benchmarks/gradio_dispatch.py``); set by a page-only
    event, the controls of the sections a link opens only take part when their own view is asked. In one event, so
    the tab's answer (asked by the picture's name) reads the controls as the link set them."""
    comps = []
    for tab in tabs.values():
        comps += [c for f, c in tab.form.controls.items() if f.kind != "image"]
        comps += [tab.key] if tab.key is not None else []
    return list(dict.fromkeys(comps))


def by_hand_table(tabs: dict[str, Tab], put: list, found: list[dict]) -> list[dict]:
    """The events a hand asks (:func:`vitviz.app.serving.by_hand`), with the :func:`settled` components as their
    indices in ``put``: those whose asking controls a link can set, each as ``[index, link key, value as built]``."""
    index = {id(c): i for i, c in enumerate(put)}
    keys = {id(c): f.link for t in tabs.values() for f, c in t.form.controls.items()}
    table = []
    for f in found:
        user = [[index[id(c)], keys.get(id(c)), c.value] for c in f["user"] if id(c) in index]
        if user:
            table.append({"door": f["door"], "when": f["when"], "user": user,
                          "change": [index[id(c)] for c in f["change"] if id(c) in index]})
    return table


def watched(table: list[dict]) -> list[int]:
    """The indices (in :func:`settled`) of the controls :func:`settle_script` compares with a link's values: those
    of :func:`by_hand_table`'s events. Only these are the settle event's inputs: gradio's page finds each input of an
    event by a walk through its whole layout, at every step of a tour (48 walks, not 71: docs/performance.md)."""
    return sorted({i for t in table for i in [u[0] for u in t["user"]] + list(t["change"])})


def settle_script(count: int, by_hand: list[dict] = (), read: list[int] | None = None) -> str:
    """The page-only event's script: the opener's JSON (``{"at", "set": {index: value}}``) as the values of the
    :func:`settled` components, ``undefined`` (left as it is) for those it does not set; it tells the page that the
    link's settings are in (``vitvizLink.settled``: what waits for them, :meth:`Tab.relay`'s ``after_link``, goes on).

    It gets the values of the components ``read`` names (indices in :func:`settled`; all when None: :func:`watched`
    in the app) before it as well: an event only a hand asks (a slider's release:
    :func:`by_hand_table`) is asked through its door, once the values are in, when the link changed one of its
    controls and none of its ``change`` triggers (which ask it anyway), and its condition holds as the values go in
    (``when``: a section open; a section a link opens is opened after, and its answer reads them: ``page.js``).
    A control changed is one whose value on screen is not the link's, and which a hand set since the last link or
    was last asked for another value (the link's last, ``vitvizLink.putIn``, or as built): an answer shows the
    value it used (the 64 px of the shapes model, the model's last layer), which the same value would give again."""
    table = json.dumps([{k: v for k, v in t.items() if k != "when"} for t in by_hand])
    whens = "[" + ", ".join(f"() => ({t['when']})" if t["when"] else "null" for t in by_hand) + "]"
    read = list(range(count)) if read is None else list(read)
    return (f"(text, ...values) => {{ const out = new Array({count}).fill(undefined); let set = {{}}; "
            f"const now = {{}}; "
            f"{json.dumps(read)}.forEach((i, k) => {{ if (k < values.length) now[i] = values[k]; }}); "
            "try { set = JSON.parse(text || '{}').set || {}; } catch (e) { set = {}; } "
            f"for (const [i, v] of Object.entries(set)) if (Number(i) < {count}) out[Number(i)] = v; "
            "const L = globalThis.vitvizLink, asked = L?.putIn ?? {}; "
            "const same = (a, b) => JSON.stringify(a) === JSON.stringify(b) || "
            "(a != null && b != null && typeof a !== 'object' && String(a) === String(b)); "
            "const shown = (i) => !(i in set) || !(i in now) || same(set[i], now[i]); "
            f"const table = {table}, whens = {whens}; "
            "const moved = ([i, key, built]) => !shown(i) && (!key || !!L?.touched?.(key) || "
            "!same(set[i], i in asked ? asked[i] : built)); "
            "const ask = table.map((t, k) => [t, whens[k]]).filter(([t]) => t.user.some(moved) "
            "&& t.change.every(shown)); "
            "for (const t of table) for (const [i] of t.user) if (i in set) asked[i] = set[i]; "
            "const doors = ask.filter(([, when]) => !when || when()).map(([t]) => t.door); "
            "if (doors.length) setTimeout(() => { for (const d of doors) window.vitvizDoors?.[d]?.(); }, 0); "
            "L?.settled?.(); return out; }")
