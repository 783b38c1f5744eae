"""Integrated Gradients (Sundararajan et al. 2017) at the word-embedding output.

``IG_j = sum_d (e_j - e'_j)_d ∫_0^1 ∂ logit(e' + a (e - e')) / ∂ e_{j,d} da`` with captum
``LayerIntegratedGradients`` (Gauss-Legendre, ``n_steps``), summed over dimensions. The baseline
``e'`` embeds the text with every non-special token replaced by ``baseline`` (default: the pad
token). captum's convergence delta (sum of attributions minus the score difference) is reported.
"""
import torch
from captum.attr import LayerIntegratedGradients

from attrbench.errors import InputError
from attrbench.gradients import GradientMethod
from attrbench.registry import METHODS


class IntegratedGradients(GradientMethod):
    name, description = "integrated_gradients", "Integrated Gradients at the word-embedding output (captum)"
    reference = "Sundararajan et al. 2017"

    def __init__(self, n_steps: int = 50, baseline: str = "pad"):
        if n_steps < 1:
            raise InputError("integrated_gradients needs n_steps >= 1")
        self.n_steps, self.baseline = n_steps, baseline

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        tok = adapter.tokenizer
        baseline_id = {"pad": tok.pad_token_id, "mask": tok.mask_token_id, "unk": tok.unk_token_id,
                       "eos": tok.eos_token_id}.get(self.baseline)
        if baseline_id is None:
            raise InputError(f"baseline token '{self.baseline}' is not available for '{adapter.name}': "
                             "use pad, mask, unk or eos")
        special = torch.tensor(tok.get_special_tokens_mask(input_ids[0].tolist(), already_has_special_tokens=True),
                               dtype=torch.bool)
        baselines = torch.where(special, input_ids[0], baseline_id)[None]
        attributions, delta = LayerIntegratedGradients(forward, layer).attribute(
            input_ids, baselines=baselines, additional_forward_args=(attention_mask,), n_steps=self.n_steps,
            method="gausslegendre", return_convergence_delta=True)
        return (attributions[0].detach().sum(-1).double().numpy(),
                {"convergence_delta": float(delta.abs().max()), "n_steps": self.n_steps, "baseline": self.baseline})


METHODS.add(IntegratedGradients)
