"""The app's building blocks: one control per declared setting, figures, explanations and the browser views.

A tab's :class:`Form` holds one control per :class:`~vitviz.specs.state.Field` (a field shared by several views of
the tab is one control) and, for the settings a browser view holds (the attention explorer's layer, head,
threshold, opacity, colormap and pinned patch), one *carrier*: a hidden element the browser view writes its state
into, so that the server's figures, the download and the link follow what is on screen. No component subclasses:
events take raw values (``preprocess=False``) and the declared checks read them.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from vitviz import assets
from PIL import Image

from vitviz.app import serving, uploads
from vitviz.render import plotting, web
from vitviz.specs import tabs as declared_tabs
from vitviz.specs.state import Field, View

WEB = Path(web.__file__).resolve().parent
"""The browser views' scripts and styles, inside the installed package."""


def image_input(label: str = "Image") -> gr.Image:
    """The picture: upload, webcam or clipboard. Events read the file as sent and vitviz's intake decodes it."""
    return gr.Image(label=label, type="filepath", image_mode=None, sources=["upload", "webcam", "clipboard"],
                    height=320, elem_classes="vx-picture")  # (a device switch hides it: theme.css, device.js)


def control(field: Field, **overrides: Any) -> gr.components.Component:
    """The control for a declared setting: its type, range, step, default, label and the line under it."""
    kw: dict[str, Any] = dict(label=field.label, value=field.default)
    if field.info:
        kw["info"] = field.info
    kw.update(overrides)
    if field.kind in ("int", "float"):
        step = field.step if field.step is not None else (1 if field.kind == "int" else 0.01)
        return gr.Slider(field.lo, field.hi, step=step, **kw)
    if field.kind == "bool":
        return gr.Checkbox(**kw)
    if field.kind == "choice":
        options = [(field.shown[o], o) if o in field.shown else o for o in field.options()]  # (words, value)
        if len(options) <= 5 and all(len(o[0] if isinstance(o, tuple) else str(o)) <= 12 for o in options):
            return gr.Radio(options, **kw)
        return gr.Dropdown(options, **kw)
    if field.kind == "image":
        return image_input()
    raise ValueError(f"{field.name}: a {field.kind} setting has no control of its own (a browser view holds it)")


class Form:
    """One tab's controls, one per declared setting, and the carrier of the settings its browser view holds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.controls: dict[Field, gr.components.Component] = {}
        self.browser: tuple[Field, ...] = ()
        self.carrier: gr.HTML | None = None

    def add(self, field: Field, component: gr.components.Component | None = None, **overrides: Any):
        """The control of ``field`` (made from its declaration unless ``component`` is given), once per field."""
        if field not in self.controls:
            self.controls[field] = component if component is not None else control(field, **overrides)
        return self.controls[field]

    def __getitem__(self, field: Field) -> gr.components.Component:
        return self.controls[field]

    def hold_in_browser(self, view: View, fields: tuple[Field, ...]) -> gr.HTML:
        """A hidden carrier for settings a browser view holds: its value is their JSON, written by the browser
        (``window.vitvizState.set``), read by every event that needs them."""
        self.browser = fields
        self.carrier = browser_carrier(view.name, json.dumps({f.name: f.default for f in fields}),
                                       elem_id=f"{self.name}-state")
        return self.carrier

    def inputs(self, view: View) -> list[gr.components.Component]:
        """The components an event of ``view`` reads, in the order of its fields (the carrier last, when used)."""
        comps = [self.controls[f] for f in view.fields if f in self.controls]
        if any(f in self.browser for f in view.fields):
            comps.append(self.carrier)
        return comps

    def values(self, view: View, args: tuple) -> tuple[Any, dict[str, Any]]:
        """(the picture as sent, the raw settings) from an event's arguments, in :meth:`inputs` order."""
        it = iter(args)
        picture, raw = None, {}
        for f in view.fields:
            if f in self.controls:
                value = next(it)
                if f.kind == "image":
                    picture = value
                else:
                    raw[f.name] = value
        if any(f in self.browser for f in view.fields):
            held = next(it)
            try:
                held = json.loads(held) if isinstance(held, str) and held else {}
            except json.JSONDecodeError:
                held = {}
            for f in view.fields:
                if f in self.browser and f.name in held:
                    raw[f.name] = held[f.name]
        return picture, raw


def figure(elem_id: str, caption: str | None = None, **kwargs: Any) -> gr.Image:
    """A server-drawn figure: PNG (sharp text; it carries its smallest text size), never shown larger than drawn.

    Figures carry their own titles; ``caption`` (for pictures without one) goes above, never over, the figure.
    """
    if caption:
        gr.Markdown(caption, elem_classes="vx-caption")
    return gr.Image(show_label=False, label=caption or elem_id, elem_id=elem_id, elem_classes="vx-fig",
                    interactive=False, type="pil", format="png", buttons=["download", "fullscreen"], **kwargs)


def figure_value(image: Any) -> gr.Image:
    """A figure's new value with its text alternative (what it shows, from its numbers) for screen readers;
    hidden when the answer has no such figure, so no empty frame is left open. A drawn figure goes as a PNG file
    among the server's outputs (:func:`vitviz.app.serving.png_file`)."""
    value = str(serving.png_file(image)) if isinstance(image, Image.Image) else image
    return gr.Image(value=value, visible=image is not None, alt_text=plotting.alt_of(image))


ONE_LINE = 110
"""A notice at most this long (one paragraph) is shown whole; a longer one as its headline, its reasons a click away."""


def folded(note: str) -> str:
    """A notice as one line on the screen: its headline (its bold lead, else its first sentence, cut to
    :data:`ONE_LINE` characters) in a ``<details>`` summary, the whole text one click away (still in the page: found
    by search and by screen readers once opened). Short notices stay as they are."""
    note = note.strip()
    if not note or (len(note) <= ONE_LINE and "\n" not in note):
        return note
    lead = re.match(r"\*\*(.+?)\*\*", note)
    if lead:
        headline = lead.group(1).rstrip(".:")
    else:
        sentence = re.match(r"(.+?[.!?])(\s|$)", note.replace("\n", " "))
        headline = (sentence.group(1) if sentence else note).replace("**", "").replace("`", "")
    if len(headline) > ONE_LINE:
        headline = headline[:ONE_LINE].rsplit(" ", 1)[0] + "…"
    summary = f'{html.escape(headline, quote=False)} <span class="vx-more">(why)</span>'
    return f'<details class="vx-why"><summary>{summary}</summary>\n\n{note}\n\n</details>'


def explain(text: str) -> gr.Markdown:
    """A short explanation beside the figures, in the large 'explain' style."""
    return gr.Markdown(text, elem_classes="explain")


def browser_carrier(name: str, value: str = "", elem_id: str | None = None) -> gr.HTML:
    """A hidden element whose value a browser view writes (``window.vitvizState.set(name, values)``, as JSON); its
    change event, or any event reading it, takes what the browser holds to the server."""
    return gr.HTML(value, visible="hidden", elem_id=elem_id or name, html_template="",
                   js_on_load=(WEB / "carrier.js").read_text(), apply_default_css=False, view_name=name)


def door(elem_id: str) -> gr.HTML:
    """An event a page script starts: an empty hidden gr.HTML whose ``click`` its own ``trigger`` fires (gradio's
    documented way for a script to start an event) when a script calls ``window.vitvizDoors[elem_id]()``. Bind the
    event to ``door.click``."""
    return gr.HTML(None, html_template="", visible="hidden", elem_id=elem_id, apply_default_css=False,
                   container=False, js_on_load=f"(window.vitvizDoors ||= {{}})[{json.dumps(elem_id)}] = "
                                               "() => trigger('click');")


def open_door(elem_id: str) -> str:
    """The page script that opens :func:`door` ``elem_id`` (nothing when it is not on the page yet)."""
    return f"window.vitvizDoors?.[{json.dumps(elem_id)}]?.()"


def browser_view(name: str, elem_id: str, label: str, **kwargs: Any) -> gr.HTML:
    """A view drawn in the browser: render/web/{name}.js (after lib/ and common.js) and {name}.css; data comes as its
    value."""
    return gr.HTML(None, elem_id=elem_id, apply_default_css=False,
                   html_template=f'<div class="vx" tabindex="0" role="application" aria-label="{label}"></div>',
                   css_template=(WEB / f"{name}.css").read_text(),
                   js_on_load=web.script("common.js", f"{name}.js"), **kwargs)


DEVICE_TEMPLATE = (
    '<div class="vx-device"><p class="vx-dev-what"></p>'
    '<label class="vx-dev-pick">Picture: drop it here or choose it (read and computed here, never uploaded)'
    '<input id="{input_id}" type="file" accept="image/*"></label>'
    '<p class="vx-dev-status" role="status" aria-live="polite"></p>'
    '<div class="vx-dev-top5-box" hidden><p>Top 5, computed on this device</p><ol class="vx-dev-top5"></ol></div>'
    '<p class="vx-dev-warning vx-note" hidden></p>'
    '</div>')


def device_panel(tab: str, draws: tuple[str, ...] = ()) -> tuple[gr.Checkbox, gr.HTML, gr.HTML]:
    """'Compute on this device' for the declared tab ``tab`` (its ``TabSpec.device``): its switch, its panel
    (render/web/device.js) and the panel's door. A picture chosen in the panel's file input runs through the model
    in the browser, and its top 5 (and, in the Attention tab, the explorer's maps) are drawn. The panel shows while
    the switch is on (:func:`device_want`), whose change also writes ``device=1`` into the link, and gets the
    model's manifest (what to download, how to prepare the picture) from ``GET /vitviz/device-manifest``; when it
    has not been made yet, the panel presses its door (:func:`door`), whose event (through the queue) makes it and
    sets it as the panel's value. The element ids come from the declaration (``TabSpec.device_key``:
    ``<key>-switch``, ``<key>-panel``, ``<key>-picture``), and the script is told its tab and key. ``draws``: the
    scripts (under render/web) that draw a tab's own view from what the device computed (after device.js, in one
    body)."""
    key = declared_tabs.TABS[tab].device_key
    switch = gr.Checkbox(False, label="Compute on this device (the picture stays here)", elem_id=f"{key}-switch")
    switch.change(None, switch, None, js="(on) => window.vitvizLink?.set({ device: on ? '1' : null })")
    elem_id = f"{key}-panel"
    template = DEVICE_TEMPLATE.format(input_id=f"{key}-picture")
    told = f"const TAB = {json.dumps(tab)}, KEY = {json.dumps(key)};\n"
    panel = gr.HTML(None, elem_id=elem_id, apply_default_css=False, html_template=template,
                    css_template=(WEB / "device.css").read_text(), js_on_load=told + web.script("device.js", *draws))
    return switch, panel, door(f"{elem_id}-make")


def device_want(tab: str) -> str:
    """The page's side of a device switch (``tab``: a tab with one, ``TabSpec.device``), for an event of the switch,
    the model, (Attention, Forward pass) the short side and (Forward pass) the colour map: runs in the browser only;
    the server hears of it only when the manifest must be made. Kept for the panel when it is not drawn yet (a tab
    not opened yet): it asks as it loads."""
    return (f"(on, model, side, ...more) => {{ (window.vitvizDeviceWanted ||= {{}})[{tab!r}] = [on, model, side, "
            f"...more]; window.vitvizDevicePanels?.[{tab!r}]?.want(on, model, side, ...more); return []; }}")


def examples(src: gr.Image, names: Sequence[str], offline_note: str | None = None) -> gr.Markdown | None:
    """The example pictures ``names`` (file names) for ``src``; with ``offline_note`` (an element id), also the hidden
    line under them that the page fills when this tab's own model cannot be had (which photos need a download)."""
    shown = gr.Dataset(components=[src], samples=[[str(assets.thumbnail(n))] for n in names], type="index",
                       label="examples (click one)", samples_per_page=len(names))
    # The list shows small copies (about 10 kB each, not the 0.1-0.8 MB originals); a click loads the example itself.
    shown.click(lambda i: uploads.example(names[i]) if i is not None else gr.skip(), shown, src,
                show_progress="hidden", show_progress_on=[], api_visibility="private")  # (why none: progress_on)
    return gr.Markdown(visible=False, elem_id=offline_note) if offline_note else None


def download_row(elem_id: str) -> tuple[gr.Button, gr.File]:
    """'Download this view': every figure as PNG and PDF, the numbers, and params.json for ``vitviz bundle``. The
    button is ``<elem_id>-button`` (a tab computed on the device hides it: theme.css)."""
    button = gr.Button("Download this view (figures as PNG and PDF, numbers, settings)", size="sm",
                       elem_id=f"{elem_id}-button")
    files = gr.File(label="this view as files", elem_id=elem_id, visible=False)
    return button, files
