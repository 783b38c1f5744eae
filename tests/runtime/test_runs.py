"""Leaderboard runs: config validation, store, resume after SIGKILL, Ray, reports in a real browser."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from attrbench.datasets.lookup import examples_for, sample
from attrbench.errors import InputError
from attrbench.models import load_model
from attrbench.report import write_report
from attrbench.runtime.config import read_config, validate_config
from attrbench.runtime.executors import LocalExecutor
from attrbench.runtime.pipeline import collect, evaluate, plan_config, run_leaderboard
from attrbench.runtime.store import Store, StoreError

CONFIG = """
name = "tiny"
seed = 3
shard_size = 2

[[suite]]
model = "tiny-gpt2"
dataset = "sva-generated"
n = 5
methods = ["alti", "blank_out", "atb_ln_ff_res"]
evals = ["faithfulness_corr", "erasure_aopc", "timing", "mixing_ratio", "context_change", "ff_amp",
         "res_ff_norms", "ln_outliers", "example_maps"]
"""


@pytest.fixture()
def config_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG)
    return path


def test_config_errors_name_the_key(tmp_path):
    def bad(text):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        return lambda: read_config(path)

    cases = [("colour = 1\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "config key 'colour' is not known; allowed"),
             ("seed = 'x'\n[[suite]]", "config key 'seed' must be int, not str"),
             ("dtype = 'float16'\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=[]", "'dtype' is 'float16'; allowed"),
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
             ("bootstrap_resamples = 50\n[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']",
              "'bootstrap_resamples' is 50; allowed: 100 or more"),
             ("[[suite]]\nmodel='m'\ndataset='sst2'\nevals=['timing']\n[[suite]]\nmodel='m'\ndataset='sst2'\n"
              "evals=['timing']", "timing on m / sst2 is already in suite[0]")]
    for text, message in cases:
        with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
            bad(text)()
    assert read_config()["name"] == "default"  # the shipped default config is valid
    path = tmp_path / "exclude.toml"  # exclude_methods at the top applies to every suite with methods = "all"
    path.write_text("exclude_methods = ['lime', 'alti']\n[[suite]]\nmodel='tiny-gpt2'\ndataset='sva-generated'\nn=2\n"
                    "methods='all'\nevals=['timing']\n[[suite]]\nmodel='tiny-bert'\ndataset='sva-generated'\n"
                    "n=2\nmethods='all'\nevals=['timing']\nexclude_methods=['kernel_shap']\n")
    units, _ = plan_config(read_config(path))
    first, second = ({u.method for u in units if u.model == m} for m in ("tiny-gpt2", "tiny-bert"))
    assert "lime" not in first and "alti" not in first and "kernel_shap" in first and "grad_l2" in first
    assert "kernel_shap" not in second and "lime" in second  # a suite's own list replaces the top one
    full = read_config("full")  # shipped configs by name: `attrbench run full`, the whole evaluation sets
    assert [(e["model"], e["n"]) for e in full["suite"][:3]] == [("minilm-l6-sst2", 872), ("minilm-l6-sva", 1123),
                                                                ("smollm2-135m", 500)]
    with pytest.raises(InputError, match="config file nosuch does not exist; the shipped configs are default, full"):
        read_config("nosuch")


def test_run_store_merge_and_rerun(config_file, tmp_path):
    config = read_config(config_file)
    run_dir = tmp_path / "run"
    first = run_leaderboard(config, run_dir, progress=False)
    units, samples = plan_config(config)
    assert first["units"] == len(units) == first["computed"]
    # 3 methods x 3 shards (timing) + 2 x 3 (faithfulness, erasure: scores methods only) x 2 + 6 analyses
    assert len(units) == 3 * 3 + 2 * 3 * 2 + 6
    again = run_leaderboard(config, run_dir, progress=False)
    assert again["computed"] == 0 and again["reused"] == len(units)
    records, meta = collect(run_dir)
    assert meta["samples"][0]["example_ids"] == list(units[0].example_ids) + [
        i for u in units[1:3] for i in u.example_ids]
    assert meta["versions"]["torch"] and meta["config_hash"]
    assert meta["models"]["tiny-gpt2"]["model"] == "tiny-gpt2"
    # shards merged = the same evaluation run in one piece
    adapter = load_model("tiny-gpt2")
    chosen = sample(examples_for(adapter, "sva-generated")[0], 5, 3)
    whole = {(r["method"], r["metric"]): r for r in evaluate(adapter, ["alti", "blank_out"], [
        "faithfulness_corr", "erasure_aopc"], "sva-generated", n=5, seed=3, progress=False)}
    for r in records:
        if r["eval"] in ("faithfulness_corr", "erasure_aopc"):
            one = whole[(r["method"], r["metric"])]
            assert r["example_ids"] == one["example_ids"] == [e.id for e in chosen]
            assert r["mean"] == pytest.approx(one["mean"], abs=1e-6) and r["n"] == one["n"]
    erasure = next(r for r in records if r["metric"] == "comprehensiveness_aopc")
    assert np.mean([float(v) for v in erasure["by_bin"].values()]) == pytest.approx(erasure["mean"], abs=1e-9)


def test_refuses_other_config_and_detects_corruption(config_file, tmp_path):
    config = read_config(config_file)
    run_dir = tmp_path / "run"
    run_leaderboard(config, run_dir, progress=False)
    other = validate_config({**{k: v for k, v in config.items() if k != "suite"}, "seed": 4,
                             "suite": [{k: v for k, v in e.items() if v is not None} for e in config["suite"]]})
    with pytest.raises(StoreError, match="different config .*differs in: seed"):
        run_leaderboard(other, run_dir, progress=False)
    db = sqlite3.connect(run_dir / "store.sqlite")
    db.execute("UPDATE units SET payload = replace(payload, '\"mean\"', '\"mean \"') WHERE rowid = 2")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="fails its checksum"):
        collect(run_dir)
    (run_dir / "store.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="is corrupt"):
        Store(run_dir / "store.sqlite")


def test_incomplete_run_gives_no_report(config_file, tmp_path):
    config = read_config(config_file)
    run_dir = tmp_path / "run"

    class Failing(LocalExecutor):
        def map(self, units, context, seed):
            for k, item in enumerate(super().map(units, context, seed)):
                if k == 3:
                    raise KeyboardInterrupt
                yield item

    with pytest.raises(KeyboardInterrupt):
        run_leaderboard(config, run_dir, Failing(), progress=False)
    with pytest.raises(StoreError, match="incomplete: .* units are missing; rerun"):
        write_report(run_dir)
    assert not (run_dir / "report.html").exists()


def test_sigkill_then_resume_loses_and_duplicates_nothing(config_file, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "attrbench.cli", "run", str(config_file), "--out", str(tmp_path), "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db_path = tmp_path / "tiny" / "store.sqlite"
    deadline = time.time() + 120
    stored = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        if db_path.exists():
            try:
                stored = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM units").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if stored >= 4:
                break
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    units, _ = plan_config(read_config(config_file))
    partial = sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM units").fetchone()[0]
    assert 4 <= partial < len(units)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["computed"] == len(units) - partial and summary["reused"] == partial
    keys = [k for (k,) in sqlite3.connect(db_path).execute("SELECT key FROM units")]
    assert sorted(keys) == sorted(u.key for u in units)  # none lost, none twice


def test_ray_executor_gives_the_same_results(config_file, tmp_path):
    ray = pytest.importorskip("ray")
    from attrbench.runtime.executors import RayExecutor

    config = read_config(config_file)
    config["suite"][0]["evals"] = ["faithfulness_corr", "erasure_aopc", "mixing_ratio"]
    config["suite"][0]["methods"] = ["alti", "blank_out"]  # none of these evaluations takes the map method
    run_leaderboard(config, tmp_path / "local", progress=False)
    try:
        run_leaderboard(config, tmp_path / "ray", RayExecutor(num_cpus=2), progress=False)
    finally:
        ray.shutdown()
    local, _ = collect(tmp_path / "local")
    remote, meta = collect(tmp_path / "ray")
    assert meta["executor"] == "ray"
    key = lambda r: (r["eval"], r["method"], r["metric"])  # noqa: E731
    for a, b in zip(sorted(local, key=key), sorted(remote, key=key)):
        assert key(a) == key(b) and a["example_ids"] == b["example_ids"]
        assert a["mean"] == pytest.approx(b["mean"], abs=1e-6)


def test_ray_address_that_does_not_answer():
    pytest.importorskip("ray")
    from attrbench.runtime.executors import RayExecutor

    with pytest.raises(InputError, match="does not answer"):
        RayExecutor(address="127.0.0.1:1")


def test_score_external_attributions(tmp_path, capsys):
    from attrbench.cli import main
    from attrbench.plugin.registry import METHODS

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
