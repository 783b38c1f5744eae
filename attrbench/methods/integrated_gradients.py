"""Integrated Gradients (Sundararajan et al. 2017) at the word-embedding output.

``IG_j = sum_d (e_j - e'_j)_d ∫_0^1 ∂ logit(e' + a (e - e')) / ∂ e_{j,d} da`` with captum
``LayerIntegratedGradients`` (Gauss-Legendre, ``n_steps``), summed over dimensions. The baseline
``e'`` embeds the text with every non-special token replaced by ``baseline`` (default: the pad
token; special tokens as in ``attrbench.ops.tokens``). captum's convergence delta δ (sum of attributions
minus the score difference F(x) − F(x')) is reported, and ``relative_delta`` = |δ| / |F(x) − F(x')|,
the share of the explained score that the quadrature leaves unaccounted for. On SmolLM2 with the
pad baseline it stays near or above 1 even at 200 steps (the integrand is not smooth along the
path); read its integrated gradients with that in mind.
"""

from attrbench.plugin import BASELINE_PARAM, GradientMethod, Param, baseline_ids, captum_attr, register


class IntegratedGradients(GradientMethod):
    name, description = "integrated_gradients", "Integrated Gradients at the word-embedding output (captum)"
    reference = "Sundararajan et al. 2017"

    params = {"n_steps": Param(50, "Gauss-Legendre steps", minimum=1),
              "baseline": BASELINE_PARAM}

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        values = self.get_params()
        baselines = baseline_ids(adapter, input_ids, values["baseline"])
        attributions, delta = captum_attr().LayerIntegratedGradients(forward, layer).attribute(
            input_ids, baselines=baselines, additional_forward_args=(attention_mask,), n_steps=values["n_steps"],
            method="gausslegendre", return_convergence_delta=True)
        scores = attributions[0].detach().sum(-1).double().cpu().numpy()
        explained = float(scores.sum() - delta.double().sum())  # F(x) - F(x'), by captum's definition of delta
        return (scores, {"convergence_delta": float(delta.abs().max()), "n_steps": values["n_steps"],
                         "relative_delta": float(abs(delta.double().sum()) / max(abs(explained), 1e-12)),
                         "baseline": values["baseline"]})


register(IntegratedGradients)
