"""Ground truth: does an attribution find the words that are known to decide the model's output?

Two protocols give a known answer, and an example carries it as word indices of its text (``meta["evidence"]``,
and for agreement ``meta["attractors"]``; a data file's ``evidence`` / ``attractors`` columns, docs/own-data.md):

- planted shortcuts (Bastings et al., EMNLP 2022): words inserted into SST-2 sentences that decide the label of a
  classifier trained with them (``minilm-l6-sst2-shortcut`` on ``sst2-shortcut``, its reliance verified);
- agreement evidence (Ferrando et al. 2023; Arras et al. 2025, arXiv 2502.15886): the subject noun decides the verb's
  number, so an explanation of logit(correct) − logit(wrong) should rank it first, above the attractor nouns
  (``sva-linzen``, positions from a dependency parse, ``attrbench/datasets/data/README.md``).

Per example, over its features (``unit``: the tokenizer's words, a word's score the sum of its tokens' as the erasure
metrics read it, or single tokens; a feature is evidence when it covers part of an evidence word), with the ranking
every evaluation uses (highest first, ties in order of position):

- ``mrr``: 1 / the rank of the best-ranked evidence feature (Arras et al.'s mean reciprocal rank);
- ``pointing_game``: 1 if the top feature is evidence, else 0 (top-1 accuracy);
- ``precision_at_k``: the share of evidence among the top k features, k = the number of evidence features;
- ``mass_accuracy``: the positive score on evidence over all positive score (relevance mass accuracy; undefined
  when no feature has a positive score);
- ``above_attractors``: 1 if the best evidence feature scores above every attractor, else 0 (examples with
  attractors only).

Higher is better for all. An example without evidence, or whose evidence covers none or all of its features, has
no value. The random floor is exact (no model output): under a uniformly random ordering of n features with m of
them evidence and a attractors, E[1/rank of the best evidence] = Σ_r (1/r)·C(n−r, m−1)/C(n, m), the pointing game
and precision@m are m/n, mass accuracy is m/n (exchangeable scores share the positive mass equally in
expectation), and P(best evidence above every attractor) = m/(m + a).
"""
from math import comb

import numpy as np

from attrbench.plugin import Evaluation, InputError, Param, ranked, register
from attrbench.plugin.internal import UNITS, word_tokens

METRICS = ("mrr", "pointing_game", "precision_at_k", "mass_accuracy", "above_attractors")


class GroundTruth(Evaluation):
    name, family = "ground_truth", "ground truth"
    description = "finds the known evidence: mean reciprocal rank, pointing game, precision@k, relevance mass"
    reference = ("Bastings et al. 2022 (planted shortcuts); Ferrando et al. 2023; Arras et al. 2025 "
                 "(arXiv 2502.15886, agreement evidence)")
    primary_metric = "mrr"
    higher_is_better = dict.fromkeys(METRICS, True)
    bounds = dict.fromkeys(METRICS, (0.0, 1.0))
    metric_names = {"mrr": "ground-truth MRR", "pointing_game": "pointing game", "precision_at_k": "precision@k",
                    "mass_accuracy": "relevance mass accuracy", "above_attractors": "evidence above attractors"}
    undefined_when = {**dict.fromkeys(("mrr", "pointing_game", "precision_at_k", "mass_accuracy"),
                                      "no evidence located, or evidence covering none or all of the features"),
                      "above_attractors": "no attractor noun, or no evidence located, or evidence covering none or "
                                          "all of the features"}
    at_bound_when = {  # 1 is the known answer found, not a saturated scale
        "mrr": "the method's top feature is evidence", "pointing_game": "the method's top feature is evidence",
        "precision_at_k": "the method's top features are all evidence",
        "mass_accuracy": "all of the method's positive score is on the evidence",
        "above_attractors": "the method puts the evidence above every attractor"}
    robustness = ()  # a known answer, not one more faithfulness vote: reported apart and used to judge the metrics
    headline = 200
    params = {"unit": Param("word", "what a feature is: a word (its tokens' scores summed) or a subword token",
                            choices=UNITS)}
    floor_how = "exact: the expectation of each metric under a uniformly random ordering of the features"

    def check_examples(self, adapter, examples):
        if not any(e.meta.get("evidence") for e in examples):
            raise InputError(f"evaluation 'ground_truth' needs the evidence words of each example, and none of these "
                             f"{len(examples)} has them: use sst2-shortcut or sva-linzen, or a data file with an "
                             "evidence column (word indices)")

    def _features(self, work):
        """(features' token positions, bool evidence per feature, bool attractor per feature), or None."""
        evidence = work.example.meta.get("evidence")
        if not evidence:
            return None
        features = work.perturbations("auto", self.unit).features
        text = work.example.text

        def covered(words):
            marked = word_tokens(work.adapter, text, words)
            return np.array([bool(marked[f].any()) for f in features], dtype=bool)

        is_evidence = covered(evidence)
        if is_evidence.all() or not is_evidence.any():
            return None
        attractors = work.example.meta.get("attractors")
        is_attractor = covered(attractors) & ~is_evidence if attractors else np.zeros(len(features), dtype=bool)
        return features, is_evidence, is_attractor

    def score(self, work, result):
        parts = self._features(work)
        if parts is None:
            return dict.fromkeys(METRICS)
        features, evidence, attractors = parts
        values = np.asarray(result.values, dtype=np.float64)
        return found(np.array([values[f].sum() for f in features]), evidence, attractors)

    def floor(self, work):
        parts = self._features(work)
        out = dict.fromkeys(METRICS) if parts is None else expected(*parts[1:])
        return {**out, "mc_se": dict.fromkeys(METRICS, 0.0), "floor": {"exact": True}}


def found(scores: np.ndarray, evidence: np.ndarray, attractors: np.ndarray) -> dict:
    """The five metrics of one example's feature ``scores`` against bool ``evidence`` (and ``attractors``)."""
    order = np.asarray(ranked(scores))
    hits = evidence[order]
    k = int(evidence.sum())
    positive = np.clip(scores, 0.0, None)
    mass = float(positive[evidence].sum() / positive.sum()) if positive.sum() > 0 else None
    above = None
    if attractors.any():
        rank = np.empty(len(order), dtype=int)
        rank[order] = np.arange(len(order))
        above = float(rank[evidence].min() < rank[attractors].min())  # the ranking's tie rule decides ties
    return {"mrr": 1.0 / (int(np.argmax(hits)) + 1), "pointing_game": float(hits[0]),
            "precision_at_k": float(hits[:k].mean()), "mass_accuracy": mass, "above_attractors": above}


def expected(evidence: np.ndarray, attractors: np.ndarray) -> dict:
    """Each metric's expectation under a uniformly random ordering of the features (the module docstring)."""
    n, m, a = len(evidence), int(evidence.sum()), int(attractors.sum())
    mrr = sum(comb(n - r, m - 1) / r for r in range(1, n - m + 2)) / comb(n, m)
    return {"mrr": mrr, "pointing_game": m / n, "precision_at_k": m / n, "mass_accuracy": m / n,
            "above_attractors": m / (m + a) if a else None}


register(GroundTruth)
