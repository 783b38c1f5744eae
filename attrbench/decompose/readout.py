"""The explained logit as a sum over the residual stream at one row, and on through the model's head.

Two steps, each exact (checked against the real forward pass):

* :func:`stream_parts` writes the last hidden state at row t as the embedding ``x^0_t``, every layer's
  attention output split into one part per input token ``T^l_t(x_j)`` (the engine's ``attn_n`` parts),
  every layer's FF output, and a bias. In a Pre-LN model the stream is a plain sum; in a Post-LN model
  every later norm acts on the parts linearly with its real scale (``stages.norm_parts``).
* :func:`head_logit` carries (K, d) parts through the head's steps (``models.heads``): linear maps, norms
  with their real scale, and element-wise activations split by the exact zero-baseline IG share
  ``g(s)/s`` of the real pre-activation (``stages.ig_share``), then onto the explained logit
  (or logit difference). The parts' logits plus the bias's equal the real logit.

Ferrando et al. 2023 (ALTI-Logit) read decoders this way through the final norm; Modarressi et al. 2023
(DecompX) carry their parts through the pooler's tanh and the classifier the same way, optionally with the
tangent of each activation and every constant shared over the parts (``head_logit``'s options).
"""
from __future__ import annotations

import torch

from ..errors import CompletenessError
from ..ops.tokens import pad_ids
from ..models.heads import Activation, HeadStep
from ..models.spec import Linear, NormSpec
from . import stages


def _check(name: str, parts: torch.Tensor, bias: torch.Tensor, real: torch.Tensor, tolerance: float) -> None:
    residual = stages.relative_residual(parts.sum(0), bias, real)
    if not residual <= tolerance:
        raise CompletenessError(f"the residual stream's parts miss the real {name} by {residual:.2e} (relative, "
                                f"tolerance {tolerance:.0e}); this is a bug in attrbench: please report it")


def _norm(parts: torch.Tensor, bias: torch.Tensor, norm: NormSpec, real_in: torch.Tensor):
    """(K, d) parts of one row through a norm with the real scale of ``real_in`` (d,)."""
    normed, normed_bias = stages.carry_norm(parts[:, None], bias[None], norm, norm.scale(real_in)[None], "none")
    return normed[:, 0], normed_bias[0]


def stream_parts(layers, captures, row: int, attention: list[tuple[torch.Tensor, torch.Tensor]],
                 tolerance: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(1 + L (n + 1), d) parts of the last hidden state at ``row`` and its (d,) bias.

    Row 0 is the embedding; layer l owns rows ``1 + l (n + 1) + j`` (its attention part from token j, for
    j < n) and ``1 + l (n + 1) + n`` (its FF output). ``attention[l]`` is that layer's (n, d) attention
    parts at the row and their (d,) bias (the engine's ``attn_n`` scope); ``captures`` are the layers'
    real tensors for one sequence. The parts are checked against every layer's real output.
    """
    parts = captures[0].x[row][None]
    bias = torch.zeros_like(parts[0])
    for spec, cap, (attn_parts, attn_bias) in zip(layers, captures, attention, strict=True):
        parts, bias = torch.cat([parts, attn_parts]), bias + attn_bias
        if not spec.norm_first:
            parts, bias = _norm(parts, bias, spec.ln1, cap.ln1_in[row])
        parts = torch.cat([parts, cap.ff_out[row][None]])
        if not spec.norm_first:
            parts, bias = _norm(parts, bias, spec.ln2, cap.ln2_in[row])
        _check(f"output of layer {spec.index}", parts, bias, cap.out[row], tolerance)
    return parts, bias


def head_logit(steps: list[HeadStep], parts: torch.Tensor, bias: torch.Tensor, index: int,
               contrast_index: int | None = None, *, activation_rule: str = "ig",
               bias_split: str = "none") -> tuple[torch.Tensor, torch.Tensor]:
    """(K,) logit of each part of the head's input and the bias's logit: logit ``index`` (minus
    ``contrast_index``) of the last linear step. They sum to the real logit (the caller checks).

    Activations are split by ``activation_rule`` and every constant of the head joins as ``bias_split`` says
    (``stages.ACTIVATION_RULES``, ``stages.BIAS_SPLITS``); the defaults keep the constants in the bias."""
    *body, last = steps
    parts, bias = parts[:, None], bias[None]  # one row: (K, 1, d), (1, d)
    for step in body:
        if isinstance(step, Linear):
            parts, bias = stages.carry_linear(parts, bias, step, bias_split)
        elif isinstance(step, Activation):  # of the real input s: the bias takes its share too
            parts, bias = stages.carry_activation(parts, bias, step.fn, parts.sum(0) + bias, activation_rule,
                                                  bias_split)
        else:
            parts, bias = stages.carry_norm(parts, bias, step, step.scale(parts.sum(0) + bias), bias_split)
    if bias_split != "none" and last.bias is not None:  # shared by the parts' vectors of all logits, as DecompX
        parts, bias = stages.carry_linear(parts, bias, last, bias_split)
        if contrast_index is None:
            return parts[:, 0, index], bias[0, index]
        return parts[:, 0, index] - parts[:, 0, contrast_index], bias[0, index] - bias[0, contrast_index]
    parts, bias = parts[:, 0], bias[0]
    column = last.weight[:, index] - (0 if contrast_index is None else last.weight[:, contrast_index])
    constant = parts.new_zeros(()) if last.bias is None else (
        last.bias[index] - (0 if contrast_index is None else last.bias[contrast_index]))
    return parts @ column, bias @ column + constant


def real_logits(adapter, targets, sequences, batch_size: int = 64) -> list[float]:
    """Each token sequence's explained logit at its target's row from the model's own head, in right-padded
    passes of ``batch_size`` (passes no decomposition's parts came from): what :func:`check_logit` checks against."""
    out = []
    for start in range(0, len(sequences), batch_size):
        ids, mask = pad_ids(sequences[start:start + batch_size], adapter.tokenizer.pad_token_id, adapter.device)
        chunk = targets[start:start + batch_size]
        logits = adapter.row_logits([t.row for t in chunk], input_ids=ids, attention_mask=mask)
        out += [float(t.logit(logits[k:k + 1])[0]) for k, t in enumerate(chunk)]
    return out


def check_logit(adapter, resolved, input_ids: torch.Tensor, logits: torch.Tensor, bias_logit: torch.Tensor,
                tolerance: float, method: str, real: float | None = None) -> tuple[float, float]:
    """The real logit from the model's own head on the same tokens (a pass the parts did not come from; ``real``
    where :func:`real_logits` computed it with other texts) and the parts' relative miss,
    ``|sum + bias - real| / sum |terms|``; a miss above ``tolerance`` raises."""
    if real is None:
        real = float(resolved.logit(adapter.row_logits(resolved.row, input_ids=input_ids))[0])
    residual = abs(float(logits.sum() + bias_logit) - real) / float(logits.abs().sum() + abs(bias_logit))
    if not residual <= tolerance:
        raise CompletenessError(f"{method}'s parts miss the real logit {real:.4g} by {residual:.2e} (relative); "
                                "this is a bug in attrbench: please report it")
    return real, residual
