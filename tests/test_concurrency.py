"""Many requests at once on one model: every result equals the one computed alone, and nothing is left behind.

Before the per-model lock, two threads capturing attention on one model got each
other's class-token maps (hooks on a shared model), and a plain forward during a
capture fed the capture's hooks; these tests fail that way without the lock. Since
2026-11-28 forwards that only record (their hooks see their own thread) share the
model: the tests below also fail if a hook sees another thread's forward, or if
a forward that switches the model to eager attention runs beside any other.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, module_of

from vitviz.analyses import attention as analysis
from vitviz.analyses import classify, heads
from vitviz.core import attention as att
from vitviz.core import images
from vitviz.embedded import scenes
from vitviz.models import hooks, loaders
from vitviz.models.runner import ModelLock, Runner
from vitviz.render import plotting

THREADS = 8


def _inputs() -> list[np.ndarray]:
    """Eight different pictures in four shapes (so four different token counts on an 8-pixel grid)."""
    cat = images.load_rgb(EXAMPLES / "cat.png")
    shapes = [(64, 64), (64, 96), (96, 64), (64, 128)]
    out = []
    for i in range(THREADS):
        src = scenes.make_scene(i).image if i < 4 else cat
        h, w = shapes[i % 4]
        out.append(np.asarray(images.Image.fromarray(src).resize((w, h))))
    return out


def _capture(loaded: Runner, rgb: np.ndarray) -> att.AttentionMaps:
    return loaded.run(analysis.probe_for(loaded), loaded.normalise(rgb))


def _same(a: att.AttentionMaps, b: att.AttentionMaps) -> bool:
    return (a.grid == b.grid and np.array_equal(a.cls, b.cls) and np.array_equal(a.distance(), b.distance())
            and np.array_equal(a.logits, b.logits) and np.array_equal(a.rollout("max"), b.rollout("max"))
            and len(a.keys) == a.layers and all(np.array_equal(x.q, y.q) and np.array_equal(x.k, y.k)
                                                for x, y in zip(a.keys, b.keys)))


def _no_hooks_and_flags(model: torch.nn.Module, flags: list[bool]) -> None:
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert [m.fused_attn for m in hooks.attention_modules(model)] == flags


def test_eight_threads_capture_one_model_like_eight_sequential_runs():
    loaded = loaders.load_embedded()
    flags = [m.fused_attn for m in hooks.attention_modules(module_of(loaded))]
    pics = _inputs()
    assert len({p.shape for p in pics}) == 4 and len({p.tobytes() for p in pics}) == THREADS
    alone = [_capture(loaded, rgb) for rgb in pics]
    for _ in range(3):  # several rounds: the interleaving differs every time
        barrier = threading.Barrier(THREADS)

        def run(i: int) -> att.AttentionMaps:
            barrier.wait()
            return _capture(loaded, pics[i])

        with ThreadPoolExecutor(THREADS) as pool:
            together = list(pool.map(run, range(THREADS)))
        assert [_same(a, b) for a, b in zip(alone, together)] == [True] * THREADS
    _no_hooks_and_flags(module_of(loaded), flags)


def test_plain_forwards_during_captures_do_not_leak_into_them():
    """The shuffle experiment runs plain forwards; alongside captures both answers stay their own."""
    loaded = loaders.load_embedded()
    pics = _inputs()[:4]
    alone_maps = [_capture(loaded, rgb) for rgb in pics]
    alone_shuffle = [classify.shuffle_experiment(loaded, rgb, seed=i) for i, rgb in enumerate(pics)]
    barrier = threading.Barrier(2 * len(pics))

    def capture(i: int):
        barrier.wait()
        return _capture(loaded, pics[i])

    def shuffle(i: int):
        barrier.wait()
        return classify.shuffle_experiment(loaded, pics[i], seed=i)

    with ThreadPoolExecutor(2 * len(pics)) as pool:
        maps = [pool.submit(capture, i) for i in range(len(pics))]
        shuffles = [pool.submit(shuffle, i) for i in range(len(pics))]
        maps, shuffles = [f.result() for f in maps], [f.result() for f in shuffles]
    assert all(_same(a, b) for a, b in zip(alone_maps, maps))
    for a, b in zip(alone_shuffle, shuffles):
        assert a.top_original == b.top_original and a.top_shuffled == b.top_shuffled
        assert a.diff_with_pos == b.diff_with_pos and np.array_equal(a.scrambled, b.scrambled)


def test_hf_model_from_threads_equals_sequential(dino_s8_dir):
    """The transformers path (hooks on the attention modules and on the last layer) under threads."""
    loaded = loaders.load_hf(dino_s8_dir)
    rng = np.random.default_rng(0)
    pics = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(32, 32), (32, 48), (48, 32), (40, 40)] * 2]
    alone = [_capture(loaded, rgb) for rgb in pics]
    one_head = heads.LayerProbe(3, 1, 8)  # a view that switches the model to eager attention for its forward
    eager_alone = loaded.run(one_head, loaded.normalise(pics[0])).attn

    def work(i: int):
        if i % 2:  # fused captures and eager ones interleaved: neither sees the other's path
            return loaded.run(one_head, loaded.normalise(pics[0])).attn
        return _capture(loaded, pics[i // 2])

    with ThreadPoolExecutor(THREADS) as pool:
        mixed = list(pool.map(work, range(2 * len(pics))))
    together = mixed[::2]
    assert all(torch.equal(m, eager_alone) for m in mixed[1::2])
    assert module_of(loaded).config._attn_implementation == "sdpa"
    for a, b in zip(alone, together):
        assert np.array_equal(a.cls, b.cls) and np.array_equal(a.distance(), b.distance())
        assert np.array_equal(a.norms, b.norms)
        assert len(a.keys) == 12 and all(np.array_equal(x.q, y.q) and np.array_equal(x.k, y.k)  # the explorer's
                                         for x, y in zip(a.keys, b.keys))
    assert all(not m._forward_hooks for m in module_of(loaded).modules())


def test_a_hook_sees_only_the_forwards_of_the_thread_that_put_it_on():
    loaded = loaders.load_embedded()
    model, x = module_of(loaded), loaded.normalise(_inputs()[0])
    first = hooks.blocks(model)[0]
    calls: list[int] = []
    with torch.inference_mode(), hooks.capture({"b0": (first, "output"), "b0 in": (first, "input")}) as seen, \
            hooks.record_keys(model, lambda layer, q, k, scale: calls.append(layer)) as layers:
        other = threading.Thread(target=lambda: model(x))  # another request's forward while these hooks are on
        other.start()
        other.join()
        assert seen == {} and calls == []
        model(x)
        assert set(seen) == {"b0", "b0 in"} and calls == list(range(layers))
    _no_hooks_and_flags(model, [True] * layers)


class _Watch:
    """A probe that notes who else is inside the model while it runs (and, given a barrier, waits at it there)."""

    grad, own_size, key = False, False, ("watch",)

    def __init__(self, shares: bool, inside: list, seen: list, barrier: threading.Barrier | None = None) -> None:
        self.shares, self.inside, self.seen, self.barrier = shares, inside, seen, barrier

    def estimate(self, spec, tokens: int) -> int:
        return 0

    def nbytes(self, result) -> int:
        return 0

    def __call__(self, model, x, forward):
        self.inside.append(self)
        if self.barrier is not None:
            self.barrier.wait()
        out = forward(x)
        time.sleep(0.01)
        self.seen.append((self.shares, len(self.inside)))
        self.inside.remove(self)
        return out


def test_recording_forwards_run_side_by_side_and_an_eager_one_runs_alone():
    loaded = loaders.load_embedded()
    x = loaded.normalise(_inputs()[0])
    inside, seen = [], []
    both = threading.Barrier(2, timeout=10)  # with every forward alone, the first would wait here for ever
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: loaded.run(_Watch(True, inside, seen, both), x), range(2)))
    assert sorted(seen) == [(True, 1), (True, 2)]
    seen.clear()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: loaded.run(_Watch(i % 3 != 0, inside, seen), x), range(4 * THREADS)))
    assert len(seen) == 4 * THREADS and all(count == 1 for shares, count in seen if not shares)  # never company
    # the recording probe shares; the one that switches the model to eager attention does not
    assert analysis.AttentionProbe(8, 1).shares and not getattr(heads.LayerProbe(0, 0, 8), "shares", False)


def test_a_thread_waiting_to_be_alone_goes_before_new_sharers():
    lock, order = ModelLock(), []
    first_in, let_go = threading.Event(), threading.Event()

    def sharer(name: str, hold: bool = False):
        with lock.shared():
            order.append(name)
            if hold:
                first_in.set()
                let_go.wait(10)

    def alone():
        with lock.alone():
            order.append("alone")

    threads = [threading.Thread(target=sharer, args=("first", True))]
    threads[0].start()
    first_in.wait(10)
    threads.append(threading.Thread(target=alone))
    threads[1].start()
    while not lock._waiting:
        time.sleep(0.005)
    threads.append(threading.Thread(target=sharer, args=("later",)))
    threads[2].start()
    time.sleep(0.2)
    assert order == ["first"]  # neither the one waiting to be alone nor a new sharer is in yet
    let_go.set()
    for t in threads:
        t.join(10)
    assert order == ["first", "alone", "later"] and lock.idle
    with lock.shared(), pytest.raises(RuntimeError, match="cannot also ask"):
        with lock.alone():
            pass
    with lock.alone(), lock.alone(), lock.shared():  # the thread alone may take it again, either way
        assert lock.sharing == 1
    assert lock.idle


def test_a_failing_forward_releases_the_lock_and_the_hooks():
    loaded = loaders.load_embedded()
    wrong = np.zeros((64, 64, 3), np.uint8)
    with pytest.raises(RuntimeError, match="expected"):
        loaded.run(analysis.AttentionProbe(16, 1), loaded.normalise(wrong))  # a probe that expects other tokens
    assert loaded._lock.idle
    model = module_of(loaded)
    _no_hooks_and_flags(model, [m.fused_attn for m in hooks.attention_modules(model)])
    assert all(m.fused_attn for m in hooks.attention_modules(model))  # timm's default, restored


def test_figures_drawn_from_threads_equal_sequential_ones():
    """matplotlib through Figure objects, and the figure style in a context variable: nothing shared between
    threads."""
    drawers = 4  # both styles, annotated or not, signed or not (each figure ~0.3 s: 8 took 5 s of the fast set)
    rng = np.random.default_rng(1)
    mats = [rng.normal(size=(6, 6)) for _ in range(drawers)]

    def draw(i: int) -> bytes:  # odd threads draw in the compact style: a style chosen here stays in this thread
        with plotting.styled(compact=i % 2 == 1):
            img = plotting.heatmap(mats[i], f"matrix {i}", "x", "y", "value", annotate=i % 2 == 0,
                                   signed=i % 3 == 0)
        assert plotting.text_px_of(img) == (14 if i % 2 else 20)
        return img.tobytes()

    alone = [draw(i) for i in range(drawers)]
    with ThreadPoolExecutor(drawers) as pool:
        assert list(pool.map(draw, range(drawers))) == alone


def test_new_views_from_threads_equal_sequential_and_leave_nothing_behind():
    """Inside-one-head records, layer tokens and relevance (forward and backward) run at once with plain captures,
    on one model: each equals the same call made alone, and no hook or fused flag is left changed."""
    from vitviz.analyses import features, heads, relevance
    from vitviz.core.images import fit_to_patches

    tiny = loaders.load_embedded()
    flags = [b.attn.fused_attn for b in module_of(tiny).blocks]
    pictures = _inputs()
    fitted = [fit_to_patches(rgb, 64, 8, "keep") for rgb in pictures]

    def work(i: int):
        kind = i % 4
        if kind == 0:
            r = tiny.run(heads.LayerProbe(2, 1, 8), tiny.normalise(fitted[i].image))
            return torch.cat([r.q.flatten(), r.attn.flatten(), r.heads_out.flatten()]).numpy()
        if kind == 1:
            return tiny.run(features.TokensProbe(), tiny.normalise(fitted[i].image)).numpy()
        if kind == 2:
            return relevance.class_relevance(tiny, tiny.normalise(fitted[i].image), 2).relevance
        return _capture(tiny, fitted[i].image).cls

    alone = [work(i) for i in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(work, range(THREADS)))
    for a, b in zip(alone, together):
        assert np.array_equal(a, b)
    _no_hooks_and_flags(module_of(tiny), flags)
    assert all(p.grad is None for p in module_of(tiny).parameters())


def test_cnn_receptive_fields_and_shifts_from_threads_equal_sequential():
    """The ViT-vs-CNN probes (a backward per stage on the small CNN, shifted batches on both models) at once with
    attention captures on the tiny ViT: each equals the same call made alone; no hook is left on either model."""
    from vitviz.analyses import compare
    from vitviz.core import owned

    tiny, small = loaders.load_embedded(), loaders.load_embedded_cnn()
    flags = [b.attn.fused_attn for b in module_of(tiny).blocks]
    pictures = _inputs()

    def work(i: int):
        rgb = pictures[i]
        kind = i % 3
        if kind == 0:
            return np.concatenate([m.ravel() for m in compare.receptive_fields(small, rgb, 64)[0].maps])
        if kind == 1:
            r = compare.shift_experiment(small if i % 2 else tiny, (small if i % 2 else tiny).preprocess(rgb),
                                         list(range(9)), vit=not i % 2)
            return np.concatenate([np.nan_to_num(r.errors.ravel(), nan=-1.0), r.probs.ravel()])
        return _capture(tiny, rgb).cls

    alone = [work(i) for i in range(THREADS)]
    owned.reset("results")
    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(work, range(THREADS)))
    for a, b in zip(alone, together):
        assert np.array_equal(a, b)
    _no_hooks_and_flags(module_of(tiny), flags)
    assert not any(m._forward_hooks for m in module_of(small).modules())
    assert all(p.grad is None for p in module_of(small).parameters())
