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

from attrbench.plugin import GradientMethod, axiom_check, default_tolerance, register
from attrbench.plugin.internal import Activation, forward_hooks, head_steps, no_readout_reason, norm_spec, stages


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


def _keep_per_text(store: list, texts: int):
    """A forward hook that keeps a module's output with one row per text: an output shared by the batch (positions'
    (1, n, d), broadcast on addition) is handed on expanded, so its gradient is each text's own."""
    def hook(module, args, out):
        if out.shape[0] == 1 and texts > 1:
            out = out.expand(texts, *out.shape[1:])
        store.append((out, slice(None)))
        return out
    return hook


def _bias_probe(probes: list, bias: torch.Tensor, texts: int):
    """A forward hook adding a zero (texts, 1, width) leaf to a module's output, kept with ``bias``: its gradient
    is, per text, the summed gradient of the output, i.e. what the module's additive bias gets from that text."""
    def hook(module, args, out):
        probe = out.new_zeros((texts, 1, out.shape[-1]), requires_grad=True)
        probes.append((probe, bias))  # rows in text order, also where a model flattens (B, n) to B·n (OPT's FF)
        return (out.reshape(texts, -1, out.shape[-1]) + probe).reshape(out.shape)
    return hook


def _bias_owners(model: nn.Module):
    """(Linear-like, norm) lists of (module, bias) for every trainable bias, each bias once, or None when a bias sits
    in a module whose output it does not simply add to (its share could not be told apart per text)."""
    kinds = {"linear": lambda m: isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D",
             "norm": lambda m: isinstance(m, nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")}
    found: dict[str, list] = {kind: [] for kind in kinds}
    for name, p in model.named_parameters():
        if not (name.endswith("bias") and p.requires_grad):
            continue
        owners = [m for m in model.modules() if getattr(m, "bias", None) is p]
        kind = next((k for k, is_kind in kinds.items() if any(map(is_kind, owners))), None)
        if kind is None:
            return None
        found[kind].append((next(filter(kinds[kind], owners)), p))
    return found["linear"], found["norm"]


def _parent(model: nn.Module, child: nn.Module) -> nn.Module:
    return next(m for m in model.modules() if any(c is child for c in m.children()))


class AttnLRP(GradientMethod):
    name, family = "attn_lrp", "lrp"
    axiom = "conservation"
    description = "LRP with AttnLRP's rules for norms, activations, attention products and softmax (signed)"
    reference = "Achtibat et al. 2024, 'AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for Transformers'"
    batched = True  # a padded batch of texts in one forward and one backward pass (:meth:`attribute`)
    needs_layers = True  # its rules hook each layer's norms, activations and attention products

    def supports(self, adapter):
        reason = super().supports(adapter) or no_readout_reason(adapter)
        if reason:
            return reason
        config = adapter.model.config
        if getattr(config, "attn_logit_softcapping", None):
            return "its attention scores are soft-capped (tanh), for which AttnLRP has no rule"
        if any(spec.experts for spec in adapter.layers):
            return ("its experts compute their gate products inside one fused module and weight them by the router, "
                    "where AttnLRP's hooks cannot reach")
        if config.model_type == "deberta-v2":
            return "its disentangled attention adds relative-position scores, for which AttnLRP has no rule"
        functional = [s for s in head_steps(adapter) if isinstance(s, Activation) and not isinstance(s.fn, nn.Module)]
        if functional or any(not isinstance(spec.ff.activation, nn.Module) for spec in adapter.layers):
            return ("it applies an activation as a function, which AttnLRP's hooks cannot reach (RoBERTa's heads: "
                    "gelu, tanh)")
        return None

    def groups(self, adapter, lengths):
        """Padded batches where every bias's share can be told apart per text (:func:`_bias_owners`), else one text
        at a time."""
        if _bias_owners(adapter.model) is None:
            return [[b] for b in range(len(lengths))]
        return super().groups(adapter, lengths)

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        """Input × modified gradient at the word embeddings of a padded batch, each text's sinks from the same pass:
        every kept tensor has a row per text, and a bias's share is its value times the gradient of a zero probe
        added where it is added (a parameter's own gradient would sum the texts)."""
        model, texts = adapter.model, len(input_ids)
        words, others, queries_keys, weights, probes = [], [], [], [], []
        owners = _bias_owners(model)
        linear_biases, norm_biases = owners or ([], [])
        hooks = [(layer, _keep(words))] + [(m, _keep_per_text(others, texts)) for m in model.modules()
                                            if isinstance(m, nn.Embedding) and m is not layer]
        for spec in adapter.layers:  # registered before the rules' hooks: they see the projections' own outputs
            hooks += [(spec.query_module, _keep(queries_keys, spec.query_columns)),
                      (spec.key_module, _keep(queries_keys, spec.key_columns)),
                      (_parent(model, spec.query_module), _keep(weights, which=1))]  # eager: (output, weights)
        # a Linear's bias is added before the rules scale its output's gradient; a norm's after its rule's identity
        hooks += [(module, _bias_probe(probes, bias, texts)) for module, bias in linear_biases]
        after_rules = [(module, _bias_probe(probes, bias, texts)) for module, bias in norm_biases]
        with forward_hooks(hooks), attn_lrp_rules(adapter), forward_hooks(after_rules):
            logits = forward(input_ids, attention_mask)
        # a bias that is not simply added (one text at a time, :meth:`groups`): its parameter's own gradient
        parameters = [] if owners is not None else [
            p for name, p in model.named_parameters() if name.endswith("bias") and p.requires_grad]
        groups = {"words": words, "others": others, "queries_keys": queries_keys, "weights": weights}
        kept = [t for group in groups.values() for t, _ in group] + [probe for probe, _ in probes] + parameters
        grads = iter(torch.autograd.grad(logits.sum(), kept, allow_unused=True))
        per_text = {name: torch.zeros(texts, dtype=torch.float64, device=logits.device) for name in groups}
        products = {name: [] for name in groups}  # input × gradient of each kept tensor, a row per text
        for name, group in groups.items():
            for tensor, columns in group:
                grad = next(grads)
                if grad is not None:
                    products[name].append((tensor[..., columns] * grad[..., columns]).detach().double())
                    per_text[name] += products[name][-1].flatten(1).sum(1)
        word_scores = products["words"][0].sum(-1) * attention_mask.to(torch.float64)
        bias_share = torch.zeros(texts, dtype=torch.float64, device=logits.device)
        for (_, bias), grad in zip(probes, grads):
            if grad is not None:
                bias_share += (grad.detach().double()[:, 0] * bias.detach().double()).sum(-1)
        for parameter, grad in zip(parameters, grads):  # one text: the parameter's gradient is that text's
            if grad is not None:
                bias_share += float((parameter.detach().double() * grad.double()).sum())
        scores, metas = word_scores.cpu().numpy(), []
        for b in range(texts):
            sinks = {"other_embeddings": float(per_text["others"][b]), "biases": float(bias_share[b]),
                     "softmax": float(per_text["weights"][b]) / 2 - float(per_text["queries_keys"][b])}
            explained, words_total = float(logits[b].detach()), float(scores[b].sum())
            metas.append({"axiom": axiom_check(
                "conservation", words_total + sum(sinks.values()), explained, default_tolerance(adapter), sinks=sinks,
                input_share=words_total / max(abs(explained), 1e-12))})
        return scores, metas


register(AttnLRP)
