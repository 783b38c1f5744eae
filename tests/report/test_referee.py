"""A referee who recomputes a leaderboard from its rows agrees with every verdict it prints: the headline's top
group, what the top method beats, each method against the random floor, every pair in statistics.json, and
the aliases; on a fresh run and on the published reports."""
import json
import re
import sqlite3
from pathlib import Path

import pytest

from attrbench.report import write_report
from attrbench.report.documents import _metric_label
from attrbench.runtime.config import read_config
from attrbench.runtime.pipeline import run_leaderboard
from tests.report import sentences
from tests.report.test_documents import REPORT_CONFIG

ROOT = Path(__file__).resolve().parents[2]


def findings_of(leaderboard: str) -> list[str]:
    section = leaderboard.split("## Findings", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def check(run_dir: Path, headline_eval: str = "naopc", metric: str = "naopc_comprehensiveness") -> int:
    """Recompute every suite's headline verdicts from the rows and compare them with statistics.json (every pair,
    each robustness metric's methods not better than and worse than the random floor), and every sentence of the
    findings (:mod:`tests.report.sentences`); returns how many suites' headlines were checked."""
    report = sentences.Report(run_dir)
    checked = 0
    for title, table in report.statistics.items():
        if not title.endswith(f" · {headline_eval}") or table.get("metric") != metric:
            continue
        suite = title.removesuffix(f" · {headline_eval}")
        assert set(report.aliases(suite)) == {m for names in table.get("aliases", {}).values() for m in names}
        ruling = report.ruling(suite, report.name_of(metric))
        assert (ruling["floor_values"] is not None) == ("floor" in table), \
            f"{title}: the referee and the report judge different floors"
        for pair in table.get("pairs", {}).values():  # every pair of the table, not only the ones a sentence names
            assert pair["better"] == ruling["separated"][frozenset(pair["pair"])], pair["pair"]
        for entry in report.statistics.get(f"{suite} · robustness", []):  # each metric's floor lists
            ruled = report.ruling(suite, report.name_of(entry["metric"])).get("floor", {})
            assert set(entry["not_better_than_floor"]) == {m for m, v in ruled.items() if v != "better"}, \
                entry["metric"]
            assert set(entry["worse_than_floor"]) == {m for m, v in ruled.items() if v == "worse"}, entry["metric"]
        checked += 1
    report.read()
    return checked


def test_a_referee_agrees_with_a_fresh_runs_findings(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(REPORT_CONFIG)
    run_leaderboard(read_config(path), tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    assert check(tmp_path / "run") >= 1
    # a growing folder: a method and the random floor with rows on 4 of the 10 examples (e.g. added to the config
    # later) are not judged until complete; the report says how far they are, and the referee still agrees
    store = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    examples = sorted({e for (e,) in store.execute("SELECT example FROM results WHERE method LIKE 'grad_l2%'")})
    assert len(examples) == 10
    for method in ("grad_l2%", "floor(%"):
        store.execute(f"DELETE FROM results WHERE method LIKE ? AND example IN ({','.join('?' * 6)})",
                      (method, *examples[4:]))
    store.commit()
    store.close()
    write_report(tmp_path / "run")
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    naopc = statistics["tiny-gpt2 · sva-generated · naopc"]
    assert "grad_l2" not in naopc["order"] and "floor" not in naopc and naopc["k"] == 2
    assert statistics["still computing"]["tiny-gpt2 · sva-generated · naopc"] == {
        "grad_l2": {"examples": 4, "of": 10}, "random_floor": {"examples": 4, "of": 10}}
    leaderboard = (tmp_path / "run" / "leaderboard.md").read_text()
    assert ("- still computing: tiny-gpt2 · sva-generated (faithfulness_corr, erasure_aopc, naopc), 10 examples: "
            "grad_l2 on 4, the random floor on 4; tiny-gpt2 · sva-generated (timing), 10 examples: grad_l2 on 4 (left "
            "out of the verdicts until complete)") in leaderboard
    assert "left out of this table's statistics until complete: grad_l2 (4 of 10 examples), the random floor (4 of " \
           "10 examples)" in leaderboard
    assert "against the random floor" not in "\n".join(findings_of(leaderboard))
    # grad_l2 is placed provisionally: a finding that says so, a row of its own in each ranked table, in no group
    placed = [line for line in findings_of(leaderboard) if "grad_l2" in line]
    assert placed and all(": provisional, by " in line and line.endswith("it may change as n grows.") for line in placed)
    assert set(naopc["provisional"]) == {"grad_l2"} and naopc["provisional"]["grad_l2"]["n"] == 4
    assert naopc["provisional"]["grad_l2"]["floor"] is None  # the floor is short too: nothing to place it against
    assert naopc["provisional"]["grad_l2"]["comparisons"] == 2 and "grad_l2" not in naopc["tier"]
    assert re.search(r"\| provisional \| +\| grad_l2 \| gradient \| .+? \| 4 of 10 \| beats \d, beaten by \d, not "
                     r"separated from \d \|", leaderboard)
    assert check(tmp_path / "run") >= 1


def test_a_method_short_of_a_tables_examples_is_placed_provisionally_and_refereed(tmp_path):
    """A method on 6 of 10 examples beside a complete floor (a method added to a grown folder): in no group, placed
    against each published method and the floor on their common examples, Holm over its own comparisons; the
    published statistics are those without it, and the referee recomputes the placement and fails a wrong one."""
    from tests.report.test_scorecard import referee as scorecard_referee

    path = tmp_path / "tiny.toml"
    path.write_text(REPORT_CONFIG)
    run_leaderboard(read_config(path), tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    before = json.loads((tmp_path / "run" / "statistics.json").read_text())["tiny-gpt2 · sva-generated · naopc"]
    store = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    examples = sorted({e for (e,) in store.execute("SELECT example FROM results WHERE method LIKE 'grad_l2%'")})
    store.execute(f"DELETE FROM results WHERE method LIKE 'grad_l2%' AND example IN ({','.join('?' * 4)})",
                  examples[6:])
    store.commit()
    store.close()
    write_report(tmp_path / "run")
    statistics = json.loads((tmp_path / "run" / "statistics.json").read_text())
    naopc = statistics["tiny-gpt2 · sva-generated · naopc"]
    placed = naopc["provisional"]["grad_l2"]
    assert placed["n"] == 6 and placed["of"] == 10 and placed["comparisons"] == 3 and placed["floor"]["n"] == 6
    assert set(placed["vs"]) == set(naopc["order"]) == set(before["order"]) - {"grad_l2"}
    assert "grad_l2" not in naopc["tier"] and "grad_l2" not in naopc["floor"]
    others = [m for m in before["order"] if m != "grad_l2"]  # the published pair, without the short method
    assert naopc["pairs"][f"{naopc['order'][0]} vs {naopc['order'][1]}"]["n"] == 10 and len(others) == 2
    card = statistics["scorecard"]["cells"]["tiny-gpt2 · sva-generated"]["grad_l2"]
    assert card["provisional"] and card["group"] is None and card["floor"] == placed["floor"]["verdict"]
    assert check(tmp_path / "run") >= 1
    scorecard_referee(tmp_path / "run")
    leaderboard = tmp_path / "run" / "leaderboard.md"
    said = next(line for line in findings_of(leaderboard.read_text()) if ": provisional, by " in line)
    wrong = re.sub(r"beats (\d+)", lambda m: f"beats {int(m[1]) + 1}", said)
    leaderboard.write_text(leaderboard.read_text().replace(said, wrong))
    with pytest.raises(AssertionError):
        check(tmp_path / "run")


def test_a_referee_judges_a_floor_planned_on_the_first_examples_only(tmp_path):
    """``floor_n``: the floor on 6 of a table's 10 examples is complete on its 6, and its verdicts (each method
    against it on their 6 common examples) are the referee's."""
    path = tmp_path / "tiny.toml"
    path.write_text(REPORT_CONFIG.replace("n = 10\n", "n = 10\nfloor_n = 6\n"))
    run_leaderboard(read_config(path), tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    naopc = json.loads((tmp_path / "run" / "statistics.json").read_text())["tiny-gpt2 · sva-generated · naopc"]
    assert naopc["pair_n"] == [10, 10] and {row["n"] for row in naopc["floor"].values()} == {6}
    assert check(tmp_path / "run") >= 1


@pytest.mark.parametrize("name,suites", [("default", 4), ("full", 5)])
def test_a_referee_agrees_with_the_published_reports(name, suites):
    """The committed statistics and sentences equal what the committed rows give (no model is loaded)."""
    assert check(ROOT / "reports" / name) == suites


def test_the_readmes_held_out_split_and_default_run_findings_are_the_published_statistics():
    """reports/README.md's sentences beside its tables, read back against reports/full's and reports/default's
    statistics.json: the held-out agreement split's top group by the known answer, its floor verdicts and its
    comparison with the test items; the methods of reports/default not better than the random floor on the MiniLM
    suites and the method that meets its own axiom on none of its examples."""
    text = (ROOT / "reports" / "README.md").read_text()
    found = re.sub(r"\s+", " ", text[text.index("<!-- findings -->"):text.index("<!-- /findings -->")])
    full = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())
    default = json.loads((ROOT / "reports" / "default" / "statistics.json").read_text())
    known = re.search(r"On (\d+) agreement items held out from every other table \(the probe's validation split\) the "
                      r"top group by the known answer is (.+?), and all (\d+) methods are better than the floor: no "
                      r"pair of methods is separated one way on one split and the other way on the other, and the "
                      r"(\d+) methods' means agree between the splits as closely as between random halves of the "
                      r"pooled items \(Kendall tau ([\d.]+) \[([\d.]+), ([\d.]+)\]; random halves ([\d.]+), "
                      r"permutation p = ([\d.]+)\)\.", found)
    assert known, "reports/README.md no longer says what the known answers found on the held-out agreement items"
    test, held = (full[f"minilm-l6-sva · {name} · ground_truth"] for name in ("sva-linzen", "sva-linzen:val"))
    assert held["metric"] == "mrr" and held["pair_n"] == [int(known[1])] * 2
    assert re.findall(r"`(\w+)`", known[2]) == held["top"]
    assert [row["verdict"] for row in held["floor"].values()] == ["better"] * held["k"] == ["better"] * int(known[3])
    split = full["minilm-l6-sva · sva-linzen:val against sva-linzen · ground_truth"]
    assert split["reversed"] == [] and split["methods"] == test["k"] == held["k"] == int(known[4])
    assert [f"{x:.2f}" for x in (split["tau"], *split["ci"])] == list(known.groups()[4:7])
    assert f"{split['exchangeable']['range'][1]:.2f}" == known[8] and f"{split['exchangeable']['p']:.2f}" == known[9]
    named = re.search(r"\(n = (\d+) on the MiniLM suites\) (.+?) are not better than a random attribution", found)
    for suite in ("minilm-l6-sst2 · sst2", "minilm-l6-sva · sva-linzen"):
        table = default[f"{suite} · naopc"]
        assert table["pair_n"][1] == int(named[1])
        for method in re.findall(r"`(\w+)`", named[2]):
            assert table["floor"][method]["verdict"] != "better", (suite, method)
    # the axiom sentence, from the rows: the method meets its claim on no example of any suite it was checked on
    from attrbench import load_run

    axiom = re.search(r"`(\w+)` meets its own (\w+) axiom on none of the examples of its (\d+) suites", found)
    rows = [r for r in load_run(ROOT / "reports" / "default").records
            if r["eval"] == "axioms" and r["method"] == axiom[1] and r["metric"] == "passes"]
    assert len(rows) == int(axiom[3]) and {r["axiom"] for r in rows} == {axiom[2]}
    assert all(v == 0.0 for r in rows for v in r["values"]) and all(r["values"] for r in rows)


# reports/README.md's two tables of findings, as reports/full's statistics.json gives them: a cell the statistics do
# not give fails the test that compares them.
SUITE_NAMES = {"minilm-l6-sst2 · sst2": "MiniLM · SST-2", "minilm-l6-sva · sva-linzen": "MiniLM · agreement",
               "minilm-l6-sst2-shortcut · sst2-shortcut": "MiniLM · planted shortcuts",
               "smollm2-135m · sva-linzen": "SmolLM2 · agreement",
               "gemma3-270m · sva-linzen": "Gemma 3 · agreement"}
VERDICTS_HEADER = ("| suite | n | top group by NAOPC comprehensiveness | metrics whose top group holds it | "
                   "against the random floor, by NAOPC comprehensiveness, and where the other metrics differ |")
KNOWN_HEADER = ("| suite | n | top group by the known answer | the NAOPC top's group | better than the floor | "
                "faithfulness metric most like the known answer (Kendall tau) | NAOPC comprehensiveness's tau |")


def _code(methods) -> str:
    return ", ".join(f"`{m}`" for m in methods)


def _tau(row: dict) -> str:
    return f"{row['tau']:.2f} [{row['ci'][0]:.2f}, {row['ci'][1]:.2f}]"


def _n(table: dict) -> str:
    low, high = table["pair_n"]
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _label(metric: str) -> str:
    """A metric as the report names it, from "evaluation.metric" or a voting metric's bare key."""
    from attrbench.registry import EVALS
    from attrbench.report.tables import robustness_metrics

    if "." not in metric:
        metric = next(f"{name}.{metric}" for name in EVALS.names()
                      if metric in (robustness_metrics(EVALS.get(name)) or ()))
    return _metric_label(metric)


def readme_tables(full: dict) -> tuple[list[str], list[str]]:
    """The rows of reports/README.md's verdicts table (per suite: the headline's top group and what it beats, how many
    voting metrics put it in their top group and what the others put there, each method's verdict against the
    random floor where the floor is complete, with the number of metrics under which a method is not better and
    worse, and the methods better by the headline but worse than the floor under another metric) and of its
    known-answer table (top group, the headline top's group, methods better than the floor, the metric whose method
    order is most like the known answer with the metrics not separated from it, † where that verdict is within the
    bootstrap's Monte-Carlo error, and the headline metric's tau)."""
    computing = full.get("still computing", {})
    verdicts, known = [VERDICTS_HEADER, "|---|---|---|---|---|"], [KNOWN_HEADER, "|---|---|---|---|---|---|---|"]
    for suite, name in SUITE_NAMES.items():
        table = full[f"{suite} · naopc"]
        votes = [e for e in full[f"{suite} · robustness"] if e["vote"]]
        top = table["top"]
        beaten = [p for p in table["pairs"].values() if p["better"] in top]
        lead = _code(top) + (f" alone, better than each of the other {table['k'] - 1}"
                             if len(top) == 1 and len(beaten) == table["k"] - 1 else "")
        holds = f"{sum(bool(set(top) & set(e['top'])) for e in votes)} of {len(votes)}" + "".join(
            f"; {_label(e['metric'])}: {_code(e['top'])}" for e in votes if not set(top) & set(e["top"]))
        if "random_floor" in computing.get(f"{suite} · naopc", {}):
            floor = "still computing"
        else:
            said = {m: row["verdict"] for m, row in table["floor"].items()}
            parts = [f"{sum(v == 'better' for v in said.values())} of {table['k']} better "
                     f"(n = {table['floor_summary']['n']})"]
            alike: dict[str, list[str]] = {}  # methods with the same verdict and counts share one entry
            for method, verdict in said.items():
                if verdict != "better":
                    worse = sum(method in e["worse_than_floor"] for e in votes)
                    alike.setdefault(f"{verdict}: not better under "
                                     f"{sum(method in e['not_better_than_floor'] for e in votes)} of {len(votes)}, "
                                     f"worse under {worse or 'none'}", []).append(method)
            parts += [f"{_code(methods)} {counts}" for counts, methods in alike.items()]
            contradicted: dict[str, list[str]] = {}
            for method, verdict in said.items():
                worse = ", ".join(_label(e["metric"]) for e in votes if method in e["worse_than_floor"])
                if verdict == "better" and worse:
                    contradicted.setdefault(worse, []).append(method)
            parts += [f"{_code(methods)} worse under {worse}" for worse, methods in contradicted.items()]
            floor = "; ".join(parts)
        verdicts.append(f"| {name} | {_n(table)} | {lead} | {holds} | {floor} |")
        title = f"{suite} · ground_truth"
        if title in computing:
            known.append(f"| {name} | still computing | | | | | |")
            continue
        if title not in full:  # no known answer
            continue
        truth, validity = full[title], full[f"{suite} · metric validity"]
        group = _code(truth["top"]) if len(truth["top"]) <= 4 else f"{len(truth['top'])} methods"
        where = "; ".join(f"`{m}`: {truth['tier'][m]}" for m in top)
        better = (f"{sum(r['verdict'] == 'better' for r in truth['floor'].values())} of {truth['k']} "
                  f"(n = {truth['floor_summary']['n']})")
        close = [_label(r["metric"]) + ("†" if r["behind_best"]["at_the_edge"] else "")
                 for r in validity[1:] if not r["behind_best"]["separated"]]
        others = len(validity) - 1
        behind = f"not separated from {', '.join(close)}" if close else f"ahead of each of the other {others}"
        best = f"{_label(validity[0]['metric'])}: {_tau(validity[0])}; {behind}"
        headline = next(r for r in validity if r["metric"] == "naopc.naopc_comprehensiveness")
        known.append(f"| {name} | {_n(truth)} | {group} | {where} | {better} | {best} | {_tau(headline)} |")
    return verdicts, known


def test_the_readmes_tables_of_findings_are_the_published_statistics():
    """reports/README.md's two tables of findings are reports/full's statistics.json, cell by cell
    (`readme_tables`), and its text around them names the 5 voting metrics and the tests the cells come from."""
    text = (ROOT / "reports" / "README.md").read_text()
    found = text[text.index("<!-- findings -->"):text.index("<!-- /findings -->")]
    tables, block = [], []
    for line in found.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            tables.append(block)
            block = []
    full = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())
    assert tables == list(readme_tables(full))
    votes = [e["metric"] for e in full["minilm-l6-sst2 · sst2 · robustness"] if e["vote"]]
    flat = re.sub(r"\s+", " ", found)
    named = re.search(r"the (\d+) faithfulness metrics that vote \((.+?);", flat)
    assert named, "reports/README.md no longer names the metrics its tables count"
    assert int(named[1]) == len(votes)
    assert named[2].split(", ") == [_label(m) for m in votes]
    # "by Wilcoxon signed-rank (the sign test where ties are more than half the examples)": every pair and floor
    # verdict of the tables' statistics, read off its wins, ties and losses
    from attrbench.ops.verdicts import TIES_DOMINATE

    assert "by Wilcoxon signed-rank (the sign test where ties are more than half the examples) with Holm's" in flat
    assert TIES_DOMINATE == 0.5
    for suite in SUITE_NAMES:
        for evaluation_name in ("naopc", "ground_truth"):
            table = full.get(f"{suite} · {evaluation_name}", {})
            for row in [*table.get("pairs", {}).values(), *table.get("floor", {}).values()]:
                assert row["test"] == ("sign" if row["ties"] > row["n"] / 2 else "wilcoxon"), (suite, row)


def test_the_readmes_sanity_finding_is_the_published_rows():
    """reports/README.md's sentences on the model-randomisation check, recomputed with numpy from reports/full's
    rows: the methods flagged per MiniLM suite (median |rho| at the full cascade at or above the threshold) with the flagged
    one's median, and the examples where lime has no value; on SmolLM2 the items, those with a value and the
    flagged methods with the range of their medians; the report's own findings say the same."""
    import numpy as np

    from attrbench import load_run
    from attrbench.registry import EVALS

    text = re.sub(r"\s+", " ", (ROOT / "reports" / "README.md").read_text())
    said = re.search(r"The model-randomisation sanity check \(Adebayo et al\. 2018: each method's attributions on "
                     r"(\d+) examples per MiniLM suite against those of the model with its head and every block "
                     r"re-initialised; flagged where the median \|Spearman\| is at least ([\d.]+)\) flags `(\w+)` on "
                     r"SST-2 \(([\d.]+)\) as insensitive to the model, and no method on agreement or on the planted "
                     r"shortcuts\. `lime`'s scores on the re-initialised model are constant on all (\d+) SST-2 "
                     r"sentences, all (\d+) shortcut examples and (\d+) of the (\d+) agreement items, so there is no "
                     r"rank correlation to compute: it goes unchecked on SST-2 and the shortcuts and is checked on one "
                     r"agreement item\.", text)
    assert said, "reports/README.md no longer says what the sanity check found"
    evaluation = EVALS.get("randomisation")
    assert float(said[2]) == evaluation.threshold
    run = load_run(ROOT / "reports" / "full")
    models = ("minilm-l6-sst2", "minilm-l6-sva", "minilm-l6-sst2-shortcut")  # the MiniLM suites the sentence is about
    rows = {(r["model"], r["method"]): r["values"] for r in run.records
            if r["eval"] == "randomisation" and r["metric"] == evaluation.primary_metric and r["model"] in models}
    assert {len(vs) for vs in rows.values()} == {int(said[1])}
    flagged, lime_missing = {}, {}
    for model in models:
        values = {m: [abs(v) for v in vs if v is not None] for (mo, m), vs in rows.items() if mo == model}
        flagged[model] = {m: np.median(v) for m, v in values.items() if v and np.median(v) >= evaluation.threshold}
        lime_missing[model] = sum(v is None for v in rows[(model, "lime")])
    assert list(flagged["minilm-l6-sst2"]) == [said[3]] and f"{flagged['minilm-l6-sst2'][said[3]]:.2f}" == said[4]
    assert flagged["minilm-l6-sva"] == {} and flagged["minilm-l6-sst2-shortcut"] == {}
    n = int(said[1])
    assert lime_missing["minilm-l6-sst2"] == int(said[5]) == n
    assert lime_missing["minilm-l6-sst2-shortcut"] == int(said[6]) == n
    assert (lime_missing["minilm-l6-sva"], n) == (int(said[7]), int(said[8])) == (n - 1, n)
    findings = (ROOT / "reports" / "full" / "leaderboard.md").read_text()
    assert re.search(rf"minilm-l6-sst2 · sst2: the sanity check .+? flags {said[3]} as insensitive", findings)
    assert re.search(r"minilm-l6-sva · sva-linzen: the sanity check .+? flags none of the", findings)
    assert re.search(r"minilm-l6-sst2-shortcut · sst2-shortcut: the sanity check .+? flags none of the", findings)
    # the decoders: every method on the same items, the flagged ones (an alias named beside the row it is folded into)
    for name, model in (("SmolLM2", "smollm2-135m"), ("Gemma 3", "gemma3-270m")):
        said = re.search(rf"On {name}'s (\d+) agreement items \((\d+) of them with a value\) it flags (.+?) as "
                         r"insensitive to the model \(median \|Spearman\| ([\d.]+) to ([\d.]+)\)\.", text)
        assert said, f"reports/README.md no longer says what the sanity check found on {name}"
        values = {r["method"]: r["values"] for r in run.records if (r["eval"], r["metric"], r["model"]) ==
                  ("randomisation", evaluation.primary_metric, model)}
        assert {len(v) for v in values.values()} == {int(said[1])}, name
        assert {sum(x is not None for x in v) for v in values.values()} == {int(said[2])}, name
        medians = {m: np.median([abs(x) for x in v if x is not None]) for m, v in values.items()}
        named = {m: med for m, med in medians.items() if med >= evaluation.threshold}
        assert set(re.findall(r"`(\w+)`", said[3])) == set(named), name
        assert (f"{min(named.values()):.2f}", f"{max(named.values()):.2f}") == (said[4], said[5]), name
        reported = re.search(rf"{model} · sva-linzen: the sanity check .+?; n = (\d+)\) flags (.+?) as insensitive",
                             findings)
        assert reported and int(reported[1]) == int(said[2]), name
        flagged_there = reported[2].split(", ")
        assert set(flagged_there) <= set(named) and len(flagged_there) == len(named) - 1, name  # one alias


def test_the_readmes_axiom_finding_is_the_published_rows():
    """reports/README.md's sentences on reports/full's axiom checks on its ranked suites, recomputed with numpy
    from the rows: every method that claims an axiom checked on every example of each, the one below the 95 % bar with its
    counts and median residuals, the others at or above it on each; the report's own findings name the same cells;
    integrated gradients' count on SmolLM2, its tolerance, cap and baseline are those of its published rows and of
    the method's defaults."""
    import numpy as np

    from attrbench import load_run
    from attrbench.evals.axioms import Axioms
    from attrbench.plugin import METHODS

    text = re.sub(r"\s+", " ", (ROOT / "reports" / "README.md").read_text())
    said = re.search(r"Every method that claims an axiom was checked on all ([\d,]+) SST-2 sentences, all ([\d,]+) "
                     r"agreement items and all ([\d,]+) shortcut examples, and on SmolLM2's ([\d,]+) agreement items: "
                     r"`(\w+)` meets its (\w+) on (\d+), (\d+), (\d+) and (\d+) of them \(median relative residual "
                     r"([\d.]+), ([\d.]+), ([\d.]+) and ([\d.]+);.+?; (.+?) meet theirs on at least (\d+) % of each\. "
                     r"Integrated gradients meets its completeness \(a gap of at most ([\d.]+)\) on (\d+) of "
                     r"SmolLM2's (\d+) items by adaptive steps from the (\w+) baseline \(up to ([\d,]+) gradient "
                     r"evaluations per item\)", text)
    assert said, "reports/README.md no longer says what reports/full's axiom checks found"
    assert float(said[16]) / 100 == Axioms.check_share
    method, axiom, others = said[5], said[6], set(re.findall(r"`(\w+)`", said[15]))
    findings = (ROOT / "reports" / "full" / "leaderboard.md").read_text()
    records = load_run(ROOT / "reports" / "full").records
    # Gemma 3's sentence: the same method below the bar, the same others at or above it
    gemma = re.search(r"On Gemma 3's ([\d,]+) agreement items `(\w+)` meets its (\w+) on (\d+) of them \(median "
                      r"relative residual ([\d.]+)\) and (.+?) meet theirs on at least (\d+) % of them", text)
    assert gemma, "reports/README.md no longer says what reports/full's axiom checks found on Gemma 3"
    assert (gemma[2], gemma[3]) == (method, axiom) and set(re.findall(r"`(\w+)`", gemma[6])) == others
    assert float(gemma[7]) / 100 == Axioms.check_share
    suites = (("minilm-l6-sst2", "sst2"), ("minilm-l6-sva", "sva-linzen"), ("minilm-l6-sst2-shortcut", "sst2-shortcut"),
              ("smollm2-135m", "sva-linzen"), ("gemma3-270m", "sva-linzen"))
    figures = [(said[1 + i], said[7 + i], said[11 + i]) for i in range(4)] + [(gemma[1], gemma[4], gemma[5])]
    for (model, suite), (n, met, residual) in zip(suites, figures, strict=True):
        rows = {(r["method"], r["metric"]): r for r in records
                if r["eval"] == "axioms" and r["model"] == model and r["dataset"] == suite}
        passes = {m: [v for v in r["values"] if v is not None] for (m, metric), r in rows.items() if metric == "passes"}
        assert {len(v) for v in passes.values()} == {int(n.replace(",", ""))}, model
        failing = {m for m, v in passes.items() if np.mean(v) < Axioms.check_share}
        assert failing == {method} and rows[(method, "passes")]["axiom"] == axiom, model
        assert int(sum(passes[method])) == int(met), model
        assert f"{np.median(rows[(method, 'residual')]['values']):.2g}" == residual, model
        assert others == set(passes) - failing, model
        assert f"{model} · {suite}: {method} meets its {axiom} axiom" in findings
    ig = next(r for r in records if (r["eval"], r["model"], r["method"], r["metric"]) ==
              ("axioms", "smollm2-135m", "integrated_gradients", "passes"))
    assert (int(sum(ig["values"])), len(ig["values"])) == (int(said[18]), int(said[19]))
    assert ig["axiom"] == "completeness" and ig["tolerance"] == float(said[17])
    defaults = METHODS.get("integrated_gradients").get_params()
    assert (defaults["tolerance"], defaults["baseline"], defaults["max_steps"]) == (
        float(said[17]), said[20], int(said[21].replace(",", "")))


@pytest.mark.parametrize("page", ["reports/README.md"])
def test_the_still_computing_list_is_what_reports_full_lacks(page):
    """reports/README.md's list of what reports/full still computes names each incomplete part of
    its statistics.json ("still computing") or of its rows (a table whose methods are all short of the suite's
    examples) and nothing else: a part that completes fails this test until the list drops it."""
    text = re.sub(r"\s+", " ", (ROOT / page).read_text())
    said = re.search(r"Still computing in reports/full, left out here until complete \(its report shows the n "
                     r"reached\): (.+?)[.(]", text)
    computing = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text()).get("still computing", {})
    assert said or not computing, f"{page} no longer says what reports/full still computes"
    listed_text = said[1] if said else ""  # a page with no list says nothing is computing
    smollm2, shortcut = "smollm2-135m · sva-linzen", "minilm-l6-sst2-shortcut · sst2-shortcut"
    assert {title.rsplit(" · ", 1)[0] for title in computing} <= {smollm2, shortcut}, "another suite is incomplete"

    def lacking(suite: str, evaluation: str = "", methods=None, besides: str = "") -> bool:
        """Whether some table of ``suite`` (or its ``evaluation``; not its ``besides``) lacks rows of ``methods``
        (None: any method but the floor and integrated gradients, which the list names apart)."""
        return any(title.startswith(suite) and title.endswith(evaluation) and
                   not (besides and title.endswith(besides)) and
                   any(m in methods if methods else m not in ("random_floor", "integrated_gradients") for m in parts)
                   for title, parts in computing.items())

    # a table whose methods all reached fewer examples than the suite's headline is reported at that n, not held
    # back, yet it is not complete: its rows are short of the headline's
    from attrbench import load_run

    rows = [r for r in load_run(ROOT / "reports" / "full").records if r["model"] == "smollm2-135m"
            and r["method"] not in ("random", "random_floor", "integrated_gradients")]
    planned = max(len(r["values"]) for r in rows if r["eval"] == "naopc")

    def short(evaluation: str) -> bool:
        return any(len(r["values"]) < planned for r in rows if r["eval"] == evaluation)

    listed = {"the random floor of the shortcut suite": lacking(shortcut, methods={"random_floor"}),
              "of SmolLM2's agreement items": lacking(smollm2, methods={"random_floor"}),
              "SmolLM2's known answers": lacking(smollm2, "ground_truth") or short("ground_truth"),
              "axiom": lacking(smollm2, "axioms"), "sanity checks": lacking(smollm2, "randomisation"),
              "converged integrated gradients": lacking(smollm2, methods={"integrated_gradients"},
                                                         besides="randomisation"),  # the sanity check's
              "signed leave-one-out reference": lacking(smollm2, "faithfulness_corr") or short("faithfulness_corr")}
    for phrase, incomplete in listed.items():
        assert (phrase in listed_text) == incomplete, phrase
    for title, parts in computing.items():  # nothing incomplete that the list has no words for
        evaluation = title.rsplit(" · ", 1)[1]
        assert all(m in ("random_floor", "integrated_gradients") for m in parts) or evaluation in (
            "ground_truth", "axioms", "randomisation", "faithfulness_corr"), title


def test_the_readmes_account_of_the_default_run_is_its_statistics():
    """reports/README.md's sentence on what the published default run (README command 1) reached: methods better
    than the floor."""
    root = Path(__file__).parent.parent.parent
    text = re.sub(r"\s+", " ", (root / "reports" / "README.md").read_text())
    claim = re.search(r"the SST-2 and agreement suites reached (\d+) examples, where (\d+) of (\d+) methods on SST-2, "
                      r"(\d+) of (\d+) on MiniLM agreement and (\d+) of (\d+) on SmolLM2 \(`(\w+)`\) were better "
                      r"than the random floor", text)
    assert claim, "reports/README.md no longer says what the default run reached"
    default = json.loads((root / "reports" / "default" / "statistics.json").read_text())
    suites = ["minilm-l6-sst2 · sst2", "minilm-l6-sva · sva-linzen", "smollm2-135m · sva-linzen"]
    numbers = [int(x) for x in claim.groups()[1:7]]
    for suite, better, k in zip(suites, numbers[0::2], numbers[1::2]):
        table = default[f"{suite} · naopc"]
        verdicts = {m: row["verdict"] for m, row in table["floor"].items()}
        assert (sum(v == "better" for v in verdicts.values()), table["k"]) == (better, k), suite
        assert max(table["n_by_method"].values()) <= int(claim[1])
    floor = default[f"{suites[2]} · naopc"]["floor"]
    assert [m for m, row in floor.items() if row["verdict"] == "better"] == [claim[8]]
    known = re.search(r"the shortcut suite its (\d+), where (\d+) of (\d+) methods found the planted words better "
                      r"than a random attribution does \(ground-truth MRR, the same pairwise test\) and (.+?)'s method "
                      r"order had the highest Kendall tau with that known answer \(([\d.]+) ", text)
    assert known, "reports/README.md no longer says what the default run found against the known answer"
    truth = default["minilm-l6-sst2-shortcut · sst2-shortcut · ground_truth"]
    assert truth["metric"] == "mrr" and max(truth["n_by_method"].values()) == int(known[1])
    better = sum(row["verdict"] == "better" for row in truth["floor"].values())
    assert (better, truth["k"]) == (int(known[2]), int(known[3]))
    best = default["minilm-l6-sst2-shortcut · sst2-shortcut · metric validity"][0]
    assert best["metric"] == "naopc.naopc_sufficiency" and known[4] == "NAOPC sufficiency"
    assert f"{best['tau']:.2f}" == known[5]
    validity = {r["metric"]: r for r in default["minilm-l6-sst2-shortcut · sst2-shortcut · metric validity"]}
    said = re.search(r"\(([\d.]+) \[([\d.]+), ([\d.]+)\] over the (\d+) examples; NAOPC comprehensiveness ([\d.]+) "
                     r"\[([\d.]+), ([\d.]+)\], the other metrics on (\d+)\)", text)
    for name, (tau, low, high) in (("naopc.naopc_sufficiency", said.groups()[:3]),
                                   ("naopc.naopc_comprehensiveness", said.groups()[4:7])):
        row = validity[name]
        assert [f"{x:.2f}" for x in (row["tau"], *row["ci"])] == [tau, low, high] and row["n"] == int(said[4])
    assert {r["n"] for m, r in validity.items() if not m.startswith("naopc.")} == {int(said[8])}
    close = re.search(r"though at that n not separated from (.+?) \(a paired bootstrap of the difference in tau, "
                      r"Bonferroni over the (\d+) other metrics\)", text)
    assert close, "reports/README.md no longer says which metrics the best one is not separated from"
    behind = [r for r in default["minilm-l6-sst2-shortcut · sst2-shortcut · metric validity"][1:]]
    assert int(close[2]) == len(behind)
    names = {"erasure_aopc.comprehensiveness_aopc": "erasure AOPC comprehensiveness",
             "naopc.naopc_comprehensiveness": "NAOPC comprehensiveness"}
    assert set(close[1].split(" or ")) == {names.get(r["metric"], r["metric"]) for r in behind
                                           if not r["behind_best"]["separated"]}


def test_the_referee_rejects_a_finding_the_rows_do_not_give_and_one_it_cannot_read():
    """Each kind of sentence, altered by one claim (a count, a tau, a member of a group, a cost, a method), fails the
    referee; so does a sentence of a kind no rule reads."""
    report = sentences.Report(ROOT / "reports" / "default")
    original = list(report.lines)

    def bump(pattern: str, line: str, step: float) -> str:  # the first number the pattern captures, moved by step
        found = re.search(pattern, line)
        value = float(found[1]) + step
        text = f"{value:.{len(found[1].split('.')[1])}f}" if "." in found[1] else str(int(value))
        return line[:found.start(1)] + text + line[found.end(1):]

    def first(marker: str) -> str:
        return next(line for line in original if marker in line)

    group = first("the top group, which no method beats pair by pair, is")
    altered = [
        bump(r"(\d+) of \d+ methods are better", first(": against the random floor ("), 1),
        bump(r"Kendall tau (-?[\d.]+)", first("agrees best with"), 0.01),
        bump(r"; lead over .+? (-?[\d.]+) \[", first("agrees best with"), 0.01),
        first("agrees best with").replace("it is not separated from any of the", "it leads each of the", 1),
        re.sub(r", (\w+) \(Wilcoxon signed-rank on each", r" (Wilcoxon signed-rank on each", group, count=1),
        bump(r"takes ([\d.]+) s per example", first("the cheapest method"), 0.001),
        bump(r"mean difference (-?[\d.]+)", first("(first and second by mean)"), 0.0001),
        bump(r"P\(equivalent\) = ([\d.]+)", first("(first and second by mean)"), 0.001),
        bump(r"Kendall tau of the method orders (-?[\d.]+)", first("the metrics disagree most"), -0.01),
        first("give the same scores (to").replace("feature_ablation", "saliency", 1),
        bump(r"axiom \(tolerance [\d.e-]+\) on (\d+) of", first("axiom (tolerance"), 1),
        re.sub(r"^([^:]+: )\w+ meets its", r"\1saliency meets its", first("axiom (tolerance")),
    ]
    for line in altered:
        assert line not in original
        report.lines = [line]
        with pytest.raises(AssertionError):
            report.read()
    report.lines = [original[0].split(":", 1)[0] + ": every method is faithful."]
    with pytest.raises(AssertionError, match="no referee reads this finding"):
        report.read()
    report.lines = original[:1]
    assert sum(report.read().values()) == 1
