"""Swin-style windows, their cost and relative position bias, against timm's Swin and torch's FLOP counter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from vitviz.core import owned
from vitviz.core import windows


def test_labels_by_hand():
    assert windows.window_labels(4, 4, 2).tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]
    # shifted by one: the borders move down and right; the cut-off first row and column are groups of their own
    assert windows.window_labels(4, 4, 2, 1).tolist() == [[0, 1, 1, 2], [3, 4, 4, 5], [3, 4, 4, 5], [6, 7, 7, 8]]
    with pytest.raises(ValueError, match="shifted by 0 to 1"):
        windows.window_labels(4, 4, 2, 2)


@pytest.mark.parametrize("grid,m,shift", [((8, 8), 4, 2), ((14, 14), 7, 3), ((12, 6), 3, 1)])
def test_shifted_windows_equal_swins_rolled_and_masked_windows(grid, m, shift):
    """timm's Swin block rolls the map by −shift, cuts regular windows and masks pairs from different regions.
    Mapped back to the original positions, the pairs it lets attend are exactly those with equal labels."""
    from timm.models.swin_transformer import SwinTransformerBlock

    gh, gw = grid
    block = SwinTransformerBlock(dim=8, input_resolution=grid, num_heads=2, window_size=m, shift_size=shift)
    mask = block.get_attn_mask(device=torch.device("cpu"), dtype=torch.float32)  # (windows, M², M²), 0 = allowed
    labels = windows.window_labels(gh, gw, m, shift)
    n_wc = gw // m
    checked = 0
    for w in range(mask.shape[0]):
        wr, wc = divmod(w, n_wc)
        pos = [((wr * m + i // m + shift) % gh, (wc * m + i % m + shift) % gw) for i in range(m * m)]  # un-rolled
        for i, (ri, ci) in enumerate(pos):
            for j, (rj, cj) in enumerate(pos):
                assert (mask[w, i, j] == 0) == (labels[ri, ci] == labels[rj, cj])
                checked += 1
    assert checked == gh * gw * m * m
    # unshifted: one window per M×M block, every pair inside it allowed
    assert len(np.unique(windows.window_labels(gh, gw, m))) == (gh // m) * (gw // m)


def test_allowed_keys_are_the_querys_window():
    keys = windows.allowed_keys(windows.window_labels(14, 14, 7, 3), 0, 0)
    assert keys.sum() == 9 and keys[:3, :3].all()  # the 3×3 corner cut off by the shift
    keys = windows.allowed_keys(windows.window_labels(14, 14, 7, 3), 5, 5)
    assert keys.sum() == 49 and keys[3:10, 3:10].all()


def test_macs_by_hand():
    g = windows.attention_macs(196, 768)
    assert g["projections"] == 4 * 196 * 768 ** 2 and g["scores"] == 196 ** 2 * 768 == g["weighted_sum"]
    w = windows.attention_macs(3136, 96, 49)  # Swin-T's first stage at 224 px: 56×56 tokens, M = 7
    assert w["total"] == 4 * 3136 * 96 ** 2 + 2 * 49 * 3136 * 96  # the Swin paper's 4hwC² + 2M²hwC
    assert windows.attention_macs(3136, 96)["total"] == 4 * 3136 * 96 ** 2 + 2 * 3136 ** 2 * 96  # 4hwC² + 2(hw)²C
    with pytest.raises(ValueError, match="do not split"):
        windows.attention_macs(100, 8, 49)


@pytest.mark.parametrize("grid,m", [((8, 8), 4), ((14, 14), 7)])
def test_macs_equal_torchs_flop_counter_and_windows_equal_masked_global_attention(grid, m):
    torch.manual_seed(0)
    d, heads = 32, 4
    n = grid[0] * grid[1]
    qkv, proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
    x = torch.randn(n, d)
    with torch.no_grad():
        with FlopCounterMode(display=False) as fc_global:
            full = windows.global_attention(x, qkv, proj, heads)
        with FlopCounterMode(display=False) as fc_window:
            win = windows.windowed_attention(x, qkv, proj, heads, grid, m)
        labels = torch.from_numpy(windows.window_labels(*grid, m).ravel())
        masked = windows.global_attention(x, qkv, proj, heads, labels[:, None] == labels[None, :])
    assert fc_global.get_total_flops() == 2 * windows.attention_macs(n, d)["total"]  # a FLOP counter counts 2 per MAC
    assert fc_window.get_total_flops() == 2 * windows.attention_macs(n, d, m * m)["total"]
    torch.testing.assert_close(win, masked, atol=1e-5, rtol=1e-5)  # same answer as global attention with a mask
    assert (win - full).abs().max() > 1e-3  # and a different one from global attention


def test_cost_curve_quadratic_against_linear():
    c = windows.cost_curve([224, 448, 896], patch=4, dim=96, window=7)
    assert c["tokens"].tolist() == [3136, 12544, 50176]
    core_g = c["global"] - 4 * c["tokens"] * 96 ** 2
    core_w = c["windowed"] - 4 * c["tokens"] * 96 ** 2
    assert np.allclose(core_g[1:] / core_g[:-1], 16) and np.allclose(core_w[1:] / core_w[:-1], 4)
    odd = windows.cost_curve([230], 4, 96, 7)  # 57 patches a side: windows need the grid padded to 63
    assert odd["tokens"].tolist() == [57 * 57] and odd["padded"].tolist() == [63 * 63]
    assert odd["global"][0] == windows.attention_macs(57 * 57, 96)["total"]
    assert odd["windowed"][0] == windows.attention_macs(63 * 63, 96, 49)["total"]


def test_relative_position_index_equals_timms_and_the_bias_it_gathers():
    from timm.models.swin_transformer import (
        WindowAttention,
        get_relative_position_index,
    )

    for m in (2, 3, 7):
        assert np.array_equal(windows.relative_position_index(m), get_relative_position_index(m, m).numpy())
    m, heads = 5, 3
    attn = WindowAttention(dim=12, num_heads=heads, window_size=m)
    table = windows.distance_bias_table(m, heads)
    with torch.no_grad():
        attn.relative_position_bias_table.copy_(torch.from_numpy(table))
        theirs = attn._get_rel_pos_bias()[0].numpy()  # (H, M², M²)
    for h in range(heads):
        for q in (0, 7, 12, 24):
            assert np.allclose(windows.bias_for_query(table[:, h], m, *divmod(q, m)).ravel(), theirs[h, q])
    # the same offset gives the same bias anywhere in the window; the centre query sees a symmetric map
    centre = windows.bias_for_query(table[:, 0], m, 2, 2)
    assert np.allclose(centre, centre[::-1, ::-1]) and centre[2, 2] == 0 and centre.argmax() == 12
    assert windows.bias_for_query(table[:, 0], m, 0, 0)[1, 1] == windows.bias_for_query(table[:, 0], m, 3, 3)[4, 4]


@pytest.fixture
def swin_in_cache(tmp_path):
    """Swin-T (the real architecture and config, random weights) in the local Hugging Face cache, as if its weights
    had been downloaded, loaded by the registry's real loader."""
    import timm
    from conftest import in_hub_cache
    from safetensors.torch import save_file
    from vitviz.specs import registry

    key = "Swin-T (ImageNet-1k)"
    spec = registry.REGISTRY[key]
    torch.manual_seed(0)
    path = tmp_path / "swin.safetensors"
    save_file(timm.create_model(spec.source, pretrained=False).state_dict(), str(path))
    with in_hub_cache(key, {"model.safetensors": path}) as loaded:
        yield loaded


def test_swin_tables_are_the_models_own_and_gather_as_it_does(swin_in_cache):
    from conftest import module_of

    from vitviz.views import posembed as view

    model = module_of(swin_in_cache)
    tables = windows.bias_tables(model)
    assert [t[0] for t in tables][:3] == ["stage 1, block 1", "stage 1, block 2", "stage 2, block 1"]
    assert len(tables) == 12 and [t[1].shape for t in tables[::4]] == [(169, 3), (169, 12), (169, 12)]
    attn = model.layers[2].blocks[3].attn
    assert np.array_equal(tables[7][1], attn.relative_position_bias_table.detach().numpy())
    with torch.no_grad():
        theirs = attn._get_rel_pos_bias()[0].numpy()  # (H, 49, 49)
    assert np.allclose(windows.bias_for_query(tables[7][1][:, 5], 7, 2, 6).ravel(), theirs[5, 2 * 7 + 6])
    table, m, name, notice = view.relative_bias_table("Swin-T (ImageNet-1k)", 5, 2, 8)
    assert notice == "" and m == 7 and name.endswith("stage 3, block 4 of 12") and np.array_equal(table, tables[7][1])
    image, text = view.render_relative_bias(table, m, name, 5, 2, 6)
    assert "learned in training" in text and image.info["vitviz:text_px"] == "20.00"


def test_offline_swin_falls_back_to_the_formula_and_says_so():
    from vitviz.views import posembed as view

    owned.reset("models")
    table, m, name, notice = view.relative_bias_table("Swin-T (ImageNet-1k)", 5, 2, 8)
    assert "cannot be loaded here" in notice and m == 5 and name == "formula, 2 heads"
    assert np.array_equal(table, windows.distance_bias_table(5, 2))
    with pytest.raises(ValueError, match="Unknown source"):
        view.relative_bias_table("some/other-model", 5, 2, 1)


def _timm_groups(side: int, m: int, shift: int) -> np.ndarray:
    """(N, N) bool from timm's own Swin block on a side×side grid: which real patches may attend to which, read from
    its roll, its padding, its window partition and its attention mask."""
    from timm.models.swin_transformer import SwinTransformerBlock, window_partition

    block = SwinTransformerBlock(dim=8, input_resolution=(side, side), num_heads=1, window_size=m, shift_size=shift)
    wh, ww = block.window_size
    sh, sw = block.shift_size
    ids = torch.arange(side * side, dtype=torch.float32).view(1, side, side, 1) + 1  # 0 marks padding
    rolled = torch.roll(ids, shifts=(-sh, -sw), dims=(1, 2))
    ph, pw = (wh - side % wh) % wh, (ww - side % ww) % ww
    padded = torch.nn.functional.pad(rolled, (0, 0, 0, pw, 0, ph))
    wins = window_partition(padded, (wh, ww)).view(-1, wh * ww).long()  # (nW, M²) patch ids per window
    mask = block.get_attn_mask(padded) if any(block.shift_size) else torch.zeros(wins.shape[0], wh * ww, wh * ww)
    ids = wins.numpy()
    ok = (mask.reshape(-1, wh * ww, wh * ww) == 0).numpy() & (ids[:, :, None] > 0) & (ids[:, None, :] > 0)
    w, i, j = np.nonzero(ok)  # (window, query, key) of every pair of real patches the mask lets through
    allowed = np.zeros((side * side, side * side), bool)
    allowed[ids[w, i] - 1, ids[w, j] - 1] = True
    return allowed


@pytest.mark.parametrize("m", range(3, 14))
def test_shifted_groups_are_timms_on_14x14(m):
    labels = windows.window_labels(14, 14, m, m // 2).ravel()
    ours = labels[:, None] == labels[None, :]
    assert np.array_equal(ours, _timm_groups(14, m, m // 2))


@pytest.mark.parametrize("m", [14, 15, 20])
def test_a_window_covering_the_grid_is_one_group_and_not_shifted(m):
    assert windows.swin_window(14, m, m // 2) == (14, 0)
    assert len(np.unique(windows.window_labels(14, 14, m, m // 2))) == 1
    assert np.array_equal(np.ones((196, 196), bool), _timm_groups(14, m, m // 2))
