"""Lessons: live views strung together, each with a caption, for a class to follow step by step.

A lesson is a small Markdown file a teacher can write by hand::

    # Title
    1. [What this step shows, in a sentence or three.](?tab=attention&image=cat&layer=6)
    2. [The next step's caption.](?tab=forward&image=cat)

Each step is a caption and a vitviz link (the query part: the page opens the link's view with its settings). A
lesson may carry a picture of its own, the teacher's photo, as one line of Markdown holding it (a ``data:`` URL)::

    ![the lesson's picture](data:image/jpeg;base64,/9j/4AAQ...)

and its steps show it with ``image=lesson``. Such a lesson travels as its file (a link cannot hold a picture).
The
page shows a lesson's captions with Back and Next over the live views (``?lesson=tour&step=3``); ``vitviz lesson
FILE --out handout.pdf`` prints it: each step's figures (the same as its bundle) under its caption, a page each.
The guided tour is such a lesson, shipped with the package (``vitviz/assets/lessons/tour.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import parse_qsl

from vitviz import assets

if TYPE_CHECKING:
    import numpy as np

SPACE = "\t\x1f \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
"""The spaces a line may hold around its parts (Python's whitespace that is not a line break: spelled out, so that
the page's reader, lib/lessons.mjs, reads every line as this module does)."""
LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where a lesson's lines end (``str.splitlines``'s breaks, spelled out for the twin)."""
_S = f"[{SPACE}]*"
PICTURE_LINE = re.compile(f"^{_S}!\\[[^\\]]*\\]\\((?P<url>[^)]*)\\){_S}$")
"""A line that holds a picture (Markdown's ``![words](url)``): a lesson's own picture is such a line whose url is
:data:`PICTURE`; any other is refused, saying why."""
BASE64 = re.compile("[A-Za-z0-9+/]*={0,2}")
"""Base64 text that decodes when its length is a multiple of four (:func:`decodes`)."""
PICTURE = re.compile("^data:image/(?:png|jpeg|webp|gif);base64,(?P<body>.*)$")
"""The url of a lesson's own picture (its body must then be :data:`BASE64`)."""
KINDS = "PNG, JPEG, WebP or GIF"
OWN = "lesson"
"""A step's ``image=`` for the lesson's own picture."""
MAX_PICTURE_BYTES = 4 * 2**20
"""The largest picture a lesson carries (a phone photo, re-encoded by the page to at most 1600 pixels a side)."""
STEP_LIKE = re.compile(f"^{_S}(?:[0-9]+[.)]|[-*]){_S}\\[(?P<caption>.+)\\]\\((?P<link>.*)\\){_S}$")
"""A line written as a step: a number or a bullet, a caption in brackets, then a link in parentheses."""
STEP = re.compile(f"^{_S}(?:[0-9]+[.)]|[-*]){_S}\\[(?P<caption>.+)\\]\\((?P<link>\\?[^){SPACE}]*)\\){_S}$")
"""A step: ``N. [caption](?query)``, the query of a vitviz link."""
MAX_BYTES = 32 * 1024
"""The largest lesson read (about 40 steps with long captions): a larger text is refused before it is parsed."""
MAX_FILE_BYTES = 32 * 1024 + (MAX_PICTURE_BYTES * 4 // 3 + 256)
"""The largest lesson file read: the text's bound and a picture's, base64-encoded."""
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
    picture: bytes | None = None  # the lesson's own picture (the file's bytes), shown by steps with image=lesson

    @property
    def picture_url(self) -> str | None:
        """The picture as the ``data:`` URL its Markdown line holds."""
        return None if self.picture is None else data_url(self.picture)


def picture_kind(picture: bytes) -> str:
    """A picture file's kind read from its first bytes: "jpeg", "gif", "webp", else "png"."""
    return ("jpeg" if picture[:2] == b"\xff\xd8" else "gif" if picture[:4] == b"GIF8" else
            "webp" if picture[:4] == b"RIFF" and picture[8:12] == b"WEBP" else "png")


def data_url(picture: bytes) -> str:
    """A picture file's bytes as a ``data:`` URL naming its kind (:func:`picture_kind`)."""
    import base64

    return f"data:image/{picture_kind(picture)};base64," + base64.b64encode(picture).decode()


def limits() -> dict[str, int]:
    """The bounds of a lesson, as the page's lesson maker and reader get them (lib/lessons.mjs's ``limits``)."""
    return {"bytes": MAX_BYTES, "steps": MAX_STEPS, "caption": MAX_CAPTION, "link": MAX_LINK,
            "file_bytes": MAX_FILE_BYTES, "picture_bytes": MAX_PICTURE_BYTES}


def lines_of(text: str) -> list[str]:
    """``text``'s lines, split where :data:`LINE_BREAKS` says (as ``str.splitlines`` does, and the page's reader)."""
    return LINE_BREAKS.split(text)


def _strip(text: str) -> str:
    return text.strip(SPACE)


def picture_line(n: int, url: str) -> str:
    """The base64 text of a lesson's own picture on line ``n`` whose url is ``url`` (not yet checked: see
    :func:`parse`); ValueError saying what is wrong with it (and what to do) when it is not a picture a lesson can
    carry."""
    m = PICTURE.match(url)
    if m is not None:
        return m["body"]
    kind = re.match(r"^data:([^;,]*)", url)
    if kind is None:
        raise ValueError(f"line {n}: a lesson's picture travels inside its file, as a data: URL "
                         "(![the lesson's picture](data:image/png;base64,...)); this one points elsewhere. Open the "
                         "lesson in the page's lesson maker and download it again: it writes the line.")
    if kind[1] not in ("image/png", "image/jpeg", "image/webp", "image/gif"):
        shown = kind[1][:40] or "not named"
        raise ValueError(f"line {n}: the lesson's picture is {shown}; a lesson carries a {KINDS} picture, in "
                         "base64 (a drawing in SVG can hold a script). Save it as PNG or JPEG and add it again.")
    return damaged(n)


def decodes(body: str) -> bool:
    """Whether ``body`` is base64 that decodes: whole groups of four of its alphabet, the last padded with "="."""
    return len(body) % 4 == 0 and BASE64.fullmatch(body) is not None


def damaged(n: int) -> NoReturn:
    raise ValueError(f"line {n}: the lesson's picture is damaged or cut short (its base64 text does not decode). "
                     "Download the lesson again from the lesson maker, or add the picture anew.")


def parse(text: str) -> Lesson:
    """A lesson from its Markdown; ValueError naming the line and what to do for a line that is neither a step
    (``N. [caption](?link)``) nor the title nor the lesson's picture, a step whose link is not a vitviz link's
    query, a picture line that is not a PNG, JPEG, WebP or GIF picture in base64, a second picture or one over
    :data:`MAX_PICTURE_BYTES`; and for a lesson over :data:`MAX_BYTES` (its picture aside), :data:`MAX_STEPS`
    steps or a caption over :data:`MAX_CAPTION` characters. The one check of a lesson: the page's reader
    (lib/lessons.mjs's ``parseLesson``) is its twin, tested against the same lessons (tests/js/vectors.py)."""
    import base64

    picture, lines = None, []
    for n, line in enumerate(lines_of(text.removeprefix("\ufeff")), 1):  # a byte order mark is not the title's
        m = PICTURE_LINE.match(line)
        if m is None:
            lines.append(line)
            continue
        body = picture_line(n, m["url"])
        if picture is not None:
            raise ValueError(f"line {n}: a lesson carries one picture of its own; this is a second one.")
        if len(body) > MAX_PICTURE_BYTES * 4 // 3 + 4:
            raise ValueError(f"line {n}: the lesson's picture is over {MAX_PICTURE_BYTES // 2**20} MiB; save it "
                             "smaller (1600 pixels a side is plenty for every view).")
        if not decodes(body):
            damaged(n)
        picture = base64.b64decode(body, validate=True)
        lines.append("")  # the lines keep their numbers
    text = "\n".join(lines)
    size = len(text.encode("utf-8", "replace"))
    if size > MAX_BYTES:
        raise ValueError(f"This lesson is {-(-size // 1024):,} KiB; a lesson holds at most {MAX_BYTES // 1024} KiB "
                         f"({MAX_STEPS} steps of a few sentences each). Split it into shorter lessons.")
    title, steps = "", []
    for n, line in enumerate(lines, 1):
        if not _strip(line):
            continue
        if line.startswith("# ") and not title:
            title = _strip(line[2:])
            continue
        m = STEP.match(line)
        if m is None:
            like = STEP_LIKE.match(line)
            if like is not None and like["link"].startswith("?"):
                raise ValueError(f"line {n}: a step's link holds a space or a ')'; write a space as + and a ')' as "
                                 "%29 (as the page's own links do).")
            if like is not None:
                start = like["link"][:24]
                raise ValueError(f"line {n}: a step's link is a vitviz link's query, starting with '?' (as "
                                 f"'?tab=attention&layer=6', spaces written as +); this one starts with '{start}'.")
            raise ValueError(f"line {n} is not a step: write '1. [caption](?tab=...)' (a caption in brackets, then "
                             "a vitviz link's query in parentheses).")
        caption = _strip(m["caption"])
        if len(caption) > MAX_CAPTION:
            raise ValueError(f"line {n}: the caption is {len(caption):,} characters; a step's caption holds at most "
                             f"{MAX_CAPTION} (a few sentences).")
        steps.append(Step(caption, m["link"]))
        if len(steps) > MAX_STEPS:
            raise ValueError(f"line {n}: a lesson has at most {MAX_STEPS} steps. Split it into shorter lessons.")
    if not steps:
        raise ValueError("A lesson needs at least one step: '1. [caption](?tab=...)'.")
    return Lesson(title or "A vitviz lesson", tuple(steps), picture)


def write(lesson: Lesson) -> str:
    """The lesson as Markdown (what :func:`parse` reads back), its picture included."""
    own = [f"![the lesson's picture]({lesson.picture_url})", ""] if lesson.picture is not None else []
    return "\n".join([f"# {lesson.title}", ""] + own + [f"{i}. [{s.caption}]({s.link})"
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


def step_view(step: Step, lesson: "Lesson | None" = None):
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
    if r.needs_picture and q.get("image") == OWN:
        if lesson is None or lesson.picture is None:
            raise ValueError(f"{step.link}: this step shows the lesson's own picture, and this lesson carries none "
                             "(a line '![the lesson's picture](data:image/...)').")
        rgb = images.load_rgb(lesson.picture, images.INTAKE_SHORT_SIDE)
    elif r.needs_picture:
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


def absolute_link(base_url: str, lesson_name: str | None, k: int, step: Step) -> str:
    """Step ``k``'s link on the server at ``base_url`` (``https://host/path/``): within its lesson when the lesson
    has a name a link can hold (one shipped with vitviz), else the step's own view."""
    from urllib.parse import urlencode

    extra = "&" + urlencode({"lesson": lesson_name, "step": k}) if lesson_name else ""
    return _page_address(base_url) + step.link + extra


def _page_address(base_url: str) -> str:
    """The server's page address ``base_url`` without its query or fragment, ending in "/"."""
    base = base_url.split("?")[0].split("#")[0]
    return base if base.endswith("/") else base + "/"


QR_ERROR = "m"
"""The error correction a handout's QR codes print with (M: about 15% of the code may be lost, a crease or a
smudge)."""
QR_VERSION = 40
"""The largest QR code (177 × 177 modules): a longer text fits no QR code at :data:`QR_ERROR`."""


def qr_bits(text: str) -> tuple[int, int]:
    """(bits ``text`` takes in a QR code, bits the largest code holds at :data:`QR_ERROR`), as segno counts them
    (its own choice of encoding mode for ``text``, its own capacity table): ``text`` fits when the first is at most
    the second, and segno would say "Data too large" otherwise. These are segno's internals (it has no public way to
    ask short of making the code, 0.2 s for a long link): tests/test_lesson.py checks they are there, with the QR
    standard's numbers, so an upgrade that moves them fails there."""
    from segno import consts, encoder

    level = encoder.normalize_errorlevel(QR_ERROR)
    needed = encoder.prepare_data(text, None, None).bit_length_with_overhead(QR_VERSION, False)
    return needed, consts.SYMBOL_CAPACITY[QR_VERSION][level]


def qr_chars() -> int:
    """The most characters of a link (one byte each, as every URL-encoded link is) a QR code holds at
    :data:`QR_ERROR`: 2,331 (the byte mode's indicator, 4 bits, and its 16-bit count come first)."""
    return (qr_bits("")[1] - 4 - 16) // 8


def qr_fits(text: str) -> bool:
    """Whether ``text`` fits a QR code at :data:`QR_ERROR` (checked before one is made: :func:`qr_bits`)."""
    needed, room = qr_bits(text)
    return needed <= room


def qr_matrix(text: str) -> np.ndarray:
    """``text`` as a QR code: a (N, N) bool array, True = dark, with the standard quiet zone of 4 modules
    (segno; error correction :data:`QR_ERROR`). ``ValueError`` naming the sizes for a text no QR code holds."""
    import numpy as np
    import segno

    if not qr_fits(text):
        raise ValueError(f"{len(text):,} characters are more than a QR code holds ({qr_chars():,} at error "
                         f"correction {QR_ERROR.upper()}).")
    code = segno.make(text, error=QR_ERROR, micro=False)
    return np.pad(np.array([list(row) for row in code.matrix], dtype=bool), 4)


def qr_link(base_url: str, lesson_name: str | None, k: int, step: Step) -> tuple[str, str | None, str | None]:
    """(step ``k``'s absolute link, the text its QR code holds or None, why it holds another or none): the step's
    own link (:func:`absolute_link`) when a QR code can hold it; else, for a lesson a link can name (shipped with
    vitviz), the lesson's short link ``?lesson=NAME&step=k``, which the page opens at that step's own link; else
    none, and the reason says what to do."""
    from urllib.parse import urlencode

    address = absolute_link(base_url, lesson_name, k, step)
    if qr_fits(address):
        return address, address, None
    long = (f"its link is {len(address):,} characters, more than a QR code holds ({qr_chars():,} at error "
            f"correction {QR_ERROR.upper()})")
    if lesson_name:
        short = _page_address(base_url) + "?" + urlencode({"lesson": lesson_name, "step": k})
        if qr_fits(short):
            return address, short, f"{long}: its QR code holds the lesson's short link, which opens this step"
    marks = [v for v in step.query.values() if v.count(";") >= 8]  # a set of patches: "r,c;r,c;…"
    fewer = "mark fewer patches on that step, " if marks else ""
    return address, None, (f"{long}, so its page prints no QR code. For one, make that step's link shorter "
                           f"({fewer}about {qr_chars() - len(address) + len(step.link):,} characters of link at "
                           "most), or hand out the lesson's file (the page's lesson maker opens it)")


def step_figures(name: str, step: Step, shown) -> list:
    """What a step's handout page shows of its view ``shown``: the figures its record declares for the section the
    step opens (``?open=``; ``""`` for none), else the view's first two figures. An empty list: the page draws the
    view's chain of stages from its numbers instead (the forward pass's own page)."""
    from vitviz.views import RECORDS

    section = RECORDS[name].sections.get(step.query.get("open", ""))
    if section is None:
        return list(shown.figures.values())[:2]
    return [shown.figures[f] for f in section if shown.figures.get(f) is not None]


def _stage_chain(fig, numbers: dict, top: float) -> None:
    """The forward pass's stages, top to bottom, each with its tensor's shape, drawn on the page ``fig`` from
    ``top`` (figure fraction) down."""
    stages = numbers.get("stages") or []
    ax = fig.add_axes((0.06, 0.12, 0.88, top - 0.12))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(len(stages), -0.5)
    for i, st in enumerate(stages):
        shape = " × ".join(str(n) for n in st["shape"])
        axes = ", ".join(st.get("axes") or [])
        ax.text(0.02, i, st["name"], fontsize=11, va="center", ha="left", weight="bold",
                bbox=dict(boxstyle="round,pad=0.35", fc="#eef3fb", ec="#335c99"))
        ax.text(0.98, i, f"{shape}" + (f"  ({axes})" if axes else ""), fontsize=10, va="center", ha="right",
                family="monospace")
        if i + 1 < len(stages):
            ax.annotate("", (0.08, i + 0.72), (0.08, i + 0.28), arrowprops=dict(arrowstyle="->", color="#335c99"))


def _top_classes(fig, top5: dict[str, float], top: float) -> float:
    """The classes and their probabilities ``top5`` (name -> probability, best first) as bars on the page ``fig``
    from ``top`` (figure fraction) down; returns where the next drawing may start."""
    names = list(top5)
    h = 0.03 * len(names)
    ax = fig.add_axes((0.28, top - h, 0.56, h))
    ax.barh(range(len(names)), [top5[n] for n in names], color="#1f5f99")
    ax.set_yticks(range(len(names)), names, fontsize=11)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.tick_params(axis="x", labelsize=9)
    for k, n in enumerate(names):
        ax.text(min(top5[n], 0.8) + 0.02, k, f"{top5[n]:.1%}", va="center", fontsize=10)
    ax.set_title("top 5: the softmax's probabilities", fontsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return top - h - 0.05


def handout(lesson: Lesson, out: Path, said=lambda text: None, base_url: str | None = None,
            name: str | None = None) -> tuple[int, int]:
    """Print ``lesson`` to the PDF ``out``: per step an A4 page with the title, its caption, what its step shows
    (:func:`step_figures`), what the step asked for that it could not have (also told to ``said``) and its link.
    Given the server's address ``base_url``, the link is absolute and printed as a QR code too (within the lesson
    ``name`` when a link can name it: a lesson shipped with vitviz). The PDF is written to a temporary file beside
    ``out`` and renamed when whole: a step that cannot be printed leaves no partial handout. A step whose link no
    QR code holds (:func:`qr_link`) is said to ``said`` first, naming the step and what to do; its page says it too.
    Returns (pages, steps with settings used otherwise than asked)."""
    import os
    import tempfile

    from matplotlib.backends.backend_pdf import PdfPages

    out = Path(out)
    for i, step in enumerate(lesson.steps, 1):  # what a QR code cannot hold, said before any page is drawn
        why = qr_link(base_url, name, i, step)[2] if base_url else None
        if why:
            said(f"step {i}: {why}.")
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}-", suffix=".pdf")
    os.close(fd)
    adjusted = 0
    try:
        with PdfPages(tmp) as pdf:
            for i in range(1, len(lesson.steps) + 1):
                fig, notes = page(lesson, i, base_url, name)
                for note in notes:
                    said(f"step {i}: {note}")
                adjusted += bool(notes)
                pdf.savefig(fig)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(lesson.steps), adjusted


def page(lesson: Lesson, i: int, base_url: str | None = None, name: str | None = None):
    """Step ``i``'s handout page (an A4 :class:`matplotlib.figure.Figure`) and the notes on what it could not have
    as asked (see :func:`handout`)."""
    import textwrap

    import numpy as np
    from matplotlib.figure import Figure

    from vitviz.tools import bundle

    step = lesson.steps[i - 1]
    view, values, rgb, notes = step_view(step, lesson)
    try:
        shown = bundle.make(view, values, rgb)
    except ValueError as err:  # a section a student fills in on screen (marks on a picture)
        main_name, values, rgb, _ = step_view(Step(step.caption, _without(step.link, "open")), lesson)
        if main_name == view:
            raise
        notes.append(f"the section '{view}' is filled in on screen ({err}); printed: the tab's view")
        view, shown = main_name, bundle.make(main_name, values, rgb)
    notes += [f"{k}: {v['why']} (asked {v.get('asked')}, used {v.get('used')})"
              for k, v in shown.settled.adjusted().items() if _linked(view, k, step.query)]
    fig = Figure(figsize=(8.27, 11.69))  # A4, portrait
    title = textwrap.wrap(lesson.title, 62) or [""]
    fig.text(0.06, 0.965, "\n".join(title[:2]), fontsize=14, weight="bold", va="top")
    y = 0.965 - 0.024 * min(len(title), 2)
    fig.text(0.06, y - 0.004, f"step {i} of {len(lesson.steps)}", fontsize=10, color="#444444", va="top")
    caption = textwrap.wrap(step.caption, 92)
    fig.text(0.06, y - 0.028, "\n".join(caption), fontsize=11, va="top")
    top = y - 0.04 - 0.0175 * len(caption)
    figures = step_figures(view, step, shown)
    if step.query.get("show") == "top5" and shown.numbers.get("top5"):  # the figure the step names, first
        top = _top_classes(fig, shown.numbers["top5"], top - 0.02)
    if not figures and shown.numbers.get("stages"):
        fig.text(0.06, top, shown.texts.get("text", ""), fontsize=10, va="top", wrap=True)
        _stage_chain(fig, shown.numbers, top - 0.05)
    room = top - 0.14
    for image in figures:
        h = min(room / len(figures) - 0.02, 0.88 * image.height / image.width * 8.27 / 11.69)
        ax = fig.add_axes((0.06, top - h, 0.88, h))
        ax.imshow(np.asarray(image.convert("RGB")))
        ax.set_axis_off()
        top -= h + 0.02
    if notes:
        fig.text(0.06, 0.115, "\n".join(textwrap.wrap("Not as the link asked: " + "; ".join(notes), 100)),
                 fontsize=8, color="#7a2800", va="bottom")
    if base_url:
        address, coded, why = qr_link(base_url, name, i, step)
        if why:  # said where the code would be (handout says it too, before printing anything)
            fig.text(0.62, 0.015, "\n".join(textwrap.wrap(f"No QR code: {why}." if coded is None else
                                                           f"The QR code is short: {why}.", 48)),
                     fontsize=7, color="#7a2800", va="bottom")
        if coded is not None:
            qr = fig.add_axes((0.80, 0.015, 0.14, 0.14 * 8.27 / 11.69))  # a square, 3 cm a side
            qr.imshow(~qr_matrix(coded), cmap="gray", interpolation="nearest", vmin=0, vmax=1)
            qr.set_axis_off()
        fig.text(0.06, 0.03, "\n".join(textwrap.wrap(coded or address, 95)[:4]), fontsize=7, color="#222222",
                 va="bottom", family="monospace")
    else:
        fig.text(0.06, 0.03, f"vitviz {step.link}", fontsize=8, color="#444444")
    return fig, notes
