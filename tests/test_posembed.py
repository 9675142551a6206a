"""Position embeddings: the seed's numbers, learned tables with prefix rows dropped, resampling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vitviz.core import posembed


def test_seed_toy_dot_products():
    """2×2 grid, d_model = 8: 4.00 self, 3.54 one coordinate apart, 3.08 diagonal."""
    sim = posembed.similarity(posembed.sincos_2d(2, 2, 8), "dot")
    assert np.round(sim, 2).tolist() == [[4.0, 3.54, 3.54, 3.08], [3.54, 4.0, 3.08, 3.54],
                                         [3.54, 3.08, 4.0, 3.54], [3.08, 3.54, 3.54, 4.0]]
    # by hand: each half contributes cos(1) + cos(1/100) when its coordinate differs by one
    one = 2 + np.cos(1) + np.cos(0.01)
    assert sim[0, 1] == pytest.approx(one) and sim[0, 3] == pytest.approx(2 * (np.cos(1) + np.cos(0.01)))


def test_sincos_1d_formula():
    pe = posembed.sincos_1d(50, 16)
    t, i = 7, 3
    assert pe[t, 2 * i] == pytest.approx(np.sin(t / 10000 ** (2 * i / 16)))
    assert pe[t, 2 * i + 1] == pytest.approx(np.cos(t / 10000 ** (2 * i / 16)))
    np.testing.assert_allclose((pe ** 2).sum(1), 8.0)  # |PE|² = dim / 2
    # dot products depend only on the offset between positions
    d = pe @ pe.T
    assert d[3, 8] == pytest.approx(d[20, 25]) and d[3, 8] == pytest.approx(d[8, 3])


def test_sincos_2d_halves_are_rows_and_columns():
    pe = posembed.sincos_2d(3, 5, 16).reshape(3, 5, 16)
    np.testing.assert_allclose(pe[1, 0, :8], pe[1, 4, :8])
    np.testing.assert_allclose(pe[0, 2, 8:], pe[2, 2, 8:])
    np.testing.assert_allclose(pe[2, 3, :8], posembed.sincos_1d(3, 8)[2])
    with pytest.raises(ValueError):
        posembed.sincos_2d(2, 2, 6)


def test_cosine_similarity_guards_zero_rows():
    s = posembed.similarity(np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]]), "cosine")
    assert s[0, 2] == pytest.approx(1.0) and s[1].tolist() == [0.0, 0.0, 0.0]


def test_learned_grid_timm_drops_class_and_registers():
    import timm

    m = timm.create_model("vit_small_patch16_224", pretrained=False, img_size=64, reg_tokens=4,
                          no_embed_class=False, class_token=True)
    prefix = m.num_prefix_tokens
    assert prefix == 5 and m.pos_embed.shape[1] == 5 + 16
    grid = posembed.learned_grid(m)
    assert grid.shape == (4, 4, 384)
    np.testing.assert_allclose(grid.reshape(16, -1), m.pos_embed[0, prefix:].detach().numpy())


def test_learned_grid_timm_no_embed_class():
    import timm

    m = timm.create_model("vit_small_patch16_224", pretrained=False, img_size=64, reg_tokens=4, no_embed_class=True)
    assert m.pos_embed.shape[1] == 16  # prefix tokens carry no position here
    np.testing.assert_allclose(posembed.learned_grid(m).reshape(16, -1), m.pos_embed[0].detach().numpy())


def test_learned_grid_transformers(dino_s8_dir, dinov2_reg_dir):
    from transformers import AutoModel

    vit = AutoModel.from_pretrained(dino_s8_dir)
    g = posembed.learned_grid(vit)
    assert g.shape == (28, 28, 384)
    np.testing.assert_allclose(g.reshape(784, -1), vit.embeddings.position_embeddings[0, 1:].detach().numpy())
    reg = AutoModel.from_pretrained(dinov2_reg_dir)
    assert posembed.learned_grid(reg).shape == (4, 4, 64)  # registers have no position rows


def test_resample_same_size_is_identity_and_matches_torch():
    grid = np.random.default_rng(0).standard_normal((14, 14, 8)).astype(np.float32)
    np.testing.assert_allclose(posembed.resample_grid(grid, 14, 14), grid, atol=1e-5)
    out = posembed.resample_grid(grid, 20, 20)
    ref = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=(20, 20),
                                          mode="bicubic", align_corners=False, antialias=True)[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5)
    plain = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=(20, 20),
                                            mode="bicubic", align_corners=False)[0].permute(1, 2, 0).numpy()
    assert np.abs(out - plain).max() > 1e-3  # timm's antialiased bicubic differs from transformers' plain one


def test_resampled_sinusoid_stays_smooth():
    grid = posembed.sincos_2d(14, 14, 64).reshape(14, 14, 64)
    out = posembed.resample_grid(grid, 20, 20)
    sim = posembed.similarity(out.reshape(400, 64), "cosine").reshape(20, 20, 20, 20)
    centre = sim[10, 10]
    assert centre.argmax() == 10 * 20 + 10 and centre[10, 11] > centre[10, 15] > centre[10, 19]


def test_neighbourhood_by_hand():
    grid = np.array([[[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]]])  # 1×3: the two ends equal, the middle at 45°
    near = posembed.neighbourhood(grid)
    assert near["next_door"] == pytest.approx(np.sqrt(0.5))
    assert near["all"] == pytest.approx((2 * np.sqrt(0.5) + 1) / 3)
    assert near["same_ring"] == pytest.approx(1.0)  # the two ends, both one step from the centre
    assert posembed.neighbourhood(np.ones((1, 2, 3)))["same_ring"] is None  # no such pair


def test_sinusoidal_2d_is_grid_like():
    near = posembed.neighbourhood(posembed.sincos_2d(14, 14, 64).reshape(14, 14, 64))
    # 0.98 for neighbours, 0.78 for any pair, and rings are nothing special
    assert near["next_door"] > near["all"] + 0.15 and abs(near["same_ring"] - near["all"]) < 0.05


def test_rotary_scores_depend_only_on_the_offset_and_match_the_hand_formula():
    """For equal vectors, each rotated pair (a, b) contributes (a² + b²)·cos(Δ·θᵢ). With x = 1/√D everywhere that
    is (2/D)·[Σᵢ cos(dr·θᵢ) + Σᵢ cos(dc·θᵢ)], θᵢ = base^(−2i/(D/2))."""
    dim, reach, base = 16, 4, 100.0
    table = posembed.rope_offset_scores(dim, reach, base)
    theta = base ** (-np.arange(0, dim // 2, 2) / (dim // 2))
    off = np.arange(-reach, reach + 1)
    by_hand = (2 / dim) * (np.cos(off[:, None, None] * theta).sum(-1) + np.cos(off[None, :, None] * theta).sum(-1))
    np.testing.assert_allclose(table, by_hand, atol=1e-12)
    assert table[reach, reach] == pytest.approx(1.0)  # a unit vector against itself
    # any query place: rotate a seeded vector at two different places, compare dot products by offset
    x = np.random.default_rng(0).standard_normal(dim)
    rows, cols = np.array([2, 7, 3, 8]), np.array([5, 1, 9, 5])  # pairs (0, 1) and (2, 3) share the offset (5, -4)
    r = posembed.rope_2d(np.tile(x, (4, 1)), rows, cols, base)
    assert r[0] @ r[1] == pytest.approx(r[2] @ r[3], abs=1e-12)
    assert posembed.rope_offset_scores(dim, reach, base, seed=0)[reach, reach] == pytest.approx(1.0)


def test_a_reason_several_settings_share_is_said_once():
    """A learned table sets rows, columns and size itself: three settings changed, one sentence saying why."""
    from vitviz import views
    from vitviz.specs import registry
    from vitviz.specs import views as declared

    shown = views.show("position_embeddings", None,
                       declared.POSITIONS.check({"source": declared.LEARNED + registry.OFFLINE_KEY}))
    assert {"rows", "cols", "dim"} <= set(shown.settled.notes)
    assert shown.note().count("(its own, not set here)") == 1
    assert shown.settled.sentence().count("(its own, not set here)") == 1


# ---- what a table codes, said from its own numbers (issue 68, item 3) ------------------------------------------

def _radial_table(rows: int = 8, cols: int = 8, dim: int = 96, seed: int = 0) -> np.ndarray:
    """A hand-built table that codes only how far a position is from the centre: a smooth function of the radius."""
    rng = np.random.default_rng(seed)
    r, c = np.divmod(np.arange(rows * cols), cols)
    radius = np.hypot(r - (rows - 1) / 2, c - (cols - 1) / 2)
    bumps = np.stack([np.exp(-(radius - k) ** 2) for k in range(6)], 1)  # (N, 6)
    return (bumps @ rng.standard_normal((6, dim))).reshape(rows, cols, dim)


def _grid_table(rows: int = 8, cols: int = 8, dim: int = 96, seed: int = 0) -> np.ndarray:
    """A hand-built table that codes where a position is: a Gaussian bump of features around each (row, col)."""
    rng = np.random.default_rng(seed)
    r, c = np.divmod(np.arange(rows * cols), cols)
    centres = rng.uniform(-1, max(rows, cols), (dim, 2))
    d2 = (r[:, None] - centres[None, :, 0]) ** 2 + (c[:, None] - centres[None, :, 1]) ** 2
    return np.exp(-d2 / 4.0).reshape(rows, cols, dim)


def test_relations_by_hand():
    """1×3 grid: ends equal, middle at 45°: each end's most alike is the other end (two steps, same ring), the
    middle's is the first end (a tie: argmax takes the first), next door."""
    grid = np.array([[[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]]])
    rel = posembed.relations(grid)
    assert rel == {"positions": 3, "nearest_next_door": 1, "nearest_same_ring": 2, "farther": pytest.approx(1.0)}
    assert posembed.relations(np.ones((1, 1, 2))) == {"positions": 1, "nearest_next_door": 0,
                                                      "nearest_same_ring": 0, "farther": None}


@pytest.mark.parametrize("table, kind", [(_grid_table, "grid"), (_radial_table, "centre")])
def test_a_hand_built_table_is_read_as_what_it_was_built_to_code(table, kind):
    from vitviz.views.posembed import what_it_codes

    grid = table()
    near, rel = posembed.neighbourhood(grid), posembed.relations(grid)
    assert posembed.arrangement(near, rel) == kind
    said = what_it_codes(grid, learned=True)
    if kind == "grid":
        assert near["next_door"] > near["same_ring"] + 0.05 and 2 * rel["nearest_next_door"] >= 64
        assert "this model learned the grid" in said and "distance from the centre" not in said
        assert f"({near['next_door']:.2f}, against {near['same_ring']:.2f}" in said
    else:
        assert near["same_ring"] > near["next_door"] + 0.05
        assert "how far a patch is from the centre, not the grid" in said and "learned the grid" not in said
        assert f"({near['same_ring']:.2f} against {near['next_door']:.2f})" in said
    assert f"{rel['nearest_next_door']} of 64 positions" in said


def test_a_random_table_is_said_to_code_nothing_and_a_formula_is_not_said_to_be_learned():
    from vitviz.views.posembed import sinusoidal_grid, what_it_codes

    noise = np.random.default_rng(1).standard_normal((8, 8, 96))
    assert posembed.arrangement(posembed.neighbourhood(noise), posembed.relations(noise)) == "none"
    assert "learned no arrangement of the positions (yet)" in what_it_codes(noise, learned=True)
    assert "-0.00" not in what_it_codes(noise, learned=True)
    said = what_it_codes(sinusoidal_grid("2D sinusoidal", 14, 14, 64), learned=False)
    assert "this table codes the grid" in said and "learned" not in said and "196 of 196 positions" in said


def test_the_offline_models_table_is_said_to_code_the_distance_from_the_centre():
    """Issue 68: the tour said "neighbours look alike, so the model has learned the grid"; the offline model's own
    numbers say otherwise (next-door 0.61, equally far from the centre 0.87, 18 of 64 positions most like a
    4-neighbour), and so does its model card. The view's sentence is made from those numbers."""
    from vitviz import views
    from vitviz.specs import registry

    v = views.VIEWS["position_embeddings"]
    shown = views.show("position_embeddings", None, v.check({"source": "learned: " + registry.OFFLINE_KEY,
                                                             "new_rows": 8, "new_cols": 8}))
    near, rel = shown.numbers["neighbourhood"], shown.numbers["relations"]
    assert shown.numbers["arrangement"] == "centre"
    assert near["same_ring"] > near["next_door"] + 0.2 and rel["nearest_next_door"] < rel["positions"] / 2
    summary = shown.texts["summary"]
    assert "this model mostly learned how far a patch is from the centre, not the grid." in summary
    assert f"only {rel['nearest_next_door']} of {rel['positions']} positions" in summary
    assert "learned the grid" not in summary
    card = (Path(__file__).resolve().parents[1] / "vitviz/assets/tiny/MODEL_CARD.md").read_text()
    assert "mostly the table learned how far a patch is from the centre" in " ".join(card.split())
