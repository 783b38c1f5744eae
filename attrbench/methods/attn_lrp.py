"""AttnLRP (Achtibat et al. 2024, 'AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for Transformers').

LRP in its efficient form: relevance = word embedding × a modified gradient of the explained logit,
summed over dimensions. The rules change only the backward pass; forward hooks put them on the
unmodified model for the duration of one call, and every forward value stays the model's own:

* norms (LayerNorm, RMSNorm): the identity rule, the scale held constant (gradient of the linear map
  ``gamma (x - mean) / sigma`` with the real sigma);
* element-wise activations (FF, MLM transform, pooler): the identity rule, gradient ``g(x) / x``
  (the zero-baseline IG share of ``stages.ig_share``);
* products of two activations, split uniformly (Eq. 7): the value side of ``A V`` gets 1/2; queries and
  keys 1/4 each (1/2 for the ``A`` side of ``A V``, times 1/2 for ``q k``); the gate product of a gated FF 1/2;
* softmax: its plain gradient, which in the input × gradient form is the paper's softmax rule
  ``R_i = x_i (R^out_i - s_i sum_j R^out_j)``.

The same rules as the reference implementation (lxt 2.1, ``lxt/efficient``), which patches the
classes of transformers instead.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from attrbench.plugin import (
    Activation,
    GradientMethod,
    captum_attr,
    head_steps,
    no_readout_reason,
    norm_spec,
    register,
    stages,
)


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; the gradient times ``factor`` (a scalar or one factor per column)."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.save_for_backward(factor)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        (factor,) = ctx.saved_tensors
        return grad * factor, None


def _norm_identity_rule(module, args, out):
    x, norm = args[0], norm_spec(module)
    centred = x if norm.kind == "rms" else x - x.mean(-1, keepdim=True)
    linear = centred / norm.scale(x).detach()[..., None] * (1 if norm.gamma is None else norm.gamma)
    bias = 0 if norm.beta is None else norm.beta - norm.beta.detach()  # keeps the bias's own gradient
    return out.detach() + (linear - linear.detach()) + bias  # the forward value is the module's own


def _activation_identity_rule(module, args, out):
    x = args[0]
    linear = x * stages.ig_share(module.forward, x.detach()).detach()  # .forward: no hooks inside the hook
    return out.detach() + (linear - linear.detach())


def _scale_columns(module_output_width: int, scales: list[tuple[slice, float]], like: torch.Tensor):
    factor = torch.ones(module_output_width, dtype=like.dtype, device=like.device)
    for columns, scale in scales:
        factor[columns] = scale
    return factor


@contextmanager
def attn_lrp_rules(adapter):
    """Put AttnLRP's rules on ``adapter.model`` for the duration of a block (forward values unchanged)."""
    model, handles = adapter.model, []
    divisions: dict[nn.Module, list[tuple[slice, float]]] = {}
    activations: set[nn.Module] = set()  # a module may be shared: one hook each
    try:
        for spec in adapter.layers:
            for module, columns, scale in ((spec.query_module, spec.query_columns, 0.25),
                                           (spec.key_module, spec.key_columns, 0.25),
                                           (spec.value_module, spec.value_columns, 0.5)):
                divisions.setdefault(module, []).append((columns, scale))
            activations.add(spec.ff.activation)
            if spec.ff.gated:  # the product g(x W_gate) * (x W_up): its relevance split evenly between the two
                handles.append(spec.ff_product_module.register_forward_pre_hook(
                    lambda module, args: (_ScaleGradient.apply(args[0], args[0].new_tensor(0.5)),)))
        activations.update(step.fn for step in head_steps(adapter) if isinstance(step, Activation))
        for module, scales in divisions.items():
            def divide(module, args, out, scales=scales):
                return _ScaleGradient.apply(out, _scale_columns(out.shape[-1], scales, out))
            handles.append(module.register_forward_hook(divide))
        for module in activations:
            handles.append(module.register_forward_hook(_activation_identity_rule))
        for module in model.modules():
            if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm"):
                handles.append(module.register_forward_hook(_norm_identity_rule))
        yield
    finally:
        for handle in handles:
            handle.remove()


class AttnLRP(GradientMethod):
    name, family = "attn_lrp", "lrp"
    description = "LRP with AttnLRP's rules for norms, activations, attention products and softmax (signed)"
    reference = "Achtibat et al. 2024, 'AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for Transformers'"

    def supports(self, adapter):
        reason = super().supports(adapter) or no_readout_reason(adapter)
        if reason:
            return reason
        functional = [s for s in head_steps(adapter) if isinstance(s, Activation) and not isinstance(s.fn, nn.Module)]
        if functional or any(not isinstance(spec.ff.activation, nn.Module) for spec in adapter.layers):
            return "it applies an activation as a function, which AttnLRP's hooks cannot reach (RoBERTa's MLM head)"
        return None

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        with attn_lrp_rules(adapter):
            relevance = captum_attr().LayerGradientXActivation(forward, layer).attribute(
                input_ids, additional_forward_args=(attention_mask,))
        return relevance[0].detach().sum(-1).double().cpu().numpy(), {}


register(AttnLRP)
