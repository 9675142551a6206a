"""``vitviz crop``: crop a folder of pictures (or a list of them) to where a ViT's class token looks.

The work is cut the same way for every engine, so they write the same files byte for byte:

1. :func:`list_inputs` reads a folder tree or a CSV list of paths; each picture keeps its path relative to the
   source (``rel``), and its crop goes to ``crops/<rel>``: the tree is mirrored and the crop keeps the picture's
   name and format (``a.jpg`` gives a JPEG ``crops/a.jpg`` re-encoded with the picture's own quantisation tables,
   ``a.png`` a PNG ``crops/a.png``: no two pictures share an output). A picture whose format Pillow cannot write
   gets a PNG named ``<name>.png``. What a folder holds that is not a picture file (a hidden file or folder, a
   FIFO, a link to nothing) is listed with the reason, not passed over in silence.
2. :func:`plan` reads each picture's header (size and EXIF orientation, no pixels), computes the shape the model
   will see, and groups pictures of one shape, in order, into batches of at most ``batch``: one forward each.
3. :func:`crop_batch` decodes a batch, runs one forward, writes each crop and its record. The local engine runs
   the batches one after the other; the Ray engine (:mod:`vitviz.tools.crop_ray`) hands the same batches to a pool
   of actors that load the model once each.
4. :func:`write_table` gathers the records into ``boxes.csv``.

A crop and its record (``.vitviz-crop/<rel>.json``) are written atomically (temporary file, then rename), the record
last: a picture with a record made with the same settings is done, and a rerun skips it; a rerun with other
settings (model, short side, share kept) redoes it. An interrupted run loses only the batches in flight. A name too
long for the file system (255 bytes) is shortened with a digest of the whole path, so outputs stay one to one.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vitviz.core import digest

FIELDS = ["file", "crop", "width", "height", "left", "top", "right", "bottom", "mass_kept", "patches_kept", "model"]
"""The columns of ``boxes.csv``: the picture (relative to the source), its crop (relative to the output folder), the
picture's size, the box in its pixels, the share of attention and of patches inside the mask, the model used."""
RECORDS = ".vitviz-crop"
"""Beside ``crops/``: one JSON record per finished picture (what a rerun skips, what ``boxes.csv`` is made from)."""
SETTINGS = ("model", "resolution", "keep")
NAME_MAX = 255
"""The longest file or folder name (in bytes) the usual file systems accept."""


@dataclass(frozen=True)
class Item:
    """One picture to crop: where it is, and its path relative to the source (posix, used for every output)."""

    path: str
    rel: str


@dataclass(frozen=True)
class Skip:
    """A picture that could not be cropped, and why (in command-line words)."""

    rel: str
    why: str


def list_inputs(source: Path, out: Path | None = None) -> list[Item]:
    """The pictures under a folder (recursively; hidden files and folders left out: :func:`passed_over` lists
    them) or named in a CSV file (a ``path`` column, else the first column; relative paths are relative to the CSV's
    folder; ``\\`` read as ``/``), sorted by ``rel``; a path listed twice is one picture (:func:`duplicates` says
    which). Raises ``ValueError`` when ``out`` (the output folder) is the source folder or inside it: the crops would
    land among the pictures, overwrite files there and be cropped again by the next run."""
    source = Path(source)
    if source.is_dir():
        if out is not None and _inside(Path(out), source):
            raise ValueError(f"--out {out} is the source folder or inside it: the crops would be written among the "
                             "pictures (and cropped again by the next run). Choose an output folder outside it")
        items = [Item(str(p), rel) for p, rel, why in _walk(source) if why is None]
    elif source.is_file() and source.suffix.lower() == ".csv":
        items = _listed(source)
    else:
        raise ValueError(f"{source} is neither a folder nor a .csv list of pictures")
    unique = {i.rel: i for i in items}
    return [unique[k] for k in sorted(unique)]


def _walk(source: Path) -> Iterator[tuple[Path, str, str | None]]:
    """Every entry under the folder ``source``: (path, rel, None) for a picture file to crop, (path, rel, why) for
    what is passed over (hidden, not a regular file, a link to nothing). A hidden folder is one entry: nothing
    below it is looked at."""
    for folder, dirs, names in os.walk(source):
        base = Path(folder)
        for d in sorted(dirs):
            if d.startswith("."):
                yield base / d, (base / d).relative_to(source).as_posix(), "a hidden folder: left out"
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            p = base / name
            rel = p.relative_to(source).as_posix()
            if name.startswith("."):
                yield p, rel, "a hidden file: left out"
            elif p.is_symlink() and not p.exists():
                yield p, rel, "a link to nothing (its target is gone)"
            elif not p.is_file():
                yield p, rel, "not a regular file (a FIFO, a socket or a device)"
            else:
                yield p, rel, None


def passed_over(source: Path) -> list[Skip]:
    """What a folder holds besides the pictures :func:`list_inputs` takes, each with the reason (nothing for a CSV
    list: it names its pictures)."""
    source = Path(source)
    return [Skip(rel, why) for _, rel, why in _walk(source) if why is not None] if source.is_dir() else []


def _listed(listing: Path) -> list[Item]:
    """Every row of a CSV list as an :class:`Item`, in order (duplicates included)."""
    with listing.open(newline="") as f:
        rows = list(csv.reader(f))
    column = rows[0].index("path") if rows and "path" in rows[0] else 0
    body = rows[1:] if rows and "path" in rows[0] else rows
    items = []
    for row in body:
        if len(row) <= column or not row[column].strip():
            continue
        written = PurePosixPath(row[column].strip().replace("\\", "/"))
        path = Path(written) if written.is_absolute() else listing.parent / written
        items.append(Item(str(path), list_rel(written)))
    return items


def duplicates(source: Path) -> dict[str, int]:
    """For a CSV list: each picture (by ``rel``) listed more than once, and how many times (it is cropped once)."""
    source = Path(source)
    if not (source.is_file() and source.suffix.lower() == ".csv"):
        return {}
    counts: dict[str, int] = {}
    for item in _listed(source):
        counts[item.rel] = counts.get(item.rel, 0) + 1
    return {rel: n for rel, n in counts.items() if n > 1}


def in_output(items: list[Item], out: Path) -> tuple[list[Item], list[Skip]]:
    """``items`` without those inside the output folder (a list may name earlier crops), which are skipped."""
    keep, skipped = [], []
    for item in items:
        if _inside(Path(item.path), Path(out)):
            skipped.append(Skip(item.rel, "it is inside the output folder (--out): vitviz does not crop its own crops"))
        else:
            keep.append(item)
    return keep, skipped


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or somewhere below it (links and ``..`` resolved)."""
    return path.resolve() == folder.resolve() or path.resolve().is_relative_to(folder.resolve())


def list_rel(written: PurePosixPath) -> str:
    """A listed path as an output path inside the output folder, one to one: ``..`` becomes ``_up_``, an absolute
    path goes under ``_root_/``, and a name that already starts with ``_`` gets one more (``_up_`` → ``__up_``), so
    ``a.jpg``, ``../a.jpg``, ``_up_/a.jpg``, ``/a.jpg`` and ``_root_/a.jpg`` keep five outputs."""
    parts = ["_up_" if p == ".." else "_" + p if p.startswith("_") else p
             for p in written.parts if p not in ("/", ".")]
    return PurePosixPath("_root_" if written.is_absolute() else "", *parts).as_posix()


def _short(name: str, suffix: str, whole: str) -> str:
    """``name + suffix``, or when that is longer than :data:`NAME_MAX` bytes, the name cut and a digest of ``whole``
    (the picture's whole path) added: ``long…name~<16 hex>.png``, still one to one."""
    if len((name + suffix).encode()) <= NAME_MAX:
        return name + suffix
    tag = "~" + digest.content(whole.encode(), size=16) + suffix
    cut = name.encode()[:NAME_MAX - len(tag.encode())].decode(errors="ignore")
    return cut + tag


def output_path(root: Path, rel: str, suffix: str) -> Path:
    """``root/<rel><suffix>`` with every name fitting the file system (:func:`_short`)."""
    parts = PurePosixPath(rel).parts
    folders = [_short(part, "", "/".join(parts[:i + 1])) for i, part in enumerate(parts[:-1])]
    return Path(root, *folders, _short(parts[-1], suffix, rel))


def crop_format(rel: str) -> str | None:
    """The format a picture's crop is written in: the one its name's extension says, when Pillow writes it (JPEG,
    PNG, WebP, TIFF, GIF, BMP, ...); None when it does not (the crop is then a PNG named ``<name>.png``)."""
    from PIL import Image

    fmt = Image.registered_extensions().get(PurePosixPath(rel).suffix.lower())
    return fmt if fmt is not None and fmt in Image.SAVE else None


def crop_file(out: Path, rel: str) -> Path:
    """Where the crop of ``rel`` goes: ``crops/<rel>``, or ``crops/<rel>.png`` for a format Pillow cannot write."""
    return output_path(Path(out) / "crops", rel, "" if crop_format(rel) else ".png")


def save_crop(path: str, crop, rel: str, source: str) -> None:
    """Write the (h, w, 3) uint8 ``crop`` of the picture ``source`` (listed as ``rel``) at ``path`` in the picture's
    own format: a JPEG with the picture's quantisation tables and chroma subsampling when it has them (quality 95
    otherwise), WebP lossless, anything else with Pillow's defaults; PNG for a format Pillow does not write."""
    from PIL import Image, JpegImagePlugin

    fmt = crop_format(rel) or "PNG"
    image = Image.fromarray(crop)
    options: dict = {}
    if fmt == "JPEG":
        options = {"quality": 95}
        try:
            with Image.open(source) as original:
                if original.format == "JPEG" and getattr(original, "quantization", None):
                    options = {"qtables": original.quantization,
                               "subsampling": JpegImagePlugin.get_sampling(original)}
        except OSError:
            pass
        if options.get("subsampling", 0) < 0:  # not a sampling Pillow names: its default
            options.pop("subsampling")
    elif fmt == "WEBP":
        options = {"lossless": True}
    image.save(path, format=fmt, **options)


def record_file(out: Path, rel: str) -> Path:
    return output_path(Path(out) / RECORDS, rel, ".json")


def settings_of(runner, values: dict) -> dict:
    """What a crop depends on, as a record stores it: the model shown, the short side used and the share kept."""
    return {"model": runner.spec.key, "weights": runner.weights_id, "resolution": runner.side(values["resolution"]),
            "keep": float(values["keep"])}


def done(out: Path, item: Item, settings: dict | None = None) -> bool:
    """Whether ``item`` was finished by an earlier run with these ``settings`` (its record, made with them, and its
    crop are both there); without ``settings``, with any."""
    rec, crop = record_file(out, item.rel), crop_file(out, item.rel)
    if not (rec.is_file() and crop.is_file()):
        return False
    if settings is None:
        return True
    try:
        return json.loads(rec.read_text()).get("settings") == settings
    except (OSError, ValueError):
        return False


def clear_unfinished(out: Path) -> int:
    """Remove temporary files a run stopped mid-write left behind (start of a run: nothing else writes then)."""
    gone = 0
    for folder in (Path(out) / "crops", Path(out) / RECORDS):
        for tmp in folder.rglob(".tmp-*") if folder.is_dir() else ():
            tmp.unlink(missing_ok=True)
            gone += 1
    return gone


def header_shape(path: str) -> tuple[int, int]:
    """(height, width) of a picture as :func:`vitviz.core.images.load_rgb` will decode it (EXIF rotation
    included), from its header only. Raises ``ValueError`` in command-line words."""
    from PIL import Image, UnidentifiedImageError

    from vitviz.core.images import MAX_PIXELS

    try:
        with warnings.catch_warnings():  # vitviz's own pixel limit (below) is stricter than PIL's warning
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                w, h = im.size
                orientation = im.getexif().get(0x0112, 1)
    except FileNotFoundError as err:
        raise ValueError("no such file") from err
    except Image.DecompressionBombError as err:
        raise ValueError(f"too large to open safely (its header says more than {MAX_PIXELS / 1e6:.0f} "
                         "megapixels)") from err
    except UnidentifiedImageError as err:
        raise ValueError("not a picture vitviz can read (PNG, JPEG, GIF, WebP, ...)") from err
    except OSError as err:
        raise ValueError(f"cannot read it ({err})") from err
    if w * h > MAX_PIXELS:
        raise ValueError(f"too large: {w}×{h} = {w * h / 1e6:,.0f} megapixels (the limit is {MAX_PIXELS / 1e6:.0f})")
    return (w, h) if orientation in (5, 6, 7, 8) else (h, w)


def plan(items: Iterable[Item], shape: Callable[[int, int], tuple[int, int]],
         batch: int) -> tuple[list[list[Item]], list[Skip]]:
    """Batches of at most ``batch`` pictures that the model sees at one shape (``shape(h, w)``: the model's fitted
    (H, W) of an (h, w) picture; in the items' order, grouped by shape), and the pictures whose header cannot be
    read. Every engine runs exactly these batches."""
    groups: dict[tuple[int, int], list[Item]] = {}
    skipped = []
    for item in items:
        try:
            h, w = header_shape(item.path)
            fitted = shape(h, w)
        except ValueError as err:
            skipped.append(Skip(item.rel, str(err)))
            continue
        groups.setdefault(fitted, []).append(item)
    batches = [g[i:i + batch] for g in groups.values() for i in range(0, len(g), max(1, batch))]
    return batches, skipped


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """``write(temporary path)`` then rename onto ``path``: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def crop_batch(runner, batch: list[Item], values: dict, out: Path) -> tuple[list[dict], list[Skip]]:
    """Crop one planned batch with ``runner`` (one forward for the pictures that decode): write each crop and
    its record, and return the records and the pictures skipped (a file that does not decode)."""
    import torch
    from PIL import Image

    from vitviz.analyses.crops import ClassTokenProbe, box_of
    from vitviz.core import images
    from vitviz.views import shapes_only

    patch = runner.spec.patch
    decoded, skipped = [], []
    for item in batch:
        try:
            rgb = images.load_rgb(item.path)
            fitted, _ = runner.fit(rgb, values["resolution"])
        except ValueError as err:
            skipped.append(Skip(item.rel, str(err).replace("Please try another file.", "").strip()))
            continue
        decoded.append((item, rgb, fitted))
    if not decoded:
        return [], skipped
    x = torch.cat([runner.normalise(f.image) for _, _, f in decoded])  # (B, 3, H, W): one shape by the plan
    rows = runner.run(ClassTokenProbe(runner.spec.prefix), x).numpy()
    records = []
    settings = settings_of(runner, values)
    for (item, rgb, fitted), row in zip(decoded, rows):
        b = box_of(row, fitted.grid, patch, values["keep"])
        left, top, right, bottom = fitted.box_in_source(b.box)  # where the model's input lies in the picture
        crop = crop_file(out, item.rel)
        record = {"file": item.rel, "crop": crop.relative_to(out).as_posix(), "width": rgb.shape[1],
                  "height": rgb.shape[0], "left": left, "top": top, "right": right, "bottom": bottom,
                  "mass_kept": f"{b.mass_kept:.4f}", "patches_kept": f"{b.patches_kept:.4f}",
                  "model": runner.spec.key, "settings": settings}
        warning = shapes_only(runner.spec.key, rgb)  # a photo answered by the shapes-only model: said, not hidden
        if warning:
            record["warning"] = warning.replace("**", "")
        try:
            _atomic_write(crop, lambda tmp, r=rgb[top:bottom, left:right], i=item: save_crop(tmp, r, i.rel, i.path))
            _atomic_write(record_file(out, item.rel), lambda tmp, r=record: Path(tmp).write_text(json.dumps(r)))
        except OSError as err:  # a full disk, a folder that cannot be made: this picture is skipped, the run goes on
            skipped.append(Skip(item.rel, f"its crop cannot be written ({err.strerror or err})"))
            continue
        records.append(record)
    return records, skipped


def records(out: Path) -> Iterator[dict]:
    """Every record written under ``out`` (by any run, any engine), in path order."""
    root = Path(out) / RECORDS
    for path in sorted(root.rglob("*.json")) if root.is_dir() else ():
        yield json.loads(path.read_text())


def write_table(out: Path, items: Iterable[Item], settings: dict | None = None) -> Path:
    """``boxes.csv`` for the pictures of this source that are done (with ``settings``, when given), one row each,
    sorted by path."""
    wanted = {i.rel for i in items}
    rows = sorted((r for r in records(out) if r["file"] in wanted and (settings is None or
                                                                       r.get("settings") == settings)),
                  key=lambda r: r["file"])
    table = Path(out) / "boxes.csv"
    _atomic_write(table, lambda tmp: _write_csv(tmp, rows))
    return table


def _write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def run_local(runner, batches: list[list[Item]], values: dict, out: Path,
              progress: Callable[[int], None] = lambda n: None) -> tuple[list[dict], list[Skip]]:
    """The local engine: the planned batches one after the other in this process; ``progress(n)`` hears of each
    batch's n pictures as it is done. (records written, skipped)."""
    written, skipped = [], []
    for batch in batches:
        done_now, skip = crop_batch(runner, batch, values, out)
        written += done_now
        skipped += skip
        progress(len(batch))
    return written, skipped
