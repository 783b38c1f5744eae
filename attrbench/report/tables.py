"""Leaderboard tables of a run's records: one per (model, dataset, evaluation).

Evaluations that score methods get a table in significance tiers of the evaluation's primary
metric (``attrbench.ops.stats.tiers``); analyses of the model get a table of their metrics with a
per-layer summary. Every value is a mean with its bootstrap CI. What a table shows comes from what
the evaluation declares (``attrbench.plugin.Evaluation``) and from the records, never from an
evaluation's name.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from scipy.stats import kendalltau

from ..ops.stats import ALPHA, LEVEL, tiers
from ..plugin.registry import EVALS

TIER_NOTE = (f"rank = significance tier: methods not significantly worse than the best share rank 1 (shown 1=), "
             f"then the same from the best method left (paired Wilcoxon signed-rank over the same examples, "
             f"Holm-corrected within the table, alpha {ALPHA})")
CI_NOTE = f"values are mean [{LEVEL:.0%} CI]: bootstrap over examples (scipy, BCa, {{resamples}} resamples, seeded)"


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


def short(name: str) -> str:
    """A model or dataset as a reader names it: an absolute path (a config's data file or model folder) by
    its last part; registered names and hub ids as they are."""
    return Path(name).name if Path(name).is_absolute() else name


def table_title(model: str, dataset: str, eval_name: str) -> str:
    return f"{short(model)} · {short(dataset)} · {eval_name}"


def groups(records: list[dict]) -> dict[tuple, list[dict]]:
    """Records by (model, dataset, evaluation), in the order they come."""
    out: dict[tuple, list[dict]] = {}
    for r in records:
        out.setdefault((r["model"], r["dataset"], r["eval"]), []).append(r)
    return out


def _published(record: dict) -> str:
    published = record.get("published")
    return "" if not published else f"{published['value']:.2f}"


def _sources(group: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["published"]["source"] for r in group if r.get("published")))


def _params_note(group: list[dict]) -> str:
    params = group[0].get("eval_params") or {}
    return "; parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else ""


def _direction(evaluation, group: list[dict], metric: str) -> bool:
    if metric in evaluation.higher_is_better:
        return evaluation.higher_is_better[metric]
    return next((r["higher_is_better"] for r in group if r["metric"] == metric and "higher_is_better" in r), True)


def cost_lookup(records: list[dict]) -> dict[tuple, dict[str, str]]:
    """(model, dataset, method) -> {column: text} of the metrics evaluations declare as cost columns."""
    out: dict[tuple, dict[str, str]] = {}
    for r in records:
        columns = EVALS.get(r["eval"]).cost_columns
        if r["metric"] in columns and r["mean"] is not None:
            label, digits = columns[r["metric"]]
            out.setdefault((r["model"], r["dataset"], r["method"]), {})[label] = f"{r['mean']:.{digits}f}"
    return out


def method_table(evaluation, group: list[dict], costs: dict) -> tuple[pd.DataFrame, str, dict]:
    """The ranked table of one evaluation, its note, and its statistics (tiers and p-values)."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    better = {m: _direction(evaluation, group, m) for m in metrics}
    label = {m: m + (" ↑" if better[m] else " ↓") for m in metrics}
    key = evaluation.primary_metric if evaluation.primary_metric in metrics else metrics[0]
    reference = next((r.get("reference") for r in group if r.get("reference")), None)
    rows: dict[str, dict] = {}
    for r in group:
        row = rows.setdefault(r["method"], {"method": r["method"]})
        row[label[r["metric"]]] = fmt(r)
        row["_" + r["metric"]] = r["mean"]
        row["n"] = r["n"]
        row["undefined"] = row.get("undefined", 0) + r.get("n_undefined", 0)
        row["published"] = row.get("published") or _published(r)
        if not evaluation.cost_columns:  # a cost evaluation's own table already shows them
            row.update(costs.get((r["model"], r["dataset"], r["method"]), {}))
    ranked = {r["method"]: dict(zip(r["example_ids"], r["values"])) for r in group
              if r["metric"] == key and r["method"] != reference}
    ids = sorted(set.intersection(*(set(v) for v in ranked.values()))) if ranked else []
    statistics = {"metric": key, "higher_is_better": better[key], "reference": reference,
                  **tiers({m: [v[i] for i in ids] for m, v in ranked.items()}, better[key]),
                  "intervals": {r["method"]: {} for r in group}}
    for r in group:
        statistics["intervals"][r["method"]][r["metric"]] = {k: r.get(k) for k in ("mean", "ci", "ci_method", "ci_note",
                                                                                   "n", "n_undefined")}
    shared = {t: list(statistics["tier"].values()).count(t) for t in statistics["tier"].values()}
    for method, row in rows.items():
        tier = statistics["tier"].get(method)
        row["rank"] = ("reference" if method == reference else "unranked" if tier is None
                       else f"{tier}=" if shared[tier] > 1 else str(tier))
        row["_tier"] = 0 if method == reference else tier if tier is not None else 10 ** 6
    frame = pd.DataFrame(rows.values())
    frame["_order"] = frame["_" + key] * (-1 if better[key] else 1)
    frame = frame.sort_values(["_tier", "_order"], na_position="last", kind="stable")
    extra = ["undefined", "published", *dict.fromkeys(c for columns in costs.values() for c in columns)]
    columns = ["rank", "method", *label.values(), "n"]
    columns += [c for c in extra if c in frame and frame[c].fillna("").astype(str).str.strip().replace("0", "").any()]
    frame = frame[columns]
    note = f"tiers by {key}" + (f"; reference method: {reference} (unranked, left out of the tests)"
                                if reference else "") + _params_note(group)
    if "undefined" in frame:
        note += "; undefined = examples where the metric does not exist (e.g. constant scores), left out of the mean"
    if "published" in frame:
        note += "; published: " + ", ".join(_sources(group))
    return frame, note, statistics


def analysis_table(evaluation, group: list[dict]) -> tuple[pd.DataFrame, str, None]:
    rows = []
    for r in group:
        row = {"view / scope": r.get("label") or r["method"], "metric": r["metric"],
               f"mean [{LEVEL:.0%} CI]": fmt(r), "n": r["n"], "per layer": evaluation.layer_summary(r)}
        if any(g.get("published") for g in group):
            row["published"] = _published(r)
        rows.append(row)
    note = "analysis of the model itself" + _params_note(group)
    sources = _sources(group)
    return pd.DataFrame(rows), note + ("; published: " + ", ".join(sources) if sources else ""), None


def leaderboard_tables(records: list[dict]) -> list[tuple[str, pd.DataFrame, str, dict | None]]:
    """(title, table, note, statistics) per (model, dataset, evaluation); analyses have no statistics."""
    costs = cost_lookup(records)
    tables = []
    for (model, dataset, eval_name), group in groups(records).items():
        evaluation = EVALS.get(eval_name)
        title = table_title(model, dataset, eval_name)
        table = method_table(evaluation, group, costs) if evaluation.needs_methods else analysis_table(evaluation, group)
        tables.append((title, *table))
    return tables


def markdown_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else str(v) for v in row]
                                                 for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in cells[0]) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])


def faithfulness_records(records: list[dict]) -> dict[tuple, list[dict]]:
    """Records of the faithfulness evaluations by (model, dataset), reference methods left out."""
    out: dict[tuple, list[dict]] = {}
    for r in records:
        if EVALS.get(r["eval"]).family == "faithfulness" and r["method"] != r.get("reference"):
            out.setdefault((r["model"], r["dataset"]), []).append(r)
    return out


def headline_table(records: list[dict], statistics: dict) -> tuple[pd.DataFrame, str] | None:
    """Methods × (suite, primary faithfulness metric): tier and mean [CI]; sorted by the mean tier."""
    rows: dict[str, dict] = {}
    for (model, dataset), group in faithfulness_records(records).items():
        for eval_name in dict.fromkeys(r["eval"] for r in group):
            stats = statistics.get(table_title(model, dataset, eval_name))
            if not stats:
                continue
            column = f"{short(model)} · {short(dataset)} · {stats['metric']} {'↑' if stats['higher_is_better'] else '↓'}"
            shared = list(stats["tier"].values())
            for r in group:
                if r["eval"] == eval_name and r["metric"] == stats["metric"]:
                    tier = stats["tier"].get(r["method"])
                    row = rows.setdefault(r["method"], {"method": r["method"], "_tiers": []})
                    mark = "–" if tier is None else f"{tier}=" if shared.count(tier) > 1 else str(tier)
                    row[column] = f"{mark} · {fmt(r)}"
                    if tier is not None:
                        row["_tiers"].append(tier)
    if not rows:
        return None
    for row in rows.values():
        row["mean tier"] = round(sum(row["_tiers"]) / len(row["_tiers"]), 2) if row["_tiers"] else None
    frame = pd.DataFrame(rows.values()).sort_values("mean tier", na_position="last", kind="stable")
    frame = frame.drop(columns="_tiers")
    frame = frame[["mean tier", "method", *[c for c in frame.columns if c not in ("mean tier", "method")]]]
    note = ("each cell: tier · mean [95% CI] of the evaluation's primary metric (tiers as in its own table); "
            "mean tier = the average over the columns a method is ranked in; '–' = unranked")
    return frame, note


def agreement_tables(records: list[dict]) -> list[tuple[str, pd.DataFrame, str]]:
    """Per suite, Kendall's tau between the method rankings of each pair of faithfulness metrics."""
    out = []
    for (model, dataset), group in faithfulness_records(records).items():
        scores: dict[str, dict[str, float]] = {}
        for r in group:
            if r["mean"] is not None:
                sign = 1 if _direction(EVALS.get(r["eval"]), group, r["metric"]) else -1  # higher = better for all
                scores.setdefault(f"{r['eval']}.{r['metric']}", {})[r["method"]] = sign * r["mean"]
        metrics = list(scores)
        if len(metrics) < 2:
            continue
        matrix = pd.DataFrame(index=metrics, columns=metrics, dtype=object)
        for a in metrics:
            for b in metrics:
                common = sorted(set(scores[a]) & set(scores[b]))
                tau = kendalltau([scores[a][m] for m in common], [scores[b][m] for m in common]).statistic \
                    if len(common) >= 3 else None
                matrix.loc[a, b] = "n < 3" if tau is None else "undefined" if tau != tau else f"{tau:.2f}"
        frame = matrix.reset_index().rename(columns={"index": "metric"})
        out.append((f"{short(model)} · {short(dataset)} · metric agreement", frame,
                    "Kendall's tau between the method rankings by each pair of metrics (each oriented so that "
                    "higher is better; reference methods left out); 1 = the same order, 0 = unrelated"))
    return out
