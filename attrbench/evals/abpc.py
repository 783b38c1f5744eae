"""ABPC: the area between the most- and least-relevant-first deletion curves.

The protocol of AttnLRP's evaluation (Achtibat et al. 2024) and of the M4 benchmark (Li et al.
2023). For each example the m non-special tokens are ordered by the method's scores (ties: earlier
token first); with k = 1 .. m−1 of them deleted in that order (MoRF) and in the reverse order (LeRF):

    ABPC = 1/(m−1) Σ_k [p(target | x without the k least relevant) − p(target | x without the k most relevant)]

Higher is better: deleting the tokens a faithful method calls important hurts the prediction more
than deleting those it calls unimportant. k = m is left out (the same text for every ordering).
Deletions are in token-id space, as in ``erasure_aopc`` (one helper: ``attrbench.ops.perturb.Deletions``).
An example with fewer than two non-special tokens has no curve: its value is undefined.
"""
import numpy as np

from attrbench.plugin import Deletions, Evaluation, register


def abpc(deletions: Deletions, scores: np.ndarray):
    """The ABPC of one example's scores, or None when it has fewer than two non-special tokens."""
    if deletions.m < 2:
        return None
    order = deletions.order(scores)
    return float(np.mean(deletions.curve(order) - deletions.curve(order[::-1])))


class ABPC(Evaluation):
    name, family = "abpc", "faithfulness"
    description = "area between the most- and least-relevant-first deletion curves (token ids)"
    reference = "Achtibat et al. 2024 (AttnLRP), §4; Li et al. 2023 (M4)"
    primary_metric = "abpc"
    higher_is_better = {"abpc": True}

    def run(self, adapter, methods, examples, context):
        records = []
        for method in methods:
            values = []
            for example, result in zip(examples, context.attributions(adapter, method, examples)):
                ids = adapter.tokenizer.convert_tokens_to_ids(result.tokens)
                values.append(abpc(context.deletions(adapter, ids, example.target), result.values))
            records.append(self.record(adapter, context, method, "abpc", values, examples))
        return records


register(ABPC)
