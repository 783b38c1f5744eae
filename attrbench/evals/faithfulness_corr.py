"""Agreement with a reference attribution, the ALTI paper's faithfulness proxy (Ferrando et al. 2022, §4, Table 2).

It measures how closely a method agrees with another method, not how faithful it is to the model: the
report shows it apart from the faithfulness metrics (family ``agreement``), with the reference unranked.

Per example, the Spearman correlation between a method's scores and a reference method's scores
over the non-special tokens; mean ± std over examples. The references are the ALTI paper's
protocol: ``grad_l2`` for SST-2 (the classifier's gold or predicted class) and ``blank_out`` for
subject-verb agreement. On other data (a file of your own, a third-party dataset) the reference is
not guessed: set ``reference_method`` (the paper's choice was ``grad_l2`` for classes and
``blank_out`` for word contrasts). The rank convention is a parameter (``rank``), recorded with every result:

- ``scipy``: ``scipy.stats.spearmanr`` (average ranks, tie-corrected Pearson of ranks);
- ``dense``: dense ranks put into ``1 - 6 Σd² / (n(n² - 1))`` with no tie correction, as the ALTI
  scripts did.

A constant score vector (or fewer than two tokens) has no Spearman: the example is counted in
``n_undefined`` and left out of the mean, never scored as 0.
"""
from attrbench.plugin import (
    METHODS,
    RANKS,
    Evaluation,
    InputError,
    Param,
    UnknownPluginError,
    non_special,
    register,
    spearman,
)

REFERENCES = {"sst2": "grad_l2", "sva-linzen": "blank_out", "sva-generated": "blank_out"}
# Ferrando et al. 2022, Table 2 (mean Spearman, BERT-base fine-tuned models: a different model from ours)
_SVA = {"attn_rollout": -0.02, "norm_rollout": 0.19, "alti": 0.40}
PUBLISHED = {"sst2": {"attn_rollout": -0.03, "norm_rollout": 0.41, "alti": 0.55}, "sva-linzen": _SVA,
             "sva-generated": _SVA}
PUBLISHED_SOURCE = "Ferrando et al. 2022, Table 2 (BERT-base, another model)"


class FaithfulnessCorr(Evaluation):
    name, family = "faithfulness_corr", "agreement"
    description = "per-example Spearman with the reference attribution (grad_l2 on SST-2, blank_out on SVA)"
    reference = "Ferrando et al. 2022 (ALTI), §4"
    params = {"rank": Param("scipy", "Spearman convention: scipy (tie-corrected) or dense (the ALTI scripts)",
                            choices=RANKS),
              "reference_method": Param("auto", "the method scores are compared with: auto (the ALTI paper's: "
                                                "grad_l2 on sst2, blank_out on agreement) or a method name")}
    primary_metric = "spearman"
    higher_is_better = {"spearman": True}
    record_fields = ("reference", "rank", "published")

    def reference_for(self, dataset: str) -> str:
        if self.reference_method != "auto":
            return self.reference_method
        if dataset not in REFERENCES:
            raise InputError(f"faithfulness_corr has no reference method for '{dataset}' (the paper's are for "
                             f"{', '.join(REFERENCES)}): set its reference_method, e.g. --param "
                             "faithfulness_corr.reference_method=blank_out (or grad_l2 for classes)")
        return REFERENCES[dataset]

    def check(self, adapter, methods, context):
        super().check(adapter, methods, context)
        try:
            reference = METHODS.get(self.reference_for(context.dataset))
        except UnknownPluginError as err:
            raise InputError(f"faithfulness_corr reference_method: {err}") from None
        super().check(adapter, [reference], context)

    def score(self, work, result):
        ref_name = self.reference_for(work.dataset)
        reference = work.attribution(METHODS.get(ref_name))
        keep = non_special(work.adapter, work.ids)
        value = PUBLISHED.get(work.dataset, {}).get(result.method)
        # the paper's numbers hold for its own reference only
        published = value is not None and ref_name == REFERENCES.get(work.dataset)
        return {"spearman": spearman(result.values[keep], reference.values[keep], self.rank),
                "reference": ref_name, "rank": self.rank,
                "published": {"value": value, "source": PUBLISHED_SOURCE} if published else None}


register(FaithfulnessCorr)
