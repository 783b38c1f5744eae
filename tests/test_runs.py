"""Leaderboard runs: config validation, store, resume after SIGKILL, Ray, reports in a real browser."""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from attrbench.datasets import examples_for, sample
from attrbench.errors import InputError
from attrbench.planning import evaluate
from attrbench.models import load_model
from attrbench.report import write_report
from attrbench.runs import LocalExecutor, collect, plan, read_config, run_leaderboard, validate_config
from attrbench.store import Store, StoreError

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
    units, _ = plan(read_config(path))
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
    units, samples = plan(config)
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
        def map(self, config, units, context):
            for k, item in enumerate(super().map(config, units, context)):
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
    units, _ = plan(read_config(config_file))
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
    from attrbench.runs import RayExecutor

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
    from attrbench.runs import RayExecutor

    with pytest.raises(InputError, match="does not answer"):
        RayExecutor(address="127.0.0.1:1")


def test_report_renders_in_headless_chromium(config_file, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("ATTRBENCH_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed but ATTRBENCH_REQUIRE_BROWSER is set")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    config = read_config(config_file)
    run_leaderboard(config, tmp_path / "run", progress=False)
    paths = write_report(tmp_path / "run")
    page = paths["html"].read_text()
    assert "http://" not in page and "https://" not in page  # self-contained
    probe = tmp_path / "probe.html"  # the report plus a script that counts images the browser decoded
    probe.write_text(page.replace("</body>", "<script>window.addEventListener('load', () => {const im = "
                                  "[...document.images]; document.body.dataset.decoded = im.filter(i => i.complete "
                                  "&& i.naturalWidth > 0).length; document.body.dataset.shrunk = im.filter(i => "
                                  "(i.alt.includes('example_maps') || i.alt.includes('vs cost')) && i.clientWidth < 0.95 * i.naturalWidth).length;"
                                  "});</script></body>"))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                          "--window-size=1280,2000",
                          probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<table") == paths["tables"] == 11  # headline, metric agreement, 9 evaluation tables
    assert f'data-decoded="{paths["figures"]}"' in dom and paths["figures"] >= 9
    assert 'data-shrunk="0"' in dom  # heatmaps show at their own size, so token labels keep their font size
    for title in ("faithfulness_corr", "erasure_aopc", "mixing_ratio", "context_change", "example_maps"):
        assert f"tiny-gpt2 · sva-generated · {title}" in dom
    leaderboard = paths["leaderboard"].read_text()
    assert leaderboard.count("\n## ") == 11 and "| rank | method | spearman ↑" in leaderboard
    sections = leaderboard.split("\n## ")[1:]
    assert sections[0].startswith("Headline") and "pareto.png" in sections[0] and "| mean tier | method |" in sections[0]
    assert sections[1].startswith("tiny-gpt2 · sva-generated · metric agreement")
    faithfulness_section = next(x for x in sections if x.startswith("tiny-gpt2 · sva-generated · faithfulness_corr"))
    assert "faithfulness_corr.png" in faithfulness_section  # each figure next to its table
    # the reference is shown, unranked; every other value is mean [CI]; tiers and CIs are explained once
    assert "| reference | blank_out | 1.000 [1.000, 1.000] |" in leaderboard
    assert re.search(r"\| 1=? \| alti \| -?\d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\] \|", leaderboard)
    assert "Rank = significance tier" in leaderboard and "Rank = significance tier" in dom
    assert "BCa, 9999 resamples" in leaderboard and "± " not in leaderboard
    visible = re.sub(r'src="data:[^"]*"', "", page)  # base64 images may spell anything
    assert not re.search(r"\bnan\b", visible + leaderboard, re.IGNORECASE)
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    faithfulness = statistics["tiny-gpt2 · sva-generated · faithfulness_corr"]
    assert faithfulness["reference"] == "blank_out" and set(faithfulness["tier"]) == {"alti"}
    store = Store(tmp_path / "run" / "store.sqlite")
    assert store.meta("statistics") == statistics  # p-values and tiers stored beside the units
    store.close()


def test_leaderboard_names_a_task_models_own_weights():
    from attrbench.report import model_line

    task = {"model_source": "/c/tasks/m", "weights_sha256": "a" * 64,
            "loaded_weights_sha256": {"model.safetensors": "b" * 64},
            "training": {"built": "2026-11-21 14:11:38", "dev_accuracy": 0.8819}}
    assert model_line("m", task) == ("- model `m`: /c/tasks/m, weights sha256 bbbbbbbbbbbb… (base model aaaaaaaaaaaa…);"
                                     " trained locally 2026-11-21 14:11:38, accuracy 0.882")
    zoo = {"model_source": "/c/z", "weights_sha256": "c" * 64}
    assert model_line("z", zoo) == "- model `z`: /c/z, weights sha256 cccccccccccc…"


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
