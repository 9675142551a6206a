"""What one training step of the embedded tiny ViT costs here; prints a table.

    python -m benchmarks.train_step

Source images per second for the labelled recipe `python -m vitviz.embedded.train` uses
(bfloat16 autocast, unfused attention, token labelling, spread penalty) against
plain float32 and bfloat16 steps, and for a DINO-style
step on the same model: the student sees 2 global 64-pixel crops and 6 local
32-pixel crops (forward and backward), the EMA teacher sees the 2 global crops
(forward only). Random inputs: speed does not depend on the pixels.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from vitviz.embedded import train  # noqa: E402

BATCH = 128


def _model(fused: bool) -> torch.nn.Module:
    import timm

    model = timm.create_model(train.ARCH, pretrained=False, dynamic_img_size=True, **train.MODEL_KWARGS)
    for block in model.blocks:
        block.attn.fused_attn = fused
    return model


def _rate(step, repeats: int = 8) -> float:
    """Median seconds of ``step()`` after two warm-up calls."""
    step(), step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def labelled(bf16: bool, fused: bool) -> float:
    """Source images per second of one plain supervised step (class-token cross-entropy only)."""
    model = _model(fused)
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(BATCH, 3, 64, 64), torch.randint(0, 6, (BATCH,))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return BATCH / _rate(step)


def recipe() -> float:
    """Source images per second of the step ``vitviz.embedded.train`` takes (its own loss: token labelling and the spread penalty)."""
    model = _model(False)
    classes = train.MODEL_KWARGS["num_classes"]
    token_head = torch.nn.Linear(model.embed_dim, classes + 1)
    opt = torch.optim.AdamW([*model.parameters(), *token_head.parameters()])
    x, y = torch.randn(BATCH, 3, 64, 64), torch.randint(0, classes, (BATCH,))
    cover = torch.rand(BATCH, (64 // train.MODEL_KWARGS["patch_size"]) ** 2)

    def step():
        loss = train.step_loss(model, token_head, x, y, cover)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return BATCH / _rate(step)


def dino(bf16: bool) -> float:
    """Source images per second of one DINO-style multi-crop step (student + EMA teacher)."""
    student, teacher = _model(False), _model(False)
    opt = torch.optim.AdamW(student.parameters())
    globals_ = torch.randn(2 * BATCH, 3, 64, 64)
    locals_ = torch.randn(6 * BATCH, 3, 32, 32)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            with torch.no_grad():
                t = teacher(globals_).float().softmax(-1)
            s = torch.cat([student(globals_), student(locals_)]).float().log_softmax(-1)
        loss = -(t.repeat(4, 1) * s).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.mul_(0.996).add_(ps.detach(), alpha=0.004)

    return BATCH / _rate(step)


def main() -> None:
    rows = [
        ("labelled, float32, fused attention", labelled(False, True)),
        ("labelled, float32, unfused attention", labelled(False, False)),
        ("labelled, bfloat16 autocast, unfused", labelled(True, False)),
        ("the same + token labelling + spread penalty (vitviz.embedded.train)", recipe()),
        ("DINO multi-crop (2x64 + 6x32 px), bfloat16, unfused", dino(True)),
    ]
    base = rows[3][1]
    print(f"tiny ViT training step, batch {BATCH}, {torch.get_num_threads()} threads")
    print("| recipe | images/s | vs vitviz.embedded.train |\n|---|---|---|")
    for name, rate in rows:
        print(f"| {name} | {rate:.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
