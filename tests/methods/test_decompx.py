"""DecompX equals a by-hand recomputation of the authors' algorithm, and an independent gradient identity.

The authors' code (mohsenfayyaz/DecompX, ``src/modeling_bert.py``) is a modified copy of transformers 4's BERT,
not a package: it cannot run here. ``_authors_steps`` redoes its steps from HF's own BERT modules, with no part
of attrbench: per layer, the values of every token's vector through ``alpha`` and ``W_O`` (layer 0: the real
values, b_V included), residual, each bias shared by ``|<vector, bias>|`` ("absdot"), each LayerNorm with the
real sigma, the FF by ``GELU(s)/s`` (ZO) or the tangent at s (LA, the intercept shared like a bias), then the
pooler's tanh (the same two rules) and the classifier.

Independently, with the biases kept apart and the IG/ZO rule, DecompX is linear in layer 0's input, so token
j's score must equal ``x_j . d logit / d x_j`` of the unmodified model with the attention weights, every norm's
scale and every activation's ratio ``g(s)/s`` frozen (for a gated FF: the IG integrals of ``g(a) c``). That is
checked on a BERT classifier, GPT-2, OPT and LLaMA with autograd through HF's modules.
"""
import math

import numpy as np
import pytest
import torch

import attrbench
from attrbench.decompose import ff_split, stages
from attrbench.errors import CompletenessError, InputError
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.spec import FeedForwardSpec, Linear
from attrbench.models.tiny import TINY_MODELS, tiny_classifier
from attrbench.ops.targets import resolve_text
from attrbench.registry import METHODS
from tests.precision import float32_stages, gamma

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are on the table"
# the bounds docs/methods.md quotes, relative to the largest score: against the authors' steps (measured 1e-15) and
# against the frozen gradient (measured 1e-15; 1e-9 on OPT and 1e-7 on LLaMA, whose softmax / RMSNorm HF runs in
# float32)
AUTHORS = 1e-12
FROZEN = {"classifier": 1e-12, "tiny-gpt2": 1e-12, "tiny-opt": 1e-8, "tiny-llama": 1e-6}
DECOMPX = METHODS.get("decompx")


def _bert_classifier(layers=2):
    return TransformerAdapter(*tiny_classifier("bert", layers), "tiny-bert-classifier")


def _share(vectors, bias):
    """The authors' absdot: ``bias`` (positions, D) shared over vectors (positions, tokens, D)."""
    weights = torch.einsum("skd,sd->sk", vectors, bias.expand(vectors.shape[0], -1)).abs()
    return vectors + (weights / weights.sum(-1, keepdim=True))[..., None] * bias.expand(vectors.shape[0], -1)[:, None]


def _ln(vectors, real, ln):
    """Each vector centred by its own mean over the real sigma, times gamma; beta shared."""
    sigma = torch.sqrt(real.var(-1, unbiased=False, keepdim=True) + ln.eps)[:, None]
    return _share((vectors - vectors.mean(-1, keepdim=True)) / sigma * ln.weight, ln.bias[None])


def _activation(vectors, pre, post, slope, rule):
    if rule == "ZO":
        return vectors * (post / pre)[:, None]
    return _share(vectors * slope[:, None], post - slope * pre)


def _gelu_slope(x):  # the erf GELU's derivative, as written in the authors' code
    return (1 + torch.erf(x / math.sqrt(2))) / 2 + x * torch.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)


@torch.no_grad()
def _authors_steps(model, ids, label, rule):
    bert, H = model.bert, model.config.num_attention_heads
    out = bert(input_ids=torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    attr = None
    for layer, block in enumerate(bert.encoder.layer):
        x, probs = out.hidden_states[layer][0], out.attentions[layer][0]  # (n, D), (H, pos, pos)
        n, D = x.shape
        sa, so = block.attention.self, block.attention.output
        w_o = so.dense.weight.view(D, H, D // H)
        if attr is None:  # layer 0: token s's own value vector, b_V included
            values = sa.value(x).view(n, H, -1)
            mixed = torch.einsum("hks,shv,dhv->ksd", probs, values, w_o)  # (pos k, token s, D)
            vectors, bias = mixed + torch.diag_embed(x.T).permute(1, 2, 0), so.dense.bias
        else:
            values = torch.einsum("kjd,vd->kjv", attr, sa.value.weight).view(n, n, H, -1)
            mixed = torch.einsum("hik,kjhv,dhv->ijd", probs, values, w_o)
            vectors, bias = mixed + attr, so.dense.weight @ sa.value.bias + so.dense.bias
        vectors = _share(vectors, bias[None])
        context = torch.einsum("hik,khv->ihv", probs, sa.value(x).view(n, H, -1)).reshape(n, D)
        pre_ln1 = so.dense(context) + x
        attn_vectors = _ln(vectors, pre_ln1, so.LayerNorm)
        h = so.LayerNorm(pre_ln1)
        dense1, dense2 = block.intermediate.dense, block.output.dense
        pre = dense1(h)
        post = block.intermediate.intermediate_act_fn(pre)
        ff = _share(torch.einsum("ld,skd->skl", dense1.weight, attn_vectors), dense1.bias[None])
        ff = _activation(ff, pre, post, _gelu_slope(pre), rule)
        ff = _share(torch.einsum("dl,skl->skd", dense2.weight, ff), dense2.bias[None])
        attr = _ln(attn_vectors + ff, dense2(post) + h, block.output.LayerNorm)
    pooler = bert.pooler.dense
    pre = pooler(out.last_hidden_state[0, :1])
    post = torch.tanh(pre)
    pooled = _share(torch.einsum("ld,kd->kl", pooler.weight, attr[0])[None], pre * 0 + pooler.bias)
    pooled = _activation(pooled, pre, post, 1 - post ** 2, rule)
    logits = _share(torch.einsum("cd,kd->kc", model.classifier.weight, pooled[0])[None],
                    model.classifier.bias[None])[0]
    return logits[:, label].numpy()


@pytest.mark.parametrize("rule, ff_attribution", [("ZO", "ig"), ("LA", "decompx")])
@pytest.mark.parametrize("layers", [1, 2])
def test_equals_the_authors_steps_on_a_bert_classifier(rule, ff_attribution, layers):
    adapter = _bert_classifier(layers)
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    result = DECOMPX.with_params(ff_attribution=ff_attribution)(adapter, TEXT, target="class:2")[0]
    expected = _authors_steps(adapter.model, ids, 2, rule)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=AUTHORS * np.abs(expected).max())
    assert result.values.sum() == pytest.approx(result.meta["logit"], abs=1e-9)  # absdot: the scores are all of it
    assert result.meta["bias_logit"] == 0.0


def test_the_authors_comparison_fails_with_another_rule():
    adapter = _bert_classifier()
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    expected = _authors_steps(adapter.model, ids, 2, "ZO")
    for params in ({"bias_split": "norm"}, {"ff_attribution": "decompx"}):
        wrong = DECOMPX.with_params(**params)(adapter, TEXT, target="class:2")[0]
        assert np.abs(wrong.values - expected).max() > 1e-3


# -- the gradient identity ----------------------------------------------------------------------------------
def _modules(model):
    """HF's modules, read by architecture: (norms, activations, q/k freezers, layer 0, gated FFs)."""
    kind = model.config.model_type
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm) or type(m).__name__ == "LlamaRMSNorm"]
    if kind == "bert":
        layers = model.bert.encoder.layer
        acts = [b.intermediate.intermediate_act_fn for b in layers] + [model.bert.pooler.activation]
        qk = [(m, slice(None)) for b in layers for m in (b.attention.self.query, b.attention.self.key)]
        return norms[1:], acts, qk, layers[0], []  # the embedding norm is below layer 0's input
    if kind == "gpt2":
        layers, d = model.transformer.h, model.config.n_embd
        return norms, [b.mlp.act for b in layers], [(b.attn.c_attn, slice(0, 2 * d)) for b in layers], layers[0], []
    layers = model.model.decoder.layers if kind == "opt" else model.model.layers
    qk = [(m, slice(None)) for b in layers for m in (b.self_attn.q_proj, b.self_attn.k_proj)]
    if kind == "opt":
        return norms, [b.activation_fn for b in layers], qk, layers[0], []
    return norms, [], qk, layers[0], [b.mlp for b in layers]


def _ig_integrals(fn, a):
    """I0 = int_0^1 g(t a) dt and I1 = int_0^1 t g'(t a) dt by Simpson's rule on 4001 points."""
    t = torch.linspace(0, 1, 4001, dtype=a.dtype)
    w = torch.ones_like(t)
    w[1:-1:2], w[2:-1:2] = 4, 2
    w = w / w.sum()
    points = (t[:, None] * a.reshape(1, -1)).requires_grad_(True)
    with torch.enable_grad():
        values = fn(points)
        (slope,) = torch.autograd.grad(values.sum(), points)
    return (w[:, None] * values.detach()).sum(0).view_as(a), (w[:, None] * t[:, None] * slope).sum(0).view_as(a)


def _frozen_gradient_x_input(adapter, text, target):
    model = adapter.model
    norms, acts, qk, first_layer, gated = _modules(model)
    resolved = resolve_text(adapter, adapter.encode([text]).input_ids[0].tolist(), target)
    seen, handles = {}, []

    def frozen_norm(module, args, out):
        x = args[0]
        if isinstance(module, torch.nn.LayerNorm):
            scale = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + module.eps).detach()
            return (x - x.mean(-1, keepdim=True)) / scale * module.weight + module.bias
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon).detach() * module.weight

    def frozen_ratio(module, args, out):
        return args[0] * (out / args[0]).detach()

    def frozen_columns(columns):
        def hook(module, args, out):
            keep = torch.ones(out.shape[-1], dtype=torch.bool)
            keep[columns] = False
            return torch.where(keep, out, out.detach())
        return hook

    def leaf_input(module, args, kwargs):
        x = (args[0] if args else kwargs["hidden_states"]).detach().requires_grad_(True)
        seen["x0"] = x
        return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

    def gated_product(mlp):
        def keep(key):
            return lambda module, args, out: seen.__setitem__((mlp, key), out)

        def product(module, args):  # g(a) c with the IG factors frozen: a c I1 + c I0
            a, c = seen[(mlp, "gate")], seen[(mlp, "up")]
            i0, i1 = _ig_integrals(mlp.act_fn, a.detach())
            return (a * (c * i1).detach() + c * i0.detach(),)
        return [mlp.gate_proj.register_forward_hook(keep("gate")), mlp.up_proj.register_forward_hook(keep("up")),
                mlp.down_proj.register_forward_pre_hook(product)]

    try:
        handles += [m.register_forward_hook(frozen_norm) for m in norms]
        handles += [m.register_forward_hook(frozen_ratio) for m in acts]
        handles += [m.register_forward_hook(frozen_columns(cols)) for m, cols in qk]
        handles.append(first_layer.register_forward_pre_hook(leaf_input, with_kwargs=True))
        for mlp in gated:
            handles += gated_product(mlp)
        logits = model(input_ids=adapter.encode([text]).input_ids).logits[0]
        row = logits if logits.ndim == 1 else logits[resolved.row]
        logit = row[resolved.index] - (0 if resolved.contrast_index is None else row[resolved.contrast_index])
        logit.backward()
    finally:
        for handle in handles:
            handle.remove()
    x0 = seen["x0"]
    return (x0.grad * x0).sum(-1)[0].detach().numpy(), float(logit.detach())


@pytest.mark.parametrize("name", ["classifier", "tiny-gpt2", "tiny-opt", "tiny-llama"])
def test_equals_frozen_gradient_x_input_with_the_biases_apart(name):
    adapter = _bert_classifier() if name == "classifier" else load_model(name, "float64")
    target = "class:1" if name == "classifier" else "contrast:are/is"
    result = DECOMPX.with_params(bias_split="none")(adapter, TEXT, target=target)[0]
    expected, logit = _frozen_gradient_x_input(adapter, TEXT, target)
    # the frozen model computes the same logit: to 1e-6 in float64; a model that rounds to float32 inside (RMSNorm,
    # softmax) to twice float32's bound over those roundings, of the magnitude of the terms the logit sums
    stages = float32_stages(adapter)
    scale = float(np.abs(expected).sum() + abs(result.meta["bias_logit"]))
    bound = 2 * gamma(stages, torch.float32) * scale if stages else 1e-6 * abs(logit)
    assert abs(logit - result.meta["logit"]) <= bound
    # LLaMA's RMSNorm runs in float32 inside HF even for float64 weights, and so does OPT's attention softmax (from
    # transformers 5.22 at least); both reach the frozen-gradient side and the decomposition differently (FROZEN)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=FROZEN[name] * np.abs(expected).max())
    assert np.abs(result.values).max() > 1e-2
    assert result.values.sum() + result.meta["bias_logit"] == pytest.approx(result.meta["logit"], abs=1e-6)


# -- completeness everywhere, the FF split, bad input -------------------------------------------------------
@pytest.mark.parametrize("name", TINY_MODELS)
@pytest.mark.parametrize("ff_attribution", ["ig", "decompx"])
@pytest.mark.parametrize("bias_split", stages.BIAS_SPLITS)
def test_parts_sum_to_the_real_logit(name, ff_attribution, bias_split):
    adapter = load_model(name, "float64")
    text = TEXT if adapter.causal else TEXT.replace("are", adapter.tokenizer.mask_token)
    result = DECOMPX.with_params(ff_attribution=ff_attribution, bias_split=bias_split)(
        adapter, text, target="contrast:are/is")[0]
    assert result.residual < 1e-6
    assert result.values.sum() + result.meta["bias_logit"] == pytest.approx(result.meta["logit"], abs=1e-6)
    if bias_split != "none":  # every constant shared over the tokens
        assert result.meta["bias_logit"] == 0.0


def test_a_wrong_step_is_caught(monkeypatch):
    adapter = load_model("tiny-gpt2", "float64")
    norm = stages.norm_parts
    monkeypatch.setattr(stages, "norm_parts", lambda p, b, spec, scale, inplace=False: norm(p, b, spec, scale * 1.001))
    with pytest.raises(CompletenessError, match="output of layer 0"):
        DECOMPX(adapter, TEXT)
    monkeypatch.undo()
    share = stages.ig_share
    monkeypatch.setattr(stages, "ig_share", lambda fn, total: share(fn, total) + 0.01)
    with pytest.raises(CompletenessError, match="layer 0|real logit"):
        DECOMPX(adapter, TEXT)


@pytest.mark.parametrize("gated", [False, True])
def test_the_tangent_split_is_exact_and_is_the_tangent(gated):
    gen = torch.Generator().manual_seed(0)
    d, m, c, k = 6, 4, 3, 5
    act = torch.nn.SiLU() if gated else torch.nn.GELU()
    lin = [torch.randn(d, k, generator=gen, dtype=torch.float64) for _ in range(2)]
    ff = FeedForwardSpec(Linear(lin[0], None), Linear(lin[1], None) if gated else None,
                         Linear(torch.randn(k, d, generator=gen, dtype=torch.float64), None), act)
    ff_in = torch.randn(c, d, generator=gen, dtype=torch.float64)
    parts = torch.randn(m, c, d, generator=gen, dtype=torch.float64)
    parts[-1] = ff_in - parts[:-1].sum(0)  # the parts sum to the real input
    split = ff_split.FF_SPLITS["decompx"]
    pre = [(parts @ w, torch.zeros(c, k, dtype=torch.float64)) for w in lin[:1 + gated]]
    out = split.split(ff, split.prepare(ff, ff_in), [(p.clone(), b) for p, b in pre], slice(None), 0, 0)
    a = ff_in @ lin[0]
    real = act(a) * (ff_in @ lin[1]) if gated else act(a)
    torch.testing.assert_close(out.parts.sum(0) + out.bias, real, rtol=1e-12, atol=1e-12)
    slope = torch.func.vmap(torch.func.grad(lambda v: act(v)))(a.reshape(-1)).view_as(a)
    if gated:  # the tangent plane of g(a) c: a_j g'(a) c + c_j g(a)
        expected = pre[0][0] * slope * (ff_in @ lin[1]) + pre[1][0] * act(a)
    else:
        expected = pre[0][0] * slope
    torch.testing.assert_close(out.parts, expected, rtol=1e-12, atol=1e-12)


def test_engine_scopes_take_the_tangent_split_too():
    adapter = load_model("tiny-bert", "float64")
    tangent = attrbench.decompose(adapter, TEXT, ff_attribution="decompx", scopes=["atb_ff"])[0]
    ig = attrbench.decompose(adapter, TEXT, ff_attribution="ig", scopes=["atb_ff"])[0]
    assert tangent.residuals["atb_ff"] < 1e-10
    assert np.abs(tangent.maps["atb_ff"] - ig.maps["atb_ff"]).max() > 1e-3


def test_spread_bias_keeps_the_sum_and_a_row_with_no_weight():
    parts = torch.zeros(3, 2, 4, dtype=torch.float64)
    parts[0, 0, 0], parts[1, 0, 1] = 1.0, -2.0  # row 1 has no part at all
    constant = torch.tensor([3.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    new, bias = stages.spread_bias(parts, torch.zeros(2, 4, dtype=torch.float64), constant, "absdot")
    torch.testing.assert_close(new.sum(0) + bias, parts.sum(0) + constant)
    torch.testing.assert_close(new[0, 0] - parts[0, 0], constant * 0.6)  # |3| : |-2|
    torch.testing.assert_close(bias[1], constant)
    assert float(bias[0].abs().sum()) == 0.0


def test_bad_input():
    with pytest.raises(InputError, match="leave layers unset"):
        DECOMPX(load_model("tiny-gpt2"), TEXT, layers=[0])
    with pytest.raises(InputError, match="no readout; supported heads: causal LMs whose logits"):
        DECOMPX(load_model("tiny-gemma2"), TEXT)  # Gemma 2 soft-caps its logits
    roberta = TransformerAdapter(*tiny_classifier("roberta", 1), "roberta-classifier")  # <s>, dense, tanh, out_proj
    assert DECOMPX(roberta, TEXT, target="class:1")[0].residual < 1e-10
    with pytest.raises(InputError, match="bias_split"):
        DECOMPX.with_params(bias_split="cls")
    with pytest.raises(InputError, match="ff_attribution"):
        DECOMPX.with_params(ff_attribution="shapley-exact")
