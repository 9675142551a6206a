"""What every tab's events share: reading a view's settings from the form, showing it, and the page's glue.

A tab's events all follow one path: the form's raw values -> the view's declaration checks them -> the picture
through vitviz's intake -> ``vitviz.views.show`` -> the components. The API endpoints take the same path from
their typed parameters (:func:`vitviz.app.serving.endpoint`), so the page and the API cannot drift apart.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any, Callable

import gradio as gr
from PIL import Image

from vitviz.app import files, uploads
from vitviz.app.components import Form, door, figure, figure_value, folded, open_door
from vitviz.app.serving import bundle_file, by_hand, endpoints, friendly, on, queue_of
from vitviz.core import owned
from vitviz.specs import tabs as declared_tabs
from vitviz.specs.state import View
from vitviz.views import Record, Shown, records_of, show

LAYOUTS: dict[str, Callable[[gr.Tab], "Tab"]] = {}
"""Each declared tab's layout (:mod:`vitviz.specs.tabs`), by its id: the function ``@layout`` marks."""


def layout(tab_id: str) -> Callable:
    """Mark the decorated ``build(gr_tab) -> Tab`` as the layout of the declared tab ``tab_id``: the app finds it
    in its package (no list names it) and calls it inside that tab."""

    def mark(build: Callable[[gr.Tab], "Tab"]) -> Callable[[gr.Tab], "Tab"]:
        if tab_id in LAYOUTS and LAYOUTS[tab_id] is not build:
            raise ValueError(f"two layouts for the tab {tab_id!r}")
        LAYOUTS[tab_id] = build
        return build

    return mark


DECODE = dict(concurrency_id="decode", concurrency_limit=2)
"""Decoding uploads shares one small group: a crowd's large pictures are decoded two at a time."""


def by_component(inputs: list, fn: Callable[..., Any], name: str, progress: bool = False,
                 request: bool = False) -> Callable:
    """``fn`` as an event of gradio's documented dictionary form: given ``set(inputs)``, gradio calls it with one
    ``{component: value}`` dict (then the request and the progress tracker, which gradio finds in the signature);
    ``fn`` gets the values in the order of ``inputs``, then (when asked) the request and the tracker. ValueErrors
    become messages. The returned function's ``inputs`` is the set to register it with."""
    order = list(inputs)

    def values_of(values: dict) -> list:
        return [values[c] for c in order]

    if request:
        def call(values: dict, request: gr.Request, progress=gr.Progress()):
            return fn(*values_of(values), request, progress)
    elif progress:
        def call(values: dict, progress=gr.Progress()):
            return fn(*values_of(values), progress)
    else:
        def call(values: dict):
            return fn(*values_of(values))
    call.__name__ = call.__qualname__ = name
    made = friendly(call)
    made.inputs = set(order)
    return made


def opening(event: Callable, is_open: gr.State) -> Callable:
    """``event`` (made by :meth:`Tab.event` with ``gate=is_open``) for its panel's opening: it answers as open and
    sets the flag (its first output) in the same event."""
    def call(values: dict, request: gr.Request, progress=gr.Progress()):
        return (True, *event({**values, is_open: True}, request, progress))

    call.__name__ = call.__qualname__ = event.__name__
    return call


_HAND_DOORS = itertools.count()  # names the doors of Tab.by_hand
_told: dict[str, tuple[str, float]] = {}
_told_lock = threading.Lock()
owned.keep("tab.told", "results", _told, "what each page was last told", owned.cleared_under(_told_lock, _told))


def _first_time(page: str | None, message: str, within: float = 5.0) -> bool:
    """Whether page ``page`` has not been told ``message`` in the last ``within`` seconds (several triggers of one
    action, queued together, are refused once each: the page hears it once)."""
    if page is None:
        return True
    now = time.monotonic()
    with _told_lock:
        said = _told.get(page)
        _told[page] = (message, now)
        if len(_told) > 4096:  # pages that left: forget the oldest
            for key in sorted(_told, key=lambda k: _told[k][1])[:1024]:
                _told.pop(key, None)
    return not (said and said[0] == message and now - said[1] < within)


def narrow(field, shown: Shown):
    """A ``follows`` slider brought to the range of what is shown (the picture's grid, the model's layers and
    heads) and to the value used; unchanged when the answer set no bound for it."""
    settled = shown.settled
    if settled is None or field.name not in settled.bounds:
        return gr.skip()
    return gr.Slider(maximum=settled.bounds[field.name], value=settled.values[field.name])


class Tab:
    """One tab: its form, the box where its notices go, the example it opens on, and its events' glue."""

    def __init__(self, name: str, form: Form, note: gr.Markdown, gr_tab: gr.Tab, default: str | None = None,
                 offline_default: str | None = None, model_field=None) -> None:
        self.name, self.form, self.note, self.gr_tab = name, form, note, gr_tab
        self.default, self.offline_default, self.model_field = default, offline_default, model_field
        self.first = name == declared_tabs.FIRST
        """The tab gradio selects by itself as a page mounts."""
        self.laid_out: set[str] = set()
        """The views this tab's own layout shows (the others get a panel of their own: :meth:`finish`)."""
        self.extras: dict[str, Any] = {}
        """Components the page itself sets on load (the registers button, say)."""
        self.on_open: Callable | None = None
        """For a tab without a picture: the event that shows it, run when the tab is selected or the page opens on it."""
        self.relink = gr.Textbox(visible="hidden", elem_id=f"{name}-relink")
        """Settings a refused value set back, as JSON for the page's link (which follows them)."""
        self.relink.change(None, self.relink, None, js="(t) => window.vitvizLink?.restore(t)")
        self.src = next((c for f, c in form.controls.items() if f.kind == "image"), None)
        self.key = gr.Textbox(visible="hidden", elem_id=f"{name}-image-key") if self.src is not None else None
        self.accepted = None
        if self.src is not None:  # a picture vitviz cannot use is refused with one warning; the last good one stays
            self.kept = gr.State(None)
            # gradio's image box reports a new value twice in a row (the same picture): one check, one warning.
            # Every new picture is checked but one a link's opener set and named (an example, or a picture this
            # server holds: checked when it came; the opener keeps it as the last good one): the page tells
            # (vitvizLink.named, once the link's settings, its name among them, are in): one event less
            check = door(f"{name}-picture-check")
            self.accepted = on(check.click, self.accept, [self.src, self.kept], [self.src, self.key, self.kept],
                               trigger_mode="once", **DECODE)
            self.src.change(None, self.src, None, js=f"(p) => {{ const L = window.vitvizLink; "
                            f"if (!L?.settling()) {open_door(check.elem_id)}; else L.named(p, {self.key.elem_id!r})"
                            f".then((named) => named || {open_door(check.elem_id)}); return []; }}")
            self.key.change(None, self.key, None, js=f"(k) => window.vitvizLink?.image({name!r}, k)")

    def event(self, view: View, render: Callable[[Shown], tuple], outputs: list,
              needs_picture: bool = True, shows: str | None = None, only: frozenset[str] | None = None,
              gate: gr.State | None = None) -> Callable:
        """A private page event for ``view``: the form's values, checked, shown (by the view function ``shows``,
        the view's own by default); ``render(shown)`` gives the values of ``outputs``. The returned function keeps
        what it reads and writes: ``inputs`` (the form's controls for the view, then ``last``), ``outputs``
        (``outputs``, then the view's other controls, then ``last``) and ``last``, a state holding the inputs of the
        answer on screen (``given``: follow-up events read it, so they always match it) and the last values refused
        (``refused``: the same values refused again by queued triggers are not announced twice).

        A value vitviz refuses (a setting out of what the picture allows, a picture it cannot use) gets one warning,
        and the view stays consistent: its answers untouched, and its controls set back to the values of the answer
        on screen (no error badges, no summary left from one setting beside a control showing another).

        ``only`` names the figures wanted (the view skips the rest); with ``gate`` (a state, read after ``last``)
        the event does nothing while it is false (a closed panel)."""
        self.laid_out.add(shows or view.name)
        last = gr.State(None)
        form_inputs = self.form.inputs(view)
        controls = [c for c in form_inputs if c is not self.form.carrier]
        extra = [c for c in controls if c not in outputs]
        every = list(outputs) + extra + [self.relink, last]

        def run(*args: Any):
            *given, kept, request, progress = args
            if gate is not None:
                kept, is_open = given.pop(), kept
                if not is_open:  # a closed panel draws nothing
                    return tuple(gr.skip() for _ in every)
            page = getattr(request, "session_hash", None)
            previous = (kept or {}).get("given")  # the inputs of the answer on screen
            picture, raw = self.form.values(view, tuple(given))
            if needs_picture and picture is None:  # a setting changed before any picture: nothing to show yet
                return tuple(gr.skip() for _ in every)
            if previous is not None and list(given) == previous and not (kept or {}).get("refused"):
                # the answer on screen is this one: triggers firing together (a link setting several controls,
                # a picture and its settings) ran it already, and the page has nothing to redraw
                return tuple(gr.skip() for _ in every)
            def answer(raw: dict):
                rgb = uploads.picture(picture) if needs_picture else None
                return show(shows or view.name, rgb, view.check(raw), progress=lambda f, msg: progress(f, desc=msg),
                            only=only, reuse=True)

            reset = None
            try:
                shown = answer(raw)
            except ValueError as err:
                said = (kept or {}).get("refused") == [picture, raw]  # the same values again (queued triggers)
                said = said or not _first_time(page, str(err))
                if previous is not None:
                    return self.refused(err, previous, form_inputs, every, view, said, [picture, raw])
                try:  # nothing on screen yet (a link with a setting this picture refuses): the declared defaults
                    reset = {f.name: f.default for f in view.settings() if f in self.form.controls}
                    shown = answer({**raw, **reset})
                except ValueError:
                    return self.refused(err, previous, form_inputs, every, view, said, [picture, raw])
                if not said:
                    gr.Warning(f"{err} The view opens with its default settings instead.", title="Cannot use this")
                refused_now = [picture, raw]
                given = [reset[f.name] if f is not None and f.name in reset else v
                         for f, v in zip(self._fields_of(view), given)]
            out = render(shown)
            out = tuple(out) if isinstance(out, tuple) else (out,)
            out = tuple(figure_value(v) if isinstance(c, gr.Image) and isinstance(v, Image.Image) else v
                        for c, v in zip(outputs, out))  # figures carry their text alternatives
            if reset is not None:  # the controls and the link show the defaults the answer used
                out = tuple(v if c not in form_inputs or c is self.form.carrier else given[form_inputs.index(c)]
                            for c, v in zip(outputs, out))
                relink = json.dumps({"at": time.time(), "keys": self._link_of(view, reset)})
                return out + tuple(gr.skip() if isinstance(c, gr.Image) else given[form_inputs.index(c)]
                                   for c in extra) + (relink, {"given": list(given), "refused": refused_now})
            return out + tuple(gr.skip() for _ in extra) + (gr.skip(), {"given": list(given)})

        extra_in = [last] + ([gate] if gate is not None else [])
        fn = by_component(form_inputs + extra_in, run, f"answer_{shows or view.name}", progress=True, request=True)
        fn.outputs, fn.last = every, last
        return fn

    def refused(self, err: ValueError, previous: list | None, form_inputs: list, every: list,
                view: View, said: bool = False, what: list | None = None) -> tuple:
        """One warning for a refused value; of ``every`` output, the controls set back to the values ``previous``
        (the inputs of the answer on screen) held, the link re-written with them, and the rest left as they are
        (nothing set back before any answer)."""
        had = previous is not None
        if not said:  # the same refused values once more (several triggers queued at once): said once already
            gr.Warning(f"{err}" + (" The view keeps what it showed before, with its settings." if had else ""),
                       title="Cannot use this")
        back = []
        for c in every:
            if c is every[-1]:  # the state: the answer on screen stays, and what was refused is remembered
                back.append({"given": previous, "refused": what})
                continue
            if c is self.relink and had:
                _, raw = self.form.values(view, tuple(previous))
                back.append(json.dumps({"at": time.time(), "keys": self._link_of(view, raw)}))
            elif not had or c not in form_inputs or c is self.form.carrier:  # the browser holds the carrier's
                back.append(gr.skip())
            else:
                value = previous[form_inputs.index(c)]
                back.append(uploads.path_of(value) if isinstance(c, gr.Image) else value)
        return tuple(back)

    def _fields_of(self, view: View) -> list:
        """The field behind each of ``self.form.inputs(view)`` (None for the carrier)."""
        fields = [f for f in view.fields if f in self.form.controls]
        return fields + ([None] if any(f in self.form.browser for f in view.fields) else [])

    def _link_of(self, view: View, raw: dict) -> dict:
        """The link's text for each of ``view``'s settings with a control (None: left out, the default)."""
        out = {}
        for f in view.settings():
            if f.link and f in self.form.controls and f.name in raw:
                try:
                    out[f.link] = f.to_link(f.check(raw[f.name]))
                except ValueError:
                    continue
        return out

    def follow(self, fn: Callable[[Any, dict], Any], event: Callable, view: View) -> Callable:
        """A follow-up of ``event``: ``fn(picture as sent, checked settings)`` for the answer on screen (read from
        ``event.last``: after a refused value, the answer that stayed), skipped before any answer."""
        def call(last):
            if not last or last.get("given") is None:
                return gr.skip()
            picture, raw = self.form.values(view, tuple(last["given"]))
            return gr.skip() if picture is None and any(f.kind == "image" for f in view.fields) else \
                fn(picture, view.check(raw))

        call.__name__ = getattr(fn, "__name__", "follow_up")
        return friendly(call)

    def accordion(self, view: View, box: gr.Accordion, triggers: list, figures: list[tuple[str, Any]] = (),
                  note: tuple[str, Any] | None = None, browser: list[tuple[str, Any]] = (),
                  texts: list[tuple[str, Any]] = (), only: frozenset[str] | None = None, gallery: Any = None,
                  **kwargs: Any) -> None:
        """A view in an accordion: computed when the accordion opens (an open panel shows its answer) and, while it is
        open, when one of ``triggers`` fires, its picture arrives or the tab's model changes (a closed panel costs
        nothing). ``figures`` and ``note`` pair a name in the view's answer with its component: the figures, and the
        text shown after the notice and the reasons for changed settings; ``texts`` pair other texts with theirs;
        ``browser`` pairs a name in the answer's ``data`` with the browser view that draws it; ``only`` names the
        figures to draw; a ``gallery`` shows every figure the view draws."""
        if not box.elem_id:  # a section a link can open (?open=<view>) and a lesson's step can name
            box.elem_id = f"{view.name}-box"
        narrowed = [f for f in view.fields if f.follows and isinstance(self.form.controls.get(f), gr.Slider)]
        outputs = ([c for _, c in browser] + [c for _, c in figures] + ([note[1]] if note is not None else [])
                   + [c for _, c in texts] + [self.form[f] for f in narrowed] + ([gallery] if gallery else []))

        def render(sh: Shown) -> tuple:
            out = [sh.data.get(name) for name, _ in browser]
            out += [figure_value(sh.figures.get(name)) for name, _ in figures]
            if note is not None:
                out.append(self.note_text(sh) + sh.texts.get(note[0], ""))
            out += [sh.texts.get(name, "") for name, _ in texts]
            out += [narrow(f, sh) for f in narrowed]
            if gallery is not None:
                out.append([(image, name) for name, image in sh.figures.items()])
            return tuple(out)

        is_open = gr.State(False)
        needs_picture = any(f.kind == "image" for f in view.fields)
        event = self.event(view, render, outputs, needs_picture=needs_picture, only=only, gate=is_open)
        # while open, a new picture (once checked) or another model of the tab's redraws it too: a link can open
        # the panel before its picture is set (its first answer then had none to draw)
        follows = [self.key.change] if needs_picture and self.key is not None else []
        if self.model_field is not None and self.model_field in view.fields and self.model_field in self.form.controls:
            follows.append(self.form[self.model_field].change)
        triggers = [*triggers, *(t for t in follows if t not in triggers)]  # (bound events compare equal)
        kwargs.setdefault("trigger_mode", "always_last")
        # opening it marks it open and answers in one event (each event costs the page in proportion to its
        # components: a flag set first, then the answer asked, was two)
        on(box.expand, opening(event, is_open), event.inputs, [is_open, *event.outputs], **kwargs)
        on(box.collapse, lambda: False, None, is_open, queue=False)
        if triggers:
            self.while_open(box.elem_id, triggers, event, event.inputs, event.outputs, opened=is_open, **kwargs)

    @staticmethod
    def while_open(box_id: str, triggers: list, fn: Callable, inputs: Any, outputs: Any, name: str = "refresh",
                   opened: gr.State | None = None, **kwargs: Any) -> None:
        """``fn`` asked of the server when one of ``triggers`` fires, only while the accordion ``#box_id`` is open:
        a closed one sends nothing (each event sent costs the page in proportion to its components). ``opened``:
        the server's flag for the panel being open (``fn`` draws nothing while it is false), set first: the page
        saw it open, whatever order gradio's expand and collapse came in as the tab mounted (a collapse after the
        expand, with the panel on screen open, left it false and the panel blank)."""
        Tab.relay(f"{box_id}-{name}", triggers, fn, inputs, outputs,
                  when=f"document.querySelector('#{box_id} > .label-wrap.open')", opened=opened, **kwargs)

    @staticmethod
    def relay(name: str, triggers: list, fn: Callable, inputs: Any, outputs: Any, when: str, delay: int = 0,
              opened: gr.State | None = None, after_link: bool = False, tab: str | None = None,
              **kwargs: Any) -> None:
        """``fn`` asked of the server when one of ``triggers`` fires and the page's JavaScript expression ``when``
        holds (read ``delay`` ms later): a script-only event, which costs the page nothing, opens a door (id
        ``name``: :func:`~vitviz.app.components.door`) whose event asks. A trigger is a component's event, or an
        event's ``.success``/``.then``. ``after_link``: while a link is being opened (the server's opener asked,
        its settings not yet put into the controls: ``vitvizLink.settling``), ``when`` is read only ``delay`` ms
        after they are, so it sees what the link's settings asked (on a busy page that can take longer than any
        fixed delay). ``tab``: the door opens only while that tab is shown, else when it is next shown and ``when``
        still holds then, read once a link that shows it has put its settings in (``vitvizLink.whenShown``: a link
        within the page that changes an unseen tab's settings costs nothing now, and a link that shows the tab with
        a new answer, which draws the same figures, asks them once: never after the tab's answer was asked since
        the trigger, or since the link that fired it began to open)."""
        trigger = door(name).click
        if opened is not None:  # (:meth:`while_open`)
            trigger = on(trigger, lambda: True, None, opened, queue=False).then
        on(trigger, fn, inputs, outputs, **kwargs)
        press = f"if ({when}) {open_door(name)};"
        if tab is not None:
            press = (f"if ({when}) {{ if (window.vitvizLink) window.vitvizLink.whenShown({json.dumps(tab)}, "
                     f"{json.dumps(name)}, () => ({when}), since); else {open_door(name)}; }}")
        later = press if not delay else f"setTimeout(() => {{ {press} }}, {delay});"
        if after_link:
            later = (f"const go = () => {{ if (window.vitvizLink?.settling?.()) return setTimeout(go, 20); {later} }}; "
                     "go();")
        # since: when this was asked (a link's own start while one is being opened: an answer the link asks
        # after it draws what this would)
        since = ("const since = window.vitvizLink?.settling?.() ? window.vitvizLink.openedAt() : performance.now(); "
                 if tab is not None else "")
        js = f"() => {{ {since}{later} return []; }}"
        events = [t for t in triggers if hasattr(t, "has_trigger")]
        if events:
            on(events, None, None, None, api_visibility="private", js=js)
            by_hand(name, events, when)  # a link's settings fire no slider's release: the page opens the door
        for after in (t for t in triggers if not hasattr(t, "has_trigger")):
            after(None, None, None, js=js)

    def finish(self) -> None:
        """What every tab ends with, from the records of its views (:data:`vitviz.views.RECORDS`): a panel of its
        own for each view the tab's layout does not show, each view's endpoint (and its bundle's), and every
        control writing the page's link."""
        mine = records_of(self.name)
        for r in mine:
            if r.name not in self.laid_out:
                self.panel(r)
        endpoints(mine)
        self.remember_in_link(tuple(r.view for r in mine))

    def panel(self, r: Record, triggers: list = ()) -> None:
        """View ``r`` in an accordion of its own at the end of the tab: its settings' controls (those the tab has
        not already), a note, and its figures (``r.figures``, or a gallery of whatever it draws); it is computed
        again, while open, when one of its controls or of ``triggers`` changes."""
        with gr.Accordion(r.view.title[:1].upper() + r.view.title[1:], open=False, elem_id=f"{r.name}-box") as box:
            new = [f for f in r.view.settings() if f not in self.form.controls and f not in self.form.browser]
            controls = [self.form.add(f) for f in new]
            note = gr.Markdown(elem_classes="vx-table")
            if r.figures:
                figures = [(name, figure(f"{r.name}-{name}")) for name in r.figures]
            else:
                figures = []
                gallery = gr.Gallery(show_label=False, label=r.view.title, elem_id=f"{r.name}-figures",
                                     columns=1, object_fit="contain", format="png")
        kwargs = queue_of(r)
        triggers = [c.change for c in controls] + list(triggers)
        if r.figures:
            self.accordion(r.view, box, triggers, figures, ("text", note), **kwargs)
        else:
            self.accordion(r.view, box, triggers, [], ("text", note), gallery=gallery, **kwargs)

    def answer_triggers(self, triggers: list) -> list:
        """``triggers`` and the picture's arrival (after it was checked: the link's name for it changes), for one
        event (``gr.on``): triggers that fire together queue one answer, not one each."""
        return self.by_hand(triggers + ([self.key.change] if self.key is not None else []))

    @staticmethod
    def by_hand(triggers: list) -> list:
        """``triggers`` and, when a person's hand on a control is among them (a slider's ``release``), a door the
        page opens when a link within the page changes that control (a script's value fires no ``release``:
        :func:`~vitviz.app.serving.by_hand`)."""
        name = f"by-hand-{next(_HAND_DOORS)}"
        if by_hand(name, triggers):
            return [*triggers, door(name).click]
        return triggers

    @staticmethod
    def accept(picture: Any, kept: Any = None, request: gr.Request = None):
        """The picture's check before a tab's work. One that vitviz cannot use is refused with a warning and the
        picture shown before it comes back (its answers are still on the page: picture and answers stay together);
        one it can use is kept as the page's last good picture and held while the page is open
        (:mod:`vitviz.app.files`). Returns (the picture box, the link's name for the picture, the last good one)."""
        if picture is None:
            return gr.skip(), "", gr.skip()
        if isinstance(kept, dict) and kept.get("refused") == uploads.path_of(picture):
            return gr.skip(), gr.skip(), gr.skip()  # the same refused picture reported again: said once already
        try:
            uploads.picture(picture)
        except ValueError as err:
            back = uploads.path_of(kept)
            # told once per page, whoever checks the picture first (this check run twice before its state came
            # back, or an answer's own check: they share the key)
            if _first_time(getattr(request, "session_hash", None), str(err)):
                gr.Warning(str(err) + (" The picture before it is shown again." if back else ""),
                           title="Cannot use this picture")
            return back, uploads.link_name(kept) if back else "", {**(kept or {}), "refused": uploads.path_of(picture)}
        path = uploads.path_of(picture)
        if path is not None and request is not None and request.session_hash:
            files.PICTURES.hold(request.session_hash, path)
        return gr.skip(), uploads.link_name(picture), picture

    def download(self, view: View, button: gr.Button, files: gr.File, **kwargs: Any) -> None:
        """'Download this view': the bundle of exactly what the form (and the browser view) holds; the file box
        appears afterwards (a UI-only step)."""
        def bundle(*args):
            picture, raw = self.form.values(view, args)
            values = view.check(raw)
            return bundle_file(view.name, values, None if picture is None else uploads.picture(picture)).path

        inputs = self.form.inputs(view)
        if self.form.carrier is not None and self.form.carrier in inputs:  # the settings on screen at the click
            kwargs["js"] = ("(...a) => { const h = window.vitvizState?.get(%r); if (h) a[a.length - 1] = "
                            "JSON.stringify(h); return a; }" % view.name)
        bundle.__name__ = bundle.__qualname__ = f"download_{view.name}"
        made = on(button.click, friendly(bundle), inputs, files, **kwargs)  # in order: the script sets the last
        on(made.success, lambda: gr.File(visible=True), None, files)

    def note_text(self, shown: Shown) -> str:
        """The notice and the reasons for changed settings, as a paragraph before a view's own text; first, when the
        page chose a stand-in for a model it cannot have (offline), which and why."""
        parts = [self.offline_reason(shown), shown.note()]
        note = "\n\n".join(p for p in parts if p)
        return f"{folded(note)}\n\n" if note else ""

    def offline_reason(self, shown: Shown) -> str:
        """Why the answer comes from a shapes-only model the page chose itself (its own model cannot be had here),
        said first; empty when the model asked for is the one shown, or when the stand-in was chosen on purpose."""
        from vitviz.models import cache as models
        from vitviz.specs import registry

        settled = shown.settled
        if settled is None:
            return ""
        available, said = models.available_now(), []
        for f in self.form.controls:
            if f.kind != "choice" or f.default not in registry.REGISTRY or f.name not in settled.values:
                continue
            used = settled.values[f.name]
            if used in registry.SHAPES_ONLY and used != f.default and not available.get(f.default, False) \
                    and not any(f.default in line for line in said):  # two model lists of one tab, one default
                said.append(f"**Offline here: {f.default} cannot be had** (no connection to the model hub, and its "
                            f"weights are not in this computer's cache), so the page shows **{used}**, which vitviz "
                            "trained itself on generated shapes. Its numbers are real, but it knows only the shape "
                            "scenes.")
        return "\n\n".join(said)

    @staticmethod
    def used(field, shown: Shown):
        """A slider showing the value ``field`` actually had in ``shown``, with the reason when it differs from what
        was asked (and fixed when it could have no other value: a model that runs at one size)."""
        settled = shown.settled
        if settled is None or field.name not in settled.values:
            return gr.skip()
        fixed = field.name in settled.fixed
        return gr.Slider(value=settled.values[field.name], interactive=not fixed,
                         info=settled.notes.get(field.name) or settled.fixed.get(field.name) or None)

    @staticmethod
    def reveal(selector: str) -> str:
        """JavaScript for a UI-only step: on a phone, scroll the result into view after the control that asked."""
        return f"() => window.vitvizLink?.reveal({selector!r})"

    def remember_in_link(self, views: tuple[View, ...]) -> None:
        """Every control of these views writes its setting into the page's link when a person changes it (defaults
        left out; the page shows only the open tab's settings in the address). The link holds what was asked for,
        not what the page had to use instead: a stand-in model chosen offline, or the 64 px a shapes model runs at,
        are shown on the controls but not pinned, so the link opened online gets the real model at its own size.
        What sets controls for a person (an example, a button) or sets them back (a refused value) re-writes the
        link with :meth:`relink_after` and :meth:`refused`."""
        done = set()
        for view in views:
            for f in view.settings():
                if f in done or f not in self.form.controls or f.link is None:
                    continue
                done.add(f)
                self.form[f].input(None, self.form[f], None, js=f"(v) => window.vitvizLink?.setting({f.link!r}, v, "
                                                                 f"{self._link_default(f)!r})")

    @staticmethod
    def _link_default(f) -> str:
        return f.to_link(None) if f.default is None else str(f.default)

    def relink_after(self, event, fields: list) -> None:
        """After ``event`` (an example clicked, a button that sets controls), the link holds those ``fields``."""
        keyed = [f for f in fields if f.link and f in self.form.controls]
        calls = "; ".join(f"L.setting({f.link!r}, v{i}, {self._link_default(f)!r})" for i, f in enumerate(keyed))
        args = ", ".join(f"v{i}" for i in range(len(keyed)))
        event.then(None, [self.form[f] for f in keyed], None,
                   js=f"({args}) => {{ const L = window.vitvizLink; if (L) {{ {calls}; }} }}")

    def opens(self, models_available: Callable[[], dict], opened: gr.State) -> None:
        """Opening the tab shows it computed: its example when it has no picture yet, or its view (no picture).

        Decided in the browser first (``page.js``, ``vitvizLink.selected``): gradio's own select of the first tab
        as a page mounts (when the link opens another tab), the tab the page selects for a link it opens (the
        server's opener shows it) and a tab the device computes on a device page (this select turns its switch
        on) ask the server nothing; otherwise the tab's door asks the server, which decides again for a tab with a
        picture (``opened`` is still empty before the page's load event has read the link)."""
        press = None
        if self.src is not None:
            press = door(f"{self.name}-open")
            on(press.click, self.opener(models_available), [self.src, opened], self.src, queue=False)
        elif self.on_open is not None:  # asked through the page too: a tab the link's opening selects is shown
            # by the opener's event (:meth:`open_on_load`), not once more here
            fn, inputs, outputs = self.on_open
            press = door(f"{self.name}-open")
            on(press.click, fn, inputs, outputs, trigger_mode="always_last")
        target = f"{self.name}-open" if press is not None else None
        call = f"window.vitvizLink?.selected({json.dumps(self.name)}, {json.dumps(target)})"
        device = declared_tabs.TABS[self.name].device
        switch = self.extras.get(device) if device else None
        if switch is None:
            self.gr_tab.select(None, None, None, js=f"() => {call}")
        else:  # on a page computed on this device, the tab's switch turned on by this event (gradio sets its
            # value: a click on the box while the tab is still being drawn is lost)
            self.gr_tab.select(None, switch, switch, js=f"(on) => {call} ? [true] : [on]")

    def open_on_load(self, loaded, opened: gr.State) -> None:
        """A tab without a picture is shown when the page opens on it (its link's tab): the load event's tab switch
        does not always reach the tab's own select (not on a phone's wrapped tabs). Decided in the browser from
        the link, as the load event decides: a page opened on another tab sends the server nothing for it, nor
        does one whose link set a setting of the tab (that change asked the tab's answer: :attr:`asked`), nor one
        that shows the tab's answer already (the settings the link left out are those on screen)."""
        if self.on_open is None:
            return
        fn, inputs, outputs = self.on_open
        name = self.name

        def when_opened(values: dict, request: gr.Request, progress=gr.Progress()):
            return fn(values, request, progress) if values[opened] == name else gr.skip()

        asked = f"(window.vitvizLink?.askedAt({name!r}) ?? -1e9)"
        self.relay(f"{name}-opened", [loaded.then], when_opened, {opened} | set(inputs), outputs, delay=50,
                   after_link=True,
                   when=f"new URLSearchParams(location.search).get('tab') === {name!r} && "
                        f"!document.querySelector({declared_tabs.TABS[name].shows!r}) && "
                        f"performance.now() - {asked} > 5000")

    @property
    def asked(self) -> str:
        """The script of an event that asks the tab's answer (its ``js``): it notes when, for :meth:`open_on_load`."""
        return f"(...a) => {{ window.vitvizLink?.asked({self.name!r}); return a; }}"

    def opener(self, models_available: Callable[[], dict]) -> Callable:
        """UI only: whenever the tab is opened without a picture, it gets its example (which starts its work).

        Decided here, from the server's own knowledge of what is available, so a click during the page's load
        (before anything else has run) opens the tab computed too.
        """
        def open_tab(picture, opened, request: gr.Request):
            q = dict(request.query_params) if request is not None else {}
            linked = q.get("tab") or "patches"
            if picture is not None or (opened is None and linked != self.name and self.first):
                return gr.skip()  # a picture already, or the first tab selected as the page mounts
            if declared_tabs.TABS[self.name].device and q.get("device") == "1":
                return gr.skip()  # computed on the device: the server computes nothing for this page
            return uploads.example(self.example(models_available()))
        return open_tab

    def example(self, available: dict) -> str:
        """The example this tab opens on: a scene the offline model knows when its own model cannot be had."""
        if self.model_field is not None and self.offline_default and not available.get(self.model_field.default,
                                                                                          False):
            return self.offline_default
        return self.default
