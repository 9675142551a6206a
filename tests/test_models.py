"""The registry and the loaders: checkpoints built here, loaded through the app's own code."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from conftest import module_of

from vitviz.core import owned
from vitviz import assets
from vitviz.analyses import attention as analysis
from vitviz.models import cache as models
from vitviz.models import loaders
from vitviz.specs import registry


def test_registry_has_what_the_tabs_need():
    att = registry.keys("attention")
    for key in ("DINO ViT-S/8", "DINO ViT-S/16", "DINO ViT-B/8", "DINO ViT-B/16", "DINOv2 ViT-S/14",
                "DINOv2 ViT-S/14 + 4 registers", registry.OFFLINE_KEY):
        assert key in att
    assert att[0] == "DINO ViT-S/8" and att[-1] == registry.OFFLINE_KEY
    assert registry.REGISTRY["DINOv2 ViT-S/14 + 4 registers"].prefix == 5
    assert registry.REGISTRY["DINO ViT-B/8"].patch == 8
    assert "ViT-B/16 (ImageNet-1k)" in registry.keys("classify")
    with pytest.raises(ValueError):
        models.get_model("facebook/anything-you-type")


def test_load_hf_reads_the_checkpoint_config(dino_s8_dir):
    loaded = loaders.load_hf(dino_s8_dir)
    assert module_of(loaded).config._attn_implementation == "sdpa"  # fused; eager only for a view that asks
    assert loaded.spec.patch == 8 and loaded.spec.prefix == 1 and loaded.resolution == 224
    assert loaded.mean == pytest.approx((0.485, 0.456, 0.406)) and loaded.std == pytest.approx((0.229, 0.224, 0.225))
    assert "local checkpoint" in loaded.origin and not module_of(loaded).training
    x = loaded.normalise(np.full((16, 24, 3), 255, np.uint8))
    assert x.shape == (1, 3, 16, 24)
    assert float(x[0, 0, 0, 0]) == pytest.approx((1 - 0.485) / 0.229, rel=1e-5)


def test_load_timm_from_file_with_labels_and_preprocessing(deit_file):
    loaded = loaders.load_timm("deit_tiny_patch16_224.fb_in1k", file=deit_file)
    from safetensors.torch import load_file

    sd = load_file(str(deit_file))
    torch.testing.assert_close(module_of(loaded).state_dict()["pos_embed"], sd["pos_embed"])
    assert loaded.labels[281].startswith("tabby") and len(loaded.labels) == 1000
    import timm

    dc, cfg = loaded.data_config, timm.models.get_pretrained_cfg("deit_tiny_patch16_224.fb_in1k")
    assert dc["crop_pct"] == cfg.crop_pct and dc["interpolation"] == cfg.interpolation == "bicubic"
    assert dc["mean"] == pytest.approx(cfg.mean) and dc["input_size"] == (3, 224, 224)


def connections(monkeypatch) -> list[tuple]:
    """Record every attempt to open a network connection (each one fails at once, as it does here)."""
    import socket

    tried: list[tuple] = []

    def refuse(address, timeout=None, *args, **kwargs):
        tried.append((address, timeout))
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


def test_hub_reachable_honours_offline_flag(monkeypatch):
    tried = connections(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loaders, "_reach_cache", None)
    assert loaders.hub_reachable() is False
    assert tried == []  # the flag is enough: not even a probe


def test_the_hub_is_probed_once_with_a_short_timeout_and_the_lists_follow(monkeypatch):
    """Without the offline flag and without a network: one probe (the timeout asked for), remembered; the model
    lists learn what needs a download from one probe of 1.2 s at most, once per process."""
    tried = connections(monkeypatch)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loaders, "_reach_cache", None)
    assert loaders.hub_reachable(timeout=1.0) is False
    assert tried == [((loaders.HUB_HOST, 443), 1.0)]
    assert loaders.hub_reachable(timeout=1.0) is False and len(tried) == 1  # remembered, not asked again
    monkeypatch.setattr(loaders, "_reach_cache", None)
    owned.reset("models")
    try:
        first = models.available_now()
        assert [t for _, t in tried[1:]] == [1.2]
        assert first[registry.OFFLINE_KEY] and not first["DINO ViT-S/8"]
        assert models.choice_label("DINO ViT-S/8") == "DINO ViT-S/8: needs download"
        assert models.available_now() == first and len(tried) == 2  # decided once
    finally:
        owned.reset("models")
        monkeypatch.setattr(loaders, "_reach_cache", None)


def test_offline_falls_back_to_embedded_with_notice(monkeypatch):
    owned.reset("models")
    asked = []
    real = loaders.load_hf

    def recording(source, local_only=False, spec=None):
        asked.append(local_only)
        return real(source, local_only=local_only, spec=spec)

    monkeypatch.setattr(loaders, "load_hf", recording)
    loaded = models.get_model("DINO ViT-S/8")
    assert asked == [True]  # offline: only the local cache is looked at, never the hub (no retries, no waiting)
    assert loaded.spec.key == registry.OFFLINE_KEY
    assert "Showing" in loaded.notice and "DINO ViT-S/8" in loaded.notice and "not DINO" in loaded.notice
    assert "vitviz/assets/tiny" in loaded.origin
    # asking for the embedded model itself carries no notice
    assert models.get_model(registry.OFFLINE_KEY).notice == ""


def test_local_cache_is_used_offline(monkeypatch, dino_s8_dir):
    seen = {}
    real = loaders.load_hf

    def fake_load_hf(source, local_only=False, spec=None):  # stands in for a populated HF cache
        seen["local_only"] = local_only
        return real(dino_s8_dir, spec=spec)

    monkeypatch.setattr(loaders, "load_hf", fake_load_hf)
    owned.reset("models")
    loaded = models.get_model("DINO ViT-S/16")
    assert seen["local_only"] is True and loaded.notice == "" and loaded.spec.key == "DINO ViT-S/16"
    owned.reset("models")


def test_cache_loads_once_across_threads(monkeypatch):
    calls = []
    real = loaders.load_embedded

    def counting(file=None):
        calls.append(1)
        time.sleep(0.2)
        return real(file)

    monkeypatch.setattr(loaders, "load_embedded", counting)
    owned.reset("models")
    results = []
    threads = [threading.Thread(target=lambda: results.append(models.get_model(registry.OFFLINE_KEY)))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(module_of(r)) for r in results}) == 1
    owned.reset("models")


def test_embedded_model_and_timeline_checkpoints():
    loaded = models.get_model(registry.OFFLINE_KEY)
    assert loaded.labels == ["circle", "square", "triangle", "star", "cross", "ring"]
    assert loaded.spec.patch == 8 and loaded.resolution == 64
    steps = [s for s, _ in assets.tiny_checkpoints()]
    assert 4 <= len(steps) <= 6 and steps[0] == 0
    first = module_of(models.get_checkpoint(steps[0])).state_dict()["pos_embed"]
    last = module_of(models.get_checkpoint(steps[-1])).state_dict()["pos_embed"]
    torch.testing.assert_close(last, module_of(loaded).state_dict()["pos_embed"])
    assert not torch.allclose(first, last)
    with pytest.raises(ValueError):
        models.get_checkpoint(123_456)


def test_embedded_model_always_runs_at_its_own_size(rgb_cat):

    a = analysis.analyse(models.get_model(registry.OFFLINE_KEY), rgb_cat, 224)
    assert min(a.fitted.image.shape[:2]) == 64 and a.maps.grid[0] == 8
