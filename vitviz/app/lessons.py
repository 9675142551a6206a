"""Lessons in the page: the bar a lesson's steps show above the views (caption, step k of n, Back and Next), the
guided tour's first link, and the panel where a teacher strings the views they open into a lesson of their own.

A lesson travels in the link: ``?lesson=tour&step=3`` (the tour shipped with vitviz) or ``?lesson=md:<the lesson's
Markdown, base64url>&step=3`` (one a teacher made or wrote); each step's own link holds its view's settings.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import re
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from vitviz.app import uploads
from vitviz.core import owned
from vitviz.tools import lesson as lessons

KEPT = ("projector", "contrast", "device")
"""Page modes a lesson keeps from step to step (a device page stays one: its steps on the Attention, Classify and
Forward-pass tabs are computed on the device)."""


def decode(value: str) -> lessons.Lesson:
    """The lesson a link's ``lesson`` parameter names; ValueError if it names none."""
    named = lessons.shipped(value)
    if named is not None:
        return named
    if value.startswith("md:"):
        raw = value[3:]
        try:
            text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise ValueError("This link's lesson cannot be read (it was cut short?).") from None
        return lessons.parse(text)
    raise ValueError(f"This link names a lesson vitviz does not have ({value[:40]!r}).")


def encode(lesson: lessons.Lesson) -> str:
    """A lesson as a link's ``lesson`` parameter."""
    return "md:" + base64.urlsafe_b64encode(lessons.write(lesson).encode()).decode().rstrip("=")


def step_link(name: str, lesson: lessons.Lesson, k: int, query: dict) -> str:
    """The link of step ``k`` (1 = first) of the lesson called ``name`` in links, keeping the page's modes."""
    step = lesson.steps[k - 1]
    keep = {key: query[key] for key in KEPT if query.get(key)}
    return step.link + "&" + urlencode({"lesson": name, "step": k} | keep)


def tour_link() -> str:
    return step_link("tour", lessons.tour(), 1, {})


def bar(query: dict) -> str:
    """The lesson bar for a page opened on ``query`` (empty when the link holds no lesson)."""
    name = query.get("lesson")
    if not name:
        return ""
    try:
        if len(name) > lessons.MAX_LINK:
            raise ValueError(f"This link's lesson is {len(name):,} characters; a lesson link holds at most "
                             f"{lessons.MAX_LINK:,}.")
        lesson = decode(name)
    except ValueError as err:
        return f'<nav id="lesson-bar" class="vx-lesson" aria-label="lesson"><p>{html.escape(str(err))}</p></nav>'
    n = len(lesson.steps)
    try:
        k = min(max(int(query.get("step", "1")), 1), n)
    except ValueError:
        k = 1
    prev = step_link(name, lesson, k - 1, query) if k > 1 else ""
    nxt = step_link(name, lesson, k + 1, query) if k < n else ""
    back = f'<a class="vx-lesson-go" href="{html.escape(prev)}">← Back</a>' if prev else ""
    ahead = f'<a class="vx-lesson-go" href="{html.escape(nxt)}">Next →</a>' if nxt else "<span>The end.</span>"
    here = step_link(name, lesson, k, query)  # this step's own link (page.js opens it for a bare lesson link)
    return (f'<nav id="lesson-bar" class="vx-lesson" aria-label="lesson" data-prev="{html.escape(prev)}" '
            f'data-next="{html.escape(nxt)}" data-here="{html.escape(here)}"><p class="vx-lesson-where"><strong>{html.escape(lesson.title)}</strong>'
            f' — step {k} of {n}</p><p class="vx-lesson-caption" tabindex="0">'  # scrolls on a phone: reachable
            f'{html.escape(lesson.steps[k - 1].caption)}</p>'
            f'<p class="vx-lesson-nav">{back} {ahead} <a href="?">Leave the lesson</a> '
            '<span class="vx-lesson-keys">(← and → keys work too)</span></p></nav>')


MAKER = """
<div id="lesson-maker" class="vx-lesson-maker" data-limits="{limits}">
<p>Open any view with the settings you want, write what the class should see, and add it; repeat for each step.
Edit, reorder or remove steps in the list. Your lesson stays in this browser until you download it (a small
Markdown file you can edit, which carries your own picture when a step shows one) or open it.</p>
<p><label for="lesson-title">title of my lesson</label> <input type="text" id="lesson-title" maxlength="120"></p>
<label for="lesson-caption">caption of this step</label>
<textarea id="lesson-caption" rows="2"></textarea>
<p><button type="button" id="lesson-add">Add this view to my lesson</button>
<button type="button" id="lesson-open">Open my lesson</button>
<button type="button" id="lesson-download">Download my lesson (.md)</button>
<button type="button" id="lesson-handout">Print a handout (PDF)</button>
<button type="button" id="lesson-clear">Start a new lesson</button></p>
<p><label for="lesson-file">or open a lesson file</label> <input type="file" id="lesson-file" accept=".md,.txt,text/markdown"></p>
<p id="lesson-said" role="status" aria-live="polite"></p>
<ol id="lesson-steps" aria-label="the steps of my lesson"></ol>
</div>
"""
"""The lesson maker's controls (render/web/lessons.js makes them work: the lesson is kept in the browser's
localStorage); ``{limits}``: :mod:`vitviz.tools.lesson`'s bounds."""


def keep_picture(data_url: str) -> dict:
    """The server function a lesson file's own picture comes through (the maker's ``server.keep_picture``): kept
    and named as an upload (``{"image": "upload-<fingerprint>"}``), else ``{"error": why, for a teacher}``."""
    try:
        return {"image": uploads.keep_lesson_picture(data_url)}
    except ValueError as err:
        return {"error": str(err)}


def picture_of(name: str) -> dict:
    """The server function that hands the maker the upload a lesson's steps show, for its file:
    ``{"url": "data:image/...;base64,..."}``, else ``{"error": why}``."""
    try:
        return {"url": uploads.lesson_picture(str(name))}
    except ValueError as err:
        return {"error": str(err)}


HANDOUTS = owned.keep("lessons.handouts", "gates", threading.BoundedSemaphore(1),
                      "one handout printed at a time (each step is a whole view's work)")


def handout_of(asked: dict) -> dict:
    """The server function that prints the maker's lesson (``asked["markdown"]``; steps may show an upload this
    server holds, which the handout then shows as the lesson's own picture) as a PDF handout whose links and QR codes
    start with ``asked["base_url"]`` (the page's own address; a server function takes one argument):
    ``{"path": the PDF on this server, "name": its file name,
    "notes": [what a step could not have as asked]}``, else ``{"error": why}``. Handouts are printed one at a time
    (:data:`HANDOUTS`); each step's views go through the models' locks and the server's memory budget as any
    request's."""
    from vitviz.app import files

    try:
        markdown, base_url = (asked.get("markdown"), asked.get("base_url")) if isinstance(asked, dict) else (None, None)
        if not isinstance(markdown, str) or len(markdown) > lessons.MAX_BYTES:
            raise ValueError(f"A lesson holds at most {lessons.MAX_BYTES // 1024} KiB of text.")
        if not re.match(r"^https?://[^\s?#]+$", str(base_url)):
            raise ValueError("The page's address did not come with the lesson.")
        made = lessons.parse(markdown)
        shown = {s.query.get("image") for s in made.steps} - {None}
        uploaded = sorted(n for n in shown if n.startswith("upload-"))
        if len(uploaded) > 1:
            raise ValueError("A lesson carries one picture of its own; these steps show two uploads.")
        if uploaded:
            path = uploads.named_file(uploaded[0])
            if path is None:
                raise ValueError("This server no longer holds the uploaded picture a step shows: upload it again.")

            def own(step: lessons.Step) -> lessons.Step:
                q = [(k, lessons.OWN if k == "image" and v == uploaded[0] else v)
                     for k, v in parse_qsl(step.link.lstrip("?"))]
                return dataclasses.replace(step, link="?" + urlencode(q))

            made = lessons.Lesson(made.title, tuple(own(s) for s in made.steps), Path(path).read_bytes())
        name = (re.sub(r"[^a-z0-9]+", "-", made.title.lower()).strip("-")[:60] or "vitviz-lesson") + ".pdf"
        out = files.outputs().folder() / name
        notes: list[str] = []
        with HANDOUTS:
            lessons.handout(made, out, notes.append, base_url=base_url)
        return {"path": str(out), "name": name, "notes": notes}
    except ValueError as err:
        return {"error": str(err)}


def maker():
    """The lesson maker: a gr.HTML whose script (render/web/lessons.js) calls :func:`keep_picture` and
    :func:`picture_of` through gradio's server functions."""
    import json

    import gradio as gr

    from vitviz.render import web

    return gr.HTML(None, html_template=MAKER.format(limits=html.escape(json.dumps(lessons.limits()))),
                   js_on_load=web.script("lessons.js"), server_functions=[keep_picture, picture_of, handout_of],
                   apply_default_css=False, elem_id="lesson-maker-box")
