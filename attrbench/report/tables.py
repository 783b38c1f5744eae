"""Leaderboard tables and their statistics, from a run's records: one per (model, dataset, evaluation).

An evaluation that scores methods gets a table of its metrics, each a mean with its t-interval and n per
method, rows ordered by the primary metric's mean (the statistic shown). Its verdicts are pairwise
(``attrbench.ops.verdicts``): every pair of methods tested on its common examples (Wilcoxon signed-rank,
Holm-corrected over the table's pairs), groups derived from those tests (group 1: no method beats it pair by
pair) and the compact letter display; each method against the random floor (the expected score of a random
attribution) as better, not separated or worse. Methods with identical scores on every example of a suite are
one row (aliases). The mean-rank view (Friedman, Nemenyi's critical difference) is kept for its diagram and
labelled as such: it depends on which other methods are in the pool. Cost is shown as median [interquartile
range], not ranked. Analyses of the model get a table of their metrics with a per-layer summary. What a table
shows comes from what the evaluation declares (``attrbench.plugin.Evaluation``) and from the records, never
from an evaluation's name.
"""
from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from ..ops.reuse import active
from ..ops.stats import (
    LEVEL,
    MAX_N,
    agreement_interval,
    agreement_lead,
    independent_agreement,
    median_iqr,
    minimum_n,
    rank_methods,
    required_n,
)
from ..ops.verdicts import (
    ALIAS_TOLERANCE,
    ALPHA,
    BAYES_DRAWS,
    FLOOR,
    ROPE,
    against_floor,
    aliases,
    bayes_signed_rank,
    best_frequency,
    common,
    format_p,
    pairwise,
    provisional,
)
from ..registry import EVALS
from ..runtime.records import suite_dataset

ROUNDING = 1e-5  # an AOPC passing an exact bound by at most this is float32 rounding of the same outputs
CI_NOTE = f"values are mean [{LEVEL:.0%} CI] over examples (Student t, clipped to the metric's possible range)"
RANK_NOTE = (f"group: from pairwise tests (Wilcoxon signed-rank on each pair's common examples, the sign test where "
             f"ties dominate, Holm-corrected over the table's pairs, alpha {ALPHA}): group 1 holds the methods no "
             "method beats pair by pair, group 2 the same among the rest, and so on, so a separated pair never "
             "shares a group; letters: methods sharing a letter are not separated (compact letter display); vs "
             "floor: each method against the random floor, the expected score of a random attribution on each "
             "example (Holm over the methods); 'n too small to rank' where even a method better on every example "
             "could not be shown to differ (exact p 2/2^n against alpha over the table's pairs)")


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


def still_computing(records: list[dict], plan: Optional[list[dict]] = None
                    ) -> tuple[list[dict], dict[tuple, dict[str, tuple[int, int]]]]:
    """A growing run's records split into those its tables rank and, per (model, dataset, evaluation), what is
    left out: {method: (examples with rows, of the table's planned n)}.

    Left out: a method with rows on fewer examples than the table's most complete method (the random floor is
    compared with the methods, never counted as one of them), the floor of a table with no method, and listed with
    0 examples the methods and floor the stored ``plan`` puts in a table that have no rows yet, in a table with
    no row at all too (the verdicts are then among the methods computed, and the findings say so). Until they
    catch up they are in no statistic, finding or figure: a method on a few examples is beaten by none and would
    sit in the top group, and a floor on a few examples would separate nothing. The report says how far each is
    instead. A floor planned on a table's first examples only (a config's ``floor_n``) is complete on those."""
    sizes: dict[tuple, dict[str, int]] = {}
    planned: dict[tuple, int] = {}  # the examples a table is to have (its cell's n), where the records say
    for r in records:
        if "sample_size" in r:
            key = (r["model"], r["dataset"], r["eval"])
            sizes.setdefault(key, {})[r["method"]] = r["sample_size"]
            planned[key] = max(planned.get(key, 0), r.get("planned_n") or 0)
    expected: dict[tuple, list[str]] = {}
    floors = set()  # the tables whose plan has a random floor
    floor_n: dict[tuple, int] = {}  # a floor planned on fewer examples than its table (a config's floor_n)
    for r in records:
        if r["method"] == FLOOR and r.get("planned_n"):
            floor_n[(r["model"], r["dataset"], r["eval"])] = r["planned_n"]
    for suite in plan or []:
        for cell in suite["scoring"]:
            key = (suite["model"], suite_dataset(suite), cell["eval"])
            expected[key] = [m["name"] for m in cell["methods"]]
            planned[key] = max(planned.get(key, 0), cell.get("n") or 0)
            if cell.get("floor"):
                floors.add(key)
                if cell["floor"].get("n") is not None:
                    floor_n[key] = cell["floor"]["n"]
    # a method behind in a table whose other methods reached the planned n is behind in its suite wherever it has no
    # more examples than there: its rows elsewhere (a metric added later, so that all have few) are a partial
    # method's, judged nowhere yet. Where it has more (a table it completed before, e.g. beside an axiom check
    # still computing for it) they are not.
    behind: dict[tuple, dict[str, int]] = {}
    for key, counts in sizes.items():
        full = max((k for m, k in counts.items() if m != FLOOR), default=0)
        if full and full >= planned.get(key, 0):
            lagging_in_suite = behind.setdefault(key[:2], {})
            for m, k in counts.items():
                if k < full and m != FLOOR:
                    lagging_in_suite[m] = max(k, lagging_in_suite.get(m, 0))
    held: dict[tuple, dict[str, tuple[int, int]]] = {}
    for key, counts in sizes.items():
        late = {m for m, k in behind.get(key[:2], {}).items() if counts.get(m, 0) <= k}
        methods = {m: k for m, k in counts.items() if m != FLOOR and m not in late}
        full = max(methods.values(), default=0)
        of = max(*counts.values(), planned.get(key, 0))
        floor_of = min(of, floor_n.get(key, of))  # the floor is complete on its own planned examples
        lagging = {m: (k, floor_of if m == FLOOR else of) for m, k in counts.items()
                   if k < (min(full, floor_of) if m == FLOOR else full) or m in late or not methods}  # no method:
        lagging.update({m: (0, of) for m in expected.get(key, []) if m not in counts})  # nothing to judge
        if key in floors and FLOOR not in counts:
            lagging[FLOOR] = (0, floor_of)
        if lagging:
            held[key] = lagging
    for key, methods in expected.items():  # planned, no row stored yet: every method waits, and the floor
        if key not in sizes and methods:
            of = planned.get(key, 0)
            held[key] = {m: (0, of) for m in methods}
            if key in floors:
                held[key][FLOOR] = (0, min(of, floor_n.get(key, of)))
    ranked = [r for r in records if r["method"] not in held.get((r["model"], r["dataset"], r["eval"]), {})]
    return ranked, held


def computing_note(held: dict[str, tuple[int, int]]) -> str:
    """The table note's words for what :func:`still_computing` left out of a table."""
    named = [f"{'the random floor' if m == FLOOR else m} ({k:,} of {n:,} examples)" for m, (k, n) in held.items()]
    return f"still computing, left out of this table's statistics until complete: {', '.join(named)}"


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
    by_id = [(r["method"], dict(zip(r["example_ids"], r["values"]))) for r in rows]  # once per row, not per id
    return {method: [values.get(i) for i in ids] for method, values in by_id}


def by_example(group: list[dict], metric: str, leave_out: tuple = ()) -> dict[str, dict]:
    """Per method, its defined values of ``metric`` by example id."""
    return {r["method"]: {i: v for i, v in zip(r["example_ids"], r["values"]) if v is not None}
            for r in group if r["metric"] == metric and r["method"] not in leave_out}


def shared_examples(a: dict[str, dict], b: dict[str, dict], methods: list[str]) -> list:
    """The examples two metrics (:func:`by_example`) both have a value on for some of ``methods``, sorted: two
    method orders compared over the same examples, matched by id."""
    return sorted({i for m in methods for i in a[m]} & {i for m in methods for i in b[m]})


def columns(values: dict[str, dict], methods: list[str], ids: list, sign: float = 1.0) -> dict[str, list]:
    """Per method, its values (:func:`by_example`) on ``ids`` times ``sign``, None where it has none."""
    return {m: [None if values[m].get(i) is None else sign * values[m][i] for i in ids] for m in methods}


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


def floor_of(group: list[dict], metric: str) -> Optional[dict]:
    """The random floor's record of ``metric`` in a table, if the run computed one."""
    return next((r for r in group if r["method"] == FLOOR and r["metric"] == metric), None)


def listing(names: list[str], limit: int = 8) -> str:
    """Names joined by commas, the first ``limit`` and how many more."""
    return ", ".join(names) if len(names) <= limit else ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def alias_label(method: str, statistics: Optional[dict]) -> str:
    """A method's name with the methods that are the same behaviour (``= occlusion``)."""
    same = (statistics or {}).get("aliases", {}).get(method)
    return f"{method} (= {', '.join(same)})" if same else method


def aliased(statistics: Optional[dict]) -> set[str]:
    """The methods a table shows as another's row (the members of its ``aliases``, not the names kept)."""
    return {m for names in (statistics or {}).get("aliases", {}).values() for m in names}


def rank_table(evaluation, group: list[dict], metric: Optional[str] = None, compare: bool = False,
               seed: int = 0, same: Optional[list[list[str]]] = None) -> dict:
    """The statistics of one ranked table's ``metric`` (default: the primary): pairwise verdicts, groups, the floor,
    the mean-rank view; with ``compare`` also the Bayesian signed-rank test of methods adjacent by mean and how often
    each method is best over bootstrap resamples. ``same``: the suite's alias groups (the first name is kept)."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    key = metric or (evaluation.primary_metric if evaluation.primary_metric in metrics else metrics[0])
    better = _direction(evaluation, group, key)
    reference = reference_of(group)
    values = aligned(group, key, (reference, FLOOR))
    floor = aligned(group, key).get(FLOOR)
    merged = {}
    for names in same or []:
        if names[0] in values:
            merged[names[0]] = [m for m in names[1:] if m in values]
            for m in names[1:]:
                values.pop(m, None)
    k = len(values)
    complete = rank_methods(values, better) if values else {"n": 0}
    out = {"metric": key, "higher_is_better": better, "reference": reference, "k": k, "n": complete["n"],
           "minimum_n": minimum_n(k), "alpha": ALPHA, "aliases": {m: v for m, v in merged.items() if v}}
    if not k or not max((sum(v is not None for v in vals) for vals in values.values()), default=0):
        return {**out, "verdict": "no examples", "order": list(values), "tier": {}, "top": []}
    bounds = evaluation.bounds.get(key)
    verdicts = copy.deepcopy(_pairwise(tuple((m, tuple(v)) for m, v in values.items()), better,
                                       tuple(bounds) if bounds else None))
    sizes = [p["n"] for p in verdicts["pairs"].values()]
    out.update(order=verdicts["order"], mean=verdicts["mean"], n_by_method=verdicts["n"],
               pairs=verdicts["pairs"], pairs_tested=verdicts["pairs_tested"], pair_n=[min(sizes), max(sizes)]
               if sizes else None, letters=verdicts["letters"])
    out["mean_rank"] = {name: complete[name] for name in ("average_rank", "friedman_p", "cd", "group", "nemenyi",
                                                          "verdict") if name in complete}
    if floor is not None:
        floor_record = floor_of(group, key) or {}
        out["floor"] = against_floor(values, floor, better, bounds=bounds)
        out["floor_summary"] = {"mean": floor_record.get("mean"), "n": floor_record.get("n"),
                                "how": floor_record.get("floor")}
    if k == 1:
        return {**out, "verdict": "one method", "tier": {m: 1 for m in values}, "top": list(values)}
    if max(sizes) < out["minimum_n"]:
        return {**out, "verdict": "n too small to rank", "tier": {}, "top": []}
    separated = any(p["separated"] for p in verdicts["pairs"].values())
    out.update(tier=verdicts["tier"], top=verdicts["top"], verdict="ranked" if separated else "no difference found")
    if compare and k > 1:
        out["adjacent"] = adjacent_bayes(values, verdicts, better, evaluation.rope.get(key, ROPE), seed)
        out["stability"] = best_frequency(values, better, seed=seed)
    out["required_n"] = required_n(values, verdicts["order"])
    return out


def _pairwise(values: tuple, higher_is_better: bool, bounds: Optional[tuple]) -> dict:
    """:func:`pairwise` of a table's values, computed once per content: a report tests the headline metric's
    pairs for its table, its opening and its robustness panel alike (callers get a copy). Within a report's reuse
    block the block answers the repeats, so that what it keeps does not depend on what this process did before."""
    if active() is not None:
        return pairwise({m: list(v) for m, v in values}, higher_is_better, bounds=bounds)
    return _pairwise_once(values, higher_is_better, bounds)


@functools.lru_cache(maxsize=64)
def _pairwise_once(values: tuple, higher_is_better: bool, bounds: Optional[tuple]) -> dict:
    return pairwise({m: list(v) for m, v in values}, higher_is_better, bounds=bounds)


def adjacent_bayes(values: dict, verdicts: dict, higher_is_better: bool, rope: float, seed: int = 0) -> list[dict]:
    """Each method against the next by mean: baycomp's three probabilities (Bayesian signed-rank, ``BAYES_DRAWS``
    posterior draws) beside the pair's frequentist result, so neither is read without the other."""
    out = []
    order = verdicts["order"]
    for a, b in zip(order, order[1:]):
        x, y = common(values[a], values[b])
        pair = verdicts["pairs"][f"{a} vs {b}"]
        row = {"pair": [a, b], "n": len(x), "rope": rope, "difference": pair["difference"], "ci": pair["ci"],
               "p_holm": pair["p_holm"], "separated": pair["separated"], "better": pair["better"],
               "samples": BAYES_DRAWS}
        if len(x) < 2:
            out.append({**row, "verdict": "undecided"})
            continue
        d = (x - y) * (1.0 if higher_is_better else -1.0)
        if not d.any():
            probabilities = (0.0, 1.0, 0.0)
        else:
            probabilities = bayes_signed_rank(d, rope, BAYES_DRAWS, seed)
        first, equivalent, second = probabilities
        verdict = ("better" if first >= 0.95 else "equivalent" if equivalent >= 0.95 else
                   "worse" if second >= 0.95 else "undecided")
        out.append({**row, "p_better": first, "p_equivalent": equivalent, "p_worse": second, "verdict": verdict})
    return out


def table_group(statistics: dict, method: str) -> str:
    """A method's cell in a table's group column."""
    verdict = statistics.get("verdict")
    if method == statistics.get("reference"):
        return "reference"
    if method == FLOOR:
        return "floor"
    if verdict in ("ranked", "one method"):
        return str(statistics.get("tier", {}).get(method, "–"))
    return {"n too small to rank": "n too small", "no difference found": "="}.get(verdict, "–")


def floor_cell(statistics: dict, method: str) -> str:
    """A method's verdict against the random floor, with its win rate (or '' where there is no floor), and the
    paired examples it rests on where they are fewer than the table's (a floor computed on the first examples)."""
    row = (statistics.get("floor") or {}).get(method)
    if row is None:
        return ""
    fewer = f", n = {row['n']}" if row.get("n") is not None and row["n"] < statistics.get("n", row["n"]) else ""
    rate = "" if row["win_rate"] is None else f" ({row['win_rate']:.0%} wins{fewer})"
    return f"{row['verdict']}{rate}"


def method_table(evaluation, group: list[dict], costs: dict, statistics: dict) -> tuple[pd.DataFrame, str]:
    """The table of one ranked evaluation and its note: rows ordered by the primary metric's mean."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    label = {m: m + (" ↑" if _direction(evaluation, group, m) else " ↓") for m in metrics}
    dropped = aliased(statistics)
    sign = 1.0 if statistics["higher_is_better"] else -1.0
    undefined = undefined_per_method(group)
    rows: dict[str, dict] = {}
    for r in group:
        if r["method"] in dropped:
            continue
        row = rows.setdefault(r["method"], {"method": alias_label(r["method"], statistics),
                                            "family": r.get("method_family", "")})
        row[label[r["metric"]]] = fmt(r)
        row[f"n ({r['metric']})"] = r["n"]
        row["undefined"] = undefined.get(r["method"], 0)
        if r.get("published"):
            row["published"] = f"{r['published']['value']:.2f}"
        if r["metric"] == statistics["metric"]:
            row["_order"] = -1e18 if r["method"] == statistics.get("reference") else (
                -sign * r["mean"] if r["mean"] is not None else 1e18)
        row.update(costs.get((r["model"], r["dataset"], r["method"]), {}))
    placed = statistics.get("provisional") or {}
    for method, row in rows.items():
        row["group"] = table_group(statistics, method)
        row["letters"] = (statistics.get("letters") or {}).get(method, "") if statistics["verdict"] == "ranked" else ""
        row["vs floor"] = floor_cell(statistics, method)
        row.setdefault("_order", 1e18)
        if method in placed:  # short of the table's examples: placed pair by pair, in no group
            entry = placed[method]
            row.update({"group": "provisional", "letters": "", "placement": placement(entry),
                        "vs floor": provisional_floor_cell(entry), f"n ({statistics['metric']})":
                        f"{entry['n']:,} of {entry['of']:,}"})
    frame = pd.DataFrame(ranked_order(list(rows.values())))
    # n is the primary metric's; another metric defined on other examples gets an n column of its own
    counts = [f"n ({m})" for m in metrics]
    primary = f"n ({statistics['metric']})"
    frame = frame.rename(columns={primary: "n"})
    extra_n = [c for c in counts if c != primary and c in frame and not frame[c].equals(frame["n"])]
    columns = ["group", "letters", "method", "family", *label.values(), "vs floor", "n",
               *(["placement"] if placed else []), *extra_n]
    optional = ["undefined", "published", *dict.fromkeys(c for columns_ in costs.values() for c in columns_)]
    columns = [c for c in columns if c not in ("letters", "vs floor") or frame[c].astype(str).str.strip().any()]
    columns += [c for c in optional
                if c in frame and frame[c].fillna("").astype(str).str.strip().replace("0", "").any()]
    frame = frame[columns]
    if len(metrics) > 1:  # an example undefined under any metric counts, so n + undefined is no total to check
        frame = frame.rename(columns={"undefined": "undefined (any metric)"})
    note = (f"rows ordered by group, then by the mean of {statistics['metric']}, the random floor where its mean "
            f"falls; {_verdict_note(statistics)}")
    if statistics.get("aliases"):
        note += "; " + aliases_note(statistics["aliases"])
    if reference := statistics.get("reference"):
        ranked_too = reference in rows
        note += (f"; reference method {reference} (unranked, left out of the statistics)" if ranked_too else
                 f"; the scores are compared with {reference}, computed for this table only")
    note += _undefined_note(evaluation, group) + _params_note(group) + _notes(evaluation, group)
    return frame, note


def ranked_order(rows: list[dict]) -> list[dict]:
    """Rows as they are ranked: by group (1 first; the reference row above all), then by mean (``_order``, the
    mean signed so that the best is lowest); the random floor's row where its mean falls among them, its group
    cell marking it ("floor")."""
    def group_of(row):
        group = str(row.get("group", ""))
        return int(group) if group.isdigit() else float("inf")

    floor = [row for row in rows if row.get("group") == "floor"]
    ordered = sorted((row for row in rows if row.get("group") != "floor"),
                     key=lambda row: (row["_order"] > -1e17, group_of(row), row["_order"]))
    for row in floor:  # before the first row whose mean is worse than the floor's
        at = next((k for k, other in enumerate(ordered) if other["_order"] > row["_order"] > -1e17), len(ordered))
        ordered.insert(at, row)
    return ordered


def aliases_note(merged: dict[str, list[str]]) -> str:
    return ("one row per behaviour: " + "; ".join(f"{', '.join(v)} gave the same scores as {m} (to "
                                                  f"{ALIAS_TOLERANCE:g} relative) on every example and metric of "
                                                  "this suite" for m, v in merged.items()))


def undefined_per_method(group: list[dict]) -> dict[str, int]:
    """Per method, the examples on which any metric of the table is undefined (counted once per example)."""
    out: dict[str, set] = {}
    for r in group:
        missing = out.setdefault(r["method"], set())
        missing.update(i for i, v in zip(r["example_ids"], r["values"]) if v is None)
    return {m: len(v) for m, v in out.items()}


def _undefined_note(evaluation, group: list[dict]) -> str:
    """Where values are undefined or sit at a clip bound, how many (per metric) and why, so n is read right."""
    out = []
    undefined_when, at_bound_when = evaluation.undefined_when, evaluation.at_bound_when
    for metric in dict.fromkeys(r["metric"] for r in group):
        rows = [r for r in group if r["metric"] == metric and r["method"] != FLOOR]
        values = [v for r in rows for v in r["values"] if v is not None]
        at_one = sum(v == 1.0 for v in values) / len(values) if values else 0.0
        if at_one >= 0.05 and max(values) <= 1.0:
            why = f" ({at_bound_when[metric]})" if metric in at_bound_when else ""
            out.append(f"{metric} is exactly 1 (its upper bound) on {at_one:.0%} of method × example cells{why}")
        everywhere = set.intersection(*[{i for i, v in zip(r["example_ids"], r["values"]) if v is None}
                                        for r in rows]) if rows else set()
        if everywhere:
            why = f" ({undefined_when[metric]})" if metric in undefined_when else ""
            count = f"{len(everywhere)} example" + ("s" if len(everywhere) > 1 else "")
            out.append(f"{metric} is undefined for every method on {count}{why}")
    return "".join(f"; {line}" for line in out)


def sign_test_note(rows: Iterable[dict], unit: str) -> str:
    """", the sign test on the 7 pairs tied on more than half their examples": the verdicts among ``rows`` (pairs or
    floor rows of statistics.json; ``unit`` "pair" or "method") that the sign test decided, where a text names
    Wilcoxon's; "" where none."""
    signs = sum(1 for row in rows if row.get("test") == "sign")
    if signs == 1:
        return f", the sign test on 1 {unit} tied on more than half its examples"
    return f", the sign test on the {signs} {unit}s tied on more than half their examples" if signs else ""


def _verdict_note(statistics: dict) -> str:
    verdict = statistics["verdict"]
    if verdict == "n too small to rank":
        return (f"n too small to rank: {statistics['k']} methods need n ≥ {statistics['minimum_n']} examples for any "
                f"pair to be separated, here at most {statistics['pair_n'][1] if statistics.get('pair_n') else 0}")
    if verdict in ("ranked", "no difference found"):
        low, high = statistics["pair_n"]
        n = f"n = {low}" if low == high else f"n = {low}–{high}"
        signs = sign_test_note(statistics.get("pairs", {}).values(), "pair")
        text = (f"{statistics['pairs_tested']} pairs of {statistics['k']} methods tested on their common examples "
                f"({n}; Wilcoxon signed-rank{signs}, Holm)")
        if verdict == "no difference found":
            text += ": no pair is separated"
        floor = statistics.get("floor_summary")
        if floor:
            text += f"; random floor: n = {floor['n']}"
        mean_rank = statistics.get("mean_rank") or {}
        if mean_rank.get("friedman_p") is not None:
            text += (f"; mean-rank view (depends on the pool; not the verdicts): Friedman p "
                     f"{_p_text(mean_rank['friedman_p'])} on the {statistics['n']} examples every method was "
                     "scored on")
        return text
    return verdict


def _p_text(p: float) -> str:
    """``= 0.003`` or ``< 1e-300``: a p-value after its symbol."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


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
        out += (f"; bounds from a beam on {beam['examples_with_beam_bounds']} examples (widths "
                f"{', '.join(map(str, beam['beam_widths'])) or '–'}, {beam['beam_not_converged']} not converged), "
                "exact on the rest; orderings that beat a beam bound widened it: "
                + (_per_metric(group, "beam_bounds_broken") or "none did"))
        passed = [r for r in group if r.get("exact_bounds_passed")]
        if passed:
            most = max(r["exact_bounds_excess"] for r in passed)
            why = ("by rounding" if most <= ROUNDING else "by more than rounding, which no ordering can")
            kept = ("kept, the score at the bound" if most <= ROUNDING else
                    "widened alike where past by more than rounding")
            out += (f"; exact bounds passed {why} (at most {most:.1e}), {kept}: "
                    + _per_metric(group, "exact_bounds_passed"))
    passed = next((r["skipped_same_contrast"] for r in group if r.get("skipped_same_contrast")), None)
    if passed:
        out += f"; passed over (a contrast of one token with itself): {', '.join(passed)}"
    left_out = next((r["left_out"] for r in group if r.get("left_out")), None)
    if left_out:
        out += "; " + left_out_note(left_out)
    if any(r.get("published") for r in group):
        out += "; published: " + ", ".join(dict.fromkeys(r["published"]["source"] for r in group if r.get("published")))
    return out


def left_out_note(left_out: dict) -> str:
    """The methods and evaluations a suite left out on its model, one clause per reason: "left out on this model:
    alti, globenc (it decomposes the layers, ...)"."""
    by_reason: dict[str, list[str]] = {}
    for kind in ("methods", "evaluations"):
        for name, reason in left_out.get(kind, {}).items():
            by_reason.setdefault(reason, []).append(name)
    return "left out on this model: " + "; ".join(f"{', '.join(names)} ({reason})" for reason, names in
                                                  by_reason.items())


def _per_metric(group: list[dict], field: str) -> str:
    """Each metric's methods with a nonzero count ``field`` (a count per example set, one per metric): "by
    naopc_comprehensiveness: a on 1, b on 3; by naopc_sufficiency: a on 2"; empty where none has one."""
    counted: dict[str, list[str]] = {}
    for r in group:
        if r.get(field):
            counted.setdefault(r["metric"], []).append(f"{r['method']} on {r[field]}")
    return "; ".join(f"by {metric}: {', '.join(methods)}" for metric, methods in counted.items())


def cost_table(evaluation, group: list[dict], same: Optional[list[list[str]]] = None) -> tuple[pd.DataFrame, str]:
    """Cost as median [interquartile range] per example and per token, with peak memory: not ranked. A sanity
    check's table shows one row per behaviour, as the ranked tables do (``same``: the suite's alias groups)."""
    merged = {g[0]: g[1:] for g in (same or []) if len(g) > 1} if evaluation.family == "sanity" else {}
    hidden = {m for others in merged.values() for m in others}
    rows = {}
    for r in group:
        if r["method"] in hidden:
            continue
        row = rows.setdefault(r["method"], {"method": alias_label(r["method"], {"aliases": merged}),
                                            "family": r.get("method_family", "")})
        row[f"{r['metric']} (median [IQR])"] = fmt_median(r["values"], 4 if "token" in r["metric"] else 3)
        row["n"] = r["n"]
        if r["metric"] == evaluation.primary_metric:
            row["_order"] = (median_iqr(r["values"]) or (float("inf"),))[0]
    frame = pd.DataFrame(rows.values()).sort_values("_order", kind="stable").drop(columns="_order")
    note = "cost is shown as median [interquartile range] over examples and not ranked" + _params_note(group)
    if merged:
        note += "; " + aliases_note(merged)
    return frame, note


def check_count(evaluation, values: list) -> tuple[int, int, bool]:
    """Of a check's 1/0 values (``Evaluation.check_share``): the examples that meet it, those checked, and whether
    the method × suite cell passes (at least ``check_share`` of them)."""
    checked = [v for v in values if v is not None]
    met = int(round(sum(checked)))
    return met, len(checked), bool(checked) and met >= evaluation.check_share * len(checked)


def check_table(evaluation, group: list[dict]) -> tuple[pd.DataFrame, str]:
    """A check of each method's own claim (``Evaluation.check_share``, e.g. its axiom): per method the fields the
    claim records (which identity, its tolerance), the examples that meet it of those checked, whether the cell
    passes, and the other metrics as median [IQR]; ordered by the share met, not ranked."""
    rows = {}
    for r in group:
        row = rows.setdefault(r["method"], {"method": r["method"], "family": r.get("method_family", "")})
        row.update({field: r.get(field, "") for field in evaluation.record_fields})
        if r["metric"] == evaluation.primary_metric:
            met, n, passes = check_count(evaluation, r["values"])
            share = met / n if n else 0.0
            row.update({"meets it": f"{met:,} of {n:,} ({share:.0%})", "cell": "passes" if passes else "fails",
                        "_order": -share})
        else:
            row[f"{r['metric']} (median [IQR])"] = fmt_median(r["values"])
    frame = pd.DataFrame(rows.values()).sort_values("_order", kind="stable").drop(columns="_order")
    return frame, (f"{evaluation.description}; a method × suite cell passes where at least "
                   f"{evaluation.check_share:.0%} of its examples meet it within the tolerance; not ranked"
                   + _params_note(group))


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


def suite_aliases(records: list[dict]) -> dict[tuple, list[list[str]]]:
    """Per suite, the methods that are one behaviour: the same values on every example of every ranked metric
    of the suite (``attrbench.ops.verdicts.aliases``)."""
    per_suite: dict[tuple, list[dict]] = {}
    for (model, dataset, eval_name), group in groups(records).items():
        evaluation = EVALS.get(eval_name)
        if not (evaluation.needs_methods and evaluation.ranked):
            continue
        reference = reference_of(group)
        for metric in dict.fromkeys(r["metric"] for r in group):
            per_suite.setdefault((model, dataset), []).append(aligned(group, metric, (reference, FLOOR)))
    return {suite: aliases(tables) for suite, tables in per_suite.items()}


def leaderboard_tables(records: list[dict], seed: int = 0) -> list[Table]:
    """One table per (model, dataset, evaluation), with its statistics."""
    costs = cost_lookup(records)
    same = suite_aliases(records)
    tables = []
    for (model, dataset, eval_name), group in groups(records).items():
        evaluation = EVALS.get(eval_name)
        if not evaluation.needs_methods:
            frame, note = analysis_table(evaluation, group)
            tables.append(Table(model, dataset, evaluation, group, frame, note))
        elif evaluation.check_share is not None:
            frame, note = check_table(evaluation, group)
            tables.append(Table(model, dataset, evaluation, group, frame, note))
        elif not evaluation.ranked:
            frame, note = cost_table(evaluation, group, same.get((model, dataset)))
            tables.append(Table(model, dataset, evaluation, group, frame, note))
        else:
            statistics = rank_table(evaluation, group, seed=seed, same=same.get((model, dataset)))
            frame, note = method_table(evaluation, group, {} if evaluation.cost_columns else costs, statistics)
            tables.append(Table(model, dataset, evaluation, group, frame, note, statistics))
    return tables


def placement(entry: dict) -> str:
    """Where a provisional method stands among a table's published methods, in words."""
    return (f"beats {len(entry['beats'])}, beaten by {len(entry['beaten_by'])}, not separated from "
            f"{len(entry['not_separated'])}")


def provisional_floor_cell(entry: dict) -> str:
    row = entry.get("floor")
    if row is None:
        return ""
    rate = "" if row["win_rate"] is None else f" ({row['win_rate']:.0%} wins, n = {row['n']})"
    return f"{row['verdict']}{rate}"


PROVISIONAL_NOTE = ("provisional: a method with fewer examples than the others, in no group until it has them, is "
                    "compared with each published method on their common examples and with the random floor on the "
                    "floor's examples it shares (the same paired test); these comparisons are a family of their own, "
                    "Holm over its {k} comparisons, and the published verdicts stand as they are; it is looked at "
                    "again as its n grows (repeated looks), so a provisional verdict may change")


def placements(table: Table, rows: list[dict], lagging: dict[str, tuple[int, int]]) -> dict[str, dict]:
    """The provisional entries of a ranked table: each method :func:`still_computing` held back with some examples
    (``rows``, its records in this table), placed by :func:`attrbench.ops.verdicts.provisional` on the primary
    metric against the table's published methods (aliases merged as the table merges them) and its floor."""
    stats = table.statistics
    if not stats or not stats.get("n_by_method"):
        return {}
    metric = stats["metric"]
    short = [m for m, (k, _) in lagging.items() if m != FLOOR and k > 0 and m != stats.get("reference")]
    values = aligned(table.group + [r for r in rows if r["method"] in short], metric, (stats.get("reference"),))
    published = {m: values[m] for m in stats["n_by_method"] if m in values}
    bounds = table.evaluation.bounds.get(metric)
    return {m: {**provisional(values[m], published, values.get(FLOOR), stats["higher_is_better"], bounds=bounds),
                "of": lagging[m][1]} for m in short if m in values and published}


def report_tables(records: list[dict], plan: Optional[list[dict]], seed: int = 0
                  ) -> tuple[list[Table], list[dict], dict[tuple, dict[str, tuple[int, int]]]]:
    """The tables a run's report shows (and ``load_run`` gives): those of the complete cells (:func:`still_computing`),
    each table's note saying what is still computing. Also the records they rank and what was held back. A ranked
    table's methods held back with some examples are placed provisionally (:func:`placements`): a row each, marked,
    and ``statistics["provisional"]``."""
    ranked, held = still_computing(records, plan)
    tables = leaderboard_tables(ranked, seed)
    costs = None
    for table in tables:
        if (key := (table.model, table.dataset, table.evaluation.name)) in held:
            rows = [r for r in records if (r["model"], r["dataset"], r["eval"]) == key and r["method"] in held[key]
                    and r["method"] != FLOOR]
            placed = placements(table, rows, held[key]) if table.statistics and table.evaluation.ranked else {}
            if placed:
                table.statistics["provisional"] = placed
                costs = cost_lookup(records) if costs is None else costs
                shown = [r for r in rows if r["method"] in placed]
                table.frame, _ = method_table(table.evaluation, table.group + shown,
                                              {} if table.evaluation.cost_columns else costs, table.statistics)
                table.note += "; " + PROVISIONAL_NOTE.format(k=next(iter(placed.values()))["comparisons"])
            table.note += "; " + computing_note(held[key])
    return tables, ranked, held


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
        values = by_example(t.group, metric, (t.statistics.get("reference"), FLOOR, "random", *aliased(t.statistics)))
        sign = 1.0 if t.statistics["higher_is_better"] else -1.0
        per_metric[f"{t.evaluation.name}.{metric}"] = (values, sign)
    names = list(per_metric)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (va, sa), (vb, sb) = per_metric[a], per_metric[b]
            common = [m for m in va if m in vb]
            ids = shared_examples(va, vb, common)
            oriented = {a: columns(va, common, ids, sa), b: columns(vb, common, ids, sb)}
            result = agreement_interval(oriented, a, b, resamples, seed)
            if result is None or result["tau"] is None:
                continue
            rows.append({"metric A": a, "metric B": b, "methods": result["methods"], "n": result["n"],
                         "Kendall tau [95% CI]": f"{result['tau']:.2f} [{result['ci'][0]:.2f}, {result['ci'][1]:.2f}]",
                         "_tau": result["tau"], "_ci": result["ci"]})
    if not rows:
        return None
    note = ("agreement of the method orders between two metrics (each oriented so that higher is better; the "
            "reference, the random floor and aliases left out): Kendall's tau of the methods' means, with a percentile "
            f"bootstrap interval over examples ({resamples} resamples); an interval that holds 0 shows no agreement")
    return pd.DataFrame(rows), note


def truth_tables(tables: list[Table]) -> dict[tuple, Table]:
    """Per suite, its ground-truth table (an evaluation of family "ground truth" with statistics), if it has one."""
    return {(t.model, t.dataset): t for t in tables
            if t.statistics is not None and t.evaluation.family == "ground truth"}


def validity_table(suite_tables: list[Table], truth: Table, resamples: int, seed: int = 0
                   ) -> Optional[tuple[pd.DataFrame, str]]:
    """Metric validity: per faithfulness metric of a suite with a known answer, Kendall's tau between the method
    order it gives and the ground truth's (the truth table's primary metric), with a bootstrap interval over the
    examples both scored: which metric agrees with the known answer. An example counts where the known answer and
    the metric are defined (for some method): the two orders are of means over the same examples. The metric that
    agrees best is set against each other one (:func:`agreement_lead`, Bonferroni over those comparisons), so that
    "agrees best" says whether the others are behind it or only below it."""
    known = truth.statistics["metric"]
    answer = by_example(truth.group, known, (truth.statistics.get("reference"), FLOOR, *aliased(truth.statistics)))
    rows, metric_values = [], {}
    for t in suite_tables:
        metrics = robustness_metrics(t.evaluation) or (t.statistics["metric"],)
        for metric in metrics:
            sign = 1.0 if t.evaluation.higher_is_better.get(metric, True) else -1.0
            values = by_example(t.group, metric, (t.statistics.get("reference"), FLOOR, *aliased(t.statistics)))
            methods = [m for m in answer if m in values]
            ids = shared_examples(answer, values, methods)
            if len(methods) < 3 or not ids:
                continue
            oriented = {"truth": columns(answer, methods, ids), "metric": columns(values, methods, ids, sign)}
            result = agreement_interval(oriented, "truth", "metric", resamples, seed)
            if result is None or result["tau"] is None:
                continue
            key = f"{t.evaluation.name}.{metric}"
            metric_values[key] = (values, sign)
            rows.append({"metric": metric_name(t.evaluation, metric) + (" (derived)" if t.evaluation.derived else ""),
                         "methods": result["methods"], "n": result["n"],
                         "Kendall tau with the known answer [95% CI]":
                             f"{result['tau']:.2f} [{result['ci'][0]:.2f}, {result['ci'][1]:.2f}]",
                         "_tau": result["tau"], "_ci": result["ci"], "_metric": key})
    if not rows:
        return None
    frame = pd.DataFrame(rows).sort_values("_tau", ascending=False, kind="stable").reset_index(drop=True)
    others = len(frame) - 1
    confidence = 1 - ALPHA / max(others, 1)
    level = f"{100 * confidence:.4g}%"
    leads, shown = [None], ["–"]
    best, best_sign = metric_values[frame.iloc[0]["_metric"]]
    for key in frame["_metric"][1:]:
        other, other_sign = metric_values[key]
        methods = [m for m in answer if m in best and m in other]
        ids = sorted(set(shared_examples(answer, best, methods)) & set(shared_examples(answer, other, methods)))
        matrix = [np.array(list(columns(values, methods, ids, sign).values()), dtype=np.float64)  # None -> NaN
                  for values, sign in ((answer, 1.0), (best, best_sign), (other, other_sign))]
        lead = agreement_lead(*matrix, resamples, seed, confidence) if ids else None
        leads.append(lead)
        shown.append("no interval" if lead is None or lead["ci"] is None else
                     f"{lead['lead']:.2f} [{lead['ci'][0]:.2f}, {lead['ci'][1]:.2f}]")
    frame[f"behind the best by [{level} CI]"] = shown
    frame["_lead"] = leads
    note = (f"metric validity: how well each faithfulness metric's method order agrees with the order by the known "
            f"answer ({metric_name(truth.evaluation, known)}): Kendall's tau of the methods' means (each metric "
            f"oriented so that higher is better; the random floor and aliases left out), with a percentile bootstrap "
            f"interval over the examples ({resamples} resamples); an interval that holds 0 shows no agreement")
    if others:
        note += (f"; behind the best: the first metric's tau minus this one's, on the examples both define, with a "
                 f"paired percentile bootstrap interval (scipy; {resamples} resamples) at {level}, Bonferroni over "
                 f"the {others} comparisons; an interval that holds 0: not separated from the best")
    return frame, note


def split_table(first: Table, other: Table, resamples: int, seed: int = 0, top: int = 5
                ) -> Optional[tuple[pd.DataFrame, str, dict]]:
    """One evaluation on two splits of a dataset (e.g. the published items and held-out ones): the method orders
    compared (Kendall's tau of the means, each split's examples resampled on its own), the pairs separated one way
    on one split and the other way on the other (Holm-corrected pairwise verdicts of each table), and the top
    ``top`` methods of ``first`` by mean with their means and groups on both. None without a shared verdict."""
    a, b = first.statistics, other.statistics
    if not a or not b or a["metric"] != b["metric"] or "order" not in a or "order" not in b:
        return None
    metric, sign = a["metric"], 1.0 if a["higher_is_better"] else -1.0
    values = [aligned(t.group, metric, (t.statistics.get("reference"), FLOOR, *aliased(t.statistics)))
              for t in (first, other)]
    oriented = [{m: [None if v is None else sign * v for v in vals] for m, vals in side.items()} for side in values]
    result = independent_agreement(*oriented, resamples, seed)
    if result is None or result["tau"] is None:
        return None
    winners = {frozenset(p["pair"]): p["better"] for p in b.get("pairs", {}).values() if p["separated"]}
    reversed_ = [p["pair"] for p in a.get("pairs", {}).values() if p["separated"] and
                 winners.get(frozenset(p["pair"])) not in (None, p["better"])]
    means = [{r["method"]: r for r in t.group if r["metric"] == metric} for t in (first, other)]
    shown = [m for m in a["order"] if m in means[1]][:top]
    here, there = short(first.dataset), short(other.dataset)
    rows = [{"method": m, here: fmt(means[0][m]), f"group ({here})": table_group(a, m),
             there: fmt(means[1][m]), f"group ({there})": table_group(b, m)} for m in shown]
    name = metric_name(first.evaluation, metric)
    noise = result.get("exchangeable")
    note = (f"{name} on two splits of {short(first.dataset.split(':')[0])}: the top {len(shown)} methods of "
            f"{short(first.dataset)} by mean, with their means and pairwise groups on both; Kendall's tau of all "
            f"{result['methods']} methods' means {result['tau']:.2f} [{result['ci'][0]:.2f}, {result['ci'][1]:.2f}] "
            f"(n = {result['n'][0]} and {result['n'][1]}; percentile bootstrap, each split's examples resampled on "
            f"their own, {resamples} resamples)" + ("" if noise is None else (
                f"; the pooled examples dealt at random into two such samples give tau {noise['range'][1]:.2f} "
                f"[{noise['range'][0]:.2f}, {noise['range'][2]:.2f}] (sampling noise alone), permutation p = "
                f"{format_p(noise['p'])} for a tau as low as the splits'")) +
            f"; pairs separated one way on one split and the other way on the other: "
            f"{', '.join(' vs '.join(p) for p in reversed_) or 'none'}")
    return pd.DataFrame(rows), note, {"metric": metric, "tau": result["tau"], "ci": result["ci"], "n": result["n"],
                                      "methods": result["methods"], "exchangeable": noise, "reversed": reversed_,
                                      "top": [a["top"], b["top"]], "verdicts": [a.get("verdict"), b.get("verdict")]}


def metric_name(evaluation, metric: str) -> str:
    """A metric as a reader names it ("NAOPC comprehensiveness"), as its evaluation declares it."""
    return (getattr(evaluation, "metric_names", None) or {}).get(metric, metric)


def robustness_metrics(evaluation) -> tuple[str, ...]:
    """The metrics of an evaluation that count as votes in a suite's robustness panel: declared by the evaluation;
    by default its primary metric, none for a derived one."""
    declared = getattr(evaluation, "robustness", None)
    if declared is not None:
        return tuple(declared)
    return () if evaluation.derived else ((evaluation.primary_metric,) if evaluation.primary_metric else ())


def _examples(n: float) -> str:
    """A number of examples as the power table shows it: beyond ``MAX_N`` (infinite), out of reach."""
    return f"> {MAX_N:,}" if n == math.inf else str(int(n))


def power_table(suite_tables: list[Table]) -> Optional[tuple[pd.DataFrame, str]]:
    """Per ranked table: the examples needed to separate adjacent methods at 80 % power (pilot: this run)."""
    rows = []
    for t in suite_tables:
        needed = t.statistics.get("required_n")
        if not needed:
            continue
        # a pair out of reach (n None, an effect) counts as infinitely many; identical ones (no effect) apart
        ns = [math.inf if p["n"] is None else p["n"] for p in needed if p["n"] is not None or p.get("effect")]
        never = sum(1 for p in needed if p["n"] is None and p.get("effect") == 0.0)
        top = needed[0]
        rows.append({"table": t.evaluation.name, "metric": t.statistics["metric"], "n now": t.statistics["n"],
                     "n for the top two": "never (identical)" if top["n"] is None and not top.get("effect")
                     else _examples(math.inf if top["n"] is None else top["n"]),
                     "median n over adjacent pairs": _examples(pd.Series(ns).median()) if ns else "–",
                     "pairs never separable (identical scores)": never})
    if not rows:
        return None
    note = ("examples a paired t-test needs to separate each pair of adjacent methods with 80 % power at alpha over "
            "the table's pairs (statsmodels TTestPower on this run's paired differences as the pilot)")
    return pd.DataFrame(rows), note
