"""The model registry, loading (hub, local cache, embedded) and one process-wide cache.

Users pick a registry key; nobody types a model id or a path. Loading never
waits on an unreachable hub: ``hub_reachable`` answers within a couple of
seconds (and honours ``HF_HUB_OFFLINE``); offline we load from the local
Hugging Face cache with ``local_files_only``, and when the weights are not
there we fall back to the embedded model and say so in ``LoadedModel.notice``.
Random weights are never shown as a pretrained model.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TINY_DIR = ASSETS / "tiny"
OFFLINE_KEY = "vitviz tiny (offline, trained on synthetic shapes)"
HUB_HOST = "huggingface.co"


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
        task: "attention" or "classify".
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


REGISTRY: dict[str, ModelSpec] = {s.key: s for s in (
    ModelSpec("DINO ViT-S/8", "hf", "facebook/dino-vits8", 8, 1, 224, 21.7, "attention",
              "self-supervised DINO, small, 8-pixel patches (the paper's attention figures)"),
    ModelSpec("DINO ViT-S/16", "hf", "facebook/dino-vits16", 16, 1, 224, 21.7, "attention", "self-supervised DINO, small"),
    ModelSpec("DINO ViT-B/8", "hf", "facebook/dino-vitb8", 8, 1, 224, 85.8, "attention", "self-supervised DINO, base"),
    ModelSpec("DINO ViT-B/16", "hf", "facebook/dino-vitb16", 16, 1, 224, 85.8, "attention", "self-supervised DINO, base"),
    ModelSpec("DINOv2 ViT-S/14", "hf", "facebook/dinov2-small", 14, 1, 224, 22.1, "attention",
              "DINOv2 without registers"),
    ModelSpec("DINOv2 ViT-S/14 + 4 registers", "hf", "facebook/dinov2-with-registers-small", 14, 5, 224, 22.1,
              "attention", "DINOv2 with four register tokens"),
    ModelSpec("ViT-B/16 (ImageNet-1k)", "timm", "vit_base_patch16_224.augreg2_in21k_ft_in1k", 16, 1, 224, 86.6,
              "classify", "supervised ImageNet classifier"),
    ModelSpec("DeiT-Ti/16 (ImageNet-1k, fast)", "timm", "deit_tiny_patch16_224.fb_in1k", 16, 1, 224, 5.7,
              "classify", "small and fast ImageNet classifier"),
    ModelSpec(OFFLINE_KEY, "embedded", "vit_tiny_patch16_224", 8, 1, 64, 0.5, "both",
              "trained by vitviz on generated shapes with labels (supervised, not DINO); ships in assets/tiny"),
)}


def keys(task: str) -> list[str]:
    """Registry keys usable for ``task`` ("attention" or "classify"), embedded model last."""
    return [k for k, s in REGISTRY.items() if s.task in (task, "both")]


@dataclass
class LoadedModel:
    """A model ready to run.

    ``forward(x)`` takes (1, 3, H, W) normalised pixels and returns (logits (1, K)
    or None, last-layer tokens (T, D)). ``notice`` is non-empty when this is a
    stand-in for the model that was asked for.
    """

    spec: ModelSpec
    model: torch.nn.Module
    mean: tuple[float, ...]
    std: tuple[float, ...]
    resolution: int
    origin: str
    forward: Callable[[torch.Tensor], tuple[torch.Tensor | None, torch.Tensor]]
    labels: list[str] | None = None
    data_config: dict = field(default_factory=dict)
    notice: str = ""

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def normalise(self, rgb: np.ndarray) -> torch.Tensor:
        """(H, W, 3) uint8 -> (1, 3, H, W) float normalised with the checkpoint's mean / std."""
        x = torch.tensor(rgb, dtype=torch.uint8).permute(2, 0, 1)[None].float() / 255.0
        mean = torch.tensor(self.mean).view(1, 3, 1, 1)
        std = torch.tensor(self.std).view(1, 3, 1, 1)
        return (x - mean) / std


# ---- is the hub there? ------------------------------------------------------------------

_reach_lock = threading.Lock()
_reach_cache: tuple[float, bool] | None = None


def hub_offline_flag() -> bool:
    """True when HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set to a true value."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = 1.5, ttl: float = 60.0) -> bool:
    """Can we open a TCP connection to the hub within ``timeout`` seconds? (cached ``ttl`` s)."""
    global _reach_cache
    if hub_offline_flag():
        return False
    with _reach_lock:
        if _reach_cache and time.monotonic() - _reach_cache[0] < ttl:
            return _reach_cache[1]
        result: list[bool] = [False]

        def probe() -> None:
            try:
                with socket.create_connection((HUB_HOST, 443), timeout=timeout):
                    result[0] = True
            except OSError:
                pass

        th = threading.Thread(target=probe, daemon=True)  # DNS can ignore socket timeouts
        th.start()
        th.join(timeout + 0.5)
        _reach_cache = (time.monotonic(), result[0])
        return result[0]


# ---- loaders (the tests call these with checkpoints they build) ---------------------------

def _hf_forward(model: torch.nn.Module) -> Callable:
    """forward(x) -> (None, last encoder layer's output tokens (T, D), before the final norm)."""
    takes_interp = "interpolate_pos_encoding" in inspect.signature(model.forward).parameters
    layers = model.encoder.layer if hasattr(model, "encoder") else model.layers  # DINOv2 / ViT in transformers 5
    last_layer = layers[-1]

    def forward(x: torch.Tensor):
        kw = {"interpolate_pos_encoding": True} if takes_interp else {}
        seen: list[torch.Tensor] = []
        handle = last_layer.register_forward_hook(
            lambda _m, _i, out: seen.append(out[0] if isinstance(out, tuple) else out))
        try:  # a hook, not output_hidden_states: that path costs ~10% of the forward
            model(pixel_values=x, **kw)
        finally:
            handle.remove()
        return None, seen[-1][0]
    return forward


def load_hf(source: str | Path, local_only: bool = False, spec: ModelSpec | None = None) -> LoadedModel:
    """Load a transformers ViT / DINOv2 with eager attention, from a repo id or a local folder.

    Raises ``OSError`` when the weights are not available (offline and not cached).
    """
    from transformers import AutoConfig, AutoImageProcessor, AutoModel

    kw = dict(local_files_only=local_only, trust_remote_code=False)
    config = AutoConfig.from_pretrained(str(source), **kw)
    extra = {"add_pooling_layer": False} if config.model_type == "vit" else {}  # DINO ships no pooler
    model = AutoModel.from_pretrained(str(source), config=config, attn_implementation="eager", **kw, **extra).eval()
    proc = AutoImageProcessor.from_pretrained(str(source), **kw)
    crop = getattr(proc, "crop_size", None) or getattr(proc, "size", None) or {}
    res = int(crop.get("height") or crop.get("shortest_edge") or model.config.image_size)
    cfg = model.config
    if spec is None:
        prefix = 1 + int(getattr(cfg, "num_register_tokens", 0) or 0)
        spec = ModelSpec(Path(str(source)).name, "hf", str(source), cfg.patch_size, prefix, res,
                         round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "attention")
    local_dir = Path(str(source)).is_dir()
    origin = (f"local checkpoint {source}" if local_dir else
              "local Hugging Face cache" if local_only else "Hugging Face hub (kept in the local cache)")
    return LoadedModel(spec, model, tuple(proc.image_mean), tuple(proc.image_std), res, origin, _hf_forward(model))


def _timm_forward(model: torch.nn.Module) -> Callable:
    def forward(x: torch.Tensor):
        feats = model.forward_features(x)
        return model.forward_head(feats), feats[0]
    return forward


def _timm_cached_file(name: str) -> str:
    """Path of a timm checkpoint already in the local HF cache, else ``OSError``."""
    import timm
    from huggingface_hub import try_to_load_from_cache

    cfg = timm.models.get_pretrained_cfg(name)
    repo = getattr(cfg, "hf_hub_id", None)
    if repo:
        for fname in ("model.safetensors", "pytorch_model.bin"):
            hit = try_to_load_from_cache(repo, fname)
            if isinstance(hit, str):
                return hit
    raise OSError(f"{name} is not in the local Hugging Face cache")


def load_timm(name: str, file: str | Path | None = None, local_only: bool = False,
              spec: ModelSpec | None = None, cfg_overlay: dict | None = None, **kwargs) -> LoadedModel:
    """Create a timm model with pretrained weights: from ``file``, the local cache, or the hub.

    Preprocessing and labels come from the checkpoint's pretrained config
    (``resolve_data_config``; ImageNet names from ``timm.data.ImageNetInfo``).
    """
    import timm
    from timm.data import ImageNetInfo, resolve_data_config

    if file is None and local_only:
        file = _timm_cached_file(name)
    overlay = dict(cfg_overlay or {})
    if file is not None:
        overlay["file"] = str(file)
    model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=overlay or None,
                              dynamic_img_size=True, **kwargs).eval()
    data_cfg = resolve_data_config({}, model=model)
    label_names = model.pretrained_cfg.get("label_names")
    if label_names:
        labels = list(label_names)
    elif model.num_classes == 1000:
        info = ImageNetInfo()
        labels = [info.index_to_description(i) for i in range(1000)]
    else:
        labels = None
    res = int(data_cfg["input_size"][-1])
    if spec is None:
        spec = ModelSpec(name, "timm", name, model.patch_embed.patch_size[0], model.num_prefix_tokens, res,
                         round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "classify")
    origin = (f"local checkpoint {Path(file).name}" if file is not None and not local_only else
              "local Hugging Face cache" if local_only else "Hugging Face hub (kept in the local cache)")
    return LoadedModel(spec, model, tuple(data_cfg["mean"]), tuple(data_cfg["std"]), res, origin,
                       _timm_forward(model), labels, data_cfg)


def tiny_info() -> dict:
    """assets/tiny/train_info.json: how the embedded model was built and trained."""
    return json.loads((TINY_DIR / "train_info.json").read_text())


def tiny_checkpoints() -> list[tuple[int, Path]]:
    """(training step, file) of the shipped training-timeline checkpoints, in order."""
    files = sorted((TINY_DIR / "checkpoints").glob("step*.safetensors"))
    return [(int(f.stem[4:]), f) for f in files]


def load_embedded(file: Path | None = None) -> LoadedModel:
    """The embedded tiny ViT (final weights, or a timeline checkpoint ``file``)."""
    info = tiny_info()
    path = file or TINY_DIR / "model.safetensors"
    if not path.is_file():
        raise OSError(f"The embedded model is missing: {path} (reinstall vitviz).")
    cfg = dict(info["pretrained_cfg"])
    cfg.pop("file", None)
    loaded = load_timm(info["arch"], file=path, cfg_overlay=cfg, spec=REGISTRY[OFFLINE_KEY], **info["kwargs"])
    loaded.origin = "embedded in vitviz (assets/tiny), trained here on generated shapes"
    return loaded


# ---- the one cache ------------------------------------------------------------------------

_cache: dict[str, LoadedModel] = {}
_cache_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}


def _cached(cache_key: str, make: Callable[[], LoadedModel]) -> LoadedModel:
    with _cache_lock:
        if cache_key in _cache:
            return _cache[cache_key]
        lock = _key_locks.setdefault(cache_key, threading.Lock())
    with lock:  # one loader per key; others wait and then reuse
        with _cache_lock:
            if cache_key in _cache:
                return _cache[cache_key]
        loaded = make()
        with _cache_lock:
            _cache[cache_key] = loaded
        return loaded


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def get_checkpoint(step: int) -> LoadedModel:
    """A training-timeline checkpoint of the embedded model, by training step (cached)."""
    files = dict(tiny_checkpoints())
    if step not in files:
        raise ValueError(f"No checkpoint at step {step}; there are {sorted(files)}.")
    return _cached(f"{OFFLINE_KEY}@{step}", lambda: load_embedded(files[step]))


def get_model(key: str, progress: Callable[[float, str], None] | None = None) -> LoadedModel:
    """The loaded model for registry ``key``, loading it once per process.

    When the real weights cannot be had (hub unreachable and not cached, or a
    failed download) this returns the embedded model with ``notice`` saying why.
    """
    if key not in REGISTRY:
        raise ValueError(f"Unknown model {key!r}; choose one of the listed models.")
    spec = REGISTRY[key]
    if spec.family == "embedded":
        return _cached(key, load_embedded)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    if progress:
        progress(0.1, f"checking whether the model hub is reachable for {key}")
    online = hub_reachable()
    if progress:
        progress(0.3, f"loading {key} from {'the hub' if online else 'the local cache'}")
    try:
        if spec.family == "hf":
            return _cached(key, lambda: load_hf(spec.source, local_only=not online, spec=spec))
        return _cached(key, lambda: load_timm(spec.source, local_only=not online, spec=spec))
    except Exception as err:  # offline and not cached, or the download failed
        reason = ("the model hub cannot be reached and the weights are not in the local cache" if not online
                  else f"loading failed ({type(err).__name__})")
        fallback = _cached(OFFLINE_KEY, load_embedded)
        return replace(fallback, notice=(
            f"**Showing {OFFLINE_KEY}, not {key}:** {reason}. The offline model is a tiny ViT that vitviz "
            "trained itself on generated shapes (with labels, not DINO); its attention is real but it only "
            "knows the shape scenes in the examples. On a photo it still picks one of its shape classes, however "
            "sure it looks."))
