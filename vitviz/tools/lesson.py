"""Lessons: live views strung together, each with a caption, for a class to follow step by step.

A lesson is a small Markdown file a teacher can write by hand::

    # Title
    1. [What this step shows, in a sentence or three.](?tab=attention&image=cat&layer=6)
    2. [The next step's caption.](?tab=forward&image=cat)

Each step is a caption and a vitviz link (the query part: the page opens the link's view with its settings). The
page shows a lesson's captions with Back and Next over the live views (``?lesson=tour&step=3``); ``vitviz lesson
FILE --out handout.pdf`` prints it: each step's figures (the same as its bundle) under its caption, a page each.
The guided tour is such a lesson, shipped with the package (``vitviz/assets/lessons/tour.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

from vitviz import assets

STEP = re.compile(r"^\s*(?:\d+[.)]|[-*])\s*\[(?P<caption>.+)\]\((?P<link>\?[^)\s]*)\)\s*$")
MAX_BYTES = 32 * 1024
"""The largest lesson read (about 40 steps with long captions): a larger text is refused before it is parsed."""
MAX_STEPS = 40
MAX_CAPTION = 600
"""A caption's most characters (a few sentences: what a student reads on one step)."""
MAX_LINK = 8000
"""The longest lesson link the page makes or opens (characters): proxies commonly refuse longer request lines."""
LESSONS = Path(assets.__file__).parent / "lessons"
"""The lessons shipped with the package (``tour.md``: the guided tour)."""


@dataclass(frozen=True)
class Step:
    caption: str
    link: str  # the query part of a vitviz link: "?tab=...&..."

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(self.link.lstrip("?")))


@dataclass(frozen=True)
class Lesson:
    title: str
    steps: tuple[Step, ...]


def parse(text: str) -> Lesson:
    """A lesson from its Markdown; ValueError naming the line for a step that is not ``N. [caption](?link)``, and
    for a lesson over :data:`MAX_BYTES`, :data:`MAX_STEPS` steps or a caption over :data:`MAX_CAPTION`."""
    size = len(text.encode("utf-8", "replace"))
    if size > MAX_BYTES:
        raise ValueError(f"This lesson is {size / 1024:,.0f} KiB; a lesson holds at most {MAX_BYTES // 1024} KiB "
                         f"({MAX_STEPS} steps of a few sentences each). Split it into shorter lessons.")
    title, steps = "", []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("# ") and not title:
            title = line[2:].strip()
            continue
        m = STEP.match(line)
        if m is None:
            raise ValueError(f"line {n} is not a step: write '1. [caption](?tab=...)' (a caption in brackets, then "
                             "a vitviz link's query in parentheses).")
        caption = m["caption"].strip()
        if len(caption) > MAX_CAPTION:
            raise ValueError(f"line {n}: the caption is {len(caption):,} characters; a step's caption holds at most "
                             f"{MAX_CAPTION} (a few sentences).")
        steps.append(Step(caption, m["link"]))
        if len(steps) > MAX_STEPS:
            raise ValueError(f"line {n}: a lesson has at most {MAX_STEPS} steps. Split it into shorter lessons.")
    if not steps:
        raise ValueError("A lesson needs at least one step: '1. [caption](?tab=...)'.")
    return Lesson(title or "A vitviz lesson", tuple(steps))


def write(lesson: Lesson) -> str:
    """The lesson as Markdown (what :func:`parse` reads back)."""
    return "\n".join([f"# {lesson.title}", ""] + [f"{i}. [{s.caption}]({s.link})"
                                                  for i, s in enumerate(lesson.steps, 1)]) + "\n"


SHIPPED = re.compile(r"^[a-z_]{1,40}$")
"""The names of the lessons shipped with the package (their file names without ``.md``)."""


def shipped(name: str) -> Lesson | None:
    """The lesson shipped with the package under ``name`` ("tour": the guided tour; "test_the_map"), or None."""
    path = LESSONS / f"{name}.md"
    return parse(path.read_text(encoding="utf-8")) if SHIPPED.match(name) and path.is_file() else None


def shipped_names() -> list[str]:
    return sorted(p.stem for p in LESSONS.glob("*.md") if SHIPPED.match(p.stem))


def tour() -> Lesson:
    """The guided tour shipped with the package."""
    return parse((LESSONS / "tour.md").read_text())


def step_view(step: Step):
    """(view name, checked settings, picture or None, notes) that a step's link opens: the main view of its tab;
    ``notes`` says, naming each setting and what it accepts, what the link asks for that the view cannot have (the
    page opens it anyway, with the nearest value it can use)."""
    from vitviz.core import images
    from vitviz.views import records_of

    q = step.query
    tab = q.get("tab", "patches")
    main = records_of(tab)
    if not main:
        raise ValueError(f"{step.link}: there is no tab {tab!r}.")
    sections = {r.name: r for r in main}
    r = sections.get(q.get("open", ""), main[0])  # the section the step opens (?open=...), else the tab's own view
    read = r.view.from_link(q)
    values = r.view.check(read)
    notes = []
    for f in r.view.settings():
        if f.link and f.link in q:
            try:
                f.check(q[f.link])
            except ValueError as err:
                notes.append(f"{err} Used: {values[f.name]}.")
    rgb = None
    if r.needs_picture:
        try:
            rgb = images.load_rgb(assets.example(q.get("image", "cat")), images.INTAKE_SHORT_SIDE)
        except KeyError:
            raise ValueError(f"{step.link}: a handout needs one of the example pictures, not {q.get('image')!r}.") \
                from None
    return r.name, values, rgb, notes


def _without(link: str, key: str) -> str:
    from urllib.parse import urlencode

    return "?" + urlencode([(k, v) for k, v in parse_qsl(link.lstrip("?")) if k != key])


def _linked(view: str, setting: str, query: dict) -> bool:
    """Whether the link ``query`` sets ``setting`` of ``view`` (not a default the view then could not use)."""
    from vitviz.views import VIEWS

    try:
        return VIEWS[view][setting].link in query
    except KeyError:
        return False


def handout(lesson: Lesson, out: Path, said=lambda text: None) -> tuple[int, int]:
    """Print ``lesson`` to the PDF ``out``: per step a page with its caption and its view's figures (the same as its
    bundle), and what the step asked for that it could not have (also told to ``said``). The PDF is written to a
    temporary file beside ``out`` and renamed when whole: a step that cannot be printed leaves no partial handout.
    Returns (pages, steps with settings used otherwise than asked)."""
    import os
    import tempfile
    import textwrap

    import numpy as np
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    from vitviz.tools import bundle

    out = Path(out)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}-", suffix=".pdf")
    os.close(fd)
    adjusted = 0
    try:
        with PdfPages(tmp) as pdf:
            for i, step in enumerate(lesson.steps, 1):
                name, values, rgb, notes = step_view(step)
                try:
                    shown = bundle.make(name, values, rgb)
                except ValueError as err:  # a section a student fills in on screen (marks on a picture)
                    main_name, values, rgb, _ = step_view(Step(step.caption, _without(step.link, "open")))
                    if main_name == name:
                        raise
                    notes.append(f"the section '{name}' is filled in on screen ({err}); printed: the tab's view")
                    shown = bundle.make(main_name, values, rgb)
                notes += [f"{k}: {v['why']} (asked {v.get('asked')}, used {v.get('used')})"
                          for k, v in shown.settled.adjusted().items() if _linked(name, k, step.query)]
                for note in notes:
                    said(f"step {i}: {note}")
                adjusted += bool(notes)
                figures = list(shown.figures.values())[:2]
                fig = Figure(figsize=(8.27, 11.69))  # A4, portrait
                fig.text(0.06, 0.96, f"{lesson.title}: step {i} of {len(lesson.steps)}", fontsize=14,
                         weight="bold", va="top")
                fig.text(0.06, 0.92, "\n".join(textwrap.wrap(step.caption, 90)), fontsize=11, va="top")
                top = 0.78
                for image in figures:
                    h = min(0.36, 0.88 * image.height / image.width * 8.27 / 11.69)
                    ax = fig.add_axes((0.06, top - h, 0.88, h))
                    ax.imshow(np.asarray(image.convert("RGB")))
                    ax.set_axis_off()
                    top -= h + 0.03
                if notes:
                    fig.text(0.06, 0.07, "\n".join(textwrap.wrap("Not as the link asked: " + "; ".join(notes), 110)),
                             fontsize=8, color="#7a2800", va="bottom")
                fig.text(0.06, 0.03, f"vitviz {step.link}", fontsize=8, color="#444444")
                pdf.savefig(fig)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(lesson.steps), adjusted
