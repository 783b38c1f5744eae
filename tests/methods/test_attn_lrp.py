"""AttnLRP equals lxt 2.1 (GPT-2, LLaMA) and conserves relevance exactly once every sink is counted.

lxt patches transformers' classes, so it runs in its own process (``lxt_reference.py``, which says what it
works around to run on transformers 5). lxt has no OPT map, and its BERT file is a copy of transformers 4's
that cannot be imported; there, and everywhere, the conservation check stands: in float64, the explained
logit equals the relevance of the word embeddings, plus that of the other embeddings (positions, token
types) and of every bias, plus what each softmax does not conserve (the paper's softmax rule is not
conservative): half the relevance of the attention weights minus what reaches the queries and keys.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import attrbench.methods.attn_lrp as attn_lrp_module
from attrbench.errors import InputError
from attrbench.methods.attn_lrp import attn_lrp_rules
from attrbench.models import load_model
from attrbench.models.tiny import TINY_MODELS
from attrbench.ops.targets import resolve_text
from attrbench.registry import METHODS
from tests.precision import float32_stages, gamma

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are on the table"
ATTN_LRP = METHODS.get("attn_lrp")
# the bounds docs/methods.md quotes. Against lxt: GPT-2 in float64 to lxt's own epsilon (its identity rule divides by
# x + 1e-10; measured 5e-11). Conservation in float64: 1e-14 of the logit (measured ~1e-15). LLaMA, whose RMSNorm and
# softmax transformers computes in float32 even in a float64 model, rounds 7 times to float32 on the way (5 norms, 2
# softmaxes): there both bounds are float32's gamma_7 (tests/precision.py) of the magnitude of what is summed, which
# holds on every CPU (the 1e-7 of the logit these bounds were, fitted on an AVX-512 machine, failed on an AVX2 one)
LXT = {"tiny-gpt2": 2e-10}
CONSERVATION = {"float64": 1e-14}
LLAMA_FLOAT32_STAGES = 7


def _bound(name, adapter, terms, float64_bound):
    """The largest gap allowed for a sum of ``terms``: float32's rounding over the model's float32 stages, relative to
    the terms' magnitudes, or ``float64_bound`` for a model that computes in float64 throughout."""
    stages = float32_stages(adapter)
    if not stages:
        return float64_bound
    return gamma(stages, torch.float32) * float(np.abs(np.asarray(terms, dtype=float)).sum())


def _text(adapter):
    return TEXT if adapter.causal else TEXT.replace("are", adapter.tokenizer.mask_token)


def _lxt(name, ids, index, contrast, dtype="float64"):
    script = Path(__file__).with_name("lxt_reference.py")
    out = subprocess.run([sys.executable, str(script), name, json.dumps(ids), str(index), str(contrast), dtype],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-qwen3", "tiny-gemma3"])
def test_equals_lxt(name):
    adapter = load_model(name, "float64")
    result = ATTN_LRP(adapter, TEXT, target="contrast:are/is")[0]
    theirs = _lxt(name, adapter.encode([TEXT]).input_ids[0].tolist(), result.meta["index"],
                  result.meta["contrast_index"])
    # lxt's identity rule divides by x + 1e-10; LLaMA's RMSNorm and softmax run in float32 inside HF, in both
    # implementations (so twice float32's bound on the relevance they share out)
    atol = LXT.get(name) or 2 * _bound(name, adapter, theirs, None)
    np.testing.assert_allclose(result.values, theirs, rtol=0, atol=atol)


def test_lxt_comparison_fails_with_a_wrong_rule(monkeypatch):
    adapter = load_model("tiny-gpt2", "float64")
    expected = ATTN_LRP(adapter, TEXT, target="contrast:are/is")[0]
    theirs = _lxt("tiny-gpt2", adapter.encode([TEXT]).input_ids[0].tolist(), expected.meta["index"],
                  expected.meta["contrast_index"])
    original = attn_lrp_module._scale_columns
    # queries and keys at 1/2 instead of 1/4: the uniform rule of A V forgotten
    monkeypatch.setattr(attn_lrp_module, "_scale_columns",
                        lambda width, scales, like: original(width, [(c, 0.5) for c, _ in scales], like))
    wrong = ATTN_LRP(adapter, TEXT, target="contrast:are/is")[0]
    assert np.abs(wrong.values - theirs).max() > 1e-3


def _conservation_terms(adapter, text, target):
    """(explained logit, word-embedding relevance, other embeddings, biases, softmax leaks), float64."""
    model = adapter.model
    batch = adapter.encode([text])
    resolved = resolve_text(adapter, batch.input_ids[0].tolist(), target)
    embeddings, projections = {}, []

    def keep(store, key):
        def hook(module, args, out):
            out.retain_grad()
            store[key] = out
        return hook

    handles = [m.register_forward_hook(keep(embeddings, m)) for m in model.modules()
               if isinstance(m, torch.nn.Embedding)]
    for spec in adapter.layers:  # registered before the rules: they see the projections' own outputs
        for module, columns in ((spec.query_module, spec.query_columns), (spec.key_module, spec.key_columns)):
            store = {}
            handles.append(module.register_forward_hook(keep(store, "out")))
            projections.append((store, columns))
    model.zero_grad()
    try:
        with attn_lrp_rules(adapter):
            out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
            for weights in out.attentions:
                weights.retain_grad()
            logit = resolved.logit(out.logits)[0]
            logit.backward()
    finally:
        for handle in handles:
            handle.remove()
    word = model.get_input_embeddings()
    relevance = {m: float((e * e.grad).detach().sum()) for m, e in embeddings.items()}
    biases = sum(float((p * p.grad).detach().sum()) for n, p in model.named_parameters()
                 if n.endswith("bias") and p.grad is not None)
    reaching_qk = sum(float((s["out"][..., c] * s["out"].grad[..., c]).detach().sum()) for s, c in projections)
    half_of_weights = sum(float((w * w.grad).detach().sum()) for w in out.attentions) / 2
    return (float(logit.detach()), relevance.pop(word), sum(relevance.values()), biases, half_of_weights - reaching_qk)


@pytest.mark.parametrize("name", TINY_MODELS)
def test_relevance_is_conserved(name):
    adapter = load_model(name, "float64")
    text, target = _text(adapter), "contrast:are/is"
    logit, words, others, biases, leaks = _conservation_terms(adapter, text, target)
    result = ATTN_LRP(adapter, text, target=target)[0]
    assert result.values.sum() == pytest.approx(words, abs=1e-10)  # the method is the same computation
    bound = _bound(name, adapter, [words, others, biases, leaks], CONSERVATION["float64"] * abs(logit))
    assert abs(words + others + biases + leaks - logit) <= bound
    assert abs(words) > 1e-3 and abs(leaks) > 1e-6  # a real test: relevance reaches the words, softmax leaks


def test_forward_values_are_the_models_own_and_hooks_are_removed():
    adapter = load_model("tiny-llama", "float64")
    ids = adapter.encode([TEXT]).input_ids
    plain = adapter.model(input_ids=ids).logits

    def hooks():  # transformers' own output-capturing hooks stay; the rules' must all be gone
        return {(n, k) for n, m in adapter.model.named_modules() for k in [*m._forward_hooks, *m._forward_pre_hooks]}

    before = hooks()
    with attn_lrp_rules(adapter):
        assert hooks() > before  # a real check: the rules do hook the model
        ruled = adapter.model(input_ids=ids).logits
    assert torch.equal(plain, ruled)
    assert hooks() == before


def test_bad_input():
    from attrbench.models import TransformerAdapter
    from attrbench.models.tiny import tiny_classifier

    with pytest.raises(InputError, match="no readout; supported heads: causal LMs whose logits"):
        ATTN_LRP(load_model("tiny-gemma2"), TEXT)  # Gemma 2 soft-caps its logits
    with pytest.raises(InputError, match="applies an activation as a function"):  # RoBERTa's head: torch.tanh
        ATTN_LRP(TransformerAdapter(*tiny_classifier("roberta", 1), "roberta-classifier"), TEXT)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_conservation_is_recorded_with_its_sinks(name):
    adapter = load_model(name, "float64")
    text, target = _text(adapter), "contrast:are/is"
    logit, words, others, biases, leaks = _conservation_terms(adapter, text, target)
    axiom = ATTN_LRP(adapter, text, target=target)[0].meta["axiom"]
    assert axiom["name"] == "conservation" and axiom["expected"] == pytest.approx(logit, rel=1e-12)
    recorded = axiom["sinks"]
    np.testing.assert_allclose([recorded["other_embeddings"], recorded["biases"], recorded["softmax"]],
                               [others, biases, leaks], rtol=1e-9, atol=1e-12)
    assert axiom["input_share"] == pytest.approx(words / logit, rel=1e-9)
    assert axiom["residual"] <= 1e-6 and axiom["passes"]
    # without the sinks the words alone miss the logit by far more than the tolerance: the record is a real check
    assert abs(words - logit) / abs(logit) > 100 * axiom["tolerance"]


@pytest.mark.parametrize("name", [n for n in TINY_MODELS if ATTN_LRP.supports(load_model(n)) is None])
def test_a_padded_batch_records_each_texts_own_sinks(name):
    """Texts of different lengths in one pass: each text's scores and sinks are those of the text computed alone by
    the independent reference (a bias's parameter gradient would mix the texts; position embeddings are shared)."""
    adapter = load_model(name, "float64")
    texts = [_text(adapter), _text(adapter).replace("keys to the cabinet", "dog"), "the cats are"]
    texts[2] = texts[2] if adapter.causal else texts[2].replace("are", adapter.tokenizer.mask_token)
    results = ATTN_LRP(adapter, texts, target="contrast:are/is")
    assert len({len(r.tokens) for r in results}) == 3  # padded: the batch is really mixed
    # a model that softmaxes in float32 even in float64 (OPT, Llama in transformers) is float32-exact there: a
    # padded batch's float64 logits may round to other float32 values than the text's alone (CPU-dependent)
    # (the decomposition's tolerance for such models, FLOAT32_INTERNALS_TOLERANCE, is the same 1e-6)
    float32_exact = bool(adapter.architecture.float32_internals)
    for text, result in zip(texts, results):
        logit, words, others, biases, leaks = _conservation_terms(adapter, text, "contrast:are/is")
        sinks = result.meta["axiom"]["sinks"]
        assert result.values.sum() == pytest.approx(words, abs=1e-6 if float32_exact else 1e-10)
        np.testing.assert_allclose([sinks["other_embeddings"], sinks["biases"], sinks["softmax"]],
                                   [others, biases, leaks], rtol=1e-9, atol=1e-6 if float32_exact else 1e-12)
        assert result.meta["axiom"]["passes"] and result.meta["axiom"]["expected"] == pytest.approx(
            logit, rel=1e-12, abs=1e-6 if float32_exact else 0.0)
