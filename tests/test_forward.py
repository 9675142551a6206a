"""The forward pass: every stage's shape is a real tensor's, the logit lens is the model's own head applied to each
layer (and the model's prediction at the last), the residual-stream numbers are what a hand computation gives."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from transformers import ViTConfig, ViTForImageClassification, ViTModel

from vitviz import views
from vitviz.analyses.forward import ForwardProbe, parts_of
from vitviz.models import cache as models
from vitviz.specs import registry
from vitviz.specs import views as declared


def timm_vit(registers: int = 0) -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=7, reg_tokens=registers,
                             dynamic_img_size=True).eval()


def hf_vit(head: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ViTConfig(image_size=64, patch_size=8, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=96, num_labels=5, id2label={i: f"class {i}" for i in range(5)},
                    label2id={f"class {i}": i for i in range(5)})
    model = ViTForImageClassification(cfg) if head else ViTModel(cfg, add_pooling_layer=False)
    return model.eval()


def run(model: torch.nn.Module, x: torch.Tensor, prefix: int, patch: int, labels=None):
    """The probe on ``model``'s own call (what a Runner hands it), and the model's own output."""
    out = {}

    def forward(x):
        if isinstance(model, timm.models.VisionTransformer):
            out["y"] = model(x)
        else:
            out["y"] = model(pixel_values=x, interpolate_pos_encoding=True)
        return out["y"]

    with torch.inference_mode():
        fp = ForwardProbe(prefix, patch, labels)(model, x, forward)
    return fp, out["y"]


def blocks_by_hand(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Every block's (T, D) output, from forward hooks of our own (independent of the probe's)."""
    got = []
    handles = [b.register_forward_hook(lambda _m, _i, o: got.append((o[0] if isinstance(o, tuple) else o)[0]))
               for b in parts_of(model).blocks]
    try:
        with torch.inference_mode():
            model(x) if isinstance(model, timm.models.VisionTransformer) else model(pixel_values=x, interpolate_pos_encoding=True)
    finally:
        for h in handles:
            h.remove()
    return got


@pytest.mark.parametrize("registers", [0, 4])
def test_timm_stages_lens_and_residual_equal_independent_computations(registers):
    model = timm_vit(registers)
    x = torch.randn(1, 3, 96, 128)  # a 6×8 grid
    prefix = 1 + registers
    fp, logits = run(model, x, prefix, 16, tuple(f"c{i}" for i in range(7)))
    t, d = prefix + 48, 384
    shapes = {s.name: s.shape for s in fp.stages}
    assert shapes["image"] == (3, 96, 128) and shapes["patches, flattened"] == (48, 768)
    assert shapes["patch embeddings"] == (48, d) and shapes["tokens entering block 1"] == (t, d)
    assert all(shapes[f"block {i}"] == (t, d) for i in range(1, 13)) and shapes["final LayerNorm"] == (t, d)
    assert shapes["head: logits"] == (7,) == shapes["softmax: probabilities"]
    # the lens at the last layer is the model's own prediction; at every layer, the norm and head on [CLS]
    probs = torch.softmax(logits.double(), -1)[0].numpy()
    assert np.abs(fp.probs - probs).max() < 1e-6 and np.abs(fp.lens[-1] - probs).max() < 1e-6
    outs = blocks_by_hand(model, x)
    with torch.inference_mode():
        for i, o in enumerate(outs):
            ours = torch.softmax(model.head(model.fc_norm(model.norm(o[None])))[0, 0].double(), -1).numpy()
            assert np.abs(fp.lens[i] - ours).max() < 1e-6, i
            patch_probs = torch.softmax(model.head(model.norm(o[None]))[0, prefix:].double(), -1)[:, probs.argmax()]
            assert np.abs(fp.lens_patches[i] - patch_probs.numpy()).max() < 1e-6
    # the residual stream by hand: x_in, what attention adds (ls1 ∘ attn ∘ norm1), what the MLP adds
    with torch.inference_mode():
        z = model.norm_pre(model._pos_embed(model.patch_embed(x)))
        for i, blk in enumerate(model.blocks):
            a = blk.ls1(blk.attn(blk.norm1(z)))
            m = blk.ls2(blk.mlp(blk.norm2(z + a)))
            assert abs(fp.attn_update[i] - float(a[0, 0].norm() / z[0, 0].norm())) < 1e-5
            assert abs(fp.mlp_update[i] - float(m[0, 0].norm() / (z + a)[0, 0].norm())) < 1e-5
            assert np.allclose(fp.norms[i], z[0, prefix:].norm(dim=-1).numpy(), rtol=1e-5)
            z = z + a + m
        assert np.allclose(fp.norms[-1], z[0, prefix:].norm(dim=-1).numpy(), rtol=1e-5)
        cos = torch.nn.functional.cosine_similarity(z[0, 0], outs[0][0], dim=0)
        assert abs(fp.cls_cosine[1] - float(cos)) < 1e-5 and abs(fp.cls_cosine[-1] - 1) < 1e-6


def test_transformers_stages_and_lens_equal_the_models_own():
    model = hf_vit(head=True)
    x = torch.randn(1, 3, 64, 80)  # 8×10 patches of 8 px
    fp, out = run(model, x, 1, 8, tuple(f"class {i}" for i in range(5)))
    shapes = [(s.name, s.shape) for s in fp.stages]
    assert shapes[:4] == [("image", (3, 64, 80)), ("patches, flattened", (80, 192)), ("patch embeddings", (80, 48)),
                          ("tokens entering block 1", (81, 48))]
    assert [s for n, s in shapes if n.startswith("block ")] == [(81, 48)] * 3
    probs = torch.softmax(out.logits.double(), -1)[0].numpy()
    assert np.abs(fp.lens[-1] - probs).max() < 1e-6
    outs = blocks_by_hand(model, x)
    with torch.inference_mode():
        for i, o in enumerate(outs):
            ours = torch.softmax(model.classifier(model.vit.layernorm(o[None]))[0, 0].double(), -1).numpy()
            assert np.abs(fp.lens[i] - ours).max() < 1e-6, i
    top = fp.top(fp.lens[-1])
    assert list(top) == [f"class {i}" for i in np.argsort(-probs)] and np.allclose(list(top.values()),
                                                                                  np.sort(probs)[::-1], atol=1e-6)


def test_a_model_without_a_head_has_no_lens_and_says_so():
    model = hf_vit(head=False)
    fp, _ = run(model, torch.randn(1, 3, 64, 64), 1, 8)
    assert fp.probs is None and fp.lens is None and fp.stages[-1].name == "final LayerNorm"
    assert fp.stages[-1].shape == (65, 48) and len(fp.attn_update) == 3


def test_the_view_answers_with_stages_and_a_lens_for_the_offline_model(rgb_cat):
    runner = models.get_model(registry.OFFLINE_KEY)
    shown = views.show("forward_pass", rgb_cat, declared.FORWARD.check({"model": registry.OFFLINE_KEY, "layer": 2}))
    n = shown.numbers
    _, h, w = n["stages"][0]["shape"]
    grid = (h // 8) * (w // 8)
    assert min(h, w) == 64 and [s["shape"] for s in n["stages"][1:4]] == [
        [grid, 3 * 8 * 8], [grid, runner.spec.dim], [grid + 1, runner.spec.dim]]
    last, top5 = n["logit_lens"][-1], n["top5"]
    assert len(n["logit_lens"]) == runner.depth and list(last) == list(top5)
    assert max(abs(last[k] - top5[k]) for k in top5) < 1e-6  # the lens at the last layer is the prediction
    assert abs(sum(n["top5"].values()) - 1) < 0.2 and n["layer"] == 2
    assert "probe" in shown.texts["lens"] and "shape" in shown.notice  # a photo shown to the shapes-only model
    assert shown.data["diagram"].count("<details>") == len(n["stages"])


def registry_models():
    """Every registry architecture the Forward-pass view offers, built with random weights from its real config
    (transformers' DINO, DINOv2 with and without registers at their real widths but two blocks; timm's ViT-B/16 and
    DeiT-Ti as they are), with (prefix, patch)."""
    from transformers import Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    torch.manual_seed(0)
    yield "DINO ViT-S/8", ViTModel(ViTConfig(image_size=224, patch_size=8, hidden_size=384, num_hidden_layers=2,
                                             num_attention_heads=6, intermediate_size=1536, qkv_bias=True),
                                   add_pooling_layer=False), 1, 8
    yield "DINOv2 ViT-S/14", Dinov2Model(Dinov2Config(hidden_size=384, num_hidden_layers=2, num_attention_heads=6,
                                                      patch_size=14, image_size=518)), 1, 14
    yield "DINOv2 ViT-S/14 + 4 registers", Dinov2WithRegistersModel(Dinov2WithRegistersConfig(
        hidden_size=384, num_hidden_layers=2, num_attention_heads=6, patch_size=14, image_size=518,
        num_register_tokens=4)), 5, 14
    for key in ("ViT-B/16 (ImageNet-1k)", "DeiT-Ti/16 (ImageNet-1k, fast)"):
        spec_ = registry.REGISTRY[key]
        yield key, timm.create_model(spec_.source, pretrained=False, dynamic_img_size=True), spec_.prefix, spec_.patch


def test_every_registry_architectures_stages_are_its_real_tensors():
    """Each stage's shape is the shape of the tensor the model computed (our own hooks, independent of the probe's),
    for every architecture the view offers."""
    seen = []
    for key, model, prefix, patch in registry_models():
        model.eval()
        assert (prefix, patch) == (registry.REGISTRY[key].prefix, registry.REGISTRY[key].patch)
        x = torch.randn(1, 3, 4 * patch, 5 * patch)
        fp, _ = run(model, x, prefix, patch)
        outs = blocks_by_hand(model, x)
        got = {s.name: s.shape for s in fp.stages}
        assert [got[f"block {i + 1}"] for i in range(len(outs))] == [tuple(o.shape) for o in outs], key
        assert got["tokens entering block 1"] == tuple(outs[0].shape) == (prefix + 20, outs[0].shape[-1])
        assert got["patches, flattened"] == (20, 3 * patch * patch) and got["patch embeddings"] == (20, outs[0].shape[-1])
        assert (fp.probs is not None) == (registry.REGISTRY[key].task == "classify"), key
        seen.append(key)
    assert len(seen) == 5


def test_the_probes_hooks_are_gone_after_a_forward_and_after_an_error():
    model = timm_vit()

    def hooks_left() -> int:
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())

    assert hooks_left() == 0
    run(model, torch.randn(1, 3, 64, 64), 1, 16)
    assert hooks_left() == 0

    def broken(_x):
        raise RuntimeError("the forward failed")

    with pytest.raises(RuntimeError), torch.inference_mode():
        ForwardProbe(1, 16)(model, torch.randn(1, 3, 64, 64), broken)
    assert hooks_left() == 0


def test_eight_threads_get_the_sequential_answers(rgb_cat):
    """The view from several threads at once (one model, its lock, the shared result store) equals one by one."""
    from concurrent.futures import ThreadPoolExecutor

    from vitviz.models.runner import clear_results

    pictures = [np.ascontiguousarray(np.roll(rgb_cat, 7 * i, axis=1)) for i in range(4)]
    values = declared.FORWARD.check({"model": registry.OFFLINE_KEY})

    def numbers(rgb):
        n = views.show("forward_pass", rgb, values).numbers
        return n["stages"], n["logit_lens"], n["residual"]

    clear_results()
    alone = [numbers(p) for p in pictures]
    clear_results()
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(numbers, pictures * 2))
    assert together == alone * 2
