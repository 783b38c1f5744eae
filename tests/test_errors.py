"""Bad input: a one-line error naming the fix, and nothing half-computed."""
import pytest
import torch
import transformers as hf

import attrbench
from attrbench.cli import main
from attrbench.errors import InputError, ModelLoadError
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.tiny import MAX_POSITIONS, build_tiny, tiny_tokenizer


def _one_line(err):
    assert "\n" not in str(err.value) and str(err.value)


def test_unknown_model_lists_offline_models():
    with pytest.raises(ModelLoadError) as err:
        load_model("bert-tiny-does-not-exist")
    _one_line(err)
    assert "minilm-l6" in str(err.value) and "org/name" in str(err.value)


def test_unsupported_architecture_lists_supported(tmp_path):
    config = hf.T5Config(vocab_size=50, d_model=16, num_layers=1, num_heads=2, d_ff=32, d_kv=8)
    hf.T5Model(config).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError) as err:
        load_model(str(tmp_path))
    _one_line(err)
    assert "'t5'" in str(err.value) and "bert" in str(err.value) and "llama" in str(err.value)


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
