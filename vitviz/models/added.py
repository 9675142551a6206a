"""Models the server's operator adds: a models file (TOML), read once at start.

Students pick from a list and never type a model id or a path; whoever runs the server may put their own
checkpoints on that list (``vitviz serve --models FILE``, ``VITVIZ_MODELS=FILE`` for ``app.py`` on a Space, or
``--models FILE`` on any CLI subcommand)::

    [[model]]
    name = "Lab ViT-S/16 (camera traps)"        # shown in the lists
    timm = "vit_small_patch16_224"               # the architecture: a timm name, or
    # transformers = "path/to/folder"            # a local transformers folder (config.json + safetensors)
    weights = "path/to/model.safetensors"        # a local file, or hub = "org/name" for a hub checkpoint
    labels = "path/to/labels.txt"                # optional: one class name per line (makes it a classifier)
    # mean = [0.5, 0.5, 0.5]; std = [0.5, 0.5, 0.5]; resolution = 224    # optional: override the preprocessing

Relative paths are read from the models file's folder. Safetensors only (no pickle), never ``trust_remote_code``.
Each entry is checked when the file is read: its fields, the architecture, the weights (loaded strictly: every
shape must match), the labels (one per output of the head) and a forward whose queries and keys are recorded.
A broken entry is reported with its name and the field at fault and left out; the others are added.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Callable

import torch
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from vitviz.core import owned
from vitviz.models import hooks, listing, loaders
from vitviz.models.runner import Call, Runner
from vitviz.specs import registry

log = logging.getLogger("vitviz")

ABOUT = registry.ADDED_ABOUT


@dataclass(frozen=True)
class Entry:
    """One ``[[model]]`` of a models file, its paths resolved."""

    name: str
    timm: str | None = None
    transformers: Path | None = None
    weights: Path | None = None
    hub: str | None = None
    labels: Path | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    resolution: int | None = None


@dataclass(frozen=True)
class Problem:
    """Why an entry was left out: its name (or its place in the file), the field at fault, in words."""

    name: str
    field: str
    why: str

    def __str__(self) -> str:
        return f"{self.name}: {self.field}: {self.why}"


@dataclass
class Report:
    """What a models file gave: the models added (name -> where from) and the entries left out."""

    path: Path
    added: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.path}: {len(self.added)} model(s) added, {len(self.problems)} left out"]
        out += [f"  added    {name} ({origin})" for name, origin in self.added.items()]
        out += [f"  left out {p}" for p in self.problems]
        return out


class EntryError(ValueError):
    """An entry that cannot be used: the field at fault and why."""

    def __init__(self, field_name: str, why: str) -> None:
        super().__init__(why)
        self.field = field_name


_entries: dict[str, Entry] = {}
_lock = threading.Lock()
owned.keep("added.entries", "operator", _entries, "models the operator added (a models file)",
           owned.cleared_under(_lock, _entries))


def entry(key: str) -> Entry | None:
    """The added model named ``key``, or None (one of vitviz's own, or unknown)."""
    return _entries.get(key)


def parse(path: str | Path) -> tuple[list[Entry], list[Problem]]:
    """The entries of the models file ``path`` whose fields are well formed, and the problems of the others.

    ``ValueError`` when the file itself cannot be read (missing, not TOML)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ValueError(f"Cannot read the models file {path}: {err.strerror or err}.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"The models file {path} is not valid TOML: {err}.") from None
    items = data.get("model", [])
    if not isinstance(items, list):
        raise ValueError(f"The models file {path} must list its models as [[model]] tables.")
    entries, problems, names = [], [], set()
    for i, item in enumerate(items, 1):
        label = str(item.get("name") or f"model #{i}") if isinstance(item, dict) else f"model #{i}"
        try:
            e = _entry(item, path.parent)
            if e.name in names:
                raise EntryError("name", "another entry of this file has the same name.")
            names.add(e.name)
            entries.append(e)
        except EntryError as err:
            problems.append(Problem(label, err.field, str(err)))
    return entries, problems


Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Fields(BaseModel):
    """A ``[[model]]`` table's fields and their types, as TOML gives them (strict: no text read as a number, no
    true read as 1): what :func:`_entry` checks before the rules between fields and the files they name."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Text
    timm: Text | None = None
    transformers: Text | None = None
    weights: Text | None = None
    hub: Text | None = None
    labels: Text | None = None
    mean: Annotated[list[Finite], Field(min_length=3, max_length=3)] | None = None
    std: Annotated[list[Annotated[Finite, Field(gt=0)]], Field(min_length=3, max_length=3)] | None = None
    resolution: Annotated[int, Field(ge=16, le=1024)] | None = None


FIELDS = tuple(_Fields.model_fields)
_SAID = {"name": "every model needs a name (the text shown in the lists).",
         "mean": "must be three numbers, one per colour channel.",
         "std": "must be three numbers, one per colour channel.",
         "resolution": "must be a whole number of pixels from 16 to 1024."}
"""What a field's wrong value is told (a text field: must be a non-empty text); by the kind of fault where the
field's sentence is not enough."""
_SAID_OF = {"finite_number": "must be three finite numbers (not nan or inf).",
            "greater_than": "must be three positive numbers (a picture is divided by them)."}


def _fields(item: object) -> _Fields:
    """``item``'s fields checked against :class:`_Fields`; ``EntryError`` names the first field at fault (an
    unknown field first, then in the order of :data:`FIELDS`)."""
    if not isinstance(item, dict):
        raise EntryError("model", "each [[model]] must be a table of fields.")
    try:
        return _Fields.model_validate(item)
    except ValidationError as err:
        faults = err.errors()
    order = {name: i for i, name in enumerate(FIELDS)}
    first = min(faults, key=lambda f: (f["type"] != "extra_forbidden", order.get(str(f["loc"][0]), -1),
                                       str(f["loc"][0])))
    key = str(first["loc"][0])
    if first["type"] == "extra_forbidden":
        raise EntryError(key, f"not a field of a model (the fields are {', '.join(FIELDS)}).")
    raise EntryError(key, _SAID_OF.get(first["type"]) if key in ("mean", "std") and first["type"] in _SAID_OF
                     else _SAID.get(key, "must be a non-empty text."))


def _entry(item: object, base: Path) -> Entry:
    f = _fields(item)

    def local(key: str, folder: bool = False) -> Path | None:
        v = getattr(f, key)
        if v is None:
            return None
        p = (base / v).expanduser().resolve()
        if not (p.is_dir() if folder else p.is_file()):
            raise EntryError(key, f"{'no folder' if folder else 'no file'} at {p}.")
        return p

    folder = local("transformers", folder=True)
    given = [k for k, v in (("timm", f.timm), ("transformers", folder)) if v is not None]
    if len(given) > 1 or not (given or f.hub):  # a hub repo alone is a transformers checkpoint
        raise EntryError(given[0] if given else "timm",
                         "give the architecture once: timm = a timm name, or transformers = a local folder.")
    weights = local("weights")
    if weights is not None and weights.suffix != ".safetensors":
        raise EntryError("weights", "only .safetensors files are loaded (no pickled checkpoints).")
    if f.timm is not None and weights is None and f.hub is None:
        raise EntryError("weights", "a timm architecture needs its weights: weights = a .safetensors file, or "
                                    "hub = \"org/name\".")
    if weights is not None and f.hub is not None:
        raise EntryError("hub", "give the weights once: a local file or a hub checkpoint, not both.")
    if folder is not None and weights is not None:
        raise EntryError("weights", "a transformers folder holds its own weights; leave weights out.")
    three = {k: tuple(v) if v is not None else None for k, v in (("mean", f.mean), ("std", f.std))}
    return Entry(f.name, f.timm, folder, weights, f.hub, local("labels"), three["mean"], three["std"], f.resolution)


LABELS_BYTES = 4 * 2**20
"""The largest labels file read (about 100,000 class names; ImageNet-21k's are 0.7 MB): checked before reading."""
HEADER_BYTES = 100 * 2**20
"""The largest safetensors header read (the JSON that lists the tensors; a real checkpoint's is a few hundred kB)."""


def read_labels(e: Entry) -> list[str] | None:
    """The entry's class names (one per non-empty line), or None without a labels file."""
    if e.labels is None:
        return None
    size = e.labels.stat().st_size
    if size > LABELS_BYTES:
        raise EntryError("labels", f"the labels file is {size / 2**20:.0f} MiB; a labels file holds at most "
                                   f"{LABELS_BYTES // 2**20} MiB of class names, one per line.")
    try:
        names = [line.strip() for line in e.labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise EntryError("labels", "the labels file is not UTF-8 text.") from None
    if not names:
        raise EntryError("labels", "the labels file names no class.")
    return names


MODEL_BYTES = int(float(os.environ.get("VITVIZ_MODEL_MB", "4096")) * 2**20)
"""The most memory one added model's weights may take once loaded, as float32 (``VITVIZ_MODEL_MB``, 4 GiB unless set:
ViT-H/14 takes 2.5 GiB): checked from the weights' header and the architecture built on the meta device, before
anything is allocated."""
DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
              "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
              "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
"""Bits per number of each dtype safetensors knows (the 22 of safetensors 0.8's format; F4 and F6 pack numbers
across bytes, and a tensor of them must fill whole bytes)."""


def _mib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def _within_budget(numbers: int, what: str, field_name: str = "weights") -> None:
    """``EntryError`` when ``numbers`` parameters, as float32, would take more than :data:`MODEL_BYTES`."""
    if numbers * 4 > MODEL_BYTES:
        raise EntryError(field_name, f"{what} {numbers:,} numbers, {_mib(numbers * 4)} once loaded as float32; a model "
                                     f"added here may take at most {_mib(MODEL_BYTES)} (VITVIZ_MODEL_MB). Use a smaller "
                                     "checkpoint, or set VITVIZ_MODEL_MB higher if this server has the memory.")


def safetensors_header(path: Path) -> dict[str, tuple[str, list[int], int]]:
    """Every tensor of a safetensors file as (dtype, shape, bytes), read from its header alone and checked against the
    file: ``EntryError`` for a file that is not one (a pickle renamed, a header that claims more than
    :data:`HEADER_BYTES` or more than the file holds, a tensor whose shape and dtype do not make its bytes) or whose
    tensors would take more than :data:`MODEL_BYTES` once loaded. Nothing else is read: a sparse file of 8 GB costs
    nothing to check."""
    import json
    import math
    import struct

    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 2 <= n <= min(HEADER_BYTES, size - 8):
            raise EntryError("weights", "not a safetensors file (its header is missing, too large or longer than "
                                        "the file).")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, ValueError):
            raise EntryError("weights", "not a safetensors file (its header is not JSON).") from None
    if not isinstance(header, dict):
        raise EntryError("weights", "not a safetensors file (its header lists no tensors).")
    tensors, end = {}, 0
    for name, v in header.items():
        if name == "__metadata__" or not isinstance(v, dict):
            continue
        shape, dtype, offsets = v.get("shape"), v.get("dtype"), v.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape)):
            raise EntryError("weights", "not a safetensors file (its header lists no tensors with shapes).")
        if isinstance(dtype, str) and dtype not in DTYPE_BITS:
            raise EntryError("weights", f"unknown dtype {dtype[:20]!r} (tensor {name[:60]!r}): not one of the "
                                        f"{len(DTYPE_BITS)} safetensors knows, so its size cannot be checked.")
        if dtype is None or not isinstance(dtype, str) or not (
                isinstance(offsets, list) and len(offsets) == 2 and all(
                isinstance(o, int) and not isinstance(o, bool) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise EntryError("weights", f"not a safetensors file (tensor {name[:60]!r} has no dtype or byte range "
                                        "safetensors writes).")
        bits = math.prod(shape) * DTYPE_BITS[dtype]
        if bits % 8:
            raise EntryError("weights", f"not a safetensors file (tensor {name[:60]!r}, {tuple(shape)} as {dtype}, "
                                        "does not fill whole bytes).")
        nbytes = bits // 8
        if offsets[1] - offsets[0] != nbytes:
            raise EntryError("weights", f"not a safetensors file (tensor {name[:60]!r}, {tuple(shape)} as {dtype}, "
                                        f"takes {nbytes:,} bytes, but its byte range holds {offsets[1] - offsets[0]:,}).")
        tensors[name] = (dtype, shape, nbytes)
        end = max(end, offsets[1])
    if not tensors:
        raise EntryError("weights", "not a safetensors file (its header lists no tensors with shapes).")
    if end > size - 8 - n:
        raise EntryError("weights", f"the header says its tensors take {_mib(end)}, but the file holds "
                                    f"{_mib(size - 8 - n)} after it: the file is cut short, or not what it claims.")
    _within_budget(sum(math.prod(shape) for _, shape, _ in tensors.values()), "its tensors hold")
    return tensors


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Every tensor's shape in a safetensors file, read from its header alone and checked
    (:func:`safetensors_header`)."""
    return {name: shape for name, (_, shape, _) in safetensors_header(path).items()}


CONFIG_BYTES = 2**20
"""The largest config.json read from a transformers folder (a real one is a few kB)."""


def _own_code(folder: Path) -> None:
    """``EntryError`` for a transformers folder that is not a plain checkpoint of transformers' own classes: a
    config.json that asks for code of its own (``auto_map``, or ``custom_pipelines``), or weights over the budget
    (every ``*.safetensors`` header: :func:`safetensors_header`). Said before transformers reads the folder (it would
    advise passing ``trust_remote_code=True``, which vitviz never does)."""
    import json

    config = folder / "config.json"
    if not config.is_file():
        raise EntryError("transformers", "the folder has no config.json (save the model with save_pretrained).")
    if config.stat().st_size > CONFIG_BYTES:
        raise EntryError("transformers", f"its config.json is over {CONFIG_BYTES // 2**20} MiB; a model's is a few kB.")
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise EntryError("transformers", "its config.json is not JSON text.") from None
    if not isinstance(values, dict):
        raise EntryError("transformers", "its config.json holds no settings.")
    asks = [k for k in ("auto_map", "custom_pipelines") if values.get(k)]
    if asks:
        raise EntryError("transformers", f"its config.json asks for the checkpoint's own code ({asks[0]}): vitviz runs "
                                         "only transformers' own classes, never code that comes with a checkpoint. "
                                         "Use a folder saved from ViTModel, DeiTModel or Dinov2Model (or their "
                                         "ForImageClassification), without auto_map.")
    import math

    numbers = sum(math.prod(shape) for file in sorted(folder.glob("*.safetensors"))
                  for _, shape, _ in safetensors_header(file).values())
    _within_budget(numbers, "its weights hold")


VIT_MODULES = ("timm.models.vision_transformer", "timm.models.deit")
"""The timm modules whose architectures vitviz records (ViT, DeiT, DINOv2 and register ViTs are defined there)."""


def _timm_module(e: Entry, labels: list[str] | None) -> torch.nn.Module:
    """The timm model with the entry's weights, loaded strictly; its head as the weights have it (timm would drop a
    head whose size differs from the one asked for: vitviz never asks for another), and its position table exactly
    as the weights hold it (timm would resample one of another size, silently)."""
    import timm

    if e.timm not in timm.list_models() and e.timm not in timm.list_pretrained():
        raise EntryError("timm", f"{e.timm!r} is not a timm architecture.")
    entry_module = getattr(timm.models.model_entrypoint(e.timm), "__module__", "")
    if entry_module not in VIT_MODULES:
        raise EntryError("timm", f"{e.timm!r} is not a Vision Transformer vitviz can record (its attention): "
                                 f"vitviz records timm's ViT family (ViT, DeiT, DINOv2, with or without registers).")
    overlay: dict = {"file": str(e.weights)} if e.weights is not None else {"hf_hub_id": e.hub}
    kwargs: dict = {}
    if e.weights is not None:
        shapes = safetensors_shapes(e.weights)
        head = shapes.get("head.weight")
        if head is not None and len(head) != 2:
            raise EntryError("weights", f"head.weight has shape {tuple(head)}; a classifier's head is (classes, "
                                        "width).")
        classes = head[0] if head is not None else 0
        if labels is not None and classes != len(labels):
            raise EntryError("labels", f"{len(labels)} labels, but the weights' head has "
                                       f"{classes or 'no'} output{'s' if classes != 1 else ''}.")
        kwargs["num_classes"] = overlay["num_classes"] = classes
        _within_budget(_numbers_of(e.timm, num_classes=classes), f"{e.timm} with {classes:,} classes holds", "timm")
        want = _shape_of(e.timm, "pos_embed", num_classes=classes)
        held = shapes.get("pos_embed")
        if held is not None and want is not None and len(held) == 3 and held[2] == want[2] and held[1] != want[1]:
            raise EntryError("weights", f"the position embedding holds {tuple(held)}, but {e.timm} "
                                        f"has {tuple(want)}: the weights are of another input size or patch size "
                                        "(name the architecture that matches them).")
    try:
        module = timm.create_model(e.timm, pretrained=True, pretrained_cfg_overlay=overlay, dynamic_img_size=True,
                                   **kwargs)
    except RuntimeError as err:  # strict loading: a shape or a name does not match
        first = str(err).strip().splitlines()
        raise EntryError("weights", f"the weights do not fit {e.timm}: "
                                    f"{first[1].strip() if len(first) > 1 else first[0]}") from None
    if labels is not None and module.num_classes != len(labels):
        raise EntryError("labels", f"{len(labels)} labels, but the model's head has {module.num_classes} outputs.")
    return module


def _shape_of(name: str, parameter: str, **kwargs) -> tuple[int, ...] | None:
    """The shape of ``parameter`` in timm's ``name`` built without weights (on the meta device: nothing allocated)."""
    import timm

    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, **kwargs)
    p = dict(model.named_parameters()).get(parameter)
    return tuple(p.shape) if p is not None else None


def _numbers_of(name: str, **kwargs) -> int:
    """How many parameters timm's ``name`` has, built on the meta device (nothing allocated)."""
    import timm

    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, **kwargs)
    return sum(p.numel() for p in model.parameters())


def _hf_module(e: Entry, labels: list[str] | None) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModel, AutoModelForImageClassification

    source = str(e.transformers) if e.transformers is not None else e.hub
    where = "transformers" if e.transformers else "hub"
    if e.transformers is not None:
        _own_code(e.transformers)
    kw = dict(local_files_only=e.transformers is not None or not loaders.hub_reachable(), trust_remote_code=False)
    try:
        config = AutoConfig.from_pretrained(source, **kw)
    except (OSError, ValueError) as err:
        if "trust_remote_code" in str(err):  # a hub checkpoint that needs its own code: said in our words
            raise EntryError(where, "the checkpoint asks for its own code (auto_map): vitviz runs only "
                                    "transformers' own classes, never code that comes with a checkpoint.") from None
        raise EntryError(where, f"no usable config.json ({err}).") from None
    if config.model_type not in loaders.RECORDABLE_HF:
        raise EntryError(where,
                         f"vitviz cannot record the attention of a {config.model_type!r} model (it records "
                         f"{', '.join(loaders.RECORDABLE_HF)}).")
    classifier = labels is not None or any(a.endswith("ForImageClassification") for a in config.architectures or ())
    if e.transformers is not None and not any(e.transformers.glob("*.safetensors")):
        raise EntryError("transformers", "the folder has no .safetensors weights (pickled checkpoints are not "
                                         "loaded).")
    cls = AutoModelForImageClassification if classifier else AutoModel
    extra = {"add_pooling_layer": False} if not classifier and config.model_type == "vit" else {}
    try:
        with torch.device("meta"):  # the architecture config.json describes, counted with nothing allocated
            skeleton = cls.from_config(config, **extra)
    except (OSError, ValueError, TypeError, RuntimeError) as err:
        raise EntryError(where, f"its config.json does not describe a model transformers can build ({err}).") from None
    layers = getattr(config, "num_hidden_layers", "?")
    _within_budget(sum(p.numel() for p in skeleton.parameters()),
                   f"the architecture its config.json describes ({config.model_type}, {layers} layers) holds", where)
    try:
        module, info = cls.from_pretrained(source, config=config, attn_implementation="sdpa", use_safetensors=True,
                                           output_loading_info=True, **kw, **extra)
    except (OSError, ValueError, RuntimeError) as err:
        raise EntryError("weights" if e.transformers else "hub", f"the weights cannot be loaded ({err}).") from None
    _covered(module, info, layers, "weights" if e.transformers else "hub")
    return module


def _covered(module: torch.nn.Module, info: dict, layers: object, field_name: str) -> None:
    """``EntryError`` when the checkpoint's weights do not cover the architecture its config.json describes (what
    transformers would fill in with random numbers: ``info["missing_keys"]``), or hold tensors it has no place for
    (``unexpected_keys``, but for a pooler vitviz leaves out); the counts are in the message."""
    state = module.state_dict()
    missing = sorted(info.get("missing_keys") or ())
    unexpected = sorted(k for k in info.get("unexpected_keys") or () if "pooler" not in k)
    if not missing and not unexpected:
        return
    numbers = sum(state[k].numel() for k in missing if k in state)
    said = []
    if missing:
        said.append(f"{len(missing):,} of the model's tensors ({numbers:,} numbers, e.g. {missing[0][:60]!r}) are not "
                    "in the weights, and transformers would fill them with random numbers")
    if unexpected:
        said.append(f"{len(unexpected):,} tensors of the weights (e.g. {unexpected[0][:60]!r}) have no place in it")
    if missing and all(k.startswith("classifier.") for k in missing):  # labels given for a checkpoint without a head
        said[0] += " (the classifier: the checkpoint has none, so labels cannot be given for it)"
    raise EntryError(field_name, f"the weights do not cover the architecture its config.json describes "
                                 f"({layers} layers): {'; '.join(said)}. Save the model and its config.json together "
                                 "with save_pretrained.")


def _hf_preprocessing(e: Entry) -> tuple[tuple | None, tuple | None, int | None]:
    """(mean, std, side): the entry's own, else the checkpoint's image processor's (None where neither says)."""
    from transformers import AutoImageProcessor

    source = str(e.transformers) if e.transformers is not None else e.hub
    try:
        proc = AutoImageProcessor.from_pretrained(source, local_files_only=e.transformers is not None,
                                                  trust_remote_code=False)
    except (OSError, ValueError):  # no preprocessor_config.json: the model's defaults
        return e.mean, e.std, e.resolution
    size = getattr(proc, "crop_size", None) or getattr(proc, "size", None) or {}
    side = size.get("height") or size.get("shortest_edge")
    return (e.mean or tuple(getattr(proc, "image_mean", None) or ()) or None,
            e.std or tuple(getattr(proc, "image_std", None) or ()) or None,
            e.resolution or (int(side) if side else None))


def load(e: Entry) -> Runner:
    """The entry's model, ready to run (``EntryError`` naming the field at fault)."""
    labels = read_labels(e)
    if e.timm is not None:
        module = _timm_module(e, labels)
        origin = f"{e.weights.name if e.weights else 'hub ' + str(e.hub)}, {ABOUT}"
        mean, std, res = e.mean, e.std, e.resolution
    else:
        module = _hf_module(e, labels)
        cfg_labels = getattr(module.config, "id2label", None) or {}
        if labels is None and getattr(module, "classifier", None) is not None and cfg_labels and not all(
                str(v).startswith("LABEL_") for v in cfg_labels.values()):
            labels = [cfg_labels[i] for i in sorted(cfg_labels)]
        origin = f"{e.transformers.name if e.transformers else 'hub ' + str(e.hub)}, {ABOUT}"
        mean, std, res = _hf_preprocessing(e)
    try:
        return loaders.runner_for(module, e.name, labels=labels, mean=mean, std=std, resolution=res,
                                  origin=origin, about=ABOUT)
    except ValueError as err:
        raise EntryError("labels" if "labels" in str(err) else "timm" if e.timm else "transformers",
                         str(err)) from None


def check(runner: Runner) -> None:
    """A forward at the model's resolution whose queries and keys are recorded, one per layer, with the tokens the
    spec says (``EntryError`` otherwise); a classifier's logits must be one per label."""
    side = runner.resolution - runner.resolution % runner.spec.patch
    x = torch.zeros(1, 3, side, side)
    seen: list[tuple[int, tuple]] = []

    def probe(model, x, forward):
        with hooks.record_keys(model, lambda layer, q, k, scale: seen.append((layer, tuple(q.shape)))) as layers:
            logits, _ = forward(x)
        return layers, logits

    try:
        layers, logits = runner.run(Call(probe), x)
    except Exception as err:  # noqa: BLE001 - any failure here means the model cannot be shown
        raise EntryError("timm" if runner.spec.family == "timm" else "transformers",
                         f"a forward with its attention recorded failed ({type(err).__name__}: {err}).") from None
    tokens = runner.spec.prefix + (side // runner.spec.patch) ** 2
    if layers == 0 or len(seen) != layers or any(s[2] != tokens for _, s in seen):
        raise EntryError("timm" if runner.spec.family == "timm" else "transformers",
                         f"its attention could not be recorded ({len(seen)} of {layers} layers).")
    if runner.labels and (logits is None or logits.shape[-1] != len(runner.labels)):
        raise EntryError("labels", f"{len(runner.labels)} labels, but the model answers "
                                   f"{None if logits is None else logits.shape[-1]} classes.")


def install(path: str | Path, *, adopt: Callable[[str, Runner], None], forget: Callable[[str], None]) -> Report:
    """Read, check and add every usable model of the models file ``path`` (replacing the models a file added
    before); a broken entry is reported and left out. Returns what was added and what was not, and logs it.

    ``adopt(name, runner)`` keeps a checked model loaded (the model cache's ``adopt``) and ``forget(name)`` lets a
    replaced one go (its ``forget``): the caller hands the cache over, so this module and the cache never import
    each other. A model the cache later lets go is loaded again by its spec's ``loader``."""
    entries, problems = parse(path)
    report = Report(Path(path), problems=list(problems))
    with _lock:
        remove(forget=forget)
        for e in entries:
            try:
                runner = load(e)
                check(runner)
                listing.add(dataclasses.replace(runner.spec, loader=functools.partial(load, e)))
            except EntryError as err:
                report.problems.append(Problem(e.name, err.field, str(err)))
                continue
            except ValueError as err:  # the name of one of vitviz's own models
                report.problems.append(Problem(e.name, "name", str(err)))
                continue
            except Exception as err:  # noqa: BLE001 - whatever else one entry raises, the server starts without it
                report.problems.append(Problem(e.name, _at_fault(e, err), _said(err)))
                continue
            _entries[e.name] = e
            adopt(e.name, runner)
            report.added[e.name] = runner.origin
    for line in report.lines():
        log.info("%s", line)
    return report


def _at_fault(e: Entry, err: Exception) -> str:
    """The field an unexpected failure most likely comes from: the hub name when the hub is involved, the
    weights when a file is, else the architecture."""
    if e.hub is not None and ("hub" in type(err).__module__ or "Entry" in type(err).__name__):
        return "hub"
    return "weights" if e.weights is not None or e.transformers is not None else "timm" if e.timm else "hub"


def _said(err: Exception) -> str:
    """An unexpected failure in one line: its kind and the first line of its message (no traceback)."""
    first = (str(err).strip().splitlines() or [""])[0][:300]
    if "LocalEntryNotFound" in type(err).__name__ or "offline" in first.lower():
        return "the hub cannot be reached and the checkpoint is not in the local cache."
    return f"it could not be loaded ({type(err).__name__}{': ' + first if first else ''})."


def remove(*, forget: Callable[[str], None]) -> None:
    """Take the added models off the list, and out of the model cache through ``forget`` (its ``forget``)."""
    for name in list(_entries):
        forget(name)
    _entries.clear()
    listing.remove_added()
