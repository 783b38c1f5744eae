"""Pairwise verdicts on synthetic data with planted effects: separated pairs never share a group, the floor's
three ways, identical methods as one behaviour, baycomp's probabilities, interval coverage, and agreement with
scipy / statsmodels / scikit-posthocs computed independently."""
import itertools

import numpy as np
import pytest
from scipy import stats

from attrbench.ops.verdicts import (
    against_floor,
    aliases,
    bayes_signed_rank,
    best_frequency,
    compare,
    format_p,
    pairwise,
    provisional,
    sign_test_p,
    tiers,
    wilcoxon_p,
)


def planted(seed: int, n: int, means: dict[str, float], sd: float = 0.1) -> dict[str, list]:
    """Per method, the example's difficulty (shared) plus the method's effect and its own noise."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.5, 0.2, n)
    return {m: (base + mu + rng.normal(0, sd, n)).tolist() for m, mu in means.items()}


@pytest.mark.parametrize("seed", range(6))
def test_a_separated_pair_never_shares_a_group_or_a_letter(seed):
    means = {"a": 0.3, "b": 0.25, "c": 0.2, "d": 0.05, "e": 0.0, "f": 0.0}
    values = planted(seed, 40, means, sd=0.12)
    result = pairwise(values, True)
    for pair in result["pairs"].values():
        a, b = pair["pair"]
        if pair["separated"]:
            assert result["tier"][a] != result["tier"][b]
            assert not set(result["letters"][a]) & set(result["letters"][b])
            loser = b if pair["better"] == a else a
            assert result["tier"][loser] > result["tier"][pair["better"]]
        else:
            assert set(result["letters"][a]) & set(result["letters"][b])  # not separated: a shared letter
    top = result["top"]
    for m in top:  # no method beats a member of the top group
        assert not any(p["better"] not in (None, m) and m in p["pair"] for p in result["pairs"].values())


def test_a_method_that_beats_everything_is_alone_on_top_and_direction_is_honoured():
    values = planted(0, 60, {"best": 0.5, "mid": 0.1, "low": 0.0})
    result = pairwise(values, True)
    assert result["top"] == ["best"] and result["order"][0] == "best"
    assert result["pairs"]["best vs mid"]["better"] == "best"
    lower = pairwise({m: [-v for v in vals] for m, vals in values.items()}, False)
    assert lower["top"] == ["best"] and lower["order"] == result["order"]


def test_pairwise_tests_and_holm_equal_scipy_statsmodels_and_scikit_posthocs():
    """The referee's computation, done independently: scikit-posthocs' Wilcoxon matrix, statsmodels' Holm."""
    import pandas as pd
    import scikit_posthocs as sp
    from statsmodels.stats.multitest import multipletests

    values = planted(7, 30, {"a": 0.1, "b": 0.05, "c": 0.0, "d": 0.02})
    result = pairwise(values, True)
    frame = pd.DataFrame(values)
    matrix = sp.posthoc_wilcoxon(frame.melt(var_name="m", value_name="v").assign(
        block=list(range(30)) * 4), val_col="v", group_col="m", p_adjust=None)
    pairs = list(result["pairs"].values())
    for pair in pairs:
        a, b = pair["pair"]
        assert pair["p_wilcoxon"] == pytest.approx(matrix.loc[a, b], rel=1e-9)
        assert pair["p_wilcoxon"] == pytest.approx(stats.wilcoxon(np.array(values[a]) - values[b]).pvalue)
    holm = multipletests([p["p"] for p in pairs], method="holm")[1]
    assert [p["p_holm"] for p in pairs] == pytest.approx(list(holm))


def test_the_signed_rank_p_is_scipys_with_and_without_ties():
    """Tied |d| at up to 13 values take scipy's exact sign-flip permutation test with a vectorised statistic: the
    same p as ``stats.wilcoxon``, bit for bit, as are the untied and the longer ones (scipy's own call)."""
    rng = np.random.default_rng(3)
    tied = 0
    for trial in range(80):
        n = int(rng.integers(1, 11)) if trial % 4 else int(rng.integers(11, 30))
        d = rng.choice([-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2, 3], n) if trial % 2 else rng.normal(size=n).round(2)
        d = d[d != 0]
        if not len(d):
            continue
        tied += 2 <= len(d) <= 13 and len(np.unique(np.abs(d))) < len(d)
        assert wilcoxon_p(d) == stats.wilcoxon(d).pvalue, d
    assert tied >= 20


def test_a_pairs_interval_and_sign_test_are_scipys_bit_for_bit():
    """The difference's t-interval (quantiles kept per sample size) and the sign test's p (kept per wins and trials)
    are ``stats.t.interval`` and ``stats.binomtest`` exactly, on samples of 2 to 900 with ties and scales from 1e-6
    to 1e3: a report's statistics.json is the same bytes either way."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(2, 60)) if trial % 3 else int(rng.integers(60, 900))
        scale = 10.0 ** rng.uniform(-6, 3)
        x = rng.normal(size=n) * scale
        y = (x + rng.normal(0.1, 1, n) * scale).round(int(rng.integers(1, 9)) if trial % 2 else 12)
        pair = compare(x.tolist(), y.tolist())
        d = x - y
        if d.std(ddof=1) > 0:
            expected = stats.t.interval(0.95, n - 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(n))
            assert pair["ci"] == [float(v) for v in expected], (n, scale)
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        assert pair["p_sign"] == (float(stats.binomtest(wins, wins + losses, 0.5).pvalue) if wins + losses else 1.0)
    for n in range(1, 61):  # every outcome of the smaller samples, where the tails' search has its edge cases
        assert [sign_test_p(k, n) for k in range(n + 1)] == [stats.binomtest(k, n, 0.5).pvalue for k in range(n + 1)]


def test_a_difference_interval_is_clipped_to_what_the_metrics_range_allows():
    """Two shares in [0, 1] differ by at most 1: a wide t-interval of their difference stops at ±1, and nothing
    else of the comparison changes."""
    x, y = [1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]
    wide, clipped = compare(x, y), compare(x, y, bounds=(0.0, 1.0))
    assert wide["ci"][0] < -1 and wide["ci"][1] > 1 and clipped["ci"] == [-1.0, 1.0]
    assert {k: v for k, v in wide.items() if k != "ci"} == {k: v for k, v in clipped.items() if k != "ci"}
    assert compare(x, y, bounds=(0.0, None))["ci"] == wide["ci"]
    assert pairwise({"a": x, "b": y}, True, bounds=(0.0, 1.0))["pairs"]["a vs b"]["ci"] == [-1.0, 1.0]


def test_a_verdict_does_not_depend_on_the_other_methods_in_the_pool():
    """Mean-rank post-hoc tests do (Benavoli et al. 2016); a pair's own test does not (only Holm's family grows)."""
    values = planted(3, 50, {"a": 0.05, "b": 0.0, "c": 0.3, "d": -0.3, "e": 0.3})
    alone = pairwise({m: values[m] for m in "ab"}, True)["pairs"]["a vs b"]
    pooled = pairwise(values, True)["pairs"]["a vs b"]
    assert alone["p_wilcoxon"] == pooled["p_wilcoxon"] and alone["difference"] == pooled["difference"]


def test_the_effect_size_win_rate_and_ties():
    d = compare([1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 7])  # five wins, one loss of the largest size
    assert (d["wins"], d["ties"], d["losses"]) == (5, 0, 1) and d["win_rate"] == pytest.approx(5 / 6)
    ranks = stats.rankdata([1, 2, 3, 4, 5, 1])
    assert d["rank_biserial"] == pytest.approx((ranks[:5].sum() - ranks[5]) / ranks.sum())
    tied = compare([1, 1, 1, 1, 1, 1, 2, 3], [1, 1, 1, 1, 1, 1, 1, 1])  # ties dominate: the sign test decides
    assert tied["test"] == "sign" and tied["p"] == tied["p_sign"] == pytest.approx(stats.binomtest(2, 2).pvalue)
    same = compare([0.5] * 10, [0.5] * 10)
    assert same["p"] == 1.0 and same["direction"] == 0 and same["win_rate"] is None


def test_the_floor_is_better_not_separated_or_worse_three_ways():
    rng = np.random.default_rng(11)
    floor = rng.normal(0.4, 0.2, 80)
    values = {"good": (floor + 0.1 + rng.normal(0, 0.05, 80)).tolist(),
              "level": (floor + rng.normal(0, 0.05, 80)).tolist(),
              "bad": (floor - 0.1 + rng.normal(0, 0.05, 80)).tolist()}
    verdicts = against_floor(values, floor.tolist(), True)
    assert [verdicts[m]["verdict"] for m in values] == ["better", "not separated", "worse"]
    assert verdicts["bad"]["win_rate"] < 0.2
    flipped = against_floor({m: [-v for v in vals] for m, vals in values.items()}, (-floor).tolist(), False)
    assert [flipped[m]["verdict"] for m in values] == ["better", "not separated", "worse"]


def test_identical_methods_are_one_behaviour_and_near_identical_ones_are_not():
    a = [0.1, 0.2, None, 0.4]
    tables = [{"occ": a, "abl": list(a), "x": [0.1, 0.2, None, 0.41]},
              {"occ": [1.0, 2.0], "abl": [1.0, 2.0 + 1e-9], "x": [1.0, 2.0]}]
    assert aliases(tables) == [["occ", "abl"]]
    assert aliases([{"p": [0.1, None], "q": [0.1, 0.2]}]) == []  # undefined on different examples: different


def test_baycomps_three_probabilities_are_reproduced():
    import baycomp

    rng = np.random.default_rng(5)
    for n, mu in ((10, 0.02), (60, 0.004), (200, -0.01)):
        d = rng.normal(mu, 0.03, n)
        expected = baycomp.SignedRankTest.probs(d, np.zeros(n), rope=0.01, nsamples=400, random_state=9)
        assert bayes_signed_rank(d, 0.01, 400, 9) == pytest.approx(tuple(float(p) for p in expected))
    # differences on a grid, so that pair sums fall exactly on ±2 rope (where baycomp counts a half) and tie
    for n, rope in ((40, 0.01), (300, 0.01), (120, 0.005)):
        d = rng.choice([-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04], n)
        expected = baycomp.SignedRankTest.probs(d, np.zeros(n), rope=rope, nsamples=400, random_state=9)
        assert bayes_signed_rank(d, rope, 400, 9) == pytest.approx(tuple(float(p) for p in expected))


@pytest.mark.parametrize("n", [10, 300])
def test_difference_intervals_keep_their_coverage(n):
    rng = np.random.default_rng(n)
    covered, trials = 0, 400
    for _ in range(trials):
        base = rng.gamma(2.0, 0.1, n)
        x, y = base + 0.03 + rng.normal(0, 0.05, n), base + rng.normal(0, 0.05, n)
        low, high = compare(x.tolist(), y.tolist())["ci"]
        covered += low <= 0.03 <= high
    assert covered / trials >= 0.9


def test_tiers_follow_dominance_and_best_frequency_counts_the_leader():
    pairs = {"a vs b": {"pair": ["a", "b"], "better": "a"}, "a vs c": {"pair": ["a", "c"], "better": None},
             "b vs c": {"pair": ["b", "c"], "better": "c"}}
    assert tiers(["a", "b", "c"], pairs) == {"a": 1, "c": 1, "b": 2}
    values = planted(1, 100, {"x": 0.5, "y": 0.0})
    assert best_frequency(values, True, resamples=200)["x"] == 1.0


def test_p_values_below_the_float_range_are_not_printed_as_zero():
    assert format_p(0.0) == "< 1e-300" and format_p(3e-7) == "3e-07" and format_p(None) == "–"
    assert all(format_p(p) != "0" for p in (0.0, 1e-320))


def test_every_pair_is_tested_once():
    values = planted(2, 20, {m: 0.0 for m in "abcde"})
    result = pairwise(values, True)
    assert result["pairs_tested"] == 10
    assert {tuple(sorted(p["pair"])) for p in result["pairs"].values()} == set(itertools.combinations("abcde", 2))


def test_a_provisional_method_is_its_own_family_on_its_common_examples():
    """Compared with each published method and the floor on the examples they share, Holm over those k comparisons
    only (scipy's Wilcoxon, statsmodels' Holm); the published values are read, never changed."""
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    published = {"high": list(rng.normal(2.0, 0.3, 40)), "low": list(rng.normal(-2.0, 0.3, 40)),
                 "same": list(rng.normal(0.0, 0.3, 40))}
    floor = list(rng.normal(-1.0, 0.3, 40))
    new = list(rng.normal(0.0, 0.3, 25)) + [None] * 15  # short of the table: 25 of its 40 examples
    kept = {m: list(v) for m, v in published.items()}
    out = provisional(new, published, floor, higher_is_better=True)
    assert published == kept and out["n"] == 25 and out["comparisons"] == 4
    assert (out["beats"], out["beaten_by"], out["not_separated"]) == (["low"], ["high"], ["same"])
    assert out["floor"]["verdict"] == "better" and out["floor"]["n"] == 25
    raw = [stats.wilcoxon(np.array(new[:25]) - np.array(v[:25])).pvalue for v in [*published.values(), floor]]
    expected = multipletests(raw, method="holm")[1]
    got = [out["vs"][m]["p_holm"] for m in published] + [out["floor"]["p_holm"]]
    assert np.allclose(got, expected, rtol=1e-12)
    assert provisional(new, published, None, True)["comparisons"] == 3  # no floor: one comparison fewer
