"""What every tab's events share: reading a view's settings from the form, showing it, and the page's glue.

A tab's events all follow one path: the form's raw values -> the view's declaration checks them -> the picture
through vitviz's intake -> ``vitviz.views.show`` -> the components. The API endpoints take the same path from
their typed parameters (:func:`vitviz.app.serving.endpoint`), so the page and the API cannot drift apart.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import gradio as gr
from PIL import Image

from vitviz.app import files, uploads
from vitviz.app.components import Form, figure_value
from vitviz.app.serving import bundle_file, friendly, on
from vitviz.specs.state import View
from vitviz.views import Shown, show

DECODE = dict(concurrency_id="decode", concurrency_limit=2)
"""Decoding uploads shares one small group: a crowd's large pictures are decoded two at a time."""


def signed(n: int, fn: Callable[..., Any], name: str, progress: bool = False, select: bool = False) -> Callable:
    """``fn`` behind ``n`` named positional inputs, then (when asked) what was clicked and gradio's progress
    tracker as the last arguments: gradio finds what to give a function in its signature, which ``*args`` hides.
    ValueErrors become messages."""
    params = [inspect.Parameter(f"input{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(n)]
    annotations: dict[str, Any] = {}
    if select:
        params.append(inspect.Parameter("evt", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=gr.SelectData))
        annotations["evt"] = gr.SelectData
    if progress:
        params.append(inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=gr.Progress()))

    def call(*args):
        return fn(*args)

    call.__signature__ = inspect.Signature(params)
    call.__annotations__ = annotations
    call.__name__ = call.__qualname__ = name
    return friendly(call)


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
        self.first = name == "patches"
        """The tab gradio selects by itself as a page mounts."""
        self.extras: dict[str, Any] = {}
        """Components the page itself sets on load (the registers button, say)."""
        self.on_open: Callable | None = None
        """For a tab without a picture: the event that shows it, run when the tab is selected or the page opens on it."""
        self.src = next((c for f, c in form.controls.items() if f.kind == "image"), None)
        self.key = gr.Textbox(visible="hidden", elem_id=f"{name}-image-key") if self.src is not None else None
        self.accepted = None
        if self.src is not None:  # a picture vitviz cannot use is cleared with a warning, not left broken
            self.accepted = on(self.src.change, self.accept, self.src, [self.src, self.key], **DECODE)
            self.key.change(None, self.key, None, js=f"(k) => window.vitvizLink?.image({name!r}, k)")

    def event(self, view: View, render: Callable[[Shown], tuple], outputs: list,
              needs_picture: bool = True) -> Callable:
        """A private page event for ``view``: the form's values, checked, shown; ``render(shown)`` gives the values
        of ``outputs`` (kept as the returned function's ``outputs``)."""
        def run(*args: Any):
            *inputs, progress = args
            picture, raw = self.form.values(view, tuple(inputs))
            if needs_picture and picture is None:
                return gr.skip()  # a setting changed before any picture: nothing to show yet
            values = view.check(raw)
            rgb = uploads.picture(picture) if needs_picture else None
            shown = show(view.name, rgb, values, progress=lambda f, msg: progress(f, desc=msg))
            out = render(shown)
            out = tuple(out) if isinstance(out, tuple) else (out,)
            out = tuple(figure_value(v) if isinstance(c, gr.Image) and isinstance(v, Image.Image) else v
                        for c, v in zip(outputs, out))  # figures carry their text alternatives
            return out if len(outputs) > 1 else out[0]

        fn = signed(len(self.form.inputs(view)), run, f"show_{view.name}", progress=True)
        fn.outputs = outputs
        return fn

    def accordion(self, view: View, box: gr.Accordion, triggers: list, figures: list[tuple[str, Any]] = (),
                  note: tuple[str, Any] | None = None, browser: list[tuple[str, Any]] = (), **kwargs: Any) -> None:
        """A view in an accordion: computed when the accordion opens (an open panel shows its answer) and when one of
        ``triggers`` fires. ``figures`` and ``note`` pair a name in the view's answer with its component: the figures,
        and the text shown after the notice and the reasons for changed settings; ``browser`` pairs a name in the
        answer's ``data`` with the browser view that draws it."""
        narrowed = [f for f in view.fields if f.follows and isinstance(self.form.controls.get(f), gr.Slider)]
        outputs = ([c for _, c in browser] + [c for _, c in figures] + ([note[1]] if note is not None else [])
                   + [self.form[f] for f in narrowed])

        def render(sh: Shown) -> tuple:
            out = [sh.data.get(name) for name, _ in browser]
            out += [figure_value(sh.figures.get(name)) for name, _ in figures]
            if note is not None:
                out.append(self.note_text(sh) + sh.texts.get(note[0], ""))
            out += [narrow(f, sh) for f in narrowed]
            return tuple(out)

        event = self.event(view, render, outputs, needs_picture=any(f.kind == "image" for f in view.fields))
        kwargs.setdefault("trigger_mode", "always_last")
        on([box.expand] + triggers, event, self.form.inputs(view), outputs, **kwargs)

    def answer_triggers(self, triggers: list) -> list:
        """``triggers`` and the picture's arrival (after it was checked)."""
        return triggers + ([self.accepted.success] if self.accepted is not None else [])

    def quiet(self, fn: Callable[[Any, dict], Any], view: View) -> Callable:
        """A follow-up step: ``fn(picture as sent, checked settings)``, skipped without a picture."""
        def call(*args):
            picture, raw = self.form.values(view, args)
            return gr.skip() if picture is None else fn(picture, view.check(raw))

        return signed(len(self.form.inputs(view)), call, getattr(fn, "__name__", "follow_up"))

    @staticmethod
    def accept(picture: Any, request: gr.Request = None):
        """The picture's check before a tab's work: one that vitviz cannot use is cleared with a warning; one it can
        use is held for this page while the page is open (:mod:`vitviz.app.files`)."""
        if picture is None:
            return gr.skip(), ""
        try:
            uploads.picture(picture)
        except ValueError as err:
            gr.Warning(str(err), title="Cannot use this picture")
            return None, ""
        path = uploads.path_of(picture)
        if path is not None and request is not None and request.session_hash:
            files.PICTURES.hold(request.session_hash, path)
        return gr.skip(), uploads.image_key(picture)

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
        made = on(button.click, signed(len(inputs), bundle, f"bundle_{view.name}"), inputs, files, **kwargs)
        on(made.success, lambda: gr.File(visible=True), None, files)

    @staticmethod
    def note_text(shown: Shown) -> str:
        """The notice and the reasons for changed settings, as a paragraph before a view's own text."""
        note = shown.note()
        return f"{note}\n\n" if note else ""

    @staticmethod
    def reveal(selector: str) -> str:
        """JavaScript for a UI-only step: on a phone, scroll the result into view after the control that asked."""
        return f"() => window.vitvizLink?.reveal({selector!r})"

    def remember_in_link(self, views: tuple[View, ...]) -> None:
        """Every control of these views writes its setting into the page's link (defaults left out)."""
        done = set()
        for view in views:
            for f in view.settings():
                if f in done or f not in self.form.controls or f.link is None:
                    continue
                done.add(f)
                default = f.to_link(None) if f.default is None else str(f.default)
                self.form[f].change(None, self.form[f], None,
                                    js=f"(v) => window.vitvizLink?.setting({f.link!r}, v, {default!r})")

    def opens(self, models_available: Callable[[], dict], opened: gr.State) -> None:
        """Opening the tab shows it computed: its example when it has no picture yet, or its view (no picture).

        gradio also selects the first tab by itself when a page mounts, before the page's load event has read
        the link (``opened`` is still empty then): when the link opens another tab, that select is ignored.
        """
        if self.src is not None:
            on(self.gr_tab.select, self.opener(models_available), [self.src, opened], self.src, queue=False)
        elif self.on_open is not None:
            fn, inputs, outputs = self.on_open
            on(self.gr_tab.select, fn, inputs, outputs, trigger_mode="always_last")

    def open_on_load(self, loaded, opened: gr.State) -> None:
        """A tab without a picture is shown when the page opens on it (its link's tab): the load event's tab switch
        does not always reach the tab's own select (not on a phone's wrapped tabs)."""
        if self.on_open is None:
            return
        fn, inputs, outputs = self.on_open
        name = self.name

        def when_opened(*args):
            return fn(*args[1:]) if args[0] == name else gr.skip()

        when_opened.__signature__ = inspect.Signature(
            [inspect.Parameter("opened", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            + list(inspect.signature(fn).parameters.values()))
        on(loaded.then, when_opened, [opened] + inputs, outputs)

    def opener(self, models_available: Callable[[], dict]) -> Callable:
        """UI only: whenever the tab is opened without a picture, it gets its example (which starts its work).

        Decided here, from the server's own knowledge of what is available, so a click during the page's load
        (before anything else has run) opens the tab computed too.
        """
        def open_tab(picture, opened, request: gr.Request):
            linked = (dict(request.query_params) if request is not None else {}).get("tab") or "patches"
            if picture is not None or (opened is None and linked != self.name and self.first):
                return gr.skip()  # a picture already, or the first tab selected as the page mounts
            return uploads.example(self.example(models_available()))
        return open_tab

    def example(self, available: dict) -> str:
        """The example this tab opens on: a scene the offline model knows when its own model cannot be had."""
        if self.model_field is not None and self.offline_default and not available.get(self.model_field.default,
                                                                                          False):
            return self.offline_default
        return self.default
