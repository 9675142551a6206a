"""Hooks: reading what a model computes during one forward, always removed afterwards.

Models run their fused attention (timm's ``fused_attn``, transformers' SDPA): it never builds an H·T·T matrix.
``record_keys`` reads each layer's projected queries and keys on that fused path (hooks on the projections), which
is all an attention row needs. ``record_attention`` hands every layer's post-softmax attention to a callback; it
needs the eager path, which :func:`eager_attention` switches on for the length of one forward (timm's flags,
transformers' implementation) and always switches back: only the views that need the matrices themselves (a
backward through them, the model's own row to check ours against) pay for it. ``capture`` records named modules'
inputs or outputs. ``attention_parts`` names the pieces of one attention layer of a timm or transformers ViT
(projections, head count, scale) and ``blocks`` lists the transformer blocks. ``lrp_rules`` gives a forward AttnLRP's
gradients (its numbers stay the model's own) for the length of one block.

Every hook lives in a context manager that removes it on exit, also when the forward raises. Every hook is put on
through :func:`on_output` or :func:`on_input`, which call it only for forwards of the thread that put it on: two
requests' forwards may run on one model side by side (:class:`vitviz.models.runner.ModelLock`), and each sees its
own numbers alone. What changes a module for everyone (:func:`eager_attention`) runs only with the model alone.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

_TIMM_ATTN = re.compile(r"(^|\.)blocks\.\d+\.attn$")
_HF_ATTN = re.compile(r"(^|\.)(encoder\.layer|layers)\.\d+\.attention$")


def _own_thread(hook: Callable) -> Callable:
    """``hook``, called only from the thread that made it: another thread's forward on the same module passes by."""
    owner = threading.get_ident()

    @functools.wraps(hook)
    def mine(*args, **kwargs):
        return hook(*args, **kwargs) if threading.get_ident() == owner else None
    return mine


def on_output(module: torch.nn.Module, hook: Callable) -> torch.utils.hooks.RemovableHandle:
    """``hook(module, args, output)`` after each forward of ``module`` by this thread (never another's)."""
    return module.register_forward_hook(_own_thread(hook))


def on_input(module: torch.nn.Module, hook: Callable) -> torch.utils.hooks.RemovableHandle:
    """``hook(module, args, kwargs)`` before each forward of ``module`` by this thread (never another's)."""
    return module.register_forward_pre_hook(_own_thread(hook), with_kwargs=True)


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The self-attention modules of a timm or transformers ViT, in layer order."""
    mods = [m for name, m in model.named_modules() if _TIMM_ATTN.search(name) or _HF_ATTN.search(name)]
    if not mods:
        raise ValueError(f"{type(model).__name__} has no ViT attention layers we know how to read.")
    return mods


@contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """Inside this block ``model`` computes attention the eager way (every layer's (B, H, T, T) softmax is a tensor
    hooks can see): timm's ``fused_attn`` flags off, transformers' implementation "eager". Restored on exit, also
    when the body raises. Run only under the model's lock (another request's forward would see the switch)."""
    flags: list[tuple[torch.nn.Module, bool]] = []
    configs: list[tuple[object, str | None]] = []
    try:
        for mod in attention_modules(model):
            if hasattr(mod, "fused_attn"):  # timm
                flags.append((mod, mod.fused_attn))
                mod.fused_attn = False
        for sub in model.modules():
            cfg = getattr(sub, "config", None)
            if cfg is not None and hasattr(cfg, "_attn_implementation") and all(cfg is not c for c, _ in configs):
                configs.append((cfg, cfg._attn_implementation))
                cfg._attn_implementation = "eager"
        yield
    finally:
        for mod, flag in flags:
            mod.fused_attn = flag
        for cfg, impl in configs:
            cfg._attn_implementation = impl


@contextmanager
def record_attention(model: torch.nn.Module, on_attention: Callable[[int, torch.Tensor], None]) -> Iterator[int]:
    """Call ``on_attention(layer, attn)`` with post-softmax attn (B, H, T, T) for each layer in each forward (the
    eager path, :func:`eager_attention`, for the length of the block).

    Yields the number of layers. All hooks are removed and the fused paths restored on exit, also when the body
    raises.
    """
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def hf_hook(layer: int):
        def hook(_mod, _inp, out):
            weights = out[1] if isinstance(out, tuple) and len(out) > 1 else None
            if weights is None:
                raise RuntimeError("This model returned no attention weights on its eager path.")
            on_attention(layer, weights)
        return hook

    with eager_attention(model):
        try:
            for layer, mod in enumerate(attention_modules(model)):
                if hasattr(mod, "fused_attn") and hasattr(mod, "attn_drop"):  # timm: the softmax enters attn_drop
                    handles.append(on_output(mod.attn_drop,
                                             lambda _m, inp, _out, layer=layer: on_attention(layer, inp[0])))
                else:  # transformers: forward returns (output, attention weights)
                    handles.append(on_output(mod, hf_hook(layer)))
            yield len(handles)
        finally:
            for h in handles:
                h.remove()


@contextmanager
def capture(targets: dict[str, tuple[torch.nn.Module, str]]) -> Iterator[dict[str, torch.Tensor]]:
    """Record, for each name, the first tensor of ``module``'s "input" or "output" in the forward run inside.

    Yields a dict filled as the forward runs (the last forward wins). Every hook is removed on
    exit, also when the body raises.
    """
    seen: dict[str, torch.Tensor] = {}
    handles = []

    def first(value):
        while isinstance(value, (tuple, list)):
            value = value[0]
        return value

    def output(name: str):
        return lambda _mod, _inp, out: seen.__setitem__(name, first(out))

    def entering(name: str):  # a pre-hook: some libraries pass a block's input as a keyword
        def record(_mod, args, kwargs):
            seen[name] = first(args) if args else first(next(iter(kwargs.values())))
        return record

    try:
        for name, (module, where) in targets.items():
            if where == "output":
                handles.append(on_output(module, output(name)))
            elif where == "input":
                handles.append(on_input(module, entering(name)))
            else:
                raise ValueError(f"capture {name!r}: 'input' or 'output', not {where!r}")
        yield seen
    finally:
        for h in handles:
            h.remove()


@dataclass
class AttentionParts:
    """One attention layer's pieces, whichever library built it.

    ``targets`` are what :func:`capture` needs to see the projected q, k, v (each (B, T, H·d),
    or a joint "qkv" (B, T, 3·H·d) in timm) and "heads_out" (B, T, H·d): every head's weighted sum
    of values, side by side, as the output projection receives it.
    """

    module: torch.nn.Module
    heads: int
    head_dim: int
    scale: float
    targets: dict[str, tuple[torch.nn.Module, str]]
    joint_qkv: bool

    def split(self, seen: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q, k, v), each (H, T, d), for the first image of the captured forward (timm's q/k norms applied)."""
        q, k, v = self.split_batch(seen)
        return q[0], k[0], v[0]

    def split_batch(self, seen: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q, k, v), each (B, H, T, d), for every image of the captured forward (timm's q/k norms applied)."""
        h, d = self.heads, self.head_dim
        if self.joint_qkv:
            qkv = seen["qkv"]
            b, t = qkv.shape[:2]
            q, k, v = qkv.reshape(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
            return self.module.q_norm(q), self.module.k_norm(k), v
        return tuple(self.heads_of_batch(seen[n]) for n in ("q", "k", "v"))  # type: ignore[return-value]

    def heads_of(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H·d) -> (H, T, d), the first image, one head per row."""
        return self.heads_of_batch(x)[0]

    def heads_of_batch(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H·d) -> (B, H, T, d)."""
        b, t = x.shape[:2]
        return x.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)


def attention_parts(model: torch.nn.Module, layer: int,
                    mods: list[torch.nn.Module] | None = None) -> AttentionParts:
    """The parts of attention layer ``layer`` (0-based) of a timm or transformers ViT (``mods``: its
    :func:`attention_modules`, when the caller has them: finding them walks every module)."""
    mods = attention_modules(model) if mods is None else mods
    if not 0 <= layer < len(mods):
        raise ValueError(f"This model has attention layers 1 to {len(mods)}; there is no layer {layer + 1}.")
    mod = mods[layer]
    if hasattr(mod, "qkv"):  # timm: one joint projection; the heads' outputs go through `norm` (usually identity)
        after = mod.norm if isinstance(getattr(mod, "norm", None), torch.nn.Module) else mod.proj
        return AttentionParts(mod, mod.num_heads, mod.head_dim, float(mod.scale),
                              {"qkv": (mod.qkv, "output"), "heads_out": (after, "input")}, True)
    if hasattr(mod, "q_proj"):  # transformers 5: ViT, DINOv2 (with registers)
        heads = int(getattr(mod, "num_attention_heads", None) or mod.config.num_attention_heads)
        return AttentionParts(mod, heads, int(mod.head_dim), float(mod.scaling),
                              {"q": (mod.q_proj, "output"), "k": (mod.k_proj, "output"), "v": (mod.v_proj, "output"),
                               "heads_out": (mod.o_proj, "input")}, False)
    raise ValueError(f"Cannot take the attention of {type(mod).__name__} apart.")


@contextmanager
def record_keys(model: torch.nn.Module,
                on_qk: Callable[[int, torch.Tensor, torch.Tensor, float], None]) -> Iterator[int]:
    """Call ``on_qk(layer, q, k, scale)`` with each layer's projected queries and keys, each (B, H, T, d), of every
    image of each forward (timm's q/k norms applied: what the model's own scores use) and the layer's score scale,
    as soon as they are computed (nothing of the forward is held for later). Works on the fused path: the hooks sit
    on the projections, which every path runs.

    Yields the number of layers; every hook is removed on exit, also when the body raises.
    """
    handles: list[torch.utils.hooks.RemovableHandle] = []
    mods = attention_modules(model)
    layers = len(mods)
    try:
        for layer in range(layers):
            parts = attention_parts(model, layer, mods)
            if parts.joint_qkv:
                def joint(_m, _inp, out, layer=layer, parts=parts):
                    q, k, _ = parts.split_batch({"qkv": out})
                    on_qk(layer, q, k, parts.scale)
                handles.append(on_output(parts.targets["qkv"][0], joint))
                continue
            seen: dict[str, torch.Tensor] = {}

            def one(name, layer=layer, parts=parts, seen=seen):
                def hook(_m, _inp, out):
                    seen[name] = parts.heads_of_batch(out)
                    if len(seen) == 2:
                        on_qk(layer, seen.pop("q"), seen.pop("k"), parts.scale)
                return hook
            for name in ("q", "k"):
                handles.append(on_output(parts.targets[name][0], one(name)))
        yield layers
    finally:
        for handle in handles:
            handle.remove()


# ---- AttnLRP's rules as gradients (gradient × input) ----------------------------------------------------------

LRP_EPSILON = 1e-10
"""Added to a nonlinearity's input before the ratio output / input (the identity rule), as lxt 2.1 does."""


class _GradThrough(torch.autograd.Function):
    """``value`` in the forward (a copy: the module's own numbers), the gradient of ``surrogate`` in the backward."""

    @staticmethod
    def forward(ctx, value: torch.Tensor, surrogate: torch.Tensor) -> torch.Tensor:
        return value.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, grad


class _Ratio(torch.autograd.Function):
    """The identity rule on an element-wise nonlinearity out = f(inp): the forward gives ``out``; the backward
    multiplies the gradient by out / (inp + ε) (so inp · gradient = out · the output's gradient)."""

    @staticmethod
    def forward(ctx, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(out / (inp + LRP_EPSILON))
        return out.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, grad * ctx.saved_tensors[0]


class _Scaled(torch.autograd.Function):
    """The uniform rule on a product's factors: the forward gives ``x``; the backward multiplies the gradient by
    ``scale`` (a float or a tensor broadcast over the last dimension)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale) -> torch.Tensor:
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad * ctx.scale, None


def _layer_norm_rule(m: torch.nn.LayerNorm, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """LayerNorm's output ``out`` with the gradient of (x - mean) / std · weight + bias, std held constant."""
    mean = x.mean(-1, keepdim=True)
    std = ((x - mean) ** 2).mean(-1, keepdim=True).add(m.eps).sqrt().detach()
    y = (x - mean) / std
    y = y * m.weight if m.weight is not None else y
    y = y + m.bias if m.bias is not None else y
    return _GradThrough.apply(out, y)


def mlp_activation(block: torch.nn.Module) -> torch.nn.Module | None:
    """The element-wise nonlinearity (GELU) of a timm or transformers ViT block's MLP; None for a gated MLP (SwiGLU,
    GLU: the rules would need the product's uniform rule inside its forward) or one vitviz cannot find."""
    mlp = getattr(block, "mlp", None) or getattr(block, "intermediate", None)
    act = None
    for name in ("act", "activation_fn", "activation", "intermediate_act_fn"):
        act = act or getattr(mlp, name, None)
    if mlp is None or "glu" in type(mlp).__name__.lower() or not isinstance(act, torch.nn.Module):
        return None
    return act


def _stream_norms(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Every norm from the stream entering block 1 on (the embedding's own left out)."""
    return [m for name, m in model.named_modules() if "norm" in type(m).__name__.lower() and "embed" not in name]


def lrp_refusal(model: torch.nn.Module) -> str | None:
    """Why :func:`lrp_rules` cannot cover ``model``'s layers, in words, or None when it can."""
    try:
        mods = attention_modules(model)
        for layer in range(len(mods)):
            attention_parts(model, layer, mods)
    except ValueError as e:
        return f"AttnLRP needs attention layers vitviz can take apart: {e}"
    if any(getattr(mod, "gate", None) is not None for mod in mods):
        return "AttnLRP: this model gates its attention output, which vitviz's rules do not cover."
    missing = [type(b).__name__ for b in blocks(model) if mlp_activation(b) is None]
    if missing:
        return f"AttnLRP needs MLPs with one element-wise nonlinearity (GELU); {missing[0]}'s MLP is not one."
    other = sorted({type(m).__name__ for m in _stream_norms(model)
                    if not isinstance(m, torch.nn.LayerNorm) or len(m.normalized_shape) != 1})
    if other:
        return f"AttnLRP's rules cover LayerNorm over the channels only; this model has {', '.join(other)}."
    return None


@contextmanager
def lrp_rules(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """Inside this block a forward of the timm or transformers ViT ``model`` computes its usual numbers, and its
    backward is AttnLRP's (Achtibat et al. 2024) in the gradient × input form of lxt 2.1's efficient mode:

    - every LayerNorm by the identity rule on its division (the standard deviation held constant);
    - each MLP's element-wise nonlinearity by the identity rule (its gradient is output / input);
    - the attention's two products by the uniform rule: the gradients of the queries and keys divided by 4, of the
      values by 2 (the softmax keeps its plain gradient);
    - linear layers, residual sums, LayerScale, pooling: their plain gradient (gradient × input is their LRP).

    Dropout must be off (``model.eval()``). Yields a list that each forward appends the stream entering block 1 to
    ((B, T, D), patches embedded, positions added), as a leaf that requires grad: sum over D of
    ``z * grad(logit, z)`` is each token's relevance. The rules are hooks on the projections' outputs, so the fused
    attention path (SDPA) keeps working. Every hook is removed on exit, also when the body raises; a model whose
    layers the rules do not cover (:func:`lrp_refusal`: a gated MLP, gated attention, another kind of norm) raises
    ValueError first.
    Run under the model's lock, alone (hooks are per thread, but the caller owns the model's forward)."""
    refusal = lrp_refusal(model) or ("AttnLRP needs the model in eval mode (dropout off)." if model.training else None)
    if refusal is not None:
        raise ValueError(refusal)
    mods = attention_modules(model)
    acts = [mlp_activation(b) for b in blocks(model)]
    norms = _stream_norms(model)
    entering: list[torch.Tensor] = []
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def leaf(_m, args, kwargs):
        if args:
            entering.append(args[0].detach().requires_grad_(True))
            return (entering[-1], *args[1:]), kwargs
        name = next(iter(kwargs))
        entering.append(kwargs[name].detach().requires_grad_(True))
        return args, {**kwargs, name: entering[-1]}

    def scaled(scale):
        return lambda _m, _inp, out: _Scaled.apply(out, scale.to(out) if torch.is_tensor(scale) else scale)

    try:
        handles.append(on_input(blocks(model)[0], leaf))
        for m in norms:
            handles.append(on_output(m, lambda m, inp, out: _layer_norm_rule(m, inp[0], out)))
        for act in acts:
            handles.append(on_output(act, lambda _m, inp, out: _Ratio.apply(out, inp[0])))
        for layer in range(len(mods)):
            parts = attention_parts(model, layer, mods)
            if parts.joint_qkv:  # (B, T, 3·H·d): queries, keys, values side by side
                width = parts.heads * parts.head_dim
                scale = torch.tensor([0.25] * (2 * width) + [0.5] * width)
                handles.append(on_output(parts.targets["qkv"][0], scaled(scale)))
            else:
                for name, scale in (("q", 0.25), ("k", 0.25), ("v", 0.5)):
                    handles.append(on_output(parts.targets[name][0], scaled(scale)))
        yield entering
    finally:
        for handle in handles:
            handle.remove()


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a timm or transformers ViT, in order (each one's output is the token stream)."""
    if hasattr(model, "blocks"):
        return list(model.blocks)
    base = getattr(model, "base_model", model)  # transformers: a model with a head keeps its ViT as base_model
    return list(base.encoder.layer if hasattr(base, "encoder") else base.layers)  # DINOv2 / ViT in transformers 5
