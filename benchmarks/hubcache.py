"""A private Hugging Face cache holding checkpoints built here (random weights, the real architectures and configs),
laid out as the hub lays out its downloads, so that vitviz's real loaders find them offline exactly as they find a
downloaded model (``HF_HOME=<folder> HF_HUB_OFFLINE=1``). Used by the benchmarks and the tests: nothing is written
into vitviz's own caches.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable


def dino_vits8(folder: Path, seed: int = 0) -> Path:
    """A DINO ViT-S/8-shaped transformers checkpoint (random weights, DINO's config) saved to ``folder``."""
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(seed)
    cfg = ViTConfig(image_size=224, patch_size=8, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                    intermediate_size=1536, qkv_bias=True, layer_norm_eps=1e-6)
    ViTModel(cfg, add_pooling_layer=False).save_pretrained(folder)
    ViTImageProcessor(do_resize=True, size={"height": 224, "width": 224}, image_mean=[0.485, 0.456, 0.406],
                      image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    return Path(folder)


def install(hf_home: Path, repo: str, checkpoint: Path | dict[str, Path]) -> Path:
    """Place the files of ``checkpoint`` (a folder, or {name in the repo: file}) in ``hf_home`` as the hub's cache
    keeps repo ``repo`` (``hub/models--org--name/snapshots/<revision>/``, ``refs/main`` naming the revision).
    Returns the snapshot."""
    base = Path(hf_home) / "hub" / ("models--" + repo.replace("/", "--"))
    files = checkpoint if isinstance(checkpoint, dict) else {
        p.name: p for p in sorted(Path(checkpoint).iterdir()) if p.is_file()}
    revision = hashlib.sha1(b"".join(n.encode() + Path(p).read_bytes()[:4096] for n, p in files.items())).hexdigest()
    snapshot = base / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, p in files.items():
        shutil.copy2(p, snapshot / name)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(revision)
    return snapshot


def two_models(hf_home: Path) -> None:
    """DINO ViT-S/8 and timm's ViT-B/16 (random weights, the real architectures) in the private cache ``hf_home``,
    laid out as the hub's downloads so that the registry's real loaders read them."""
    import timm
    from safetensors.torch import save_file

    from vitviz.specs import registry

    install(hf_home, "facebook/dino-vits8", dino_vits8(hf_home / "dino"))
    vitb = registry.REGISTRY["ViT-B/16 (ImageNet-1k)"]
    weights = hf_home / "vitb16.safetensors"
    save_file(timm.create_model("vit_base_patch16_224", pretrained=False).state_dict(), str(weights))
    install(hf_home, timm.models.get_pretrained_cfg(vitb.source).hf_hub_id, {"model.safetensors": weights})


def median_seconds(fn: Callable[[], object], n: int = 5, warm: bool = True) -> float:
    """The median wall time of ``n`` calls of ``fn`` (after one call not counted, with ``warm``)."""
    if warm:
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def offline_home() -> Path:
    """A private Hugging Face cache for this process, offline (call before importing vitviz or the hub's libraries:
    they read these settings once)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ["HF_HUB_OFFLINE"] = "1"
    home = Path(tempfile.mkdtemp(prefix="vitviz-bench-hf-"))
    os.environ["HF_HOME"] = str(home)
    return home
