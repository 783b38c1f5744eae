"""Growth points: an evaluation plugin gets its table and figure with no report code; a dataset
plugin registers through its entry point; method and evaluation parameters are declared, checked,
recorded and part of every unit's key."""
import json
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from attrbench.cli import main
from attrbench.datasets.base import Dataset, Example
from attrbench.errors import InputError
from attrbench.plugin.evaluation import Evaluation
from attrbench.registry import EVALS, METHODS
from attrbench.report import write_report
from attrbench.runtime.config import validate_config
from attrbench.runtime.pipeline import collect, plan_config, run_leaderboard


class PeakShare(Evaluation):
    """A test-only evaluation: the largest share of |score| any one token gets (lower: more spread)."""

    name, family = "peak_share", "test"
    description = "largest share of the absolute attribution on one token"
    reference = "a test plugin"
    primary_metric = "peak_share"
    higher_is_better = {"peak_share": False}

    def run(self, adapter, methods, examples, context):
        records = []
        for method in methods:
            shares = [float(np.abs(r.values).max() / np.abs(r.values).sum())
                      for r in context.attributions(adapter, method, examples)]
            records.append(self.record(adapter, context, method, "peak_share", shares, examples))
        return records


@pytest.fixture()
def peak_share(monkeypatch):
    EVALS.load()
    monkeypatch.setitem(EVALS._plugins, "peak_share", PeakShare())
    return EVALS.get("peak_share")


def suite(**entry):
    return validate_config({"name": "t", "seed": 1, "shard_size": 2, "suite": [
        {"model": "tiny-gpt2", "dataset": "sva-generated", "n": 3, **entry}]})


def test_a_plugin_evaluation_gets_its_table_and_figure(peak_share, tmp_path):
    config = suite(methods=["alti", "attn_rollout"], evals=["peak_share"])
    run_leaderboard(config, tmp_path / "run", progress=False)
    paths = write_report(tmp_path / "run")
    md, page = paths["leaderboard"].read_text(), paths["html"].read_text()
    assert "## tiny-gpt2 · sva-generated · peak_share" in md
    assert "| group | method | family | peak_share ↓ | avg rank | n |" in md
    figure = tmp_path / "run" / "figures" / "tiny-gpt2-sva-generated-peak_share.png"
    assert figure.read_bytes()[:4] == b"\x89PNG" and f"(figures/{figure.name})" in md
    assert 'alt="tiny-gpt2 · sva-generated · peak_share" src="data:image/png;base64,' in page
    assert "NaN" not in md and "NaN" not in page


def test_changing_a_method_parameter_recomputes_exactly_its_rows(tmp_path):
    run_dir = tmp_path / "run"
    first = suite(methods=["integrated_gradients", "alti"], evals=["faithfulness_corr"],
                  method_params={"integrated_gradients": {"n_steps": 2}})
    summary = run_leaderboard(first, run_dir, progress=False)
    assert summary["rows"] == 3 * (1 + 2)  # per example: the shared row and one per method
    ig_first = next(r for r in collect(run_dir)[0] if r["method"] == "integrated_gradients")
    assert ig_first["method_params"] == {"n_steps": 2, "baseline": "pad"}

    second = suite(methods=["integrated_gradients", "alti"], evals=["faithfulness_corr"],
                   method_params={"integrated_gradients": {"n_steps": 16}})
    summary = run_leaderboard(second, run_dir, progress=False)
    assert summary["rows"] == 3 and summary["attributions"] == 3  # IG's rows only; alti and the reference kept
    records, meta = collect(run_dir)
    ig = next(r for r in records if r["method"] == "integrated_gradients")
    assert ig["method_params"]["n_steps"] == 16 and meta["config"]["suite"][0]["method_params"] == {
        "integrated_gradients": {"n_steps": 16}}
    assert ig["values"] != ig_first["values"]  # 2 vs 16 quadrature steps: other scores, other correlations
    assert len(records) == 2  # the n_steps=2 results stay stored but are not part of this run's report
    assert run_leaderboard(second, run_dir, progress=False)["rows"] == 0


def test_an_evaluation_parameter_is_set_per_suite():
    config = suite(methods=["alti"], evals=["faithfulness_corr"], eval_params={"faithfulness_corr": {"rank": "dense"}})
    [plan] = plan_config(config)
    assert plan.scoring[0][0].key == "faithfulness_corr(rank=dense,reference_method=auto)"


@pytest.mark.parametrize("entry,message", [
    (dict(method_params={"integrated_gradients": {"steps": 4}}),
     "'suite[0].method_params.integrated_gradients': method 'integrated_gradients' has no parameter 'steps'; "
     "its parameters: n_steps, baseline"),
    (dict(method_params={"integrated_gradients": {"n_steps": 0}}), "'n_steps' is 0; it must be at least 1"),
    (dict(method_params={"integrated_gradients": {"n_steps": "8"}}), "'n_steps' must be int, not '8'"),
    (dict(method_params={"grad_l2": {}}), "'grad_l2' is not in this suite"),
    (dict(eval_params={"faithfulness_corr": {"rank": "pearson"}}), "'rank' is 'pearson'; allowed: scipy, dense"),
])
def test_bad_parameters_in_a_config_name_the_key(entry, message):
    with pytest.raises(InputError) as err:
        suite(methods=["integrated_gradients"], evals=["faithfulness_corr"], **entry)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_params_are_declared_checked_and_keep_the_original():
    ig = METHODS.get("integrated_gradients")
    tuned = ig.with_params(n_steps=8)
    assert tuned.get_params() == {"n_steps": 8, "baseline": "pad"} and ig.get_params()["n_steps"] == 50
    assert tuned.key == "integrated_gradients(baseline=pad,n_steps=8)"
    assert METHODS.get("attn_rollout").get_params() == {}  # attention weights: no value bias to place
    assert set(METHODS.get("ff_rollout").params) == {"value_bias", "ff_attribution", "shapley_samples"}
    with pytest.raises(InputError, match="'baseline' is 'zeros'; allowed: pad, mask, unk, eos"):
        ig.with_params(baseline="zeros")


class TinyPairs(Dataset):
    """A third party's dataset: three agreement prefixes written here, each with its contrast target."""

    name, family = "tiny-pairs", "agreement"
    description = "three hand-written agreement prefixes (a test plugin)"

    def examples(self, adapter, split, data_dir=None):
        rows = [("the keys to the cabinet", "are/is"), ("the dog near the houses", "is/are"),
                ("the authors of the book", "are/is")]
        return [Example(f"tiny-pairs:{k}", text, f"contrast:{pair}") for k, (text, pair) in enumerate(rows)], \
            {"split": split, "target": "logit(correct) - logit(wrong) of the next token"}


def test_third_party_dataset_plugin_is_listed_and_runs_on_the_leaderboard(monkeypatch, tmp_path, capsys):
    from attrbench.registry import DATASETS

    ep = EntryPoint(name="tiny-pairs", value="tests.plugin.test_registry_and_params:TinyPairs",
                    group="attrbench.datasets")
    monkeypatch.setattr("attrbench.registry.entry_points", lambda group: [ep] if group == "attrbench.datasets" else [])
    monkeypatch.setattr(DATASETS, "_plugins", dict(DATASETS._plugins))  # restored after the test
    monkeypatch.setattr(DATASETS, "_entry_points_loaded", False)
    assert main(["datasets", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert {"sst2", "sva-linzen", "sva-generated", "tiny-pairs"} <= set(listed)
    assert listed["tiny-pairs"]["family"] == "agreement"
    config = validate_config({"name": "pairs", "suite": [{"model": "tiny-gpt2", "dataset": "tiny-pairs", "n": 3,
                                                           "methods": ["alti"], "evals": ["erasure_aopc"]}]})
    run_leaderboard(config, tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    assert "## tiny-gpt2 · tiny-pairs · erasure_aopc" in (tmp_path / "run" / "leaderboard.md").read_text()
