"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

The layers form a graph: node (l, i) is token i after layer l; an edge from (l - 1, j) to (l, i)
has capacity ``Â^l_ij`` with ``Â = 0.5 A + 0.5 I`` and A the head-mean attention weights,
row-normalised (the maps attention rollout multiplies). Token j's attribution is the maximum flow
from input node (0, j) to the target's output node (L, row), by Dinic's algorithm
(``max_flows``; the authors' code uses networkx's Edmonds-Karp, which the tests check it against).
Where rollout multiplies path weights, flow is bounded by each path's narrowest edge.

Cost: n max-flow problems per text on a graph of (L + 1) n nodes and about L n² / 2 (causal) to
L n² edges: 1.6 s per SST-2 dev example on MiniLM (6 layers; mean of 10, 95 % CI 0.8-3.4 s) on 2 cores,
growing with about n³, hence the limit ``max_tokens``. A longer text is refused, not approximated.
"""
import numpy as np

from attrbench.plugin import InputError, Param, Rollout, max_flows, register


def attention_flow(per_layer: np.ndarray, row: int) -> np.ndarray:
    """(n,) maximum flows from each input token to output token ``row`` through (L, n, n) capacities."""
    layers, n, _ = per_layer.shape
    layer, i, j = np.nonzero(per_layer)  # node (l, i) is l * n + i; an edge runs from (l, j) to (l + 1, i)
    return max_flows((layers + 1) * n, layer * n + j, (layer + 1) * n + i, per_layer[layer, i, j].astype(np.float64),
                     np.arange(n), layers * n + row)


class AttentionFlow(Rollout):
    def __init__(self):
        super().__init__("attention_flow", lambda layout: "attn_w", "rollout",
                         "maximum flow through the attention graph (attention + identity)",
                         "Abnar & Zuidema 2020", identity=True, uses_values=False,
                         aggregate_params={"max_tokens": Param(64, "longest text accepted (cost grows with about n^3)",
                                                               minimum=1)})

    def run(self, adapter, texts, *, targets, layers, truncate):
        longest = max(adapter.encode(texts, truncate=truncate).lengths)
        limit = self.get_params()["max_tokens"]
        if longest > limit:
            raise InputError(f"attention_flow takes at most {limit} tokens and a text has {longest}: shorten it, "
                             f"or raise attention_flow.max_tokens (its cost grows with about n^3)")
        return super().run(adapter, texts, targets=targets, layers=layers, truncate=truncate)

    def aggregate(self, per_layer, row):
        return attention_flow(per_layer, row)


register(AttentionFlow)
