"""Shapley-value split of the FF activation (Kobayashi et al. 2024, App. E), an alternative to IG.

For every output row i and activation element k the players are the parts of the pre-activation
(one per input token, plus the bias), and the game is ``v(S) = g(sum_{j in S} p_j)`` — for gated
FFs ``v(S) = g(sum_S a_j) * sum_S c_j``. Shapley values are efficient, so the split keeps the
decomposition complete, exactly as IG does.

Engines:
- ``shapley-exact`` (ours): all 2^P coalition values of every row and element. float32 games whose
  activation is GELU (erf or tanh), SiLU or ReLU run the fused numba kernel of ``fused``
  (values made, weighted and summed in registers); the rest run ``exact_dense`` on torch: coalition
  values ``V = g(masks @ P)`` in cache-sized chunks and the Shapley values as one matmul ``SV = M V``
  with ``M[j, S] = w(|S|-1)`` if j in S else ``-w(|S|)``, ``w(s) = s! (P-s-1)! / P!``. Up to
  ``MAX_EXACT_PLAYERS`` players.
- ``shapley-sampling`` (ours): antithetic permutation sampling, vectorised over rows and elements,
  with the standard error of every value; exact efficiency holds for every permutation.
- ``shap-exact``, ``shap-permutation``, ``shapley-kernel``: the ``shap`` library's Exact,
  Permutation and Kernel explainers on the same game, one call per row with all elements as the
  model's outputs (the reference the paper used; slow).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ...errors import InputError
from .weights import shapley_weights

MAX_EXACT_PLAYERS = 16
# coalition values per step: 4 MB in float32 stays in cache between the activation and the weight
# contraction (16 MB steps ran 1.5x slower end to end at 16 players)
_CHUNK_VALUES = 2**20


def check_players(method: str, players: int) -> None:
    if method in ("shapley-exact", "shap-exact") and players > MAX_EXACT_PLAYERS:
        raise InputError(f"exact Shapley over {players} players (tokens + bias) exceeds the limit of "
                         f"{MAX_EXACT_PLAYERS}: use --ff-attribution shapley-sampling")


def _masks(players: int) -> torch.Tensor:
    """All coalitions as rows of 0/1, coalition code c has player k iff bit k of c is set: (2^P, P)."""
    return ((torch.arange(2 ** players)[:, None] >> torch.arange(players)) & 1).double()


@functools.lru_cache(maxsize=8)
def _exact_operators(players: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Masks of the low and high halves of the players, and the Shapley weight matrix (P, 2^P)."""
    masks = _masks(players)
    size = masks.sum(1).long()
    weight = torch.tensor(shapley_weights(players), dtype=torch.float64)
    operator = torch.where(masks.T.bool(), weight[(size - 1).clamp_min(0)], -weight[size])
    low = players // 2
    return _masks(low), _masks(players - low), operator


def _coalition_sums(masks_low: torch.Tensor, masks_high: torch.Tensor, players: torch.Tensor,
                    out: torch.Tensor) -> torch.Tensor:
    """Sums of every coalition (2^P, cols) as high-half sums + low-half sums: one broadcast add
    instead of a (2^P x P) @ (P x cols) matmul whose K = P is too small to run fast."""
    low, cols = masks_low.shape[1], players.shape[1]
    low_sums, high_sums = masks_low @ players[:low], masks_high @ players[low:]
    sums = out[: masks_high.shape[0] * masks_low.shape[0] * cols].view(masks_high.shape[0], masks_low.shape[0], cols)
    return torch.add(high_sums[:, None, :], low_sums[None, :, :], out=sums).view(-1, cols)


def _value(activation: Callable, sums: Sequence[torch.Tensor]) -> torch.Tensor:
    """v of coalition sums: g(a) for a plain FF, g(a) * c for a gated one."""
    return activation(sums[0]) if len(sums) == 1 else activation(sums[0]) * sums[1]


def exact(activation: Callable, players: Sequence[torch.Tensor]) -> torch.Tensor:
    """Exact Shapley values of every game at once: players (P, ...) per projection -> (P, ...)."""
    check_players("shapley-exact", players[0].shape[0])
    if players[0].dtype == torch.float32 and players[0].device.type == "cpu":
        from . import fused  # heavy: imports numba (and compiles), only when a fused game comes

        code = fused.activation_code(activation)
        if code is not None:
            return fused.exact(code, players)
    return exact_dense(activation, players)


def exact_dense(activation: Callable, players: Sequence[torch.Tensor]) -> torch.Tensor:
    """The torch engine for any activation and dtype: coalition values in chunks, then one matmul."""
    P = players[0].shape[0]
    check_players("shapley-exact", P)
    masks_low, masks_high, operator = (t.to(players[0].dtype).to(players[0].device) for t in _exact_operators(P))
    operator_t = operator.T.contiguous()  # (2^P, P): values^T @ operator^T runs faster than operator @ values
    flat = [p.reshape(P, -1) for p in players]
    out = torch.empty_like(flat[0])
    step = max(1, _CHUNK_VALUES // 2 ** P)
    buffers = [out.new_empty(2 ** P * step) for _ in flat]  # reused: no page faults per step
    result = out.new_empty(step, P)
    for k in range(0, flat[0].shape[1], step):
        values = _value(activation, [_coalition_sums(masks_low, masks_high, f[:, k:k + step], buf)
                                     for f, buf in zip(flat, buffers)])
        cols = values.shape[1]
        torch.mm(values.T, operator_t, out=result[:cols])  # (step, 2^P) @ (2^P, P)
        out[:, k:k + cols] = result[:cols].T
    return out.view(players[0].shape)


def sampling(activation: Callable, players: Sequence[torch.Tensor], samples: int = 256,
             seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Antithetic permutation sampling: (values, standard errors), both (P, ...)."""
    P = players[0].shape[0]
    gen = torch.Generator().manual_seed(seed)
    total = torch.zeros_like(players[0])
    total_sq = torch.zeros_like(players[0])
    pairs = max(1, samples // 2)
    for _ in range(pairs):
        perm = torch.randperm(P, generator=gen).to(players[0].device)  # drawn on the CPU: the same on any device
        pair_mean = torch.zeros_like(players[0])
        for order in (perm, perm.flip(0)):  # antithetic: a permutation and its reverse
            prefix = [torch.cumsum(p[order], 0) for p in players]
            value = _value(activation, prefix)
            marginal = torch.diff(value, dim=0, prepend=torch.zeros_like(value[:1]))  # v(empty) = g(0) = 0
            pair_mean[order] += marginal / 2
        total += pair_mean
        total_sq += pair_mean ** 2
    mean = total / pairs
    variance = (total_sq / pairs - mean ** 2).clamp_min(0) * pairs / max(1, pairs - 1)
    return mean, (variance / pairs).sqrt()


def with_shap(activation: Callable, players: Sequence[torch.Tensor], engine: str,
              max_evals: Optional[int] = None, seed: int = 0) -> torch.Tensor:
    """The shap library's explainers on the same game: one call per row, all elements as outputs.

    ``players``: (P, rows, elements) per projection. Slow by design (the paper's reference).
    """
    import shap  # heavy and optional in use: only the shap reference engines need it

    P, rows = players[0].shape[:2]
    check_players(engine, P)
    out = torch.empty_like(players[0])
    for r in range(rows):
        parts = [p[:, r].cpu().numpy() for p in players]

        def game(masks: np.ndarray) -> np.ndarray:  # (N, P) coalitions -> (N, elements) values
            sums = [torch.from_numpy(masks.astype(part.dtype) @ part) for part in parts]
            return _value(activation, sums).double().cpu().numpy()

        background, everyone = np.zeros((1, P)), np.ones((1, P))
        if engine == "shapley-kernel":
            values = shap.KernelExplainer(game, background, seed=seed).shap_values(
                everyone, nsamples=max_evals or 2 * P + 2048, silent=True)
            values = np.asarray(values)[0]
        else:
            masker = shap.maskers.Independent(background, max_samples=1)
            if engine == "shap-exact":
                explanation = shap.explainers.Exact(game, masker)(everyone)
            else:
                explanation = shap.explainers.Permutation(game, masker, seed=seed)(
                    everyone, max_evals=max_evals or 10 * (2 * P + 1))
            values = explanation.values[0]
        out[:, r] = torch.from_numpy(np.asarray(values).reshape(P, -1)).to(dtype=out.dtype, device=out.device)
    return out
