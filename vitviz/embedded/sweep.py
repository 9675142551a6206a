"""Data efficiency, measured: the small CNN and the tiny ViT trained on 1k ... 64k generated scenes.

    python -m vitviz.embedded.sweep            # trains all runs, writes vitviz/assets/sweep/, ~40 min on 2 cores
    python -m vitviz.embedded.sweep --eval     # re-measures the shipped checkpoints, compares with results.json

Both models get the same recipe, so the only differences are the architecture and the number of distinct
training scenes: the same fully cluttered scenes (the first n of one seeded list, so smaller sets are inside
larger ones), the same flips and quarter turns, AdamW at lr 1e-3 with weight decay 0.05, warm-up then cosine,
label smoothing 0.1, batch 128, and the same fixed number of steps (``STEPS``): a fixed compute budget, so the
1k-scene runs see each scene about 250 times and the 64k-scene runs about 4 times. The ViT is the embedded
model's architecture (:mod:`vitviz.embedded.train`) trained on the class label only (no token labelling, no
curriculum); the CNN is :class:`vitviz.models.smallcnn.SmallCNN` (5% more parameters).

Accuracy is measured on ``TEST_SCENES`` scenes never trained on (seed 777, as the embedded model's quality
figures). With n = 2000 test scenes the binomial standard error of an accuracy p is sqrt(p(1-p)/n), at most
1.1 percentage points: differences smaller than about 2 points between two runs are within sampling noise.
``--eval`` loads the shipped float16 weights, as the sweep itself did after saving them, so it reproduces
the shipped accuracies up to floating-point summation order (``EVAL_TOLERANCE``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vitviz import assets
from vitviz.embedded import scenes, train
from vitviz.models import smallcnn as cnn

OUT = assets.SWEEP
SIZES = (1_000, 4_000, 16_000, 64_000)
MODELS = ("cnn", "vit")
STEPS = 2_000
BATCH = 128
LR = 1e-3
SEED = 0
DATA_SEED = 11
"""Seed of the training scenes (the embedded ViT used 1 and 2; the test set is 777)."""
TEST_SEED = 777
TEST_SCENES = 2_000
TRAIN_PROBE = 2_000
"""How many of a run's own training scenes are scored, to show how well it fits what it saw."""
EVAL_TOLERANCE = 0.002
"""``--eval`` must reproduce each shipped accuracy within this (one test scene is 0.0005)."""


def build(kind: str) -> torch.nn.Module:
    """A fresh model, random weights: ``"cnn"`` or ``"vit"``."""
    if kind == "cnn":
        return cnn.SmallCNN()
    model = train.build_model()
    for block in model.blocks:  # unfused attention is the fast path under bfloat16 autocast on CPU
        block.attn.fused_attn = False
    return model


def checkpoint(kind: str, n: int, out: Path = OUT) -> Path:
    return out / f"{kind}_{n // 1000}k.safetensors"


def save(model: torch.nn.Module, path: Path) -> None:
    """Float tensors as float16 (the BN step counters stay integers)."""
    from safetensors.torch import save_file

    state = {k: (v.detach().to(torch.float16) if v.is_floating_point() else v.detach()).contiguous()
             for k, v in model.state_dict().items()}
    save_file(state, str(path))


def load(kind: str, path: Path) -> torch.nn.Module:
    """A shipped sweep checkpoint, float32, in eval mode."""
    from safetensors.torch import load_file

    if kind == "cnn":
        return cnn.load(path)
    model = build(kind)
    state = {k: v.float() if v.is_floating_point() else v for k, v in load_file(str(path)).items()}
    model.load_state_dict(state)
    return model.eval()


def accuracy(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, batch: int = 250) -> float:
    """Share of (B, H, W, 3) images whose top logit is the label, float32, no autocast."""
    right = 0
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            logits = model(train.to_tensor(images[i:i + batch]))
            right += int((logits.argmax(1).numpy() == labels[i:i + batch]).sum())
    return right / len(images)


def train_one(kind: str, images: np.ndarray, labels: np.ndarray, steps: int = STEPS) -> torch.nn.Module:
    """Train a fresh ``kind`` model for ``steps`` batches drawn from (n, H, W, 3) images and (n,) labels."""
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = build(kind).train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.05)
    sched = train.schedule(opt, steps)
    for _ in range(steps):
        idx = rng.integers(0, len(images), BATCH)
        x = train.to_tensor(train.augment(images[idx], None, rng)[0])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), torch.from_numpy(labels[idx]), label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return model.eval()


def preprocessing() -> dict:
    """What the models expect: the embedded ViT's input size, mean and std, and the class names."""
    size = train.MODEL_KWARGS["img_size"]
    return dict(input_size=[3, size, size], mean=list(train.MEAN), std=list(train.STD), crop_pct=1.0,
                interpolation="bilinear", label_names=list(scenes.CLASSES))


def test_set() -> tuple[np.ndarray, np.ndarray]:
    images, labels, _ = scenes.make_batch(TEST_SEED, TEST_SCENES)
    return images, labels


def run(out: Path = OUT, sizes: tuple[int, ...] = SIZES, steps: int = STEPS) -> dict:
    """The whole sweep: every model at every size; writes checkpoints, results.json and a log into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(out / "sweep_log.txt", "w") as log:
        return _run(out, sizes, steps, log, t0)


def _run(out: Path, sizes: tuple[int, ...], steps: int, log, t0: float) -> dict:
    images, labels, _ = scenes.make_batch(DATA_SEED, max(sizes))
    test_images, test_labels = test_set()
    print(f"generated {max(sizes)} + {TEST_SCENES} scenes in {time.perf_counter() - t0:.0f}s", file=log, flush=True)
    runs = []
    for n in sizes:
        for kind in MODELS:
            t = time.perf_counter()
            model = train_one(kind, images[:n], labels[:n], steps)
            path = checkpoint(kind, n, out)
            save(model, path)
            model = load(kind, path)  # measure what ships
            probe = min(n, TRAIN_PROBE)
            row = dict(model=kind, scenes=n, parameters=cnn.parameter_count(model),
                       test_accuracy=accuracy(model, test_images, test_labels),
                       train_accuracy=accuracy(model, images[:probe], labels[:probe]),
                       train_seconds=round(time.perf_counter() - t), file=path.name)
            runs.append(row)
            print(json.dumps(row), file=log, flush=True)
    seconds = round(time.perf_counter() - t0)
    results = dict(steps=steps, batch=BATCH, lr=LR, seed=SEED, data_seed=DATA_SEED, test_seed=TEST_SEED,
                   test_scenes=TEST_SCENES, train_probe=TRAIN_PROBE, eval_tolerance=EVAL_TOLERANCE,
                   total_seconds=seconds, torch_threads=torch.get_num_threads(),
                   precision="bfloat16 autocast in training, float16 weights shipped, float32 evaluation",
                   preprocessing=preprocessing(),
                   runs=runs)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(f"sweep done in {seconds}s", file=log, flush=True)
    return results


def results(out: Path = OUT) -> dict:
    """The shipped sweep's results.json."""
    return json.loads((out / "results.json").read_text())


def evaluate(out: Path = OUT) -> list[dict]:
    """Re-measure every shipped checkpoint on the test scenes: one row per run with shipped and measured."""
    shipped = results(out)
    test_images, test_labels = test_set()
    rows = []
    for r in shipped["runs"]:
        measured = accuracy(load(r["model"], out / r["file"]), test_images, test_labels)
        rows.append(dict(model=r["model"], scenes=r["scenes"], shipped=r["test_accuracy"], measured=measured,
                         agrees=abs(measured - r["test_accuracy"]) <= EVAL_TOLERANCE))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", action="store_true", help="only re-measure the shipped checkpoints")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.eval:
        rows = evaluate(args.out)
        print(f"{'model':6} {'scenes':>7} {'shipped':>8} {'measured':>9}")
        for r in rows:
            print(f"{r['model']:6} {r['scenes']:>7} {r['shipped']:>8.4f} {r['measured']:>9.4f}"
                  f"{'' if r['agrees'] else '  DIFFERS'}")
        raise SystemExit(0 if all(r["agrees"] for r in rows) else 1)
    print(json.dumps(run(args.out, steps=args.steps), indent=2))


if __name__ == "__main__":
    main()
