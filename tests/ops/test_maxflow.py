"""Dinic's maximum flow against networkx's preflow-push (real capacities; the attention-flow test compares with
the authors' Edmonds-Karp) and scipy's (integer capacities)."""
import networkx as nx
import numpy as np
import pytest
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from attrbench.ops.maxflow import max_flows


def _random_graph(rng, n_nodes, density):
    """Edge lists of a random digraph with cycles, antiparallel edges and capacities spanning 12 decades."""
    dense = (rng.random((n_nodes, n_nodes)) < density) * 10.0 ** rng.uniform(-12, 0, (n_nodes, n_nodes))
    np.fill_diagonal(dense, 0)
    tails, heads = np.nonzero(dense)
    return tails, heads, dense[tails, heads]


def _networkx(n_nodes, tails, heads, capacities, sources, sink):
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n_nodes))
    graph.add_edges_from((int(t), int(h), {"capacity": float(c)}) for t, h, c in zip(tails, heads, capacities))
    return np.array([nx.maximum_flow_value(graph, s, sink) for s in sources])


@pytest.mark.parametrize("seed", range(8))
def test_equals_networkx_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n_nodes = int(rng.integers(2, 40))
    tails, heads, capacities = _random_graph(rng, n_nodes, rng.uniform(0.05, 0.6))
    sources = [s for s in range(n_nodes) if s != n_nodes - 1]
    ours = max_flows(n_nodes, tails, heads, capacities, sources, n_nodes - 1)
    np.testing.assert_allclose(ours, _networkx(n_nodes, tails, heads, capacities, sources, n_nodes - 1),
                               rtol=1e-12, atol=1e-15)


def test_equals_scipy_exactly_on_integer_capacities():
    rng = np.random.default_rng(0)
    dense = (rng.random((30, 30)) < 0.3) * rng.integers(1, 1000, (30, 30))
    np.fill_diagonal(dense, 0)
    tails, heads = np.nonzero(dense)
    ours = max_flows(30, tails, heads, dense[tails, heads].astype(float), range(29), 29)
    theirs = [maximum_flow(csr_array(dense.astype(np.int32)), s, 29).flow_value for s in range(29)]
    assert ours.tolist() == [float(v) for v in theirs]  # sums of integers below 2^53: no rounding at all


def test_no_path_is_zero_and_a_chain_is_its_narrowest_edge():
    # 0 -> 1 -> 2 -> 3 with capacities 0.5, 0.25, 0.75; node 4 has no edge
    flows = max_flows(5, np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.5, 0.25, 0.75]), [0, 1, 2, 4], 3)
    assert flows.tolist() == [0.25, 0.25, 0.75, 0.0]
