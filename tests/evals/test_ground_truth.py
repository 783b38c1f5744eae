"""The ground-truth evaluation: a method that ranks the evidence first scores 1, the exact random floor equals the
mean over every ordering, words map to their tokens, and examples without evidence are refused."""
from itertools import permutations
from types import SimpleNamespace

import numpy as np
import pytest

from attrbench.datasets.base import Example
from attrbench.errors import InputError
from attrbench.evals.ground_truth import METRICS, expected, found
from attrbench.ops.perturb import answer
from attrbench.runtime.workspace import Workspace
from attrbench.registry import EVALS


@pytest.mark.parametrize("evidence,attractors", [
    ([0, 1, 0, 0, 0], [0, 0, 0, 1, 0]),
    ([1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 1]),
    ([0, 0, 1, 0], [0, 0, 0, 0]),
])
def test_the_exact_floor_is_the_mean_over_every_ordering(evidence, attractors):
    evidence, attractors = np.array(evidence, bool), np.array(attractors, bool)
    base = np.arange(1.0, len(evidence) + 1) - 1.5  # distinct, some negative: mass accuracy sees only the positive
    payloads = [found(base[list(order)], evidence, attractors) for order in permutations(range(len(evidence)))]
    floor = expected(evidence, attractors)
    for metric in METRICS:
        if floor[metric] is None:
            assert all(p[metric] is None for p in payloads)
            continue
        assert np.mean([p[metric] for p in payloads]) == pytest.approx(floor[metric], abs=1e-12), metric


def test_metrics_by_hand():
    evidence, attractors = np.array([0, 1, 0, 1], bool), np.array([1, 0, 0, 0], bool)
    out = found(np.array([0.5, 0.2, 0.9, -0.3]), evidence, attractors)
    # ranking: 2, 0, 1, 3 -> the best evidence (1) is third; attractor 0 is above it
    assert out == {"mrr": pytest.approx(1 / 3), "pointing_game": 0.0, "precision_at_k": 0.0,
                   "mass_accuracy": pytest.approx(0.2 / 1.6), "above_attractors": 0.0}
    assert found(np.array([-1.0, -2.0, -3.0, -4.0]), evidence, attractors)["mass_accuracy"] is None
    tied = found(np.zeros(4), evidence, attractors)  # ties in order of position: the attractor (0) comes first
    assert tied["mrr"] == 0.5 and tied["above_attractors"] == 0.0


TEXT = "the keys to the cabinet are on the table"


def _work(adapter, text, meta, target="auto"):
    return Workspace().work(adapter, Example("x", text, target, meta), 0, "own")


def _payload(value):
    """A payload given directly or by a generator of model-output requests."""
    return value if isinstance(value, dict) else answer(value)


def _feature_scores(perturbations, scores):
    """Token values that give each feature (word) ``scores[k]``, on its first token."""
    values = np.zeros(len(perturbations.ids))
    for feature, score in zip(perturbations.features, scores):
        values[feature[0]] = score
    return SimpleNamespace(values=values)


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_a_method_ranking_the_evidence_first_scores_one_and_random_its_expectation(tiny_models, model):
    adapter = tiny_models[(model, "float64")]
    text = TEXT if adapter.causal else TEXT.replace(" are ", " [MASK] ")
    evaluation = EVALS.get("ground_truth")
    work = _work(adapter, text, {"evidence": [1], "attractors": [4]}, "contrast:are/is")
    perturbations = work.perturbations("auto", "word")
    words = len(text.split()) - (0 if adapter.causal else 1)  # the explained [MASK] is no feature
    assert perturbations.m == words  # one feature per word, whatever the tokenizer splits
    oracle = np.full(words, -1.0)
    oracle[1] = 2.0
    best = _payload(evaluation.score(work, _feature_scores(perturbations, oracle)))
    assert best == {"mrr": 1.0, "pointing_game": 1.0, "precision_at_k": 1.0, "mass_accuracy": 1.0,
                    "above_attractors": 1.0}
    floor = _payload(evaluation.floor(work))
    assert floor["mrr"] == pytest.approx(np.mean(1.0 / np.arange(1, words + 1)))
    assert floor["pointing_game"] == floor["mass_accuracy"] == pytest.approx(1 / words)
    assert floor["above_attractors"] == 0.5 and floor["floor"] == {"exact": True}
    rng = np.random.default_rng(0)
    draws = [_payload(evaluation.score(work, _feature_scores(perturbations, rng.normal(size=words))))
             for _ in range(4000)]
    for metric in METRICS:  # seeded random attributions average to the exact floor
        values = np.array([d[metric] for d in draws if d[metric] is not None])
        assert abs(values.mean() - floor[metric]) < 4 * values.std() / np.sqrt(len(values)) + 1e-12, metric


def test_every_token_of_an_evidence_word_is_evidence(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    text = "a wonderful! film"  # "wonderful!" is two tokens
    evaluation = EVALS.get("ground_truth").with_params(unit="token")
    features, is_evidence, _ = evaluation._features(_work(adapter, text, {"evidence": [1]}, "next"))
    ids = adapter.tokenizer(text)["input_ids"]
    assert adapter.tokenizer.convert_ids_to_tokens([ids[f[0]] for f, e in zip(features, is_evidence) if e]) == [
        "wonderful", "!"]


def test_examples_without_evidence_are_refused_and_all_evidence_tells_nothing(tiny_models):
    adapter = tiny_models[("tiny-bert", "float32")]
    evaluation = EVALS.get("ground_truth")
    with pytest.raises(InputError, match="'ground_truth' needs the evidence words of each example, and none of these "
                                         "1 has them: use sst2-shortcut or sva-linzen, or a data file"):
        evaluation.check_examples(adapter, [Example("x", "a film", "auto")])
    work = _work(adapter, "a film", {"evidence": [0, 1]})
    assert _payload(evaluation.score(work, SimpleNamespace(values=np.ones(4)))) == dict.fromkeys(METRICS)
