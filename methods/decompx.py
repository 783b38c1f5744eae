"""DecompX (Modarressi et al. 2023, 'DecompX: Explaining Transformers Decisions by Propagating Token Decomposition').

Every position's hidden state is carried as one vector per input token through all layers, never mixed into
norms in between (``decompose.propagate``), and on through the model's head (``decompose.readout.head_logit``:
the pooler's tanh and the classifier for an encoder classifier, the final norm and the unembedding for a causal
LM, the transform and decoder for a masked LM). Token j's score is its part of the explained logit (or logit
difference), signed:

    DecompX(j) = logit part of P^L[j, t] through the head,   sum_j DecompX(j) + bias = the real logit

Options, as in the authors' code (``DecompXConfig``): ``ff_attribution`` splits every activation (FF and head)
by the exact zero-baseline IG share ``g(s)/s`` (``ig``, their ``GeLU_ZO``/``tanh ZO``) or by the tangent at the
real pre-activation (``decompx``, their ``GeLU_LA``); ``bias_split`` shares every bias, beta and intercept over
the parts (``absdot``, their default, so the scores alone sum to the logit) or keeps them as a bias term
(``none``, recorded in ``meta["bias_logit"]``). The parts are checked against every layer's real output and
the logit against the model's own head on every call (``residual``). The paper covers BERT-style encoders;
Pre-LN decoders (GPT-2, OPT, LLaMA with its gated FF) run the same steps in their order.
"""
import torch

from attrbench.plugin import InputError, Method, MethodResult, Param, default_tolerance, no_head_reason, register
from attrbench.plugin.internal import (
    ACTIVATION_RULES,
    BIAS_SPLITS,
    check_logit,
    head_logit,
    head_steps,
    no_readout_reason,
    propagate,
    real_logits,
)


class DecompX(Method):
    name, family, output = "decompx", "logit", "scores"
    batched = True  # one capture pass and one check pass for all texts
    complete = True
    description = "each token's vector propagated through every layer and the head onto the target logit"
    reference = ("Modarressi et al. 2023, 'DecompX: Explaining Transformers Decisions by Propagating Token "
                 "Decomposition'")
    params = {"ff_attribution": Param("ig", "activations split by exact IG (DecompX's ZO) or by the tangent "
                                            "at the real input (decompx, DecompX's LA)", choices=ACTIVATION_RULES),
              "bias_split": Param("absdot", "biases shared over the tokens' parts (absdot, norm, equal: DecompX's "
                                            "bias_decomp_type) or kept as a bias term (none)", choices=BIAS_SPLITS)}

    needs_layers = True

    def supports(self, adapter):
        return super().supports(adapter) or no_head_reason(adapter) or no_readout_reason(adapter)

    @torch.no_grad()
    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' propagates through all layers; leave layers unset")
        steps, tolerance = head_steps(adapter), default_tolerance(adapter)
        batch = adapter.encode(texts, truncate=truncate)
        captures = adapter.capture(batch)
        reals = real_logits(adapter, targets, [batch.input_ids[b, :n].tolist() for b, n in enumerate(batch.lengths)])
        results = []
        for b, (n, resolved) in enumerate(zip(batch.lengths, targets)):
            t = resolved.row
            seen = t + 1 if adapter.causal else n  # a causal row reads no later position
            caps = [capture.sequence(b, seen) for capture in captures]
            parts, bias = propagate.embedding_parts(caps[0].x)
            for spec, cap in zip(adapter.layers, caps, strict=True):
                parts, bias = propagate.propagate_layer(spec, cap, parts, bias, ff_attribution=self.ff_attribution,
                                                        bias_split=self.bias_split, tolerance=tolerance)
            logits, bias_logit = head_logit(steps, parts[:, t], bias[t], resolved.index, resolved.contrast_index,
                                            activation_rule=self.ff_attribution, bias_split=self.bias_split)
            real, residual = check_logit(adapter, resolved, batch.input_ids[b:b + 1, :n], logits, bias_logit,
                                         tolerance, self.name, reals[b])
            scores = torch.zeros(n, dtype=torch.float64, device=adapter.device)
            scores[:seen] = logits.double()
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], scores.cpu().numpy(), residual, {
                "dtype": str(adapter.dtype).replace("torch.", ""), "truncated": batch.truncated[b], "logit": real,
                "bias_logit": float(bias_logit)}))
        return results


register(DecompX())
