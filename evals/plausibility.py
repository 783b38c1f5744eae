"""Plausibility: how well an attribution agrees with the words a person marked as the evidence.

The metrics of ferret (Attanasio et al. 2023), after ERASER (DeYoung et al. 2020). The rationale's
words are mapped to the tokens that cover them (``attrbench.ops.tokens.word_tokens``); per example,
over its non-special tokens:

- ``auprc``: average precision of the scores as a ranking of the rationale tokens
  (scikit-learn's ``average_precision_score``; 1 when every rationale token outranks every other);
- ``token_f1`` and ``token_iou``: the top-k tokens by score (k = the number of rationale tokens, ties
  in order of position, as every ranking here) against the rationale tokens:
  F1 = 2|P∩R| / (|P| + |R|), IOU = |P∩R| / |P∪R|.

Scores are read as evidence for the target, higher is more (as the erasure metrics read them).
An example without a rationale, or whose rationale marks none or all of its tokens, tells nothing
about a ranking: it has no value (``n_undefined``). Needs a dataset with rationales
(docs/own-data.md); the planner refuses one without, before any work.
"""
import numpy as np

from attrbench.plugin import Evaluation, InputError, ranked, register
from attrbench.plugin.internal import non_special, word_tokens


class Plausibility(Evaluation):
    name, family = "plausibility", "plausibility"
    description = "agreement with human rationales: token AUPRC, top-k token F1 and IOU"
    reference = "DeYoung et al. 2020 (ERASER); Attanasio et al. 2023 (ferret)"
    primary_metric = "auprc"
    higher_is_better = {"auprc": True, "token_f1": True, "token_iou": True}
    bounds = {"auprc": (0.0, 1.0), "token_f1": (0.0, 1.0), "token_iou": (0.0, 1.0)}

    def check_examples(self, adapter, examples):
        if not any("rationale" in e.meta for e in examples):
            raise InputError(f"evaluation 'plausibility' needs human rationales, and none of these {len(examples)} "
                             "examples has one: use a data file with a rationale (or rationale_mask) field")

    def score(self, work, result):
        marked = self.rationale_tokens(work.adapter, work.example)
        if marked is None:
            return dict.fromkeys(self.higher_is_better)
        scores = np.asarray(result.values, dtype=np.float64)[marked[0]]
        return dict(zip(self.higher_is_better, agreement(scores, marked[1])))

    @staticmethod
    def rationale_tokens(adapter, example):
        """(positions of the non-special tokens, bool rationale over them), or None when it says nothing."""
        if "rationale" not in example.meta:
            return None
        ids = adapter.tokenizer(example.text)["input_ids"]
        positions = non_special(adapter, ids)
        marked = word_tokens(adapter, example.text, example.meta["rationale"])[positions]
        return None if marked.all() or not marked.any() else (positions, marked)


def agreement(scores: np.ndarray, rationale: np.ndarray) -> tuple[float, float, float]:
    """(AUPRC, top-k F1, top-k IOU) of ``scores`` against a bool ``rationale`` over the same tokens."""
    from sklearn.metrics import average_precision_score  # heavy (1 s to import): only when rationales are scored

    k = int(rationale.sum())
    top = np.zeros(len(scores), dtype=bool)
    top[ranked(scores)[:k]] = True
    hits = int((top & rationale).sum())
    return (float(average_precision_score(rationale, scores)), 2 * hits / (2 * k), hits / int((top | rationale).sum()))


register(Plausibility)
