"""Loading a registry model: is the hub there, the loaders, and the embedded model's files.

Loading never waits on an unreachable hub: ``hub_reachable`` answers within a
couple of seconds (and honours ``HF_HUB_OFFLINE``); offline we load from the
local Hugging Face cache with ``local_files_only``. The tests call these
loaders with checkpoints they build and save themselves. Caching and the
fallback to the embedded model live in :mod:`vitviz.models.cache`.
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from vitviz import assets
from vitviz.core import owned
from vitviz.models import hooks
from vitviz.models.runner import Runner
from vitviz.specs.registry import CNN_OFFLINE_KEY, OFFLINE_KEY, REGISTRY, ModelSpec

HUB_HOST = "huggingface.co"
log = logging.getLogger("vitviz")


# ---- is the hub there? ------------------------------------------------------------------

_reach_lock = threading.Lock()
_reach_cache: tuple[float, bool] | None = None


def _forget_reach() -> None:
    global _reach_cache
    with _reach_lock:
        _reach_cache = None


owned.keep("loaders.hub_reach", "models", None, "whether the hub answered (for a minute)", _forget_reach)


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
        log.info("model hub %s", "reachable" if result[0] else f"not reachable within {timeout:.1f} s")
        return result[0]


# ---- loaders (the tests call these with checkpoints they build) ---------------------------

def _hf_forward(model: torch.nn.Module) -> Callable:
    """forward(x) -> (the classifier's logits, or None without one; last encoder layer's output tokens (T, D),
    before the final norm)."""
    takes_interp = "interpolate_pos_encoding" in inspect.signature(model.forward).parameters
    last_layer = hooks.blocks(model)[-1]

    def forward(x: torch.Tensor):
        kw = {"interpolate_pos_encoding": True} if takes_interp else {}
        seen: list[torch.Tensor] = []
        handle = hooks.on_output(last_layer, lambda _m, _i, out: seen.append(out[0] if isinstance(out, tuple) else out))
        try:  # a hook, not output_hidden_states: that path costs ~10% of the forward
            out = model(pixel_values=x, **kw)
        finally:
            handle.remove()
        return getattr(out, "logits", None), seen[-1][0]
    return forward


RECORDABLE_HF = ("vit", "deit", "dinov2", "dinov2_with_registers")
"""The transformers model types whose attention vitviz records (ViT, DeiT, DINO, DINOv2 ± registers)."""


def runner_for(module: torch.nn.Module, name: str, *, labels: list[str] | None = None,
               mean: tuple[float, ...] | None = None, std: tuple[float, ...] | None = None,
               resolution: int | None = None, origin: str = "a model given to vitviz", about: str = "",
               added: bool = True) -> Runner:
    """A :class:`Runner` for any timm or transformers ViT vitviz can record (timm's ViT, DeiT, DINOv2 ± registers;
    transformers' ViT, DeiT, DINO, DINOv2 ± registers), under the name ``name``; ``labels`` make it a classifier
    (one per output of its head). Preprocessing: ``mean``/``std``/``resolution`` as given, else the model's own
    (timm's data config; the transformers config's image size and ImageNet statistics). ``ValueError`` saying why
    for anything else."""
    module = module.eval()
    params_m = round(sum(p.numel() for p in module.parameters()) / 1e6, 1)
    task = "both" if labels else "attention"
    data_cfg: dict = {}
    if hasattr(module, "patch_embed") and hasattr(module, "blocks") and hasattr(module, "num_prefix_tokens"):
        from timm.data import resolve_data_config

        data_cfg = dict(resolve_data_config({}, model=module))
        patch = module.patch_embed.patch_size
        spec = ModelSpec(name, "timm", module.pretrained_cfg.get("architecture", type(module).__name__),
                         int(patch[0] if isinstance(patch, (tuple, list)) else patch), int(module.num_prefix_tokens),
                         int(resolution or data_cfg["input_size"][-1]), params_m, task, about,
                         dim=int(module.embed_dim), depth=len(module.blocks),
                         heads=int(module.blocks[0].attn.num_heads), added=added)
        forward = _timm_forward(module)
        mean, std = mean or tuple(data_cfg["mean"]), std or tuple(data_cfg["std"])
        if labels is not None and module.num_classes != len(labels):
            raise ValueError(f"{len(labels)} labels, but the model's head has {module.num_classes} outputs.")
    elif getattr(getattr(module, "config", None), "model_type", None) in RECORDABLE_HF:
        cfg = module.config
        spec = ModelSpec(name, "hf", str(getattr(cfg, "_name_or_path", "") or name), int(cfg.patch_size),
                         1 + int(getattr(cfg, "num_register_tokens", 0) or 0) + (cfg.model_type == "deit"),
                         int(resolution or cfg.image_size),
                         params_m, task, about, dim=int(cfg.hidden_size), depth=int(cfg.num_hidden_layers),
                         heads=int(cfg.num_attention_heads), added=added)
        if labels is not None and getattr(module, "classifier", None) is None:
            raise ValueError("labels were given, but the model has no classifier head.")
        if labels is not None and int(cfg.num_labels) != len(labels):
            raise ValueError(f"{len(labels)} labels, but the model's head has {cfg.num_labels} outputs.")
        forward = _hf_forward(module)
        from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

        mean, std = mean or IMAGENET_DEFAULT_MEAN, std or IMAGENET_DEFAULT_STD
    else:
        kind = getattr(getattr(module, "config", None), "model_type", None) or type(module).__name__
        raise ValueError(f"vitviz cannot record the attention of {kind}: it records timm's ViT family (ViT, DeiT, "
                         f"DINOv2, with or without registers) and transformers' {', '.join(RECORDABLE_HF)}.")
    data_cfg = {"interpolation": "bicubic", "crop_pct": 1.0, "crop_mode": "center", **data_cfg,
                "input_size": (3, spec.resolution, spec.resolution), "mean": tuple(mean), "std": tuple(std)}
    return Runner(spec, module, forward, mean=tuple(mean), std=tuple(std), resolution=spec.resolution,
                  origin=origin, labels=list(labels) if labels else None, data_config=data_cfg)


def load_hf(source: str | Path, local_only: bool = False, spec: ModelSpec | None = None) -> Runner:
    """Load a transformers ViT / DINOv2 with its fused attention (SDPA), from a repo id or a local folder (a view
    that needs the attention matrices themselves switches to eager for its forward: ``hooks.eager_attention``).

    Raises ``OSError`` when the weights are not available (offline and not cached).
    """
    from transformers import AutoConfig, AutoImageProcessor, AutoModel

    kw = dict(local_files_only=local_only, trust_remote_code=False)
    config = AutoConfig.from_pretrained(str(source), **kw)
    extra = {"add_pooling_layer": False} if config.model_type == "vit" else {}  # DINO ships no pooler
    model = AutoModel.from_pretrained(str(source), config=config, attn_implementation="sdpa", **kw, **extra).eval()
    proc = AutoImageProcessor.from_pretrained(str(source), **kw)
    crop = getattr(proc, "crop_size", None) or getattr(proc, "size", None) or {}
    res = int(crop.get("height") or crop.get("shortest_edge") or model.config.image_size)
    cfg = model.config
    if spec is None:
        prefix = 1 + int(getattr(cfg, "num_register_tokens", 0) or 0)
        spec = ModelSpec(Path(str(source)).name, "hf", str(source), cfg.patch_size, prefix, res,
                         round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "attention",
                         dim=cfg.hidden_size, depth=cfg.num_hidden_layers, heads=cfg.num_attention_heads)
    local_dir = Path(str(source)).is_dir()
    origin = (f"local checkpoint {source}" if local_dir else
              "local Hugging Face cache" if local_only else "Hugging Face hub (kept in the local cache)")
    return Runner(spec, model, _hf_forward(model), mean=tuple(proc.image_mean), std=tuple(proc.image_std),
                  resolution=res, origin=origin)


def forward_of(model: torch.nn.Module) -> Callable:
    """The Runner's forward for a timm or transformers ViT (what :func:`runner_for` gives it): for a copy of a
    loaded model (:mod:`vitviz.models.device` exports one)."""
    return _timm_forward(model) if hasattr(model, "forward_features") else _hf_forward(model)


def _timm_forward(model: torch.nn.Module) -> Callable:
    def forward(x: torch.Tensor):
        feats = model.forward_features(x)
        return model.forward_head(feats), feats[0]
    return forward


def _cnn_forward(model: torch.nn.Module) -> Callable:
    """forward(x) -> (logits, an empty tensor): a CNN has no tokens."""
    def forward(x: torch.Tensor):
        return model(x), x.new_zeros(0)
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
              spec: ModelSpec | None = None, cfg_overlay: dict | None = None, **kwargs) -> Runner:
    """Create a timm model with pretrained weights: from ``file``, the local cache, or the hub.

    Preprocessing and labels come from the checkpoint's pretrained config
    (``resolve_data_config``; ImageNet names from ``timm.data.ImageNetInfo``). A ViT takes any input size
    (``dynamic_img_size``); a CNN (``spec.task == "cnn"``, e.g. ResNet-50) does by itself.
    """
    import timm
    from timm.data import ImageNetInfo, resolve_data_config

    if file is None and local_only:
        file = _timm_cached_file(name)
    overlay = dict(cfg_overlay or {})
    if file is not None:
        overlay["file"] = str(file)
    cnn = spec is not None and spec.task == "cnn"
    if not cnn:
        kwargs["dynamic_img_size"] = True
    model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=overlay or None, **kwargs).eval()
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
                         round(sum(p.numel() for p in model.parameters()) / 1e6, 1), "classify",
                         dim=int(model.embed_dim), depth=len(model.blocks), heads=int(model.blocks[0].attn.num_heads))
    origin = (f"local checkpoint {Path(file).name}" if file is not None and not local_only else
              "local Hugging Face cache" if local_only else "Hugging Face hub (kept in the local cache)")
    forward = _cnn_forward(model) if cnn else _timm_forward(model)
    return Runner(spec, model, forward, mean=tuple(data_cfg["mean"]), std=tuple(data_cfg["std"]),
                  resolution=res, origin=origin, labels=labels, data_config=data_cfg)


def load_embedded(file: Path | None = None) -> Runner:
    """The embedded tiny ViT (final weights, or a timeline checkpoint ``file``)."""
    info = assets.tiny_info()
    path = file or assets.TINY / "model.safetensors"
    if not path.is_file():
        raise OSError(f"The embedded model is missing: {path} (restore vitviz/assets/tiny from the repository).")
    cfg = dict(info["pretrained_cfg"])
    cfg.pop("file", None)
    runner = load_timm(info["arch"], file=path, cfg_overlay=cfg, spec=REGISTRY[OFFLINE_KEY], **info["kwargs"])
    runner.origin = "vitviz's own files (vitviz/assets/tiny), trained by vitviz on generated shapes"
    return runner


def load_embedded_cnn(file: Path | None = None) -> Runner:
    """vitviz's small CNN (:mod:`vitviz.models.smallcnn`), trained on the largest set of the data-efficiency sweep
    (``python -m vitviz.embedded.sweep``); its preprocessing and class names come from the sweep's results.json."""
    from vitviz.models import smallcnn

    results = assets.sweep_results()
    largest = max((r for r in results["runs"] if r["model"] == "cnn"), key=lambda r: r["scenes"])
    path = file or assets.SWEEP / largest["file"]
    if not path.is_file():
        raise OSError(f"The embedded CNN is missing: {path} (restore vitviz/assets/sweep from the repository).")
    cfg = results["preprocessing"]
    model = smallcnn.load(path, len(cfg["label_names"]))
    return Runner(REGISTRY[CNN_OFFLINE_KEY], model, _cnn_forward(model), mean=tuple(cfg["mean"]),
                  std=tuple(cfg["std"]), resolution=cfg["input_size"][-1],
                  origin=f"vitviz's own files (vitviz/assets/sweep), trained by vitviz on {largest['scenes']:,} "
                  "generated shape scenes", labels=list(cfg["label_names"]),
                  data_config={k: v for k, v in cfg.items() if k != "label_names"})


def availability(spec: ModelSpec) -> str:
    """Whether ``spec``'s weights can be had now, decided without downloading: for listings and the CLI."""
    if spec.family == "embedded":
        return "ships with vitviz"
    if spec.added:
        return "added by this server (checked when its models file was read)"
    from huggingface_hub import try_to_load_from_cache

    try:
        if spec.family == "hf":
            cached = isinstance(try_to_load_from_cache(spec.source, "config.json"), str)
        else:
            cached = bool(_timm_cached_file(spec.source))
    except OSError:
        cached = False
    if cached:
        return "in the local cache"
    return "downloads on first use" if hub_reachable() else "needs a download (the hub cannot be reached now)"
