"""Fused exact-Shapley kernel (numba): every coalition value is made, weighted and summed in registers.

The torch engine in ``engines.py`` materialises all 2^P coalition values of a game and contracts them
with the (P, 2^P) Shapley weight matrix: 2P flops and two memory passes per coalition. Here the players
split into a low and a high half, a coalition is S = H + L and its sum is ``h_H + l_L``. With
``w(s) = s! (P-s-1)! / P!`` the Shapley value of a low player j is

    phi_j = sum_L [j in L] A_L - [j not in L] B_L,
    A_L = sum_H w(|H|+|L|-1) v(H, L),   B_L = sum_H w(|H|+|L|) v(H, L),

and of a high player the same with the roles of H and L swapped (sums ``a_H``, ``b_H`` over L). So one
pass over the 2^P coalitions of a game, four multiply-adds each beside the activation, leaves 4 * 2^(P/2)
sums, and P signed sums of those finish the values. Games run in parallel, one per task.

The activation must vectorise, so it is evaluated with exp-free float32 approximations (the accuracy
of torch's own float32 kernels, which approximate erf and exp too):
- ``gelu`` (erf): Abramowitz & Stegun 7.1.28, |erf error| <= 3e-7;
- ``gelu_tanh``, ``silu`` (0.5 x (1 + tanh(x/2))): tanh as Eigen's 13/6 rational, clamped at +-7.9;
- ``relu``.
A model's activation is matched to one of these by its values on a probe grid, not by its class name;
an activation that matches none, and float64 games, stay on the torch engine.
"""
from __future__ import annotations

import functools
import weakref
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from numba import config, get_num_threads, njit, prange, set_num_threads

from .weights import shapley_weights

F = np.float32
ACTIVATIONS = ("gelu", "gelu_tanh", "silu", "relu")  # kernel codes 0..3
_PROBE = torch.linspace(-10.0, 10.0, 4001)
_PROBE_TOLERANCE = 1e-5  # on the grid the approximations stay within 1.2e-6; gelu and gelu_tanh differ by 4.7e-4
_JIT = dict(fastmath=True, error_model="numpy", cache=True)  # numpy errors: no branch, so it vectorises


@njit(inline="always", **_JIT)
def _gelu(x):
    z = abs(x) * F(0.7071067811865476)
    p = F(1) + z * (F(0.0705230784) + z * (F(0.0422820123) + z * (F(0.0092705272) + z * (
        F(0.0001520143) + z * (F(0.0002765672) + z * F(0.0000430638))))))
    r = F(1) / p
    r = r * r
    r = r * r
    r = r * r
    r = r * r  # 1 - erf(|x|/sqrt 2) = p^-16
    return max(x, F(0)) - F(0.5) * abs(x) * r


@njit(inline="always", **_JIT)
def _tanh(x):
    x = min(max(x, F(-7.90531110763549805)), F(7.90531110763549805))
    x2 = x * x
    p = F(-2.76076847742355e-16) * x2 + F(2.00018790482477e-13)
    p = p * x2 + F(-8.60467152213735e-11)
    p = p * x2 + F(5.12229709037114e-08)
    p = p * x2 + F(1.48572235717979e-05)
    p = p * x2 + F(6.37261928875436e-04)
    p = p * x2 + F(4.89352455891786e-03)
    q = F(1.19825839466702e-06) * x2 + F(1.18534705686654e-04)
    q = q * x2 + F(2.26843463243900e-03)
    q = q * x2 + F(4.89352518554385e-03)
    return x * p / q


@njit(inline="always", **_JIT)
def _gelu_tanh(x):
    return F(0.5) * x * (F(1) + _tanh(F(0.7978845608028654) * (x + F(0.044715) * x * x * x)))


@njit(inline="always", **_JIT)
def _silu(x):
    return F(0.5) * x * (F(1) + _tanh(F(0.5) * x))


@njit(inline="always", **_JIT)
def _relu(x):
    return max(x, F(0))


@njit(inline="always", **_JIT)
def _row(activation, gated, h, h_up, low, low_up, w_in, w_out, col_in, col_out):
    """One H of a game: adds w v(H, L) into the per-L sums and returns the sums over L."""
    sum_in = F(0)
    sum_out = F(0)
    for L in range(low.shape[0]):
        v = activation(h + low[L])
        if gated:
            v = v * (h_up + low_up[L])
        x_in = w_in[L] * v
        x_out = w_out[L] * v
        col_in[L] += x_in
        col_out[L] += x_out
        sum_in += x_in
        sum_out += x_out
    return sum_in, sum_out


@njit(inline="always", **_JIT)
def _subset_sums(parts, out):
    """out[c] = sum of the parts whose bit is set in c (bit k <-> parts[k]), by doubling."""
    out[0] = F(0)
    for k in range(parts.shape[0]):
        half = 1 << k
        for c in range(half):
            out[half + c] = out[c] + parts[k]


@njit(inline="always", **_JIT)
def _signed_sums(sums_in, sums_out, out):
    """out[k] = sum_c [bit k of c] sums_in[c] - [bit k not set] sums_out[c]."""
    for k in range(out.shape[0]):
        total = F(0)
        for c in range(sums_in.shape[0]):
            total += sums_in[c] if (c >> k) & 1 else -sums_out[c]
        out[k] = total


@njit(parallel=True, **_JIT)
def _shapley(code, players, up, w_in, w_out, size_high, out):
    """Exact Shapley values of every game: players (games, P) -> out (games, P).

    v(S) = g(sum_S players), times sum_S up for a gated FF (``up`` is empty otherwise).
    """
    games, P = players.shape
    n_low = P // 2
    gated = up.shape[0] > 0
    for game in prange(games):
        low, high = np.empty(1 << n_low, F), np.empty(1 << (P - n_low), F)
        low_up, high_up = np.zeros(1 << n_low, F), np.zeros(1 << (P - n_low), F)
        _subset_sums(players[game, :n_low], low)
        _subset_sums(players[game, n_low:], high)
        if gated:
            _subset_sums(up[game, :n_low], low_up)
            _subset_sums(up[game, n_low:], high_up)
        col_in, col_out = np.zeros(low.shape[0], F), np.zeros(low.shape[0], F)
        row_in, row_out = np.empty(high.shape[0], F), np.empty(high.shape[0], F)
        for H in range(high.shape[0]):
            h, h_up, w_in_h, w_out_h = high[H], high_up[H], w_in[size_high[H]], w_out[size_high[H]]
            # dispatched per H, not per coalition, so the inner loop stays one vectorised loop
            if code == 0:
                sums = _row(_gelu, gated, h, h_up, low, low_up, w_in_h, w_out_h, col_in, col_out)
            elif code == 1:
                sums = _row(_gelu_tanh, gated, h, h_up, low, low_up, w_in_h, w_out_h, col_in, col_out)
            elif code == 2:
                sums = _row(_silu, gated, h, h_up, low, low_up, w_in_h, w_out_h, col_in, col_out)
            else:
                sums = _row(_relu, gated, h, h_up, low, low_up, w_in_h, w_out_h, col_in, col_out)
            row_in[H], row_out[H] = sums
        _signed_sums(col_in, col_out, out[game, :n_low])
        _signed_sums(row_in, row_out, out[game, n_low:])


def activation_code(activation: Callable) -> Optional[int]:
    """The kernel code whose approximation reproduces ``activation`` on the probe grid, or None."""
    try:
        return _codes[activation]
    except (KeyError, TypeError):  # TypeError: not weak-referenceable, so not remembered
        pass
    with torch.no_grad():
        want = activation(_PROBE).float()
    match = None
    for code in range(len(ACTIVATIONS)):  # a one-player game's value is g(x) - g(0) = g(x)
        if (exact(code, [_PROBE[None]])[0] - want).abs().max() < _PROBE_TOLERANCE:
            match = code
            break
    try:
        _codes[activation] = match
    except TypeError:
        pass
    return match


_codes: "weakref.WeakKeyDictionary[Callable, Optional[int]]" = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=8)
def _tables(players: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w(|H|+|L|-1) and w(|H|+|L|) as (|H|, L) tables, and |H| of every high-half coalition."""
    n_low = players // 2
    size_low = np.array([bin(c).count("1") for c in range(2 ** n_low)])
    size_high = np.array([bin(c).count("1") for c in range(2 ** (players - n_low))])
    w = np.array(shapley_weights(players) + [0.0])  # w[-1] = 0 stands for w(-1), never used
    size = np.arange(players - n_low + 1)[:, None] + size_low[None, :]  # |H| + |L|
    w_in, w_out = w[size - 1].astype(F), w[size].astype(F)
    return w_in, w_out, size_high


def exact(code: int, players: Sequence[torch.Tensor]) -> torch.Tensor:
    """Exact Shapley values of every game: float32 players (P, ...) per projection -> (P, ...)."""
    P = players[0].shape[0]
    flat = [p.detach().reshape(P, -1).T.contiguous().numpy() for p in players]  # (games, P)
    up = flat[1] if len(flat) == 2 else flat[0][:0]
    out = np.empty_like(flat[0])
    # numba's OpenMP layer shares its count with torch, and starting it (numba's first thread call in a process) sets
    # the count to numba's default, every core: torch's is read before and put back after, or a process that chose
    # fewer threads would run on all of them
    torch_threads = torch.get_num_threads()
    threads = get_num_threads()
    set_num_threads(max(1, min(config.NUMBA_NUM_THREADS, torch_threads)))  # follow torch's setting
    try:
        _shapley(code, flat[0], up, *_tables(P), out)
    finally:
        set_num_threads(threads)
        torch.set_num_threads(torch_threads)
    return torch.from_numpy(out.T.copy()).view(players[0].shape)
