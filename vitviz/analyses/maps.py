"""The maps Test the map tests, from one call on a model the caller holds alone.

Every test of the map (deletion and insertion, the report card, randomised weights, predict-then-test) ranks the
patches by the same maps, made here in one place:

- ``attention``: the class token's last-layer attention, mean over heads;
- ``rollout``: attention rollout through every layer (head mean, Abnar and Zuidema 2020);
- ``relevance``: attention times its gradient, positive part, head mean, rolled through the layers (Chefer, Gur and
  Wolf 2021, :mod:`vitviz.analyses.relevance`);
- ``attnlrp``: layer-wise relevance propagation with AttnLRP's rules for attention, LayerNorm and GELU (Achtibat et
  al. 2024), as gradient × input at the stream entering block 1 (:func:`attnlrp`);
- ``legrad``: every layer's class score differentiated with respect to that layer's attention, positive part,
  averaged (Bousselham et al. 2025, :func:`legrad`);

the last three with classes only (each needs a class to explain). The model's attention path is switched to its
eager form for the first forward (:func:`vitviz.models.hooks.record_attention`) and AttnLRP's forward runs with its
rules hooked on (:func:`vitviz.models.hooks.lrp_rules`), both undone on return, so the caller must hold the model
alone (:meth:`vitviz.models.runner.Runner.run` with a probe that does not share) or own a copy of it.

Shapes: T = prefix + N tokens of width D; the maps are (N,) float64 over the patch tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from vitviz.core import attention as att
from vitviz.models import budget, hooks
from vitviz.models.parts import Parts, parts_of
from vitviz.models.runner import Forward
from vitviz.specs.registry import ModelSpec

NAMES = ("attention", "rollout", "relevance", "attnlrp", "legrad")
"""Every map made here, in the order the views list them; the last three need a class."""

NEED_A_CLASS = ("relevance", "attnlrp", "legrad")
"""The maps that explain one class: a model without classes (DINO) has none of them."""

TOKEN_PASSES = 5
"""Passes of the blocks' token-wise work (12·T·D² multiply-adds per block: q, k, v, the output projection and the
MLP) :func:`class_maps` makes with classes: the eager forward, relevance's backward, LeGrad's backwards (each block's
from its own output, about one backward in all), AttnLRP's forward and its backward (the backwards reach the
activations only: no weight's gradient is made)."""
ATTENTION_PASSES = 8
"""Passes of attention's T²-dependent products (2·T²·D multiply-adds per block: the scores and the weighted sum):
the eager forward 1, relevance's backward 2 (two gradients of each product), LeGrad's at most 2, AttnLRP's forward 1
and backward 2."""
ROLLOUT_PASSES = 2
"""Relevance's rolling through the layers: R ← R + Ā·R, a (T, T) by (T, T) product per block (T³ multiply-adds) in
float64, counted twice a float32 multiply-add."""
SAFETY = 2.0
"""The factor the counted work is multiplied by: what the count leaves out costs time too (the eager attention's
softmax and the maps' element-wise steps over (H, T, T) tensors, which wait on memory, not on multiply-adds; each
operation's fixed overhead on a small model; another CPU). Stated, not fitted: benchmarks.class_maps measured 5.3×,
8.8× and 9.4× a fused forward on ViT-B/16's and ViT-S/8's shapes and the offline model, where the count gives 5.1,
6.3 and 5.4 (its docstring has the table)."""


def maps_work(dim: int, tokens: int) -> float:
    """The multiply-adds :func:`class_maps` with classes counts per block over ``tokens`` tokens of width ``dim``,
    in fused forwards' worth (a forward: 12·T·D² + 2·T²·D per block), before :data:`SAFETY`."""
    linear, attention = 12 * tokens * dim ** 2, 2 * tokens ** 2 * dim
    counted = TOKEN_PASSES * linear + ATTENTION_PASSES * attention + ROLLOUT_PASSES * tokens ** 3
    return counted / (linear + attention)


def forwards_of(dim: int, tokens: int, classes: bool) -> int:
    """:func:`class_maps`' bound in forwards' worth: ⌈:data:`SAFETY` × :func:`maps_work`⌉ with classes; without
    classes its one eager forward, counted 1 as every other forward of the tests is."""
    return math.ceil(SAFETY * maps_work(dim, tokens)) if classes else 1


def maps_forwards(spec: ModelSpec, tokens: int | None = None) -> int:
    """:func:`forwards_of` for ``spec`` over ``tokens`` tokens (by default its resolution's patches and prefix):
    with classes 11 for ViT-B/16's shape at 224 px (197 tokens), 13 for ViT-S/8's (785), 11 for the offline model
    (65); 1 for a model for attention only (no class map, no backward)."""
    tokens = (spec.resolution // spec.patch) ** 2 + spec.prefix if tokens is None else tokens
    return forwards_of(spec.dim, tokens, spec.task != "attention")


NO_GRADIENTS = ("needs gradients: this forward ran in inference mode (torch.inference_mode), which keeps no graph, "
                "so there was nothing to differentiate the class's score by.")
"""What :attr:`Maps.left_out` says of each class map when :func:`class_maps` ran where no graph can be built
(inference mode; under plain ``torch.no_grad`` it turns gradients on itself)."""


EAGER_GRAPH = (22, 3)
"""What the eager forward's graph and the class maps' backwards hold at their peak, per block: so many (T, D) and
(H, T, T) float32 tensors (measured with ``python -m benchmarks.class_maps --memory``: 20 and 2.9 fit the peaks of
ViT-B/16's and ViT-S/8's shapes at 224 px, 212 and 811 MB over a fused forward; rounded up)."""
LRP_GRAPH = 36
"""(T, D) float32 tensors per block AttnLRP's forward keeps for its backward on the fused path (the rules' own
copies included; measured 34 and 33 on the same shapes: 246 and 476 MB)."""


MEMORY_SAFETY = 1.25
"""The factor the class maps' counted graphs are multiplied by: the allocator's peaks vary from run to run (ViT-S/8's
eager pass measured 605 and 811 MB in two runs of the same code), and another machine's allocator differs."""
ALLOCATOR_SLACK = 16 * 2**20
"""Bytes added to every estimate with classes: the allocator's own blocks, which dominate a small model's peak (the
offline model's class maps measured 11 MiB over a fused forward where its graphs count 4)."""


def maps_bytes(spec: ModelSpec, tokens: int) -> int:
    """Estimated peak bytes of :func:`class_maps` on ``spec`` over ``tokens`` tokens. With classes: the fused
    forward's share, :data:`ALLOCATOR_SLACK`, and :data:`MEMORY_SAFETY` × the larger of the eager pass with its
    backwards (:data:`EAGER_GRAPH`) and AttnLRP's, which runs after the eager graph is gone (:data:`LRP_GRAPH`).
    Without classes (a model for attention only) no graph is built: the eager forward and every layer's kept
    attention."""
    td, htt = tokens * spec.dim, spec.heads * tokens * tokens
    if spec.task == "attention":
        return budget.eager_bytes(spec, tokens) + 2 * spec.depth * htt * 4
    eager = spec.depth * (EAGER_GRAPH[0] * td + EAGER_GRAPH[1] * htt) * 4
    graphs = MEMORY_SAFETY * max(eager, spec.depth * LRP_GRAPH * td * 4)
    return budget.forward_bytes(spec, tokens) + ALLOCATOR_SLACK + math.ceil(graphs)


@dataclass
class Maps:
    """The maps of one picture.

    Attributes:
        maps: name -> (N,) float64, in :data:`NAMES`'s order (those needing a class only with one).
        logits: (1, C) the model's output, detached (None for a model without classes).
        stream: (1, T, D) the stream entering block 1 (patches embedded, prefix tokens in front, positions added).
        target: the class the class maps explain (None without classes).
        left_out: name -> why, for a class map this model or call cannot have (AttnLRP on layers its rules do not
            cover; every class map in inference mode: :data:`NO_GRADIENTS`).
    """

    maps: dict[str, np.ndarray]
    logits: torch.Tensor | None
    stream: torch.Tensor
    target: int | None
    left_out: dict[str, str] = field(default_factory=dict)


def target_of(logits: torch.Tensor, rank: int) -> int:
    """The class at place ``rank`` (1 = the top; clipped to the classes there are) of logits (1, C)."""
    order = torch.argsort(logits.detach().reshape(-1, logits.shape[-1])[0], descending=True, stable=True)
    return int(order[min(max(int(rank), 1), len(order)) - 1])


def class_maps(model: torch.nn.Module, x: torch.Tensor, forward: Forward, prefix: int, target: int | None = None,
               rank: int = 1) -> Maps:
    """Every map of :data:`NAMES` for the prepared input x (1, 3, H, W): one eager forward with every layer's
    attention (B, H, T, T) and every block's output recorded and, with classes, the backwards relevance and LeGrad
    need, for class ``target`` (or the class at place ``rank`` of this forward when None); then AttnLRP's own
    forward and backward (:func:`attnlrp`). Gradients are asked for recorded tensors only: no parameter's ``.grad``
    is touched. Turns grad mode on for the class maps (also under ``torch.no_grad``); in inference mode, where no
    graph can be built, each is in ``left_out`` with :data:`NO_GRADIENTS`."""
    p = parts_of(model)
    attns: list[torch.Tensor] = []
    outs = {f"out{i}": (b, "output") for i, b in enumerate(p.blocks)}
    graph = torch.enable_grad() if p.readout is not None else torch.no_grad()  # no class: nothing to differentiate
    with hooks.record_attention(model, lambda _layer, a: attns.append(a)), \
            hooks.capture({"in": (p.blocks[0], "input")} | outs) as seen, graph:
        logits = forward(x)[0]  # (the last tokens, also holding the graph, are not kept)
    z = seen["in"].detach()
    z = z.reshape(z.shape[0], -1, z.shape[-1])[:1]
    out = {"attention": attns[-1][0].detach().double().mean(0)[0, prefix:].numpy(),
           "rollout": np.asarray(att.rollout_cls_mean([a[0].detach() for a in attns]), np.float64)[prefix:]}
    if logits is None or p.readout is None:  # a timm model without a head returns its pooled features
        return Maps(out, None, z, None)
    target, left = target_of(logits, rank) if target is None else int(target), {}
    if logits.requires_grad:  # (grad mode is on for the backwards too, whatever the caller's)
        with torch.enable_grad():
            out["relevance"] = relevance(logits, attns, target, prefix)
            out["legrad"] = legrad(p, [seen[f"out{i}"] for i in range(len(p.blocks))], attns, target, prefix)
            logits, why = logits.detach(), hooks.lrp_refusal(model)
            del attns, seen  # the eager forward's graph goes before AttnLRP's forward builds its own
            if why is None:
                out["attnlrp"] = attnlrp(model, x, forward, target, prefix)
            else:
                left["attnlrp"] = why
    else:
        left = {k: NO_GRADIENTS for k in NEED_A_CLASS}
    return Maps({k: out[k] for k in NAMES if k in out}, logits.detach(), z, target, left)


def relevance(logits: torch.Tensor, attns: list[torch.Tensor], target: int, prefix: int) -> np.ndarray:
    """(N,) Chefer et al.'s relevance for class ``target`` of logits (1, C) from every layer's recorded attention
    (1, H, T, T): R = I, then R <- R + mean_h (grad A ⊙ A)⁺ · R, first layer first; [CLS]'s row over the patches.
    The graph is kept (LeGrad's backwards follow)."""
    grads = torch.autograd.grad(logits.reshape(-1, logits.shape[-1])[0, target], attns, retain_graph=True)
    with torch.no_grad():
        r = torch.eye(attns[0].shape[-1], dtype=torch.float64)
        for a, g in zip(attns, grads):
            r = r + (g[0].double() * a[0].double()).clamp(min=0).mean(0) @ r
    return r[0, prefix:].numpy()


def legrad(p: Parts, outs: list[torch.Tensor], attns: list[torch.Tensor], target: int, prefix: int) -> np.ndarray:
    """(N,) LeGrad (Bousselham et al., ICCV 2025) as its authors' legrad-torch and torchcam 0.5.0 compute it: block
    l's class score s_l = the mean of every one of block l's output tokens ``outs[l]`` (1, T, D), prefix tokens
    included, then the model's final norm, then its readout (:func:`mean_score`); the gradient of s_l[target] with
    respect to layer l's post-softmax attention ``attns[l]`` (1, H, T, T), its positive part, mean over heads and
    query rows, the prefix keys dropped; the mean over layers. vitviz takes every block: torchcam takes the blocks
    its caller names, the authors' wrapper defaults to the last few.
    Not normalised: torchcam's min-max scaling to [0, 1] (its default) is one positive affine map of the whole map,
    which changes no ranking of the patches (no deletion or insertion curve, no rank correlation). One short
    backward per block (each reaches block l's attention only), the graph kept."""
    total = torch.zeros(attns[0].shape[-1] - prefix, dtype=torch.float64)
    for out, a in zip(outs, attns):
        score = mean_score(p, out, prefix)
        (g,) = torch.autograd.grad(score.reshape(-1, score.shape[-1])[0, target], a, retain_graph=True)
        total += g[0].double().clamp(min=0).mean((0, 1))[prefix:]
    return (total / len(attns)).numpy()


def mean_score(p: Parts, out: torch.Tensor, prefix: int) -> torch.Tensor:
    """(1, C) LeGrad's score of one block's output tokens ``out`` (1, T, D): their mean over all T tokens, the
    model's final norm (``p.norm``), then its readout fed ``prefix`` + 1 copies of that one token, so that every
    pooling reads it: [CLS], the patches' mean, [CLS] and the distillation token averaged, [CLS] beside the mean
    all give the head the mean token itself. A model that normalises after pooling (timm's ``fc_norm``: ``p.norm``
    is Identity there) has its fc_norm applied to the mean, as its head does; an attention pool reads the copies
    with its own query (uniform attention over equal keys: its value path and MLP on the mean token)."""
    t = out.reshape(out.shape[0], -1, out.shape[-1])[:1]
    normed = p.norm(t.mean(1, keepdim=True))
    return p.readout(normed.expand(1, prefix + 1, t.shape[-1]))


def attnlrp(model: torch.nn.Module, x: torch.Tensor, forward: Forward, target: int, prefix: int) -> np.ndarray:
    """(N,) AttnLRP (Achtibat et al., ICML 2024) for the logit of class ``target``: one forward of x (1, 3, H, W)
    under :func:`vitviz.models.hooks.lrp_rules` (the model's own numbers, the rules' gradients), one backward to the
    stream entering block 1, z (1, T, D); each patch token's relevance is sum over D of z · grad (lxt 2.1's
    efficient mode). The rules are the paper's AttnLRP: inside attention its rules (the softmax's own gradient, the
    products by the uniform rule), on every linear layer the plain gradient (LRP-0, the epsilon rule without γ). This
    is not lxt's recipe for ViTs, which treats the attention weights as constants (CP-LRP) and suggests γ-rules for
    the linear layers. ValueError for a model whose layers the rules do not cover."""
    with hooks.lrp_rules(model) as entering:
        logits, _ = forward(x)
    z = entering[-1]
    (g,) = torch.autograd.grad(logits.reshape(-1, logits.shape[-1])[0, target], z)
    r = (z.detach().double() * g.double()).sum(-1)
    return r.reshape(r.shape[0], -1)[0, prefix:].numpy()
