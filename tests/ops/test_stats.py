"""The statistics behind every table, on synthetic data with known effects: interval coverage at the
leaderboard's sample sizes, ranks that claim only what the data can show, the critical difference by hand,
agreement intervals, sample sizes from power."""
import math
import warnings

import numpy as np
import pytest
from scipy.stats import kendalltau, studentized_range

from attrbench.ops.stats import (
    agreement_interval,
    agreement_lead,
    critical_difference,
    interval,
    kendall_tau_b,
    mean_taus,
    resampled_means,
    median_iqr,
    minimum_n,
    rank_methods,
    required_n,
    with_intervals,
)


@pytest.mark.parametrize("n", [4, 10, 60])
@pytest.mark.parametrize("skewed", [False, True])
def test_intervals_keep_their_coverage_at_small_n(n, skewed):
    """The t-interval covers the true mean about 95 % of the time at the n a budgeted leaderboard has, where a
    percentile bootstrap falls short (benchmarks/bench_intervals.py records both); skewed data (the shape of AOPCs)
    too."""
    rng = np.random.default_rng(n)
    trials, covered = 1000, 0
    for _ in range(trials):
        sample = rng.gamma(2.0, 0.1, n) if skewed else rng.normal(0.3, 0.2, n)
        low, high = interval(sample.tolist())["ci"]
        covered += low <= (0.2 if skewed else 0.3) <= high
    assert covered / trials >= (0.90 if n >= 10 else 0.88)


def test_interval_edge_cases():
    assert interval([None, 1.0])["ci"] is None and "n ≥ 2" in interval([1.0])["ci_note"]
    assert interval([0.5, 0.5, None])["ci"] == [0.5, 0.5]
    assert median_iqr([1.0, 2.0, 3.0, None, 4.0]) == (2.5, 1.75, 3.25) and median_iqr([None]) is None


def test_an_interval_is_scipys_t_interval_to_the_last_bit():
    """The interval's arithmetic is scipy.stats.t.interval's (its quantiles kept per sample size): a published
    report's intervals do not move by a bit."""
    from scipy import stats as sst

    rng = np.random.default_rng(7)
    for n in [2, 3, 5, 17, 80, 300, 872, 1123]:
        for scale in (1e-6, 0.3, 40.0):
            data = rng.normal(0.2, scale, size=n)
            assert tuple(interval(list(data))["ci"]) == sst.t.interval(0.95, n - 1, loc=data.mean(),
                                                                       scale=sst.sem(data)), (n, scale)


def test_an_interval_is_clipped_to_its_metrics_range_and_says_so():
    """A pointing game of 0.5 at n = 4 has the t-interval [−0.419, 1.419]; in [0, 1] it is [0, 1]. An interval
    inside the range, or a metric without one, is the t-interval itself."""
    wide = interval([0.0, 1.0, 1.0, 0.0])
    assert [round(v, 3) for v in wide["ci"]] == [-0.419, 1.419] and wide["ci_method"] == "t"
    clipped = interval([0.0, 1.0, 1.0, 0.0], bounds=(0.0, 1.0))
    assert clipped["ci"] == [0.0, 1.0] and clipped["ci_method"] == "t, clipped"
    assert interval([0.0, 1.0, 1.0, 0.0], bounds=(0.0, None))["ci"] == [0.0, wide["ci"][1]]
    inside = interval([0.4, 0.5, 0.6, 0.5], bounds=(0.0, 1.0))
    assert inside == interval([0.4, 0.5, 0.6, 0.5]) and inside["ci_method"] == "t"
    records = [{"eval": "ground_truth", "metric": "pointing_game", "values": [0.0, 1.0, 1.0, 0.0]},
               {"eval": "other", "metric": "pointing_game", "values": [0.0, 1.0, 1.0, 0.0]}]
    first, second = with_intervals(records, bounds={("ground_truth", "pointing_game"): (0.0, 1.0)})
    assert first["ci"] == [0.0, 1.0] and second["ci"] == wide["ci"]


def test_a_table_at_n_4_is_too_small_to_rank_and_the_rule_is_the_exact_floor():
    rng = np.random.default_rng(0)
    values = {f"m{k}": (k + rng.normal(0, 0.01, 4)).tolist() for k in range(5)}  # a huge effect, 4 examples
    ranking = rank_methods(values, True)
    assert ranking["verdict"] == "n too small to rank" and ranking["group"] == {}
    # the smallest exact two-sided p of a pair, 2/2^n, must pass alpha over the k(k-1)/2 pairs
    for k in (2, 5, 9, 16, 24):
        n = minimum_n(k)
        pairs = k * (k - 1) / 2
        assert 2 / 2 ** n < 0.05 / pairs <= 2 / 2 ** (n - 1)
    assert minimum_n(9) == 11 and minimum_n(16) == 13  # the figures: 9 methods need 11, 16 need 13


def test_a_real_large_effect_at_n_30_is_separated_and_order_follows_the_groups():
    rng = np.random.default_rng(1)
    means = {"a": 0.9, "b": 0.6, "c": 0.6, "d": 0.3, "e": 0.0}
    values = {m: (mu + rng.normal(0, 0.1, 30)).tolist() for m, mu in means.items()}
    ranking = rank_methods(values, True)
    assert ranking["verdict"] == "ranked" and ranking["friedman_p"] < 1e-10
    group = ranking["group"]
    assert group["a"] < group["b"] and group["b"] == group["c"] < group["e"]
    order = ranking["order"]
    assert order[0] == "a" and order[-1] == "e"
    assert [group[m] for m in order] == sorted(group[m] for m in order)  # groups never interleave the order
    lower = rank_methods({m: [-x for x in v] for m, v in values.items()}, False)
    assert lower["order"] == order  # the direction is honoured


def test_identical_methods_are_not_separated():
    rng = np.random.default_rng(2)
    noise = {m: rng.normal(0, 1, 40).tolist() for m in "abcd"}
    ranking = rank_methods(noise, True)
    assert ranking["verdict"] in ("no difference found", "ranked")
    assert set(ranking["group"].values()) == {1}
    assert rank_methods({"a": [None, None] + [1.0] * 20, "b": [1.0] * 22}, True)["n"] == 20  # complete cases


def test_the_critical_difference_matches_a_hand_computation():
    """Demšar 2006, Eq. 5: CD = q_alpha sqrt(k(k+1)/(6N)), q_alpha = studentised range / sqrt 2 (his Table 5:
    q_0.05 = 2.569 for k = 4, 2.728 for k = 5)."""
    for k, q_table in ((4, 2.569), (5, 2.728)):
        q = studentized_range.ppf(0.95, k, np.inf) / math.sqrt(2)
        assert q == pytest.approx(q_table, abs=1e-3)
        assert critical_difference(k, 30) == pytest.approx(q_table * math.sqrt(k * (k + 1) / 180), abs=1e-3)


def test_agreement_interval_holds_the_truth():
    rng = np.random.default_rng(4)
    truth = np.arange(6.0)
    a = {f"m{k}": (truth[k] + rng.normal(0, 0.5, 50)).tolist() for k in range(6)}
    b = {f"m{k}": (truth[k] + rng.normal(0, 0.5, 50)).tolist() for k in range(6)}
    same = agreement_interval({"A": a, "B": b}, "A", "B", resamples=300)
    assert same["tau"] > 0.7 and same["ci"][0] > 0
    shuffled = {f"m{k}": b[f"m{(k * 5) % 6}"] for k in range(6)}
    other = agreement_interval({"A": a, "B": shuffled}, "A", "B", resamples=300)
    assert other["ci"][0] < same["ci"][0]
    assert agreement_interval({"A": {"x": [1.0]}, "B": {"x": [1.0]}}, "A", "B") is None


def test_a_tau_interval_rarely_shows_agreement_where_there_is_none():
    """One metric's method means all equal (no agreement to find): the 95 % interval of tau excludes 0 in at most
    about 5 % of samples. A tau of means is pulled toward 0 under resampling (resampled means are noisier), so the
    percentile interval sits toward 0 and errs on the safe side; scipy's BCa, which undoes that shift, excludes 0 in
    about a third of such samples (benchmarks/bench_intervals.py records how many), and would fail here."""
    rng = np.random.default_rng(12)
    mu = np.linspace(0, 1, 12)[:, None]
    shown = 0
    for _ in range(60):
        a, b = mu + rng.normal(0, 1.5, (12, 40)), rng.normal(0, 1.5, (12, 40))
        result = agreement_interval({"A": {f"m{k}": a[k].tolist() for k in range(12)},
                                     "B": {f"m{k}": b[k].tolist() for k in range(12)}}, "A", "B", resamples=400,
                                    seed=int(rng.integers(1 << 30)))
        shown += result["ci"][0] > 0 or result["ci"][1] < 0
    assert shown <= 8, shown


def test_the_lead_of_one_metric_over_another_is_scipys_tau_difference_with_an_interval_that_covers():
    """agreement_lead: tau(truth, best) − tau(truth, other) of the methods' means, as scipy's kendalltau gives it, on
    the examples both metrics define; a metric that reverses the known order is separated from one that follows it,
    and two metrics drawn alike are separated in at most about 5 % of samples (the percentile interval errs on the
    safe side: 0 of 100 measured)."""
    from scipy.stats import kendalltau

    rng = np.random.default_rng(7)
    mu = np.arange(6.0)[:, None]
    truth, follows = mu + rng.normal(0, 1.0, (6, 40)), mu + rng.normal(0, 1.0, (6, 40))
    reverses = mu[::-1] + rng.normal(0, 1.0, (6, 40))
    reverses[:, :10] = np.nan  # undefined on 10 examples: the lead is over the other 30
    lead = agreement_lead(truth, follows, reverses, resamples=400)
    kept = slice(10, None)
    expected = (kendalltau(truth[:, kept].mean(1), follows[:, kept].mean(1)).statistic
                - kendalltau(truth[:, kept].mean(1), reverses[:, kept].mean(1)).statistic)
    assert lead["lead"] == pytest.approx(expected) and lead["n"] == 30 and lead["separated"] and lead["ci"][0] > 0
    assert agreement_lead(truth[:3], follows[:3], reverses[:3], resamples=50)["n"] == 30
    assert agreement_lead(truth[:2], follows[:2], reverses[:2]) is None
    separated = 0
    for _ in range(100):
        truth, a, b = (mu + rng.normal(0, 3.0, (6, 30)) for _ in range(3))
        separated += agreement_lead(truth, a, b, resamples=300, seed=int(rng.integers(1 << 30)))["separated"]
    assert separated <= 12, separated


def test_a_lead_whose_verdict_sits_within_the_bootstraps_monte_carlo_error_says_so():
    """at_the_edge: where the bound nearer 0 could fall on the other side of 0 by Monte-Carlo noise alone (0 within
    the draws' quantiles at the tail ± 3 binomial SDs), and nowhere else: a level set so that its tail is the share
    of draws at or beyond 0 (the same draws: same seed and resamples) is at the edge; the level's verdict far from
    it, and a lead whose every draw is the same, are not."""
    rng = np.random.default_rng(12)
    mu = np.arange(12.0)[:, None]  # 12 methods: taus of means less lumpy than with a few
    truth, a, b = mu + rng.normal(0, 6, (12, 40)), mu + rng.normal(0, 6, (12, 40)), mu + rng.normal(0, 8, (12, 40))
    wide = agreement_lead(truth, a, b, resamples=2000, confidence=0.5)
    share = wide["beyond_zero"]
    assert 0.02 < share < 0.45, share  # the planted metrics: one a little ahead, the draws on both sides of 0
    edge = agreement_lead(truth, a, b, resamples=2000, confidence=1 - 2 * share)
    assert edge["at_the_edge"] and edge["beyond_zero"] == share and edge["tail"] == pytest.approx(share)
    far = agreement_lead(truth, a, b, resamples=2000, confidence=1 - 2 * min(0.49, 4 * share))
    assert not far["at_the_edge"]
    same = np.tile(mu, (1, 20))  # every resample gives the same orders: no Monte-Carlo error at all
    flat = agreement_lead(same, same, same[::-1], resamples=200, confidence=0.95)
    assert flat["separated"] and not flat["at_the_edge"] and flat["beyond_zero"] == 0.0


def test_the_vectorised_kendall_tau_is_scipys_to_the_bit():
    """Many rows at once, with ties, constant rows and NaN: exactly scipy's kendalltau (tau-b) per row, and the
    bootstrap helper exactly a loop of scipy calls on the resampled means."""
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 4, (300, 9)).astype(float), rng.normal(size=(300, 9))
    y[::3] = np.round(y[::3])  # ties in both
    x[5], y[6], x[7, 2] = 1.0, 2.0, np.nan  # constant rows and a NaN
    expected = [kendalltau(a, b).statistic for a, b in zip(x, y)]
    got = kendall_tau_b(x, y)
    assert np.isnan(got[[5, 6, 7]]).all() and np.isnan(expected[5]) and np.isnan(expected[7])
    assert np.array_equal(got, np.array(expected), equal_nan=True)
    a, b = rng.normal(size=(7, 40)), rng.normal(size=(7, 40))
    a[2, :38] = np.nan  # some resamples draw none of its two defined examples: that tau is NaN
    b[4] = b[1]  # a method twice: tied in every resample
    rows = rng.integers(0, 40, (150, 40))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop = np.array([kendalltau(np.nanmean(a[:, r], 1), np.nanmean(b[:, r], 1)).statistic for r in rows])
    assert 0 < np.isnan(loop).sum() < len(rows)
    assert np.array_equal(mean_taus(a, rows, b, rows), loop, equal_nan=True)


def test_resampled_means_are_the_gathered_nanmeans_to_the_bit_in_any_block():
    """Means from a gather of each distinct method's values and counts from multiplicities are exactly
    ``nanmean(a[:, rows], 2)`` (the published intervals do not move), whatever the block size; a method twice
    ties in every resample."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(6, 53))
    a[1, rng.random(53) < 0.3] = np.nan
    a[5] = a[2]
    rows = rng.integers(0, 53, (97, 41))  # resamples of 41 of the 53 examples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.nanmean(a[:, rows], axis=2).T
    for chunk in (41, 500, 256_000):
        got = resampled_means(a, rows, chunk=chunk)
        assert got.shape == (97, 6) and np.array_equal(got, expected, equal_nan=True)
        assert np.array_equal(got[:, 5], got[:, 2])


def test_required_n_grows_as_the_effect_shrinks_and_identical_pairs_never_separate():
    rng = np.random.default_rng(5)
    base = rng.normal(0, 1, 40)
    values = {"big": (base + 1.0 + rng.normal(0, 0.5, 40)).tolist(),
              "small": (base + 0.2 + rng.normal(0, 0.5, 40)).tolist(), "none": base.tolist(), "twin": base.tolist()}
    needed = {tuple(p["pair"]): p for p in required_n(values, ["big", "small", "none", "twin"])}
    assert needed[("big", "small")]["n"] < needed[("small", "none")]["n"]
    assert needed[("none", "twin")]["n"] is None and needed[("none", "twin")]["effect"] == 0.0


@pytest.mark.parametrize("effect", [3.0, 1.0, 0.3, 0.05])
def test_required_n_is_the_smallest_n_with_the_power(effect):
    """Among 22 methods (231 pairs) statsmodels' solve_power puts an effect of 0.3 at n = 228.3, where the power
    is 0.78, and of 3.0 at 4.8 (0.09): scipy's noncentral t gives nan far in the lower tail. required_n is the
    smallest n whose power (statsmodels, the upper tail where the two-sided value is nan) reaches 80 %."""
    from statsmodels.stats.power import TTestPower

    names = [f"m{i}" for i in range(22)]
    pilot = np.random.default_rng(0).normal(0, 1, 50)
    pilot = (pilot - pilot.mean()) / pilot.std(ddof=1) + effect  # the paired differences: mean effect, SD 1
    values = {name: (pilot * (i == 0)).tolist() for i, name in enumerate(names)}
    n = required_n(values, names)[0]["n"]
    level = 0.05 / 231
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = [TTestPower().power(effect, k, level / 2, alternative="larger") for k in (n - 1, n)]
    assert upper[0] < 0.8 <= upper[1], (n, upper)


def test_the_batched_search_finds_the_n_of_the_one_at_a_time_search():
    """The power evaluated for a few levels of the bisection tree at once walks to the n that doubling and
    bisection one n at a time reach (the published tables do not move), near n = 2, far out and beyond MAX_N."""
    from statsmodels.stats.power import TTestPower

    from attrbench.ops.stats import MAX_N, _smallest_n

    test = TTestPower()

    def one_at_a_time(effect, level):
        def reached(n):
            value = test.power(effect, n, level)
            return (value if math.isfinite(value) else test.power(effect, n, level / 2, alternative="larger")) >= 0.8

        low, high = 1, 2
        while not reached(high):
            if high > MAX_N:
                return None
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if reached(middle) else (middle, high)
        return high

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for effect in (20.0, 3.0, 0.7, 0.21, 0.03, 2e-3, 1e-4, 1e-6):
            for level in (0.05, 0.05 / 276):
                assert _smallest_n(test, effect, level, 0.8) == one_at_a_time(effect, level), (effect, level)


def test_remembered_means_answer_by_content():
    """A report's repeated bootstrap draws are looked up by the values and rows, never by shape or identity."""
    from attrbench.ops.stats import _remembered_means

    rng = np.random.default_rng(8)
    a, rows = rng.normal(size=(5, 30)), rng.integers(0, 30, (40, 30))
    first = _remembered_means(a, rows)
    assert np.array_equal(first, resampled_means(a, rows)) and _remembered_means(a.copy(), rows) is first
    b = a.copy()
    b[3, 7] += 1e-12  # the same shape, one value changed
    assert not np.array_equal(_remembered_means(b, rows), first)
    assert np.array_equal(_remembered_means(a, rows[::-1]), resampled_means(a, rows[::-1]))


def test_a_pair_out_of_reach_is_said_to_be_and_stops_nothing():
    """An effect of 1e-6 would need about 1e13 examples: n is None (more than MAX_N), its effect kept, and the
    report's power table says "> 1,000,000,000" rather than "never (identical)"."""
    from attrbench.ops.stats import MAX_N

    pilot = np.random.default_rng(1).normal(0, 1, 30)
    pilot = pilot - pilot.mean() + 1e-6
    entry = required_n({"a": pilot.tolist(), "b": [0.0] * 30}, ["a", "b"])[0]
    assert entry["n"] is None and entry["effect"] > 0 and MAX_N == 10 ** 9
    from types import SimpleNamespace

    from attrbench.report.tables import power_table

    table = SimpleNamespace(evaluation=SimpleNamespace(name="naopc"),
                            statistics={"metric": "naopc_comprehensiveness", "n": 30, "required_n": [entry]})
    row = power_table([table])[0].iloc[0]
    assert row["n for the top two"] == row["median n over adjacent pairs"] == "> 1,000,000,000"
    assert row["pairs never separable (identical scores)"] == 0
