"""A private Hugging Face cache holding checkpoints built here (random weights, the real architectures and configs),
laid out as the hub lays out its downloads, so that vitviz's real loaders find them offline exactly as they find a
downloaded model (``HF_HOME=<folder> HF_HUB_OFFLINE=1``). Used by the benchmarks and the tests: nothing is written
into vitviz's own caches.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


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
