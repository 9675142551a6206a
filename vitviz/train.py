"""Train the embedded offline ViT on generated shape scenes.

    python -m vitviz.train            # trains, writes assets/tiny/, prints the quality figures
    python -m vitviz.train --eval     # only measures the shipped weights

Objective: plain supervised cross-entropy on the shape label (not DINO). A DINO
step (EMA teacher pass, several crops per image) costs several times a labelled
step, and the labelled run alone fills the 30-minute budget on two CPU cores, so
we train with labels and say so wherever the model appears. The architecture is
a real ViT (timm ``VisionTransformer``: patch tokens, class token, learned
position embeddings), tiny enough to train here.

Two things make the budget go further without changing the task or the model:
a curriculum (the first ``RAMP`` of the steps mix in calmer scenes, from a flat
background up to full clutter) and bfloat16 autocast with timm's unfused
attention (on CPUs with AMX a step runs about 1.6 times faster than in float32;
the fused CPU attention kernel is slow in bfloat16; CPUs without bfloat16 support
will train slower than float32). Weights stay float32.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vitviz import scenes

ASSET_DIR = Path(__file__).resolve().parent.parent / "assets" / "tiny"

ARCH = "vit_tiny_patch16_224"
MODEL_KWARGS = dict(img_size=64, patch_size=8, embed_dim=96, depth=4, num_heads=4, num_classes=len(scenes.CLASSES))
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)
SEED = 0
TRAIN_SCENES = 30_000
EASY_SCENES = 10_000
"""Extra scenes with clutter levels spread over [0, 1), used by the curriculum."""
RAMP = 0.35
"""Share of the steps over which batches move from calm scenes to fully cluttered ones."""
STEPS = 5_000
BATCH = 128
LR = 1e-3
CHECKPOINT_STEPS = (0, 300, 800, 1600, 3000, STEPS)


def build_model() -> torch.nn.Module:
    """The tiny ViT with random weights (architecture only)."""
    import timm

    return timm.create_model(ARCH, pretrained=False, **MODEL_KWARGS)


def pretrained_cfg(file: str | Path) -> dict:
    """The timm ``pretrained_cfg_overlay`` that loads our weights from ``file``."""
    size = MODEL_KWARGS["img_size"]
    return dict(
        file=str(file), num_classes=len(scenes.CLASSES), input_size=(3, size, size), mean=MEAN, std=STD,
        crop_pct=1.0, interpolation="bilinear", label_names=list(scenes.CLASSES),
    )


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """(B, H, W, 3) uint8 -> (B, 3, H, W) float, normalised with MEAN/STD."""
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (x - mean) / std


def _augment(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random flips and 90-degree turns: the shape classes are closed under them."""
    out = images.copy()
    for i in range(len(out)):
        img = out[i]
        if rng.random() < 0.5:
            img = img[:, ::-1]
        out[i] = np.rot90(img, int(rng.integers(4)))
    return out


def _curriculum_batch(step: int, steps: int, hard: tuple[np.ndarray, np.ndarray],
                      easy: tuple[np.ndarray, np.ndarray, np.ndarray],
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Images (BATCH, H, W, 3) and labels (BATCH,) for ``step``.

    During the first ``RAMP`` of training a shrinking share of the batch comes from the calm
    scenes, and only from those no busier than the current level; afterwards all come from
    the fully cluttered scenes the model is measured on.
    """
    images, labels = hard
    idx = rng.integers(0, len(images), BATCH)
    x, y = images[idx], labels[idx]
    level = step / (RAMP * steps)
    if level >= 1.0:
        return x, y
    e_images, e_labels, e_levels = easy  # sorted by clutter level
    n_easy = int(round(BATCH * (1 - level)))
    upto = min(len(e_levels), max(200, int(np.searchsorted(e_levels, max(level, 0.1)))))
    eidx = rng.integers(0, upto, n_easy)
    return np.concatenate([e_images[eidx], x[n_easy:]]), np.concatenate([e_labels[eidx], y[n_easy:]])


def _save(model: torch.nn.Module, path: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"arch": ARCH, "kwargs": json.dumps(MODEL_KWARGS)})


def train(out_dir: Path = ASSET_DIR, steps: int = STEPS, n_scenes: int = TRAIN_SCENES) -> dict:
    """Train from scratch and write weights, checkpoints and a log into ``out_dir``."""
    from tqdm import tqdm

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = open(out_dir / "train_log.txt", "w")
    t0 = time.perf_counter()
    images, labels, _ = scenes.make_batch(seed=1, n=n_scenes)
    levels = np.sort(np.random.default_rng(SEED + 3).uniform(0.0, 1.0, EASY_SCENES))
    e_images, e_labels, _ = scenes.make_batch(seed=2, n=EASY_SCENES, clutter=levels)
    print(f"generated {n_scenes} + {EASY_SCENES} scenes in {time.perf_counter() - t0:.1f}s", file=log, flush=True)

    model = build_model()
    for block in model.blocks:  # the unfused path is the fast one under bfloat16 autocast on CPU
        block.attn.fused_attn = False
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.05)
    warm = min(100, max(1, steps // 20))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    checkpoints = sorted({min(c, steps) for c in CHECKPOINT_STEPS})
    ckpt_dir = out_dir / "checkpoints"
    ckpt_dir.mkdir(exist_ok=True)
    model.train()
    bar = tqdm(range(steps + 1), desc="training vitviz tiny")
    for step in bar:
        if step in checkpoints:
            _save(model, ckpt_dir / f"step{step:05d}.safetensors")
        if step == steps:
            break
        xb, yb = _curriculum_batch(step, steps, (images, labels), (e_images, e_labels, levels), rng)
        x = to_tensor(_augment(xb, rng))
        y = torch.from_numpy(yb)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
            print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e} "
                  f"t {time.perf_counter() - t0:.0f}s", file=log, flush=True)
    _save(model, out_dir / "model.safetensors")
    seconds = time.perf_counter() - t0
    print(f"trained {steps} steps in {seconds:.0f}s", file=log, flush=True)
    log.close()
    info = dict(arch=ARCH, kwargs=MODEL_KWARGS, pretrained_cfg=pretrained_cfg("model.safetensors"),
                objective="supervised cross-entropy on shape labels (not DINO)", train_seconds=round(seconds),
                steps=steps, batch=BATCH, train_scenes=n_scenes, easy_scenes=EASY_SCENES, ramp=RAMP,
                precision="bfloat16 autocast, float32 weights", checkpoint_steps=checkpoints,
                torch_threads=torch.get_num_threads())
    (out_dir / "train_info.json").write_text(json.dumps(info, indent=2))
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", action="store_true", help="only measure the shipped weights")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=ASSET_DIR)
    args = parser.parse_args()
    if not args.eval:
        info = train(args.out, steps=args.steps)
        print(json.dumps(info, indent=2))
    from vitviz.quality import measure, write_report

    figures = measure(args.out / "model.safetensors")
    write_report(args.out, figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
