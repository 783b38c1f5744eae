"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

The layers form a graph: node (l, i) is token i after layer l; an edge from (l - 1, j) to (l, i)
has capacity ``Â^l_ij`` with ``Â = 0.5 A + 0.5 I`` and A the head-mean attention weights,
row-normalised (the maps attention rollout multiplies). Token j's attribution is the maximum flow
from input node (0, j) to the target's output node (L, row), by Dinic's algorithm
(``max_flows``; the authors' code uses networkx's Edmonds-Karp, which the tests check it against).
Where rollout multiplies path weights, flow is bounded by each path's narrowest edge.

Cost: n max-flow problems per text on a graph of (L + 1) n nodes and about L n² / 2 (causal) to
L n² edges. Dinic's algorithm sends about one augmenting path per saturated edge, so the cost grows steeply
with n: on MiniLM's attention graphs (6 layers, 2 cores, beside another run) 3 ms at 25 tokens and 0.3-0.5 s
at 54-69, where networkx took 1-5 s at 25. Hence the limit ``max_tokens`` (128; every shipped dataset fits,
the longest Linzen item having 69 MiniLM tokens): a longer text is refused, not approximated, and a run's
plan checks its sample against the limit before any work.
"""
import numpy as np

from attrbench.plugin import Param, Rollout, max_flows, register


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
                         aggregate_params={"max_tokens": Param(128,
                                                               "longest text accepted (cost grows steeply with it)",
                                                               minimum=1)})

    def token_limit(self):
        return self.get_params()["max_tokens"]

    def aggregate(self, per_layer, row):
        return attention_flow(per_layer, row)


register(AttentionFlow)
