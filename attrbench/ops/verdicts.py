"""Verdicts a referee can recompute: every claim about two methods rests on a test of those two methods.

Mean-rank post-hoc tests (Nemenyi) decide A against B with the ranks of every other method in the pool, so
adding or removing a third method can flip a pair (Benavoli, Corani & Mangili, JMLR 2016, "Should we really
use post-hoc tests based on mean-ranks?"). Here each pair is tested on its own common examples:

- the paired difference (oriented so that positive favours the first method), its mean with a Student-t
  interval (clipped to ±(high − low) where the metric declares its range), the win / tie / loss counts and
  the win rate wins / (wins + losses);
- the Wilcoxon signed-rank test (scipy, zero differences dropped) and the sign test (scipy's binomial test on
  wins against losses); the verdict uses the sign test where ties dominate (more than half the examples);
- the effect size: the matched-pairs rank-biserial correlation (Kerby 2014), (R+ − R−) / (R+ + R−), and d_z;
- Holm's correction (statsmodels ``multipletests``) over the pairs of one table.

Groups are derived from these results and never contradict them: the top group is the set of methods no other
method beats pair by pair; the next group is the same among the methods left, and so on, so two methods that a
test separates never share a group. The compact letter display (Piepho 2004, scikit-posthocs) is the complete
picture: methods that share a letter are not separated.

The random floor is compared apart, one Holm family of its own: each method is better than the floor, not
separated from it, or worse. Methods with identical scores on every example are one behaviour
(:func:`aliases`), merged before any statistic. The Bayesian signed-rank test (Benavoli et al. 2017) gives
baycomp's three probabilities; :func:`bayes_signed_rank` computes them as baycomp does, vectorised (tested equal).
"""
from __future__ import annotations

import functools
import gc
import math
import warnings
from itertools import combinations
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sst

from .reuse import active, digest_of, key_of, reused
from .stats import t_quantiles

ALPHA = 0.05  # family-wise error rate of one table's pairs (Holm)
ROPE = 0.01  # region of practical equivalence of a mean difference, unless an evaluation declares one
BAYES_DRAWS = 5000  # posterior draws of the Bayesian signed-rank test (its Monte-Carlo error is about 0.007 at most)
TIES_DOMINATE = 0.5  # above this share of zero differences the sign test decides
ALIAS_TOLERANCE = 1e-6  # float32 precision of model outputs: scores this close (relative to max(1, |s|)) agree
FLOOR = "random_floor"  # the method name of the random floor's records


def common(x: Sequence[Optional[float]], y: Sequence[Optional[float]]) -> tuple[np.ndarray, np.ndarray]:
    """The values of two aligned lists on the examples where both are defined."""
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    array = np.array(pairs, dtype=np.float64).reshape(-1, 2)
    return array[:, 0], array[:, 1]


def format_p(p: Optional[float]) -> str:
    """A p-value as text; one below the float range (scipy returns 0) is "< 1e-300", never "0"."""
    if p is None:
        return "–"
    if p < 1e-300:
        return "< 1e-300"
    return f"{p:.2g}"


def compare(x: Sequence[Optional[float]], y: Sequence[Optional[float]], higher_is_better: bool = True,
            bounds: Optional[Sequence[Optional[float]]] = None) -> dict:
    """One pair on its common examples (positive favours x): n, mean difference [t-interval], wins / ties /
    losses, win rate, Wilcoxon and sign-test p, the p the verdict uses and its test, rank-biserial r and d_z.
    ``bounds``, the metric's range (low, high), clips the interval to the differences it allows, ±(high − low)."""
    a, b = common(x, y)
    d = (a - b) * (1.0 if higher_is_better else -1.0)
    n = len(d)
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    ties = n - wins - losses
    out = {"n": n, "wins": wins, "ties": ties, "losses": losses,
           "win_rate": wins / (wins + losses) if wins + losses else None,
           "difference": float(d.mean()) if n else None, "ci": None, "p_wilcoxon": 1.0, "p_sign": 1.0,
           "rank_biserial": 0.0, "d_z": None}
    if n >= 2:
        sd = d.std(ddof=1)
        if sd > 0:
            low_q, high_q = t_quantiles(n - 1)  # scipy's t.interval(0.95, n - 1, loc, scale), its arithmetic in order
            scale, loc = sd / math.sqrt(n), d.mean()
            out["ci"] = [float(low_q * scale + loc), float(high_q * scale + loc)]
            if bounds is not None and None not in bounds:
                width = float(bounds[1] - bounds[0])
                out["ci"] = [max(out["ci"][0], -width), min(out["ci"][1], width)]
            out["d_z"] = float(d.mean() / sd)
        else:
            out["ci"] = [float(d[0])] * 2
    nonzero = d[d != 0]
    if len(nonzero):
        ranks = sst.rankdata(np.abs(nonzero))
        plus, minus = ranks[nonzero > 0].sum(), ranks[nonzero < 0].sum()
        out["rank_biserial"] = float((plus - minus) / (plus + minus))
        out["p_wilcoxon"] = wilcoxon_p(nonzero)
        out["p_sign"] = sign_test_p(wins, wins + losses)
    sign = n and ties / n > TIES_DOMINATE
    out["test"] = "sign" if sign else "wilcoxon"
    out["p"] = out["p_sign"] if sign else out["p_wilcoxon"]
    # the direction the verdict reads: the sign test's wins against losses, or the signed ranks' balance
    out["direction"] = float(np.sign(wins - losses)) if sign else float(np.sign(out["rank_biserial"]))
    return out


@functools.lru_cache(maxsize=None)
def _binomial_half(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pmf, cdf and sf of Binomial(n, 1/2) at 0..n, each scipy's value at that point (one vectorised call each)."""
    x = np.arange(n + 1)
    return sst.binom.pmf(x, n, 0.5), sst.binom.cdf(x, n, 0.5), sst.binom.sf(x, n, 0.5)


def sign_test_p(wins: int, trials: int) -> float:
    """The two-sided exact binomial (sign) test p of ``wins`` in ``trials`` at 1/2: scipy's ``binomtest``, its
    algorithm step for step (the binary search for the other tail's first term as likely as the observed one, with
    its relative tolerance of 1e-7) on a table of the distribution's pmf, cdf and sf per number of trials, so the
    same float (tested against ``binomtest`` on every outcome up to 60 trials and on pairs of up to 900). A report tests
    ten thousand pairs on a few hundred sample sizes; ``binomtest`` takes about 0.6 ms a call."""
    k, n = int(wins), int(trials)
    pmf, cdf, sf = _binomial_half(n)
    d, rerr = pmf[k], 1 + 1e-7
    if k == 0.5 * n:
        return 1.0

    def search(a, target: float, lo: int, hi: int) -> int:  # scipy's _binary_search_for_binom_tst
        while lo < hi:
            mid = lo + (hi - lo) // 2
            value = a(mid)
            if value < target:
                lo = mid + 1
            elif value > target:
                hi = mid - 1
            else:
                return mid
        return lo if a(lo) <= target else lo - 1

    if k < 0.5 * n:
        ix = search(lambda x: -pmf[x], -d * rerr, math.ceil(0.5 * n), n)
        y = n - ix + int(d * rerr == pmf[ix])
        p = cdf[k] + sf[n - y]
    else:
        ix = search(lambda x: pmf[x], d * rerr, 0, math.floor(0.5 * n))
        p = (cdf[ix] if ix >= 0 else 0.0) + sf[k - 1]
    return float(min(1.0, p))


def _positive_rank_sum(d: np.ndarray, axis: int = -1) -> np.ndarray:
    """Wilcoxon's statistic r+ (the sum of the ranks of |d| over the positive d), vectorised over ``axis``."""
    return np.sum((d > 0) * sst.rankdata(np.abs(d), axis=axis), axis=axis)


def wilcoxon_p(d: np.ndarray) -> float:
    """scipy's two-sided Wilcoxon signed-rank p of nonzero differences ``d``, the same value, sooner.

    With tied |d| and at most 13 values scipy's ``wilcoxon`` runs the exact sign-flip permutation test with the
    statistic computed one permutation at a time (about 0.3 s at 10 values); here that same ``permutation_test``
    gets the statistic vectorised. Everywhere else it is ``wilcoxon`` itself.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if 2 <= len(d) <= 13 and len(np.unique(np.abs(d))) < len(d):
            return float(sst.permutation_test((d,), _positive_rank_sum, permutation_type="samples", vectorized=True,
                                              n_resamples=9999, alternative="two-sided").pvalue)
        return float(sst.wilcoxon(d).pvalue)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm-adjusted p-values (statsmodels ``multipletests``)."""
    if not len(pvalues):
        return []
    from statsmodels.stats.multitest import multipletests  # heavy: only when a table is compared

    gc.freeze()  # its Holm branch calls gc.collect() (statsmodels PR #8671): a full pass over a report's heap per call
    try:
        return [float(p) for p in multipletests(list(pvalues), alpha=alpha, method="holm")[1]]
    finally:
        gc.unfreeze()


def pairwise(values: dict[str, Sequence[Optional[float]]], higher_is_better: bool, alpha: float = ALPHA,
             bounds: Optional[Sequence[Optional[float]]] = None) -> dict:
    """Every pair of ``values`` (per method, aligned per example) compared, Holm-corrected over the pairs
    (``bounds``: the metric's range, for the difference intervals; :func:`compare`).

    Returns ``{"order", "mean", "n", "pairs", "tier", "letters", "top", "alpha", "pairs_tested"}``: ``order``
    by mean (best first, the statistic a table shows), ``pairs`` keyed "A vs B" (A before B in ``order``) with
    :func:`compare`'s fields plus ``p_holm``, ``separated`` and ``better`` (the better method's name, or None),
    ``tier`` per method (1 = the top group: no method beats it pair by pair), ``letters`` the compact letter
    display and ``top`` the methods of tier 1.
    """
    names = list(values)
    sign = 1.0 if higher_is_better else -1.0
    mean = {m: _mean(values[m]) for m in names}
    order = sorted(names, key=lambda m: (-sign * mean[m] if mean[m] is not None else math.inf, names.index(m)))
    pairs = {}
    column = _columns(values)
    for a, b in combinations(order, 2):
        tested = _compared(values[a], values[b], higher_is_better, bounds, column.get(a), column.get(b))
        pairs[f"{a} vs {b}"] = {"pair": [a, b], **tested}
    adjusted = holm([p["p"] for p in pairs.values()], alpha)
    for pair, p in zip(pairs.values(), adjusted):
        pair["p_holm"] = p
        pair["separated"] = bool(p < alpha and pair["direction"] != 0)
        a, b = pair["pair"]
        pair["better"] = (a if pair["direction"] > 0 else b) if pair["separated"] else None
    tier = tiers(order, pairs)
    return {"order": order, "mean": mean, "n": {m: sum(v is not None for v in values[m]) for m in names},
            "pairs": pairs, "tier": tier, "top": [m for m in order if tier[m] == 1],
            "letters": letters(order, pairs, alpha), "alpha": alpha, "pairs_tested": len(pairs)}


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    defined = [v for v in values if v is not None]
    return float(np.mean(defined)) if defined else None


def beaten_by(pairs: dict) -> dict[str, set[str]]:
    """Per method, the methods that beat it pair by pair."""
    out: dict[str, set[str]] = {}
    for pair in pairs.values():
        a, b = pair["pair"]
        out.setdefault(a, set())
        out.setdefault(b, set())
        if pair["better"] is not None:
            out[b if pair["better"] == a else a].add(pair["better"])
    return out


def tiers(order: Sequence[str], pairs: dict) -> dict[str, int]:
    """Group 1: the methods no method beats; group 2: the same among the rest; ... A method that beats another is
    never in its group, so the groups never contradict a pairwise verdict."""
    beaten = beaten_by(pairs)
    left, out, g = list(order), {}, 0
    while left:
        g += 1
        undominated = [m for m in left if not (beaten.get(m, set()) & set(left))]
        for m in undominated:
            out[m] = g
        left = [m for m in left if m not in undominated]
    return out


def letters(order: Sequence[str], pairs: dict, alpha: float = ALPHA) -> dict[str, str]:
    """The compact letter display of the Holm-adjusted pairwise p-values (scikit-posthocs): methods sharing a
    letter are not separated."""
    import scikit_posthocs as sp  # heavy: only when a table is compared

    if len(order) < 2:
        return {m: "a" for m in order}
    index = {m: i for i, m in enumerate(order)}
    values = np.ones((len(order), len(order)))
    for pair in pairs.values():  # filled as an array: a DataFrame written cell by cell took seconds per report
        a, b = (index[m] for m in pair["pair"])
        values[a, b] = values[b, a] = pair["p_holm"] if pair["direction"] != 0 else 1.0
    matrix = pd.DataFrame(values, index=list(order), columns=list(order))
    if len(order) > 52:  # more letter groups than the alphabet holds: no display
        return {m: "" for m in order}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        display = sp.compact_letter_display(matrix, alpha=alpha)
    return {m: str(display[m]).replace(" ", "") for m in order}


def against_floor(values: dict[str, Sequence[Optional[float]]], floor: Sequence[Optional[float]],
                  higher_is_better: bool, alpha: float = ALPHA, bounds: Optional[Sequence[Optional[float]]] = None
                  ) -> dict[str, dict]:
    """Each method against the random floor on their common examples, Holm-corrected over the methods: verdict
    "better", "not separated" or "worse", with :func:`compare`'s fields (positive favours the method)."""
    column, base = _columns(values), _columns({FLOOR: floor}).get(FLOOR)
    out = {m: _compared(v, floor, higher_is_better, bounds, column.get(m), base) for m, v in values.items()}
    return _holm_verdicts(out, alpha)


def _columns(values: dict[str, Sequence[Optional[float]]]) -> dict[str, str]:
    """Each column's digest, where a report reuses its last results (:mod:`attrbench.ops.reuse`): a pair's tests
    depend on its two columns only, so each is digested once, not once per pair."""
    return {m: digest_of(v) for m, v in values.items()} if active() is not None else {}


def _compared(x, y, higher_is_better: bool, bounds, x_digest: Optional[str] = None, y_digest: Optional[str] = None
              ) -> dict:
    """:func:`compare`, or its result from the last rendering where a report reuses it."""
    reuse = active()
    if reuse is None or x_digest is None or y_digest is None:
        return compare(x, y, higher_is_better, bounds)
    return reuse.get(key_of(compare, x_digest, y_digest, higher_is_better, bounds),
                     functools.partial(compare, x, y, higher_is_better, bounds))


def _holm_verdicts(rows: dict[str, dict], alpha: float) -> dict[str, dict]:
    """One family of :func:`compare` rows Holm-corrected: each gets ``p_holm`` and the first side's ``verdict``,
    "better", "not separated" or "worse"."""
    for row, p in zip(rows.values(), holm([r["p"] for r in rows.values()], alpha)):
        row["p_holm"] = p
        row["verdict"] = ("not separated" if p >= alpha or row["direction"] == 0 else
                          "better" if row["direction"] > 0 else "worse")
    return rows


def provisional(new: Sequence[Optional[float]], published: dict[str, Sequence[Optional[float]]],
                floor: Optional[Sequence[Optional[float]]], higher_is_better: bool, alpha: float = ALPHA,
                bounds: Optional[Sequence[Optional[float]]] = None) -> dict:
    """A method with fewer examples than a table's others, placed without changing what is published.

    It is compared with each published method on their common examples, and with the random floor on the floor's
    examples it shares (:func:`compare`, positive favours the new method). These comparisons are a family of their
    own, Holm-corrected over its k comparisons (the floor's included); the published pairs and their Holm family are
    left as they are. The verdicts are provisional: the method is looked at again as its n grows (repeated looks),
    so a verdict may change, and it enters no group until it has the table's examples.

    Returns ``{"n", "comparisons", "vs", "floor", "beats", "beaten_by", "not_separated"}``: ``vs`` per published
    method and ``floor`` with :func:`compare`'s fields, ``p_holm`` and ``verdict`` ("better", "worse" or "not
    separated": the new method's side), and the published methods it beats, is beaten by and is not separated from.
    """
    rows = {m: compare(new, v, higher_is_better, bounds) for m, v in published.items()}
    if floor is not None:
        rows[FLOOR] = compare(new, floor, higher_is_better, bounds)
    _holm_verdicts(rows, alpha)
    vs = {m: r for m, r in rows.items() if m != FLOOR}
    return {"n": sum(v is not None for v in new), "comparisons": len(rows), "vs": vs, "floor": rows.get(FLOOR),
            "beats": [m for m, r in vs.items() if r["verdict"] == "better"],
            "beaten_by": [m for m, r in vs.items() if r["verdict"] == "worse"],
            "not_separated": [m for m, r in vs.items() if r["verdict"] == "not separated"]}


def aliases(tables: Sequence[dict[str, Sequence[Optional[float]]]], tolerance: float = ALIAS_TOLERANCE
            ) -> list[list[str]]:
    """Groups of methods (two or more) whose values are the same, within ``tolerance`` relative to
    max(1, |value|), on every example of every table (undefined where and only where the other is), in the order
    the methods first appear. Such methods are one behaviour: ranking both counts it twice."""
    names = list(dict.fromkeys(m for table in tables for m in table))

    def same(a: str, b: str) -> bool:
        for table in tables:
            if (a in table) != (b in table):
                return False
            if a not in table:
                continue
            x, y = table[a], table[b]
            if len(x) != len(y):
                return False
            for u, v in zip(x, y):
                if (u is None) != (v is None):
                    return False
                if u is not None and abs(u - v) > tolerance * max(1.0, abs(u), abs(v)):
                    return False
        return bool(tables)

    groups: list[list[str]] = []
    placed: set[str] = set()
    for a in names:
        if a in placed:
            continue
        group = [a] + [b for b in names if b != a and b not in placed and same(a, b)]
        placed.update(group)
        if len(group) > 1:
            groups.append(group)
    return groups


@functools.lru_cache(maxsize=4)
def _dirichlet(m: int, nsamples: int, seed: int) -> np.ndarray:
    """baycomp's posterior draws over ``m`` points, its pseudo-observation 0 (prior weight ½) and ``m - 1``
    differences (1 each): they depend on (m, draws, seed) only, so the pairs of a table share them (read-only)."""
    weights = np.ones(m)
    weights[0] = 0.5
    draws = np.random.RandomState(seed).dirichlet(weights, nsamples)
    draws.setflags(write=False)
    return draws


@reused
def bayes_signed_rank(d: Sequence[float], rope: float = ROPE, nsamples: int = BAYES_DRAWS, seed: int = 0
                      ) -> tuple[float, float, float]:
    """baycomp's Bayesian signed-rank probabilities (Benavoli et al. 2017) of the differences ``d`` (positive
    favours the first method): (P(first better), P(equivalent within ±rope), P(second better)), each the share of
    posterior draws in which that outcome is the most probable of the three. The same draws and arithmetic as
    ``baycomp.SignedRankTest.probs(d, 0)`` (tested equal).

    Per draw w, baycomp computes the quadratic forms w' H w with H[i, j] = heaviside of the pair sums
    diff[i] + diff[j] against ∓2 rope (1 beyond, ½ at it). With the columns sorted by ``diff``, each row's sums
    ascend (a float sum is monotone in either term), so a row's ones are a run at one end and its halves the run
    next to it: (H w)[i] is a difference of prefix sums of the sorted w, and each form costs O(n) per draw, not
    the O(n²) of the matrix product (a 1,000-example pair: 5,000 draws × 10⁶ products each)."""
    d = np.asarray(d, dtype=np.float64)
    diff = np.concatenate([[0.0], -d])  # baycomp's y - x with x = d, y = 0
    m = len(diff)
    order = np.argsort(diff, kind="stable")
    sums = diff[:, None] + diff[None, order]  # baycomp's pair sums, each row ascending
    draws = _dirichlet(m, nsamples, seed)
    prefix = np.zeros((nsamples, m + 1))
    np.cumsum(np.take(draws, order, axis=1), axis=1, out=prefix[:, 1:])

    def run_to(threshold: float) -> np.ndarray:
        """Per draw and row, the weight of the sums below ``threshold`` plus half of those at it."""
        lt, le = (sums < threshold).sum(axis=1), (sums <= threshold).sum(axis=1)
        if np.array_equal(lt, le):  # no sum at it (the usual case): 0.5 * (a + a) is a, bit for bit
            return np.take(prefix, lt, axis=1)
        return 0.5 * (np.take(prefix, lt, axis=1) + np.take(prefix, le, axis=1))

    # (H w)[i]: the run below the threshold whole, the run at it half: sums < -2 rope ... and sums > 2 rope
    below = run_to(-2 * rope)
    above = prefix[:, m:] - run_to(2 * rope)
    left = np.einsum("si,si->s", draws, below)
    right = np.einsum("si,si->s", draws, above)
    samples = np.stack([left, 1.0 - left - right, right], axis=1)
    winner = samples.argmax(axis=1)  # baycomp's Posterior.probs: how often each outcome is the largest
    counts = np.bincount(winner, minlength=3) / nsamples
    return float(counts[0]), float(counts[1]), float(counts[2])


@reused
def best_frequency(values: dict[str, Sequence[Optional[float]]], higher_is_better: bool, resamples: int = 1000,
                   seed: int = 0) -> dict[str, float]:
    """How often each method has the best mean over bootstrap resamples of the examples every method was scored
    on (ties share the win)."""
    names = list(values)
    rows = [row for row in zip(*(values[m] for m in names)) if all(v is not None for v in row)]
    matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(names))
    if not len(rows):
        return {}
    sign = 1.0 if higher_is_better else -1.0
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(names))
    for _ in range(resamples):
        means = sign * matrix[rng.integers(0, len(rows), len(rows))].mean(0)
        best = np.flatnonzero(means == means.max())
        counts[best] += 1.0 / len(best)
    return {m: float(c / resamples) for m, c in zip(names, counts)}
