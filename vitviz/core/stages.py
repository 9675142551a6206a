"""Multiply-accumulates, tokens and attention-matrix sizes per stage: a plain ViT, a ResNet and a CoAtNet-style hybrid.

A calculator from the architecture alone (no weights); the ViT's counts are those of
:func:`vitviz.core.patches.vit_macs`. It counts what a MAC counter counts: every
convolution (out_h * out_w * C_out * C_in / groups * k * k), every linear layer (tokens * C_in * C_out) and the
two matrix products of attention (q kᵀ and the weighted sum of v: N * N * d_head each, per head, so
2 * N² * C per layer). Norms, activations, softmax, pooling and bias adds are left out, as
``torch.utils.flop_counter.FlopCounterMode`` leaves them out (it reports FLOPs = 2 * MACs); the tests compare
every stage with it on timm's ``vit_base_patch16_224``, ``resnet50`` and ``coatnet_0_rw_224``.

The three layouts are timm's:
    ViT-B/16:        16x16 patch embedding, 12 blocks at one resolution (D = 768, 12 heads), head.
    ResNet-50:       7x7 stride-2 stem, max pool, four stages of bottlenecks (3, 4, 6, 3), head.
    CoAtNet-0 (rw):  two-conv stem, two MBConv stages (2, 3 blocks), two transformer stages (7, 2 blocks,
                     heads of 32 channels, relative position bias), head. Each stage halves the side, and the
                     first block of a stage attends at the width it receives (6 and 12 heads), the others at
                     the stage's own (12 and 24).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vitviz.core import patches
from vitviz.specs.registry import VIT_SIZES

LAYOUTS = ("ViT-B/16", "ResNet-50", "CoAtNet-0")
TIMM_NAMES = {"ViT-B/16": "vit_base_patch16_224", "ResNet-50": "resnet50", "CoAtNet-0": "coatnet_0_rw_224"}
"""The timm models whose layouts these are (the tests count them with FlopCounterMode)."""


@dataclass
class Stage:
    """One stage of a network.

    Attributes:
        name: e.g. "stage 2 (attention)"; ``module`` is the timm module it corresponds to ("" for several).
        kind: "conv", "attention" or "head".
        side: (h, w) of the stage's output grid.
        heads: attention heads of the stage's own width (0 for convolution stages).
        layers: attention layers in the stage.
        layer_heads: each attention layer's heads, first layer first (a CoAtNet stage's first block attends at the
            width it receives, so with fewer heads); empty means ``heads`` in every layer.
        macs: all multiply-accumulates of the stage; ``attention_macs`` the part in q kᵀ and the weighted sum.
    """

    name: str
    kind: str
    module: str
    side: tuple[int, int]
    heads: int = 0
    layers: int = 0
    macs: int = 0
    attention_macs: int = 0
    prefix: int = 0
    layer_heads: tuple[int, ...] = ()

    @property
    def heads_per_layer(self) -> tuple[int, ...]:
        """Every attention layer's heads, first layer first (empty for a stage without attention)."""
        if self.kind != "attention":
            return ()
        return self.layer_heads or (self.heads,) * self.layers

    @property
    def tokens(self) -> int:
        """Positions (tokens) at this stage's output, prefix tokens included."""
        return self.side[0] * self.side[1] + self.prefix

    @property
    def attention_entries(self) -> int:
        """Entries of one head's attention matrix (N²), 0 for a stage without attention."""
        return self.tokens ** 2 if self.kind == "attention" else 0

    @property
    def attention_total(self) -> int:
        """Entries of every attention matrix of the stage: N² for each head of each layer."""
        return self.attention_entries * sum(self.heads_per_layer)


@dataclass
class Network:
    name: str
    resolution: int
    stages: list[Stage] = field(default_factory=list)

    @property
    def macs(self) -> int:
        return sum(s.macs for s in self.stages)

    @property
    def attention_macs(self) -> int:
        return sum(s.attention_macs for s in self.stages)


def conv(h: int, w: int, c_in: int, c_out: int, k: int = 1, groups: int = 1) -> int:
    """MACs of a k x k convolution producing an (h, w, c_out) map."""
    return h * w * c_out * (c_in // groups) * k * k


def _down(side: int, stride: int) -> int:
    return -(-side // stride)  # ceil, as a padded stride-s convolution


def vit(resolution: int = 224, size: str = "ViT-B", patch: int = 16, classes: int = 1000) -> Network:
    """A plain ViT (``size`` from the paper's table): patch embedding, its blocks on N = (side / P)² + 1 tokens,
    linear head; the counts are :func:`vitviz.core.patches.vit_macs`'s, grouped by stage."""
    vs = VIT_SIZES[size]
    c = patches.vit_macs(vs, patch, resolution, resolution, num_classes=classes)
    g = resolution // patch
    attn = c["attention scores QKᵀ"] + c["attention × V"]
    blocks = attn + c["QKV projection"] + c["output projection"] + c["MLP"]
    net = Network(f"{size}/{patch}", resolution)
    net.stages.append(Stage("patch embedding", "conv", "patch_embed", (g, g), macs=c["patch embedding"]))
    net.stages.append(Stage(f"blocks 1–{vs.depth} (attention)", "attention", "blocks", (g, g), vs.heads, vs.depth,
                            blocks, attn, prefix=1))
    net.stages.append(Stage("head", "head", "head", (1, 1), macs=c["classifier head"]))
    return net


def resnet50(resolution: int = 224, classes: int = 1000) -> Network:
    """timm's ResNet-50: 7x7/2 stem, 3x3/2 max pool, bottleneck stages (3, 4, 6, 3) of widths 64…512 (x4 out)."""
    net = Network("ResNet-50", resolution)
    s = _down(resolution, 2)
    net.stages.append(Stage("stem 7×7 conv", "conv", "conv1", (s, s), macs=conv(s, s, 3, 64, 7)))
    s = _down(s, 2)  # max pool
    c_in = 64
    for i, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        macs = 0
        for b in range(blocks):
            stride = 2 if (b == 0 and i > 0) else 1
            out = _down(s, stride)
            macs += conv(s, s, c_in, width) + conv(out, out, width, width, 3) + conv(out, out, width, 4 * width)
            if b == 0:
                macs += conv(out, out, c_in, 4 * width)  # the projection shortcut
            s, c_in = out, 4 * width
        net.stages.append(Stage(f"stage {i + 1} (conv)", "conv", f"layer{i + 1}", (s, s), macs=macs))
    net.stages.append(Stage("head", "head", "fc", (1, 1), macs=c_in * classes))
    return net


def coatnet0(resolution: int = 224, classes: int = 1000) -> Network:
    """timm's ``coatnet_0_rw_224``: stem (3x3/2 to 32, 3x3 to 64), MBConv stages of 96 and 192 channels
    (2 and 3 blocks, expansion 4 of the block's input, squeeze-excite to a quarter), transformer stages of 384
    and 768 channels (7 and 2 blocks, heads of 32 channels, MLP x4). Each stage's first block halves the side."""
    net = Network("CoAtNet-0", resolution)
    s = _down(resolution, 2)
    net.stages.append(Stage("stem (conv)", "conv", "stem", (s, s),
                            macs=conv(s, s, 3, 32, 3) + conv(s, s, 32, 64, 3)))
    c_in = 64
    for i, (blocks, c_out, kind) in enumerate(zip((2, 3, 7, 2), (96, 192, 384, 768), "CCTT")):
        macs = attn = 0
        layer_heads = []
        for b in range(blocks):
            s = s // 2 if b == 0 else s
            n = s * s
            if b == 0:
                macs += conv(s, s, c_in, c_out)  # pooled shortcut, 1x1 to the new width
            if kind == "C":
                mid = 4 * c_in
                macs += conv(s, s, c_in, mid) + conv(s, s, mid, mid, 3, groups=mid) + conv(s, s, mid, c_out)
                macs += 2 * mid * (mid // 4)  # squeeze-excite on the pooled 1x1 map
            else:
                a = 2 * n * n * c_in  # attention at the block's input width: c_in / 32 heads of 32 channels
                macs += conv(s, s, c_in, 3 * c_in) + a + conv(s, s, c_in, c_out) + 2 * conv(s, s, c_out, 4 * c_out)
                attn += a
                layer_heads.append(c_in // 32)
            c_in = c_out
        label = "MBConv" if kind == "C" else "attention"
        net.stages.append(Stage(f"stage {i + 1} ({label})", "attention" if kind == "T" else "conv", f"stages.{i}",
                                (s, s), heads=c_out // 32 if kind == "T" else 0,
                                layers=blocks if kind == "T" else 0, macs=macs, attention_macs=attn,
                                layer_heads=tuple(layer_heads)))
    net.stages.append(Stage("head", "head", "head", (1, 1), macs=c_in * classes))
    return net


def networks(resolution: int = 224) -> list[Network]:
    """The three layouts at ``resolution`` (a multiple of 32)."""
    return [vit(resolution), resnet50(resolution), coatnet0(resolution)]
