"""Train the embedded offline ViT on generated shape scenes.

    python -m vitviz.embedded.train            # trains, writes assets/tiny/, prints the quality figures
    python -m vitviz.embedded.train --eval     # only measures the shipped weights

Objective: supervised, not DINO. The class token learns the shape label
(cross-entropy), and every patch token learns what covers it, the shape's
class or background (token labelling, as in LV-ViT's "all tokens matter"),
through a linear head used only in training. The scene masks are those patch
labels. The class token's attention is never told where the object is: it learns
where to look because object tokens now carry the class and background tokens
say "background". One thing is asked of that attention, without any mask: from
``SPREAD_FROM`` of the steps on, a last-block head whose class-token attention is
spread over more than about ``ATTENTION_SPREAD`` of the 64 patches pays a penalty
(:func:`spread_penalty`). Without it one head settled into looking evenly at the
whole picture (with token labelling even a plain average of all tokens carries
the class), which held the head-mean lift down; the penalty only rules that out,
and the head then chooses for itself what to look at.

A DINO step (EMA teacher pass, several crops per image) costs several times a
labelled step, and the labelled run alone fills the 30-minute
budget on two CPU cores, so we train with labels and say so wherever the model
appears. The architecture is a real ViT (timm ``VisionTransformer``: patch
tokens, class token, learned position embeddings), tiny enough to train here.

Two things make the budget go further without changing the task or the model:
a curriculum (the first ``RAMP`` of the steps mix in calmer scenes, from a flat
background up to full clutter) and bfloat16 autocast with timm's unfused
attention (on CPUs with AMX a step runs about twice as fast as in float32, see
benchmarks/train_step.py;
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

from vitviz import assets
from vitviz.embedded import scenes
from vitviz.models import hooks

ASSET_DIR = assets.TINY

ARCH = "vit_tiny_patch16_224"
MODEL_KWARGS = dict(img_size=64, patch_size=8, embed_dim=96, depth=4, num_heads=3, num_classes=len(scenes.CLASSES))
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
TOKEN_LABEL_WEIGHT = 1.0
"""Weight of the per-patch loss (token labelling) next to the class token's loss."""
ATTENTION_SPREAD = 40
"""How many patches' worth of spread a last-block class-token head may have before it is penalised."""
ATTENTION_SPREAD_WEIGHT = 0.5
"""Weight of that penalty (see :func:`spread_penalty`); 0 switches it off."""
SPREAD_FROM = 0.35
"""Share of the steps after which the penalty applies (before it, the heads find their roles freely)."""
CHECKPOINT_STEPS = (0, 300, 800, 1600, 3000, STEPS)
OBJECTIVE = ("supervised, not DINO: cross-entropy on the shape label from the class token, plus token labelling "
             "(each patch token predicts the shape covering it, or background, through a training-only head), plus, "
             f"after the first {SPREAD_FROM:.0%} of the steps, a penalty on any last-block class-token head that "
             f"spreads its attention over more than about {ATTENTION_SPREAD} of the "
             f"{(MODEL_KWARGS['img_size'] // MODEL_KWARGS['patch_size']) ** 2} patches (no mask goes into it)")


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


def augment(images: np.ndarray, cover: np.ndarray | None, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """Random flips and 90-degree turns of images (B, H, W, 3) and, when given, their patch cover (B, gh, gw) alike.

    The shape classes are closed under these moves, and so is the patch grid.
    """
    images = images.copy()
    cover = None if cover is None else cover.copy()
    for i in range(len(images)):
        img = images[i]
        cov = None if cover is None else cover[i]
        if rng.random() < 0.5:
            img = img[:, ::-1]
            cov = None if cov is None else cov[:, ::-1]
        turns = int(rng.integers(4))
        images[i] = np.rot90(img, turns)
        if cover is not None:
            cover[i] = np.rot90(cov, turns)
    return images, cover


def schedule(opt: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over min(100, steps / 20) steps, then cosine decay to 0 at ``steps``."""
    warm = min(100, max(1, steps // 20))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))


def token_targets(labels: torch.Tensor, cover: torch.Tensor, classes: int) -> torch.Tensor:
    """Soft per-patch labels (B, N, classes + 1) from labels (B,) and patch cover (B, N).

    A patch is its shape's class in proportion to how much of it the shape covers, and
    background (the last column) for the rest.
    """
    target = torch.zeros(*cover.shape, classes + 1)
    target.scatter_(2, labels.view(-1, 1, 1).expand(-1, cover.shape[1], 1), cover.unsqueeze(2))
    target[:, :, classes] = 1.0 - cover
    return target


def spread_penalty(cls_attn: torch.Tensor, spread: float | None = None) -> torch.Tensor:
    """Mean excess entropy of class-token attention maps cls_attn (B, H, N) over the patches.

    Each map is renormalised over the N patches; its entropy (nats) above log(spread) is the
    penalty, 0 below. A head spread evenly over n patches has entropy log(n), so this only
    stops a head from looking at (nearly) everything. It says nothing about *where* to look:
    no mask or label goes in.
    """
    spread = ATTENTION_SPREAD if spread is None else spread
    p = cls_attn / cls_attn.sum(-1, keepdim=True).clamp_min(1e-12)
    entropy = -(p * p.clamp_min(1e-12).log()).sum(-1)  # (B, H)
    return F.relu(entropy - math.log(spread)).mean()


def step_loss(model: torch.nn.Module, token_head: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
              cover: torch.Tensor, spread_weight: float | None = None) -> torch.Tensor:
    """The training loss for images x (B, 3, H, W), labels y (B,) and patch cover (B, N).

    Cross-entropy of the class token's logits (B, K) against y, plus ``TOKEN_LABEL_WEIGHT``
    times the token-labelling loss: ``token_head`` maps each patch token (B, N, D) to K + 1
    logits, scored against :func:`token_targets`, plus ``spread_weight`` (default
    ``ATTENTION_SPREAD_WEIGHT``) times :func:`spread_penalty` of the last block's class-token
    attention (B, H, N), read through :func:`vitviz.models.hooks.record_attention`.
    Forward under bfloat16 autocast, loss in float32.
    """
    last = len(model.blocks) - 1
    got: dict[str, torch.Tensor] = {}

    def keep_last(layer: int, attn: torch.Tensor) -> None:
        if layer == last:
            got["cls"] = attn[:, :, 0, model.num_prefix_tokens:]  # (B, H, N), with gradient

    with torch.autocast("cpu", dtype=torch.bfloat16), hooks.record_attention(model, keep_last):
        tokens = model.forward_features(x)  # (B, prefix + N, D)
        logits = model.forward_head(tokens)  # (B, K) from the class token
        patch_logits = token_head(tokens[:, model.num_prefix_tokens:])  # (B, N, K + 1)
    loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1)
    target = token_targets(y, cover, token_head.out_features - 1)
    loss = loss + TOKEN_LABEL_WEIGHT * F.cross_entropy(patch_logits.float().flatten(0, 1), target.flatten(0, 1))
    spread_weight = ATTENTION_SPREAD_WEIGHT if spread_weight is None else spread_weight
    if spread_weight:
        loss = loss + spread_weight * spread_penalty(got["cls"].float())
    return loss


def _curriculum_batch(step: int, steps: int, hard: tuple[np.ndarray, ...], easy: tuple[np.ndarray, ...],
                      rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One batch for ``step``: the same arrays as ``hard``, BATCH rows each.

    ``hard`` holds the fully cluttered scenes' arrays (images, labels, patch cover); ``easy``
    holds the calm scenes' arrays in the same order, sorted by clutter level, plus the levels
    as the last entry. During the first ``RAMP`` of training a shrinking share of the batch
    comes from the calm scenes, and only from those no busier than the current level;
    afterwards all come from the fully cluttered scenes the model is measured on.
    """
    idx = rng.integers(0, len(hard[0]), BATCH)
    batch = [a[idx] for a in hard]
    level = step / (RAMP * steps)
    if level >= 1.0:
        return tuple(batch)
    *e_arrays, e_levels = easy
    n_easy = int(round(BATCH * (1 - level)))
    upto = min(len(e_levels), max(200, int(np.searchsorted(e_levels, max(level, 0.1)))))
    eidx = rng.integers(0, upto, n_easy)
    return tuple(np.concatenate([e[eidx], b[n_easy:]]) for e, b in zip(e_arrays, batch))


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
    spread_from = math.ceil(SPREAD_FROM * steps)  # first step with the spread penalty
    with open(out_dir / "train_log.txt", "w") as log:
        t0 = time.perf_counter()
        patch = MODEL_KWARGS["patch_size"]
        images, labels, masks = scenes.make_batch(seed=1, n=n_scenes)
        hard = (images, labels, scenes.patch_cover(masks, patch))
        levels = np.sort(np.random.default_rng(SEED + 3).uniform(0.0, 1.0, EASY_SCENES))
        e_images, e_labels, e_masks = scenes.make_batch(seed=2, n=EASY_SCENES, clutter=levels)
        easy = (e_images, e_labels, scenes.patch_cover(e_masks, patch), levels)
        print(f"generated {n_scenes} + {EASY_SCENES} scenes in {time.perf_counter() - t0:.1f}s", file=log, flush=True)

        model = build_model()
        for block in model.blocks:  # the unfused path is the fast one under bfloat16 autocast on CPU
            block.attn.fused_attn = False
        classes = MODEL_KWARGS["num_classes"]
        token_head = torch.nn.Linear(MODEL_KWARGS["embed_dim"], classes + 1)  # training only, not shipped
        params = [*model.parameters(), *token_head.parameters()]
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.05)
        sched = schedule(opt, steps)
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
            xb, yb, cb = _curriculum_batch(step, steps, hard, easy, rng)
            xb, cb = augment(xb, cb, rng)
            spread_weight = ATTENTION_SPREAD_WEIGHT if step >= spread_from else 0.0
            loss = step_loss(model, token_head, to_tensor(xb), torch.from_numpy(yb), torch.from_numpy(cb).flatten(1),
                             spread_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
                print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e} "
                      f"t {time.perf_counter() - t0:.0f}s", file=log, flush=True)
        _save(model, out_dir / "model.safetensors")
        seconds = time.perf_counter() - t0
        print(f"trained {steps} steps in {seconds:.0f}s", file=log, flush=True)
    info = dict(arch=ARCH, kwargs=MODEL_KWARGS, pretrained_cfg=pretrained_cfg("model.safetensors"),
                objective=OBJECTIVE, token_label_weight=TOKEN_LABEL_WEIGHT,
                attention_spread=ATTENTION_SPREAD, attention_spread_weight=ATTENTION_SPREAD_WEIGHT,
                spread_from_step=spread_from, train_seconds=round(seconds),
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
    from vitviz.embedded.quality import measure, write_report

    figures = measure(args.out / "model.safetensors")
    write_report(args.out, figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
