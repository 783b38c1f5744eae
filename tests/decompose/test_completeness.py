"""Every scope of every architecture reconstructs the real forward pass (README "How it works")."""
from dataclasses import replace

import pytest
import torch
import transformers as hf

import attrbench
from attrbench.decompose import scopes_for
from attrbench.errors import CompletenessError
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.architectures import ARCHITECTURES
from attrbench.models.spec import Linear
from attrbench.models.tiny import FAMILIES, TINY_MODELS, build_tiny, randomise, tiny_tokenizer
from tests.conftest import TEXTS
from tests.precision import float32_stages, unit_roundoff

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

# Scopes that lie after a norm the HF model computes in float32 even in a float64 run.
AFTER_FP32_NORM = {"atb_ln", "atb_ln_ff", "atb_ln_ff_res"}


def _limit(adapter, scope, value_bias, dtype):
    if dtype == "float32":
        return 1e-5
    internals = adapter.architecture.float32_internals
    if "RMSNorm" in internals and scope in AFTER_FP32_NORM:
        return 1e-6  # the model's own RMSNorm rounds to float32
    if "softmax" in internals and value_bias == "bias":
        return 1e-6  # b_V moved to the bias assumes rows summing to 1; the model's fp32 softmax does ~1e-8
    return 1e-10


@pytest.mark.parametrize("value_bias", ["token", "bias"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", TINY_MODELS)
def test_every_scope_is_complete(tiny_models, name, dtype, value_bias):
    adapter = tiny_models[(name, dtype)]
    for dec in attrbench.decompose(adapter, TEXTS, value_bias=value_bias, tolerance=1.0):
        assert set(dec.residuals) == set(scopes_for(adapter.norm_first)) - {"attn_w"}
        for scope, residual in dec.residuals.items():
            assert residual <= _limit(adapter, scope, value_bias, dtype), (scope, residual)


@pytest.mark.parametrize("name", TINY_MODELS)
def test_whole_layer_parts_sum_to_hf_hidden_states(tiny_models, name):
    """Independent of the engine's hooks: compare with HF's own output_hidden_states."""
    adapter = tiny_models[(name, "float64")]
    whole = scopes_for(adapter.norm_first)[-1]
    dec = attrbench.decompose(adapter, TEXTS[:1], scopes=[whole], keep_parts=True)[0]
    batch = adapter.encode(TEXTS[:1])
    with torch.no_grad():
        hidden = adapter.model.base_model(input_ids=batch.input_ids, output_hidden_states=True).hidden_states
    last = adapter.n_layers - (1 if adapter.norm_first else 0)  # decoders norm the last hidden state
    for layer in range(last):
        parts, bias = dec.parts[layer][whole]
        rebuilt = parts.sum(1) + bias
        assert torch.allclose(rebuilt, hidden[layer + 1][0], rtol=0, atol=1e-6 * hidden[layer + 1].abs().max())
        maps = torch.linalg.vector_norm(parts, dim=-1).numpy()
        assert abs(maps - dec.maps[whole][layer]).max() < 1e-12


def _adapter_from_config(config, name):
    torch.manual_seed(0)
    model = hf.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return TransformerAdapter(randomise(model).double(), tiny_tokenizer(encoder=False), name)


@pytest.mark.parametrize("kind", ["mistral", "qwen2"])
def test_llama_family_variants(kind):
    """Qwen2 adds q/k/v biases; Mistral is LLaMA-shaped. Both read by the same adapter."""
    cls = {"mistral": hf.MistralConfig, "qwen2": hf.Qwen2Config}[kind]
    config = cls(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=48, max_position_embeddings=64)
    adapter = _adapter_from_config(config, f"tiny-{kind}")
    token = attrbench.decompose(adapter, TEXTS, value_bias="token")[0]
    assert token.residuals["atb"] < 1e-10 and max(token.residuals.values()) < 1e-6
    bias = attrbench.decompose(adapter, TEXTS, value_bias="bias")[0]  # fp32 softmax rows sum to 1 +- 1e-8
    assert max(bias.residuals.values()) < 1e-6


def test_post_ln_opt():
    """OPT with do_layer_norm_before=False (as opt-350m) is decomposed with the Post-LN scopes."""
    model, tok = build_tiny("tiny-opt", {"do_layer_norm_before": False})
    adapter = TransformerAdapter(model.double(), tok, "tiny-opt-postln")
    dec = attrbench.decompose(adapter, TEXTS)[0]
    assert "atb_ff_res_ln" in dec.maps and max(dec.residuals.values()) < 1e-10


def test_printed_res2_form_is_not_complete(tiny_models):
    """The paper's printed RES2 (Eq. 53/57: only F_i(x_i) added at j = i) misses the forward pass."""
    adapter = tiny_models[("tiny-bert", "float64")]
    dec = attrbench.decompose(adapter, TEXTS[:1], scopes=["atb", "atb_ff", "atb_ff_res"], keep_parts=True)[0]
    (atb, atb_bias), (ff, ff_bias), (res, res_bias) = (dec.parts[0][s] for s in ("atb", "atb_ff", "atb_ff_res"))
    printed = ff.clone()
    idx = torch.arange(len(atb))
    printed[idx, idx] += atb[idx, idx]
    real = res.sum(1) + res_bias
    assert ((printed.sum(1) + ff_bias + atb_bias - real).norm(dim=-1) / real.norm(dim=-1)).max() > 1e-2
    assert ((ff + atb).sum(1) + ff_bias + atb_bias - real).abs().max() < 1e-10


def test_value_bias_modes_differ_but_both_complete(tiny_models):
    adapter = tiny_models[("tiny-bert", "float64")]
    token, bias = (attrbench.decompose(adapter, TEXTS[:1], scopes=["attn_n"], value_bias=vb)[0]
                   for vb in ("token", "bias"))
    assert abs(token.maps["attn_n"] - bias.maps["attn_n"]).max() > 1e-3
    assert token.value_bias == "token" and bias.value_bias == "bias"


def test_batch_equals_single_float64(tiny_models):
    for name in TINY_MODELS:
        adapter = tiny_models[(name, "float64")]
        batched = attrbench.decompose(adapter, TEXTS)
        for text, dec in zip(TEXTS, batched):
            single = attrbench.decompose(adapter, [text])[0]
            # transformers' OPT and LLaMA take their attention softmax in float32 even in a float64 model
            # (eager_attention_forward), so a padded batch and a single text may differ in its last bits
            tolerance = 1e-6 if name in ("tiny-opt", "tiny-llama") else 1e-12  # relative to the largest entry: float32
            for scope in dec.maps:
                scale = max(1.0, abs(dec.maps[scope]).max())
                assert abs(single.maps[scope] - dec.maps[scope]).max() < tolerance * scale, (name, scope)


def test_row_chunking_does_not_change_maps(tiny_models):
    adapter = tiny_models[("tiny-llama", "float64")]
    whole = attrbench.decompose(adapter, TEXTS[:1])[0]
    chunked = attrbench.decompose(adapter, TEXTS[:1], chunk_bytes=1)[0]  # one row per chunk
    for scope in whole.maps:
        assert abs(whole.maps[scope] - chunked.maps[scope]).max() < 1e-13


def test_row_chunking_does_not_change_a_mixture_of_experts_maps():
    """A mixture's chunks are sized by its k active experts' width; each chunk routes its rows to their experts."""
    adapter = load_model("tiny-mixtral", "float64")
    whole = attrbench.decompose(adapter, TEXTS[:1])[0]
    for chunk_bytes in (1, 3 * 2**10):  # one row per chunk; a few rows per chunk
        chunked = attrbench.decompose(adapter, TEXTS[:1], chunk_bytes=chunk_bytes)[0]
        for scope in whole.maps:
            assert abs(whole.maps[scope] - chunked.maps[scope]).max() < 1e-13, (chunk_bytes, scope)


# --- the families of 2025-26: every block shape (tiny.FAMILIES with a layer reader) --------------------------------
READ_FAMILIES = [name for name, (model_type, _) in FAMILIES.items() if model_type in ARCHITECTURES]
SHAPES = {"tiny-gemma2": "sandwich", "tiny-gemma3": "sandwich", "tiny-olmo2": "sandwich", "tiny-pythia": "parallel",
          "tiny-gptj": "parallel", "tiny-phi2": "parallel", "tiny-phi3": "pre-ln", "tiny-qwen3": "pre-ln",
          "tiny-modernbert": "pre-ln", "tiny-deberta-v2": "post-ln", "tiny-xlm-roberta": "post-ln",
          "tiny-electra": "post-ln", "tiny-mixtral": "experts", "tiny-olmoe": "experts", "tiny-qwen3-moe": "experts"}


@pytest.fixture(scope="module")
def family_models():
    return {(name, dtype): load_model(name, dtype) for name in READ_FAMILIES for dtype in ("float64", "float32")}


def test_every_family_with_a_reader_is_listed_with_its_block_shape(family_models):
    assert set(READ_FAMILIES) == set(SHAPES)
    for name, shape in SHAPES.items():
        assert {spec.structure for spec in family_models[(name, "float64")].layers} == {shape}, name


@pytest.mark.parametrize("value_bias", ["token", "bias"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", READ_FAMILIES)
def test_every_scope_of_every_family_is_complete(family_models, name, dtype, value_bias):
    """Against the unmodified forward pass: float32's unit roundoff times the float32 stages the model computes even
    in float64 (tests/precision.py), and a float32 model's own rounding."""
    adapter = family_models[(name, dtype)]
    stages = float32_stages(adapter)
    limit = 1e-5 if dtype == "float32" else 8 * stages * unit_roundoff(torch.float32) if stages else 1e-12
    for dec in attrbench.decompose(adapter, TEXTS, value_bias=value_bias, tolerance=1.0):
        assert set(dec.residuals) == set(scopes_for(adapter.norm_first)) - {"attn_w"}
        for scope, residual in dec.residuals.items():
            assert residual <= limit, (scope, residual, limit)


def _swap_gate_up(spec):
    return {"ff": replace(spec.ff, w_in=spec.ff.up, up=spec.ff.w_in)}


WRONG_READERS = {
    "sandwich without its post-norms": ("tiny-gemma3", lambda s: {"attn_post_norm": None, "ff_post_norm": None}),
    "Gemma's gain w instead of 1 + w": ("tiny-gemma3", lambda s: {"ln2": replace(s.ln2, gamma=s.ln2.module.weight)}),
    "OLMo 2 without its post-norms": ("tiny-olmo2", lambda s: {"attn_post_norm": None, "ff_post_norm": None}),
    "a parallel block read as serial": ("tiny-pythia", lambda s: {"parallel": False}),
    "GPT-J read as serial": ("tiny-gptj", lambda s: {"parallel": False}),
    "NeoX's per-head qkv read as q | k | v": ("tiny-pythia", lambda s: {"value": Linear(
        s.layer.attention.query_key_value.weight.T[:, 64:], s.layer.attention.query_key_value.bias[64:])}),
    "Phi-3's gate and up swapped": ("tiny-phi3", _swap_gate_up),
    "ModernBERT's input and gate swapped": ("tiny-modernbert", _swap_gate_up),
    "experts in the wrong order": ("tiny-mixtral", lambda s: {"experts": s.experts[::-1]}),
    "Qwen3-MoE's experts without their gate": ("tiny-qwen3-moe", lambda s: {
        "experts": [replace(e, w_in=e.up) for e in s.experts]}),
    "DeBERTa's keys read as values": ("tiny-deberta-v2", lambda s: {
        "value": Linear(s.layer.attention.self.key_proj.weight.T, s.layer.attention.self.key_proj.bias)}),
}


@pytest.mark.parametrize("wrong", WRONG_READERS)
def test_a_wrong_reader_fails_completeness(wrong):
    name, fields = WRONG_READERS[wrong]
    adapter = load_model(name, "float64")
    adapter.layers = [replace(spec, **fields(spec)) for spec in adapter.layers]
    with pytest.raises(CompletenessError):
        attrbench.decompose(adapter, TEXTS)
