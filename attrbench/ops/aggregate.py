"""Aggregating per-layer token-to-token maps into input attributions (rollout, Abnar & Zuidema 2020)."""
from __future__ import annotations

import numpy as np

from .numeric import safe_divide


def visible_cells(n: int, causal: bool) -> np.ndarray:
    """(n, n) mask of the cells a map can have: the lower triangle (j <= i) for a causal model, else all."""
    everything = np.ones((n, n), dtype=bool)
    return np.tril(everything) if causal else everything


def row_normalise(maps: np.ndarray) -> np.ndarray:
    """Divide each row by its sum (rows of zeros stay zero): (..., n, n)."""
    return safe_divide(maps, maps.sum(-1, keepdims=True)).astype(maps.dtype, copy=False)


def with_identity(maps: np.ndarray, weight: float = 0.5) -> np.ndarray:
    """``(1 - weight) A + weight I``: the residual connection as attention rollout models it."""
    return (1 - weight) * maps + weight * np.eye(maps.shape[-1], dtype=maps.dtype)


def rollout(per_layer: np.ndarray) -> np.ndarray:
    """``R = M^L · ... · M^1`` for (L, n, n) maps; row i of R attributes layer-L token i to the inputs."""
    relevance = per_layer[0]
    for layer_map in per_layer[1:]:
        relevance = layer_map @ relevance
    return relevance
