"""The Shapley weights, shared by the torch engines and the fused kernel."""
from __future__ import annotations

import math


def shapley_weights(players: int) -> list[float]:
    """w(s) = s! (P-s-1)! / P!, the weight of joining a coalition of s players, for s < P; w(P) = 0."""
    return [math.factorial(s) * math.factorial(players - s - 1) / math.factorial(players)
            for s in range(players)] + [0.0]
