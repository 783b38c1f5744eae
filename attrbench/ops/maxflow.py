"""Maximum flow with real capacities: Dinic's algorithm (1970), compiled with numba.

Attention flow (Abnar & Zuidema 2020) solves one max-flow problem per input token on a graph of
(L + 1) n nodes and up to L n² edges. networkx, which their code uses (Edmonds-Karp), spends 1-5 s per
SST-2 example in Python even with its fastest solver (preflow-push); scipy's solvers take int32
capacities only (attention weights scaled to integers lose about 1e-9), and the fast C solvers with
real capacities (igraph, PyMaxflow) are GPL.
So the solver is written here and checked against networkx and scipy (tests/ops/test_maxflow.py,
tests/methods/test_attention_flow.py).

Exact in floating point: each augmentation sends the path's smallest residual, and subtracting a value
from itself gives exactly 0, so every augmentation saturates an edge and Dinic's bound
(O(V² E) augmentations) holds with real capacities; residuals never go negative (a >= b implies
fl(a - b) >= 0). The flow value is the sum of the augmentations, to rounding (1e-15 against networkx).
"""
import numpy as np


def max_flows(n_nodes: int, tails: np.ndarray, heads: np.ndarray, capacities: np.ndarray, sources,
              sink: int) -> np.ndarray:
    """Maximum flow value from each of ``sources`` to ``sink`` in a directed graph given as edge lists
    (capacities > 0; the graph is built once and every source solved on a fresh residual copy)."""
    from .dinic import dinic_many  # heavy: numba (compiled on first use, cached on disk)

    m = len(tails)
    tail = np.empty(2 * m, np.int64)
    head = np.empty(2 * m, np.int64)
    tail[0::2], tail[1::2] = tails, heads
    head[0::2], head[1::2] = heads, tails
    capacity = np.zeros(2 * m)
    capacity[0::2] = capacities
    order = np.argsort(tail, kind="stable")
    first = np.searchsorted(tail[order], np.arange(n_nodes + 1))
    return dinic_many(n_nodes, tail, head, first, order, capacity, np.asarray(sources, np.int64), sink)
