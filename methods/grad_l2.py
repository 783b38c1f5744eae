"""grad-L2: the L2 norm of the target logit's gradient at each token's word embedding, normalised.

``s_j = ||∂ logit / ∂ e_j||_2 / sum_k ||∂ logit / ∂ e_k||_2`` (captum ``LayerGradientXActivation``
with ``multiply_by_inputs=False``). The reference of the ALTI paper's SST-2 faithfulness protocol.
"""

from attrbench.plugin import GradientMethod, captum_attr, register
from attrbench.plugin.internal import safe_divide


class GradL2(GradientMethod):
    name, description = "grad_l2", "L2 norm of the gradient at the word-embedding output, normalised"
    reference = "Li et al. 2016; the SST-2 reference in Ferrando et al. 2022"
    batched = True

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        grads = captum_attr().LayerGradientXActivation(forward, layer, multiply_by_inputs=False).attribute(
            input_ids, additional_forward_args=forward.args)
        norms = (grads.detach().norm(dim=-1) * attention_mask).double().cpu().numpy()  # (B, n); padding 0
        return safe_divide(norms, norms.sum(-1, keepdims=True)), [{} for _ in norms]


register(GradL2)
