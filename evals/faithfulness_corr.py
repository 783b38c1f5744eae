"""Faithfulness as agreement with a reference attribution (Ferrando et al. 2022, §5; DESIGN.md §5).

Per example, the Spearman correlation between a method's scores and a reference method's scores
over the non-special tokens; mean ± std over examples. References: ``grad_l2`` for SST-2 (the
classifier's predicted/gold class) and ``blank_out`` for subject-verb agreement. Two rank
conventions, recorded with every result:

- ``scipy``: ``scipy.stats.spearmanr`` (average ranks, tie-corrected Pearson of ranks);
- ``dense``: dense ranks put into ``1 - 6 Σd² / (n(n² - 1))`` with no tie correction, as the ALTI
  scripts did.

A constant score vector (or fewer than two tokens) has no Spearman: the example is counted in
``n_undefined`` and left out of the mean, never scored as 0.
"""
import numpy as np
from scipy.stats import rankdata, spearmanr

from attrbench.errors import InputError
from attrbench.evaluation import Evaluation, attributions, non_special
from attrbench.registry import EVALS, METHODS

REFERENCES = {"sst2": "grad_l2", "sva-linzen": "blank_out", "sva-generated": "blank_out"}
# Ferrando et al. 2022, Table 1 (mean Spearman, BERT-base fine-tuned models: a different model from ours)
PUBLISHED = {"sst2": {"attn_rollout": -0.03, "norm_rollout": 0.41, "alti": 0.55},
             "sva": {"attn_rollout": -0.02, "norm_rollout": 0.19, "alti": 0.40}}
RANKS = ("scipy", "dense")


def spearman(a: np.ndarray, b: np.ndarray, rank: str = "scipy") -> float | None:
    """Spearman's rho under a rank convention; None when undefined (constant input or n < 2)."""
    if rank not in RANKS:
        raise InputError(f"rank convention '{rank}' is not known; use {' or '.join(RANKS)}")
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    if rank == "scipy":
        return float(spearmanr(a, b).statistic)
    n = len(a)
    d = rankdata(a, method="dense") - rankdata(b, method="dense")
    return float(1 - 6 * (d ** 2).sum() / (n * (n ** 2 - 1)))


class FaithfulnessCorr(Evaluation):
    name, family = "faithfulness_corr", "faithfulness"
    description = "per-example Spearman with the reference attribution (grad_l2 on SST-2, blank_out on SVA)"
    reference = "Ferrando et al. 2022 (ALTI), §5"

    def run(self, adapter, methods, examples, context):
        ref_name = REFERENCES.get(context.dataset)
        if ref_name is None:
            raise InputError(f"faithfulness_corr has no reference method for dataset '{context.dataset}'; "
                             f"it knows {', '.join(REFERENCES)}")
        reference = METHODS.get(ref_name)
        self.check(adapter, [reference], context)
        refs = attributions(adapter, reference, examples, context.progress, f"reference {ref_name}")
        records = []
        for method in methods:
            results = refs if method.name == ref_name else attributions(adapter, method, examples, context.progress)
            values = []
            for ref, res in zip(refs, results):
                keep = non_special(adapter, adapter.tokenizer.convert_tokens_to_ids(ref.tokens))
                values.append(spearman(res.values[keep], ref.values[keep], context.rank))
            records.append(self.record(adapter, context, method.name, "spearman", values, examples,
                                       reference=ref_name, rank=context.rank, higher_is_better=True,
                                       published_bert=PUBLISHED[
                                           "sst2" if context.dataset == "sst2" else "sva"].get(method.name)))
        return records


EVALS.add(FaithfulnessCorr)
