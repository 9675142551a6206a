"""The fixed list of models vitviz supports: what each is before it is loaded.

Users pick a key from this list; nobody types a model id or a path. The
architecture numbers (width, depth, heads) are the published ones: the request
budget (:mod:`vitviz.models.budget`) uses them to refuse an input before any weights
are loaded or any forward runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

OFFLINE_KEY = "vitviz tiny (shapes only)"
CNN_OFFLINE_KEY = "vitviz small CNN (shapes only)"
ADDED_ABOUT = "added by this server"
"""How the model lists mark a model the server's operator added (a models file)."""
SHAPES_ONLY = (OFFLINE_KEY, CNN_OFFLINE_KEY)
"""The models that vitviz trained itself on generated shapes: they know nothing else."""


@dataclass(frozen=True)
class ModelSpec:
    """What we know about a supported model before loading it.

    Attributes:
        key: name shown in the UI and the cache key.
        family: "hf" (transformers), "timm" or "embedded".
        source: hub repo id (hf) or timm model name.
        patch: patch size P.
        prefix: tokens before the patches (class token + registers).
        resolution: native input side in pixels.
        params_m: parameter count in millions (as published).
        task: "attention", "classify", "both", "relative" (a Swin, for its relative position bias tables) or "cnn"
            (a convolutional network, the other side of the ViT-vs-CNN tab; ``patch`` is then its output stride and
            ``depth`` its number of stages).
        dim: token width D (a Swin's first stage).
        depth: number of transformer blocks L.
        heads: attention heads per block H (a Swin's first stage).
        added: added by whoever runs this server (a models file), not one of vitviz's own.
        loader: for an added model, what loads it (``vitviz.models.added`` puts it there): the model cache calls it
            and never needs to know of models files.
    """

    key: str
    family: str
    source: str
    patch: int
    prefix: int
    resolution: int
    params_m: float
    task: str
    about: str = ""
    dim: int = 384
    depth: int = 12
    heads: int = 6
    added: bool = False
    loader: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    """How an added model is loaded again once the model cache let it go (its checked file); None: by family."""


OWN: Mapping[str, ModelSpec] = MappingProxyType({s.key: s for s in (
    ModelSpec("DINO ViT-S/8", "hf", "facebook/dino-vits8", 8, 1, 224, 21.7, "attention",
              "self-supervised DINO, small, 8-pixel patches (the paper's attention figures)"),
    ModelSpec("DINO ViT-S/16", "hf", "facebook/dino-vits16", 16, 1, 224, 21.7, "attention", "self-supervised DINO, small"),
    ModelSpec("DINO ViT-B/8", "hf", "facebook/dino-vitb8", 8, 1, 224, 85.8, "attention", "self-supervised DINO, base",
              dim=768, heads=12),
    ModelSpec("DINO ViT-B/16", "hf", "facebook/dino-vitb16", 16, 1, 224, 85.8, "attention",
              "self-supervised DINO, base", dim=768, heads=12),
    ModelSpec("DINOv2 ViT-S/14", "hf", "facebook/dinov2-small", 14, 1, 224, 22.1, "attention",
              "DINOv2 without registers"),
    ModelSpec("DINOv2 ViT-S/14 + 4 registers", "hf", "facebook/dinov2-with-registers-small", 14, 5, 224, 22.1,
              "attention", "DINOv2 with four register tokens"),
    ModelSpec("ViT-B/16 (ImageNet-1k)", "timm", "vit_base_patch16_224.augreg2_in21k_ft_in1k", 16, 1, 224, 86.6,
              "classify", "supervised ImageNet classifier", dim=768, heads=12),
    ModelSpec("DeiT-Ti/16 (ImageNet-1k, fast)", "timm", "deit_tiny_patch16_224.fb_in1k", 16, 1, 224, 5.7,
              "classify", "small and fast ImageNet classifier", dim=192, heads=3),
    ModelSpec("Swin-T (ImageNet-1k)", "timm", "swin_tiny_patch4_window7_224.ms_in1k", 4, 0, 224, 28.3, "relative",
              "Swin Transformer, tiny: windowed attention with learned relative position bias tables", dim=96,
              depth=12, heads=3),
    ModelSpec(OFFLINE_KEY, "embedded", "vit_tiny_patch16_224", 8, 1, 64, 0.5, "both",
              "trained by vitviz on generated shapes with labels (supervised, not DINO); ships in assets/tiny",
              dim=96, depth=4, heads=3),
    ModelSpec("ResNet-50 (ImageNet-1k)", "timm", "resnet50.a1_in1k", 32, 0, 224, 25.6, "cnn",
              "supervised ImageNet ResNet-50 (timm's A1 recipe)", dim=2048, depth=5, heads=0),
    ModelSpec(CNN_OFFLINE_KEY, "embedded", "vitviz.models.smallcnn.SmallCNN", 16, 0, 64, 0.5, "cnn",
              "a small ResNet trained by vitviz on the same generated shapes; ships in assets/sweep",
              dim=144, depth=5, heads=0),
)})
"""vitviz's own models (read-only)."""


class Listed(Mapping[str, ModelSpec]):
    """Every model on the lists: vitviz's own (:data:`OWN`), then those put on them while the server runs (an
    operator's models file, a model given in Python), which :mod:`vitviz.models.listing` keeps and hands over
    (:func:`listed_with`): this package holds none of them. Read-only."""

    def __init__(self, own: Mapping[str, ModelSpec]) -> None:
        self._own = own
        self._more: Callable[[], Mapping[str, ModelSpec]] = dict

    def __getitem__(self, key: str) -> ModelSpec:
        if key in self._own:
            return self._own[key]
        return self._more()[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (k for k in list(self._more()) if k not in self._own)

    def __len__(self) -> int:
        return len(self._own) + sum(1 for k in list(self._more()) if k not in self._own)

    def __contains__(self, key: object) -> bool:
        return key in self._own or key in self._more()


REGISTRY = Listed(OWN)
"""Every model on the lists, by key."""


def listed_with(more: Callable[[], Mapping[str, ModelSpec]]) -> None:
    """Have :data:`REGISTRY` list the models ``more()`` gives after vitviz's own (the models layer calls this once,
    when it is imported)."""
    REGISTRY._more = more


def keys(task: str, timm_only: bool = False) -> list[str]:
    """Registry keys usable for ``task`` ("attention", "classify", "relative" or "cnn"): vitviz's own (embedded
    model last), then the models this server added; ``timm_only``: the timm models (and the embedded, a timm ViT).

    A "both" model (the embedded ViT, an added classifier) serves attention and classification, never as a CNN or
    a Swin."""
    both = ("both",) if task in ("attention", "classify") else ()
    found = [k for k, s in REGISTRY.items() if s.task in (task, *both) and not (timm_only and s.family == "hf")]
    return [k for k in found if not REGISTRY[k].added] + [k for k in found if REGISTRY[k].added]


def own_first(keys: list[str]) -> tuple[str, ...]:
    """``keys`` without repeats, vitviz's own models first and the server's added models last (each in order)."""
    unique = list(dict.fromkeys(keys))
    return tuple(sorted(unique, key=lambda k: REGISTRY[k].added if k in REGISTRY else False))


def spec(key: str) -> ModelSpec:
    """The registry entry for ``key``; ``ValueError`` for anything not on the list."""
    if key not in REGISTRY:
        raise ValueError(f"Unknown model {key!r}; choose one of the listed models.")
    return REGISTRY[key]


@dataclass(frozen=True)
class ViTSize:
    """A standard ViT width/depth (the paper's Table 1 plus DeiT's Tiny)."""

    name: str
    dim: int
    depth: int
    heads: int
    mlp_ratio: float = 4.0


VIT_SIZES: dict[str, ViTSize] = {
    "ViT-Ti": ViTSize("ViT-Ti", 192, 12, 3),
    "ViT-S": ViTSize("ViT-S", 384, 12, 6),
    "ViT-B": ViTSize("ViT-B", 768, 12, 12),
    "ViT-L": ViTSize("ViT-L", 1024, 24, 16),
    "ViT-H": ViTSize("ViT-H", 1280, 32, 16),
}
TIMM_NAMES = {"ViT-Ti": "vit_tiny", "ViT-S": "vit_small", "ViT-B": "vit_base", "ViT-L": "vit_large", "ViT-H": "vit_huge"}
