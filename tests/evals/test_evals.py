import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from attrbench.cli import main
from attrbench.datasets.lookup import examples_for, sample
from attrbench.errors import InputError, UnknownPluginError
from attrbench.plugin.evaluation import EvalContext
from attrbench.registry import EVALS, METHODS
from attrbench.runtime.pipeline import evaluate
from attrbench.runtime.workspace import Workspace


def manual_probability(adapter, ids, label):
    """p(label) of the SVA probe read at the mask position of one token-id sequence."""
    with torch.no_grad():
        logits = adapter.model(input_ids=torch.tensor([ids])).logits
    return float(logits[0, ids.index(adapter.tokenizer.mask_token_id)].double().softmax(-1)[label])


ANALYSES = ["mixing_ratio", "context_change", "ff_amp", "res_ff_norms", "ln_outliers"]
RECORD_KEYS = {"model", "method", "eval", "dataset", "metric", "mean", "std", "n", "example_ids", "seed"}


def test_spearman_conventions_and_undefined():
    from attrbench.ops.stats import spearman

    a, b = np.array([1.0, 2.0, 2.0, 4.0]), np.array([1.0, 3.0, 2.0, 5.0])
    assert spearman(a, b, "scipy") == pytest.approx(spearmanr(a, b).statistic)
    # dense ranks 1,2,2,3 vs 1,3,2,4: d = 0,-1,0,-1 -> 1 - 6*2/(4*15)
    assert spearman(a, b, "dense") == pytest.approx(1 - 12 / 60)
    assert spearman(np.ones(4), b) is None and spearman(a[:1], b[:1]) is None
    with pytest.raises(InputError, match="rank convention 'pearson'"):
        spearman(a, b, "pearson")


def test_faithfulness_on_sst2_classifier(task_models):
    adapter = task_models["sst2"]
    records = evaluate(adapter, ["grad_l2", "alti", "attn_rollout"], ["faithfulness_corr"], "sst2", n=6, seed=3,
                       progress=False)
    by = {r["method"]: r for r in records}
    assert all(RECORD_KEYS <= set(r) for r in records)
    assert by["grad_l2"]["mean"] == pytest.approx(1.0) and by["grad_l2"]["std"] == pytest.approx(0.0)
    assert by["alti"]["reference"] == "grad_l2" and by["alti"]["rank"] == "scipy"
    assert len(by["alti"]["example_ids"]) == 6 and by["alti"]["example_ids"][0].startswith("sst2:dev:")
    # recompute one example's correlation by hand
    example = sample(examples_for(adapter, "sst2")[0], 6, 3)[0]
    ref = METHODS.get("grad_l2")(adapter, [example.text], target=example.target)[0].values[1:-1]
    alti = METHODS.get("alti")(adapter, [example.text], target=example.target)[0].values[1:-1]
    assert by["alti"]["values"][0] == pytest.approx(spearmanr(alti, ref).statistic)


def test_constant_scores_are_undefined_not_zero(task_models, monkeypatch):
    from attrbench.plugin.method import MethodResult

    adapter = task_models["sst2"]
    method = METHODS.get("attn_rollout")
    real = type(method).run

    def flat(self, adapter, texts, **kw):
        return [MethodResult(r.method, r.model, r.tokens, np.ones_like(r.values), None, r.meta)
                for r in real(self, adapter, texts, **kw)]

    monkeypatch.setattr(type(method), "run", flat)  # each evaluate() has its own memo: nothing computed before
    record = evaluate(adapter, ["attn_rollout"], ["faithfulness_corr"], "sst2", n=3, progress=False)[0]
    assert record["n"] == 0 and record["n_undefined"] == 3 and record["mean"] is None


def test_erasure_matches_a_manual_deletion(task_models):
    adapter = task_models["sva"]  # the probe: the target row moves when tokens before the mask are deleted
    records = evaluate(adapter, ["grad_l2"], ["erasure_aopc"], "sva-linzen", n=2, seed=0, progress=False)
    comp = next(r for r in records if r["metric"] == "comprehensiveness_aopc")
    assert comp["bins_percent"] == [1, 5, 10, 20, 50] and comp["higher_is_better"]
    example = sample(examples_for(adapter, "sva-linzen")[0], 2, 0)[0]
    scores = METHODS.get("grad_l2")(adapter, [example.text], target=example.target)[0].values
    ids = adapter.tokenizer(example.text)["input_ids"]
    special = set(adapter.tokenizer.all_special_ids) - {adapter.tokenizer.unk_token_id}
    positions = [k for k, t in enumerate(ids) if t not in special]
    ranked = sorted(positions, key=lambda k: (-scores[k], k))
    label = int(example.target[-1])
    p0 = manual_probability(adapter, ids, label)
    drops = []
    for k in (1, 5, 10, 20, 50):
        top = set(ranked[:min(len(positions), max(1, math.ceil(k * len(positions) / 100)))])
        drops.append(p0 - manual_probability(adapter, [t for i, t in enumerate(ids) if i not in top], label))
    assert comp["values"][0] == pytest.approx(np.mean(drops), abs=1e-6)  # float32, padded batch
    assert comp["per_example"][0] == pytest.approx(drops, abs=1e-6)


def test_timing_records_every_example_with_length(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    records = evaluate(adapter, ["atb_ln_ff_res", "blank_out"], ["timing"], "sva-generated", n=3, progress=False)
    metrics = ("seconds_per_example", "peak_mb", "seconds_per_token", "cost_vs_forward")
    assert {(r["method"], r["metric"]) for r in records} == {(m, k) for m in ("atb_ln_ff_res", "blank_out")
                                                             for k in metrics}
    rows = records[0]["per_example"]
    assert len(rows) == 3 and all(r["seconds"] > 0 and r["n_tokens"] > 0 for r in rows)
    by = {(r["method"], r["metric"]): r for r in records}
    for method in ("atb_ln_ff_res", "blank_out"):  # the cost per token and per forward pass follow from the rows
        seconds = by[(method, "seconds_per_example")]["values"]
        per_token = by[(method, "seconds_per_token")]["values"]
        assert per_token == pytest.approx([s / r["n_tokens"] for s, r in zip(seconds, by[(method, "peak_mb")][
            "per_example"])])
        assert all(v > 0 for v in by[(method, "cost_vs_forward")]["values"])


@pytest.mark.parametrize("model", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_analyses_run_on_every_architecture(tiny_models, model):
    adapter = tiny_models[(model, "float32")]
    records = evaluate(adapter, [], ANALYSES, "sva-generated", n=3, progress=False)
    assert {r["eval"] for r in records} == set(ANALYSES)
    assert all(r["mean"] is not None and np.isfinite(r["mean"]) for r in records)
    mixing = {r["method"]: r for r in records if r["eval"] == "mixing_ratio"}
    assert all(0 < r["mean"] < 1 and len(r["per_layer"]) == adapter.n_layers for r in mixing.values())


@pytest.mark.parametrize("model", ["tiny-bert", "tiny-gpt2"])
def test_analyses_of_a_one_token_text_are_undefined_not_a_traceback(tiny_models, model, tmp_path):
    """A decoder's Linzen prefix can be one token ("The"): no off-diagonal pair to amplify or mix."""
    adapter = tiny_models[(model, "float32")]
    path = tmp_path / "short.jsonl"
    path.write_text('{"text": "dogs", "target": "auto"}\n{"text": "the keys to the cabinet", "target": "auto"}\n')
    records = evaluate(adapter, [], ANALYSES, str(path), n=2, progress=False)
    assert {r["eval"] for r in records} == set(ANALYSES)
    ff_amp = next(r for r in records if r["eval"] == "ff_amp")
    assert ff_amp["n"] + ff_amp["n_undefined"] == 2 and ff_amp["n"] >= 1
    assert all(r["mean"] is None or np.isfinite(r["mean"]) for r in records)


def test_mixing_ratio_and_res_ff_norms_by_hand(tiny_models):
    from attrbench.decompose import decompose

    adapter = tiny_models[("tiny-bert", "float64")]
    examples = sample(examples_for(adapter, "sva-generated")[0], 2, 0)
    context = EvalContext("sva-generated", progress=False, shared=Workspace())
    records = EVALS.get("mixing_ratio")(adapter, [], examples[:1], context)
    dec = decompose(adapter, [examples[0].text], scopes=["atb"], keep_parts=True)[0]
    parts = dec.parts[0]["atb"][0]
    n = parts.shape[0]
    ratios = []
    for i in range(n):
        ctx = sum(parts[i, j] for j in range(n) if j != i).norm()
        ratios.append(float(ctx / (ctx + parts[i, i].norm())))
    atb = next(r for r in records if r["method"] == "atb")
    assert len(atb["per_layer"]) == 2 and atb["per_layer"][0] == pytest.approx(np.mean(ratios), rel=1e-9)
    norms = {r["metric"]: r for r in EVALS.get("res_ff_norms")(adapter, [], examples[:1], context)}
    with torch.no_grad():
        hidden = adapter.model.base_model(**adapter.tokenizer(examples[0].text, return_tensors="pt"),
                                          output_hidden_states=True).hidden_states
    layer = adapter.model.base_model.encoder.layer[0]
    ff = layer.output.dense(layer.intermediate(layer.attention(hidden[0])[0]))
    assert norms["ff_norm"]["per_layer"][0] == pytest.approx(float(ff[0].detach().norm(dim=-1).mean()), rel=1e-9)


def test_context_change_is_zero_for_identical_maps():
    from attrbench.ops.stats import map_change as change

    rng = np.random.default_rng(0)
    m = rng.random((5, 5))
    assert change(m, m, causal=False) == pytest.approx(0.0)
    assert change(m, -m, causal=False) == pytest.approx(2.0)
    assert change(np.tril(m), np.tril(m) * 2, causal=True) == pytest.approx(0.0)


def test_bad_requests_fail_before_any_work(task_models, tiny_models):
    sst2 = task_models["sst2"]
    with pytest.raises(InputError, match="'atb_ff' gives token-to-token maps"):
        evaluate(sst2, ["atb_ff"], ["faithfulness_corr"], "sst2", n=2, progress=False)
    with pytest.raises(UnknownPluginError, match="unknown evaluation 'nope'; known: .*faithfulness_corr"):
        evaluate(sst2, ["alti"], ["nope"], "sst2", n=2, progress=False)
    with pytest.raises(InputError, match="at least one"):
        evaluate(sst2, ["alti"], ["faithfulness_corr"], "sst2", n=0, progress=False)
    with pytest.raises(InputError, match="scores methods: give --method"):
        evaluate(sst2, [], ["erasure_aopc"], "sst2", n=2, progress=False)
    with pytest.raises(InputError, match="take.s. no --method"):
        evaluate(sst2, ["alti"], ["mixing_ratio"], "sst2", n=2, progress=False)
    with pytest.raises(InputError, match="sst2 needs a binary sentiment classifier"):
        evaluate(tiny_models[("tiny-llama", "float32")], ["alti"], ["faithfulness_corr"], "sst2", progress=False)


def test_cli_eval_json_and_files(task_models, capsys, tmp_path):
    model = str(task_models["root"] / "sva")
    assert main(["eval", "--model", model, "--method", "alti,blank_out", "--eval", "faithfulness_corr,erasure_aopc",
                 "--dataset", "sva-linzen", "--n", "3", "--rank", "dense", "--out", str(tmp_path), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert all(RECORD_KEYS <= set(r) for r in records) and {r["eval"] for r in records} == {
        "faithfulness_corr", "erasure_aopc"}
    written = list(tmp_path.glob("*.json"))
    assert len(written) == 1 and len(json.loads(written[0].read_text())["records"]) == len(records)
    run = json.loads(written[0].read_text())["run"]
    assert len(run["weights_sha256"]) == 64 and run["seed"] == 0
    assert main(["eval", "--model", model, "--eval", "mixing_ratio", "--dataset", "sva-linzen", "--n", "2",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mixing_ratio" in out and "attn_w" in out and "results:" in out
    assert main(["eval", "--model", "tiny-gpt2", "--eval", "faithfulness_corr", "--method", "alti",
                 "--dataset", "sst2"]) == 2
    assert "error: dataset sst2 needs" in capsys.readouterr().err
