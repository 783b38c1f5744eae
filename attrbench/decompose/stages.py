"""The steps a layer's output is decomposed through, each written once and reused by every scope.

A decomposition of rows ``i`` (a chunk of c output tokens) is ``parts`` (m, c, d) — stored
input-major, ``parts[j, i]`` is the vector ``F_i(x_j)`` that input token ``j`` contributes, so the
batched head mixing writes exactly the layout the FF projection reads, with no copy — plus
``bias`` (c, d), with ``y_i = sum_j parts[j, i] + bias[i]`` (completeness). References: Kobayashi et al. 2020/2021/2024,
Ferrando et al. 2022; the derivations are in docs/architecture.md and in each docstring.
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import torch

from ..models.spec import LayerSpec, Linear, NormSpec
from ..ops.numeric import safe_divide


def value_vectors(spec: LayerSpec, attn_in: torch.Tensor, value_bias: str,
                  ln_parts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head transformed values ``v^h_j = (x_j W_V^h + b_V^h) W_O^h`` (n, H, d) and the ATTN bias.

    ``value_bias="token"`` keeps every constant of the value path (b_V, and a Pre-LN's beta) in the
    token's vector, as the reference code of Kobayashi 2020/2021 and ALTI does; ``"bias"`` moves it
    to the bias (``b_V W_O + b_O``, Kobayashi 2024 Eq. 7) — exact either way because attention rows
    sum to one. ``ln_parts`` is the token part of a Pre-LN's LN1 output (without beta).
    """
    H, kv, dh = spec.n_heads, spec.n_kv_heads, spec.head_dim
    w_o = spec.out_proj.weight.reshape(H, dh, -1)
    kv_of_head = torch.arange(H, device=w_o.device) // (H // kv)  # grouped-query attention: heads share kv heads

    def per_head(v: torch.Tensor) -> torch.Tensor:  # (..., kv*dh) -> (..., H, dh)
        return v.reshape(*v.shape[:-1], kv, dh)[..., kv_of_head, :]

    bias = spec.out_proj.bias if spec.out_proj.bias is not None else torch.zeros_like(w_o[0, 0])
    if value_bias == "token":
        values = per_head(spec.value(attn_in))
    else:
        token_in = attn_in if ln_parts is None else ln_parts
        values = per_head(token_in @ spec.value.weight)
        constant = spec.value(attn_in[:1] - token_in[:1])[0]  # b_V (+ beta W_V for Pre-LN)
        bias = bias + torch.einsum("he,hed->d", per_head(constant), w_o)
    return torch.einsum("nhe,hed->nhd", values, w_o), bias


class Workspace:
    """Reusable flat buffers for the large per-chunk tensors.

    Fresh multi-MB tensors are mmap-ed and page-faulted on every chunk (a third of the run time at
    n = 128 on 2 cores); reusing one buffer per role avoids it.
    """

    def __init__(self):
        self._buffers: dict[str, torch.Tensor] = {}

    def get(self, role: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        size = int(np.prod(shape))
        buf = self._buffers.get(role)
        if buf is None or buf.numel() < size or buf.dtype != like.dtype:
            buf = self._buffers[role] = torch.empty(size, dtype=like.dtype, device=like.device)
        return buf[:size].view(shape)


def mix_heads(alpha_t: torch.Tensor, per_head: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_h alpha[h, i, j] * per_head[j, h]``: (m, c, H) x (m, H, k) -> (m, c, k), one batched matmul.

    Both operands input-major and contiguous (``alpha_t = alpha.permute(2, 1, 0)``): batched GEMM
    with K = H is 3x slower on strided operands.
    """
    return torch.bmm(alpha_t, per_head, out=out)


def routed(expert_ids: torch.Tensor, weights: torch.Tensor, experts: int):
    """Per expert a mixture routed some of these rows to: (expert, its rows, their router weights), from the (c, k)
    expert ids and weights the forward pass used; an id of ``experts`` or more (a router's "no expert") is skipped."""
    for e in torch.unique(expert_ids).tolist():
        if e >= experts:
            continue
        hit = expert_ids == e
        rows = hit.any(-1).nonzero().flatten()
        yield e, rows, (weights * hit).sum(-1)[rows]


def add_to_own_token(parts: torch.Tensor, rows: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Residual connection: token i's own input goes to the part of j = i (in place)."""
    parts[rows, torch.arange(len(rows), device=parts.device)] += residual
    return parts


def norm_parts(parts: torch.Tensor, bias: torch.Tensor, norm: NormSpec, scale: torch.Tensor,
               inplace: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm/RMSNorm of a sum, split linearly with the real scale ``s(z)`` (c,).

    ``LN(sum_j z_j + b) = sum_j (z_j - m(z_j)) / s * gamma + [(b - m(b)) / s * gamma + beta]``;
    RMSNorm is the same without centring. ``inplace`` reuses ``parts`` when the caller is done with it.
    """
    factor = 1 / scale[:, None] if norm.gamma is None else norm.gamma / scale[:, None]  # (c, d)
    if not inplace:
        parts = parts.clone()
    if norm.kind == "layer":
        parts.sub_(parts.mean(-1, keepdim=True))
        bias = bias - bias.mean(-1, keepdim=True)
    parts.mul_(factor)
    bias = bias * factor
    if norm.beta is not None:
        bias = bias + norm.beta
    return parts, bias


def folded_norm_weight(norm: NormSpec, linear: Linear) -> torch.Tensor:
    """``W' = C diag(gamma) W`` so that ``norm_part(z) @ W = (z @ W') / s`` (C centres for LayerNorm).

    Lets the FF's first projection act on the n per-head value vectors once, instead of on all
    n^2 parts: ``n H d d' + n^2 H d'`` multiply-adds instead of ``n^2 d d'``.
    """
    w = linear.weight if norm.gamma is None else norm.gamma[:, None] * linear.weight
    return w - w.mean(0, keepdim=True) if norm.kind == "layer" else w


def _activation_slope(activation, points: torch.Tensor) -> torch.Tensor:
    """g'(points) by autograd (works for any element-wise activation module)."""
    points = points.detach().requires_grad_(True)
    with torch.enable_grad():
        (slope,) = torch.autograd.grad(activation(points).sum(), points)
    return slope


def ig_share(activation, total: torch.Tensor) -> torch.Tensor:
    """Exact zero-baseline IG of ``g(sum_j p_j)`` in closed form: ``IG_j = p_j * g(s) / s``.

    ``∫_0^1 g'(a s) da = (g(s) - g(0)) / s`` with g(0) = 0: the integral splits g(s) in proportion
    to the parts, no quadrature needed. At s -> 0 the factor tends to g'(0).
    """
    out = activation(total)
    tiny = total.abs() <= torch.finfo(total.dtype).tiny ** 0.5
    safe = torch.where(tiny, torch.ones_like(total), total)
    return torch.where(tiny, _activation_slope(activation, total.new_zeros(1)), out / safe)


def tangent(activation, total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The tangent of ``g`` at the real pre-activation ``s`` (DecompX's GeLU_LA, Modarressi et al. 2023): slope
    ``g'(s)`` for every part, intercept ``g(s) - g'(s) s`` as a new constant; the sum is exactly ``g(s)``."""
    slope = _activation_slope(activation, total)
    return slope, activation(total) - slope * total


_GL_NODES = 96


@functools.lru_cache(maxsize=None)
def _gauss_legendre_unit(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of count-point Gauss-Legendre quadrature on [0, 1]."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    return (nodes + 1) / 2, weights / 2


def gated_ig_factors(activation, gate_total: torch.Tensor,
                     up_total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact IG factors of ``g(S_a) * S_c`` along the straight path from zero (gated FF).

    ``IG(a_j) = a_j * S_c * I1``, ``IG(c_j) = c_j * I0`` with ``I0 = ∫ g(t S_a) dt`` and
    ``I1 = ∫ t g'(t S_a) dt = (g(S_a) - I0) / S_a``. I0 is one shared 1-D integral per element
    (Gauss-Legendre); I1 from the identity keeps completeness exact. Returns (S_c * I1, I0).
    """
    nodes, weights = (torch.as_tensor(a, dtype=gate_total.dtype, device=gate_total.device)
                      for a in _gauss_legendre_unit(_GL_NODES))
    i0 = torch.zeros_like(gate_total)
    for t, w in zip(nodes, weights):
        i0 += w * activation(t * gate_total)
    small = gate_total.abs() < 1e-3  # there (g(S) - I0) / S cancels: integrate t g'(t S) directly
    safe = torch.where(small, torch.ones_like(gate_total), gate_total)
    i1 = (activation(gate_total) - i0) / safe
    if small.any():
        slope = _activation_slope(activation, nodes[:, None] * gate_total[small][None, :])
        i1[small] = (weights[:, None] * nodes[:, None] * slope).sum(0)
    return up_total * i1, i0


def l1_proximity(parts: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """ALTI's contributions (Ferrando et al. 2022, Eq. 9-10) of (m, c, d) parts to outputs (c, d).

    ``C_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1) / sum_k (same)``; returned as (m, c).
    """
    proximity = (output.abs().sum(-1) - (output - parts).abs().sum(-1)).clamp_min_(0)
    return safe_divide(proximity, proximity.sum(0))


def relative_residual(parts_sum: torch.Tensor, bias: torch.Tensor, real: torch.Tensor) -> float:
    """max_i ||sum_j parts + bias - y_i|| / ||y_i||: how far the decomposition is from the forward.

    Not a safe division: an error against an all-zero output must show as huge, never as 0."""
    err = torch.linalg.vector_norm(parts_sum + bias - real, dim=-1)
    ref = torch.linalg.vector_norm(real, dim=-1).clamp_min(torch.finfo(real.dtype).tiny)
    return float((err / ref).max())


# How a constant (a bias, a norm's beta, an activation's intercept) joins a decomposition: kept as the bias term
# ("none"), or shared over the parts of each row as DecompX's bias_decomp_type does (Modarressi et al. 2023).
BIAS_SPLITS = ("absdot", "norm", "equal", "none")
# How an element-wise activation acts on parts: exact zero-baseline IG share g(s)/s ("ig", DecompX's ZO), or
# the tangent at the real pre-activation ("decompx", DecompX's LA) with its intercept as a new constant.
ACTIVATION_RULES = ("ig", "decompx")


def spread_bias(parts: torch.Tensor, bias: torch.Tensor, constant: torch.Tensor,
                how: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Add ``constant`` ((c, d) or (d,)) to the decomposition (parts (m, c, d), bias (c, d)); exact either way.

    ``how``: "none" adds it to the bias term; "absdot" shares it over row i's parts by |<part, constant>|, "norm"
    by ||part||, "equal" evenly over the non-zero parts. A row whose weights are all zero keeps it in the bias.
    """
    if how == "none":
        return parts, bias + constant
    constant = constant.expand_as(bias)
    if how == "absdot":
        weights = torch.einsum("mcd,cd->mc", parts, constant).abs_()
    else:
        norms = torch.linalg.vector_norm(parts, dim=-1)
        weights = norms if how == "norm" else (norms != 0).to(parts.dtype)
    total = weights.sum(0)
    parts = parts + safe_divide(weights, total)[..., None] * constant
    return parts, bias + torch.where((total > 0)[:, None], torch.zeros_like(constant), constant)


def carry_linear(parts: torch.Tensor, bias: torch.Tensor, linear: Linear, how: str):
    """Parts (m, c, d) and bias (c, d) through ``x @ W + b``: W acts on each, b joins as ``how`` says."""
    parts, bias = parts @ linear.weight, bias @ linear.weight
    return (parts, bias) if linear.bias is None else spread_bias(parts, bias, linear.bias, how)


def carry_norm(parts: torch.Tensor, bias: torch.Tensor, norm: NormSpec, scale: torch.Tensor, how: str):
    """A norm with the real scale (c,) of the whole (``norm_parts``); its beta joins as ``how`` says."""
    parts, bias = norm_parts(parts, bias, replace(norm, beta=None), scale)
    return (parts, bias) if norm.beta is None else spread_bias(parts, bias, norm.beta, how)


def carry_activation(parts: torch.Tensor, bias: torch.Tensor, activation, total: torch.Tensor, rule: str,
                     how: str):
    """An element-wise activation of the real pre-activation ``total`` (c, d), split by ``rule``."""
    if rule == "ig":
        share = ig_share(activation, total)
        return parts * share, bias * share
    slope, intercept = tangent(activation, total)
    return spread_bias(parts * slope, bias * slope, intercept, how)
