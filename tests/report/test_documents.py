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


def test_report_renders_in_headless_chromium(config_file, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("ATTRBENCH_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed but ATTRBENCH_REQUIRE_BROWSER is set")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    config = read_config(config_file)
    run_leaderboard(config, tmp_path / "run", progress=False)
    store_bytes = (tmp_path / "run" / "store.sqlite").read_bytes()
    paths = write_report(tmp_path / "run")
    assert (tmp_path / "run" / "store.sqlite").read_bytes() == store_bytes  # the report reads the store, never writes
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


def test_leaderboard_names_a_task_models_own_weights():
    from attrbench.report import model_line

    task = {"model_source": "/c/tasks/m", "weights_sha256": "a" * 64,
            "loaded_weights_sha256": {"model.safetensors": "b" * 64},
            "training": {"built": "2026-11-21 14:11:38", "dev_accuracy": 0.8819}}
    assert model_line("m", task) == ("- model `m`: /c/tasks/m, weights sha256 bbbbbbbbbbbb… (base model aaaaaaaaaaaa…);"
                                     " trained locally 2026-11-21 14:11:38, accuracy 0.882")
    zoo = {"model_source": "/c/z", "weights_sha256": "c" * 64}
    assert model_line("z", zoo) == "- model `z`: /c/z, weights sha256 cccccccccccc…"

