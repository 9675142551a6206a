"""Test the map on the offline model's four scenes, scene by scene: what README.md and docs/test-the-map.md say.

    python -m scripts.faithful_scenes

For each scene the deletion view (`vitviz.views.show("deletion", ...)`, the page's own numbers: both curves, 11
points, occlusion in about 3×3 regions, :data:`SEEDS` seeded random orders) gives each map's deletion and insertion
area and the random orders' areas. Printed: a table per curve (each map's area, the random orders' mean ± standard
deviation and range), then the sentences the documents quote; ``tests/test_readme_claims.py`` recomputes them
and fails when the documents no longer say what the numbers do.
"""

from __future__ import annotations

import numpy as np

SCENES = ("scene_star", "scene_cross", "scene_ring", "scene_triangle")
SEEDS = 10
"""Random orders per scene: the most the page offers."""
MAPS = ("attention", "rollout", "relevance", "occlusion")
KINDS = ("deletion", "insertion")


def measure(seeds: int = SEEDS) -> dict[str, dict]:
    """Per scene: ``class`` (the model's answer), ``maps`` {map: {kind: area}}, ``random`` {kind: (seeds,) areas}."""
    from vitviz import assets, views
    from vitviz.core import images
    from vitviz.specs import registry

    view = views.VIEWS["deletion"]
    values = view.check({"model": registry.OFFLINE_KEY, "curves": "both", "seeds": seeds})
    out = {}
    for scene in SCENES:
        shown = views.show("deletion", images.load_rgb(assets.example(scene), images.INTAKE_SHORT_SIDE), values)
        auc = shown.numbers["auc"]
        randoms = [k for k in auc if k.startswith("random")]
        assert len(randoms) == seeds and set(MAPS) <= set(auc), sorted(auc)
        out[scene] = {"class": shown.numbers["class"],
                      "maps": {m: {k: float(auc[m][k]) for k in KINDS} for m in MAPS},
                      "random": {k: np.array([auc[r][k] for r in randoms], dtype=np.float64) for k in KINDS}}
    return out


def _better(kind: str, a: float, b: float) -> bool:
    """Whether area ``a`` is more faithful than ``b`` (deletion: lower; insertion: higher)."""
    return a < b if kind == "deletion" else a > b


def best_map(scene: dict, kind: str) -> str:
    maps = scene["maps"]
    return min(MAPS, key=lambda m: maps[m][kind] if kind == "deletion" else -maps[m][kind])


def random_beats_every_map(scene: dict, kind: str) -> bool:
    """Whether one of the random orders is more faithful than every map."""
    best = scene["maps"][best_map(scene, kind)][kind]
    lucky = scene["random"][kind].min() if kind == "deletion" else scene["random"][kind].max()
    return _better(kind, lucky, best)


def _name(scene: str) -> str:
    return scene.removeprefix("scene_")


def table(m: dict[str, dict], kind: str) -> str:
    """One Markdown table: a row per scene, each map's area (the most faithful in bold), the random orders'."""
    head = f"| {kind} area ({'lower' if kind == 'deletion' else 'higher'}: more faithful) | " + " | ".join(MAPS) \
        + f" | {SEEDS} random orders: mean ± sd (range) |"
    rows = [head, "|---" * (len(MAPS) + 2) + "|"]
    for scene, s in m.items():
        best = best_map(s, kind)
        cells = [(f"**{s['maps'][k][kind]:.3f}**" if k == best else f"{s['maps'][k][kind]:.3f}") for k in MAPS]
        r = s["random"][kind]
        rows.append(f"| {_name(scene)} ({s['class']}) | " + " | ".join(cells)
                    + f" | {r.mean():.3f} ± {r.std(ddof=1):.3f} ({r.min():.3f}–{r.max():.3f}) |")
    return "\n".join(rows)


def _scenes(names: list[str]) -> str:
    if not names:
        return "none of the scenes"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def claims(m: dict[str, dict]) -> dict[str, str]:
    """The sentences the documents quote: ``readme`` (README.md) and ``docs`` (docs/test-the-map.md)."""
    fastest = "; ".join(
        f"{_name(sc)}: {best_map(s, 'deletion')} {s['maps'][best_map(s, 'deletion')]['deletion']:.2f} (random "
        f"{s['random']['deletion'].mean():.2f} ± {s['random']['deletion'].std(ddof=1):.2f})" for sc, s in m.items())
    occ = [_name(sc) for sc, s in m.items() if best_map(s, "deletion") == "occlusion"]
    lucky = {k: [_name(sc) for sc, s in m.items() if random_beats_every_map(s, k)] for k in KINDS}
    mean = {k: {mp: float(np.mean([s["maps"][mp][k] for s in m.values()])) for mp in MAPS} for k in KINDS}
    lead = {k: best_map({"maps": {mp: {k: mean[k][mp]} for mp in MAPS}}, k) for k in KINDS}
    both = lead["deletion"] == lead["insertion"]
    means = (f"The four scenes' mean, where {lead['deletion']} has both the lowest deletion area "
             f"({mean['deletion'][lead['deletion']]:.2f}) and the highest insertion area "
             f"({mean['insertion'][lead['insertion']]:.2f})," if both else
             f"The four scenes' mean, where {lead['deletion']} has the lowest deletion area "
             f"({mean['deletion'][lead['deletion']]:.2f}) and {lead['insertion']} the highest insertion area "
             f"({mean['insertion'][lead['insertion']]:.2f}),")
    token = ("Occlusion is itself made by taking tokens out (each region dropped once), the very perturbation the "
             "curves apply, so the test partly favours it.")
    readme = (f"On the offline model's four scenes no map is the most faithful on every scene. Deletion falls "
              f"fastest ({SEEDS} random orders' mean ± sd beside it) on {fastest}; occlusion is the fastest on "
              f"{_scenes(occ)} only. On insertion one of the random orders rises faster than every map on "
              f"{_scenes(lucky['insertion'])}. {token}")
    docs = (f"{means} hides the scenes: no map is the most faithful on every one, deletion falls fastest for "
            f"occlusion on {_scenes(occ)} only, and one of the {SEEDS} random orders beats every map on insertion on "
            f"{_scenes(lucky['insertion'])} (on deletion on {_scenes(lucky['deletion'])}). {token}")
    below = [_name(sc) for sc, s in m.items() if s["maps"]["attention"]["insertion"] < s["random"]["insertion"].mean()]
    docs += (f" The class token's last-layer attention (the row the tour's attention step shows) is below the random "
             f"orders' mean on insertion on {_scenes(below)}: there the patches it ranks first bring the answer "
             "back more slowly than patches taken at random.")
    return {"readme": readme, "docs": docs}


def main() -> None:
    m = measure()
    for kind in KINDS:
        print(table(m, kind), end="\n\n")
    said = claims(m)
    print("README:", said["readme"], sep="\n", end="\n\n")
    print("docs:", said["docs"], sep="\n")


if __name__ == "__main__":
    main()
