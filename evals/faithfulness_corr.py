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

The yardstick's sign (``reference_sign``). The paper's references are unsigned: ``grad_l2`` is a
gradient norm and ``blank_out`` is |p(x) − p(x with token j blanked)|. Many methods give signed
scores (positive: the token pushes towards the target; grad × input, ALTI-Logit, LRP, DecompX), and
a language model's targets are logits or logit differences (``contrast:A/B`` explains logit A −
logit B); a Spearman between a signed attribution and an unsigned change compares a direction with
a magnitude, so a method that gets every direction right can score below 0. The signed yardstick is
the leave-one-out erasure baseline of ALTI-Logit (Ferrando et al. 2023): ``blank_out`` with
``signed=True``, p(x) − p(x with token j blanked), whose ranks for a contrast equal those of the
change of logit A − logit B (its readout σ(logit A − logit B) is monotone).

- ``unsigned``: the references as the paper used them. Kept for the class targets of its protocol
  (a classifier's class, as minilm-l6-sst2 on SST-2, and the agreement probe's class, as
  minilm-l6-sva on SVA), where ``published`` numbers apply.
- ``signed``: ``blank_out``'s signed form; a reference with no signed form (``grad_l2``) is refused.
- ``auto`` (the default): signed for the vocabulary targets of a language model when the
  reference has a signed form, unsigned otherwise. Which targets those are follows from the model's
  head (``head_kind``), since a head takes only its own kind of target (``attrbench.ops.targets``):
  a masked or causal LM explains a vocabulary logit, ``contrast:A/B``, ``token:W``, ``next``,
  ``mask`` or ``auto`` (its predicted token); a classifier or token classifier explains a class.
  ``next`` and ``token:W`` on a causal LM count as logit targets: the methods explain that token's
  logit and the signed ones give its direction, ALTI-Logit's own setting is a causal LM's next
  token, and the paper's unsigned protocol covered classifier heads only.

A run fixes ``auto`` when it plans a suite (:meth:`FaithfulnessCorr.resolve`), so a row's key names
the concrete sign. ``unsigned`` is what rows had before the parameter existed and is left out of
the key (``attrbench.params``): the MiniLM rows keep their keys; a language model's rows get
``reference_sign=signed`` in theirs and are computed afresh. Every result records its reference as
the method with the parameters it has off their defaults: ``grad_l2``, ``blank_out`` (unsigned) or
``blank_out(signed=True)``.
"""
import numpy as np

from attrbench.plugin import METHODS, Evaluation, InputError, Param, UnknownPluginError, register, spearman
from attrbench.plugin.internal import RANKS, expected_spearman, head_kind, non_special, params_key

REFERENCES = {"sst2": "grad_l2", "sva-linzen": "blank_out", "sva-generated": "blank_out"}
SIGNS = ("auto", "signed", "unsigned")
LOGIT_HEADS = ("masked_lm", "causal_lm")  # heads whose targets are vocabulary logits (contrast, token, next, mask)
# Ferrando et al. 2022, Table 2 (mean Spearman, BERT-base fine-tuned models: a different model from ours)
_SVA = {"attn_rollout": -0.02, "norm_rollout": 0.19, "alti": 0.40}
PUBLISHED = {"sst2": {"attn_rollout": -0.03, "norm_rollout": 0.41, "alti": 0.55}, "sva-linzen": _SVA,
             "sva-generated": _SVA}
PUBLISHED_SOURCE = "Ferrando et al. 2022, Table 2 (BERT-base, another model)"


class FaithfulnessCorr(Evaluation):
    name, family = "faithfulness_corr", "agreement"
    description = ("per-example Spearman with the reference attribution (grad_l2 on SST-2, blank_out on SVA; signed "
                   "blank_out for a language model's logit and contrast targets)")
    reference = "Ferrando et al. 2022 (ALTI), §4; Ferrando et al. 2023 (ALTI-Logit: signed erasure)"
    params = {"rank": Param("scipy", "Spearman convention: scipy (tie-corrected) or dense (the ALTI scripts)",
                            choices=RANKS),
              "reference_method": Param("auto", "the method scores are compared with: auto (the ALTI paper's: "
                                                "grad_l2 on sst2, blank_out on agreement) or a method name"),
              "reference_sign": Param("auto", "the reference's sign: auto (signed for a language model's logit and "
                                              "contrast targets, unsigned for classes, fixed when a suite is "
                                              "planned), signed (blank_out's p(x) - p(x with token j blanked)) or "
                                              "unsigned (the paper's)", choices=SIGNS, legacy="unsigned")}
    primary_metric = "spearman"
    higher_is_better = {"spearman": True}
    bounds = {"spearman": (-1.0, 1.0)}
    metric_names = {"spearman": "Spearman with the reference attribution"}
    undefined_when = {"spearman": "fewer than two tokens, or a constant reference: no rank correlation"}
    record_fields = ("reference", "rank", "published")

    def reference_for(self, dataset: str) -> str:
        if self.reference_method != "auto":
            return self.reference_method
        if dataset not in REFERENCES:
            raise InputError(f"faithfulness_corr has no reference method for '{dataset}' (the paper's are for "
                             f"{', '.join(REFERENCES)}): set its reference_method, e.g. --param "
                             "faithfulness_corr.reference_method=blank_out (or grad_l2 for classes)")
        return REFERENCES[dataset]

    def sign_for(self, adapter, reference) -> str:
        """``signed`` or ``unsigned``: the value given, or for ``auto`` signed where ``adapter``'s targets are
        vocabulary logits (a language-model head) and ``reference`` has a signed form."""
        if self.reference_sign != "auto":
            return self.reference_sign
        return "signed" if head_kind(adapter) in LOGIT_HEADS and "signed" in reference.params else "unsigned"

    def reference_method_for(self, adapter, dataset: str):
        """The reference method, with its sign set: blank_out(signed=...), or a method with one form as it is."""
        name = self.reference_for(dataset)
        try:
            reference = METHODS.get(name)
        except UnknownPluginError as err:
            raise InputError(f"faithfulness_corr reference_method: {err}") from None
        sign = self.sign_for(adapter, reference)
        if "signed" in reference.params:
            return reference.with_params(signed=sign == "signed")
        if sign == "signed":
            raise InputError(f"faithfulness_corr reference_sign=signed: the reference '{name}' has no signed form; "
                             "use reference_method=blank_out (signed leave-one-out) or reference_sign=unsigned")
        return reference

    def resolve(self, adapter, dataset, examples):
        if self.reference_sign != "auto":
            return self
        return self.with_params(reference_sign=self.sign_for(adapter, self.reference_method_for(adapter, dataset)))

    def check(self, adapter, methods, context):
        super().check(adapter, methods, context)
        super().check(adapter, [self.reference_method_for(adapter, context.dataset)], context)

    score_reads_shared = True

    def _reference(self, work):
        """The reference method and its label: named by the parameters it has off their defaults (grad_l2,
        blank_out, blank_out(signed=True))."""
        reference = self.reference_method_for(work.adapter, work.dataset)
        return reference, params_key(reference.name, {k: v for k, v in reference.get_params().items()
                                                       if v != reference.params[k].default})

    def shared(self, work):
        """The reference's scores of the example (every token), which every method is compared with: kept in the
        example's shared row, so that a method added to a run that holds the row does not attribute the reference
        again (blank_out's, one model input per token, cost more than a gradient method's own attribution)."""
        reference, label = self._reference(work)
        return {"reference": label, "values": [float(v) for v in work.attribution(reference).values]}

    def reference_values(self, work) -> np.ndarray:
        """The reference's scores: from the example's shared row where the run holds it, else attributed."""
        reference, label = self._reference(work)
        held = work.shared_payload(self)
        if isinstance(held, dict) and held.get("reference") == label and len(held.get("values") or ()) == len(work.ids):
            return np.asarray(held["values"], dtype=np.float64)
        return work.attribution(reference).values  # a row written before it held the reference's scores

    def score(self, work, result):
        _, label = self._reference(work)
        ref_values = self.reference_values(work)
        keep = non_special(work.adapter, work.ids)
        value = PUBLISHED.get(work.dataset, {}).get(result.method)
        # the paper's numbers hold for its own (unsigned) reference only
        published = value is not None and label == REFERENCES.get(work.dataset)
        return {"spearman": spearman(result.values[keep], ref_values[keep], self.rank),
                "reference": label, "rank": self.rank,
                "published": {"value": value, "source": PUBLISHED_SOURCE} if published else None}

    def floor(self, work):
        """E[Spearman(uniformly random scores, reference)], exact (``attrbench.ops.floors``): 0 with scipy's
        tie-corrected ranks, a closed form in the reference's dense ranks with ``dense``; None where the reference
        is constant (as for every method). Costs the reference attribution only."""
        _, label = self._reference(work)
        keep = non_special(work.adapter, work.ids)
        return {"spearman": expected_spearman(self.reference_values(work)[keep], self.rank),
                "reference": label, "rank": self.rank, "published": None, "mc_se": {"spearman": 0.0},
                "floor": {"exact": True, "how": "exact: 0 with tie-corrected ranks (a uniformly random permutation "
                                                "against fixed ranks), a closed form with dense ranks"}}


register(FaithfulnessCorr)
