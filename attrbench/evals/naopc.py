"""Normalised AOPC (Edin et al. 2024, "Normalized AOPC: fixing misleading faithfulness metrics").

A raw AOPC cannot be compared across examples or models: how far it can go depends on the example.
NAOPC rescales each example's AOPC by the lowest and highest AOPC that any ordering of its tokens
reaches:

    AOPC(order)  = 1/(m−1) Σ_{k=1..m−1} [p(target | x) − p(target | x with order[:k] deleted)]   (comprehensiveness)
                   (sufficiency: only order[:k] kept instead of deleted)
    NAOPC(order) = (AOPC(order) − AOPC_min) / (AOPC_max − AOPC_min)

over the m non-special tokens, deleted in token-id space (``attrbench.ops.perturb.Deletions``); k = m
is left out, as it is the same text for every ordering. Comprehensiveness: higher is better;
sufficiency: lower is better.

The bounds are exact up to ``exact_up_to`` tokens: a shortest/longest path over the 2^m token
subsets, which equals the extreme over all m! orderings (a test checks it against brute force). Beyond,
beam search over orderings (width ``beam_width``), as the paper does; a beam bound lies inside the
exact range, so NAOPC may then leave [0, 1] slightly. Each example records which it got. The bounds
depend on the example and the model only, so every method shares them (memoised in the run
context). Undefined (None) where m < 2 or every ordering scores the same.
"""
from itertools import combinations

from attrbench.plugin import Deletions, Evaluation, Param, register

KINDS = ("comprehensiveness", "sufficiency")


def _steps(deletions: Deletions, kind: str):
    """sets -> per-step AOPC terms: the drop with a set of token indices deleted (or, sufficiency, kept)."""
    return lambda sets: deletions.drops(sets, keep=kind == "sufficiency")


def exact_bounds(deletions: Deletions, kind: str) -> tuple[float, float]:
    """(min, max) AOPC over all orderings: dynamic programming over the subsets of sizes 1 .. m−1."""
    m, value = deletions.m, _steps(deletions, kind)
    low, high = {frozenset(): 0.0}, {frozenset(): 0.0}
    for size in range(1, m):
        layer = [frozenset(c) for c in combinations(range(m), size)]
        gains = value(layer)
        new_low, new_high = {}, {}
        for subset, gain in zip(layer, gains):
            previous = [subset - {i} for i in subset]
            new_low[subset] = gain + min(low[p] for p in previous)
            new_high[subset] = gain + max(high[p] for p in previous)
        low, high = new_low, new_high
    return min(low.values()) / (m - 1), max(high.values()) / (m - 1)


def beam_bounds(deletions: Deletions, kind: str, width: int) -> tuple[float, float]:
    """(min, max) AOPC reached by beam search over orderings: ``width`` partial orderings kept per step."""
    m, value = deletions.m, _steps(deletions, kind)
    out = []
    for sign in (-1, 1):  # -1: the lowest AOPC, +1: the highest
        beam = {frozenset(): 0.0}
        for _ in range(1, m):
            candidates = {s | {i} for s in beam for i in range(m) if i not in s}
            candidates = sorted(candidates, key=sorted)  # a fixed order: ties break the same way every run
            gains = value(candidates)
            totals = {c: g + max(sign * beam[c - {i}] for i in c if c - {i} in beam) * sign
                      for c, g in zip(candidates, gains)}
            beam = dict(sorted(totals.items(), key=lambda kv: -sign * kv[1])[:width])
        out.append(sign * max(sign * v for v in beam.values()) / (m - 1))
    return out[0], out[1]


def bounds(deletions: Deletions, kind: str, exact_up_to: int, width: int) -> tuple[float, float, str]:
    if deletions.m <= exact_up_to:
        return (*exact_bounds(deletions, kind), "exact")
    return (*beam_bounds(deletions, kind, width), f"beam {width}")


class NAOPC(Evaluation):
    name, family = "naopc", "faithfulness"
    description = "comprehensiveness and sufficiency AOPC rescaled by their lowest and highest over token orderings"
    reference = "Edin et al. 2024, Normalized AOPC"
    primary_metric = "naopc_comprehensiveness"
    higher_is_better = {"naopc_comprehensiveness": True, "naopc_sufficiency": False}
    params = {"beam_width": Param(5, "beam width of the bound search beyond exact_up_to tokens", minimum=1),
              "exact_up_to": Param(8, "up to this many non-special tokens the bounds are exact (2^m subsets)",
                                   minimum=2)}

    def run(self, adapter, methods, examples, context):
        exact_up_to, width = self.get_params()["exact_up_to"], self.get_params()["beam_width"]
        records = []
        for method in methods:
            values = {kind: [] for kind in KINDS}
            found = []
            for example, result in zip(examples, context.attributions(adapter, method, examples)):
                ids = adapter.tokenizer.convert_tokens_to_ids(result.tokens)
                deletions = context.deletions(adapter, ids, example.target)
                if deletions.m < 2:
                    found.append({"id": example.id, "m": deletions.m, "bounds": "undefined (m < 2)"})
                    for kind in KINDS:
                        values[kind].append(None)
                    continue
                key = (adapter.name, str(adapter.dtype), example.text, example.target, exact_up_to, width)
                limits = context.memo(("naopc",) + key, lambda: {
                    kind: bounds(deletions, kind, exact_up_to, width) for kind in KINDS})
                order = deletions.order(result.values)
                row = {"id": example.id, "m": deletions.m}
                for kind in KINDS:
                    low, high, how = limits[kind]
                    aopc = float(deletions.curve(order, keep=kind == "sufficiency").mean())
                    values[kind].append(None if high - low <= 1e-12 else (aopc - low) / (high - low))
                    row.update({f"{kind}_aopc": aopc, f"{kind}_bounds": [low, high], "bounds": how})
                found.append(row)
            for kind in KINDS:
                records.append(self.record(adapter, context, method, f"naopc_{kind}", values[kind], examples,
                                           per_example=found))
        return records


register(NAOPC)
