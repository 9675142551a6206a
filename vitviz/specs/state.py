"""One declared state per view: every setting a person can change, written down once.

A :class:`View` is the typed description of one view's state: its :class:`Field` s, each with a type, a range or a
list of choices, a default, a label and the key that names it in the page's link. From that one description come
the app's controls and their ranges, the link (written and read back), the check that every value from outside
passes (one place, with a message that names the parameter and what it accepts), the bundle's ``params.json`` and
the command line's flags.

Nothing heavy is imported here (no torch, numpy or matplotlib): the command line builds its parser from these
declarations and answers ``--help`` without loading a model library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("int", "float", "choice", "bool", "cell", "cells", "image")
MAX_CELLS = 4096
"""The most patches a "cells" setting may name (a 64 × 64 grid)."""


def _number_words(lo: float, hi: float, integer: bool) -> str:
    what = "a whole number" if integer else "a number"
    return f"{what} from {lo:g} to {hi:g}"


@dataclass(frozen=True, eq=False)
class Field:
    """One setting of a view.

    Attributes:
        name: the parameter's name in the API, in ``params.json`` and on the command line (``--name``).
        kind: "int", "float", "choice", "bool", "cell" (a patch (row, col), or none), "cells" (a set of patches,
            sorted; empty: none chosen) or "image" (the picture).
        default: the value a view opens with.
        label: what the control says.
        lo, hi, step: the range of a number (and the control's step).
        choices: the accepted values of a "choice" (or a function returning them, for lists found at run time).
        link: the key that holds this setting in the page's address (None: not in the link).
        words: names for special values, e.g. {"mean": -1} for the head mean (accepted in the link and API).
        multiple: a whole number the value must be a multiple of (a real constraint, unlike ``step``, which is
            only how far one move of the control goes).
        follows: what narrows the range at run time ("layers", "heads", "rows", "cols", "steps": the
            randomisation's steps, the blocks plus the final norm and the head); a value past it is
            clamped to what the model or picture has, and the view says so.
        cli: other spellings of the command-line flag (kept from earlier versions of the command).
        info: one line under the control.
        shown: how the page's control writes a choice where not as the value itself (value -> words: 'AttnLRP'
            for 'attnlrp'); the link, the API and the command line keep the value.

    Fields compare by identity: one field object is one setting (one control, one link key) wherever it is used.
    """

    name: str
    kind: str
    default: Any
    label: str
    lo: float | None = None
    hi: float | None = None
    step: float | None = None
    choices: tuple | Callable[[], tuple] = ()
    link: str | None = None
    words: Mapping[str, Any] = field(default_factory=dict)
    multiple: int | None = None
    follows: str | None = None
    cli: tuple[str, ...] = ()
    info: str = ""
    shown: Mapping[Any, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"field {self.name}: unknown kind {self.kind!r}")
        if self.kind in ("int", "float") and (self.lo is None or self.hi is None):
            raise ValueError(f"field {self.name}: a number needs lo and hi")

    # ---- what it accepts -------------------------------------------------------------------------------

    def options(self) -> tuple:
        """The accepted values of a "choice" field."""
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def accepts(self) -> str:
        """What this field accepts, in words (for messages, help texts and the CLI)."""
        if self.kind in ("int", "float"):
            text = _number_words(self.lo, self.hi, self.kind == "int")
            if self.multiple:
                text += f", a multiple of {self.multiple}"
            extra = [f"{w!r} for {v}" for w, v in self.words.items()]
            if self.follows == "steps":
                text += (" (at most the model's last step: its blocks, then its final norm and its head where it has "
                         "them)")
            elif self.follows:
                text += f" (at most the {self.follows.removesuffix('s')} count "
                text += "of what is shown)" if self.follows in ("layers", "heads") else "of the picture's grid)"
            return text + (", or " + ", ".join(extra) if extra else "")
        if self.kind == "choice":
            opts = self.options()
            shown = ", ".join(repr(o) for o in opts[:8]) + (", …" if len(opts) > 8 else "")
            return f"one of {shown}"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "cell":
            return "a patch as 'row,column' (whole numbers), or nothing"
        if self.kind == "cells":
            return f"patches as 'row,column;row,column;…' (whole numbers, at most {MAX_CELLS:,}), or nothing"
        return "a picture"

    def _refuse(self, value: Any, why: str = "") -> ValueError:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "…"
        return ValueError(f"`{self.name}` ({self.label}) must be {why or self.accepts()}; got {shown}.")

    def check(self, value: Any) -> Any:
        """``value`` as this field's type, or ``ValueError`` naming the parameter and what it accepts.

        Numbers may come as numbers or as numeric strings; NaN, infinity, booleans, None, lists and
        objects are refused. Ranges are the declared ones (a ``follows`` field is clamped later, by the view).
        """
        if self.kind == "image":
            return value
        if isinstance(value, str) and value.strip() in self.words:
            return self.words[value.strip()]
        if self.kind in ("int", "float"):
            return self._number(value)
        if self.kind == "choice":
            return self._choice(value)
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.strip().lower() in ("true", "1", "yes")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value in (0, 1):
                return bool(value)
            raise self._refuse(value)
        if self.kind == "cells":
            return self._cells(value)
        return self._cell(value)

    def _cells(self, value: Any) -> tuple[tuple[int, int], ...]:
        if value is None or value == "" or value == [] or value == ():
            return ()
        if isinstance(value, str):
            if len(value) > 12 * MAX_CELLS:
                raise self._refuse(value)
            items: list = [part for part in value.replace(" ", "").split(";") if part]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            raise self._refuse(value)
        if len(items) > MAX_CELLS:
            raise self._refuse(value)
        cells = set()
        for item in items:
            try:
                cell = self._cell(item)
            except ValueError:
                raise self._refuse(value) from None
            if cell is None:
                raise self._refuse(value)
            cells.add(cell)
        return tuple(sorted(cells))

    def _number(self, value: Any) -> int | float:
        if isinstance(value, bool) or value is None or not isinstance(value, (int, float, str)):
            raise self._refuse(value)
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise self._refuse(value) from None
        if not math.isfinite(v):
            raise self._refuse(value)
        if self.kind == "int":
            if v != round(v):
                raise self._refuse(value)
            v = int(round(v))
        if v in self.words.values():
            return v
        if not self.lo <= v <= self.hi or (self.multiple and v % self.multiple):
            raise self._refuse(value)
        return v

    def _choice(self, value: Any) -> Any:
        """One of the options, as the option itself: a choice of whole numbers takes a whole number however it
        comes (1, 1.0, "1", "1.0") and answers the int (settings, link and bundle names say 1, never 1.0); 1.5
        is refused, as is any value that is not an option."""
        opts = self.options()
        if isinstance(value, bool):
            raise self._refuse(value)
        if opts and all(isinstance(o, int) and not isinstance(o, bool) for o in opts):
            if isinstance(value, (int, float, str)):
                try:
                    v = float(value)
                except (TypeError, ValueError):
                    raise self._refuse(value) from None
                if math.isfinite(v) and v.is_integer() and int(v) in opts:
                    return int(v)
            raise self._refuse(value)
        for o in opts:
            if value == o and type(value) is type(o):
                return o
        raise self._refuse(value)

    def _cell(self, value: Any) -> tuple[int, int] | None:
        if value is None or value == "" or value == []:
            return None
        if isinstance(value, str):
            parts = value.replace(" ", "").split(",")
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            raise self._refuse(value)
        if len(parts) != 2:
            raise self._refuse(value)
        out = []
        for p in parts:
            if isinstance(p, bool):
                raise self._refuse(value)
            try:
                f = float(p)
            except (TypeError, ValueError):
                raise self._refuse(value) from None
            if not math.isfinite(f) or f != round(f) or not 0 <= f <= 1023:
                raise self._refuse(value)
            out.append(int(f))
        return out[0], out[1]

    # ---- the link -------------------------------------------------------------------------------------

    def to_link(self, value: Any) -> str | None:
        """How the link writes ``value`` (None: leave it out, because it is the default or has no link)."""
        if self.link is None or self.kind == "image" or value == self.default:
            return None
        return self.link_text(value) or None

    def link_text(self, value: Any) -> str:
        """``value`` as the link writes it, the default too ("" for none): what the page's store compares with."""
        if value is None:
            return ""
        for word, v in self.words.items():
            if value == v:
                return word
        if self.kind == "bool":
            return "1" if value else "0"
        if self.kind == "cell":
            return f"{value[0]},{value[1]}"
        if self.kind == "cells":
            return ";".join(f"{r},{c}" for r, c in value)
        if self.kind == "float":
            return f"{value:g}"
        return str(value)

    def from_link(self, text: str) -> Any:
        """The value a link's text stands for; out-of-range numbers are brought into range (a link may be old).

        Raises ``ValueError`` for text this field cannot read.
        """
        if self.kind in ("int", "float") and text.strip() not in self.words:
            try:
                v = float(text)
            except ValueError:
                raise self._refuse(text) from None
            if math.isfinite(v):
                text = str(min(max(v, self.lo), self.hi))
                if self.kind == "int":
                    text = str(int(round(float(text))))
        return self.check(text)


@dataclass(frozen=True, eq=False)
class View:
    """The declared state of one view: its fields, and the name of its endpoint.

    A field object may belong to several views (the picture, the model and the colormap of one tab): it is
    one setting, shown by one control, held in the link under one key.
    """

    name: str
    title: str
    fields: tuple[Field, ...]

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def settings(self) -> tuple[Field, ...]:
        """The fields a person sets (everything but the picture)."""
        return tuple(f for f in self.fields if f.kind != "image")

    def defaults(self) -> dict[str, Any]:
        return {f.name: f.default for f in self.settings()}

    def check(self, values: Mapping[str, Any], partial: bool = False) -> dict[str, Any]:
        """Every setting of ``values`` checked (missing ones take their defaults unless ``partial``).

        Raises ``ValueError`` for a name this view does not have, or a value its field does not accept.
        """
        unknown = set(values) - set(self.names)
        if unknown:
            raise ValueError(f"The {self.title} view has no setting {sorted(unknown)[0]!r}; its settings are "
                             f"{', '.join(self.names)}.")
        out = {} if partial else self.defaults()
        for f in self.settings():
            if f.name in values:
                out[f.name] = f.check(values[f.name])
        return out

    def call(self, *args: Any) -> dict[str, Any]:
        """``check`` for positional values in the order of :attr:`fields` (the way an endpoint receives them)."""
        if len(args) != len(self.fields):
            raise ValueError(f"The {self.title} view takes {len(self.fields)} values ({', '.join(self.names)}); "
                             f"got {len(args)}.")
        values = dict(zip(self.names, args))
        values.pop(next((f.name for f in self.fields if f.kind == "image"), ""), None)
        return self.check(values)

    def link(self, values: Mapping[str, Any]) -> dict[str, str]:
        """The link's keys for ``values`` (defaults left out)."""
        out = {}
        for f in self.settings():
            text = f.to_link(values.get(f.name, f.default))
            if text is not None:
                out[f.link] = text
        return out

    def from_link(self, query: Mapping[str, str]) -> dict[str, Any]:
        """The settings a link holds, read leniently: keys it does not have or cannot read are skipped."""
        out = {}
        for f in self.settings():
            if f.link and f.link in query:
                try:
                    out[f.name] = f.from_link(str(query[f.link]))
                except ValueError:
                    continue
        return out


def clamp(value: int, hi: int, lo: int = 0) -> int:
    """``value`` brought into [lo, hi] (for a ``follows`` field, whose real range is the model's or the picture's)."""
    return int(min(max(int(value), lo), hi))


@dataclass
class Settled:
    """The values a view actually used, and why any differ from what was asked.

    ``notes`` maps a setting's name to one sentence ("vitviz tiny runs at 64 px only"). The app shows them beside
    the controls, the bundle and the command line record them.
    """

    values: dict[str, Any]
    asked: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)
    bounds: dict[str, int] = field(default_factory=dict)
    """The largest value a setting could take for this answer (its ``follows`` range: the picture's grid, the
    model's layers and heads), for controls that narrow to it."""
    fixed: dict[str, str] = field(default_factory=dict)
    """Settings that had only one possible value for this answer (a model that runs at one size), and why: a
    control shows the value used, with the reason, and cannot be moved."""

    def within(self, name: str, hi: int, why: str, lo: int = 0) -> int:
        """Use setting ``name`` brought into [lo, hi] (recording ``hi`` as its bound) with the reason if it moved."""
        self.bounds[name] = int(hi)
        return self.use(name, clamp(self.values[name], hi, lo), why)

    def only(self, name: str, value: Any, why: str) -> Any:
        """Use ``value`` for setting ``name``, the only value it can have here (recorded in :attr:`fixed`)."""
        self.fixed[name] = why
        return self.use(name, value, why)

    def use(self, name: str, value: Any, why: str) -> Any:
        """Record that ``name`` is used as ``value`` (with the reason) when that differs from what was asked."""
        if value != self.values.get(name):
            self.values[name] = value
            self.notes[name] = why
        return value

    def adjusted(self) -> dict[str, dict[str, Any]]:
        """{name: {"asked", "used", "why"}} for every setting that was not used as asked."""
        return {k: {"asked": self.asked.get(k), "used": self.values[k], "why": why} for k, why in self.notes.items()}

    def sentence(self) -> str:
        """Every reason once (several settings often share one: rows, columns and size of a learned table)."""
        return " ".join(dict.fromkeys(self.notes.values()))


def settle(values: Mapping[str, Any]) -> Settled:
    return Settled(dict(values), dict(values))


def link_keys(views: Iterable[View]) -> dict[str, Field]:
    """Every link key of ``views`` and its field; ``ValueError`` when two different fields share a key."""
    seen: dict[str, Field] = {}
    for view in views:
        for f in view.settings():
            if f.link is None:
                continue
            if f.link in seen and seen[f.link] is not f:
                raise ValueError(f"link key {f.link!r} is used by two settings ({seen[f.link].name}, {f.name})")
            seen[f.link] = f
    return seen
