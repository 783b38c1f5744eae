"""The random floor's arithmetic: Spearman's expectation against enumeration, the subset sampler, and the stratified
standard error with its finite-population correction."""
import math
from itertools import permutations

import numpy as np
import pytest

from attrbench.errors import InputError
from attrbench.ops.floors import expected_spearman, stratum_mean, subsets_of_size
from attrbench.ops.stats import spearman


@pytest.mark.parametrize("reference", [[0.3, 0.1, 0.2], [1.0, 1.0, 2.0, 3.0], [5.0, 1.0, 1.0, 1.0, 2.0],
                                       [0.2, 0.9, 0.4, 0.4, 0.9, 0.1], [1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 1.0],
                                       [4.0, 3.0, 2.0, 1.0, 0.0]])
def test_expected_spearman_equals_the_mean_over_every_ordering(reference):
    """A random score vector has no ties, so its ranks are a uniform permutation: the mean of rho over every
    permutation is the expectation. scipy's tie-corrected rho averages to 0; the dense convention to the closed
    form, which is not 0 where the reference has ties."""
    n = len(reference)
    for rank in ("scipy", "dense"):
        mean = np.mean([spearman(np.array(p, dtype=float), reference, rank) for p in permutations(range(n))])
        assert expected_spearman(reference, rank) == pytest.approx(mean, abs=1e-12)
    assert expected_spearman(reference, "scipy") == 0.0


def test_the_dense_floor_is_off_zero_with_ties_and_zero_without():
    """Dense ranks of a tied reference do not span 1..n, so the random floor is not 0: ranks 3, 1, 1, 1, 2 give
    E[Σd²] = 55 − 6·8 + 16 = 23 and rho = 1 − 6·23 / (5·24)."""
    assert expected_spearman([5.0, 1.0, 1.0, 1.0, 2.0], "dense") == pytest.approx(1 - 6 * 23 / 120)
    assert expected_spearman([0.3, 0.1, 0.2, 0.7], "dense") == pytest.approx(0.0, abs=1e-15)


def test_expected_spearman_is_undefined_where_rho_is():
    assert expected_spearman([1.0, 1.0, 1.0]) is None and expected_spearman([2.0]) is None
    with pytest.raises(InputError, match="rank convention 'pearson'"):
        expected_spearman([1.0, 2.0], "pearson")


def test_subsets_are_every_one_or_distinct_draws_reproducibly():
    rng = np.random.default_rng(0)
    assert subsets_of_size(5, 2, 10, rng) == [frozenset(c) for c in [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3),
                                                                     (1, 4), (2, 3), (2, 4), (3, 4)]]
    assert len(subsets_of_size(6, 3, 5, rng, exhaustive=True)) == 20
    for m, k, draws in ((6, 3, 5), (30, 10, 50)):  # listed and chosen; drawn with rejection of repeats
        drawn = subsets_of_size(m, k, draws, np.random.default_rng(1))
        assert len(drawn) == len(set(drawn)) == draws and all(len(s) == k and max(s) < m for s in drawn)
        assert drawn == subsets_of_size(m, k, draws, np.random.default_rng(1))


def test_the_stratum_variance_is_the_sampling_variance_without_replacement():
    """(1 − n/N) s²/n: over many samples its mean is the variance of the sample mean (FPC included), and a
    whole population has none."""
    population = np.random.default_rng(2).gamma(2.0, size=math.comb(8, 4))  # 70 units
    assert stratum_mean(population, len(population)) == (pytest.approx(population.mean()), 0.0)
    rng = np.random.default_rng(3)
    estimates = [stratum_mean(population[rng.choice(70, 40, replace=False)], 70) for _ in range(4000)]
    means, variances = np.array(estimates).T
    truth = population.var(ddof=1) / 40 * (1 - 40 / 70)
    assert means.mean() == pytest.approx(population.mean(), abs=4 * math.sqrt(truth / 4000))
    assert means.var() == pytest.approx(truth, rel=0.08) and variances.mean() == pytest.approx(truth, rel=0.03)
