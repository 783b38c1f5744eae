"""Leaderboard tables and their statistics, from a run's records: one per (model, dataset, evaluation).

An evaluation that scores methods gets a table ranked by its primary metric with the statistics of
``attrbench.ops.stats``: average ranks over the examples every method was scored on, Friedman's test,
Nemenyi rank groups (or "n too small to rank", or "no difference found"), each value a mean with its
t-interval, n per method. Cost is shown as median [interquartile range], not ranked. Analyses of the
model get a table of their metrics with a per-layer summary. What a table shows comes from what the
evaluation declares (``attrbench.plugin.Evaluation``) and from the records, never from an
evaluation's name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from ..ops.stats import ALPHA, LEVEL, ROPE, agreement_interval, compare_adjacent, median_iqr, rank_methods, required_n
from ..registry import EVALS

CI_NOTE = f"values are mean [{LEVEL:.0%} CI] over examples (Student t)"
RANK_NOTE = (f"group = Nemenyi rank group: methods whose average rank (1 = best, over the examples every method was "
             f"scored on) is within the critical difference of the best form group 1, then the same from the best "
             f"method left (Friedman test first, alpha {ALPHA}); 'n too small to rank' where even a method better on "
             f"every example could not be shown to differ (exact p 2/2^n against alpha over the table's pairs)")


def fmt(record: dict, digits: int = 3) -> str:
    """``mean [lo, hi]``; where there is no mean or no interval, the reason instead of a number."""
    mean = record.get("mean")
    if mean is None:
        total = record.get("n", 0) + record.get("n_undefined", 0)
        return f"undefined on all {total} examples" if total else "no examples"
    ci = record.get("ci")
    if ci is None:
        return f"{mean:.{digits}f} ({record.get('ci_note') or 'no CI'})"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def fmt_median(values, digits: int = 3) -> str:
    stats = median_iqr(values)
    return "–" if stats is None else f"{stats[0]:.{digits}f} [{stats[1]:.{digits}f}, {stats[2]:.{digits}f}]"


def short(name: str) -> str:
    """A model or dataset as a reader names it: an absolute path (a config's data file or model folder) by
    its last part; registered names and hub ids as they are."""
    return Path(name).name if Path(name).is_absolute() else name


def suite_title(model: str, dataset: str) -> str:
    return f"{short(model)} · {short(dataset)}"


def table_title(model: str, dataset: str, eval_name: str) -> str:
    return f"{suite_title(model, dataset)} · {eval_name}"


def groups(records: list[dict]) -> dict[tuple, list[dict]]:
    """Records by (model, dataset, evaluation), in the order they come."""
    out: dict[tuple, list[dict]] = {}
    for r in records:
        out.setdefault((r["model"], r["dataset"], r["eval"]), []).append(r)
    return out


def suites(records: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in records:
        out.setdefault((r["model"], r["dataset"]), []).append(r)
    return out


def _direction(evaluation, group: list[dict], metric: str) -> bool:
    if metric in evaluation.higher_is_better:
        return evaluation.higher_is_better[metric]
    return next((r["higher_is_better"] for r in group if r["metric"] == metric and "higher_is_better" in r), True)


def aligned(group: list[dict], metric: str, leave_out: tuple = ()) -> dict[str, list]:
    """Per method, its values of ``metric`` on the union of the methods' examples (None where it has none)."""
    rows = [r for r in group if r["metric"] == metric and r["method"] not in leave_out]
    ids = list(dict.fromkeys(i for r in rows for i in r["example_ids"]))
    return {r["method"]: [dict(zip(r["example_ids"], r["values"])).get(i) for i in ids] for r in rows}


@dataclass
class Table:
    """One evaluation's table on one suite, with its statistics (``statistics`` None for analyses)."""

    model: str
    dataset: str
    evaluation: object
    group: list[dict]
    frame: pd.DataFrame
    note: str
    statistics: Optional[dict] = None
    figures: list = field(default_factory=list)

    @property
    def title(self) -> str:
        return table_title(self.model, self.dataset, self.evaluation.name)


def reference_of(group: list[dict]) -> Optional[str]:
    return next((r.get("reference") for r in group if r.get("reference")), None)


def rank_table(evaluation, group: list[dict], metric: Optional[str] = None, compare: bool = False,
               seed: int = 0) -> dict:
    """The statistics of one ranked table: ranks, groups, verdict; adjacent comparisons when ``compare``."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    key = metric or (evaluation.primary_metric if evaluation.primary_metric in metrics else metrics[0])
    better = _direction(evaluation, group, key)
    reference = reference_of(group)
    values = aligned(group, key, (reference,))
    ranking = rank_methods(values, better)
    out = {"metric": key, "higher_is_better": better, "reference": reference, **ranking}
    if compare and ranking["verdict"] == "ranked":
        out["adjacent"] = compare_adjacent(values, ranking["order"], better, evaluation.rope.get(key, ROPE), seed)
    if ranking["verdict"] in ("ranked", "no difference found"):
        out["required_n"] = required_n(values, ranking["order"])
    return out


def method_table(evaluation, group: list[dict], costs: dict, statistics: dict) -> tuple[pd.DataFrame, str]:
    """The ranked table of one evaluation and its note."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    label = {m: m + (" ↑" if _direction(evaluation, group, m) else " ↓") for m in metrics}
    verdict, group_of = statistics["verdict"], statistics.get("group", {})
    average = statistics.get("average_rank", {})
    reference = statistics.get("reference")
    rows: dict[str, dict] = {}
    for r in group:
        row = rows.setdefault(r["method"], {"method": r["method"], "family": r.get("method_family", "")})
        row[label[r["metric"]]] = fmt(r)
        row["n"] = r["n"]
        row.setdefault("undefined", 0)
        row["undefined"] += r.get("n_undefined", 0)
        if r.get("published"):
            row["published"] = f"{r['published']['value']:.2f}"
        row.update(costs.get((r["model"], r["dataset"], r["method"]), {}))
    for method, row in rows.items():
        if method == reference:
            row["group"], row["_order"] = "reference", -1.0
        elif verdict == "ranked":
            row["group"], row["_order"] = str(group_of.get(method, "–")), average.get(method, 1e9)
        else:
            row["group"] = {"n too small to rank": "n too small", "no difference found": "="}.get(verdict, "–")
            row["_order"] = average.get(method, 1e9)
        row["avg rank"] = f"{average[method]:.2f}" if method in average else ""
    frame = pd.DataFrame(rows.values()).sort_values("_order", kind="stable")
    columns = ["group", "method", "family", *label.values(), "avg rank", "n"]
    optional = ["undefined", "published", *dict.fromkeys(c for columns_ in costs.values() for c in columns_)]
    columns += [c for c in optional
                if c in frame and frame[c].fillna("").astype(str).str.strip().replace("0", "").any()]
    frame = frame[columns]
    note = f"ranked by {statistics['metric']}: {_verdict_note(statistics)}"
    if reference:
        note += f"; reference method {reference} (unranked, left out of the statistics)"
    note += _params_note(group) + _notes(evaluation, group)
    return frame, note


def _verdict_note(statistics: dict) -> str:
    verdict = statistics["verdict"]
    if verdict == "n too small to rank":
        return (f"n too small to rank: {statistics['k']} methods need n ≥ {statistics['minimum_n']} examples scored "
                f"by all of them, here {statistics['n']}")
    if verdict == "no difference found":
        return f"no difference found (Friedman p = {statistics['friedman_p']:.2g}, n = {statistics['n']})"
    if verdict == "ranked":
        return (f"Friedman p = {statistics['friedman_p']:.2g}, Nemenyi critical difference {statistics['cd']:.2f} "
                f"average ranks, n = {statistics['n']} examples scored by all {statistics['k']} methods")
    return verdict


def _params_note(group: list[dict]) -> str:
    params = group[0].get("eval_params") or {}
    return "; parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else ""


def _notes(evaluation, group: list[dict]) -> str:
    """What a reader needs to read the table: the target explained, a metric's derivation, beam bounds."""
    out = ""
    target = next((r.get("target") for r in group if r.get("target")), None)
    if target and evaluation.family == "faithfulness":
        out += f"; target: {target}"
    if evaluation.derived:
        out += f"; derived: {evaluation.derived} (not counted as a metric of its own)"
    beam = next((r for r in group if "examples_with_beam_bounds" in r), None)
    if beam is not None:
        broken = {r["method"]: r["beam_bounds_broken"] for r in group if r.get("beam_bounds_broken")}
        out += (f"; bounds from a beam on {beam['examples_with_beam_bounds']} examples (widths "
                f"{', '.join(map(str, beam['beam_widths'])) or '–'}, {beam['beam_not_converged']} not converged), "
                "exact on the rest; orderings that beat a beam bound widened it: "
                + (", ".join(f"{m} on {k}" for m, k in broken.items()) or "none did"))
    passed = next((r["skipped_same_contrast"] for r in group if r.get("skipped_same_contrast")), None)
    if passed:
        out += f"; passed over (a contrast of one token with itself): {', '.join(passed)}"
    if any(r.get("published") for r in group):
        out += "; published: " + ", ".join(dict.fromkeys(r["published"]["source"] for r in group if r.get("published")))
    return out


def cost_table(evaluation, group: list[dict]) -> tuple[pd.DataFrame, str]:
    """Cost as median [interquartile range] per example and per token, with peak memory: not ranked."""
    rows = {}
    for r in group:
        row = rows.setdefault(r["method"], {"method": r["method"], "family": r.get("method_family", "")})
        row[f"{r['metric']} (median [IQR])"] = fmt_median(r["values"], 4 if "token" in r["metric"] else 3)
        row["n"] = r["n"]
        if r["metric"] == evaluation.primary_metric:
            row["_order"] = (median_iqr(r["values"]) or (float("inf"),))[0]
    frame = pd.DataFrame(rows.values()).sort_values("_order", kind="stable").drop(columns="_order")
    return frame, "cost is shown as median [interquartile range] over examples and not ranked" + _params_note(group)


def analysis_table(evaluation, group: list[dict]) -> tuple[pd.DataFrame, str]:
    rows = []
    for r in group:
        row = {"view / scope": r.get("label") or r["method"], "metric": r["metric"],
               f"mean [{LEVEL:.0%} CI]": fmt(r), "n": r["n"], "per layer": evaluation.layer_summary(r)}
        if any(g.get("published") for g in group):
            row["published"] = f"{r['published']['value']:.2f}" if r.get("published") else ""
        rows.append(row)
    return pd.DataFrame(rows), "analysis of the model itself" + _params_note(group) + _notes(evaluation, group)


def cost_lookup(records: list[dict]) -> dict[tuple, dict[str, str]]:
    """(model, dataset, method) -> {column: median} of the metrics evaluations declare as cost columns."""
    out: dict[tuple, dict[str, str]] = {}
    for r in records:
        columns = EVALS.get(r["eval"]).cost_columns
        if r["metric"] in columns:
            label, digits = columns[r["metric"]]
            stats = median_iqr(r["values"])
            if stats is not None:
                out.setdefault((r["model"], r["dataset"], r["method"]), {})[label] = f"{stats[0]:.{digits}f}"
    return out


def leaderboard_tables(records: list[dict], seed: int = 0) -> list[Table]:
    """One table per (model, dataset, evaluation), with its statistics."""
    costs = cost_lookup(records)
    tables = []
    for (model, dataset, eval_name), group in groups(records).items():
        evaluation = EVALS.get(eval_name)
        if not evaluation.needs_methods:
            frame, note = analysis_table(evaluation, group)
            tables.append(Table(model, dataset, evaluation, group, frame, note))
        elif not evaluation.ranked:
            frame, note = cost_table(evaluation, group)
            tables.append(Table(model, dataset, evaluation, group, frame, note))
        else:
            statistics = rank_table(evaluation, group, seed=seed)
            frame, note = method_table(evaluation, group, {} if evaluation.cost_columns else costs, statistics)
            tables.append(Table(model, dataset, evaluation, group, frame, note, statistics))
    return tables


def markdown_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else str(v) for v in row]
                                                 for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in cells[0]) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])


def faithfulness_tables(tables: list[Table]) -> dict[tuple, list[Table]]:
    """Per suite, its ranked faithfulness tables (derived metrics included; use ``independent`` to leave them out)."""
    out: dict[tuple, list[Table]] = {}
    for table in tables:
        if table.statistics is not None and table.evaluation.family == "faithfulness":
            out.setdefault((table.model, table.dataset), []).append(table)
    return out


def headline_table(tables: list[Table]) -> Optional[Table]:
    """A suite's headline: its independent faithfulness table the evaluations rank first (``headline`` order)."""
    candidates = [t for t in tables if not t.evaluation.derived]
    return min(candidates, key=lambda t: t.evaluation.headline, default=None)


def agreement_table(suite_tables: list[Table], resamples: int, seed: int = 0) -> Optional[tuple[pd.DataFrame, str]]:
    """Kendall's tau between the method orders of each pair of independent faithfulness metrics of a suite, with
    a bootstrap interval over the examples scored by both."""
    tables = [t for t in suite_tables if not t.evaluation.derived]
    if len(tables) < 2:
        return None
    per_metric = {}
    for t in tables:
        metric = t.statistics["metric"]
        values = aligned(t.group, metric, (t.statistics.get("reference"), "random"))
        sign = 1.0 if t.statistics["higher_is_better"] else -1.0
        per_metric[f"{t.evaluation.name}.{metric}"] = (values, sign)
    names = list(per_metric)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (va, sa), (vb, sb) = per_metric[a], per_metric[b]
            common = [m for m in va if m in vb]
            n = min(len(next(iter(va.values()))), len(next(iter(vb.values()))))
            oriented = {a: {m: [None if x is None else sa * x for x in va[m][:n]] for m in common},
                        b: {m: [None if x is None else sb * x for x in vb[m][:n]] for m in common}}
            result = agreement_interval(oriented, a, b, resamples, seed)
            if result is None or result["tau"] is None:
                continue
            rows.append({"metric A": a, "metric B": b, "methods": result["methods"], "n": result["n"],
                         "Kendall tau [95% CI]": f"{result['tau']:.2f} [{result['ci'][0]:.2f}, {result['ci'][1]:.2f}]",
                         "_tau": result["tau"], "_ci": result["ci"]})
    if not rows:
        return None
    note = ("agreement of the method orders between two metrics (each oriented so that higher is better; the "
            "reference and the random baseline left out): Kendall's tau of the methods' means, with a percentile "
            f"bootstrap interval over examples ({resamples} resamples); an interval that holds 0 shows no agreement")
    return pd.DataFrame(rows), note


def power_table(suite_tables: list[Table]) -> Optional[tuple[pd.DataFrame, str]]:
    """Per ranked table: the examples needed to separate adjacent methods at 80 % power (pilot: this run)."""
    rows = []
    for t in suite_tables:
        needed = t.statistics.get("required_n")
        if not needed:
            continue
        ns = [p["n"] for p in needed if p["n"] is not None]
        never = sum(1 for p in needed if p["n"] is None and p.get("effect") == 0.0)
        top = needed[0]
        rows.append({"table": t.evaluation.name, "metric": t.statistics["metric"], "n now": t.statistics["n"],
                     "n for the top two": "never (identical)" if top["n"] is None else str(top["n"]),
                     "median n over adjacent pairs": str(int(pd.Series(ns).median())) if ns else "–",
                     "pairs never separable (identical scores)": never})
    if not rows:
        return None
    note = ("examples a paired t-test needs to separate each pair of adjacent methods with 80 % power at alpha over "
            "the table's pairs (statsmodels TTestPower on this run's paired differences as the pilot)")
    return pd.DataFrame(rows), note
