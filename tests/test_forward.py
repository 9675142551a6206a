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

    def forward(x):  # as a Runner's forward: (logits or None, tokens)
        if isinstance(model, timm.models.VisionTransformer):
            out["y"] = model(x)
            return (out["y"] if model.num_classes else None), None
        out["y"] = model(pixel_values=x, interpolate_pos_encoding=True)
        return getattr(out["y"], "logits", None), None

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


@pytest.mark.slow  # six whole views with their figures (6-7 s); the fast set's threads tests are test_concurrency's
def test_threads_at_once_get_the_sequential_answers(rgb_cat):
    """The view from several threads at once (one model, its lock, the shared result store) equals one by one."""
    from concurrent.futures import ThreadPoolExecutor

    from vitviz.core import owned

    pictures = [np.ascontiguousarray(np.roll(rgb_cat, 7 * i, axis=1)) for i in range(2)]
    values = declared.FORWARD.check({"model": registry.OFFLINE_KEY})

    def numbers(rgb):
        n = views.show("forward_pass", rgb, values).numbers
        return n["stages"], n["logit_lens"], n["residual"]

    owned.reset("results")
    alone = [numbers(p) for p in pictures]
    owned.reset("results")
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(numbers, pictures * 2))  # four at once, each picture twice
    assert together == alone * 2


# ---- the model's own pooling and head (a distilled DeiT's two heads, a model that averages its patch tokens) -------

def _probs_agree(fp, logits, head_bound) -> None:
    """The view's probabilities are the model's own softmax, and the lens at the last layer equals them within the
    float32 rounding of the head (``head_bound``: per logit, tests/precision.py), carried through the softmax."""
    import precision

    probs = torch.softmax(logits.double(), -1).reshape(-1).numpy()
    assert np.array_equal(fp.probs, probs)  # its own output, not one of its heads
    assert (np.abs(fp.lens[-1] - probs) <= precision.softmax_bound(probs, head_bound)).all()


def _head_bound(head: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    import precision

    return precision.linear_bound(head.weight.detach().numpy(), head.bias.detach().numpy(), x.detach().numpy())


@pytest.mark.parametrize("library", ["timm", "transformers"])
def test_a_distilled_deit_answers_with_its_two_heads_averaged_as_the_model_does(library):
    """The probabilities were once the class-token head's alone (0.60 off, another top-1): now the model's own
    answer, (head(CLS) + head_dist(DIST)) / 2, and the lens reads the same way."""
    torch.manual_seed(0)
    if library == "timm":
        model = timm.create_model("deit_tiny_distilled_patch16_224", pretrained=False, num_classes=6, depth=2,
                                  dynamic_img_size=True).eval()
        with torch.no_grad():
            model.head_dist.weight.mul_(-3)  # the two heads disagree, as trained ones can
        heads = (model.head, model.head_dist)
    else:
        from transformers import DeiTConfig, DeiTForImageClassificationWithTeacher

        model = DeiTForImageClassificationWithTeacher(DeiTConfig(
            image_size=64, patch_size=8, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=96, num_labels=6)).eval()
        with torch.no_grad():
            model.distillation_classifier.weight.mul_(-3)
        heads = (model.cls_classifier, model.distillation_classifier)
    x = torch.randn(1, 3, 64, 64)
    fp, y = run(model, x, 2, 16 if library == "timm" else 8, tuple(f"c{i}" for i in range(6)))
    logits = y if library == "timm" else y.logits
    with torch.inference_mode():
        z = parts_of(model).norm(blocks_by_hand(model, x)[-1][None])[0]
        one = heads[0](z[0])
    bound = (_head_bound(heads[0], z[0]) + _head_bound(heads[1], z[1])) / 2
    _probs_agree(fp, logits, bound)
    assert np.abs(fp.probs - torch.softmax(one.double(), -1).numpy()).max() > 0.05  # the one head alone is not it
    assert fp.tracks == "[CLS]" and fp.prefix_norms.shape[1] == 2


@pytest.mark.parametrize("name, kwargs", [("vit_medium_patch16_gap_256", {}),
                                          ("vit_small_patch16_224", {"global_pool": "avg"})])
def test_a_model_that_averages_its_patch_tokens_is_read_through_its_own_pooling_and_norm(name, kwargs):
    """Such a model's lens once read token 0 (a patch, or an unused [CLS]) through an Identity norm: 0.98 and 0.80
    away from its prediction. Now the lens pools as the model does (mean of the patches, then fc_norm, then the
    head); the residual view follows that mean, and the stages show the pooling and its LayerNorm."""
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=5, depth=3, dynamic_img_size=True, **kwargs).eval()
    prefix = model.num_prefix_tokens
    x = torch.randn(1, 3, 64, 96)
    fp, logits = run(model, x, prefix, 16, tuple(f"c{i}" for i in range(5)))
    outs = blocks_by_hand(model, x)
    with torch.inference_mode():
        pooled = model.fc_norm(model.norm(outs[-1][None])[0, prefix:].mean(0))
    _probs_agree(fp, logits, _head_bound(model.head, pooled))
    names = [st.name for st in fp.stages]
    after = ["pooled: the mean of the patch tokens", "head: logits", "softmax: probabilities"]
    if isinstance(model.norm, torch.nn.Identity):  # the norm comes after the pooling: no card for an Identity
        assert "final LayerNorm" not in names and names[-4:] == after[:1] + ["LayerNorm after pooling"] + after[1:]
    else:
        assert names[-4:] == ["final LayerNorm"] + after
    assert fp.tracks == "the mean of the patch tokens"
    with torch.inference_mode():
        for i, o in enumerate(outs):  # every layer through the model's own pooling, and each patch on its own
            ours = torch.softmax(model.forward_head(model.norm(o[None]))[0].double(), -1).numpy()
            assert np.abs(fp.lens[i] - ours).max() < 1e-9, i  # the same computation on the same tensor
            each = torch.softmax(model.head(model.fc_norm(model.norm(o[None])[0, prefix:])).double(), -1)
            assert np.abs(fp.lens_patches[i] - each[:, fp.probs.argmax()].numpy()).max() < 1e-6, i
        z = model.norm_pre(model._pos_embed(model.patch_embed(x)))
        blk = model.blocks[0]
        a = blk.ls1(blk.attn(blk.norm1(z)))
        want = float(a[0, prefix:].mean(0).norm() / z[0, prefix:].mean(0).norm())
    assert abs(fp.attn_update[0] - want) <= 1e-5 * want  # the mean of the patches, not token 0


def test_a_dinov2_classifier_reads_cls_beside_the_patches_mean_registers_left_out():
    from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersForImageClassification

    torch.manual_seed(0)
    model = Dinov2WithRegistersForImageClassification(Dinov2WithRegistersConfig(
        hidden_size=48, num_hidden_layers=2, num_attention_heads=4, patch_size=14, image_size=56,
        num_register_tokens=4, num_labels=5)).eval()
    x = torch.randn(1, 3, 56, 70)
    fp, y = run(model, x, 5, 14, tuple(f"c{i}" for i in range(5)))
    with torch.inference_mode():
        z = parts_of(model).norm(blocks_by_hand(model, x)[-1][None])[0]
        read = torch.cat([z[0], z[5:].mean(0)])
    _probs_agree(fp, y.logits, _head_bound(model.classifier, read))
    assert fp.pool == "cls+mean" and fp.registers == 4 and fp.pos_on_prefix == (True, False, False, False, False)


def test_what_the_cards_say_is_true_of_each_model():
    """Which prefix tokens get a position embedding (transformers' registers get none; timm's no_embed_class models
    add them to the patches only), the image card's axes in the shape's own order, and a headless model called
    self-supervised only when it is (DINO), not for any model given without a head."""
    from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    from vitviz.views import forward as view

    torch.manual_seed(0)
    dinov2 = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(hidden_size=48, num_hidden_layers=1,
                                                                num_attention_heads=4, patch_size=14, image_size=56,
                                                                num_register_tokens=4)).eval()
    fp, _ = run(dinov2, torch.randn(1, 3, 56, 56), 5, 14)
    words = view.entering_words(fp)
    assert "added to [CLS] and every patch" in words and "The 4 registers get none." in words
    reg = timm.create_model("vit_small_patch14_reg4_dinov2", pretrained=False, depth=1, img_size=56,
                            dynamic_img_size=True).eval()  # timm's DINOv2: no_embed_class
    fp, _ = run(reg, torch.randn(1, 3, 56, 56), 5, 14)
    words = view.entering_words(fp)
    assert "added to every patch." in words and "[CLS] and the 4 registers get none." in words
    fp, _ = run(hf_vit(head=False), torch.randn(1, 3, 64, 64), 1, 8)
    assert view.entering_words(fp).endswith("a position embedding added to [CLS] and every patch.")
    assert view.stage_words("image", fp).startswith("x ∈ ℝ^{C×H×W}")  # beside the shape 3 × H × W
    rgb = np.zeros((64, 64, 3), np.uint8)
    from vitviz.core.images import fit_to_patches

    fitted = fit_to_patches(rgb, 64, 8, "keep")
    dino = registry.REGISTRY["DINO ViT-S/8"]
    assert "without labels (self-supervised" in view.diagram(fp, fitted, dino.key, 64, "viridis",
                                                             view.is_self_supervised(dino))
    added = registry.ModelSpec("Lab backbone", "hf", "lab/backbone", 8, 1, 64, 1.0, "attention", added=True)
    html_ = view.diagram(fp, fitted, added.key, 64, "viridis", view.is_self_supervised(added))
    assert "No head." in html_ and "without labels" not in html_


def test_registers_norms_are_shown_beside_the_patches():
    """A DINOv2's high-norm registers never showed (the norm maps are of the patches): the residual numbers and the
    chart's text now carry every prefix token's norm per layer."""
    from transformers import Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    from vitviz.views import forward as view

    torch.manual_seed(0)
    model = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(hidden_size=48, num_hidden_layers=2,
                                                               num_attention_heads=4, patch_size=14, image_size=56,
                                                               num_register_tokens=4)).eval()
    with torch.no_grad():
        model.embeddings.register_tokens.copy_(50 * torch.randn_like(model.embeddings.register_tokens))  # far above the patches, as trained DINOv2 registers are
    fp, _ = run(model, torch.randn(1, 3, 56, 56), 5, 14)
    assert fp.prefix_kinds == ("[CLS]", "register", "register", "register", "register")
    assert (fp.prefix_norms[:, 1:].min(1) > 3 * np.median(fp.norms, 1)).all()
    from vitviz.render import plotting

    alt = plotting.alt_of(view.render_updates(fp, "a DINOv2"))
    assert "register" in alt and "the patch tokens' median" in alt


def test_a_block_card_shows_layer_scale_when_the_model_has_it():
    """Issue 68: DINOv2's blocks scale what attention and the MLP add (LayerScale: transformers' layer_scale1/2,
    timm's ls1/ls2 with init_values); the card said z′ = MSA(LN(z)) + z for them too. It now writes γ₁ and γ₂ and
    their mean size in that block, read from the model's own weights; a ViT without LayerScale keeps its card."""
    from transformers import Dinov2Config, Dinov2Model

    from vitviz.views import forward as view

    torch.manual_seed(0)
    dinov2 = Dinov2Model(Dinov2Config(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, patch_size=14,
                                      image_size=56, layerscale_value=0.25)).eval()
    with torch.no_grad():
        dinov2.encoder.layer[1].layer_scale2.lambda1.fill_(-0.5)  # a block's own, negative: the size is |γ|
    fp, _ = run(dinov2, torch.randn(1, 3, 56, 56), 1, 14)
    assert fp.layer_scale == ((0.25, 0.25), (0.25, 0.5))
    first, second = view.stage_words("block 1", fp), view.stage_words("block 2", fp)
    assert first.startswith("z′ = γ₁ ⊙ MSA(LN(z)) + z, then z = γ₂ ⊙ MLP(LN(z′)) + z′")
    assert "LayerScale" in first and "mean size is 0.25 and 0.25)" in first and "0.25 and 0.5)" in second
    from vitviz.models import loaders
    from vitviz.models.runner import Runner

    spec = registry.ModelSpec("a DINOv2 test model", "hf", "test", 14, 1, 56, 0.0, "attention", dim=48, depth=2,
                              heads=4)
    runner = Runner(spec, dinov2, loaders._hf_forward(dinov2), mean=(0.0,) * 3, std=(1.0,) * 3, resolution=56,
                    origin="built by the test")
    cards = {s_["name"]: s_["words"] for s_ in view.device_plan(runner, 56, 48)["stages"]}
    assert cards["block 1"] == first and cards["block 2"] == second  # the device's cards say the same
    def small_timm(**kwargs):
        return timm.create_model("vit_small_patch16_224", pretrained=False, depth=2, num_classes=3, embed_dim=48,
                                 num_heads=4, dynamic_img_size=True, **kwargs).eval()

    ls = small_timm(init_values=1e-5)  # timm with LayerScale: ls1, ls2
    fp, _ = run(ls, torch.randn(1, 3, 32, 32), 1, 16)
    assert np.allclose(fp.layer_scale, 1e-5, rtol=1e-6) and np.shape(fp.layer_scale) == (2, 2)
    assert "γ₂ ⊙ MLP" in view.stage_words("block 2", fp) and "1e-05 and 1e-05" in view.stage_words("block 2", fp)
    for plain, x, patch in ((small_timm(), torch.randn(1, 3, 32, 32), 16),
                            (hf_vit(head=True), torch.randn(1, 3, 64, 64), 8)):
        fp, _ = run(plain, x, 1, patch)  # timm's Identity in ls1/ls2, transformers' ViT none at all
        assert fp.layer_scale == ()
        words = view.stage_words("block 1", fp)
        assert words.startswith("z′ = MSA(LN(z)) + z, then z = MLP(LN(z′)) + z′") and "γ" not in words
