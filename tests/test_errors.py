"""Bad input: a one-line error naming the fix, and nothing half-computed."""
import pytest
import torch
import transformers as hf

import attrbench
from attrbench.cli import main
from attrbench.errors import InputError, ModelLoadError
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.tiny import MAX_POSITIONS, build_tiny


def _one_line(err):
    assert "\n" not in str(err.value) and str(err.value)


def test_unknown_model_lists_offline_models():
    with pytest.raises(ModelLoadError) as err:
        load_model("bert-tiny-does-not-exist")
    _one_line(err)
    assert "minilm-l6" in str(err.value) and "org/name" in str(err.value)


def test_an_encoder_decoder_is_refused_and_a_decomposition_without_a_reader_lists_the_readers(tmp_path, unread_folder):
    config = hf.T5Config(vocab_size=50, d_model=16, num_layers=1, num_heads=2, d_ff=32, d_kv=8)
    hf.T5Model(config).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError) as err:
        load_model(str(tmp_path))
    _one_line(err)
    assert "encoder-decoder model (t5)" in str(err.value) and "load one of those" in str(err.value)
    with pytest.raises(InputError) as err:
        attrbench.decompose(load_model(unread_folder), "the dogs run")
    _one_line(err)
    assert "'cohere' has no layer reader" in str(err.value) and "bert" in str(err.value) and "llama" in str(err.value)


def test_sdpa_attention_is_refused():
    model, tok = build_tiny("tiny-gpt2")
    sdpa = hf.AutoModelForCausalLM.from_config(model.config, attn_implementation="sdpa")
    with pytest.raises(ModelLoadError) as err:
        TransformerAdapter(sdpa, tok, "sdpa-gpt2")
    _one_line(err)
    assert "eager" in str(err.value)


def test_nan_weights_are_refused():
    model, tok = build_tiny("tiny-bert")
    with torch.no_grad():
        model.bert.encoder.layer[1].output.dense.weight[0, 0] = float("nan")
    with pytest.raises(ModelLoadError) as err:
        TransformerAdapter(model, tok, "nan-bert")
    _one_line(err)
    assert "bert.encoder.layer.1.output.dense.weight" in str(err.value)


@pytest.mark.parametrize("texts", ["", "   ", [], ["fine", ""]])
def test_empty_text(tiny_models, texts):
    with pytest.raises(InputError) as err:
        attrbench.decompose(tiny_models[("tiny-bert", "float32")], texts)
    _one_line(err)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-gpt2", "tiny-llama"])
def test_too_long_text_errors_or_truncates_explicitly(tiny_models, name):
    adapter = tiny_models[(name, "float32")]
    long_text = " ".join(["film"] * (MAX_POSITIONS + 10))
    with pytest.raises(InputError) as err:
        attrbench.decompose(adapter, long_text)
    _one_line(err)
    assert "truncate" in str(err.value)
    dec = attrbench.decompose(adapter, long_text, truncate=True, scopes=["attn_w"])[0]
    assert dec.truncated and len(dec.tokens) == adapter.max_positions


def test_bad_scope_layer_value_bias(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    for kwargs in ({"scopes": ["atb_ff"]}, {"scopes": ["nope"]}, {"layers": [5]}, {"value_bias": "both"}):
        with pytest.raises(InputError) as err:
            attrbench.decompose(adapter, "a film", **kwargs)
        _one_line(err)


def test_completeness_failure_raises_and_returns_nothing(tiny_models):
    adapter = tiny_models[("tiny-bert", "float32")]
    with pytest.raises(attrbench.CompletenessError) as err:
        attrbench.decompose(adapter, "a film", tolerance=1e-30)
    _one_line(err)


def test_unknown_dtype():
    with pytest.raises(InputError):
        load_model("tiny-bert", dtype="float16")


def test_cli_errors_are_one_line_exit_2(capsys):
    assert main(["decompose", "--model", "nope", "--text", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["decompose", "--model", "tiny-bert", "--text", "hi", "--layers", "x"]) == 2


BAD_TARGETS = {  # (model, target) -> the words of the one error every method gives
    ("tiny-gpt2", "token:notaword"): "not in the vocabulary",
    ("tiny-gpt2", "token:dogs run"): "a token target must be one token",
    ("tiny-gpt2", "class:3"): "is a language model",
    ("tiny-llama", "contrast:is/"): "a token target must be one token",
    ("tiny-gpt2", "contrast:is/is"): "a contrast needs two different tokens",
    ("tiny-bert", "token:are"): "needs a [MASK] token",
    ("tiny-bert", "next"): "is not a causal LM",
    ("tiny-bert", "position:40"): "outside the",
    ("tiny-bert", "class:0"): "is a language model",
}


@pytest.mark.parametrize("model,target", list(BAD_TARGETS))
def test_bad_target_is_the_same_error_for_every_method(tiny_models, model, target):
    """Targets are validated once, before any method runs: rollouts and maps refuse what gradients refuse."""
    from attrbench.registry import METHODS

    adapter = tiny_models[(model, "float32")]
    messages = set()
    for method in METHODS.all():
        if method.supports(adapter) is None:
            with pytest.raises(InputError) as err:
                method(adapter, ["the keys to the cabinet"], target=target)
            _one_line(err)
            messages.add(str(err.value))
    assert len(messages) == 1 and BAD_TARGETS[(model, target)] in messages.pop()


def test_every_method_records_the_resolved_target(tiny_models):
    from attrbench.registry import METHODS

    adapter = tiny_models[("tiny-gpt2", "float32")]
    ids = adapter.tokenizer(" is are")["input_ids"]
    for method in METHODS.all():
        if method.supports(adapter) is None:
            meta = method(adapter, ["the keys to the cabinet"], target="contrast:are/is")[0].meta
            assert (meta["target"], meta["row"], meta["index"], meta["contrast_index"]) == \
                ("contrast:are/is", 4, ids[1], ids[0]), method.name
            assert meta["explains"] == "'are' - 'is'"


def test_headless_model_takes_row_targets_only(tmp_path):
    model, tok = build_tiny("tiny-bert")
    model.bert.save_pretrained(tmp_path)  # the encoder without its masked-LM head
    tok.save_pretrained(tmp_path)
    adapter = load_model(str(tmp_path))
    from attrbench.registry import METHODS

    result = METHODS.get("alti")(adapter, ["a wonderful film"], target="position:2")[0]
    assert result.meta["row"] == 2 and result.meta["index"] is None
    with pytest.raises(InputError, match="needs an output head"):
        METHODS.get("alti")(adapter, ["a wonderful film"], target="class:1")


def test_cli_bad_target_one_line_for_rollouts(capsys):
    """The issue's example: a token target that is no token was a silent result for alti."""
    for method in ("alti", "grad_l2", "attn_rollout"):
        assert main(["attribute", "--model", "tiny-gpt2", "--method", method, "--text", "the keys",
                     "--target", "token:notaword"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "notaword" in err


def test_user_text_in_an_error_stays_one_line(capsys):
    assert main(["attribute", "--model", "tiny-gpt2", "--method", "alti", "--text", "a", "--target", "x\r\ny"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x\\r\\ny" in err
    assert main(["attribute", "--model", "tiny-gpt2", "--text", "a"]) == 2  # argparse: one line too
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--method" in err and "--help" in err


def test_planner_validates_every_target_before_any_job_runs(tiny_models):
    from attrbench.datasets.base import Example
    from attrbench.runtime.plan import check_targets

    adapter = tiny_models[("tiny-gpt2", "float32")]
    good = Example("mine:1", "the keys to the cabinet", "contrast:are/is", {})
    check_targets(adapter, [good])
    bad = Example("mine:2", "the keys to the cabinet", "class:1", {})
    with pytest.raises(InputError, match="example mine:2: 'tiny-gpt2' is a language model") as err:
        check_targets(adapter, [good, bad])
    _one_line(err)
