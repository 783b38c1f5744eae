"""What the decomposition engine needs to know about one Transformer layer.

Weights are exposed in ``input x output`` layout (``y = x @ W + b``) whatever the source module
(``nn.Linear`` stores the transpose, GPT-2's ``Conv1D`` does not), so the engine has one code path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import nn


@dataclass
class NormSpec:
    """A LayerNorm (``kind="layer"``: centre, scale, affine) or RMSNorm (``kind="rms"``: scale only)."""

    module: nn.Module
    kind: str
    gamma: Optional[torch.Tensor]
    beta: Optional[torch.Tensor]
    eps: float

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """The divisor ``s(z)`` per token, computed on the full (real) input ``z``: (..., d) -> (...)."""
        if self.kind == "layer":
            return torch.sqrt(z.var(-1, unbiased=False) + self.eps)
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


@dataclass
class LayerSpec:
    """One layer: its modules (hook points for the real forward pass) and weights (for the parts)."""

    index: int
    layer: nn.Module
    norm_first: bool  # Pre-LN (GPT-2, OPT, LLaMA) vs Post-LN (BERT family)
    ln1: NormSpec  # Post-LN: after attention + residual; Pre-LN: before attention
    ln2: NormSpec  # Post-LN: after FF + residual (layer output); Pre-LN: before FF
    value: Linear  # x -> values of all key/value heads, (d, n_kv_heads * head_dim)
    value_module: nn.Module  # its output holds the value vectors (hook point: value zeroing)
    out_proj: Linear  # concatenated heads -> d, (n_heads * head_dim, d)
    attn_out_module: nn.Module  # its output is the attention block output (bias included)
    ff: FeedForwardSpec
    ff_out_module: nn.Module  # its output is the FF block output, before the residual
    n_heads: int
    n_kv_heads: int
    # the value vectors' columns of value_module's output (GPT-2 fuses q, k and v in one projection)
    value_columns: slice = field(default_factory=lambda: slice(None))
    query_module: Optional[nn.Module] = None  # their outputs hold the queries / keys (hook points: AttnLRP)
    key_module: Optional[nn.Module] = None
    query_columns: slice = field(default_factory=lambda: slice(None))
    key_columns: slice = field(default_factory=lambda: slice(None))
    ff_product_module: Optional[nn.Module] = None  # gated FFs: its input is g(x W_gate) * (x W_up)

    @property
    def head_dim(self) -> int:
        return self.out_proj.weight.shape[0] // self.n_heads
