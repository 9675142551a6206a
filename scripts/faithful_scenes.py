"""Test the map on the offline model's four scenes, scene by scene: what README.md and docs/test-the-map.md say.

    python -m scripts.faithful_scenes

The report card and the randomisation at their default settings (:func:`measure_cards`) come after the deletion
view's tables: the map each test ranks first, how alike the tests' rankings are, and each map's rank correlation
with the trained map once every part is re-drawn, over the draws.

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
MAPS = ("attention", "rollout", "relevance", "attnlrp", "legrad", "occlusion")
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
    head = f"| {kind} area ({'lower' if kind == 'deletion' else 'higher'}: more faithful) | " + " | ".join(_label(k) for k in MAPS) \
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


def _by_map(m: dict[str, dict], kind: str) -> str:
    """'AttnLRP on star and cross, relevance on triangle': the most faithful map of each scene, grouped."""
    won: dict[str, list[str]] = {}
    for sc, s in m.items():
        won.setdefault(_label(best_map(s, kind)), []).append(_name(sc))
    return ", ".join(f"{k} on {_scenes(v)}" for k, v in won.items())


def claims(m: dict[str, dict]) -> dict[str, str]:
    """The sentences the documents quote about the deletion view: ``readme`` (README.md) and ``docs``
    (docs/test-the-map.md)."""
    fastest = "; ".join(
        f"{_name(sc)}: {_label(best_map(s, 'deletion'))} {s['maps'][best_map(s, 'deletion')]['deletion']:.2f} (random "
        f"{s['random']['deletion'].mean():.2f} ± {s['random']['deletion'].std(ddof=1):.2f})" for sc, s in m.items())
    occ = [_name(sc) for sc, s in m.items() if best_map(s, "deletion") == "occlusion"]
    lucky = {k: [_name(sc) for sc, s in m.items() if random_beats_every_map(s, k)] for k in KINDS}
    mean = {k: {mp: float(np.mean([s["maps"][mp][k] for s in m.values()])) for mp in MAPS} for k in KINDS}
    lead = {k: best_map({"maps": {mp: {k: mean[k][mp]} for mp in MAPS}}, k) for k in KINDS}
    readme = (f"On the offline model's four scenes no map is the most faithful on every scene: deletion falls fastest "
              f"for {_by_map(m, 'deletion')}, and on insertion one of the {SEEDS} random orders rises faster than "
              f"every map on {_scenes(lucky['insertion'])}.")
    means = (f"The four scenes' mean, where {_label(lead['deletion'])} has the lowest deletion area "
             f"({mean['deletion'][lead['deletion']]:.2f}) and {_label(lead['insertion'])} the highest insertion area "
             f"({mean['insertion'][lead['insertion']]:.2f}),")
    token = ("Occlusion is itself made by taking tokens out (each region dropped once), the very perturbation the "
             "curves apply, so the test partly favours it")
    docs = (f"{means} hides the scenes. Deletion falls fastest on {fastest}. One of the {SEEDS} random orders beats "
            f"every map on insertion on {_scenes(lucky['insertion'])} (on deletion on {_scenes(lucky['deletion'])}). "
            f"{token}; it has the lowest deletion area on {_scenes(occ)}.")
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
    print("docs:", said["docs"], sep="\n", end="\n\n")
    cards = measure_cards()
    print(report_table(cards), randomise_table(cards), sep="\n\n", end="\n\n")
    said = claims_cards(cards)
    print("README:", said["readme"], sep="\n", end="\n\n")
    print("docs:", said["docs"], sep="\n")


if __name__ == "__main__":
    main()


# ---- the report card and the randomisation, scene by scene (issue 70) -----------------------------------------

def measure_cards() -> dict[str, dict]:
    """Per scene, at the views' default settings (what the page shows first): ``report`` (the report card with each
    of its baselines: {baseline: its numbers}) and ``randomise`` (the randomisation's numbers)."""
    from vitviz import assets, views
    from vitviz.core import images
    from vitviz.specs import registry

    out = {}
    for scene in SCENES:
        rgb = images.load_rgb(assets.example(scene), images.INTAKE_SHORT_SIDE)
        report = {b: views.show("report", rgb, views.VIEWS["report"].check(
            {"model": registry.OFFLINE_KEY, "baseline": b})).numbers for b in ("mean", "road")}
        randomise = views.show("randomise", rgb, views.VIEWS["randomise"].check(
            {"model": registry.OFFLINE_KEY})).numbers
        out[scene] = {"report": report, "randomise": randomise}
    return out


def _first(numbers: dict, test: str) -> str:
    ranks = numbers["rank"][test]
    return min(ranks, key=lambda k: ranks[k])


def _label(name: str) -> str:
    return {"attnlrp": "AttnLRP", "legrad": "LeGrad"}.get(name, name)


def report_table(cards: dict[str, dict]) -> str:
    """A row per scene: the map each test ranks first (its gain over random) and how alike the two rankings are."""
    rows = ["| scene (class) | token dropping: first (gain) | pixels, mean: first (gain) | pixels, ROAD: first (gain) "
            "| ρ tokens–mean | ρ tokens–ROAD |", "|---|---|---|---|---|---|"]
    for scene, c in cards.items():
        mean, road = c["report"]["mean"], c["report"]["road"]
        cells = []
        for numbers, test in ((mean, "token dropping"), (mean, "pixels (mean)"), (road, "pixels (road)")):
            best = _first(numbers, test)
            gain = numbers["gain"][test][best]
            cells.append(f"{_label(best)} ({'no gain defined' if gain is None else format(gain, '+.3f')})")
        rows.append(f"| {_name(scene)} ({mean['class']}) | " + " | ".join(cells)
                    + f" | {mean['spearman']:.2f} | {road['spearman']:.2f} |")
    return "\n".join(rows)


def randomise_table(cards: dict[str, dict]) -> str:
    """A row per scene: each map's Spearman correlation with the trained map at full randomisation (mean ± sd over
    the draws) and its verdict: passes all three scores, fails one (named), or is too close to call on one (the draws
    on both sides of vitviz's threshold)."""
    names = list(next(iter(cards.values()))["randomise"]["passes"])
    rows = ["| scene | " + " | ".join(_label(n) for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    for scene, c in cards.items():
        r = c["randomise"]
        cells = []
        for n in names:
            last = np.asarray(r["spearman"][n], dtype=np.float64)[-1]  # (draws,): every part re-drawn
            said = r["verdicts"][n]  # pass, fail or too close to call (the draws on both sides of a threshold)
            worst = "fail" if "fail" in said.values() else "too close to call"
            mark = "passes" if said["all"] == "pass" else ("fails " if worst == "fail" else "too close to call on ") \
                + "/".join(k for k in ("mprt", "smprt", "emprt") if said[k] == worst).replace("mprt", "MPRT")
            cells.append(f"{last.mean():.2f} ± {last.std(ddof=1):.2f}, {mark}")
        rows.append(f"| {_name(scene)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


TESTS = ("token dropping", "pixels (mean)", "pixels (road)")


def firsts(card: dict) -> dict[str, str]:
    """The map each of the report card's three tests ranks first on one scene."""
    return {t: _first(card["report"]["road" if t == "pixels (road)" else "mean"], t) for t in TESTS}


def claims_cards(cards: dict[str, dict]) -> dict[str, str]:
    """The sentences README.md (what holds on every scene) and docs/test-the-map.md quote about the report card
    and the randomisation."""
    agree = [_name(sc) for sc, c in cards.items() if len(set(firsts(c).values())) == 1]
    rhos = [c["report"][b]["spearman"] for c in cards.values() for b in ("mean", "road")]
    names = list(next(iter(cards.values()))["randomise"]["passes"])
    always = [_label(n) for n in names if all(c["randomise"]["verdicts"][n]["all"] == "pass" for c in cards.values())]
    draws = len(next(iter(cards.values()))["randomise"]["draws"])
    tests = ("On " + ("none" if not agree else "only " + _scenes(agree)) + " of the offline model's four scenes "
             "do token dropping, pixels filled with the mean and ROAD's imputation rank the same map first (the "
             f"rankings' Spearman ρ from {min(rhos):.2f} to {max(rhos):.2f})")
    passing = (f"{'only ' if len(always) == 1 else ''}{_scenes(always)} "
               f"pass{'es' if len(always) == 1 else ''} all three randomisation scores on every scene in all "
               f"{draws} draws" if always else f"no map passes all three randomisation scores on every scene in all "
               f"{draws} draws")
    readme = f"{tests}, and {passing}."
    token_first = {}
    for sc, c in cards.items():
        token_first.setdefault(_label(firsts(c)["token dropping"]), []).append(_name(sc))
    lead = max(token_first, key=lambda k: len(token_first[k]))
    docs = (f"Token dropping ranks {lead} first on {_scenes(token_first[lead])}; the pixel tests "
            + ("never agree with it on the same scene" if not any(
                firsts(c)["token dropping"] == firsts(c)[t] for c in cards.values() for t in TESTS[1:])
               else "agree with it on " + _scenes([_name(sc) for sc, c in cards.items() if any(
                   firsts(c)["token dropping"] == firsts(c)[t] for t in TESTS[1:])]))
            + ".")
    return {"readme": readme, "docs": docs}
