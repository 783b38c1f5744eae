"""Every position's hidden state carried as one part per input token, through every layer (DecompX).

Modarressi et al. 2023 ("DecompX: Explaining Transformers Decisions by Propagating Token Decomposition")
write the layer input at position k as ``x_k = sum_j P[j, k] + b_k`` and push every part through the layer
without mixing them into norms between layers: attention (``sum_h alpha^h_ik P[j, k] W_V^h W_O^h``), residual,
each norm with the real scale of the whole (the only linearisation), the FF with its activation split per
element (``ff_split.FF_SPLITS``: exact IG = their ``GeLU_ZO``, or their tangent ``GeLU_LA``), residual. At
layer 0 the parts are the tokens themselves (``P[j, k] = [j = k] x_k``).

Constants (biases, betas, the tangent's intercepts) join through ``stages.spread_bias``: kept as a bias term
("none"), or shared over the parts as their ``bias_decomp_type`` does ("absdot", their default). As in their
code, layer 0's value bias travels with each token's own value vector (a position holds one part there), and
later layers' ``b_V W_O + b_O`` joins after the heads are mixed and the residual added.

The parts are checked against every layer's real output: a miss above the tolerance raises.
"""
from __future__ import annotations

import torch

from ..errors import CompletenessError
from ..models.adapter import LayerCapture
from ..models.spec import LayerSpec
from . import stages
from .ff_split import FF_SPLITS


def embedding_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer 0's input (n, d) as parts (n, n, d), ``P[j, k] = [j = k] x_k``, and a zero bias (n, d)."""
    n, d = x.shape
    parts = x.new_zeros(n, n, d)
    diagonal = torch.arange(n, device=x.device)
    parts[diagonal, diagonal] = x
    return parts, torch.zeros_like(x)


def _attention(spec: LayerSpec, probs: torch.Tensor, parts: torch.Tensor, bias: torch.Tensor, first: bool,
               how: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The attention block's output as parts ``sum_h sum_k alpha^h_ik (P[j, k] W_V^h) W_O^h``, their bias, and
    the block's constant (d,), which the caller adds after the residual (where the authors' code shares it)."""
    H, kv, dh = spec.n_heads, spec.n_kv_heads, spec.head_dim
    kv_of_head = torch.arange(H, device=parts.device) // (H // kv)  # grouped-query attention: heads share kv heads
    m, n, _ = parts.shape
    values = torch.cat([parts, bias[None]]) @ spec.value.weight  # (m + 1, n, kv dh), the bias as one more part
    b_v = spec.value.bias
    if first and b_v is not None and how != "none":  # each position holds one token's part at layer 0
        token_values, bias_values = stages.spread_bias(values[:m], values[m], b_v, how)
        values, b_v = torch.cat([token_values, bias_values[None]]), None
    per_head = values.view(m + 1, n, kv, dh)[:, :, kv_of_head]  # (m + 1, n, H, dh)
    mixed = torch.einsum("hik,pkhe->pihe", probs, per_head).reshape(m + 1, n, H * dh) @ spec.out_proj.weight
    constant = torch.zeros_like(mixed[0, 0])
    if b_v is not None:  # attention rows sum to one: the value bias reaches every row as b_V W_O
        constant = constant + torch.einsum("he,hed->d", b_v.view(kv, dh)[kv_of_head],
                                           spec.out_proj.weight.view(H, dh, -1))
    if spec.out_proj.bias is not None:
        constant = constant + spec.out_proj.bias
    return mixed[:m], mixed[m], constant


def _feed_forward(spec: LayerSpec, cap: LayerCapture, parts: torch.Tensor, bias: torch.Tensor, ff_attribution: str,
                  how: str, chunk_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The FF block's output as parts, its input rows in chunks of about ``chunk_bytes``; a mixture of experts' as
    each row's routed experts' parts, weighted as the router weighted them in the forward pass."""
    if spec.experts is None:
        return _one_feed_forward(spec.ff, spec, cap, parts, bias, ff_attribution, how, chunk_bytes)
    out_parts, out_bias = torch.zeros_like(parts), torch.zeros_like(bias)
    for e, rows, weight in stages.routed(cap.expert_ids, cap.expert_weights.to(parts.dtype), len(spec.experts)):
        e_parts, e_bias = _one_feed_forward(spec.experts[e], spec, cap, parts[:, rows], bias[rows], ff_attribution,
                                            how, chunk_bytes, rows)
        out_parts[:, rows] += e_parts * weight[None, :, None]
        out_bias[rows] += e_bias * weight[:, None]
    return out_parts, out_bias


def _one_feed_forward(ff, spec: LayerSpec, cap: LayerCapture, parts: torch.Tensor, bias: torch.Tensor,
                      ff_attribution: str, how: str, chunk_bytes: int, at: torch.Tensor | None = None):
    """One FF's output as parts, for the rows ``at`` of the sequence (all of them by default)."""
    split = FF_SPLITS[ff_attribution]
    ff_in = cap.ln2_out if spec.norm_first else cap.ln1_out
    prepared = split.prepare(ff, ff_in if at is None else ff_in[at])
    projections = [ff.w_in] + ([ff.up] if ff.gated else [])
    m, n, d = parts.shape
    rows_per_chunk = max(1, chunk_bytes // max(1, m * ff.w_out.weight.shape[0] * parts.element_size()))
    out_parts, out_bias = torch.empty_like(parts), torch.empty_like(bias)
    for r0 in range(0, n, rows_per_chunk):
        rows = slice(r0, min(n, r0 + rows_per_chunk))
        pre = [stages.carry_linear(parts[:, rows], bias[rows], p, how) for p in projections]
        act = split.split(ff, prepared, pre, rows, 0, 0)
        act_parts, act_bias = stages.spread_bias(act.parts, torch.zeros_like(act.bias), act.bias, how)
        out_parts[:, rows], out_bias[rows] = stages.carry_linear(act_parts, act_bias, ff.w_out, how)
    return out_parts, out_bias


def propagate_layer(spec: LayerSpec, cap: LayerCapture, parts: torch.Tensor, bias: torch.Tensor, *,
                    ff_attribution: str, bias_split: str, tolerance: float,
                    chunk_bytes: int = 32 * 2**20) -> tuple[torch.Tensor, torch.Tensor]:
    """Parts (m, n, d) and bias (n, d) of one layer's input -> the same of its output (checked against it)."""
    first = spec.index == 0
    if spec.norm_first:  # Pre-LN: x + ATTN(LN1(x)), then + FF(LN2(.)); a sandwich block norms each sublayer's
        # output before its residual add, a parallel one feeds the FF the layer input
        layer_in = parts, bias
        normed = stages.carry_norm(parts, bias, spec.ln1, spec.ln1.scale(cap.ln1_in), bias_split)
        attn_parts, attn_bias, constant = _attention(spec, cap.attn_probs, *normed, first, bias_split)
        if spec.attn_post_norm is not None:  # the block's constant is normed with the rest of its output
            attn_parts, attn_bias = stages.carry_norm(attn_parts, attn_bias + constant, spec.attn_post_norm,
                                                      spec.attn_post_norm.scale(cap.attn_post_in), bias_split)
            constant = torch.zeros_like(constant)
        parts, bias = stages.spread_bias(parts + attn_parts, bias + attn_bias, constant, bias_split)
        ff_in = stages.carry_norm(*(layer_in if spec.parallel else (parts, bias)), spec.ln2,
                                  spec.ln2.scale(cap.ln2_in), bias_split)
        ff_parts, ff_bias = _feed_forward(spec, cap, *ff_in, ff_attribution, bias_split, chunk_bytes)
        if spec.ff_post_norm is not None:
            ff_parts, ff_bias = stages.carry_norm(ff_parts, ff_bias, spec.ff_post_norm,
                                                  spec.ff_post_norm.scale(cap.ff_post_in), bias_split)
        parts, bias = parts + ff_parts, bias + ff_bias
    else:  # Post-LN: LN1(x + ATTN(x)), then LN2(. + FF(.))
        attn_parts, attn_bias, constant = _attention(spec, cap.attn_probs, parts, bias, first, bias_split)
        parts, bias = stages.spread_bias(parts + attn_parts, bias + attn_bias, constant, bias_split)
        parts, bias = stages.carry_norm(parts, bias, spec.ln1, spec.ln1.scale(cap.ln1_in), bias_split)
        ff_parts, ff_bias = _feed_forward(spec, cap, parts, bias, ff_attribution, bias_split, chunk_bytes)
        parts, bias = stages.carry_norm(parts + ff_parts, bias + ff_bias, spec.ln2, spec.ln2.scale(cap.ln2_in),
                                        bias_split)
    residual = stages.relative_residual(parts.sum(0), bias, cap.out)
    if not residual <= tolerance:
        raise CompletenessError(f"the propagated parts miss the real output of layer {spec.index} by {residual:.2e} "
                                f"(relative, tolerance {tolerance:.0e}); this is a bug in attrbench: please report it")
    return parts, bias
