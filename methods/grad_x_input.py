"""Gradient × input: ``s_j = sum_d (∂ logit / ∂ e_j)_d · (e_j)_d`` at the word-embedding output (signed).

captum ``LayerGradientXActivation``; summed over the embedding dimension (Shrikumar et al. 2016).
"""

from attrbench.plugin import GradientMethod, captum_attr, register


class GradXInput(GradientMethod):
    name, description = "grad_x_input", "gradient times word embedding, summed over dimensions (signed)"
    reference = "Shrikumar et al. 2016; Denil et al. 2014"
    batched = True

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        attributions = captum_attr().LayerGradientXActivation(forward, layer).attribute(
            input_ids, additional_forward_args=forward.args)
        scores = attributions.detach().sum(-1).double().cpu().numpy()  # (B, n)
        return scores, [{} for _ in scores]


register(GradXInput)
