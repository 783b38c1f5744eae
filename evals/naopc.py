"""Normalised AOPC (Edin et al. 2024, "Normalized AOPC: fixing misleading faithfulness metrics").

A raw AOPC cannot be compared across examples or models: how far it can go depends on the example.
NAOPC rescales each example's AOPC by the lowest and highest AOPC that any ordering of its m
features reaches:

    AOPC_comp(σ) = 1/(m−1) Σ_{k=1..m−1} [p(x) − p(x with σ[:k] removed)]     (higher: better)
    AOPC_suff(σ) = 1/(m−1) Σ_{k=1..m−1} [p(x) − p(only σ[:k] kept)]          (lower: better)
    NAOPC(σ)     = (AOPC(σ) − L) / (H − L)

Since keeping σ[:k] is removing the reverse ordering's first m − k features, AOPC_suff(σ) =
AOPC_comp(reverse σ): both range over the same values, so **one bound search per example gives both**
([L, H] = the range of AOPC_comp over all orderings). Edin et al. average over k = 1..m with the
all-removed term; it is the same for every ordering, so leaving it out changes raw AOPCs but no NAOPC.

The bounds (``shared``, one search per example, shared by every method):

- **exact** up to ``exact_up_to`` features: a shortest/longest path over the 2^m feature subsets
  (2^m − 2 model outputs), equal to the extreme over all m! orderings (tested against brute force);
- beyond, **beam search** over orderings, both directions in the same requests; the width follows
  Edin et al.'s convergence rule (``get_suggested_beam_size``), per example: widths 1, 5, 10, 20, 50 up
  to ``max_beam_width``, stopping once both bounds changed by less than 1 % for two widths in a row.
  The width used and whether it converged are recorded per example.

Raw AOPCs are stored per (method, example) and normalised when results are collected
(:meth:`NAOPC.summarise`): a beam bound is only reached by some ordering, so a method's ordering may
beat it; the example's bounds are then widened to every ordering seen (the beam's and every method's,
comprehensiveness and sufficiency alike) and every method on it is renormalised from stored values:
no new model output, and a normalised score outside [0, 1] cannot occur. The records count the
examples whose bounds came from a beam and how many a method broke; apart from those, the examples where
a method's AOPC passed an exact bound, which no ordering can beat (float rounding where its outputs were
computed in other batches than the search's), and by how much at most, so the report can tell rounding
from a fault. A pass within float32 rounding (``ROUNDING``) leaves the exact bound as it is and the method's
score is 0 or 1: otherwise a method added to a published run would move every published method's score on
that example in its seventh digit. A pass by more widens the bounds as a broken beam bound does.
Undefined (None) where m < 2 or every ordering scores the same.

The random floor (:meth:`NAOPC.floor`, leaderboard runs): over uniformly random orderings σ, σ[:k] is a
uniformly random k-subset, so

    E[AOPC_comp] = 1/(m−1) Σ_{k=1..m−1} (p(x) − E_{|S|=k} p(x ∖ S)),   and E[AOPC_suff] = E[AOPC_comp]

(the reverse of a uniform ordering is uniform). It is exact up to ``exact_up_to`` features (all 2^m − 2
subsets: the exact bounds' own requests, so it costs no model output of its own) and wherever every size
has at most ``FLOOR_DRAWS`` subsets; beyond, each size k is a stratum of ``FLOOR_DRAWS`` distinct random
k-subsets (seeded per example), with the stratified Monte-Carlo standard error (finite-population
corrected; ``attrbench.ops.floors``). About ``FLOOR_DRAWS`` (m − 1) model outputs per long example. It is
normalised by the example's bounds as a method is (expectation and normalisation commute).

The perturbation defaults to Edin et al.'s: whole words replaced by [MASK] (``perturbation = auto``:
mask where the model has a mask token; a decoder without one deletes), ``unit = word``.
"""
import math
from itertools import combinations

from attrbench.plugin import Evaluation, Param, register
from attrbench.plugin.internal import OPERATORS, UNITS, Perturbations, stratum_mean, subsets_of_size

KINDS = ("comprehensiveness", "sufficiency")
LADDER = (1, 5, 10, 20, 50)  # Edin et al.'s beam widths
TOLERANCE = 0.01  # their convergence rule: relative change below 1 %, twice in a row
# An AOPC past an exact bound by at most this is rounding (the report's note draws the line at the same place):
# probabilities are float32 (eps 1.2e-7), and a method's orderings are scored in other batches than the search's
# (up to 2.9e-6 seen on SmolLM2, 30 layers; a fault is far larger).
ROUNDING = 1e-5


def exact_bounds(perturbations: Perturbations):
    """(L, H): the lowest and highest AOPC_comp over all orderings, by dynamic programming over subset sizes."""
    m = perturbations.m
    layers = [[frozenset(c) for c in combinations(range(m), size)] for size in range(1, m)]
    # every subset in one request: the DP needs no output before it has them all, and one round of requests
    # fills full batches where m - 1 rounds (one per subset size) would send small ones
    flat = yield from perturbations.drops([subset for layer in layers for subset in layer])
    low, high, at = {frozenset(): 0.0}, {frozenset(): 0.0}, 0
    for layer in layers:
        gains, at = flat[at:at + len(layer)], at + len(layer)
        new_low, new_high = {}, {}
        for subset, gain in zip(layer, gains):
            previous = [subset - {i} for i in subset]
            new_low[subset] = gain + min(low[p] for p in previous)
            new_high[subset] = gain + max(high[p] for p in previous)
        low, high = new_low, new_high
    return min(low.values()) / (m - 1), max(high.values()) / (m - 1)


def beam_bounds(perturbations: Perturbations, width: int):
    """(L, H) reached by beam search over orderings, ``width`` partial orderings kept per step and direction."""
    m = perturbations.m
    beams = {-1: {frozenset(): 0.0}, 1: {frozenset(): 0.0}}  # -1: the lowest AOPC, +1: the highest
    for _ in range(1, m):
        candidates = {sign: sorted({s | {i} for s in beam for i in range(m) if i not in s}, key=sorted)
                      for sign, beam in beams.items()}  # a fixed order: ties break the same way every run
        asked = list(dict.fromkeys(c for sign in beams for c in candidates[sign]))
        gains = dict(zip(asked, (yield from perturbations.drops(asked))))
        for sign, beam in beams.items():
            totals = {c: gains[c] + sign * max(sign * beam[c - {i}] for i in c if c - {i} in beam)
                      for c in candidates[sign]}
            beams[sign] = dict(sorted(totals.items(), key=lambda kv: -sign * kv[1])[:width])
    return (min(beams[-1].values()) / (m - 1), max(beams[1].values()) / (m - 1))


def converged_beam_bounds(perturbations: Perturbations, max_width: int):
    """Beam bounds at Edin et al.'s widths up to ``max_width``, stopped by their convergence rule:
    (L, H, width used, converged)."""
    widths = [w for w in LADDER if w <= max_width] or [max_width]
    previous, calm = None, 0
    for width in widths:
        bounds = yield from beam_bounds(perturbations, width)
        if previous is not None and all(abs(b - a) <= TOLERANCE * max(abs(a), 1e-12) for a, b in zip(previous, bounds)):
            calm += 1
            if calm == 2:
                return (*bounds, width, True)
        else:
            calm = 0
        previous = bounds
    return (*previous, widths[-1], False)


class NAOPC(Evaluation):
    name, family = "naopc", "faithfulness"
    description = "comprehensiveness and sufficiency AOPC rescaled by their lowest and highest over feature orderings"
    reference = "Edin et al. 2024, Normalized AOPC"
    headline = 0
    primary_metric = "naopc_comprehensiveness"
    higher_is_better = {"naopc_comprehensiveness": True, "naopc_sufficiency": False}
    bounds = dict.fromkeys(higher_is_better, (0.0, 1.0))  # the bounds are widened to every ordering seen
    metric_names = {"naopc_comprehensiveness": "NAOPC comprehensiveness", "naopc_sufficiency": "NAOPC sufficiency"}
    undefined_when = dict.fromkeys(("naopc_comprehensiveness", "naopc_sufficiency"),
                                   "fewer than two features, or every ordering scores the same: no range to "
                                   "normalise by")
    at_bound_when = {"naopc_comprehensiveness": "the method's order is as good as the best order the bounds found"}
    robustness = ("naopc_comprehensiveness", "naopc_sufficiency")
    params = {"perturbation": Param("auto", "how features are removed (Edin et al.: [MASK]); auto: mask if the model "
                                            "has a mask token, else delete", choices=OPERATORS),
              "unit": Param("word", "what a feature is: a word (Edin et al.) or a subword token", choices=UNITS),
              "exact_up_to": Param(10, "up to this many features the bounds are exact (2^m - 2 model outputs)",
                                   minimum=2),
              "max_beam_width": Param(10, "the widest beam of the convergence rule (Edin et al.: 50)", minimum=1)}

    def shared(self, work):
        perturbations = work.perturbations(self.perturbation, self.unit)
        m = perturbations.m
        if m < 2:
            return {"m": m, "bounds": None}
        if m <= self.exact_up_to:
            low, high = yield from exact_bounds(perturbations)
            return {"m": m, "bounds": [low, high], "search": "exact"}
        low, high, width, converged = yield from converged_beam_bounds(perturbations, self.max_beam_width)
        return {"m": m, "bounds": [low, high], "search": "beam", "beam_width": width, "converged": converged}

    def score(self, work, result):
        perturbations = work.perturbations(self.perturbation, self.unit)
        if perturbations.m < 2:
            return {"aopc_comprehensiveness": None, "aopc_sufficiency": None}
        order = perturbations.order(result.values)
        m = perturbations.m
        everything = frozenset(range(m))
        prefixes = [frozenset(order[:k]) for k in range(1, m)]
        yield from perturbations.probabilities([frozenset()] + prefixes + [everything - s for s in prefixes])
        comp = yield from perturbations.curve(order)
        suff = yield from perturbations.curve(order, keep=True)
        return {"aopc_comprehensiveness": float(comp.mean()), "aopc_sufficiency": float(suff.mean())}

    floor_how = ("E[AOPC] over uniformly random orderings: per subset size, the mean drop over every subset "
                 "(exact) or over FLOOR_DRAWS random ones (stratified); normalised by the example's bounds")

    def floor(self, work):
        """E[AOPC_comp] = E[AOPC_suff] under a uniformly random ordering (module docstring), with its MC SE."""
        perturbations = work.perturbations(self.perturbation, self.unit)
        m = perturbations.m
        if m < 2:
            return {"aopc_comprehensiveness": None, "aopc_sufficiency": None, "floor": {"exact": True}}
        rng = work.rng("floor:naopc")
        strata = [subsets_of_size(m, k, self.floor_draws, rng, exhaustive=m <= self.exact_up_to) for k in range(1, m)]
        drops = yield from perturbations.drops([s for stratum in strata for s in stratum])  # one request
        means, variances, at = [], [], 0
        for k, stratum in enumerate(strata, start=1):
            mean, variance = stratum_mean(drops[at:at + len(stratum)], math.comb(m, k))
            means.append(mean)
            variances.append(variance)
            at += len(stratum)
        aopc, se = sum(means) / (m - 1), math.sqrt(sum(variances)) / (m - 1)
        exact = all(len(stratum) == math.comb(m, k) for k, stratum in enumerate(strata, start=1))
        return {"aopc_comprehensiveness": aopc, "aopc_sufficiency": aopc,
                "mc_se": {"aopc_comprehensiveness": se, "aopc_sufficiency": se},
                "floor": {"exact": exact, "subsets": at}}

    @staticmethod
    def _bounds(scored, shared) -> list:
        """Each example's bounds widened to every ordering seen (the methods', both kinds): (L, H) or None. An exact
        bound is not widened by an ordering within ``ROUNDING`` of it (module docstring)."""
        bounds = []
        for k in range(len(shared)):
            found = (shared[k] or {}).get("bounds")
            if found is None:
                bounds.append(None)
                continue
            seen = [p[f"aopc_{kind}"] for payloads in scored.values() for p in [payloads[k]]
                    if p is not None for kind in KINDS if p.get(f"aopc_{kind}") is not None]
            if shared[k].get("search") == "exact":
                seen = [a for a in seen if a < found[0] - ROUNDING or a > found[1] + ROUNDING]
            bounds.append((min([found[0], *seen]), max([found[1], *seen])))
        return bounds

    def summarise_floor(self, floor, shared, scored):
        """The floor's expected AOPC normalised by the bounds the methods are normalised by (the floor widens none:
        an expectation is no ordering); its MC SE scaled alike."""
        bounds = self._bounds(scored, shared)
        out = {}
        for kind in KINDS:
            values, errors = [], []
            for payload, limits in zip(floor, bounds):
                aopc = None if payload is None else payload.get(f"aopc_{kind}")
                if aopc is None or limits is None or limits[1] - limits[0] <= 1e-12:
                    values.append(None)
                    errors.append(None)
                    continue
                span = limits[1] - limits[0]
                values.append((aopc - limits[0]) / span)
                errors.append((payload.get("mc_se") or {}).get(f"aopc_{kind}", 0.0) / span)
            out[f"naopc_{kind}"] = {
                "values": values, "mc_se": errors, "floor": self.floor_description(floor),
                "raw_aopc": [None if p is None else p.get(f"aopc_{kind}") for p in floor],
                "bounds": [None if b is None else list(b) for b in bounds]}
        return out

    def summarise(self, scored, shared):
        """Each example's bounds widened to every ordering seen, then every method normalised by them."""
        bounds = self._bounds(scored, shared)
        beam = sum(1 for s in shared if s and s.get("search") == "beam")
        out = {}
        for key, payloads in scored.items():
            out[key] = {}
            for kind in KINDS:
                values, broke, passed, excess = [], 0, 0, 0.0
                for k, payload in enumerate(payloads):
                    aopc = None if payload is None else payload.get(f"aopc_{kind}")
                    limits = bounds[k]
                    if aopc is None or limits is None or limits[1] - limits[0] <= 1e-12:
                        values.append(None)
                        continue
                    found = shared[k]["bounds"]
                    beyond = max(found[0] - aopc, aopc - found[1])
                    if beyond > 1e-12 and shared[k].get("search") == "beam":
                        broke += 1
                    elif beyond > 1e-12:  # past an exact bound: rounding, or a fault if by much (see the excess)
                        passed, excess = passed + 1, max(excess, beyond)
                    # within [0, 1] but where an ordering passed an exact bound by rounding (not widened)
                    values.append(min(1.0, max(0.0, (aopc - limits[0]) / (limits[1] - limits[0]))))
                out[key][f"naopc_{kind}"] = {
                    "values": values, "raw_aopc": [None if p is None else p.get(f"aopc_{kind}") for p in payloads],
                    "bounds": [None if b is None else list(b) for b in bounds], "examples_with_beam_bounds": beam,
                    "beam_bounds_broken": broke, "exact_bounds_passed": passed, "exact_bounds_excess": excess,
                    "beam_widths": sorted({s["beam_width"] for s in shared if s and s.get("beam_width")}),
                    "beam_not_converged": sum(1 for s in shared if s and s.get("converged") is False)}
        return out


register(NAOPC)
