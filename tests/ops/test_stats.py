"""The statistics behind every table: bootstrap CIs, paired tests, Holm, significance tiers."""
import numpy as np
import pytest

from attrbench.ops.stats import holm, interval, paired_p, tiers


def test_bootstrap_ci_covers_the_true_mean_at_its_level():
    """400 seeded samples of known mean: the 95 % BCa interval covers it 93-97 % of the time (BCa is
    slightly below its level for small n: 93.7 % at n = 80, 94.7 % at n = 200 over 1,500 repetitions)."""
    covered = 0
    for rep in range(400):
        data = np.random.default_rng(rep).normal(loc=0.3, scale=1.0, size=200)
        low, high = interval(data.tolist(), seed=rep)["ci"]
        covered += low <= 0.3 <= high
    assert 0.93 <= covered / 400 <= 0.97, covered / 400


def test_ci_says_why_instead_of_a_number():
    assert interval([0.5]) == {"ci": None, "ci_note": "CI needs n ≥ 2 (n = 1)"}
    assert interval([None, None])["ci"] is None
    assert interval([0.2, 0.2, None, 0.2])["ci"] == [0.2, 0.2]
    result = interval([0.1, 0.5, 0.4, None])
    assert result["ci_method"] == "BCa" and result["ci"][0] < 1 / 3 < result["ci"][1]


def test_holm_matches_the_step_down_definition():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1, kept monotone


def test_paired_p_uses_the_examples_both_define():
    assert paired_p([1, 2, 3], [1, 2, 3]) == 1.0
    assert paired_p([1, None], [2, 3]) is None  # one usable pair
    rng = np.random.default_rng(0)
    a = rng.normal(size=50)
    assert paired_p(a + 1.0, a) < 1e-6


def test_tiers_separate_a_planted_difference_and_not_identical_methods():
    rng = np.random.default_rng(1)
    base = rng.normal(size=120)
    values = {"strong": base + 0.4 + rng.normal(scale=0.3, size=120),
              "twin_a": base + rng.normal(scale=0.3, size=120)}
    values["twin_b"] = values["twin_a"].copy()  # identical on every example
    result = tiers({k: v.tolist() for k, v in values.items()}, higher_is_better=True)
    assert result["tier"] == {"strong": 1, "twin_a": 2, "twin_b": 2}
    assert result["p_values"]["twin_a vs twin_b"] == 1.0 and result["p_values"]["strong vs twin_a"] < 0.05
    lower = tiers({k: v.tolist() for k, v in values.items()}, higher_is_better=False)
    assert lower["tier"] == {"twin_a": 1, "twin_b": 1, "strong": 2}


def test_tiers_share_rank_one_when_the_data_cannot_separate():
    rng = np.random.default_rng(2)
    noise = {m: rng.normal(size=12).tolist() for m in ("a", "b", "c")}  # same distribution, few examples
    assert set(tiers(noise, True)["tier"].values()) == {1}
    assert tiers({"a": [None, None], "b": [1.0, 2.0]}, True)["tier"] == {"b": 1}  # no defined value: no tier


def _record(method, eval_name, metric, mean):
    return {"model": "m", "dataset": "d", "eval": eval_name, "method": method, "metric": metric, "mean": mean,
            "ci": [mean - 0.1, mean + 0.1], "n": 5, "n_undefined": 0}


def test_metric_agreement_is_kendall_tau_of_the_oriented_rankings():
    from attrbench.report.tables import agreement_tables

    means = {"a": 0.9, "b": 0.5, "c": 0.1, "d": 0.3}
    records = [_record(m, "erasure_aopc", "comprehensiveness_aopc", v) for m, v in means.items()]
    records += [_record(m, "erasure_aopc", "sufficiency_aopc", v) for m, v in means.items()]  # lower is better
    records += [_record(m, "abpc", "abpc", v) for m, v in means.items()]
    (title, frame, _), = agreement_tables(records)
    matrix = frame.set_index("metric")
    assert title == "m · d · metric agreement"
    assert matrix.loc["erasure_aopc.comprehensiveness_aopc", "abpc.abpc"] == "1.00"
    assert matrix.loc["erasure_aopc.sufficiency_aopc", "abpc.abpc"] == "-1.00"  # same numbers, opposite direction


def test_pareto_front_keeps_the_undominated_points():
    from attrbench.report.figures import pareto_front

    points = [(1.0, 0.2), (2.0, 0.5), (3.0, 0.4), (0.5, 0.1), (2.0, 0.6)]
    assert sorted(pareto_front(points)) == [0, 3, 4]
