"""Erasure faithfulness, ERASER style (DeYoung et al. 2020; the final ALTI paper's protocol).

For each example the m features (non-special tokens, or words: ``unit``) are ranked by the method's
scores (a word's score is the sum of its tokens'; ties: earlier first). At k = 1, 5, 10, 20, 50 %
(r = ceil(k·m/100) features):

- comprehensiveness_k = p(x) − p(x with the top-r features removed)      (higher: better)
- sufficiency_k       = p(x) − p(only the top-r features kept)          (lower: better)

p is the scored probability of the explained target (``attrbench.ops.perturb``): the predicted class
on SST-2 (as ERASER explains), the correct class of the SVA probe, and for a contrast target
(SmolLM2's correct/wrong verb) σ(logit correct − logit wrong), the contrast the methods explain.
Removal is ``perturbation`` (default ``delete``: the tokens leave the token-id sequence; ``mask``,
``pad`` replace them; ``auto``: mask where the model has a mask token) of ``unit`` (default
``token``, i.e. subword tokens; ERASER deletes whole words: ``unit = word``). Special tokens ([CLS],
[SEP], the probe's [MASK]) always stay. AOPC = the mean over the bins. ``by_bin`` keeps the mean drop
per bin and ``per_example`` each example's drops. A text that deletion would leave empty (one token,
none special: a one-word decoder prompt) has no value (``n_undefined``).

The random floor (:meth:`ErasureAOPC.floor`, leaderboard runs): under a uniformly random ordering the top r
features are a uniformly random r-subset, so each bin's expected drop is the mean over the r-subsets
(comprehensiveness: removed; sufficiency: the only ones kept), exact where there are at most
``FLOOR_DRAWS`` of them, else over ``FLOOR_DRAWS`` distinct random ones (seeded per example), with the
finite-population-corrected standard error; bins of the same r share their subsets. At most
2 · 5 · ``FLOOR_DRAWS`` model outputs per example.
"""
import math
from collections import Counter

import numpy as np

from attrbench.plugin import Evaluation, Param, register
from attrbench.plugin.internal import OPERATORS, UNITS, ceil_count, stratum_mean, subsets_of_size

BINS = (1, 5, 10, 20, 50)
PERTURBATION = Param("delete", "how features are removed: delete, mask, pad, or auto (mask if the model has a mask "
                               "token, else delete)", choices=OPERATORS)
UNIT = Param("token", "what a feature is: a subword token, or a word (the tokenizer's word split)", choices=UNITS)


class ErasureAOPC(Evaluation):
    name, family = "erasure_aopc", "faithfulness"
    description = "comprehensiveness and sufficiency AOPC of removing/keeping the top 1-50 % of features"
    reference = "DeYoung et al. 2020 (ERASER); Ferrando et al. 2022"
    headline = 2
    primary_metric = "comprehensiveness_aopc"
    higher_is_better = {"comprehensiveness_aopc": True, "sufficiency_aopc": False}
    bounds = {"comprehensiveness_aopc": (-1.0, 1.0), "sufficiency_aopc": (-1.0, 1.0)}  # mean drops of a probability
    metric_names = {"comprehensiveness_aopc": "erasure AOPC comprehensiveness",
                    "sufficiency_aopc": "erasure AOPC sufficiency"}
    undefined_when = dict.fromkeys(("comprehensiveness_aopc", "sufficiency_aopc"),
                                   "one feature: deleting it would leave nothing")
    robustness = ("comprehensiveness_aopc",)
    params = {"perturbation": PERTURBATION, "unit": UNIT}

    def score(self, work, result):
        perturbations = work.perturbations(self.perturbation, self.unit)
        m = perturbations.m
        if m == 0 or perturbations.empty_after(frozenset(range(m))) and m == 1:
            return {"comprehensiveness_aopc": None, "sufficiency_aopc": None, "by_bin": None}
        order = perturbations.order(result.values)
        everything = frozenset(range(m))
        top = [frozenset(order[:ceil_count(k, m)]) for k in BINS]
        # nothing but the top features (and no special token to keep): keep one so the input is not empty
        top = [t - {order[-1]} if perturbations.empty_after(t) else t for t in top]
        yield from perturbations.probabilities([frozenset()] + top + [everything - t for t in top])  # one request
        comp = yield from perturbations.drops(top)
        suff = yield from perturbations.drops(top, keep=True)
        return {"comprehensiveness_aopc": float(np.mean(comp)), "sufficiency_aopc": float(np.mean(suff)),
                "by_bin": {"comprehensiveness": comp.tolist(), "sufficiency": suff.tolist()}}

    floor_how = ("per bin, the mean drop over every r-subset of the features (exact) or over FLOOR_DRAWS random "
                 "ones: E under a uniformly random ordering")

    def floor(self, work):
        """Each bin's expected drops under a uniformly random ordering, built as :meth:`score` builds its sets."""
        perturbations = work.perturbations(self.perturbation, self.unit)
        m = perturbations.m
        everything = frozenset(range(m))
        if m == 0 or perturbations.empty_after(everything) and m == 1:
            return {"comprehensiveness_aopc": None, "sufficiency_aopc": None, "by_bin": None, "floor": {"exact": True}}
        # score()'s rule: top features that are everything (no special token) lose the last feature, a random one
        sizes = [m - 1 if r == m and perturbations.empty_after(everything) else r
                 for r in (ceil_count(k, m) for k in BINS)]
        rng = work.rng("floor:erasure_aopc")
        strata = {r: subsets_of_size(m, r, self.floor_draws, rng) for r in sorted(set(sizes))}
        flat = [s for stratum in strata.values() for s in stratum]
        yield from perturbations.probabilities([frozenset()] + flat + [everything - s for s in flat])  # one request
        drops = {"comprehensiveness": (yield from perturbations.drops(flat)),
                 "sufficiency": (yield from perturbations.drops(flat, keep=True))}
        weights = Counter(sizes)  # bins per size: AOPC = Σ_r (bins of r / 5) · mean drop of r
        out = {"by_bin": {}, "mc_se": {}, "floor": {"exact": all(len(v) == math.comb(m, r) for r, v in strata.items()),
                                                    "subsets": len(flat)}}
        for kind, metric in (("comprehensiveness", "comprehensiveness_aopc"), ("sufficiency", "sufficiency_aopc")):
            estimates, at = {}, 0
            for r, stratum in strata.items():
                estimates[r] = stratum_mean(drops[kind][at:at + len(stratum)], math.comb(m, r))
                at += len(stratum)
            out["by_bin"][kind] = [estimates[r][0] for r in sizes]
            out[metric] = float(np.mean(out["by_bin"][kind]))
            out["mc_se"][metric] = math.sqrt(sum((c / len(BINS)) ** 2 * estimates[r][1] for r, c in weights.items()))
        return out

    def summarise(self, scored, shared):
        out = super().summarise(scored, shared)
        for key, payloads in scored.items():
            for kind, metric in (("comprehensiveness", "comprehensiveness_aopc"), ("sufficiency", "sufficiency_aopc")):
                drops = [p["by_bin"][kind] for p in payloads if p is not None and p.get("by_bin")]
                out[key][metric]["by_bin"] = ({str(k): float(v) for k, v in zip(BINS, np.mean(drops, 0))} if drops
                                              else {str(k): None for k in BINS})
                out[key][metric]["per_example"] = [p["by_bin"][kind] if p is not None and p.get("by_bin") else None
                                                   for p in payloads]
                out[key][metric]["bins_percent"] = list(BINS)
        return out


register(ErasureAOPC)
