"""What the ViT-vs-CNN tab's four views cost here; prints a table.

    python -m benchmarks.vitcnn

Each view's answer (figures, texts, numbers) through ``vitviz.views.show``, first call (nothing cached but the
loaded models) and again (the caches warm), with the process's peak resident memory after each model set:

- offline: the embedded tiny ViT and vitviz's small CNN (64 px), on the cat and a scene;
- hub-sized: DINO ViT-S/8, ViT-B/16 and ResNet-50 with the real architectures and random weights, built here and
  put in vitviz's model cache (the hub cannot be reached here), on the cat at 224 px. Their numbers mean nothing;
  their cost is the cost of the real models.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vitviz import assets  # noqa: E402
from vitviz.core import images  # noqa: E402
from vitviz.embedded import scenes  # noqa: E402
from vitviz.models import cache as models  # noqa: E402
from vitviz.models import loaders  # noqa: E402
from vitviz.models.runner import clear_results  # noqa: E402
from vitviz.specs import registry  # noqa: E402
from vitviz import views as all_views  # noqa: E402
from vitviz.views import show, vitcnn as compare  # noqa: E402

VIEWS = ("receptive_field", "translation", "data_efficiency", "hybrid_stages")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(view: str, rgb: np.ndarray | None) -> float:
    t = time.perf_counter()
    show(view, rgb, all_views.VIEWS[view].check({}))
    return time.perf_counter() - t


def hub_sized(tmp: Path) -> None:
    """Random-weight DINO ViT-S/8, ViT-B/16 and ResNet-50 in the model cache under their registry keys."""
    import timm
    from safetensors.torch import save_file
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(0)
    dino = tmp / "dino"
    ViTModel(ViTConfig(patch_size=8, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                       intermediate_size=1536, image_size=224), add_pooling_layer=False).save_pretrained(dino)
    ViTImageProcessor(size={"height": 224, "width": 224}).save_pretrained(dino)
    files = {}
    for name in ("vit_base_patch16_224", "resnet50"):
        files[name] = tmp / f"{name}.safetensors"
        save_file(timm.create_model(name, pretrained=False).state_dict(), str(files[name]))
    reg = registry.REGISTRY
    with models._cache_lock:
        models._cache["DINO ViT-S/8"] = loaders.load_hf(dino, spec=reg["DINO ViT-S/8"])
        models._cache["ViT-B/16 (ImageNet-1k)"] = loaders.load_timm(
            "vit_base_patch16_224.augreg2_in21k_ft_in1k", file=files["vit_base_patch16_224"],
            spec=reg["ViT-B/16 (ImageNet-1k)"])
        models._cache["ResNet-50 (ImageNet-1k)"] = loaders.load_timm(
            "resnet50.a1_in1k", file=files["resnet50"], spec=reg["ResNet-50 (ImageNet-1k)"])


def main() -> None:
    cat = images.load_rgb(assets.example("cat"), images.INTAKE_SHORT_SIDE)
    scene = np.asarray(scenes.make_scene(7).image)
    rows = []
    for view in VIEWS:
        pictured = any(f.kind == "image" for f in all_views.VIEWS[view].fields)
        for label, rgb in (("cat", cat), ("scene", scene)) if pictured else (("—", None),):
            clear_results(), compare._shift_cache.clear()
            first = timed(view, rgb)
            rows.append(("offline (64 px)", view, label, first, timed(view, rgb), peak_mib()))
    with tempfile.TemporaryDirectory() as tmp:
        hub_sized(Path(tmp))
        for view in ("receptive_field", "translation"):
            clear_results(), compare._shift_cache.clear()
            first = timed(view, cat)
            rows.append(("hub-sized (224 px)", view, "cat", first, timed(view, cat), peak_mib()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'models':<20} {'view':<17} {'picture':<8} {'first (s)':>10} {'again (s)':>10} {'peak RSS (MiB)':>15}")
    for models_, view, label, first, again, peak in rows:
        print(f"{models_:<20} {view:<17} {label:<8} {first:>10.2f} {again:>10.2f} {peak:>15.0f}")


if __name__ == "__main__":
    main()
