"""What the decomposition engine needs to know about one Transformer layer.

Weights are exposed in ``input x output`` layout (``y = x @ W + b``) whatever the source module
(``nn.Linear`` stores the transpose, GPT-2's ``Conv1D`` does not), so the engine has one code path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import torch
from torch import nn


@dataclass
class NormSpec:
    """A LayerNorm (``kind="layer"``: centre, scale, affine), an RMSNorm (``kind="rms"``: scale only) or no norm at
    all (``kind="identity"``: ModernBERT's first layer, OLMo 2's missing pre-norms), so every block has one shape.

    ``gamma`` is the gain the norm multiplies by, whatever the module stores (Gemma keeps ``w`` and multiplies by
    ``1 + w``; ``architectures.norm_spec`` reads which)."""

    module: Optional[nn.Module]
    kind: str
    gamma: Optional[torch.Tensor]
    beta: Optional[torch.Tensor]
    eps: float

    @classmethod
    def identity(cls) -> "NormSpec":
        return cls(None, "identity", None, None, 0.0)

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """The divisor ``s(z)`` per token, computed on the full (real) input ``z``: (..., d) -> (...)."""
        if self.kind == "layer":
            return torch.sqrt(z.var(-1, unbiased=False) + self.eps)
        if self.kind == "identity":
            return z.new_ones(z.shape[:-1])
        return torch.sqrt(z.pow(2).mean(-1) + self.eps)


@dataclass
class Linear:
    """``y = x @ weight + bias`` with ``weight`` of shape (in, out)."""

    weight: torch.Tensor
    bias: Optional[torch.Tensor]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.weight
        return y if self.bias is None else y + self.bias


@dataclass
class FeedForwardSpec:
    """``W_out(g(x W_in))``, or the gated form ``W_out(g(x W_gate) * (x W_up))`` when ``up`` is set."""

    w_in: Linear  # the (gate) projection whose pre-activation g is applied to
    up: Optional[Linear]
    w_out: Linear
    activation: Callable[[torch.Tensor], torch.Tensor]

    @property
    def gated(self) -> bool:
        return self.up is not None


# Columns of a module's output: a slice, or (a per-head interleaved fused projection, GPT-NeoX's query_key_value)
# an index tensor.
Columns = Union[slice, torch.Tensor]


@dataclass
class LayerSpec:
    """One layer: its modules (hook points for the real forward pass) and weights (for the parts).

    Pre-LN blocks come in these shapes, all read by one engine: serial (GPT-2, LLaMA: ``x + A(LN1 x)``, then
    ``h + F(LN2 h)``), with a norm after each sublayer too (``attn_post_norm``/``ff_post_norm``: Gemma 2/3's
    sandwich, OLMo 2's post-norm with identity pre-norms), ``parallel`` (GPT-NeoX, GPT-J, Phi-2:
    ``x + A(LN1 x) + F(LN2 x)``, both sublayers reading the layer input), and a mixture of experts as the FF
    (``experts``: Mixtral, OLMoE, Qwen3-MoE).
    """

    index: int
    layer: nn.Module
    norm_first: bool  # Pre-LN (GPT-2, OPT, LLaMA) vs Post-LN (BERT family)
    ln1: NormSpec  # Post-LN: after attention + residual; Pre-LN: before attention
    ln2: NormSpec  # Post-LN: after FF + residual (layer output); Pre-LN: before FF
    value: Linear  # x -> values of all key/value heads, (d, n_kv_heads * head_dim)
    value_module: nn.Module  # its output holds the value vectors (hook point: value zeroing)
    out_proj: Linear  # concatenated heads -> d, (n_heads * head_dim, d)
    attn_out_module: nn.Module  # its output is what attention adds to the residual stream (bias and post-norm in)
    ff: FeedForwardSpec
    ff_out_module: nn.Module  # its output is what the FF adds to the residual stream (post-norm included)
    n_heads: int
    n_kv_heads: int
    # the value vectors' columns of value_module's output (GPT-2 fuses q, k and v in one projection)
    value_columns: Columns = field(default_factory=lambda: slice(None))
    query_module: Optional[nn.Module] = None  # their outputs hold the queries / keys (hook points: AttnLRP)
    key_module: Optional[nn.Module] = None
    query_columns: Columns = field(default_factory=lambda: slice(None))
    key_columns: Columns = field(default_factory=lambda: slice(None))
    ff_product_module: Optional[nn.Module] = None  # gated FFs: its input is g(x W_gate) * (x W_up)
    attn_post_norm: Optional[NormSpec] = None  # Pre-LN: a norm on the attention output before the residual add
    ff_post_norm: Optional[NormSpec] = None  # Pre-LN: a norm on the FF output before the residual add
    parallel: bool = False  # Pre-LN: the FF reads the layer input, not the attention's residual stream
    # a mixture of experts: the FF is each token's routed experts, weighted by the router (``ff`` is expert 0, for
    # what they share: shape and activation); the module whose call receives (states, expert ids, weights)
    experts: Optional[list[FeedForwardSpec]] = None
    experts_module: Optional[nn.Module] = None

    @property
    def structure(self) -> str:
        """The block's shape in words (docs/architecture.md, "Block shapes")."""
        if not self.norm_first:
            return "post-ln"
        if self.parallel:
            return "parallel"
        if self.experts:
            return "experts"
        return "sandwich" if self.attn_post_norm or self.ff_post_norm else "pre-ln"

    @property
    def head_dim(self) -> int:
        return self.out_proj.weight.shape[0] // self.n_heads
