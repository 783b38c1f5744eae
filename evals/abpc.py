"""ABPC: the area between the most- and least-relevant-first removal curves.

The protocol of AttnLRP's evaluation (Achtibat et al. 2024) and of the M4 benchmark (Li et al.
2023). For each example the m features are ordered by the method's scores (ties: earlier first);
with k = 1 .. m−1 of them removed in that order (MoRF) and in the reverse order (LeRF):

    ABPC = 1/(m−1) Σ_k [p(x without the k least relevant) − p(x without the k most relevant)]

Higher is better. **Derived, not independent**: removing the reverse ordering's first k features is
keeping the first m − k, so ABPC = AOPC_comp − AOPC_suff of the same full curves (NAOPC's raw AOPCs,
``naopc``; tested), and the report does not count it as a metric of its own. Its perturbation is
declared as for every erasure metric; the default is NAOPC's (whole words, [MASK] where the model has
one), so next to NAOPC it costs no model output of its own.
An example with fewer than two features has no curve: its value is undefined.

The random floor is exactly 0 (:meth:`ABPC.floor`, no model output): under a uniformly random ordering σ
both σ[:k] and reverse(σ)[:k] are uniformly random k-subsets, so the two curves have the same expectation
at every k (E[AOPC_comp − AOPC_suff] = 0; tested by enumerating every ordering).
"""
from attrbench.plugin import Evaluation, Param, register
from attrbench.plugin.internal import OPERATORS, UNITS


class ABPC(Evaluation):
    name, family = "abpc", "faithfulness"
    description = "area between the most- and least-relevant-first removal curves (= AOPC comp - AOPC suff)"
    reference = "Achtibat et al. 2024 (AttnLRP), §4; Li et al. 2023 (M4)"
    primary_metric = "abpc"
    higher_is_better = {"abpc": True}
    bounds = {"abpc": (-1.0, 1.0)}  # a mean difference of two probabilities
    metric_names = {"abpc": "ABPC"}
    undefined_when = {"abpc": "fewer than two features: no curve"}
    derived = "AOPC_comp - AOPC_suff of the full removal curves (naopc's raw AOPCs with the same perturbation)"
    params = {"perturbation": Param("auto", "how features are removed: delete, mask, pad or auto (mask if the model "
                                            "has a mask token, else delete)", choices=OPERATORS),
              "unit": Param("word", "what a feature is: a word or a subword token", choices=UNITS)}

    def score(self, work, result):
        perturbations = work.perturbations(self.perturbation, self.unit)
        if perturbations.m < 2:
            return {"abpc": None}
        order = perturbations.order(result.values)
        morf = yield from perturbations.curve(order)
        lerf = yield from perturbations.curve(order[::-1])
        return {"abpc": float((morf - lerf).mean())}

    floor_how = "exactly 0: the reverse of a uniformly random ordering is uniformly random"

    def floor(self, work):
        """E[ABPC] under a uniformly random ordering: 0 where there is a curve (m ≥ 2), with no model output."""
        m = work.perturbations(self.perturbation, self.unit).m
        return {"abpc": 0.0 if m >= 2 else None, "mc_se": {"abpc": 0.0}, "floor": {"exact": True}}


register(ABPC)
