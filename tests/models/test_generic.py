"""Any transformers encoder or decoder: the model-agnostic methods and metrics run on every family, with or without
a layer reader; every method that claims a family conforms on it; the decomposition family refuses a family without
a reader in one line; causality, blocks and final norm are read from the model."""
import json

import numpy as np
import pytest
import torch
import transformers as hf

import attrbench
from attrbench.cli import main
from attrbench.errors import InputError, ModelLoadError
from attrbench.evals.randomisation import randomised, reinitialised
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.generic import is_causal
from attrbench.models.tiny import FAMILIES, TINY_MODELS, VOCAB, build_family, randomise, tiny_tokenizer
from attrbench.plugin import check_method
from attrbench.registry import METHODS

ENCODERS = {n for n, (_, head) in FAMILIES.items() if head == "masked_lm"}
MIXTURES = ("tiny-mixtral", "tiny-olmoe", "tiny-qwen3-moe")
AGNOSTIC = ("grad_x_input", "integrated_gradients", "occlusion", "blank_out")


def _text(adapter):
    return "the keys to the cabinet are" if adapter.causal else "the keys to the cabinet [MASK] on the table"


@pytest.fixture(scope="module")
def families():
    return {name: load_model(name, "float64") for name in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_the_model_agnostic_methods_run_on_every_family(families, name):
    adapter = families[name]
    assert adapter.n_layers == 2 and adapter.layers
    assert adapter.causal == (name not in ENCODERS)
    results = attrbench.attribute(adapter, _text(adapter), list(AGNOSTIC), target="contrast:are/is")
    frame = results.to_pandas()
    assert set(frame.method) == set(AGNOSTIC) and np.isfinite(frame.score).all()
    assert frame.groupby("method").score.apply(lambda s: s.abs().max()).min() > 0  # every method found something
    axiom = results.results[0]["integrated_gradients"].meta["axiom"]
    assert axiom["name"] == "completeness"
    # a mixture of experts' top-k router switches experts along the path, so its output jumps and the path integral
    # of the gradient need not reach F(x) - F(x'): the record says how far it is, and only there may it fail
    assert axiom["passes"] or name in MIXTURES, axiom


# what each family's reader, head readout and AttnLRP's rules let run beyond the model-agnostic methods
DECOMPOSITION = {"alti", "globenc", "attn_rollout", "norm_rollout", "ff_rollout", "value_zeroing", "attention_flow"}
READS_HEAD = {"alti_logit", "decompx"}
CLAIMS = {name: DECOMPOSITION | READS_HEAD | ({"attn_lrp"} if name not in MIXTURES else set()) for name in FAMILIES}
CLAIMS["tiny-gemma2"] = DECOMPOSITION  # its logits are soft-capped: no head readout, and AttnLRP has no rule for it
CLAIMS["tiny-deberta-v2"] -= {"attn_lrp"}  # disentangled attention: no AttnLRP rule


@pytest.mark.parametrize("name", FAMILIES)
def test_every_method_that_claims_a_family_passes_the_conformance_check(families, name):
    adapter = families[name]
    supported = [m for m in METHODS.all() if m.supports(adapter) is None]
    assert {"grad_x_input", "integrated_gradients", "lime", "kernel_shap", "random"} <= {m.name for m in supported}
    claimed = {m.name for m in supported if m.needs_layers and type(m).__name__ != "ScopeMap"}  # scopes: below
    assert claimed == CLAIMS[name], (claimed ^ CLAIMS[name])
    for method in supported:
        if method.name in ("lime", "kernel_shap", "shapley_sampling", "smooth_grad", "gradient_shap", "deeplift"):
            method = method.with_params(**{k: v for k, v in {"n_samples": 8}.items() if k in method.params})
        assert "finite" in check_method(method, adapter)


def test_the_decomposition_family_says_in_one_line_why_not(unread_folder):
    adapter = load_model(unread_folder, "float64")
    refused = {m.name: m.supports(adapter) for m in METHODS.all() if m.needs_layers}
    assert {"alti", "alti_logit", "decompx", "attn_lrp", "value_zeroing", "globenc", "attn_rollout"} <= set(refused)
    assert all(reason and "no layer reader" in reason and "\n" not in reason for reason in refused.values())
    with pytest.raises(InputError, match="has no layer reader"):
        attrbench.attribute(adapter, _text(adapter), ["alti"], target="contrast:are/is")
    with pytest.raises(InputError, match="cannot be decomposed: .*no layer reader"):
        attrbench.decompose(adapter, _text(adapter))


def test_the_erasure_metrics_and_their_floor_run_on_a_family_without_a_reader(unread_folder):
    scores = attrbench.evaluate(unread_folder, ["grad_x_input", "occlusion"], ["erasure_aopc", "soft_erasure"],
                                "sva-linzen", n=2)
    summary = scores.summary
    assert set(summary["method"]) >= {"grad_x_input", "occlusion"} and (summary["n"] > 0).any()


def test_the_sanity_check_finds_the_blocks_and_head_of_any_family(families):
    adapter = families["tiny-qwen3-moe"]
    names = reinitialised(adapter, adapter.n_layers)
    assert {"lm_head", "model.norm", "model.layers.0", "model.layers.1"} <= set(names)
    copy = randomised(adapter, 1, seed=0)
    before = dict(adapter.model.named_parameters())
    changed = {n for n, p in copy.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(n.startswith(("model.layers.1.", "model.norm", "lm_head")) for n in changed)


def test_causality_is_read_from_the_model_not_its_name():
    for name in ("tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-roberta"):
        assert load_model(name).causal == (name in ("tiny-gpt2", "tiny-llama"))
    # a BERT made a decoder by its config is causal: the name says encoder, the model says otherwise
    config = hf.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, is_decoder=True)
    decoder = randomise(hf.BertLMHeadModel(config)).eval()
    assert is_causal(decoder)
    config.is_decoder = False
    assert not is_causal(randomise(hf.BertLMHeadModel(config)).eval())


def test_a_decoder_classifier_of_any_family_reads_its_last_token():
    model, tokenizer = build_family("qwen3", "classifier")
    adapter = TransformerAdapter(model, tokenizer, "qwen3-classifier")
    result = attrbench.attribute(adapter, "a wonderful film", ["grad_x_input", "occlusion"], target="class:1")
    assert adapter.causal and result.results[0]["occlusion"].meta["row"] == 2


def test_an_encoder_decoder_is_refused_before_its_weights_load(tmp_path):
    config = hf.T5Config(vocab_size=len(VOCAB), d_model=32, d_ff=64, num_layers=1, num_heads=4, d_kv=8)
    hf.T5ForConditionalGeneration(config).save_pretrained(tmp_path)
    tiny_tokenizer(True).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not weights")  # never read: the config refuses first
    with pytest.raises(ModelLoadError, match="is an encoder-decoder model \\(t5\\); attrbench explains encoders"):
        load_model(str(tmp_path))


def test_a_folder_of_an_unread_family_loads_and_the_cli_lists_what_runs_on_it(unread_folder, capsys):
    tmp_path = unread_folder
    adapter = load_model(tmp_path)
    assert type(adapter.model).__name__ == "CohereForCausalLM" and adapter.weights_sha256 != "unhashed"
    assert main(["methods", "--model", str(tmp_path), "--json"]) == 0
    rows = {r["name"]: r["unsupported"] for r in json.loads(capsys.readouterr().out)}
    assert rows["grad_x_input"] is None and rows["lime"] is None and "no layer reader" in rows["alti"]
    assert main(["methods", "--model", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    runs = sum(r is None for r in rows.values())
    assert f"{runs} of {len(rows)} methods run on {tmp_path}:" in text


def test_a_family_with_a_reader_keeps_it():
    assert all(load_model(name).layers for name in TINY_MODELS)
    assert all(load_model(name).layers for name in FAMILIES)


@pytest.mark.parametrize("name", ["tiny-gemma2", "tiny-pythia", "tiny-olmoe", "tiny-llama", "tiny-gpt2"])
def test_a_causal_head_runs_once_per_sequence_at_its_own_row(families, name):
    """A right-padded batch whose sequences end at different rows: each sequence's logits are those it has alone,
    and the head reads one row per sequence, not every distinct row of the batch in each (Gemma 2's soft-capped
    logits included)."""
    adapter = families[name] if name in families else load_model(name, "float64")
    lengths = [3, 5, 6, 9]
    sequences = [[5 + (7 * i + 3 * k) % (len(adapter.tokenizer) - 10) for k in range(n)] for i, n in enumerate(lengths)]
    rows = [n - 1 for n in lengths]
    width = max(lengths)
    pad = adapter.tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in sequences])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    seen = []
    handle = adapter.model.get_output_embeddings().register_forward_hook(
        lambda module, args, output: seen.append(tuple(args[0].shape[:2])))
    try:
        with torch.no_grad():
            batched = adapter.row_logits(rows, input_ids=ids, attention_mask=mask)
            alone = torch.cat([adapter.row_logits(row, input_ids=torch.tensor([s])) for s, row in zip(sequences,
                                                                                                     rows)])
    finally:
        handle.remove()
    assert seen[0] == (len(lengths), 1)  # the batch: one row per sequence
    torch.testing.assert_close(batched, alone, rtol=1e-12, atol=1e-12)
