"""Write the example gallery into assets/examples/ (run once; the files are committed).

    python scripts/make_examples.py

Photographs come from scikit-image's bundled data (a dev dependency);
everything else is drawn here. Sources and licences: assets/README.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from vitviz import assets
from vitviz.core.patches import TOY_VALUES
from vitviz.embedded import scenes

OUT = assets.EXAMPLES
PHOTOS = {"cat.png": "chelsea.png", "coffee.png": "coffee.png", "astronaut.png": "astronaut.png",
          "rocket.jpg": "rocket.jpg"}
SCENE_SEEDS = {"scene_star.png": (11, 3), "scene_ring.png": (12, 5), "scene_triangle.png": (13, 2),
               "scene_cross.png": (14, 4)}


def main() -> None:
    import skimage

    OUT.mkdir(parents=True, exist_ok=True)
    data = Path(skimage.__file__).parent / "data"
    for name, src in PHOTOS.items():
        shutil.copyfile(data / src, OUT / name)
    toy = (np.kron(TOY_VALUES, np.ones((4, 4))) * 255).round().astype(np.uint8)
    Image.fromarray(toy, mode="L").save(OUT / "toy_8x8.png")
    for name, (seed, label) in SCENE_SEEDS.items():
        Image.fromarray(scenes.make_scene(10_000_000 + seed, label=label).image).save(OUT / name)
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
