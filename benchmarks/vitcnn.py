"""What the ViT-vs-CNN tab's four views cost here; prints a table.

    python -m benchmarks.vitcnn

Each view's answer (figures, texts, numbers) through ``vitviz.views.show``, first call (nothing cached but the
loaded models) and again (the caches warm), with the process's peak resident memory after each model set:

- offline: the embedded tiny ViT and vitviz's small CNN (64 px), on the cat and a scene;
- hub-sized: DINO ViT-S/8, ViT-B/16 and ResNet-50 with the real architectures and random weights, built here and
  laid out as their downloads in a private Hugging Face cache (``benchmarks/hubcache.py``; the hub cannot be
  reached here), loaded by the registry's own loaders, on the cat at 224 px. Their numbers mean nothing; their cost
  is the cost of the real models.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HF_HOME = Path(tempfile.mkdtemp(prefix="vitviz-bench-hf-"))
os.environ["HF_HOME"] = str(HF_HOME)  # before huggingface_hub reads it: the checkpoints built here, nothing else

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vitviz import assets  # noqa: E402
from vitviz.core import images  # noqa: E402
from vitviz.embedded import scenes  # noqa: E402
from benchmarks import hubcache  # noqa: E402
from vitviz.models import cache as models  # noqa: E402
from vitviz.core import owned  # noqa: E402
from vitviz.specs import registry  # noqa: E402
from vitviz import views as all_views  # noqa: E402
from vitviz.views import show  # noqa: E402
from vitviz.core.lru import KEPT  # noqa: E402

VIEWS = ("receptive_field", "translation", "data_efficiency", "hybrid_stages")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(view: str, rgb: np.ndarray | None) -> float:
    t = time.perf_counter()
    show(view, rgb, all_views.VIEWS[view].check({}))
    return time.perf_counter() - t


def hub_sized(tmp: Path) -> None:
    """Random-weight DINO ViT-S/8, ViT-B/16 and ResNet-50 laid out as their downloads in the private cache, then
    loaded through the registry (``models.get_model``), as a server online would."""
    import timm
    from safetensors.torch import save_file

    torch.manual_seed(0)
    hubcache.install(HF_HOME, registry.REGISTRY["DINO ViT-S/8"].source, hubcache.dino_vits8(tmp / "dino"))
    for key, name in (("ViT-B/16 (ImageNet-1k)", "vit_base_patch16_224"), ("ResNet-50 (ImageNet-1k)", "resnet50")):
        file = tmp / f"{name}.safetensors"
        save_file(timm.create_model(name, pretrained=False).state_dict(), str(file))
        repo = timm.models.get_pretrained_cfg(registry.REGISTRY[key].source).hf_hub_id
        hubcache.install(HF_HOME, repo, {"model.safetensors": file})
    owned.reset("models")
    for key in ("DINO ViT-S/8", "ViT-B/16 (ImageNet-1k)", "ResNet-50 (ImageNet-1k)"):
        assert not models.get_model(key).notice, f"{key} did not load from the private cache"


def main() -> None:
    cat = images.load_rgb(assets.example("cat"), images.INTAKE_SHORT_SIDE)
    scene = np.asarray(scenes.make_scene(7).image)
    rows = []
    for view in VIEWS:
        pictured = any(f.kind == "image" for f in all_views.VIEWS[view].fields)
        for label, rgb in (("cat", cat), ("scene", scene)) if pictured else (("—", None),):
            owned.reset("results"), KEPT.forget()
            first = timed(view, rgb)
            rows.append(("offline (64 px)", view, label, first, timed(view, rgb), peak_mib()))
    with tempfile.TemporaryDirectory() as tmp:
        hub_sized(Path(tmp))
        for view in ("receptive_field", "translation"):
            owned.reset("results"), KEPT.forget()
            first = timed(view, cat)
            rows.append(("hub-sized (224 px)", view, "cat", first, timed(view, cat), peak_mib()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'models':<20} {'view':<17} {'picture':<8} {'first (s)':>10} {'again (s)':>10} {'peak RSS (MiB)':>15}")
    for models_, view, label, first, again, peak in rows:
        print(f"{models_:<20} {view:<17} {label:<8} {first:>10.2f} {again:>10.2f} {peak:>15.0f}")
    shutil.rmtree(HF_HOME, ignore_errors=True)


if __name__ == "__main__":
    main()
