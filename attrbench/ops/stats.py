"""Statistics every table and evaluation uses, in one place: summaries over examples, intervals, rankings
that claim only what the data can show, metric agreement, and sample sizes from power.

Undefined stays undefined: a statistic that does not exist for an input (Spearman of a constant
vector, a mean of nothing, a CI of one value) is ``None`` with the reason, never a made-up number.

The mean-rank view of methods scored on the same examples (Demšar 2006): average ranks per example,
Friedman's test, and Nemenyi's critical difference, which groups methods whose average ranks are
closer than it. It is kept for its diagram only: which pairs it joins depends on the other methods in
the pool (Benavoli et al. 2016), so the verdicts a report states are pairwise
(``attrbench.ops.verdicts``). Before any verdict, a table must have enough examples for any difference
to be shown at all: even a pair of methods that differ in the same direction on every example gets an
exact p of 2/2^n, which must pass the correction over the table's k(k−1)/2 pairs; below that n the
table says "n too small to rank".
"""
from __future__ import annotations

import functools
import hashlib
import math
import warnings
from typing import Optional, Sequence

import numpy as np
from scipy import stats as sst
from scipy.stats import rankdata, spearmanr

from .aggregate import visible_cells
from .reuse import reused
from ..errors import InputError

RANKS = ("scipy", "dense")
RESAMPLES = 2000  # bootstrap resamples of the metric-agreement intervals (a run config may set it)
MIN_RESAMPLES = 100
LEVEL = 0.95  # confidence level of every interval
ALPHA = 0.05  # family-wise error rate of the comparisons in one table


def summary(values: Sequence[Optional[float]]) -> dict:
    """mean, std and count of the defined values, and how many were undefined (None)."""
    defined = np.array([v for v in values if v is not None], dtype=np.float64)
    return {"mean": float(defined.mean()) if len(defined) else None,
            "std": float(defined.std()) if len(defined) else None,
            "n": int(len(defined)), "n_undefined": int(len(values) - len(defined))}


def spearman(a, b, rank: str = "scipy") -> Optional[float]:
    """Spearman's rho of two equally long vectors; None when undefined (fewer than 2 values, or a constant).

    ``rank="scipy"``: ``scipy.stats.spearmanr`` (average ranks, tie-corrected Pearson of ranks);
    ``"dense"``: dense ranks in ``1 - 6 Σd² / (n(n² - 1))`` with no tie correction, as the ALTI
    scripts (Ferrando et al. 2022) computed it.
    """
    if rank not in RANKS:
        raise InputError(f"rank convention '{rank}' is not known; use {' or '.join(RANKS)}")
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    if rank == "scipy":
        return float(spearmanr(a, b).statistic)
    n = len(a)
    d = rankdata(a, method="dense") - rankdata(b, method="dense")
    return float(1 - 6 * (d ** 2).sum() / (n * (n ** 2 - 1)))


def map_change(before: np.ndarray, after: np.ndarray, causal: bool) -> Optional[float]:
    """Contextualization change between two (n, n) maps (Kobayashi et al. 2024, §5.1): 1 − Spearman of
    their cells (the lower triangle in causal models); None when undefined (e.g. a one-token text)."""
    keep = visible_cells(before.shape[-1], causal)
    rho = spearman(before[keep], after[keep])
    return None if rho is None else 1 - rho


def mean_of_defined(values, axis: int) -> list[Optional[float]]:
    """Means along ``axis`` of a 2-D list with None for undefined entries; None where nothing is defined."""
    array = np.array(values, dtype=np.float64)  # None -> nan
    defined = ~np.isnan(array)
    counts = defined.sum(axis)
    sums = np.where(defined, array, 0.0).sum(axis)
    return [None if c == 0 else float(s / c) for s, c in zip(sums, counts)]


@functools.lru_cache(maxsize=None)
def t_quantiles(df: int) -> tuple[float, float]:
    """The standard t quantiles of a two-sided ``LEVEL`` interval (``scipy.stats.t.interval``'s): a report asks for
    thousands of intervals over a few sample sizes."""
    return sst.t.ppf((1.0 - LEVEL) / 2, df), sst.t.ppf((1.0 + LEVEL) / 2, df)


def interval(values: Sequence[Optional[float]], seed: int = 0, resamples: int = 0,
             bounds: Optional[Sequence[Optional[float]]] = None) -> dict:
    """95 % Student-t interval of the mean of the defined values: ``{"ci": [lo, hi], "ci_method": "t"}``.

    It keeps its coverage at the small samples a budgeted leaderboard has (tested at n = 10 and 60);
    ``ci`` is None with ``ci_note`` saying why when there is no interval (fewer than 2 defined values).
    All-equal values have the point interval [v, v]. ``bounds`` (low, high; None for no limit), the metric's
    possible range, clips the interval: the true mean lies in the range, so what is cut off never covered it
    and the coverage is the t-interval's (``ci_method`` "t, clipped"). (``seed`` and ``resamples`` are
    accepted for callers that pass them; a t-interval draws nothing.)
    """
    data = np.array([v for v in values if v is not None], dtype=np.float64)
    if len(data) < 2:
        return {"ci": None, "ci_note": f"CI needs n ≥ 2 (n = {len(data)})"}
    if np.ptp(data) == 0:
        return {"ci": [float(data[0])] * 2, "ci_method": "all values equal"}
    low_q, high_q = t_quantiles(len(data) - 1)  # scipy's t.interval, its arithmetic in its order, per-df ppf kept
    scale, loc = np.std(data, ddof=1) / np.sqrt(len(data)), data.mean()
    t_interval = (low_q * scale + loc, high_q * scale + loc)
    floor, ceiling = bounds or (None, None)
    low = t_interval[0] if floor is None else max(t_interval[0], floor)
    high = t_interval[1] if ceiling is None else min(t_interval[1], ceiling)
    return {"ci": [float(low), float(high)], "ci_method": "t" if (low, high) == tuple(t_interval) else "t, clipped"}


def with_intervals(records: Sequence[dict], seed: int = 0, resamples: int = 0,
                   bounds: Optional[dict[tuple[str, str], Sequence[Optional[float]]]] = None) -> list[dict]:
    """Records with the CI of their per-example ``values`` added (:func:`interval`), each clipped to its
    metric's range where ``bounds`` has one for the record's (evaluation, metric)."""
    bounds = bounds or {}
    return [{**r, **interval(r["values"], bounds=bounds.get((r.get("eval"), r.get("metric"))))} for r in records]


def median_iqr(values: Sequence[Optional[float]]) -> Optional[tuple[float, float, float]]:
    """(median, first quartile, third quartile) of the defined values; None when there are none."""
    data = np.array([v for v in values if v is not None], dtype=np.float64)
    if not len(data):
        return None
    q1, median, q3 = np.percentile(data, [25, 50, 75])
    return float(median), float(q1), float(q3)


def complete_cases(values: dict[str, Sequence[Optional[float]]]) -> tuple[list[str], np.ndarray]:
    """The methods and the (n, k) matrix of the examples on which every method has a value."""
    names = list(values)
    if not names:
        return names, np.zeros((0, 0))
    rows = [row for row in zip(*(values[m] for m in names)) if all(v is not None for v in row)]
    return names, np.array(rows, dtype=np.float64).reshape(len(rows), len(names))


def minimum_n(k: int, alpha: float = ALPHA) -> int:
    """The fewest examples on which any of k methods can be shown to differ: the exact two-sided sign/signed-rank
    p of a pair that differs the same way on all n examples is 2/2^n, which must be below alpha over the
    k(k-1)/2 pairs of a table (Bonferroni, the most any pair's correction asks)."""
    pairs = max(1, k * (k - 1) // 2)
    return max(1, math.floor(math.log2(2 * pairs / alpha)) + 1)


def minimum_floor_n(k: int, alpha: float = ALPHA) -> int:
    """The fewest examples on which one of k methods can be shown to differ from the random floor: the exact p of a
    method better on all n examples, 2/2^n, must pass Holm's first step over the k comparisons, alpha / k."""
    return max(1, math.floor(math.log2(2 * max(1, k) / alpha)) + 1)


def critical_difference(k: int, n: int, alpha: float = ALPHA) -> float:
    """Nemenyi's critical difference of average ranks (Demšar 2006, Eq. 5): q_alpha sqrt(k(k+1)/(6n)),
    q_alpha the studentised range quantile over sqrt(2)."""
    q = sst.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q * math.sqrt(k * (k + 1) / (6 * n)))


def rank_methods(values: dict[str, Sequence[Optional[float]]], higher_is_better: bool, alpha: float = ALPHA) -> dict:
    """Rank methods scored on the same examples (see the module docstring).

    Returns ``{"n", "k", "order", "average_rank", "friedman_p", "cd", "group", "verdict", "minimum_n",
    "nemenyi"}``: ``order`` best first by average rank (1 = best); ``group`` 1 for the methods not
    significantly worse than the best (Nemenyi, pairwise p from scikit-posthocs), 2 from the best left,
    and so on; ``verdict`` "ranked", "no difference found" (Friedman p ≥ alpha) or "n too small to rank".
    """
    import scikit_posthocs as sp  # heavy (pulls seaborn, statsmodels): only when a table is ranked

    names, matrix = complete_cases(values)
    n, k = matrix.shape
    out = {"n": n, "k": k, "minimum_n": minimum_n(k, alpha), "alpha": alpha}
    if k == 0 or n == 0:
        return {**out, "order": names, "average_rank": {}, "group": {}, "verdict": "no examples"}
    ranks = rankdata(-matrix if higher_is_better else matrix, axis=1)  # 1 = best on each example, ties averaged
    average = dict(zip(names, ranks.mean(0).tolist()))
    order = sorted(names, key=lambda m: (average[m], names.index(m)))
    out.update(order=order, average_rank=average)
    if k == 1:
        return {**out, "group": {names[0]: 1}, "verdict": "one method"}
    if n < out["minimum_n"]:
        return {**out, "group": {}, "verdict": "n too small to rank"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if k == 2:
            difference = matrix[:, 0] - matrix[:, 1]
            friedman = 1.0 if not difference.any() else float(sst.wilcoxon(difference).pvalue)
        else:
            friedman = float(sst.friedmanchisquare(*matrix.T).pvalue) if np.ptp(ranks, axis=1).any() else 1.0
    out.update(friedman_p=friedman, cd=critical_difference(k, n, alpha))
    if not friedman < alpha:
        return {**out, "group": dict.fromkeys(names, 1), "verdict": "no difference found"}
    nemenyi = sp.posthoc_nemenyi_friedman(matrix)
    p = {(names[i], names[j]): float(nemenyi.iloc[i, j]) for i in range(k) for j in range(k)}
    group, left, g = {}, list(order), 0
    while left:
        g += 1
        head = left[0]
        members = [m for m in left if m == head or p[(head, m)] >= alpha]
        for m in members:
            group[m] = g
        left = [m for m in left if m not in members]
    out.update(group=group, verdict="ranked", nemenyi={f"{a} vs {b}": v for (a, b), v in p.items() if a < b})
    return out


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scipy's ``kendalltau`` (tau-b, its default) of each row of ``x`` against the same row of ``y``, all rows at
    once: (concordant − discordant) / √(pairs untied in x) / √(pairs untied in y), clipped to [−1, 1]; NaN where
    either row is constant or holds a NaN. The same integer counts and arithmetic as scipy's (tested equal), for
    the thousands of bootstrap resamples an interval takes."""
    i, j = np.triu_indices(x.shape[1], 1)
    dx, dy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (dx * dy).sum(1) / np.sqrt(np.abs(dx).sum(1)) / np.sqrt(np.abs(dy).sum(1))
    return np.clip(tau, -1.0, 1.0)


def resampled_means(a: np.ndarray, rows: np.ndarray, chunk: int = 256_000) -> np.ndarray:
    """Per resample r, each method's mean of ``a`` (methods, examples; NaN undefined) over examples ``rows[r]``
    (drawn with replacement): (resamples, methods), NaN where a method is undefined on every drawn example; to the
    bit ``np.nanmean(a[:, rows], axis=2).T`` (the drawn values summed in the order drawn), for a fraction of its
    work: methods with the same values are gathered once, NaN is set to 0 once rather than per resample, and the
    defined values are counted from each example's multiplicity (integers: exact). ``chunk`` bounds the values
    gathered at once."""
    rows = np.asarray(rows, dtype=np.intp)
    n, resamples = a.shape[1], len(rows)
    defined = ~np.isnan(a)
    distinct, inverse = np.unique(np.concatenate([np.where(defined, a, 0.0), defined], axis=1), axis=0,
                                  return_inverse=True)
    values, counted = np.ascontiguousarray(distinct[:, :n]), distinct[:, n:]
    out = np.empty((resamples, len(distinct)))
    step = max(1, chunk // max(rows.shape[1] * len(distinct), 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, resamples, step):
            block = rows[start:start + step]
            offsets = block + n * np.arange(len(block))[:, None]
            times = np.bincount(offsets.ravel(), minlength=len(block) * n).reshape(len(block), n).astype(np.float64)
            out[start:start + step] = values[:, block].sum(axis=2).T / (times @ counted.T)  # nanmean's layout, its order
    return out[:, np.asarray(inverse).reshape(-1)]


def mean_taus(a: np.ndarray, rows_a: np.ndarray, b: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    """Per resample r, Kendall's tau-b between the methods' means of ``a`` over examples ``rows_a[r]`` and of ``b``
    over ``rows_b[r]`` (``a``, ``b``: (methods, examples), NaN undefined; a method undefined on every drawn
    example makes that tau NaN)."""
    return kendall_tau_b(_remembered_means(a, rows_a), _remembered_means(b, rows_b))


_MEANS: dict[tuple, np.ndarray] = {}
_MEANS_KEPT = 64  # (resamples, methods) arrays: a few MB


def _remembered_means(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """:func:`resampled_means`, looked up by content: a report draws the same resamples (one seed) of the same
    metric's values again and again (the known answer against every metric, the best metric against every other,
    each metric in every pair of the agreement table), and each draw is most of a bootstrap's cost."""
    a, rows = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(rows, dtype=np.intp)
    key = (a.shape, rows.shape, hashlib.blake2b(a.data, digest_size=16).digest(),
           hashlib.blake2b(rows.data, digest_size=16).digest())
    found = _MEANS.get(key)
    if found is None:
        found = resampled_means(a, rows)
        found.flags.writeable = False
        if len(_MEANS) >= _MEANS_KEPT:
            del _MEANS[next(iter(_MEANS))]  # the oldest
        _MEANS[key] = found
    return found


def agreement_draws(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, np.ndarray]:
    """Kendall's tau between the method orders of ``a`` and ``b`` (methods, examples) and its finite bootstrap
    draws, each from ``n`` examples drawn with replacement (the draws :func:`agreement_interval` reads its interval
    from; apart, so how they lean around the estimate can be read too)."""
    n = a.shape[1]
    point = float(mean_taus(a, np.arange(n)[None], b, np.arange(n)[None])[0])
    rng = np.random.default_rng(seed)
    rows = np.array([rng.integers(0, n, n) for _ in range(resamples)]).reshape(resamples, n)
    draws = mean_taus(a, rows, b, rows)
    return point, draws[np.isfinite(draws)]


@reused
def agreement_interval(per_example: dict[str, dict[str, Sequence[Optional[float]]]], metric_a: str, metric_b: str,
                       resamples: int = RESAMPLES, seed: int = 0) -> Optional[dict]:
    """Kendall's tau between the method rankings by two metrics (each oriented higher = better), with a
    percentile bootstrap interval over examples: resampled examples give each method's means again.
    ``per_example[metric][method]`` are values on the same examples; None when fewer than 3 methods."""
    methods = [m for m in per_example[metric_a] if m in per_example[metric_b]]
    if len(methods) < 3:
        return None
    a = np.array([per_example[metric_a][m] for m in methods], dtype=np.float64)  # (methods, n): None -> nan
    b = np.array([per_example[metric_b][m] for m in methods], dtype=np.float64)
    n = a.shape[1]
    point, draws = agreement_draws(a, b, resamples, seed)
    if not np.isfinite(point) or not len(draws):
        return {"tau": None, "ci": None, "methods": len(methods)}
    return {"tau": point, "ci": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
            "methods": len(methods), "n": n}


@reused
def agreement_lead(truth: np.ndarray, best: np.ndarray, other: np.ndarray, resamples: int = RESAMPLES,
                   seed: int = 0, confidence: float = 0.95) -> Optional[dict]:
    """By how much the method order of one metric (``best``) agrees more with a known answer (``truth``) than another
    metric's does: Kendall's tau of the methods' means with ``truth``, ``best``'s minus ``other``'s, over the
    examples both metrics define, with scipy's paired percentile bootstrap interval at ``confidence`` (both taus of
    a resample from the same examples; a Bonferroni level where one metric is set against several). Arrays:
    (methods, examples), the same methods and examples, oriented higher = better, NaN undefined. A lead whose
    interval holds 0 does not separate the two metrics. None where fewer than 3 methods or 2 examples."""
    keep = ~np.isnan(best).all(0) & ~np.isnan(other).all(0) & ~np.isnan(truth).all(0)
    truth, best, other = truth[:, keep], best[:, keep], other[:, keep]
    n = truth.shape[1]
    if truth.shape[0] < 3 or n < 2:
        return None

    def lead(rows, axis=-1):
        rows = np.atleast_2d(rows).astype(np.intp)
        return mean_taus(truth, rows, best, rows) - mean_taus(truth, rows, other, rows)

    point = float(lead(np.arange(n))[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate resample (a constant order): NaN, and then no interval
        drawn = sst.bootstrap((np.arange(n),), lead, n_resamples=resamples, vectorized=True, batch=256,
                              confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    low, high = (float(x) for x in drawn.confidence_interval)
    ci = [low, high] if np.isfinite(point) and np.isfinite(low) and np.isfinite(high) else None
    # how the verdict rests on the draws: the bound nearer 0 is the draws' quantile at the tail, whose own
    # Monte-Carlo band runs between their quantiles at the tail ± 3 binomial SDs; where that band holds 0, another
    # seed may give the other verdict. Also the share of draws at or beyond 0 (the side away from the point)
    dist = drawn.bootstrap_distribution
    dist = dist[np.isfinite(dist)]
    tail = (1 - confidence) / 2
    beyond, edge = None, False
    if len(dist) and np.isfinite(point) and point != 0:
        beyond = float(np.mean(dist <= 0) if point > 0 else np.mean(dist >= 0))
        spread = 3 * math.sqrt(tail * (1 - tail) / len(dist))
        levels = np.clip([tail - spread, tail + spread], 0, 1)
        band = np.quantile(dist, levels if point > 0 else 1 - levels[::-1])
        # separated: the bound strictly beyond 0; so the verdict can turn only where the band has values on both sides
        edge = bool(band[0] <= 0 < band[1]) if point > 0 else bool(band[0] < 0 <= band[1])
    return {"lead": point if np.isfinite(point) else None, "ci": ci, "n": n, "confidence": confidence,
            "separated": ci is not None and (ci[0] > 0 or ci[1] < 0), "beyond_zero": beyond, "tail": tail,
            "at_the_edge": bool(edge)}


@reused
def independent_agreement(a: dict[str, Sequence[Optional[float]]], b: dict[str, Sequence[Optional[float]]],
                          resamples: int = RESAMPLES, seed: int = 0) -> Optional[dict]:
    """Kendall's tau between the method orders of two independent samples of examples (two splits of a dataset):
    each method's mean in each sample, with a percentile bootstrap interval that resamples each sample's examples
    on its own. Sampling noise alone keeps tau below 1 even where both samples come from one population, so
    ``exchangeable`` gives what it leaves: tau between the pooled examples dealt at random into samples of the two
    sizes (2.5 / 50 / 97.5 percentiles) and the permutation p of a tau as low as the observed one (small: the two
    orders differ more than noise explains). ``a[method]``, ``b[method]``: values (None: undefined); None when
    fewer than 3 methods share both."""
    methods = [m for m in a if m in b]
    if len(methods) < 3:
        return None
    x = np.array([a[m] for m in methods], dtype=np.float64)  # (methods, n_a): None -> nan
    y = np.array([b[m] for m in methods], dtype=np.float64)
    x, y = x[:, ~np.isnan(x).all(0)], y[:, ~np.isnan(y).all(0)]  # an example undefined for every method is none

    na, nb = x.shape[1], y.shape[1]
    point = float(mean_taus(x, np.arange(na)[None], y, np.arange(nb)[None])[0])
    rng = np.random.default_rng(seed)
    drawn = [(rng.integers(0, na, na), rng.integers(0, nb, nb)) for _ in range(resamples)]
    draws = mean_taus(x, np.array([r for r, _ in drawn]).reshape(resamples, na), y,
                      np.array([r for _, r in drawn]).reshape(resamples, nb))
    draws = draws[np.isfinite(draws)]
    # what sampling noise alone gives: the examples of both pooled and dealt again into samples of the same sizes
    pooled = np.concatenate([x, y], axis=1)
    split = np.array([rng.permutation(na + nb) for _ in range(resamples)]).reshape(resamples, na + nb)
    null = mean_taus(pooled, split[:, :na], pooled, split[:, na:])
    null = null[np.isfinite(null)]
    if not np.isfinite(point) or not len(draws):
        return {"tau": None, "ci": None, "methods": len(methods), "n": [na, nb]}
    return {"tau": point, "ci": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
            "methods": len(methods), "n": [na, nb],
            "exchangeable": None if not len(null) else {
                "range": [float(np.percentile(null, q)) for q in (2.5, 50, 97.5)],
                "p": float((1 + np.sum(null <= point)) / (1 + len(null)))}}


MAX_N = 10 ** 9  # examples beyond which a pair is reported as out of reach ("> 1,000,000,000")


def required_n(values: dict[str, Sequence[Optional[float]]], order: Sequence[str], alpha: float = ALPHA,
               power: float = 0.8) -> list[dict]:
    """For each pair of adjacent methods, the examples a paired t-test needs to tell them apart with ``power``
    at alpha over the table's pairs (Bonferroni): the smallest n at which statsmodels' TTestPower reaches it on
    the pilot's effect (its ``solve_power`` is not used: the noncentral t's nan tails lead its root finder to
    roots where the power is 0.09 or 0.78). ``n`` None where the pilot shows no difference at all (identical
    scores can never be separated: ``effect`` 0) or more than ``MAX_N`` examples would be needed."""
    k = len(order)
    level = alpha / max(1, k * (k - 1) // 2)
    out = []
    for a, b in zip(order, order[1:]):
        d = np.array([x - y for x, y in zip(values[a], values[b]) if x is not None and y is not None])
        if len(d) < 3 or d.std(ddof=1) == 0 or d.mean() == 0:
            out.append({"pair": [a, b], "n": None, "effect": 0.0 if len(d) and not d.any() else None})
            continue
        effect = float(abs(d.mean()) / d.std(ddof=1))
        out.append({"pair": [a, b], "n": _needed(effect, level, power), "effect": effect})
    return out


@reused
def _needed(effect: float, level: float, power: float) -> Optional[int]:
    """:func:`_smallest_n` of statsmodels' paired t-test (``TTestPower``)."""
    from statsmodels.stats.power import TTestPower  # heavy: only for the sample-size estimate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _smallest_n(TTestPower(), effect, level, power)


def _smallest_n(test, effect: float, level: float, power: float) -> Optional[int]:
    """The smallest n at which ``test`` (two-sided, ``effect`` > 0) reaches ``power``: doubling, then bisection
    (power grows with n); None beyond ``MAX_N``. scipy's noncentral t returns nan for some far lower tails (1e-16
    where it does not), so there the power is the upper tail alone, the one-sided test at ``level`` / 2.

    The power is evaluated for many n at once (it is elementwise): every doubling in one call, and the bisection
    a few levels of its tree at a time, walked as the one-at-a-time search walks it, so that the answer is the
    same n; a table asks this for each of its adjacent pairs, and one call costs about what one n did."""
    def reached(ns: Sequence[int]) -> np.ndarray:
        ns = np.asarray(ns, dtype=np.int64)
        value = np.atleast_1d(np.asarray(test.power(effect, ns, level), dtype=np.float64))
        lost = ~np.isfinite(value)
        if lost.any():
            value[lost] = test.power(effect, ns[lost], level / 2, alternative="larger")
        return value >= power

    highs = [2 ** k for k in range(1, MAX_N.bit_length() + 1)]  # 2, 4, ... up to the first beyond MAX_N
    first = np.flatnonzero(reached(highs))
    if not len(first):
        return None
    high = highs[first[0]]
    low = high // 2 if first[0] else 1

    def middles(low: int, high: int, depth: int) -> list[int]:  # the next ``depth`` levels of the bisection tree
        if depth == 0 or high - low <= 1:
            return []
        middle = (low + high) // 2
        return [middle, *middles(low, middle, depth - 1), *middles(middle, high, depth - 1)]

    while high - low > 1:
        ahead = middles(low, high, 5)
        known = dict(zip(ahead, reached(ahead)))
        while high - low > 1 and (middle := (low + high) // 2) in known:
            low, high = (low, middle) if known[middle] else (middle, high)
    return high
