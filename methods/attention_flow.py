"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

The layers form a graph: node (l, i) is token i after layer l; an edge from (l - 1, j) to (l, i)
has capacity ``Â^l_ij`` with ``Â = 0.5 A + 0.5 I`` and A the head-mean attention weights,
row-normalised (the maps attention rollout multiplies). Token j's attribution is the maximum flow
from input node (0, j) to the target's output node (L, row), by Dinic's algorithm
(``max_flows``; the authors' code uses networkx's Edmonds-Karp, which the tests check it against).
Where rollout multiplies path weights, flow is bounded by each path's narrowest edge.

Cost: n max-flow problems per text on a graph of (L + 1) n nodes and about L n² / 2 (causal) to L n² edges. On
MiniLM's attention graphs of Linzen items (6 layers, 2 CPU cores; the fastest of 3 calls on one item per length)
a text takes 0.018 s at 25 tokens, 0.034 s at 54 and 0.061 s at 69, the model's forward pass included, where
networkx's Edmonds-Karp takes 4.2 s at 25 (benchmarks/results/attention-flow-cpu.json, ``python
benchmarks/bench_attention_flow.py``). Dinic's worst case grows with the square of the nodes times the edges, so
``max_tokens`` (128; every shipped dataset fits, its longest text having 101 MiniLM tokens, a Linzen item, and 61
SmolLM2 tokens) bounds the graph: a longer text is refused, not approximated, and a run's plan checks its sample
against the limit before any work.
"""
import numpy as np

from attrbench.plugin import Param, Rollout, register
from attrbench.plugin.internal import max_flows


def attention_flow(per_layer: np.ndarray, row: int) -> np.ndarray:
    """(n,) maximum flows from each input token to output token ``row`` through (L, n, n) capacities."""
    layers, n, _ = per_layer.shape
    layer, i, j = np.nonzero(per_layer)  # node (l, i) is l * n + i; an edge runs from (l, j) to (l + 1, i)
    return max_flows((layers + 1) * n, layer * n + j, (layer + 1) * n + i, per_layer[layer, i, j].astype(np.float64),
                     np.arange(n), layers * n + row)


def networkx_flows(per_layer: np.ndarray, row: int) -> np.ndarray:
    """:func:`attention_flow` by the authors' construction and solver: node (l, i), the capacities as edge
    attributes, networkx's Edmonds-Karp (networkx is in the test extra). The reference the tests and
    ``benchmarks/bench_attention_flow.py`` check the Dinic flows against; far slower."""
    import networkx as nx  # the test extra: the reference solver, not needed to run the method

    layers, n, _ = per_layer.shape
    graph = nx.DiGraph()
    for layer in range(layers):
        rows, cols = np.nonzero(per_layer[layer])
        graph.add_edges_from(((layer, j), (layer + 1, i), {"capacity": float(per_layer[layer, i, j])})
                             for i, j in zip(rows, cols))
    return np.array([nx.maximum_flow_value(graph, (0, j), (layers, row), flow_func=nx.algorithms.flow.edmonds_karp)
                     if graph.has_node((0, j)) else 0.0 for j in range(n)])


class AttentionFlow(Rollout):
    def __init__(self):
        super().__init__("attention_flow", lambda layout: "attn_w", "rollout",
                         "maximum flow through the attention graph (attention + identity)",
                         "Abnar & Zuidema 2020", identity=True, uses_values=False,
                         aggregate_params={"max_tokens": Param(128,
                                                               "longest text accepted (it bounds the max-flow graph)",
                                                               minimum=1)})

    def token_limit(self):
        return self.get_params()["max_tokens"]

    def aggregate(self, per_layer, row):
        return attention_flow(per_layer, row)


register(AttentionFlow)
