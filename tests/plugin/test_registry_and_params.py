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
from attrbench.runtime.pipeline import plan_config, run_leaderboard
from attrbench.runtime.records import collect


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
    assert "| group | method | family | peak_share ↓ | n |" in md
    figure = tmp_path / "run" / "figures" / "tiny-gpt2-sva-generated-peak_share.png"
    assert figure.read_bytes()[:4] == b"\x89PNG" and f"(figures/{figure.name})" in md
    assert f'alt="tiny-gpt2 · sva-generated · peak_share" src="figures/{figure.name}"' in page
    assert "NaN" not in md and "NaN" not in page


def test_every_evaluations_declared_ranges_name_its_metrics():
    """``bounds`` clip a mean's interval (attrbench.ops.stats.interval): each names a metric the evaluation gives,
    as (low, high) with low < high and None for no limit; the published values keep to them (tests/test_api.py)."""
    declared = 0
    for evaluation in EVALS.all():
        for metric, bounds in evaluation.bounds.items():
            assert metric in evaluation.higher_is_better, (evaluation.name, metric)
            low, high = bounds
            assert low is not None or high is not None, (evaluation.name, metric)
            assert low is None or high is None or low < high, (evaluation.name, metric)
            declared += 1
    assert declared >= 20


def test_changing_a_method_parameter_recomputes_exactly_its_rows(tmp_path):
    run_dir = tmp_path / "run"
    first = suite(methods=["integrated_gradients", "alti"], evals=["faithfulness_corr"],
                  method_params={"integrated_gradients": {"n_steps": 2}})
    summary = run_leaderboard(first, run_dir, progress=False)
    assert summary["rows"] == 3 * (1 + 1 + 2)  # per example: the shared row, the random floor's and one per method
    ig_first = next(r for r in collect(run_dir)[0] if r["method"] == "integrated_gradients")
    assert ig_first["method_params"] == {"n_steps": 2, "tolerance": 0.05, "max_steps": 1600, "baseline": "pad"}

    second = suite(methods=["integrated_gradients", "alti"], evals=["faithfulness_corr"],
                   method_params={"integrated_gradients": {"n_steps": 16}})
    summary = run_leaderboard(second, run_dir, progress=False)
    assert summary["rows"] == 3 and summary["attributions"] == 3  # IG's rows only; alti and the reference kept
    records, meta = collect(run_dir)
    ig = next(r for r in records if r["method"] == "integrated_gradients")
    assert ig["method_params"]["n_steps"] == 16 and meta["config"]["suite"][0]["method_params"] == {
        "integrated_gradients": {"n_steps": 16}}
    assert ig["values"] != ig_first["values"]  # 2 vs 16 quadrature steps: other scores, other correlations
    assert len(records) == 3  # two methods and the floor: the n_steps=2 results stay stored, not reported
    assert run_leaderboard(second, run_dir, progress=False)["rows"] == 0


def test_an_evaluation_parameter_is_set_per_suite():
    config = suite(methods=["alti"], evals=["faithfulness_corr"], eval_params={"faithfulness_corr": {"rank": "dense"}})
    [plan] = plan_config(config)  # tiny-gpt2's contrast targets: the signed reference, fixed in the key
    assert plan.scoring[0][0].key == "faithfulness_corr(rank=dense,reference_method=auto,reference_sign=signed)"


@pytest.mark.parametrize("entry,message", [
    (dict(method_params={"integrated_gradients": {"steps": 4}}),
     "'suite[0].method_params.integrated_gradients': method 'integrated_gradients' has no parameter 'steps'; "
     "its parameters: n_steps, tolerance, max_steps, baseline"),
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
    assert tuned.get_params() == {"n_steps": 8, "tolerance": 0.05, "max_steps": 1600, "baseline": "pad"}
    assert ig.get_params()["n_steps"] == 50
    assert tuned.key == "integrated_gradients(baseline=pad,max_steps=1600,n_steps=8,tolerance=0.05)"
    assert METHODS.get("attn_rollout").get_params() == {}  # attention weights: no value bias to place
    assert set(METHODS.get("ff_rollout").params) == {"value_bias", "ff_attribution", "shapley_samples"}
    with pytest.raises(InputError, match="'baseline' is 'zeros'; allowed: pad, mask, unk, eos"):
        ig.with_params(baseline="zeros")


# The keys of these plugins with default parameters before blank_out had ``signed`` and faithfulness_corr had
# ``reference_sign``: the published stores' rows are keyed by them.
STORED_KEYS = {"blank_out": "blank_out(batch_size=64,blank_token=None)",
               "faithfulness_corr": "faithfulness_corr(rank=scipy,reference_method=auto)"}


def test_a_legacy_value_leaves_a_new_parameter_out_of_the_key():
    from attrbench.params import Configurable, Param, params_key

    class Plugin(Configurable):
        name = "p"
        params = {"steps": Param(4, "steps"), "late": Param(False, "added later", legacy=False),
                  "none_before": Param("x", "added later, rows had None", kind=(str, type(None)), legacy=None)}

    plugin = Plugin()
    assert plugin.key == "p(none_before=x,steps=4)"  # a default need not be the legacy value
    assert plugin.with_params(none_before=None).key == "p(steps=4)"
    assert plugin.with_params(late=True, none_before=None).key == "p(late=True,steps=4)"
    assert plugin.get_params() == {"steps": 4, "late": False, "none_before": "x"}  # results still record it
    assert params_key("p", {"late": False}) == "p(late=False)"  # without the declarations nothing is left out
    assert not Param(0, "", legacy=0).is_legacy(False)  # False == 0, but it is not the legacy value


def test_stored_keys_are_unchanged_by_the_signed_reference():
    blank_out, corr = METHODS.get("blank_out"), EVALS.get("faithfulness_corr")
    assert blank_out.key == blank_out.with_params(signed=False).key == STORED_KEYS["blank_out"]
    assert blank_out.with_params(signed=True).key == "blank_out(batch_size=64,blank_token=None,signed=True)"
    assert corr.with_params(reference_sign="unsigned").key == STORED_KEYS["faithfulness_corr"]
    assert corr.with_params(reference_sign="signed").key == (
        "faithfulness_corr(rank=scipy,reference_method=auto,reference_sign=signed)")
    # "auto" is never a stored row's: a suite's plan fixes it; unfixed, it is in the key, never the legacy one
    assert corr.key == "faithfulness_corr(rank=scipy,reference_method=auto,reference_sign=auto)"
    assert corr.get_params()["reference_sign"] == "auto" and blank_out.get_params()["signed"] is False


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
