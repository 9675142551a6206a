"""vitviz's small CNN: the convolutional side of the ViT-vs-CNN lab, offline (trained by vitviz.embedded.sweep).

A ResNet in miniature, sized to about the embedded ViT's parameter count (0.48 M against 0.45 M):

    stem   3x3 conv, stride 1, 16 channels        64 x 64   (the stride-1 part)
    stage1 basic block, stride 2, 24 channels     32 x 32
    stage2 basic block, stride 2, 48 channels     16 x 16
    stage3 basic block, stride 2, 96 channels      8 x  8
    stage4 basic block, stride 2, 144 channels     4 x  4
    head   global average pool, linear to the classes (the 6 generated shapes)

A basic block is two 3x3 convolutions with batch norm and ReLU, plus a 1x1 stride-2 shortcut, as in
ResNet-18. Stage k's output moves by d / 2**k cells when the input moves by d pixels, exactly only when
2**k divides d: that is what the translation view shows. ``stages(model, x)`` returns every stage's map.
"""

from __future__ import annotations

import torch
from torch import nn

WIDTHS = (24, 48, 96, 144)
STEM = 16
STAGES = ("stem", "stage1", "stage2", "stage3", "stage4")
STRIDES = (1, 2, 4, 8, 16)
"""Each stage's output stride in input pixels."""


class Block(nn.Module):
    """Basic residual block: (B, C_in, H, W) -> (B, C_out, H/s, W/s)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.short(x))


class SmallCNN(nn.Module):
    """(B, 3, 64, 64) normalised pictures -> (B, K) logits."""

    def __init__(self, classes: int = 6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, STEM, 3, 1, 1, bias=False), nn.BatchNorm2d(STEM), nn.ReLU())
        widths = (STEM, *WIDTHS)
        self.stage1, self.stage2, self.stage3, self.stage4 = (
            Block(widths[i], widths[i + 1], 2) for i in range(len(WIDTHS)))
        self.head = nn.Linear(WIDTHS[-1], classes)

    def forward_stages(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Every stage's output, (B, C_k, H / STRIDES[k], W / STRIDES[k]) for k over :data:`STAGES`."""
        out = [self.stem(x)]
        for name in STAGES[1:]:
            out.append(getattr(self, name)(out[-1]))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_stages(x)[-1].mean((2, 3)))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load(path, classes: int = 6) -> SmallCNN:
    """A saved SmallCNN (safetensors; float16 tensors are widened to float32), in eval mode."""
    from safetensors.torch import load_file

    model = SmallCNN(classes)
    state = {k: v.float() if v.is_floating_point() else v for k, v in load_file(str(path)).items()}
    model.load_state_dict(state)
    return model.eval()
