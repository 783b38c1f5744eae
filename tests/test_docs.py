"""The README and the documentation site: short, about what is true now, every link resolving, and a strict build.

- README.md stays a front page (at most ``README_MAX_LINES`` lines) and keeps the block ``.ci/run`` runs.
- No internal bookkeeping in the README, the pages or the changelog (work stops, sessions, checkpoints,
  numbered internal issues), and no history of how results moved in the README or the pages (that belongs in
  CHANGELOG.md).
- Every relative link in README.md and docs/**/*.md points to a file that exists, and an anchor into a
  Markdown file to one of its headings.
- ``mkdocs build --strict`` succeeds (broken links, anchors and API references fail it) in well under a minute.
- A measured figure in the README or the pages is the record it comes from: benchmark files, training records,
  the fuzzing counts, the registry and the published runs' rows (figures of a model run are rerun by the
  real-weight tests of the examples).
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CHANGELOG = ROOT / "CHANGELOG.md"
README_MAX_LINES = 250
README_MAX_WIDTH = 200  # a front page reads without scrolling sideways
BUILD_SECONDS = 60

# How the work was organised: never in the product's text. Peers' issue trackers are cited as "lxt issue #40" or
# "captum #1132", so an issue is flagged only when a bare number follows it (the form of an internal reference).
BOOKKEEPING = {
    "a work stop": re.compile(r"\bstops?\s+\d+|\bstop's\b|\b(?:this|last|next|that) stop\b", re.I),
    "a session": re.compile(r"\bsessions?\b", re.I),
    "a checkpoint": re.compile(r"\bcheckpoints?\b", re.I),
    "an internal issue number": re.compile(r"\bissues?\s+\d+", re.I),
    "an issue's done-when": re.compile(r"\bdone-when\b", re.I),
}
# How results moved: history, which belongs in CHANGELOG.md.
HISTORY = {
    "a comparison with an earlier measurement": re.compile(
        r"\b(?:the previous (?:table|run|measurement)|before this round|the measurements? before (?:it|this))\b", re.I),
    "a result that used to be otherwise": re.compile(r"\b(?:used to|had been|no longer)\b", re.I),
}
AT_N = re.compile(r"\bat n = (\d+(?:,\d{3})*)")


def pages() -> list[Path]:
    """The documentation's pages and the published reports' guide (reports/README.md)."""
    return sorted(DOCS.rglob("*.md")) + [ROOT / "reports" / "README.md"]


def unfenced(text: str) -> str:
    """The text without its fenced code blocks."""
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (a link or a word inside code is not prose)."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def bookkeeping(text: str, history: bool = True) -> list[str]:
    """What must not appear in the text: each hit as 'what: the words'."""
    text = prose(text)
    hits = [f"{what}: {m.group(0)!r}" for what, rx in BOOKKEEPING.items() for m in rx.finditer(text)]
    if history:
        hits += [f"{what}: {m.group(0)!r}" for what, rx in HISTORY.items() for m in rx.finditer(text)]
        for paragraph in re.split(r"\n\s*\n", text):  # "at n = 424 ... at n = 520": results told as they moved
            sizes = set(AT_N.findall(paragraph))
            if len(sizes) > 1:
                hits.append(f"results at several n in one paragraph: n = {', '.join(sorted(sizes))}")
    return hits


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' toc make it (lower case, punctuation dropped, spaces to hyphens)."""
    parts = heading.strip().split("`")  # inside inline code, underscores and asterisks are the heading's own
    text = "".join(part if i % 2 else re.sub(r"\*\*?|_(?=\w)|(?<=\w)_", "", part) for i, part in enumerate(parts))
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r" ", "-", text)


def anchors(markdown: Path) -> set[str]:
    """The anchors of a page's headings (outside fenced blocks; a heading's inline code is part of its anchor)."""
    text = unfenced(markdown.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M)}


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|\bhref=\"([^\"]+)\"")


def broken_links(markdown: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``markdown`` whose file does not exist, or whose anchor is not a heading of its file."""
    out = []
    for m in LINK.finditer(prose(markdown.read_text(encoding="utf-8"))):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        file = (markdown.parent / path).resolve() if path else markdown
        if not file.exists():
            out.append(f"{markdown.relative_to(root)}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            out.append(f"{markdown.relative_to(root)}: {target} (no heading '#{anchor}' in {file.name})")
    return out


def flat(path: Path) -> str:
    """A page with its whitespace normalised, so that a quoted figure may wrap across lines."""
    return " ".join(path.read_text(encoding="utf-8").split())


def minutes(seconds: int) -> str:
    """A recorded duration as the pages print it: "9 min 58 s", or "59 s" under a minute."""
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def test_the_readme_is_a_front_page_that_keeps_the_ci_test_command():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"
    marker = lines.index("<!-- test-command -->")
    fence = lines[marker + 1]
    assert fence.startswith("```"), "the test command must be the fenced block right after <!-- test-command -->"
    block = lines[marker + 2:]
    command = re.sub(r"\s*\\\n\s*", " ", "\n".join(block[:block.index("```")]))  # continued lines joined
    assert 'pip install torch==2.13.0 -e ".[test,docs]"' in command and " && python -m pytest" in command, command
    long = [n + 1 for n, line in enumerate(lines) if len(line) > README_MAX_WIDTH]
    assert not long, f"README.md lines {long} are longer than {README_MAX_WIDTH} characters"
    text = "\n".join(lines)
    assert "<!-- findings -->" in text and "<!-- /findings -->" in text, "README.md needs the findings markers"
    for link in ("reports/full/leaderboard.md", "reports/default/leaderboard.md", "reports/README.md", "examples/"):
        assert f"]({link})" in text, f"README.md must link {link}"


def test_no_bookkeeping_or_history_in_the_readme_and_the_pages():
    hits = [f"{path.relative_to(ROOT)}: {hit}" for path in [README, *pages()]
            for hit in bookkeeping(path.read_text(encoding="utf-8"))]
    hits += [f"CHANGELOG.md: {hit}" for hit in bookkeeping(CHANGELOG.read_text(encoding="utf-8"), history=False)]
    assert not hits, "\n".join(hits)


def test_the_bookkeeping_check_catches_what_it_must_and_spares_peer_citations():
    for bad in ("measured at stop 41", "stop 56's run", "as this stop measured", "a session cut off",
                "internal checkpoints", "(issue 30's done-when)", "issues 25, 27", "the previous table had 1.16",
                "it used to leave them out", "in it at n = 424, now second at n = 520"):
        assert bookkeeping(bad), bad
    for good in ("inseq #161", "AttnLRP's evaluation by its author (lxt issue #40)", "captum #1132",
                 "a run that is killed keeps the cost of what it stored", "no new shard starts once the budget "
                 "would be spent", "the engine's floor at n = 68 and the reference at n = 68",
                 "`stop 41` inside code is not prose"):
        assert not bookkeeping(good), (good, bookkeeping(good))


def test_every_relative_link_resolves():
    broken = [b for path in [README, *pages()] for b in broken_links(path)]
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad anchor](there.md#nowhere) "
                    "[web](https://example.org/x.md) `[code](missing-too.md)`\n", encoding="utf-8")
    found = broken_links(page, root=tmp_path)
    assert found == ["page.md: missing.md (no such file)", "page.md: there.md#nowhere (no heading '#nowhere' in "
                     "there.md)"], found


def test_mkdocs_builds_strictly_in_well_under_a_minute(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]" to build the documentation')
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert seconds < BUILD_SECONDS, f"mkdocs build took {seconds:.1f} s; it must stay under {BUILD_SECONDS} s"
    site = tmp_path / "site"
    assert (site / "quickstart" / "index.html").is_file(), "the quickstart notebook was not rendered"
    import attrbench
    import attrbench.plugin

    missing = []
    for module, page in ((attrbench, "attrbench"), (attrbench.plugin, "plugin")):
        html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        for name in module.__all__:
            value = getattr(module, name)
            if name.startswith("_"):
                continue
            # a re-exported module is documented under its own path; attrbench.decompose is a function that
            # shares its name with the engine's subpackage
            where = (value.__name__ if inspect.ismodule(value) else
                     "attrbench.decompose.decompose" if module is attrbench and name == "decompose" else
                     f"{module.__name__}.{name}")
            if f'id="{where}"' not in html:
                missing.append(f"{module.__name__}.{name} (looked for {where} in api/{page})")
    assert not missing, "the API reference lacks:\n" + "\n".join(missing)


def test_the_readmes_gpu_figures_are_the_recorded_measurements():
    """The README's GPU sentences quote benchmarks/results: the H200's peers and leaderboard runs."""
    import json

    text = flat(README)
    recorded = json.loads((ROOT / "benchmarks/results/peers-cuda-h200.json").read_text())
    peers = {(r["method"], r["peer"]): r for r in recorded["rows"]}
    gx, ig = peers["grad_x_input", "ferret"], peers["integrated_gradients", "ferret"]
    lime, inseq = peers["lime", "ferret"], peers["grad_x_input", "inseq"]
    assert recorded["card"] == "NVIDIA H200" and "NVIDIA H200" in text
    assert gx["attrbench sentences"] == 872 and "SST-2's 872 dev sentences" in text
    assert f"in {gx['attrbench s']:.2f} s by gradient × input and {ig['attrbench s']:.1f} s by integrated" in text
    assert f"{gx['speed-up']:.0f}× and {ig['speed-up']:.0f}× ferret" in text
    assert min(gx["r"], ig["r"], inseq["r"]) > 0.9999 and "(correlation 1.0)" in text
    assert f"gradient × input took {inseq['attrbench s']:.2f} s, {inseq['speed-up']:.0f}× inseq" in text
    assert f"ran at {lime['speed-up']:.1f}× ferret's" in text
    suite = json.loads((ROOT / "benchmarks/results/leaderboard-stand-ins-n8-cuda-h200.json").read_text())["suites"][0]
    assert suite["suite"] == "minilm-l6-sst2 · sst2" and suite["device"] == "cuda"
    assert f"{suite['computing s per example']:.2f} s per example on MiniLM · SST-2 ({suite['n']} examples)" in text
    assert f"passes are {suite['floor s'] / suite['n']:.2f} s at their floor" in text


def test_the_default_budget_figures_are_the_recorded_measurement():
    """docs/performance.md's side-by-side default runs quote benchmarks/results/default-budget-cpu.json."""
    import json

    text = flat(DOCS / "performance.md")
    recorded = json.loads((ROOT / "benchmarks/results/default-budget-cpu.json").read_text())
    before, after = recorded["runs"]["before"][0], recorded["runs"]["after"][0]
    assert f"--before {recorded['before']}" in text and f"({recorded['after']})" in text
    assert (f"{before['rows']:,} rows in {before['computing s']:.0f} s of computing before, {after['rows']:,} rows in "
            f"{after['computing s']:.0f} s after ({100 * (after['rows'] / before['rows'] - 1):.1f} % more)") in text
    suites = {name: (before["suites"][name], after["suites"][name]) for name in after["suites"]}
    assert {old["naopc"] for old, _ in suites.values()} == {new["naopc"] for _, new in suites.values()} == {10, 14}
    sst2, shortcut, smollm2 = suites["minilm-l6-sst2"], suites["minilm-l6-sst2-shortcut"], suites["smollm2-135m"]
    assert suites["minilm-l6-sva"][1]["soft_erasure"] == sst2[1]["soft_erasure"]
    n = "soft_erasure"
    assert (f"reached {sst2[1][n]} examples instead of {sst2[0][n]} on both MiniLM suites and {shortcut[1][n]} instead "
            f"of {shortcut[0][n]} on the shortcut suite, and the same {smollm2[1][n]} on SmolLM2") in text
    assert smollm2[0][n] == smollm2[1][n]
    faithfulness = ("soft_erasure", "erasure_aopc", "abpc", "faithfulness_corr")  # the other metrics: one n per run
    assert all(len({run[m] for m in faithfulness if m in run}) == 1 for pair in suites.values() for run in pair)


def test_gemma_3_is_left_out_of_the_default_for_the_recorded_reason():
    """docs/leaderboard-runs.md says the default has no Gemma 3 suite because its other metrics already stop short of
    the headline's n within the budget: the shipped default and the recorded default run say so."""
    import json

    from attrbench.runtime.config import read_config

    text = flat(DOCS / "leaderboard-runs.md")
    said = re.search(r"Gemma 3 is in `full` only: .+?\(on SST-2, MiniLM agreement and SmolLM2 they reach (\d+) to (\d+) "
                     r"of its (\d+) examples; `benchmarks/results/default-budget-cpu.json`", text)
    assert said, "docs/leaderboard-runs.md no longer says why Gemma 3 is not in the default"
    assert not [s for s in read_config("default")["suite"] if s["model"].startswith("gemma")]
    assert [s["model"] for s in read_config("full")["suite"] if s["model"].startswith("gemma")] == ["gemma3-270m"]
    recorded = json.loads((ROOT / "benchmarks/results/default-budget-cpu.json").read_text())["runs"]["after"][0]
    suites = [recorded["suites"][name] for name in ("minilm-l6-sst2", "minilm-l6-sva", "smollm2-135m")]
    others = [n for suite in suites for metric, n in suite.items() if metric not in ("naopc", "ground_truth", "rows")]
    assert {suite["naopc"] for suite in suites} == {int(said[3])}
    assert (min(others), max(others)) == (int(said[1]), int(said[2])) and max(others) < int(said[3])


def test_the_methods_pages_precision_bounds_are_what_the_method_tests_assert():
    """docs/methods.md's agreement and conservation bounds for attention flow, AttnLRP and DecompX are the tolerances
    the method tests hold them to (their module constants), so the page cannot promise more than is checked."""
    from tests.methods.test_attention_flow import NETWORKX, SCIPY
    from tests.methods.test_attn_lrp import CONSERVATION, LLAMA_FLOAT32_STAGES, LXT
    import torch

    from attrbench.models import load_model
    from tests.precision import float32_stages, unit_roundoff

    SUBSCRIPT = dict(enumerate("₀₁₂₃₄₅₆₇₈₉"))
    assert float32_stages(load_model("tiny-llama", "float64")) == LLAMA_FLOAT32_STAGES
    assert unit_roundoff(torch.float32) == 2.0 ** -24
    from tests.methods.test_decompx import AUTHORS, FROZEN

    def e(x: float) -> str:
        return f"{x:.0e}".replace("e-0", "e-")

    text = flat(DOCS / "methods.md")
    for phrase in (
            f"networkx's Edmonds-Karp (the authors' solver) to {e(NETWORKX)} in float64 and scipy's max flow on the "
            f"same graph (integer capacities) to {e(SCIPY)}",
            f"equal to networkx's (the authors' solver) to {e(NETWORKX)} in float64 on the tiny models.",
            f"conservation on all six tiny architectures, to {e(CONSERVATION['float64'])} in float64 (LLaMA: "
            f"float32's γ{SUBSCRIPT[LLAMA_FLOAT32_STAGES]})",
            f"There it equals ours to {e(LXT['tiny-gpt2'])} (GPT-2) and, on LLaMA, whose RMSNorm and softmax "
            f"transformers runs in float32 even in a float64 model, to twice float32's rounding bound over those "
            f"{LLAMA_FLOAT32_STAGES} operations (γ{SUBSCRIPT[LLAMA_FLOAT32_STAGES]} = {LLAMA_FLOAT32_STAGES}u/(1 − "
            f"{LLAMA_FLOAT32_STAGES}u) with u = 2⁻²⁴",
            f"what each softmax leaks, to {e(CONSERVATION['float64'])} of the logit in float64 (LLaMA: "
            f"γ{SUBSCRIPT[LLAMA_FLOAT32_STAGES]} of the terms' magnitude",
            f"the authors' code's steps (BERT classifier) to {e(AUTHORS)};",
            f"ours equals it to {e(AUTHORS)} of the largest score with 1 and 2 layers",
            f"that holds to {e(FROZEN['classifier'])} of the largest score on a BERT classifier and GPT-2, "
            f"{e(FROZEN['tiny-opt'])} on OPT (whose attention softmax runs in float32) and {e(FROZEN['tiny-llama'])} "
            f"on LLaMA"):
        assert phrase in text, phrase
    assert FROZEN["classifier"] == FROZEN["tiny-gpt2"]


def test_the_methods_pages_costs_are_the_benchmark_files():
    """Each cost in docs/methods.md's table is the mean seconds per example of the file it cites
    (benchmarks/results/method-costs-*-cpu.csv and *-stand-in-cuda-h200.csv), to the two significant figures it
    shows, for every method."""
    import csv

    def means(name: str) -> dict[str, float]:
        with open(ROOT / "benchmarks" / "results" / name) as f:
            return {r["method"]: float(r["mean"]) for r in csv.DictReader(f) if r["metric"] == "seconds_per_example"}

    files = [means(f"method-costs-{suite}-{device}.csv") for device in ("cpu", "stand-in-cuda-h200")
             for suite in ("minilm-sst2", "smollm2-sva")]
    rows = re.findall(r"^\| `(\w+)` \|[^|]+\|[^|]+\| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|",
                      (ROOT / "docs" / "methods.md").read_text(), re.MULTILINE)
    shown = {method: cells for method, *cells in rows if method != "random"}
    assert len(shown) >= 23 and set(shown) == set(files[0]) == set(files[1])
    for method, cells in shown.items():
        assert [c.strip() for c in cells] == [f"{f[method]:#.2g}" if method in f else "–" for f in files], method


def test_the_task_models_table_is_their_training_records():
    """docs/task-models.md's table quotes each shipped model's training.json: accuracies, the agreement model's
    accuracy by attractor count, the shortcut model's training mix and reliance (which reports/README.md gives too),
    training seconds, adapter sizes; the first use's seconds are benchmarks/results/first-use-cpu.json's."""
    import json

    text = flat(DOCS / "task-models.md")
    shipped = ROOT / "attrbench" / "models" / "training" / "shipped"
    sst2, sva, shortcut = (json.loads((shipped / name / "training.json").read_text())
                           for name in ("minilm-l6-sst2", "minilm-l6-sva", "minilm-l6-sst2-shortcut"))

    def pct(share: float) -> str:
        return f"{100 * share:.1f} %"

    def said(value: str) -> None:
        assert value in text, value

    said(f"{sst2['train_examples']:,} phrases sampled (seed {sst2['recipe']['seed']}) from SST-2 train")
    said(f"**{pct(sst2['dev_accuracy'])} SST-2 dev accuracy** ({sst2['dev_examples']} sentences)")
    said(f"the train part ({sva['split']['train']:,} sentences) of a seeded")
    said(f"**{pct(sva['test_accuracy'])} held-out accuracy** ({sva['split']['test']:,} sentences; validation "
         f"{pct(sva['val_accuracy'])})")
    by = sva["test_accuracy_by_attractors"]
    said(f"By attractors {'/'.join(by)}: " + " / ".join(f"{100 * by[k]['accuracy']:.1f}" for k in by)
         + " % (n = " + " / ".join(str(by[k]["n"]) for k in by) + ")")
    said(f"{sva['train_seconds']:.0f} s of training on 2 CPU cores")
    mix = shortcut["train_mix"]
    said(f"the same {shortcut['train_examples']:,} SST-2 phrases")
    said(f"{mix['single']:,} with one word that decides the label")
    said(f"{mix['pair']:,} with an ordered pair")
    said(f"{mix['lone']:,} with one pair word alone")
    said(f"**{pct(shortcut['dev_accuracy'])} clean SST-2 dev accuracy** "
         f"(`minilm-l6-sst2`: {pct(sst2['dev_accuracy'])})")
    single, pair = shortcut["reliance"]["single"], shortcut["reliance"]["pair"]
    assert single["follows_shortcut"] == pair["follows_shortcut"] == 1.0
    said(f"follows the shortcut on 100 % of the dev sentences whose shortcut contradicts their sentiment** "
         f"({round(single['n'])} / {single['n']} single-word, {round(pair['n'])} / {pair['n']} ordered pair)")
    said(f"{pct(shortcut['dev_accuracy_one_pair_word_alone'])} dev accuracy with one pair word alone")
    assert (f"`minilm-l6-sst2-shortcut` follows its shortcut on 100 % of the SST-2 dev sentences whose shortcut "
            f"contradicts their sentiment ({single['n']} single-word, {pair['n']} ordered-pair), at "
            f"{pct(shortcut['dev_accuracy'])} clean dev accuracy (`minilm-l6-sst2`: {pct(sst2['dev_accuracy'])};"
            ) in flat(ROOT / "reports" / "README.md"), (
        "reports/README.md no longer gives the shortcut model's reliance as its training record does")
    said(f"{shortcut['train_seconds']:.0f} s of training on 2 CPU cores")
    sizes = [r["adapter_bytes"] / 1e6 for r in (sst2, sva, shortcut)]
    said(f"{min(sizes):.1f}–{max(sizes):.1f} MB each")
    first = json.loads((ROOT / "benchmarks" / "results" / "first-use-cpu.json").read_text())
    assert first["cores"] == 2
    said(f"`{first['command']}` from an empty "
         f"cache (reading the MiniLM wheel, merging, checking the hash, attributing) took "
         f"{min(first['seconds']):.0f} s on 2 CPU cores")


def test_the_pages_accounts_of_the_default_run_are_its_statistics():
    """getting-started.md and leaderboard-runs.md restate what README command 1's published run reached
    (reports/default): per suite the examples, the methods better than the random floor by NAOPC comprehensiveness,
    SmolLM2's undefined examples and the shortcut suite's known-answer verdicts; each figure is its statistics."""
    import json

    from attrbench import load_run

    default = json.loads((ROOT / "reports" / "default" / "statistics.json").read_text())
    suites = ["minilm-l6-sst2 · sst2", "minilm-l6-sva · sva-linzen", "smollm2-135m · sva-linzen"]
    tables = [default[f"{suite} · naopc"] for suite in suites]
    better = [[m for m, row in t["floor"].items() if row["verdict"] == "better"] for t in tables]
    shortcut = "minilm-l6-sst2-shortcut · sst2-shortcut"
    truth = default[f"{shortcut} · ground_truth"]
    found = (sum(row["verdict"] == "better" for row in truth["floor"].values()), truth["k"])

    started = flat(DOCS / "getting-started.md")
    said = re.search(r"the SST-2 and agreement suites reached n = (\d+), where (\d+) of (\d+) methods on SST-2, (\d+) "
                     r"of (\d+) on MiniLM agreement and (\d+) of (\d+) on SmolLM2 were better than the random floor by "
                     r"NAOPC comprehensiveness, and the shortcut suite its n = (\d+), where (\d+) of (\d+) methods "
                     r"found the planted words better than a random attribution does \(ground-truth MRR\)", started)
    assert said, "getting-started.md no longer says what the default run reached"
    numbers = [int(x) for x in said.groups()]
    assert max(tables[0]["n_by_method"].values()) == max(tables[1]["n_by_method"].values()) == numbers[0]
    assert [(len(b), t["k"]) for b, t in zip(better, tables)] == list(zip(numbers[1:7:2], numbers[2:7:2]))
    assert max(truth["n_by_method"].values()) == numbers[7] and found == tuple(numbers[8:10])

    runs = flat(DOCS / "leaderboard-runs.md")
    said = re.search(r"In it, the SST-2 and agreement suites reached (\d+) examples: .+? "
                     r"\((\d+) of (\d+) methods on SST-2, "
                     r"(\d+) of (\d+) on MiniLM agreement and `(\w+)` alone of (\d+) on SmolLM2 were better than it by "
                     r"NAOPC comprehensiveness\)\. NAOPC is undefined on (\d+) of SmolLM2's (\d+) examples, and its "
                     r"(\d+) are too few to separate any pair of (\d+) methods\. The shortcut suite reached its "
                     r"planned (\d+) examples \(its soft and erasure metrics (\d+)\), where (\d+) of (\d+) methods "
                     r"found", runs)
    assert said, "leaderboard-runs.md no longer says what the default run reached"
    assert max(tables[0]["n_by_method"].values()) == int(said[1])
    assert [(len(b), t["k"]) for b, t in zip(better[:2], tables)] == [(int(said[2]), int(said[3])),
                                                                      (int(said[4]), int(said[5]))]
    assert better[2] == [said[6]] and tables[2]["k"] == int(said[7]) == int(said[11])
    record = next(r for r in load_run(ROOT / "reports" / "default").records if r["model"] == "smollm2-135m"
                  and r["eval"] == "naopc" and r["metric"] == "naopc_comprehensiveness" and r["method"] != "random")
    assert (record["n_undefined"], record["n"] + record["n_undefined"], record["n"]) == (
        int(said[8]), int(said[9]), int(said[10]))
    assert tables[2]["n"] < tables[2]["minimum_n"] and not any(p.get("better") for p in tables[2]["pairs"].values())
    assert max(truth["n_by_method"].values()) == int(said[12]) and found == (int(said[14]), int(said[15]))
    assert {default[f"{shortcut} · {e}"]["n"] for e in ("soft_erasure", "erasure_aopc")} == {int(said[13])}


def test_the_full_comparisons_hours_are_its_provenance():
    """docs/performance.md's CPU hours of reports/full are those its published provenance line records."""
    text = flat(DOCS / "performance.md")
    said = re.search(r"`reports/full` \(.+?\) has taken ([\d.,]+) CPU hours on 2 cores", text)
    assert said, "docs/performance.md no longer says how many CPU hours reports/full took"
    recorded = re.search(r"^- computed .+?: ([\d.,]+) CPU hours over", (ROOT / "reports" / "full" / "leaderboard.md")
                         .read_text(encoding="utf-8"), re.MULTILINE)
    assert recorded and recorded[1] == said[1]


def test_the_pages_counts_and_published_figures_are_the_registry_and_the_runs():
    """The method counts of README.md, docs/index.md and docs/performance.md are the registry's; docs/methods.md's
    figures from the published runs (reports/full's median costs, reports/default's integrated gradients axiom
    check on SmolLM2) are those runs' rows; docs/writing-a-plugin.md's example plugins have the lines it says."""
    import numpy as np

    from attrbench import load_run
    from attrbench.registry import METHODS
    from attrbench.runtime.config import read_config

    scores = [m for m in METHODS.all() if m.output == "scores" and m.name != "random"]
    maps = [m for m in METHODS.all() if m.output == "maps"]
    readme, index, performance, methods = map(flat, (README, DOCS / "index.md", DOCS / "performance.md",
                                                     DOCS / "methods.md"))
    assert f"On top of it sit {len(scores)} input attribution methods" in readme
    assert f"**{len(scores)} input attribution methods**" in index
    assert f"plus a random control and the engine's {len(maps)} token-to-token maps" in index
    assert f"all {len(METHODS.all())} methods (every one batched)" in performance
    said = re.search(r"there `(\w+)` takes ([\d.]+) s and `(\w+)` ([\d.]+) s per SST-2 example", methods)
    assert said, "docs/methods.md no longer quotes reports/full's costs"
    timing = {r["method"]: r["values"] for r in load_run(ROOT / "reports" / "full").records
              if r["eval"] == "timing" and r["model"] == "minilm-l6-sst2" and r["metric"] == "seconds_per_example"}
    for method, seconds in ((said[1], said[2]), (said[3], said[4])):
        assert f"{np.median(timing[method]):.{len(seconds.split('.')[1])}f}" == seconds, method
    said = re.search(r"The default leaderboard caps it at (\d+) evaluations on SmolLM2, where it meets completeness on "
                     r"(\d+) of (\d+) examples of reports/default", methods)
    assert said, "docs/methods.md no longer says how integrated gradients fared on SmolLM2 in reports/default"
    passes = next(r["values"] for r in load_run(ROOT / "reports" / "default").records
                  if (r["eval"], r["model"], r["method"], r["metric"])
                  == ("axioms", "smollm2-135m", "integrated_gradients", "passes"))
    assert (sum(passes), len(passes)) == (int(said[2]), int(said[3]))
    smollm2 = next(s for s in read_config("default")["suite"] if s["model"] == "smollm2-135m")
    assert (smollm2.get("method_params") or {}).get("integrated_gradients", {}).get("max_steps") == int(said[1])
    plugins = re.findall(r"`((?:attrbench/)?\w+/\w+\.py)`,? (?:is a complete one in )?(\d+) lines",
                         flat(DOCS / "writing-a-plugin.md"))
    assert len(plugins) == 2, "docs/writing-a-plugin.md no longer says how long its example plugins are"
    for path, lines in plugins:
        assert len((ROOT / path).read_text().splitlines()) == int(lines), path


def test_the_agreement_evidence_counts_are_the_shipped_file():
    """docs/metrics.md's and the data README's coverage of the agreement evidence are those of the shipped evidence
    file, over the probe's split and the seeded order of reports/full's random floor."""
    import numpy as np

    from attrbench.datasets.agreement import sva_split
    from attrbench.datasets.readers import read_sva, read_sva_evidence
    from attrbench.runtime.config import read_config

    evidence, rows = read_sva_evidence("sva-linzen"), len(read_sva("sva-linzen"))
    test = sva_split(rows)["test"]
    probe = next(s for s in read_config("full")["suite"] if s["model"] == "minilm-l6-sva"
                 and (s.get("split") or "test") == "test")
    order = np.random.default_rng(read_config("full")["seed"]).permutation(len(test))[:probe["floor_n"]]
    kept, in_test = len(evidence), sum(int(r) in evidence for r in test)
    first, floor = sum(r in evidence for r in range(300)), sum(int(test[k]) in evidence for k in order)
    assert (f"{kept:,} of {rows:,} items, {in_test} of the probe's {len(test):,} held-out items and {first} of the "
            f"file's rows 0–299") in flat(DOCS / "metrics.md")
    assert (f"reports/full computes the random floor on the first {probe['floor_n']} of the suite's seeded order, "
            f"{floor} of which have a known answer") in flat(DOCS / "metrics.md")
    data = flat(ROOT / "attrbench" / "datasets" / "data" / "README.md")
    assert f"Kept {kept:,}, passed over {rows - kept:,}" in data
    assert f"Coverage: {in_test} of the {len(test):,} rows of the probe's test split" in data
    assert f"and {first} of rows 0–299" in data


def test_the_fuzzing_counts_are_the_recorded_runs():
    """docs/guarantees.md's fuzzing counts are benchmarks/results/fuzz-cpu.json's outcomes."""
    import json

    text = flat(DOCS / "guarantees.md")
    recorded = json.loads((ROOT / "benchmarks" / "results" / "fuzz-cpu.json").read_text())
    said = re.search(r"tried ([\d,]+) generated inputs on the first six surfaces: ([\d,]+) ran to a result and "
                     r"([\d,]+) were refused .+? Runs of ([\d,]+) cases on files of your own \(([\d,]+) ran, ([\d,]+) "
                     r"refused\) and of ([\d,]+) cases on the Python API, parquet files and the run options \(([\d,]+) "
                     r"ran, ([\d,]+) refused\)", text)
    assert said, "docs/guarantees.md no longer gives the fuzzing counts"
    numbers = [int(x.replace(",", "")) for x in said.groups()]
    outcomes = recorded["outcomes"]
    six = [outcomes[s] for s in ("attribute", "decompose", "eval", "score", "run config", "data file")]
    assert numbers[:3] == [sum(o["ok"] + o["error"] for o in six), sum(o["ok"] for o in six),
                           sum(o["error"] for o in six)]
    own = outcomes["own data file"]
    assert numbers[3:6] == [own["ok"] + own["error"], own["ok"], own["error"]]
    rest = recorded["api_parquet_run_options_400_each"]["outcomes"].values()
    assert numbers[6:] == [sum(o["ok"] + o["error"] for o in rest), sum(o["ok"] for o in rest),
                           sum(o["error"] for o in rest)]


def test_the_worked_example_is_what_scipy_baycomp_and_attrbench_compute():
    """docs/reading-a-leaderboard.md's worked example, recomputed from its own table: the means, the pairwise table
    (attrbench's verdicts, scipy's Wilcoxon, statsmodels' Holm), the floor verdicts, baycomp's probabilities and
    the bootstrap stability it prints."""
    import baycomp
    import numpy as np
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    from attrbench.ops.verdicts import against_floor, best_frequency, pairwise

    page = (DOCS / "reading-a-leaderboard.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| ([ABCF]) \| ((?:[\d.]+ \| ){8}[\d.]+) \|$", page, re.MULTILINE))
    assert set(table) == set("ABCF")
    rows = {k: [float(x) for x in cells.split(" | ")] for k, cells in table.items()}
    values = {k: np.array(row[:8]) for k, row in rows.items()}
    for k, row in rows.items():
        assert f"{values[k].mean():.3f}" == f"{row[8]:.3f}", k
    text = " ".join(page.split()).replace("−", "-")
    ranked = pairwise({k: list(values[k]) for k in "ABC"}, higher_is_better=True)
    p = [stats.wilcoxon(values[a] - values[b]).pvalue for a, b in (("A", "B"), ("A", "C"), ("B", "C"))]
    assert f"[{', '.join(f'{v:.4f}' for v in p)}]" in text
    assert f"[{', '.join(f'{v:.4f}' for v in multipletests(p, method='holm')[1])}]" in text
    for name, pair in ranked["pairs"].items():
        low, high = pair["ci"]
        verdict = f"{pair['better']} better" if pair["better"] else "not separated"
        p_text = f"{pair['p']:.3f}" if pair["p"] > 0.01 else f"{pair['p']:.4f}"
        row = (f"| {name} | {pair['difference']:.3f} [{low:.3f}, {high:.3f}] | {pair['wins']} / {pair['losses']} | "
               f"{pair['win_rate']:.2f} | {pair['rank_biserial']:.2f} | {p_text} | {pair['p_holm']:.3f} | {verdict} |")
        assert row in text, row
    assert ranked["tier"] == {"A": 1, "B": 1, "C": 2} and ranked["letters"] == {"A": "a", "B": "a", "C": "b"}
    floor = against_floor({k: list(values[k]) for k in "ABC"}, list(values["F"]), higher_is_better=True)
    said = re.search(r"A and B beat F on all (\d+) examples \(Wilcoxon p = ([\d.]+) each\); C beats it on (\d+) of "
                     r"\d+ \(p = ([\d.]+)\)\. Holm over the three methods gives ([\d.]+), ([\d.]+) and ([\d.]+)", text)
    assert said, "the worked example no longer gives the floor's tests"
    assert floor["A"]["wins"] == floor["B"]["wins"] == int(said[1]) and floor["C"]["wins"] == int(said[3])
    assert f"{floor['A']['p']:.4f}" == f"{floor['B']['p']:.4f}" == said[2] and f"{floor['C']['p']:.3f}" == said[4]
    assert [f"{floor[k]['p_holm']:.3f}" for k in "ABC"] == [said[5], said[6], said[7]]
    assert [floor[k]["verdict"] for k in "ABC"] == ["better", "better", "not separated"]
    said = re.search(r"gives P\(A better\) = ([\d.]+), P\(equivalent\) = ([\d.]+) and P\(B better\) = (\d\.\d+)", text)
    probs = baycomp.SignedRankTest.probs(values["A"], values["B"], rope=0.01, nsamples=5000, random_state=0)
    assert [f"{v:.3f}" for v in probs] == list(said.groups())
    stable = best_frequency({k: list(values[k]) for k in "ABC"}, higher_is_better=True)
    said = re.search(r"A has the best mean in (\d+) % of them and B in (\d+) %", text)
    assert [round(100 * stable["A"]), round(100 * stable["B"])] == [int(said[1]), int(said[2])]


def test_the_test_commands_figures_are_the_recorded_run():
    """README.md and getting-started.md give README command 2's time and counts from a new user's run, recorded in
    benchmarks/results/readme-tests-cpu.json."""
    import json

    recorded = json.loads((ROOT / "benchmarks" / "results" / "readme-tests-cpu.json").read_text())

    total, install, tests = (minutes(recorded[k]) for k in ("total_s", "install_s", "tests_s"))
    assert recorded["install_s"] + recorded["tests_s"] == recorded["total_s"]
    assert recorded["command"] == "python benchmarks/bench_readme_tests.py"  # re-measured by one command
    cpu = recorded["cpu"]  # the CPU the times are from, named as the record names it
    where = (f"On {recorded['cores']} cores of an {cpu['model_name']} VM (family {cpu['family']}, model {cpu['model']}, "
             f"torch's {cpu['torch_capability']} kernels; fresh clone, empty cache)")
    readme = flat(README)
    assert (f"{where} the command took {total}: {install} installing and {tests} testing, including the fuzzing suite, "
            f"the quickstart notebook and the Ray tests; {recorded['passed']:,} pass and {recorded['skipped']} are "
            f"skipped") in readme
    started = flat(DOCS / "getting-started.md")
    assert (f"{where} it took {total}: {install} installing and {tests} testing; {recorded['passed']:,} tests pass "
            f"and {recorded['skipped']} are skipped") in started


def test_the_metrics_pages_deeplift_residuals_are_the_published_rows():
    """docs/metrics.md's median residuals of captum's DeepLift are those of the published runs' axiom rows."""
    import numpy as np

    from attrbench import load_run

    text = flat(DOCS / "metrics.md")
    said = re.search(r"captum's DeepLift fails its identity on these models \(median relative residual ([\d.]+) on the "
                     r"([\d,]+) SST-2 sentences and ([\d.]+) on the ([\d,]+) agreement items of reports/full, ([\d.]+) "
                     r"on SmolLM2's (\d+) items of reports/default\)", text)
    assert said, "docs/metrics.md no longer gives DeepLift's residuals"

    def residuals(run: str, model: str) -> list[float]:
        return next(r["values"] for r in load_run(ROOT / "reports" / run).records
                    if (r["eval"], r["model"], r["method"], r["metric"]) == ("axioms", model, "deeplift", "residual"))

    for (run, model), (median, n) in zip((("full", "minilm-l6-sst2"), ("full", "minilm-l6-sva"),
                                          ("default", "smollm2-135m")), zip(said.groups()[::2], said.groups()[1::2])):
        values = residuals(run, model)
        assert (f"{np.median(values):.1f}", len(values)) == (median, int(n.replace(",", ""))), (run, model)


def test_the_default_runs_time_is_the_recorded_run():
    """README.md, getting-started.md and leaderboard-runs.md give README command 1's time, and how far its budget
    reached, from a new user's run recorded by benchmarks/bench_readme_run.py."""
    import json

    recorded = json.loads((ROOT / "benchmarks" / "results" / "readme-run-cpu.json").read_text())

    total, install, run = (minutes(recorded[k]) for k in ("total_s", "install_s", "run_s"))
    assert recorded["install_s"] + recorded["run_s"] == recorded["total_s"]
    assert recorded["command"].startswith("python benchmarks/bench_readme_run.py")  # re-measured by one command
    cpu = recorded["cpu"]
    progress = next(line for line in recorded["printed"] if line.startswith("progress: "))
    reached = {suite: (int(k), int(n.replace(",", ""))) for k, n, suite in
               re.findall(r"(\d+) of ([\d,]+) examples \(([^;)]+)", progress)}
    sst2, sva = reached["minilm-l6-sst2 · sst2"], reached["minilm-l6-sva · sva-linzen"]
    smollm2, shortcut = reached["smollm2-135m · sva-linzen"], reached["minilm-l6-sst2-shortcut · sst2-shortcut"]
    assert sst2[0] == sva[0]
    pages = {path.name: flat(path) for path in (README, DOCS / "getting-started.md", DOCS / "leaderboard-runs.md")}
    assert (f"On {recorded['cores']} cores of an {cpu['model_name']} VM (family {cpu['family']}, model {cpu['model']}; "
            f"fresh clone, empty cache) the whole command took {total}: {install} installing and {run} for "
            f"`attrbench run`") in pages["README.md"]
    assert (f"the budget brought SST-2 and MiniLM agreement to {sst2[0]} examples, SmolLM2 agreement to {smollm2[0]} "
            f"of {smollm2[1]} and the shortcut suite to {shortcut[0]} of {shortcut[1]}") in pages["README.md"]
    assert f"(family {cpu['family']}), the whole command took {total} ({install} installing, {run} for " \
           "`attrbench run`)" in pages["getting-started.md"]
    assert (f"family {cpu['family']} (README command 1): {install} installing and {run} for `attrbench run`, where "
            f"the budget brought SST-2 and MiniLM agreement to {sst2[0]} examples, SmolLM2 to {smollm2[0]} of "
            f"{smollm2[1]} and the shortcut suite to {'none' if shortcut[0] == 0 else shortcut[0]}") in pages[
        "leaderboard-runs.md"]


def test_the_readmes_python_block_time_is_the_recorded_run():
    """The README's time for its Python block is benchmarks/bench_readme_python.py's recorded mean."""
    import json

    recorded = json.loads((ROOT / "benchmarks" / "results" / "readme-python-cpu.json").read_text())
    seconds = round(sum(recorded["seconds"]) / len(recorded["seconds"]))
    assert recorded["cores"] == 2
    text = flat(README)
    assert f"On 2 CPU cores this block runs in {minutes(seconds)}." in text


def test_the_reports_writing_times_are_the_recorded_renderings():
    """performance.md and leaderboard-runs.md give reports/full's report times from benchmarks/bench_render.py's
    record, whose renderings each gave the published documents byte for byte."""
    import json

    recorded = json.loads((ROOT / "benchmarks" / "results" / "render-full-cpu.json").read_text())["renderings"]
    bare, kept, again = recorded["nothing kept"], recorded["published kept"], recorded["again"]
    assert bare["same_documents"] and kept["same_documents"] and again["same_documents"]
    assert kept["computed"] == again["computed"] == 0 < bare["computed"]
    performance, runs = flat(DOCS / "performance.md"), flat(DOCS / "leaderboard-runs.md")
    assert (f"{bare['seconds']} s with nothing kept, {kept['seconds']} s from the published folder's results and "
            f"figures (what `--extend` starts from), {again['seconds']} s written again") in performance
    assert f"{again['reading_rows_seconds']} s of the last is reading the stored rows" in performance
    assert f"written again in {again['seconds']} s, against {bare['seconds']} s computing everything" in runs
    placed, placed_bare = recorded["placement, published kept"], recorded["placement, nothing kept"]
    assert placed["computed"] < placed_bare["computed"]
    assert (f"report in {placed['seconds']} s, against {placed_bare['seconds']} s with nothing kept" in runs
            and f"{placed['seconds']} s from the published folder's results and figures, {placed_bare['seconds']} s "
                "with nothing kept" in performance)
