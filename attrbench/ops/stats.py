"""Statistics every table and evaluation uses, in one place: summaries over examples, confidence
intervals, paired tests and tiers, Spearman.

Undefined stays undefined: a statistic that does not exist for an input (Spearman of a constant
vector, a mean of nothing, a CI of one value) is ``None`` with the reason, never a made-up number.
"""
from __future__ import annotations

import itertools
import warnings
from typing import Optional, Sequence

import numpy as np
from scipy.stats import bootstrap, rankdata, spearmanr, wilcoxon

from ..decompose.layout import visible_cells
from ..errors import InputError

RANKS = ("scipy", "dense")
RESAMPLES = 9999  # bootstrap resamples (a run config may raise it; at least MIN_RESAMPLES)
MIN_RESAMPLES = 100
LEVEL = 0.95  # confidence level of every interval
ALPHA = 0.05  # family-wise error rate of the paired tests in one table (Holm)


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


def interval(values: Sequence[Optional[float]], seed: int = 0, resamples: int = RESAMPLES) -> dict:
    """95 % CI of the mean of the defined values: ``scipy.stats.bootstrap``, BCa, seeded.

    ``{"ci": [lo, hi], "ci_method": "BCa"}``; ``ci`` is None with ``ci_note`` saying why when there is
    no interval (fewer than 2 defined values). All-equal values have the point interval [v, v].
    Where BCa cannot be computed (its acceleration is undefined for some two- and three-value
    samples) the percentile interval is given and named.
    """
    data = np.array([v for v in values if v is not None], dtype=np.float64)
    if len(data) < 2:
        return {"ci": None, "ci_note": f"CI needs n ≥ 2 (n = {len(data)})"}
    if np.ptp(data) == 0:
        return {"ci": [float(data[0])] * 2, "ci_method": "all values equal"}
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's degenerate-data warning: we fall back and say so
            result = bootstrap((data,), np.mean, n_resamples=resamples, confidence_level=LEVEL, method=method,
                               rng=np.random.default_rng(seed))
        low, high = result.confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return {"ci": [float(low), float(high)], "ci_method": method}
    return {"ci": None, "ci_note": "bootstrap CI undefined"}


def with_intervals(records: Sequence[dict], seed: int = 0, resamples: int = RESAMPLES) -> list[dict]:
    """Records with the CI of their per-example ``values`` added (:func:`interval`)."""
    return [{**r, **interval(r["values"], seed, resamples)} for r in records]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control; not in scipy)."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order])
    out = np.empty_like(p)
    out[order] = np.minimum(adjusted, 1.0)
    return out.tolist()


def paired_p(a: Sequence[Optional[float]], b: Sequence[Optional[float]]) -> Optional[float]:
    """Two-sided Wilcoxon signed-rank p-value on the examples where both values are defined."""
    pairs = np.array([(x, y) for x, y in zip(a, b) if x is not None and y is not None], dtype=np.float64)
    if len(pairs) < 2:
        return None
    differences = pairs[:, 0] - pairs[:, 1]
    if not differences.any():
        return 1.0  # identical on every example: no evidence of a difference
    return float(wilcoxon(differences).pvalue)


def tiers(values: dict[str, Sequence[Optional[float]]], higher_is_better: bool, alpha: float = ALPHA) -> dict:
    """Significance tiers of methods scored on the same examples.

    Every pair is compared by a paired Wilcoxon signed-rank test, Holm-corrected over the table.
    Methods are taken in order of their mean; tier 1 is the best method and every method not
    significantly worse than it, tier 2 starts at the best method left, and so on. Returns
    ``{"tier": {method: k}, "p_values": {"a vs b": holm-adjusted p}, "raw_p_values": ..., "test": ...}``;
    a method with no defined value gets no tier.
    """
    means = {m: np.mean([v for v in vs if v is not None]) for m, vs in values.items() if any(v is not None for v in vs)}
    pairs = list(itertools.combinations(sorted(means), 2))
    raw = {pair: paired_p(values[pair[0]], values[pair[1]]) for pair in pairs}
    tested = [pair for pair in pairs if raw[pair] is not None]
    adjusted = dict(zip(tested, holm([raw[pair] for pair in tested])))
    different = {pair for pair, p in adjusted.items() if p < alpha}
    order = sorted(means, key=lambda m: -means[m] if higher_is_better else means[m])
    tier, left, k = {}, list(order), 0
    while left:
        k += 1
        head = left[0]
        members = [m for m in left if tuple(sorted((head, m))) not in different]
        for m in members:
            tier[m] = k
        left = [m for m in left if m not in members]
    return {"tier": tier, "p_values": {f"{a} vs {b}": adjusted.get((a, b)) for a, b in pairs},
            "raw_p_values": {f"{a} vs {b}": raw[(a, b)] for a, b in pairs},
            "test": f"paired Wilcoxon signed-rank, two-sided, Holm-corrected over the table, alpha {alpha}"}
