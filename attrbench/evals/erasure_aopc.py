"""Erasure faithfulness, ERASER style (DeYoung et al. 2020; the final ALTI paper's protocol).

For each example the non-special tokens are ranked by the method's scores (ties: earlier position
first). At k = 1, 5, 10, 20, 50 % (r = ceil(k·m/100) of the m non-special tokens):

- comprehensiveness_k = p(target | x) − p(target | x with the top-r tokens deleted)   (higher: better)
- sufficiency_k      = p(target | x) − p(target | only the top-r tokens kept)       (lower: better)

Tokens are deleted from the token-id sequence (never decoded and re-tokenised); special tokens
([CLS], [SEP], the probe's [MASK]) always stay, and the target is read at its own row of each
perturbed sequence. The target is fixed on the unperturbed text (its predicted class or token).
AOPC = the mean over the bins. All 2 × 5 perturbations of an example go through one batch
(``attrbench.ops.perturb.Deletions``, the helper every erasure curve uses).
``per_example`` keeps each example's drop per bin. A text that deleting would leave empty (one
token, none special: a one-word prompt of a decoder) has no value (``n_undefined``).
"""
import numpy as np

from attrbench.plugin import Evaluation, ceil_count, register

BINS = (1, 5, 10, 20, 50)


class ErasureAOPC(Evaluation):
    name, family = "erasure_aopc", "faithfulness"
    description = "comprehensiveness and sufficiency AOPC of deleting/keeping the top 1-50 % tokens"
    reference = "DeYoung et al. 2020 (ERASER); Ferrando et al. 2022"
    primary_metric = "comprehensiveness_aopc"
    higher_is_better = {"comprehensiveness_aopc": True, "sufficiency_aopc": False}

    def run(self, adapter, methods, examples, context):
        records = []
        for method in methods:
            results = context.attributions(adapter, method, examples)
            comp, suff = [], []
            for example, result in zip(examples, results):
                ids = adapter.tokenizer.convert_tokens_to_ids(result.tokens)
                deletions = context.deletions(adapter, ids, example.target)
                if deletions.m == 0 or len(ids) < 2:  # nothing to delete, or deleting it leaves no text
                    comp.append(None)
                    suff.append(None)
                    continue
                order = deletions.order(result.values)
                everything = frozenset(range(deletions.m))
                top = [frozenset(order[:ceil_count(k, deletions.m)]) for k in BINS]
                # nothing but the top tokens (no special token to keep): keep one so the text is not empty
                top = [t - {order[-1]} if len(t) == len(ids) else t for t in top]
                deletions.probabilities(top + [everything - t for t in top])  # all 2 x 5 variants in one batch
                comp.append(deletions.drops(top).tolist())
                suff.append(deletions.drops(top, keep=True).tolist())
            for metric, values in (("comprehensiveness_aopc", comp), ("sufficiency_aopc", suff)):
                records.append(self.record(adapter, context, method, metric,
                                           [None if v is None else float(np.mean(v)) for v in values], examples,
                                           bins_percent=list(BINS), per_example=values, by_bin=by_bin(values)))
        return records

    def merge(self, shards):
        merged = super().merge(shards)
        merged["by_bin"] = by_bin(merged["per_example"])
        return merged


def by_bin(drops: list) -> dict:
    """Mean drop per bin over the examples that have one; ``drops`` is a list of per-bin lists (or None)."""
    defined = np.array([d for d in drops if d is not None]).reshape(-1, len(BINS))
    return {str(k): float(v) if len(defined) else None for k, v in zip(BINS, defined.mean(0) if len(defined) else BINS)}


register(ErasureAOPC)
