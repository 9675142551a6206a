"""The ``vitviz`` command: the app's views for files and folders, with the app's registry, offline rules and messages.

    vitviz models                                          the registry, and which weights can be had now
    vitviz costs --model-size ViT-B --patch 16 --resolution 224   the multiply-accumulate table (--format csv or json)
    vitviz patches IMAGE [--patch 16 --resolution 224 …] [--out DIR]   token counts; with --out the grid and a JSON
    vitviz attention IMAGE... --out DIR [--model KEY …]    per picture NAME: NAME.heads.png, NAME.rollout.png,
                                                           NAME.mask.png and NAME.json (the numbers)
    vitviz crop FOLDER|LIST.csv --out DIR [--batch 8] [--engine local|ray]   the camera-trap recipe: attention ->
                                                           mask -> box -> crop (crops/<path>, same name, mirroring the
                                                           tree, boxes.csv; resumable; Ray for a cluster)
    vitviz bundle params.json --out DIR                    a downloaded view's figures again, pixel for pixel
    vitviz serve [--port 7860]                             the web app

The settings' flags come from the views' declarations (vitviz/specs/views.py): the same names, ranges and defaults
as the app's controls and API, checked the same way. Exit codes: 0 everything done; 1 nothing done (the message
says why); 2 the command was written wrong; 3 done in part: some inputs were skipped, each listed with its reason.
Nothing heavy is imported to answer ``--help`` or a mistyped command.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from vitviz.specs import views as declared
from vitviz.specs.state import View

DONE, FAILED, USAGE, PARTLY = 0, 1, 2, 3


def _say(*lines: str) -> None:
    print(*lines, sep="\n", file=sys.stderr)


def _progress(items: list | int, label: str):
    """A progress bar over pictures: over ``items`` (a list of pictures), or one to ``update(n)`` by hand for a
    count of pictures done in batches."""
    from tqdm import tqdm

    if isinstance(items, int):
        return tqdm(total=items, desc=label, unit="picture", file=sys.stderr, disable=items < 2)
    return tqdm(items, desc=label, unit="picture", file=sys.stderr, disable=len(items) < 2)


def settings_flags(p: argparse.ArgumentParser, view: View, only: tuple[str, ...] | None = None) -> None:
    """One flag per declared setting of ``view`` (``--name``, plus its older spellings), read as text and checked by
    the declaration after parsing, so a wrong value gets the same message as in the app and the API."""
    for f in view.settings():
        if only is not None and f.name not in only:
            continue
        flags = ["--" + f.name.replace("_", "-")] + [c for c in f.cli if c != "--" + f.name.replace("_", "-")]
        default = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
        p.add_argument(*flags, dest=f.name, default=None, metavar=f.name.upper(),
                       help=f"{f.label}: {f.accepts()} (default: {default})")


def checked(view: View, args: argparse.Namespace, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The declared settings given on the command line, checked (defaults for the rest); ValueError if wrong."""
    given = {f.name: getattr(args, f.name) for f in view.settings()
             if (only is None or f.name in only) and getattr(args, f.name, None) is not None}
    values = view.check(given)
    return values if only is None else {k: v for k, v in values.items() if k in only}


def _flagged(text: str) -> str:
    """A message of the library as the command line says it: a setting's name (`model_size`) as its flag
    (`--model-size`)."""
    from vitviz.views import VIEWS

    for view in VIEWS.values():
        for f in view.settings():
            text = text.replace(f"`{f.name}`", f"`--{f.name.replace('_', '-')}`")
    return text


def _load(path: str | Path):
    """A picture named on the command line, decoded by vitviz's intake; ``ValueError`` naming the file."""
    from vitviz.core import images

    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file.")
    try:
        return images.load_rgb(path, images.INTAKE_SHORT_SIDE)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _notice(shown) -> None:
    if shown.note():
        _say(shown.note().replace("**", ""))


# ---- vitviz models / costs --------------------------------------------------------------------

def cmd_models(args: argparse.Namespace) -> int:
    """The models: vitviz's own and, with ``--models FILE``, what that file added and why the rest was not."""
    from vitviz.models import loaders
    from vitviz.specs import registry

    rows = [(s.key, s.task, f"{s.params_m:g} M", f"stride {s.patch}" if s.task == "cnn" else f"P={s.patch}",
             loaders.availability(s)) for s in registry.REGISTRY.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    report = getattr(args, "report", None)
    if report is not None:
        print()
        print("\n".join(report.lines()))
        return PARTLY if report.problems else DONE
    return DONE


def install_models(path: str) -> "object":
    """Add the models of the operator's models file ``path`` (``--models``); the entries left out are said on
    stderr. Returns the report. ``ValueError`` when the file cannot be read."""
    from vitviz.models import added, cache

    report = added.install(path, adopt=cache.adopt, forget=cache.forget)
    for problem in report.problems:
        _say(f"left out of {path}: {problem}")
    return report


COST_SETTINGS = ("patch", "resolution", "model_size")


def cmd_costs(args: argparse.Namespace) -> int:
    from vitviz.core import patches
    from vitviz.specs import registry

    v = checked(declared.PATCHES, args, COST_SETTINGS)
    side = max(v["resolution"] // v["patch"] * v["patch"], v["patch"])
    parts = patches.vit_macs(registry.VIT_SIZES[v["model_size"]], v["patch"], side, side)
    total = sum(parts.values())
    if args.format == "json":
        print(json.dumps({"model_size": v["model_size"], "patch": v["patch"], "resolution": side, "macs": parts,
                          "total": total}, indent=2))
    elif args.format == "csv":
        out = csv.writer(sys.stdout)
        out.writerow(["component", "macs", "share"])
        out.writerows([name, n, f"{n / total:.4f}"] for name, n in parts.items())
        out.writerow(["total", total, "1.0000"])
    else:
        print(f"{v['model_size']}/{v['patch']} at {side}×{side}: multiply-accumulates of one forward pass")
        for name, n in list(parts.items()) + [("total", total)]:
            print(f"  {name:<22} {n:>16,}  {n / total:6.1%}")
    return DONE


# ---- vitviz patches ---------------------------------------------------------------------------------

def cmd_patches(args: argparse.Namespace) -> int:
    from vitviz.views import show

    values = checked(declared.PATCHES, args)
    shown = show("patches", _load(args.image), values)
    numbers = shown.numbers
    print(numbers["input"])
    for name in ("rows", "cols", "patches", "sequence", "attention entries"):
        print(f"  {name:<22} {numbers[name]:,}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        name = Path(args.image).name  # the whole name: a.jpg and a.png never write the same files
        shown.figures["grid"].save(out / f"{name}.patches.png")
        record = {"image": str(args.image), "settings": shown.settled.values, "adjusted": shown.settled.adjusted(),
                  **numbers}
        (out / f"{name}.patches.json").write_text(json.dumps(record, indent=2, default=int))
        print(f"wrote {out / (name + '.patches.png')} and {name}.patches.json")
    return DONE


# ---- vitviz attention -------------------------------------------------------------------------------

def cmd_attention(args: argparse.Namespace) -> int:
    import numpy as np
    from PIL import Image

    from vitviz.core import attention as att
    from vitviz.core import images
    from vitviz.views import show
    from vitviz.views.attention import analysis_for

    values = checked(declared.ATTENTION, args)
    rolled = checked(declared.ROLLOUT, args)  # the same model, side and colours; its fusion and discard
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    skipped, told = [], set()
    for path in _progress(args.images, "attention"):
        if not Path(path).is_file():
            skipped.append((path, "no such file"))
            continue
        try:
            rgb = images.load_rgb(path, images.INTAKE_SHORT_SIDE)
            shown = show("attention", rgb, values)
        except ValueError as err:
            skipped.append((path, _flagged(str(err))))
            continue
        if shown.note() and shown.note() not in told:  # each different notice once
            _notice(shown)
            told.add(shown.note())
        name = Path(path).name  # the whole name: a.jpg and a.png never write the same files
        used = shown.settled.values
        shown.figures["heads"].save(out / f"{name}.heads.png")
        show("rollout", rgb, rolled).figures["rollout"].save(out / f"{name}.rollout.png")  # the same forward
        a, _ = analysis_for(rgb, values)  # kept from the view's forward: no second forward
        mask = att.mass_mask(a.maps.cls_map(used["layer"] - 1), used["keep"])[0]
        big = np.kron(mask, np.ones((a.maps.patch, a.maps.patch), bool))
        Image.fromarray((big * 255).astype(np.uint8)).save(out / f"{name}.mask.png")
        record = {"image": str(path), "model": shown.model, "notice": shown.note(), "settings": used,
                  "adjusted": shown.settled.adjusted(),
                  **{k: v for k, v in shown.numbers.items() if k not in ("model", "notice")}}
        (out / f"{name}.json").write_text(json.dumps(record, indent=2))
    return _report(len(args.images), skipped)


# ---- vitviz crop ------------------------------------------------------------------------------------------

CROP_SETTINGS = ("model", "resolution", "keep")


def cmd_crop(args: argparse.Namespace) -> int:
    from vitviz.models import cache as models
    from vitviz.tools import crop

    values = checked(declared.ATTENTION, args, CROP_SETTINGS)
    source, out = Path(args.source), Path(args.out)
    if not source.exists():
        _say(f"{source}: no such folder or file.")
        return FAILED
    try:
        items = crop.list_inputs(source, out)
    except ValueError as err:
        _say(str(err) + ".")
        return FAILED if "neither" in str(err) else USAGE
    if not items:
        _say(f"{source} has no pictures to crop.")
        return FAILED
    for rel, n in crop.duplicates(source).items():
        _say(f"{rel} is listed {n} times; it is cropped once.")
    passed = crop.passed_over(source)
    hidden = [s for s in passed if s.why.startswith("a hidden")]
    for s in hidden:  # left out on purpose (.DS_Store, .git): said, not counted as a failure
        _say(f"left out {s.rel}: {s.why.split(':')[0]}")
    listed = len(items) + len(passed) - len(hidden)
    items, skipped = crop.in_output(items, out)
    skipped += [s for s in passed if s not in hidden]  # a FIFO, a link to nothing: not a picture it could read
    crop.clear_unfinished(out)
    runner = models.get_model(values["model"])
    if runner.notice:
        _say(runner.notice.replace("**", ""))
    settings = crop.settings_of(runner, values)
    todo = [i for i in items if not crop.done(out, i, settings)]
    redo = sum(crop.done(out, i) for i in todo)  # finished before, with other settings
    side = runner.side(values["resolution"])
    batches, more = crop.plan(todo, lambda h, w: runner.fitted_shape(h, w, side), args.batch)
    skipped += more
    written: list[dict] = []
    try:
        if args.engine == "ray":
            from vitviz.tools import crop_ray

            try:
                written, more = crop_ray.run(batches, values, out, address=args.address, workers=args.workers)
            except crop_ray.RayMissing as err:
                _say(str(err))
                return FAILED
        else:
            with _progress(sum(len(b) for b in batches), "crop") as bar:
                written, more = crop.run_local(runner, batches, values, out, bar.update)
        skipped += more
    finally:  # the table of what is done, even when the run stops part way
        table = crop.write_table(out, items, settings)
    for warning in dict.fromkeys(r["warning"] for r in written if r.get("warning")):
        _say(warning)  # once: a photo shown to the shapes-only model
    again = f" ({redo} redone: they were cropped before with other settings)" if redo else ""
    print(f"{len(written)} cropped{again}, {len(items) - len(todo)} already done, {len(skipped)} skipped; "
          f"boxes in {table}")
    return _report(listed, [(Path(s.rel), s.why) for s in skipped])


def _report(total: int, skipped: list[tuple[Path, str]]) -> int:
    for path, why in skipped:
        _say(f"skipped {path}: {why}")
    if skipped and len(skipped) == total:
        return FAILED
    return PARTLY if skipped else DONE


# ---- vitviz bundle ----------------------------------------------------------------------------------------

def cmd_bundle(args: argparse.Namespace) -> int:
    import zipfile

    from vitviz.tools import bundle

    params = Path(args.params)
    if not params.is_file():
        _say(f"{params}: no such file. Give the params.json of a bundle (its input.png beside it), or the ZIP.")
        return FAILED
    if zipfile.is_zipfile(params):  # a downloaded bundle as it came
        import tempfile

        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(params) as z:
            if "params.json" not in z.namelist():
                _say(f"{params} is a ZIP without params.json: not a vitviz bundle.")
                return FAILED
            z.extractall(tmp)
            written = bundle.reproduce(Path(tmp) / "params.json", Path(args.out))
    else:
        written = bundle.reproduce(params, Path(args.out))
    print(f"wrote {len(written)} figure{'s' if len(written) != 1 else ''} (PNG and PDF) and numbers.json to {args.out}")
    return DONE


# ---- vitviz view (every view) and vitviz vitcnn (the ViT-vs-CNN tab's) -----------------------------------------

def _view_parser(q: argparse.ArgumentParser, r) -> None:
    """A view's subcommand: its picture, its declared settings' flags, --out."""
    if r.needs_picture:
        q.add_argument("image", help="the picture")
    else:
        q.set_defaults(image=None)
    settings_flags(q, r.view)
    q.add_argument("--out", required=True, help="a folder for the figures (PNG) and the numbers (JSON)")
    q.set_defaults(run=cmd_view, view=r.view, only=None, record=r.name)


def cmd_lesson(args: argparse.Namespace) -> int:
    """A lesson's handout: each step's figures under its caption, one PDF page per step."""
    from vitviz.tools import lesson

    named = lesson.shipped(args.lesson)
    if named is not None:
        chosen = named
    else:
        path = Path(args.lesson)
        if not path.is_file():
            raise ValueError(f"{path}: no such file.")
        if path.stat().st_size > lesson.MAX_FILE_BYTES:  # before reading it whole
            raise ValueError(f"{path}: {path.stat().st_size / 2**20:,.1f} MiB; a lesson holds at most "
                             f"{lesson.MAX_BYTES // 1024} KiB of text ({lesson.MAX_STEPS} steps) and a picture of "
                             f"{lesson.MAX_PICTURE_BYTES // 2**20} MiB. Split it, or save its picture smaller.")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a text file (a lesson is Markdown: '1. [caption](?tab=...)' per step).") \
                from None
        try:
            chosen = lesson.parse(text)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    out = Path(args.out)
    if out.suffix.lower() != ".pdf":
        _say(f"--out {out}: a handout is a PDF file (e.g. --out handout.pdf).")
        return USAGE
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        base = args.base_url or os.environ.get("VITVIZ_BASE_URL")
        if base and not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", base):
            _say(f"--base-url {base!r}: give the server's address as the class opens it, e.g. "
                 "https://vitviz.example.org/ or http://192.168.1.20:7860/.")
            return USAGE
        if not base:
            _say("without --base-url (the server's address, e.g. http://192.168.1.20:7860/) the handout prints each "
                 "step's link as a relative one and no QR code.")
        pages, adjusted = lesson.handout(chosen, out, _say, base_url=base,
                                         name=args.lesson if named is not None else None)
    except OSError as err:  # a folder that cannot be written (/proc, a full disk): said, no traceback
        _say(f"--out {out}: cannot write the handout there ({err.strerror or err}).")
        return FAILED
    print(f"wrote {out}: {pages} page{'s' if pages != 1 else ''}, one per step of '{chosen.title}'")
    if adjusted:
        _say(f"{adjusted} step{'s' if adjusted != 1 else ''} asked for settings {'they' if adjusted != 1 else 'it'} "
             "could not have; each page says what was used.")
        return PARTLY
    return DONE


def cmd_views(_args: argparse.Namespace) -> int:
    from vitviz.views import table

    print(table())
    return DONE


def cmd_view(args: argparse.Namespace) -> int:
    """One view's figures (PNG) and numbers (JSON) into ``--out``: ``vitviz view <verb> [IMAGE] --out DIR``, the
    verb and the flags from the view's record and declaration."""
    from vitviz.tools import bundle
    from vitviz.views import RECORDS

    r = RECORDS[args.record]
    name, view = r.name, r.view
    command = f"vitviz {args.command}" + (f" {r.verb}" if args.command in VIEW_COMMANDS else "")
    values = checked(view, args)
    needs = r.needs_picture
    if needs and not args.image:
        _say(f"{command} needs a picture: {command} IMAGE --out DIR")
        return USAGE
    rgb = _load(args.image) if needs else None
    shown = bundle.make(name, values, rgb)
    _notice(shown)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for fig, image in shown.figures.items():
        image.save(out / f"{name}_{fig}.png")
    (out / f"{name}.json").write_text(json.dumps(bundle.numbers_of(shown), indent=2, allow_nan=False))
    for text in shown.texts.values():
        print(text.replace("**", ""))
    print(f"wrote {len(shown.figures)} figure{'s' if len(shown.figures) != 1 else ''} and {name}.json to {out}")
    return DONE


# ---- vitviz serve ------------------------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace) -> int:
    """The web app, as its own program (``python -m vitviz.app``): the command line only starts it."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("gradio") is None:
        _say("vitviz serve runs the web app, which needs gradio: pip install 'vitviz[app]' (or requirements.txt).")
        return FAILED
    extra = ["--models", str(args.models)] if getattr(args, "models", None) else []
    try:
        return subprocess.call([sys.executable, "-m", "vitviz.app", "--port", str(args.port), *extra])
    except KeyboardInterrupt:
        return DONE


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: a whole number from 1 to 65535")
    return value


# ---- the parser ----------------------------------------------------------------------------------------------

def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


VIEW_COMMANDS = {"view": ("any view of the page: its figures (PNG) and numbers (JSON)", None),
                 "vitcnn": ("ViT against a CNN: receptive field, translation, data efficiency, hybrid stages (figures "
                            "and numbers)", "vitcnn")}
"""Commands whose verbs are views (from their records): ``vitviz view <verb>``; ``vitviz vitcnn <verb>`` for the
ViT-vs-CNN tab's."""


def _add(sub: "argparse._SubParsersAction", name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand, with the option every subcommand has: ``--models FILE``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--models", metavar="FILE", default=argparse.SUPPRESS,
                        help="a models file (TOML): this server's own models, added to the lists")
    return sub.add_parser(name, parents=[common], **kwargs)


def parser(verbs: bool = True) -> argparse.ArgumentParser:
    """The command line. ``verbs``: add the views' verbs under ``view`` and ``vitcnn`` (reading the views' records
    imports the library; the other commands, and ``--help``, do without)."""
    ap = argparse.ArgumentParser(prog="vitviz", description="How a Vision Transformer sees an image.",
                                 epilog="Exit codes: 0 done, 1 nothing done, 2 wrong usage, 3 done in part.")
    ap.add_argument("-v", "--verbose", action="store_true", help="log what is loaded, fallen back to and refused")
    sub = ap.add_subparsers(dest="command", required=True)
    _add(sub, "models", help="the supported models and which can be had now").set_defaults(run=cmd_models)
    _add(sub, "views", help="every view: its endpoint, tab, settings, download and command (Markdown)"
                   ).set_defaults(run=cmd_views)

    p = _add(sub, "costs", help="multiply-accumulates of one forward pass, per component")
    settings_flags(p, declared.PATCHES, COST_SETTINGS)
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="how to print the table: aligned text (default), CSV or JSON")
    p.set_defaults(run=cmd_costs, view=declared.PATCHES, only=COST_SETTINGS)

    p = _add(sub, "patches", help="cut a picture into patches")
    p.add_argument("image", help="the picture (PNG, JPEG, GIF, WebP, ...)")
    settings_flags(p, declared.PATCHES)
    p.add_argument("--out", help="a folder for the grid picture and its numbers (NAME.patches.png, "
                                 "NAME.patches.json); without it, only the counts are printed")
    p.set_defaults(run=cmd_patches, view=declared.PATCHES, only=None)

    p = _add(sub, "attention", help="class-token attention per head, rollout and mask, with its numbers")
    p.add_argument("images", nargs="+", help="one or more pictures")
    settings_flags(p, declared.ATTENTION)
    settings_flags(p, declared.ROLLOUT, ("fusion", "discard"))
    p.add_argument("--out", required=True, help="a folder for each picture's NAME.heads.png, NAME.rollout.png, "
                                                "NAME.mask.png and NAME.json")
    p.set_defaults(run=cmd_attention, view=declared.ATTENTION, only=None)

    p = _add(sub, "crop", help="crop every picture in a folder tree (or a CSV list) to where the class token "
                                    "looks", description="Crops go to OUT/crops/<path> (the tree mirrored, same name and format), the "
                       "boxes to OUT/boxes.csv; a rerun skips what is done. --engine ray spreads the batches over a "
                       "Ray cluster (pip install 'vitviz[ray]').")
    p.add_argument("source", help="a folder (searched recursively) or a .csv file listing pictures (a 'path' column)")
    settings_flags(p, declared.ATTENTION, CROP_SETTINGS)
    p.add_argument("--out", required=True, help="a folder outside the source for crops/, boxes.csv and the "
                                                "records a rerun reads")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process; ray: a pool of Ray actors, each loading the model once")
    p.add_argument("--batch", type=_positive, default=8, help="pictures per forward (those the model sees at one "
                   "shape; default 8)")
    p.add_argument("--address", default=None, help="with --engine ray: an existing cluster ('auto' or "
                   "ray://host:10001); default: a local cluster on this machine's cores")
    p.add_argument("--workers", type=_positive, default=None, help="with --engine ray: actors (default: one per "
                   "CPU the cluster has, at most the number of batches)")
    p.set_defaults(run=cmd_crop, view=declared.ATTENTION, only=CROP_SETTINGS)

    for command, (what, tab) in VIEW_COMMANDS.items():
        p = _add(sub, command, help=what)
        if not verbs:
            continue
        from vitviz.views import RECORDS

        named = p.add_subparsers(dest="verb", required=True)
        for r in RECORDS.values():
            if r.api and (tab is None or r.tab == tab):
                _view_parser(_add(named, r.verb, help=r.view.title), r)
    if verbs:  # views with a command of their own (their record names it): vitviz forward ...
        from vitviz.views import RECORDS

        for r in RECORDS.values():
            if r.command:
                _view_parser(_add(sub, r.command, help=f"{r.view.title} (figures and numbers)"), r)

    p = _add(sub, "lesson", help="print a lesson (a Markdown file of captioned vitviz links) as a PDF handout")
    p.add_argument("lesson", help="the lesson's file, or a lesson shipped with vitviz: 'tour' (the guided tour), "
                                  "'test_the_map'")
    p.add_argument("--out", required=True, help="the handout's PDF file (one page per step)")
    p.add_argument("--base-url", help="the server's address as the class opens it (e.g. http://192.168.1.20:7860/; "
                                      "default: $VITVIZ_BASE_URL): each step's link is printed whole, and as a QR "
                                      "code")
    p.set_defaults(run=cmd_lesson)

    p = _add(sub, "bundle", help="make a downloaded view's figures again from its params.json (or ZIP)")
    p.add_argument("params", help="a bundle's params.json (its input.png beside it) or the downloaded ZIP")
    p.add_argument("--out", required=True, help="a folder for the figures (PNG and PDF) and numbers.json")
    p.set_defaults(run=cmd_bundle)

    p = _add(sub, "serve", help="the web app")
    p.add_argument("--port", type=_port, default=os.environ.get("GRADIO_SERVER_PORT", "7860"),
                   help="the port to serve on, 1 to 65535 (default: GRADIO_SERVER_PORT, else 7860)")
    p.set_defaults(run=cmd_serve)
    ap.commands = tuple(sub.choices)  # type: ignore[attr-defined]
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    static = parser(verbs=False).commands  # the commands that need no view's record (no torch for their --help)
    light = bool(argv) and argv[0] in static and argv[0] not in VIEW_COMMANDS
    args = parser(verbs=not light).parse_args(argv)
    # The notices say what a fallback means; the log (-v) says what was loaded, fallen back to and refused.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(message)s")
    if getattr(args, "models", None) and args.command != "serve":  # before the settings are checked: its names
        try:
            args.report = install_models(args.models)
        except ValueError as err:
            _say(str(err))
            return USAGE
    if getattr(args, "view", None) is not None:  # every setting checked before anything heavy is loaded
        try:
            checked(args.view, args, args.only)
        except ValueError as err:
            _say(_flagged(str(err)))
            return USAGE
    try:
        return args.run(args)
    except ValueError as err:  # the library's messages are written for people
        _say(_flagged(str(err)))
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
