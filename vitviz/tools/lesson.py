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
    """A lesson from its Markdown; ValueError naming the line for a step that is not ``N. [caption](?link)``."""
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
        steps.append(Step(m["caption"].strip(), m["link"]))
    if not steps:
        raise ValueError("A lesson needs at least one step: '1. [caption](?tab=...)'.")
    return Lesson(title or "A vitviz lesson", tuple(steps))


def write(lesson: Lesson) -> str:
    """The lesson as Markdown (what :func:`parse` reads back)."""
    return "\n".join([f"# {lesson.title}", ""] + [f"{i}. [{s.caption}]({s.link})"
                                                  for i, s in enumerate(lesson.steps, 1)]) + "\n"


def tour() -> Lesson:
    """The guided tour shipped with the package."""
    return parse((LESSONS / "tour.md").read_text())


def step_view(step: Step):
    """(view name, checked settings, picture or None) that a step's link opens: the main view of its tab."""
    from vitviz.core import images
    from vitviz.views import records_of

    q = step.query
    tab = q.get("tab", "patches")
    main = records_of(tab)
    if not main:
        raise ValueError(f"{step.link}: there is no tab {tab!r}.")
    r = main[0]
    values = r.view.check(r.view.from_link(q))
    rgb = None
    if r.needs_picture:
        try:
            rgb = images.load_rgb(assets.example(q.get("image", "cat")), images.INTAKE_SHORT_SIDE)
        except KeyError:
            raise ValueError(f"{step.link}: a handout needs one of the example pictures, not {q.get('image')!r}.") \
                from None
    return r.name, values, rgb


def handout(lesson: Lesson, out: Path) -> int:
    """Print ``lesson`` to the PDF ``out``: per step a page with its caption and its view's figures (the same as its
    bundle). Returns the number of pages."""
    import textwrap

    import numpy as np
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    from vitviz.tools import bundle

    with PdfPages(out) as pdf:
        for i, step in enumerate(lesson.steps, 1):
            name, values, rgb = step_view(step)
            shown = bundle.make(name, values, rgb)
            figures = list(shown.figures.values())[:2]
            fig = Figure(figsize=(8.27, 11.69))  # A4, portrait
            fig.text(0.06, 0.96, f"{lesson.title}: step {i} of {len(lesson.steps)}", fontsize=14, weight="bold",
                     va="top")
            fig.text(0.06, 0.92, "\n".join(textwrap.wrap(step.caption, 90)), fontsize=11, va="top")
            top = 0.78
            for image in figures:
                h = min(0.36, 0.88 * image.height / image.width * 8.27 / 11.69)
                ax = fig.add_axes((0.06, top - h, 0.88, h))
                ax.imshow(np.asarray(image.convert("RGB")))
                ax.set_axis_off()
                top -= h + 0.03
            fig.text(0.06, 0.03, f"vitviz {step.link}", fontsize=8, color="#444444")
            pdf.savefig(fig)
    return len(lesson.steps)
