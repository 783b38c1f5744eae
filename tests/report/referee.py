"""An independent referee: recomputes a report's verdicts from the stored rows with scipy and statsmodels alone
(nothing from attrbench.ops), and reads the findings back out of the report's sentences to compare."""
from __future__ import annotations

import gc
import re
import warnings
from functools import lru_cache
from itertools import combinations

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

FLOOR = "random_floor"


def complete(records: list[dict]) -> list[dict]:
    """The records a report may judge: of each table (model, dataset, evaluation) the methods with rows on as many
    examples as its most complete method, and the floor with rows on as many or on all it is planned on (a config's
    ``floor_n``: its own planned n); the floor is not a method, and there is no floor where no method has rows.
    Left out in a suite: a method behind in a table whose others reached its planned n, wherever it has no more
    examples than there."""
    rows: dict[tuple, dict[str, int]] = {}
    planned: dict[tuple, int] = {}
    for r in records:
        if "example_ids" in r:
            key = (r["model"], r["dataset"], r["eval"])
            rows.setdefault(key, {})[r["method"]] = len(r["example_ids"])
            planned[key] = max(planned.get(key, 0), r.get("planned_n") or 0)
    late: dict[tuple, dict[str, int]] = {}
    for key, counts in rows.items():
        best = max((n for m, n in counts.items() if m != FLOOR), default=0)
        if best and best >= planned[key]:
            for m, n in counts.items():
                if m != FLOOR and n < best:
                    late.setdefault(key[:2], {})[m] = max(n, late.get(key[:2], {}).get(m, 0))
    out = []
    for r in records:
        key = (r["model"], r["dataset"], r["eval"])
        if "example_ids" in r:
            skip = {m for m, n in late.get(key[:2], {}).items() if rows[key].get(m, 0) <= n}
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


def test_pair(x: dict, y: dict, higher: bool) -> tuple[float, int, int, bool]:
    """(p, direction, n, sign): Wilcoxon on the nonzero differences, the sign test where over half are ties (``sign``:
    the sign test's verdict, a pair tied on every example included)."""
    ids = [i for i in x if i in y]
    d = np.array([x[i] - y[i] for i in ids]) * (1 if higher else -1)
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    sign = bool(len(d)) and (len(d) - wins - losses) / len(d) > 0.5
    if not wins + losses:
        return 1.0, 0, len(d), sign
    if sign:
        return stats.binomtest(wins, wins + losses).pvalue, int(np.sign(wins - losses)), len(d), sign
    nonzero = d[d != 0]
    ranks = stats.rankdata(np.abs(nonzero))
    direction = int(np.sign(ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()))
    return signed_rank_p(tuple(sorted(ranks * np.sign(nonzero)))), direction, len(d), sign


@lru_cache(maxsize=None)
def signed_rank_p(signed_ranks: tuple) -> float:
    """scipy's Wilcoxon p, which depends on the differences through their signed ranks alone: computed once per
    pattern (small samples with ties take scipy's permutation path, a tenth of a second each)."""
    return float(stats.wilcoxon(np.array(signed_ranks)).pvalue)


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
    holm = holm_adjusted([p for p, *_ in tested], alpha) if pairs else []
    beaten, separated = {m: set() for m in names}, {}
    for (a, b), (_, direction, *_), p in zip(pairs, tested, holm):
        winner = (a if direction > 0 else b) if p < alpha and direction else None
        separated[frozenset((a, b))] = winner
        if winner:
            beaten[b if winner == a else a].add(winner)
    out = {"top": {m for m in names if not beaten[m]}, "separated": separated, "beats": {
        m: sum(1 for w in separated.values() if w == m) for m in names},
        "p_holm": {frozenset(pair): p for pair, p in zip(pairs, holm)},
        "pair_n": [n for _, _, n, _ in tested], "sign_pairs": sum(sign for *_, sign in tested)}
    if floor is not None:
        against = [test_pair(values[m], floor, higher) for m in names]
        adjusted = holm_adjusted([p for p, *_ in against], alpha)
        out["floor"] = {m: "not separated" if p >= alpha or not direction else "better" if direction > 0 else "worse"
                        for m, (_, direction, *_), p in zip(names, against, adjusted)}
        out["floor_p_holm"] = dict(zip(names, adjusted))
        out["floor_n"] = {m: n for m, (_, _, n, _) in zip(names, against)}
        out["floor_win_rate"] = {m: win_rate(values[m], floor, higher) for m in names}
        out["floor_sign"] = sum(sign for *_, sign in against)
    return out


def win_rate(x: dict, y: dict, higher: bool) -> float | None:
    """The share of the examples with a difference on which ``x`` is the better."""
    d = np.array([x[i] - y[i] for i in x if i in y]) * (1 if higher else -1)
    decided = int((d != 0).sum())
    return float((d > 0).sum() / decided) if decided else None


def means(values: dict[str, dict], higher: bool = True) -> dict[str, float]:
    """Each method's mean over its defined values, oriented so that higher is better."""
    return {m: (1 if higher else -1) * float(np.mean(list(v.values()))) for m, v in values.items() if v}


def fewest_examples(comparisons: int, alpha: float = 0.05) -> int:
    """The fewest examples on which a difference can pass the strictest of ``comparisons`` Holm steps at all: a
    pair that differs the same way on every one of n examples has the exact two-sided p 2/2^n."""
    n = 1
    while 2 / 2 ** n >= alpha / max(1, comparisons):
        n += 1
    return n


def kendall_of_means(a: dict[str, dict], b: dict[str, dict], ids_a=None, ids_b=None) -> float:
    """scipy's Kendall tau-b between the methods' means by two metrics (each {method: {example: value}}, oriented
    higher = better), each mean over the examples given (default: all the method has)."""
    methods = [m for m in a if m in b]
    mean = lambda v, ids: np.nanmean([v.get(i, np.nan) for i in (v if ids is None else ids)])  # noqa: E731
    return float(stats.kendalltau([mean(a[m], ids_a) for m in methods],
                                  [mean(b[m], ids_b) for m in methods]).statistic)


def _tau_b(mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row of ``mx`` against the same row of ``my`` (resamples × methods): concordant minus
    discordant pairs over the untied pairs' geometric mean, as scipy's default; NaN for a constant or NaN row."""
    i, j = np.triu_indices(mx.shape[1], 1)
    sx, sy = np.sign(mx[:, i] - mx[:, j]), np.sign(my[:, i] - my[:, j])
    with np.errstate(all="ignore"):
        return (sx * sy).sum(1) / np.sqrt(np.abs(sx).sum(1) * np.abs(sy).sum(1))


def bootstrap_tau(a: dict[str, dict], b: dict[str, dict], ids_a: list, ids_b: list | None = None,
                  resamples: int = 2000, seed: int = 12345) -> tuple[float, float]:
    """A 95 % percentile bootstrap interval of :func:`kendall_of_means`: ``ids_a`` resampled (and ``ids_b`` on its
    own, where the two metrics are on different examples; None: the same draw). Tau-b of every resample at once
    (concordant minus discordant pairs over the untied pairs' geometric mean, as scipy's default)."""
    rng = np.random.default_rng(seed)
    methods = [m for m in a if m in b]
    matrix = lambda v, ids: np.array([[v[m].get(i, np.nan) for i in ids] for m in methods], dtype=float)  # noqa: E731
    x = matrix(a, ids_a)
    y = matrix(b, ids_a if ids_b is None else ids_b)
    rows_a = rng.integers(0, x.shape[1], (resamples, x.shape[1]))
    rows_b = rows_a if ids_b is None else rng.integers(0, y.shape[1], (resamples, y.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a method undefined on every drawn example: its mean NaN, that tau NaN
        mx = np.stack([np.nanmean(x[:, r], 1) for r in rows_a])  # (resamples, methods)
        my = np.stack([np.nanmean(y[:, r], 1) for r in rows_b])
    taus = _tau_b(mx, my)
    taus = taus[np.isfinite(taus)]
    return float(np.percentile(taus, 2.5)), float(np.percentile(taus, 97.5))


@lru_cache(maxsize=32)
def _cached_draws(key: tuple, resamples: int, seed: int) -> np.ndarray:
    known, a, b, ids = (dict(x) if i < 3 else list(x) for i, x in enumerate(key))
    known, a, b = ({m: dict(v) for m, v in d.items()} for d in (known, a, b))
    rng = np.random.default_rng(seed)
    methods = [m for m in known if m in a and m in b]
    matrix = lambda v: np.array([[v[m].get(i, np.nan) for i in ids] for m in methods], dtype=float)  # noqa: E731
    x, y, z = matrix(known), matrix(a), matrix(b)
    draws = rng.integers(0, len(ids), (resamples, len(ids)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a method undefined on every drawn example: its mean NaN, that tau NaN
        mx, my, mz = (np.stack([np.nanmean(v[:, r], 1) for r in draws]) for v in (x, y, z))
    leads = _tau_b(mx, my) - _tau_b(mx, mz)
    return leads[np.isfinite(leads)]


def lead_draws(known: dict[str, dict], a: dict[str, dict], b: dict[str, dict], ids: list, resamples: int = 20000,
               seed: int = 12345) -> np.ndarray:
    """``resamples`` bootstrap draws of :func:`kendall_of_means` (``known``, ``a``) minus the same of (``known``,
    ``b``), the examples ``ids`` resampled once for both (drawn once per argument set)."""
    freeze = lambda d: tuple((m, tuple(sorted(v.items()))) for m, v in d.items())  # noqa: E731
    return _cached_draws((freeze(known), freeze(a), freeze(b), tuple(ids)), resamples, seed)


def bootstrap_lead(known: dict[str, dict], a: dict[str, dict], b: dict[str, dict], ids: list, confidence: float,
                   against: int, resamples: int = 20000, seed: int = 12345) -> tuple[tuple[float, float], ...]:
    """For a percentile bootstrap interval at ``confidence`` of :func:`kendall_of_means` (``known``, ``a``) minus the
    same of (``known``, ``b``), the examples ``ids`` resampled once for both, computed elsewhere from ``against``
    resamples: the band each of its two bounds falls in by Monte-Carlo noise alone. A percentile of ``against`` draws
    has a Binomial(``against``, tail) count of draws beyond it, so the band runs between this (larger) sample's
    quantiles at that count ± 3 standard deviations; at a Bonferroni level over few examples the tails hold a handful
    of lumpy draws, and a fixed tolerance is either loose or wrong."""
    leads = lead_draws(known, a, b, ids, resamples, seed)
    tail = (1 - confidence) / 2
    spread = 3 * np.sqrt(against * tail * (1 - tail)) / against
    levels = np.clip([tail - spread, tail + spread], 0, 1)
    return tuple(tuple(float(x) for x in np.quantile(leads, at)) for at in (levels, 1 - levels[::-1]))


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
