"""Integrated Gradients (Sundararajan et al. 2017) at the word-embedding output.

``IG_j = sum_d (e_j - e'_j)_d ∫_0^1 ∂ logit(e' + a (e - e')) / ∂ e_{j,d} da`` with captum
``LayerIntegratedGradients`` (Gauss-Legendre, ``n_steps``), summed over dimensions. The baseline
``e'`` embeds the text with every non-special token replaced by ``baseline`` (default: the pad
token; special tokens as in ``attrbench.tokens``). captum's convergence delta δ (sum of attributions
minus the score difference F(x) − F(x')) is reported, and ``relative_delta`` = |δ| / |F(x) − F(x')|,
the share of the explained score that the quadrature leaves unaccounted for. On SmolLM2 with the
pad baseline it stays near or above 1 even at 200 steps (the integrand is not smooth along the
path); read its integrated gradients with that in mind.
"""
import torch
from captum.attr import LayerIntegratedGradients

from attrbench.errors import InputError
from attrbench.gradients import GradientMethod
from attrbench.params import Param
from attrbench.registry import METHODS
from attrbench.tokens import special_mask

BASELINES = ("pad", "mask", "unk", "eos")


class IntegratedGradients(GradientMethod):
    name, description = "integrated_gradients", "Integrated Gradients at the word-embedding output (captum)"
    reference = "Sundararajan et al. 2017"

    params = {"n_steps": Param(50, "Gauss-Legendre steps", minimum=1),
              "baseline": Param("pad", "token the baseline puts in place of every non-special token",
                                choices=BASELINES)}

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        tok, values = adapter.tokenizer, self.get_params()
        baseline_id = dict(zip(BASELINES, (tok.pad_token_id, tok.mask_token_id, tok.unk_token_id,
                                           tok.eos_token_id)))[values["baseline"]]
        if baseline_id is None:
            raise InputError(f"baseline token '{values['baseline']}' is not available for '{adapter.name}': "
                             f"use one of {', '.join(BASELINES)} that it has")
        special = torch.from_numpy(special_mask(adapter, input_ids[0].tolist()))
        baselines = torch.where(special, input_ids[0], baseline_id)[None]
        attributions, delta = LayerIntegratedGradients(forward, layer).attribute(
            input_ids, baselines=baselines, additional_forward_args=(attention_mask,), n_steps=values["n_steps"],
            method="gausslegendre", return_convergence_delta=True)
        scores = attributions[0].detach().sum(-1).double().numpy()
        explained = float(scores.sum() - delta.double().sum())  # F(x) - F(x'), by captum's definition of delta
        return (scores, {"convergence_delta": float(delta.abs().max()), "n_steps": values["n_steps"],
                         "relative_delta": float(abs(delta.double().sum()) / max(abs(explained), 1e-12)),
                         "baseline": values["baseline"]})


METHODS.add(IntegratedGradients)
