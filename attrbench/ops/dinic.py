"""Dinic's maximum flow compiled with numba (the math and its checks: ``attrbench.ops.maxflow``)."""
import numpy as np
from numba import njit


@njit(cache=True)
def dinic(n_nodes, tail, head, first, order, capacity, source, sink):
    residual = capacity.copy()  # edge 2k is an input edge, 2k + 1 its reverse (capacity 0)
    level = np.empty(n_nodes, np.int64)
    queue = np.empty(n_nodes, np.int64)
    arc = np.empty(n_nodes, np.int64)
    path = np.empty(n_nodes, np.int64)
    total = 0.0
    while True:
        level[:] = -1  # breadth-first levels over edges with residual capacity
        level[source] = 0
        queue[0], start, end = source, 0, 1
        while start < end:
            u = queue[start]
            start += 1
            for k in range(first[u], first[u + 1]):
                e = order[k]
                if residual[e] > 0.0 and level[head[e]] < 0:
                    level[head[e]] = level[u] + 1
                    queue[end] = head[e]
                    end += 1
        if level[sink] < 0:
            return total
        arc[:] = first[:n_nodes]  # current arc of each node: arcs before it are saturated or lead nowhere
        depth, u = 0, source
        while True:  # a blocking flow by depth-first search along the level graph
            if u == sink:
                bottleneck = residual[path[0]]
                for i in range(1, depth):
                    bottleneck = min(bottleneck, residual[path[i]])
                total += bottleneck
                back = -1
                for i in range(depth):
                    e = path[i]
                    residual[e] -= bottleneck
                    residual[e ^ 1] += bottleneck
                    if back < 0 and residual[e] == 0.0:
                        back = i
                depth, u = back, tail[path[back]]  # resume at the first saturated edge
                continue
            advanced = False
            while arc[u] < first[u + 1]:
                e = order[arc[u]]
                if residual[e] > 0.0 and level[head[e]] == level[u] + 1:
                    path[depth] = e
                    depth += 1
                    u = head[e]
                    advanced = True
                    break
                arc[u] += 1
            if not advanced:
                if u == source:
                    break
                level[u] = -1  # a dead end for the rest of this phase
                depth -= 1
                u = tail[path[depth]]
                arc[u] += 1


@njit(cache=True)
def dinic_many(n_nodes, tail, head, first, order, capacity, sources, sink):
    out = np.zeros(len(sources))
    for i in range(len(sources)):
        out[i] = dinic(n_nodes, tail, head, first, order, capacity, sources[i], sink)
    return out
