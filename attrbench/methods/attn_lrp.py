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

Conservation (``meta["axiom"]``): the explained logit equals the relevance of the word embeddings plus what
the sinks take, each measured in the same backward pass as input × gradient: the other embeddings
(positions, token types), every bias, and each softmax's leak (the paper's softmax rule is not
conservative: the attention weights hold half the relevance of ``A V``, of which only part reaches the
queries and keys). The residual |words + sinks − logit| / |logit| is float rounding (tolerance
``attrbench.plugin.default_tolerance``); ``input_share`` = words / logit is how much of the logit reaches
the tokens, and ``sinks`` what each sink took.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from attrbench.plugin import (
    Activation,
    GradientMethod,
    axiom_check,
    default_tolerance,
    forward_hooks,
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


def _keep(store: list, columns=slice(None), which: int | None = None):
    """A forward hook that keeps (a column slice of) a module's output, or of its ``which``-th output."""
    def hook(module, args, out):
        store.append(((out if which is None else out[which]), columns))
    return hook


def _parent(model: nn.Module, child: nn.Module) -> nn.Module:
    return next(m for m in model.modules() if any(c is child for c in m.children()))


class AttnLRP(GradientMethod):
    name, family = "attn_lrp", "lrp"
    axiom = "conservation"
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
        """Input × modified gradient at the word embeddings, with every sink's share from the same pass."""
        model = adapter.model
        words, others, queries_keys, weights = [], [], [], []
        hooks = [(layer, _keep(words))] + [(m, _keep(others)) for m in model.modules()
                                            if isinstance(m, nn.Embedding) and m is not layer]
        for spec in adapter.layers:  # registered before the rules' hooks: they see the projections' own outputs
            hooks += [(spec.query_module, _keep(queries_keys, spec.query_columns)),
                      (spec.key_module, _keep(queries_keys, spec.key_columns)),
                      (_parent(model, spec.query_module), _keep(weights, which=1))]  # eager: (output, weights)
        biases = [(p, slice(None)) for name, p in model.named_parameters() if name.endswith("bias") and p.requires_grad]
        with forward_hooks(hooks), attn_lrp_rules(adapter):
            logit = forward(input_ids, attention_mask)[0]
        groups = {"words": words, "others": others, "queries_keys": queries_keys, "weights": weights, "biases": biases}
        kept = [t for group in groups.values() for t, _ in group]
        grads = iter(torch.autograd.grad(logit, kept, allow_unused=True))
        products = {name: [] for name in groups}  # input × gradient of each kept tensor
        for name, group in groups.items():
            for tensor, columns in group:
                grad = next(grads)
                if grad is not None:
                    products[name].append((tensor[..., columns] * grad[..., columns]).detach().double())

        def total(name: str) -> float:
            return sum(float(p.sum()) for p in products[name])

        sinks = {"other_embeddings": total("others"), "biases": total("biases"),
                 "softmax": total("weights") / 2 - total("queries_keys")}
        scores = products["words"][0][0].sum(-1).cpu().numpy()
        explained = float(logit.detach())
        axiom = axiom_check("conservation", scores.sum() + sum(sinks.values()), explained, default_tolerance(adapter),
                            sinks=sinks, input_share=float(scores.sum()) / max(abs(explained), 1e-12))
        return scores, {"axiom": axiom}


register(AttnLRP)
