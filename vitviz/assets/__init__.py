"""The files that ship inside the package: example pictures, the embedded model and its checkpoints, the theme.

They live in the package itself, so an installed vitviz finds them from any working folder. This is the lowest
floor of the house: paths and file listings only (nothing heavy is imported).
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent
EXAMPLES = ROOT / "examples"
TINY = ROOT / "tiny"
"""The embedded offline model: weights, training-timeline checkpoints, training log, model card, quality."""
SWEEP = ROOT / "sweep"
"""The data-efficiency sweep: the small CNN and the tiny ViT at each training-set size (checkpoints, results)."""
THEME = ROOT / "theme.css"
ORT = ROOT / "ort"
"""ONNX Runtime Web (npm ``onnxruntime-web``, MIT; ort/README.md says which version and how to refresh it): what the
device path runs in the browser, served by the app itself."""
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm",
             "ort.webgpu.min.js", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")
"""The WebAssembly build (the first three) and the WebGPU build (which runs WebAssembly too, a browser with a GPU
adapter loads it instead)."""


def tiny_info() -> dict:
    """tiny/train_info.json: how the embedded model was built and trained."""
    return json.loads((TINY / "train_info.json").read_text())


def sweep_results() -> dict:
    """sweep/results.json: the data-efficiency sweep's settings, accuracies and the models' preprocessing."""
    return json.loads((SWEEP / "results.json").read_text())


def tiny_checkpoints() -> list[tuple[int, Path]]:
    """(training step, file) of the shipped training-timeline checkpoints, in order."""
    files = sorted((TINY / "checkpoints").glob("step*.safetensors"))
    return [(int(f.stem[4:]), f) for f in files]


def example(name: str) -> Path:
    """An example picture by its name in a link (the file name without extension), or ``KeyError``."""
    for path in sorted(EXAMPLES.iterdir()):
        if path.stem == name and path.suffix in (".png", ".jpg"):
            return path
    raise KeyError(name)


def thumbnail(name: str) -> Path:
    """A small copy of the example picture ``name`` (a file name) for the example lists: thumbs/<stem>.jpg, 160 px
    short side, for the photos; the picture itself when it is that small already (the scenes). The page shows
    these; a click loads the example itself."""
    small = EXAMPLES / "thumbs" / (Path(name).stem + ".jpg")
    return small if small.exists() else EXAMPLES / name


def example_names() -> list[str]:
    """The example pictures' names (file names without extension)."""
    return [p.stem for p in sorted(EXAMPLES.iterdir()) if p.suffix in (".png", ".jpg")]
