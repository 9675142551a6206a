"""The ``vitviz`` command: the app's views for files and folders, with the app's registry, offline rules and messages.

    vitviz models                                          the registry, and which weights can be had now
    vitviz costs --model ViT-B --patch 16 --size 224       the multiply-accumulate table (--format csv or json)
    vitviz patches IMAGE --patch 16 --size 224 [--out DIR] token counts; with --out the grid picture and a JSON
    vitviz attention IMAGE... --out DIR [--model KEY]      per picture: head maps, rollout, mask (PNG) and numbers (JSON)
    vitviz crop FOLDER --out DIR [--model KEY]             the camera-trap recipe: attention -> mask -> box -> crop, CSV
    vitviz bundle params.json --out DIR                    a downloaded view's figures again, pixel for pixel
    vitviz serve [--port 7860]                             the web app

Exit codes: 0 everything done; 1 nothing done (the message says why); 2 the command was written wrong;
3 done in part: some inputs were skipped, each listed with its reason.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
from pathlib import Path

import numpy as np

DONE, FAILED, USAGE, PARTLY = 0, 1, 2, 3


def _say(*lines: str) -> None:
    print(*lines, sep="\n", file=sys.stderr)


def _progress(items: list, label: str):
    from tqdm import tqdm

    return tqdm(items, desc=label, unit="picture", file=sys.stderr, disable=len(items) < 2)


def _model(key: str):
    from vitviz.models import cache as models

    loaded = models.get_model(key)
    if loaded.notice:
        _say(loaded.notice.replace("**", ""))
    return loaded


# ---- vitviz models / costs --------------------------------------------------------------------

def cmd_models(args: argparse.Namespace) -> int:
    from vitviz.models import loaders
    from vitviz.specs import registry

    rows = [(s.key, s.task, f"{s.params_m:g} M", f"P={s.patch}", loaders.availability(s))
            for s in registry.REGISTRY.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    return DONE


def cmd_costs(args: argparse.Namespace) -> int:
    from vitviz.core import patches
    from vitviz.specs import registry

    parts = patches.vit_macs(registry.VIT_SIZES[args.model], args.patch, args.size, args.size)
    total = sum(parts.values())
    if args.format == "json":
        print(json.dumps({"model": args.model, "patch": args.patch, "size": args.size, "macs": parts,
                          "total": total}, indent=2))
    elif args.format == "csv":
        out = csv.writer(sys.stdout)
        out.writerow(["component", "macs", "share"])
        out.writerows([name, v, f"{v / total:.4f}"] for name, v in parts.items())
        out.writerow(["total", total, "1.0000"])
    else:
        print(f"{args.model}/{args.patch} at {args.size}×{args.size}: multiply-accumulates of one forward pass")
        for name, v in list(parts.items()) + [("total", total)]:
            print(f"  {name:<22} {v:>16,}  {v / total:6.1%}")
    return DONE


# ---- vitviz patches ---------------------------------------------------------------------------------

def cmd_patches(args: argparse.Namespace) -> int:
    from vitviz.core import images
    from vitviz.core import patches
    from vitviz.views import patches as view

    rgb = images.load_rgb(args.image, images.INTAKE_SHORT_SIDE)
    fitted = view.fit(rgb, args.size, args.patch, args.policy)
    h, w = fitted.image.shape[:2]
    counts = patches.token_counts(h, w, args.patch)
    counts.pop("all attention entries", None)  # needs a model's heads and depth; the costs command has those
    print(fitted.note)
    for name, value in counts.items():
        print(f"  {name:<22} {value:,}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = Path(args.image).stem
        view.grid_image(fitted)[0].save(out / f"{stem}_patches.png")
        (out / f"{stem}_patches.json").write_text(json.dumps({"image": str(args.image), "note": fitted.note,
                                                               "patch": args.patch, **counts}, indent=2))
        print(f"wrote {out / (stem + '_patches.png')} and its JSON")
    return DONE


# ---- vitviz attention -------------------------------------------------------------------------------

def cmd_attention(args: argparse.Namespace) -> int:
    from PIL import Image

    from vitviz.analyses import attention as analysis
    from vitviz.core import images
    from vitviz.core import attention as att
    from vitviz.views import attention as view

    loaded = _model(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    skipped = []
    for path in _progress(args.images, "attention"):
        try:
            a = analysis.analyse(loaded, images.load_rgb(path, images.INTAKE_SHORT_SIDE), args.size)
        except ValueError as err:
            skipped.append((path, str(err)))
            continue
        stem = Path(path).stem
        numbers = view.numbers(a, args.layer, args.threshold)
        heads = view.render_heads(a, numbers["layer"], args.threshold, args.cmap, args.alpha)
        heads.heads.save(out / f"{stem}_heads.png")
        view.render_rollout(a, "mean", 0.0, args.cmap, args.alpha).save(out / f"{stem}_rollout.png")
        mask = att.mass_mask(a.maps.cls_map(numbers["layer"] - 1), args.threshold)[0]
        big = np.kron(mask, np.ones((a.maps.patch, a.maps.patch), bool))
        Image.fromarray((big * 255).astype(np.uint8)).save(out / f"{stem}_mask.png")
        record = {"image": str(path), "asked_for": args.model, "model": loaded.spec.key, "notice": loaded.notice,
                  "size": args.size, "input": a.fitted.note, **numbers}
        (out / f"{stem}.json").write_text(json.dumps(record, indent=2))
    return _report(len(args.images), skipped)


# ---- vitviz crop ------------------------------------------------------------------------------------------

CROP_FIELDS = ["file", "width", "height", "left", "top", "right", "bottom", "mass_kept", "patches_kept", "model"]


def cmd_crop(args: argparse.Namespace) -> int:
    from PIL import Image

    from vitviz.analyses import attention as analysis
    from vitviz.core import images
    from vitviz.views import attention as view

    folder, out = Path(args.folder), Path(args.out)
    if not folder.is_dir():
        _say(f"{folder} is not a folder.")
        return FAILED
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    crops, table = out / "crops", out / "boxes.csv"
    crops.mkdir(parents=True, exist_ok=True)
    rows = {}
    if table.exists():
        with table.open(newline="") as f:
            rows = {r["file"]: r for r in csv.DictReader(f)}
    todo = [p for p in files if not (p.name in rows and (crops / f"{p.stem}.png").exists())]
    loaded = _model(args.model) if todo else None
    skipped = []
    for path in _progress(todo, "crop"):
        try:
            rgb = images.load_rgb(path)
            a = analysis.analyse(loaded, rgb, args.size)
        except ValueError as err:
            skipped.append((path, str(err)))
            continue
        last = view.numbers(a, a.maps.layers, args.threshold)  # the last layer's head-mean mask and its box
        mean = last["maps"][-1]
        box = last["box"] or (0, 0, a.fitted.image.shape[1], a.fitted.image.shape[0])
        left, top, right, bottom = images.box_to_original(box, *rgb.shape[:2], a.resolution, a.maps.patch)
        Image.fromarray(rgb[top:bottom, left:right]).save(crops / f"{path.stem}.png")
        rows[path.name] = {"file": path.name, "width": rgb.shape[1], "height": rgb.shape[0], "left": left, "top": top,
                           "right": right, "bottom": bottom, "mass_kept": f"{mean['mass_kept']:.4f}",
                           "patches_kept": f"{mean['patches_kept']:.4f}", "model": loaded.spec.key}
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, CROP_FIELDS)
        writer.writeheader()
        writer.writerows(rows[name] for name in sorted(rows))
    print(f"{len(todo) - len(skipped)} cropped, {len(files) - len(todo)} already done, {len(skipped)} skipped; "
          f"boxes in {table}")
    return _report(len(files), skipped)


def _report(total: int, skipped: list[tuple[Path, str]]) -> int:
    for path, why in skipped:
        _say(f"skipped {path}: {why}")
    if skipped and len(skipped) == total:
        return FAILED
    return PARTLY if skipped else DONE


# ---- vitviz bundle ----------------------------------------------------------------------------------------

def cmd_bundle(args: argparse.Namespace) -> int:
    from vitviz.tools import bundle

    params = Path(args.params)
    if params.is_file() and params.suffix == ".zip":  # a downloaded bundle as it came
        import tempfile
        import zipfile

        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(params) as z:
            z.extractall(tmp)
            written = bundle.reproduce(Path(tmp) / "params.json", Path(args.out))
    elif params.is_file():
        written = bundle.reproduce(params, Path(args.out))
    else:
        _say(f"{params} is not a file: give the params.json of a bundle (input.png beside it), or the bundle's ZIP.")
        return FAILED
    print(f"wrote {len(written)} figures (PNG and PDF) and numbers.json to {args.out}")
    return DONE


# ---- vitviz serve ------------------------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("gradio") is None:
        _say("vitviz serve runs the web app, which needs gradio: pip install 'vitviz[app]' (or requirements.txt).")
        return FAILED
    from vitviz.app import build_demo, launch_kwargs

    kwargs = launch_kwargs()
    kwargs["server_port"] = args.port
    build_demo().launch(**kwargs)
    return DONE


# ---- the parser ----------------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    from vitviz.core import images
    from vitviz.render import plotting
    from vitviz.specs import registry

    ap = argparse.ArgumentParser(prog="vitviz", description="How a Vision Transformer sees an image.",
                                 epilog="Exit codes: 0 done, 1 nothing done, 2 wrong usage, 3 done in part.")
    ap.add_argument("-v", "--verbose", action="store_true", help="log what is loaded, fallen back to and refused")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="the supported models and which can be had now").set_defaults(run=cmd_models)

    p = sub.add_parser("costs", help="multiply-accumulates of one forward pass, per component")
    p.add_argument("--model", choices=list(registry.VIT_SIZES), default="ViT-B")
    p.add_argument("--patch", type=int, default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(run=cmd_costs)

    p = sub.add_parser("patches", help="cut a picture into patches")
    p.add_argument("image")
    p.add_argument("--patch", type=int, choices=[4, 8, 14, 16, 32], default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--policy", choices=list(images.POLICIES), default="crop")
    p.add_argument("--out")
    p.set_defaults(run=cmd_patches)

    def model_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", choices=registry.keys("attention"), default="DINO ViT-S/8", metavar="KEY",
                       help="a registry key (vitviz models lists them); default DINO ViT-S/8")
        p.add_argument("--size", type=int, default=224, help="short side in pixels (default 224)")
        p.add_argument("--threshold", type=float, default=0.6, help="share of attention mass to keep (0.6)")

    p = sub.add_parser("attention", help="class-token attention per head, rollout and mask, with its numbers")
    p.add_argument("images", nargs="+")
    model_options(p)
    p.add_argument("--layer", type=int, default=99, help="layer number, 1 = first (default: the last)")
    p.add_argument("--cmap", choices=list(plotting.SEQUENTIAL), default="inferno")
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_attention)

    p = sub.add_parser("crop", help="crop every picture in a folder to where the class token looks")
    p.add_argument("folder")
    model_options(p)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_crop)

    p = sub.add_parser("bundle", help="make a downloaded view's figures again from its params.json (or ZIP)")
    p.add_argument("params")
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_bundle)

    p = sub.add_parser("serve", help="the web app")
    p.add_argument("--port", type=int, default=7860)
    p.set_defaults(run=cmd_serve)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # The notices say what a fallback means; the log (-v) says what was loaded, fallen back to and refused.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(message)s")
    if hasattr(args, "threshold") and not 0 < args.threshold <= 1:
        _say("The threshold is a share of the attention mass: more than 0 and at most 1.")
        return USAGE
    try:
        return args.run(args)
    except ValueError as err:  # the library's messages are written for people
        _say(str(err))
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
