"""ALTI-Logit (Ferrando et al. 2023, 'Explaining How Transformers Use Context to Build Predictions', §3-4).

The explained logit (or, for ``contrast:A/B``, logit(A) - logit(B)) at row t is a sum over the residual
stream: the embedding, every layer's FF output, a bias, and every layer's attention output split over
the tokens it reads, ``Δlogit^l_j`` = the logit of ``T^l_t(x_j)`` through the final norm (its real scale)
and the unembedding (``decompose.readout``). Token j at layer l is itself a mix of the inputs, which
ALTI's rollout of the layers below tracks, ``R^{l-1} = C^{l-1} ··· C^1`` (``R^0 = I``):

    ALTI-Logit(s) = sum_l sum_j Δlogit^l_j · R^{l-1}[j, s]

a signed score per input token (the paper's "logit_attn_full_alti": value biases in the tokens' parts).
The stream's parts are checked against the real logit on every call (``residual``); the scores sum to
the attention share of the logit (``meta["logit_shares"]``), not to the whole of it.

Post-LN encoders (masked LMs, classifiers) are read the same way, with every later norm applied to a
layer's parts with its real scale, and the head's activations (MLM transform, pooler tanh) split by
their exact zero-baseline IG share; the paper itself covers Pre-LN decoders.
"""
import numpy as np
import torch

from attrbench.plugin import InputError, Method, MethodResult, decompose, default_tolerance, no_head_reason, register
from attrbench.plugin.internal import (
    ALTI_MAP,
    VALUE_BIAS_PARAM,
    check_logit,
    head_logit,
    head_steps,
    no_readout_reason,
    real_logits,
    stream_parts,
)


class ALTILogit(Method):
    name, family, output = "alti_logit", "logit", "scores"
    batched = True  # one check pass for all texts (each text decomposed alone)
    description = "each layer's attention parts projected on the target logit, carried to the inputs by ALTI"
    reference = "Ferrando et al. 2023, 'Explaining How Transformers Use Context to Build Predictions'"
    params = {"value_bias": VALUE_BIAS_PARAM}

    needs_layers = True

    def supports(self, adapter):
        return super().supports(adapter) or no_head_reason(adapter) or no_readout_reason(adapter)

    @torch.no_grad()
    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' sums over all layers; leave layers unset")
        steps, tolerance = head_steps(adapter), default_tolerance(adapter)
        batch = adapter.encode(texts, truncate=truncate)
        reals = real_logits(adapter, targets, [batch.input_ids[b, :n].tolist() for b, n in enumerate(batch.lengths)])
        results = []
        for text, resolved, real_logit in zip(texts, targets, reals):
            dec = decompose(adapter, [text], scopes=["attn_n"], derived=[ALTI_MAP], keep_parts=True,
                            keep_captures=True, truncate=truncate, value_bias=self.value_bias)[0]
            n, t = len(dec.tokens), resolved.row
            attention = [(layer["attn_n"][0][t], layer["attn_n"][1][t]) for layer in dec.parts]
            parts, bias = stream_parts(adapter.layers, dec.captures, t, attention, tolerance)
            logits, bias_logit = head_logit(steps, parts, bias, resolved.index, resolved.contrast_index)
            real, residual = check_logit(adapter, resolved, torch.tensor([dec.input_ids], device=adapter.device),
                                         logits, bias_logit, tolerance, self.name, real_logit)
            per_layer = logits[1:].view(adapter.n_layers, n + 1).double().cpu().numpy()  # [l, j]: j < n attention, n FF
            attention_logits = per_layer[:, :n]
            mixing, scores = np.eye(n), np.zeros(n)
            for layer_logits, alti in zip(attention_logits, dec.maps["alti"].astype(np.float64)):
                scores += layer_logits @ mixing  # Δlogit^l_j carried to the inputs through R^{l-1}
                mixing = alti @ mixing
            results.append(MethodResult(self.name, adapter.name, dec.tokens, scores, residual, {
                "dtype": dec.dtype, "truncated": dec.truncated, "logit": real,
                "logit_shares": {"attention": float(attention_logits.sum()), "ff": float(per_layer[:, n].sum()),
                                 "embedding": float(logits[0]), "bias": float(bias_logit)}}))
        return results


register(ALTILogit())
