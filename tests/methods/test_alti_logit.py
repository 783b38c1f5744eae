"""ALTI-Logit equals a by-hand recomputation of Ferrando et al. (2023)'s equations, and its logit is exact.

The reference code (mt-upc/logit-explanations, ``src/contributions.py`` and ``extract_explanations.py``)
needs a hub download and pins transformers 4; the recomputation below follows its steps from HF's own
modules, with no part of attrbench's engine: per layer, ``T_t(x_j) = sum_h A^h_tj (LN1(x_j) W_V^h + b_V^h)
W_O^h``; the final norm linear with the real scale of the last residual state; ALTI's contributions
``max(0, ||y||_1 - ||y - T(x_j) - [j = t] x_t||_1)``, row-normalised and rolled out from the layer below.
"""
import numpy as np
import pytest
import torch

from attrbench.decompose import readout
from attrbench.errors import CompletenessError, InputError
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.tiny import tiny_classifier
from attrbench.registry import METHODS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are on the table"
ALTI_LOGIT = METHODS.get("alti_logit")


def _attention_weights(model, layer):
    """(LN1 module, W_V (d, H*dh), b_V, W_O (H*dh, d), b_O) of one decoder layer, read from HF's modules."""
    kind, d = model.config.model_type, model.config.hidden_size
    if kind == "gpt2":
        block = model.transformer.h[layer]
        attn = block.attn
        return block.ln_1, attn.c_attn.weight[:, 2 * d:], attn.c_attn.bias[2 * d:], attn.c_proj.weight, \
            attn.c_proj.bias
    if kind == "opt":
        block = model.model.decoder.layers[layer]
        a = block.self_attn
        return block.self_attn_layer_norm, a.v_proj.weight.T, a.v_proj.bias, a.out_proj.weight.T, a.out_proj.bias
    block = model.model.layers[layer]  # llama: grouped-query values, no biases
    a, heads, kv = block.self_attn, model.config.num_attention_heads, model.config.num_key_value_heads
    dh = d // heads
    w_v = a.v_proj.weight.T.reshape(d, kv, dh).repeat_interleave(heads // kv, dim=1).reshape(d, heads * dh)
    return block.input_layernorm, w_v, torch.zeros(heads * dh, dtype=w_v.dtype), a.o_proj.weight.T, \
        torch.zeros(d, dtype=w_v.dtype)


def _final_norm_linear(norm, x, state):
    """The final norm of ``x`` with the real scale of ``state`` and no bias (the paper's l_transform)."""
    if isinstance(norm, torch.nn.LayerNorm):
        sigma = torch.sqrt(state.var(-1, unbiased=False) + norm.eps)
        return (x - x.mean(-1, keepdim=True)) / sigma * norm.weight
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    return x / torch.sqrt(state.pow(2).mean(-1) + eps) * norm.weight


@torch.no_grad()
def _by_hand(adapter, ids, token, foil=None):
    model, n = adapter.model, len(ids)
    heads = model.config.num_attention_heads
    final_norm, seen = adapter.final_norm, {}
    handle = final_norm.register_forward_hook(lambda m, args, out: seen.update(state=args[0][0, -1]))
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    handle.remove()
    unembed = model.get_output_embeddings().weight
    direction = unembed[token] - (0 if foil is None else unembed[foil])
    total, mixing = torch.zeros(n, dtype=torch.float64), torch.eye(n, dtype=torch.float64)
    for layer in range(model.config.num_hidden_layers):
        ln1, w_v, b_v, w_o, b_o = _attention_weights(model, layer)
        x, probs = out.hidden_states[layer][0], out.attentions[layer][0]  # (n, d), (H, n, n)
        values = (ln1(x) @ w_v + b_v).view(n, heads, -1)  # (n, H, dh)
        per_head = torch.einsum("jhe,hed->jhd", values, w_o.view(heads, -1, w_o.shape[-1]))
        parts = torch.einsum("htj,jhd->tjd", probs, per_head)  # T_t(x_j): (n, n, d)
        logits = _final_norm_linear(final_norm, parts[-1], seen["state"]) @ direction  # Δlogit^l_j at t = n-1
        total += logits.double() @ mixing
        with_residual = parts + torch.diag_embed(x.T).permute(1, 2, 0)  # + [j = t] x_t
        y = with_residual.sum(1) + b_o
        proximity = (y.abs().sum(-1, keepdim=True) - (y[:, None] - with_residual).abs().sum(-1)).clamp_min(0)
        mixing = (proximity / proximity.sum(-1, keepdim=True)).double() @ mixing
    return total.numpy()


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-opt", "tiny-llama"])
@pytest.mark.parametrize("target", ["token:are", "contrast:are/is"])
def test_equals_by_hand_recomputation_on_decoders(name, target):
    adapter = load_model(name, "float64")
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    result = ALTI_LOGIT(adapter, TEXT, target=target)[0]
    expected = _by_hand(adapter, ids, result.meta["index"], result.meta["contrast_index"])
    # LLaMA's RMSNorm runs in float32 inside HF even for float64 weights
    np.testing.assert_allclose(result.values, expected, rtol=1e-6 if name == "tiny-llama" else 1e-10, atol=1e-9)
    assert np.abs(result.values).max() > 1e-3  # not trivially zero


def _bert_classifier():
    return TransformerAdapter(*tiny_classifier("bert"), "tiny-bert-classifier")


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-distilbert", "tiny-gpt2", "tiny-opt",
                                  "tiny-llama", "classifier"])
def test_parts_sum_to_the_real_logit_and_scores_to_the_attention_share(name):
    adapter = _bert_classifier() if name == "classifier" else load_model(name, "float64")
    text = TEXT if adapter.causal or name == "classifier" else TEXT.replace("are", adapter.tokenizer.mask_token)
    result = ALTI_LOGIT(adapter, text, target="class:2" if name == "classifier" else "contrast:are/is")[0]
    shares = result.meta["logit_shares"]
    assert result.residual < 1e-6
    assert sum(shares.values()) == pytest.approx(result.meta["logit"], abs=1e-6)
    # every row of ALTI's rollout sums to one, so the scores sum to the attention share
    assert result.values.sum() == pytest.approx(shares["attention"], abs=1e-9)


def test_a_wrong_step_is_caught(monkeypatch):
    adapter = load_model("tiny-bert", "float64")
    text = TEXT.replace("are", "[MASK]")
    share = readout.stages.ig_share
    monkeypatch.setattr(readout.stages, "ig_share", lambda fn, total: share(fn, total) + 0.01)
    with pytest.raises(CompletenessError, match="real logit"):
        ALTI_LOGIT(adapter, text)
    monkeypatch.undo()
    norm = readout._norm
    monkeypatch.setattr(readout, "_norm", lambda p, b, spec, real: norm(p, b, spec, real * 1.001))
    with pytest.raises(CompletenessError, match="output of layer 0"):
        ALTI_LOGIT(adapter, text)


def test_bad_input():
    with pytest.raises(InputError, match="leave layers unset"):
        ALTI_LOGIT(load_model("tiny-gpt2"), TEXT, layers=[0])
    with pytest.raises(InputError, match="no readout; supported heads: causal LMs whose logits"):
        ALTI_LOGIT(load_model("tiny-gemma2"), TEXT)  # Gemma 2 soft-caps its logits
    roberta = TransformerAdapter(*tiny_classifier("roberta", 1), "roberta-classifier")  # <s>, dense, tanh, out_proj
    assert ALTI_LOGIT(roberta, TEXT, target="class:1")[0].residual < 1e-10
