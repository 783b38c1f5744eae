"""Expectations under a uniformly random attribution: the floor every method of a faithfulness table is tested against.

One random draw per example (the ``random`` method) has a per-example spread as large as a method's, so
"not separated from random" would be partly a statement about that draw. The floor is instead, per example,
the expected value of the metric over the random attribution, exact where the metric allows it, else a seeded
Monte-Carlo estimate with its standard error:

- An erasure curve removes σ[:k] for a uniformly random ordering σ of the m features; σ[:k] is a uniformly
  random k-subset, so E[p(x) − p(x ∖ σ[:k])] is the mean drop over the C(m, k) subsets of size k. Each size is
  a stratum: enumerated when it holds at most ``draws`` subsets (or when asked), else ``draws`` distinct
  subsets drawn uniformly without replacement, whose mean has variance (1 − n/N) s²/n (the finite-population
  correction; Cochran 1977, *Sampling Techniques*, §5.3). Strata are drawn independently, so a sum of
  strata has the sum of their variances.
- Spearman's rho of a uniformly random score vector (no ties: its ranks are a uniform permutation π of 1..n)
  against fixed reference ranks b: with scipy's tie-corrected ranks it is the Pearson correlation of π and b,
  whose covariance has expectation 0 (E[π_i] = (n + 1)/2 for every i) over fixed standard deviations, so
  E[rho] = 0. With dense ranks and no tie correction (the ALTI scripts), rho = 1 − 6 Σ (π_i − b_i)² / (n(n² − 1))
  and E[Σ (π_i − b_i)²] = n(n + 1)(2n + 1)/6 − (n + 1) Σ b_i + Σ b_i², which is 0 when b has no ties and not
  in general.
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Optional, Sequence

import numpy as np
from scipy.stats import rankdata

from ..errors import InputError
from .stats import RANKS


def subsets_of_size(m: int, k: int, draws: int, rng: np.random.Generator, exhaustive: bool = False
                    ) -> list[frozenset]:
    """The k-subsets of ``range(m)``: all of them when there are at most ``draws`` (or ``exhaustive``), else
    ``draws`` distinct ones drawn uniformly at random (in drawing order, reproducible from ``rng``)."""
    total = math.comb(m, k)
    if exhaustive or total <= draws:
        return [frozenset(c) for c in combinations(range(m), k)]
    if total <= 20 * draws:  # few enough to list: a uniform choice of distinct ones
        every = list(combinations(range(m), k))
        return [frozenset(every[i]) for i in rng.choice(total, draws, replace=False)]
    chosen: dict[frozenset, None] = {}
    while len(chosen) < draws:  # rejection of repeats: rare at more than 20 x draws subsets
        chosen.setdefault(frozenset(rng.choice(m, k, replace=False).tolist()), None)
    return list(chosen)


def stratum_mean(values: Sequence[float], population: int) -> tuple[float, float]:
    """(mean, variance of the mean) of a simple random sample without replacement of ``values`` from
    ``population`` units: 0 variance when the sample is the whole population."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n >= population or n < 2:
        return float(values.mean()), 0.0
    return float(values.mean()), float(values.var(ddof=1) / n * (1 - n / population))


def expected_spearman(reference: Sequence[float], rank: str = "scipy") -> Optional[float]:
    """E[Spearman(uniformly random scores, ``reference``)] in closed form (module docstring); None where rho is
    undefined (fewer than two values, or a constant reference), as it is for every method there."""
    if rank not in RANKS:
        raise InputError(f"rank convention '{rank}' is not known; use {' or '.join(RANKS)}")
    reference = np.asarray(reference, dtype=np.float64).ravel()
    n = len(reference)
    if n < 2 or np.ptp(reference) == 0:
        return None
    if rank == "scipy":
        return 0.0
    b = rankdata(reference, method="dense")
    squares = n * (n + 1) * (2 * n + 1) / 6 - (n + 1) * b.sum() + (b ** 2).sum()
    return float(1 - 6 * squares / (n * (n ** 2 - 1)))
