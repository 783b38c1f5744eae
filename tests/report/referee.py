"""An independent referee: recomputes a report's verdicts from the stored rows with scipy and statsmodels alone
(nothing from attrbench.ops), and reads the findings back out of the report's sentences to compare."""
from __future__ import annotations

import gc
import re
from itertools import combinations

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

FLOOR = "random_floor"


def complete(records: list[dict]) -> list[dict]:
    """The records a report may judge: of each table (model, dataset, evaluation) the methods with rows on as many
    examples as its most complete method, and the floor with rows on as many or on all it is planned on (a config's
    ``floor_n``: its own planned n); the floor is not a method, and there is no floor where no method has rows.
    Left out everywhere in a suite: a method that is behind in a table whose others reached its planned n."""
    rows: dict[tuple, dict[str, int]] = {}
    planned: dict[tuple, int] = {}
    for r in records:
        if "example_ids" in r:
            key = (r["model"], r["dataset"], r["eval"])
            rows.setdefault(key, {})[r["method"]] = len(r["example_ids"])
            planned[key] = max(planned.get(key, 0), r.get("planned_n") or 0)
    late: dict[tuple, set] = {}
    for key, counts in rows.items():
        best = max((n for m, n in counts.items() if m != FLOOR), default=0)
        if best and best >= planned[key]:
            late.setdefault(key[:2], set()).update(m for m, n in counts.items() if m != FLOOR and n < best)
    out = []
    for r in records:
        key = (r["model"], r["dataset"], r["eval"])
        if "example_ids" in r:
            skip = late.get(key[:2], set())
            best = max((n for m, n in rows[key].items() if m != FLOOR and m not in skip), default=0)
            need = min(best, r.get("planned_n") or best) if r["method"] == FLOOR else best
            if r["method"] in skip or not best or len(r["example_ids"]) < need:
                continue
        out.append(r)
    return out


def table_values(records: list[dict], model: str, dataset: str, metric: str, leave_out=()) -> dict[str, dict]:
    """Per method, {example id: value} of one metric of one suite (undefined values left out)."""
    out = {}
    for r in records:
        if (r["model"], r["dataset"], r["metric"]) == (model, dataset, metric) and r["method"] not in leave_out:
            out[r["method"]] = {i: v for i, v in zip(r["example_ids"], r["values"]) if v is not None}
    return out


def test_pair(x: dict, y: dict, higher: bool) -> tuple[float, int, int]:
    """(p, direction, n): Wilcoxon on the nonzero differences, the sign test where over half are ties."""
    ids = [i for i in x if i in y]
    d = np.array([x[i] - y[i] for i in ids]) * (1 if higher else -1)
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    if not wins + losses:
        return 1.0, 0, len(d)
    if (len(d) - wins - losses) / len(d) > 0.5:
        return stats.binomtest(wins, wins + losses).pvalue, int(np.sign(wins - losses)), len(d)
    nonzero = d[d != 0]
    ranks = stats.rankdata(np.abs(nonzero))
    direction = int(np.sign(ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()))
    return stats.wilcoxon(nonzero).pvalue, direction, len(d)


def holm_adjusted(pvalues: list[float], alpha: float) -> list[float]:
    """statsmodels' Holm, without the full garbage collection it runs on every call (statsmodels PR #8671)."""
    gc.freeze()
    try:
        return list(multipletests(pvalues, alpha=alpha, method="holm")[1])
    finally:
        gc.unfreeze()


def verdicts(values: dict[str, dict], higher: bool, floor: dict | None = None, alpha: float = 0.05) -> dict:
    """The referee's top group (no method beats it pair by pair), separated pairs and floor verdicts."""
    names = list(values)
    pairs = list(combinations(names, 2))
    tested = [test_pair(values[a], values[b], higher) for a, b in pairs]
    holm = holm_adjusted([p for p, _, _ in tested], alpha) if pairs else []
    beaten, separated = {m: set() for m in names}, {}
    for (a, b), (_, direction, _), p in zip(pairs, tested, holm):
        winner = (a if direction > 0 else b) if p < alpha and direction else None
        separated[frozenset((a, b))] = winner
        if winner:
            beaten[b if winner == a else a].add(winner)
    out = {"top": {m for m in names if not beaten[m]}, "separated": separated, "beats": {
        m: sum(1 for w in separated.values() if w == m) for m in names}}
    if floor is not None:
        against = [test_pair(values[m], floor, higher) for m in names]
        adjusted = holm_adjusted([p for p, _, _ in against], alpha)
        out["floor"] = {m: "not separated" if p >= alpha or not direction else "better" if direction > 0 else "worse"
                        for m, (_, direction, _), p in zip(names, against, adjusted)}
    return out


def aliases(records: list[dict], model: str, dataset: str, tolerance: float = 1e-6) -> dict[str, str]:
    """Methods whose values equal another's on every example of every metric of the suite's ranked evaluations:
    alias -> the method kept (the first seen)."""
    suite = [r for r in records if (r["model"], r["dataset"]) == (model, dataset) and r["eval"] != "timing"
             and r["method"] not in (FLOOR, "-") and "values" in r and r.get("higher_is_better") is not None]
    by_method: dict[str, dict] = {}
    for r in suite:
        by_method.setdefault(r["method"], {})[(r["eval"], r["metric"])] = dict(zip(r["example_ids"], r["values"]))
    names, out = list(by_method), {}
    for a, b in combinations(names, 2):
        if a in out or b in out or by_method[a].keys() != by_method[b].keys():
            continue
        same = all(x.keys() == by_method[b][k].keys() and all(
            (u is None) == (by_method[b][k][i] is None) and (u is None or abs(u - by_method[b][k][i]) <= tolerance *
                                                             max(1.0, abs(u), abs(by_method[b][k][i])))
            for i, u in x.items()) for k, x in by_method[a].items())
        if same:
            out[b] = a
    return out


def headline_sentences(findings: list[str], suite: str) -> dict:
    """What the findings claim about a suite's headline metric: its top group, the floor counts and lists."""
    claims: dict = {}
    for line in findings:
        if not line.startswith(suite + ":"):
            continue
        lone = re.search(r"\), (\S+) alone is in the top group: no method beats it, and it beats (each of the other "
                         r"(\d+)|(\d+) of the other (\d+))", line)
        if lone:
            claims["top"] = {lone[1]}
            claims["beats"] = int(lone[3] or lone[4])
        group = re.search(r"the top group, which no method beats pair by pair, is (.+?) \(Wilcoxon", line)
        if group:
            claims["top"] = set(group[1].split(", "))
        better = re.search(r"(\d+) of (\d+) methods (?:is|are) better(?: \(([^)]*)\))?", line)
        if better:
            claims["floor_better"] = int(better[1])
            if better[3]:
                claims["floor_better_named"] = set(better[3].split(", "))
            level = re.search(r"not separated from it: (.+?)(?:; worse than it|\.$)", line)
            worse = re.search(r"worse than it: (.+?)\.$", line)
            claims["floor_level"] = {re.sub(r" \(.*", "", m) for m in re.split(r", (?![^()]*\))", level[1])} \
                if level else set()
            claims["floor_worse"] = {re.sub(r" \(.*", "", m) for m in re.split(r", (?![^()]*\))", worse[1])} \
                if worse else set()
    return claims


def robustness_sentence(findings: list[str], suite: str) -> dict | None:
    """What a suite's robustness sentence claims: the metrics whose top group shares a method with the headline's,
    the others with the top group each names (empty: "no method is separated"), and those short of a verdict."""
    for line in findings:
        found = re.match(re.escape(suite) + r": the top group by (.+?) shares a method with the top group of (\d+) of "
                         r"(\d+) faithfulness metrics with a verdict \((.*?)\)(?:; the others disagree: (.+?))?"
                         r"(?:; too few examples for a verdict by (.+?))?\.$", line)
        if not found:
            continue
        others = {}
        for part in (found[5] or "").split("; by "):
            if not part:
                continue
            part = part.removeprefix("by ")
            named = re.match(r"(.+?) the top group is (.+)$", part) or re.match(r"(.+?) no method is separated", part)
            others[named[1]] = set(named[2].split(", ")) if named.lastindex == 2 else set()
        short = {re.sub(r" \(n = .*", "", m) for m in re.split(r", (?![^()]*\))", found[6])} if found[6] else set()
        return {"agree": set(found[4].split(", ")) if found[4] else set(), "counts": (int(found[2]), int(found[3])),
                "others": others, "short": short}
    return None
