"""Statistics every table and evaluation uses, in one place: summaries over examples and Spearman.

Undefined stays undefined: a statistic that does not exist for an input (Spearman of a constant
vector, a mean of nothing) is ``None``, counted by the caller, never a made-up 0.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy.stats import rankdata, spearmanr

from .decompose.layout import visible_cells
from .errors import InputError

RANKS = ("scipy", "dense")


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
