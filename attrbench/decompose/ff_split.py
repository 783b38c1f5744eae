"""How the FF activation is split over the tokens: a table of named strategies.

Each strategy turns the per-token parts of the FF pre-activation (and the bias part) into parts of
the activation output whose sum is the real activation (so completeness holds). ``prepare`` runs
once per layer on the real FF input; ``split`` runs per chunk of output rows.

- ``ig``: exact zero-baseline Integrated Gradients in closed form (Kobayashi et al. 2024 used
  captum's IG; docs/architecture.md): ``IG_j = p_j g(s)/s`` for a plain FF, and for a gated one
  ``a_j S_c I1 + c_j I0`` with two shared 1-D integrals per element.
- ``shapley-exact``, ``shapley-sampling`` (ours) and ``shap-exact``, ``shap-permutation``,
  ``shapley-kernel`` (the shap library): Shapley values with the token parts and the bias as
  players (Kobayashi et al. 2024, App. E); see ``shapley.py``.

- ``decompx``: DecompX's linear approximation (Modarressi et al. 2023, ``GeLU_LA``): the tangent at the real
  pre-activation, slope ``g'(s)`` on every part and the intercept ``g(s) - g'(s) s`` to the bias. For a gated FF
  (not in the paper) the tangent plane of ``g(a) c`` at the real (a, c): ``a_j g'(a) c + c_j g(a)``, intercept
  ``-g'(a) c a``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from . import shapley, stages

# (parts (m, c, d'), bias (c, d')) of each projection: [gate, up] for a gated FF, [w_in] otherwise
Projected = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Split:
    """The activation's parts (m, c, d'), its bias part (c, d') and the largest sampling s.e. (0 if exact)."""

    parts: torch.Tensor
    bias: torch.Tensor
    sampling_se: float = 0.0


class IntegratedGradientsSplit:
    name = "ig"

    def prepare(self, ff, ff_in: torch.Tensor):
        if ff.gated:
            return stages.gated_ig_factors(ff.activation, ff.w_in(ff_in), ff.up(ff_in))
        return (stages.ig_share(ff.activation, ff.w_in(ff_in)),)

    def prepare_batched(self, ffs, ins: list[torch.Tensor]) -> list:
        """``prepare`` of FFs sharing one activation (a mixture's experts, each on its routed rows) in one pass: the
        factors are element-wise, so joining the rows changes no value and pays the quadrature's calls once."""
        gate = torch.cat([ff.w_in(x) for ff, x in zip(ffs, ins)])
        if ffs[0].gated:
            factors = stages.gated_ig_factors(ffs[0].activation, gate, torch.cat([ff.up(x) for ff, x in zip(ffs, ins)]))
        else:
            factors = (stages.ig_share(ffs[0].activation, gate),)
        pieces = [factor.split([len(x) for x in ins]) for factor in factors]
        return [tuple(piece[i] for piece in pieces) for i in range(len(ffs))]

    def split(self, ff, factors, pre: Projected, rows: slice, samples: int, seed: int) -> Split:
        if ff.gated:  # IG(a_j) + IG(c_j) = a_j S_c I1 + c_j I0
            (gate, gate_bias), (up, up_bias) = pre
            k1, k0 = factors[0][rows], factors[1][rows]
            return Split(gate.mul_(k1).add_(up.mul_(k0)), gate_bias * k1 + up_bias * k0)
        (p, p_bias), share = pre[0], factors[0][rows]  # IG(p_j) = p_j g(S)/S
        return Split(p.mul_(share), p_bias * share)


class TangentSplit:
    name = "decompx"

    def prepare(self, ff, ff_in: torch.Tensor):
        gate = ff.w_in(ff_in)
        slope, intercept = stages.tangent(ff.activation, gate)
        if not ff.gated:
            return slope, intercept
        up = ff.up(ff_in)
        return slope * up, ff.activation(gate), -slope * up * gate

    def split(self, ff, factors, pre: Projected, rows: slice, samples: int, seed: int) -> Split:
        if ff.gated:
            (gate, gate_bias), (up, up_bias) = pre
            k_gate, k_up, intercept = (f[rows] for f in factors)
            return Split(gate.mul_(k_gate).add_(up.mul_(k_up)), gate_bias * k_gate + up_bias * k_up + intercept)
        (p, p_bias), (slope, intercept) = pre[0], (f[rows] for f in factors)
        return Split(p.mul_(slope), p_bias * slope + intercept)


@dataclass(frozen=True)
class ShapleySplit:
    """Players: the token parts and the bias; ``engine(activation, players, samples, seed)``."""

    name: str
    engine: Callable

    def prepare(self, ff, ff_in: torch.Tensor):
        return None

    def split(self, ff, prepared, pre: Projected, rows: slice, samples: int, seed: int) -> Split:
        players = [torch.cat([p, p_bias[None]]) for p, p_bias in pre]  # (m + 1, c, d')
        values, se = self.engine(ff.activation, players, samples, seed)
        return Split(values[:-1], values[-1], se)


def _exact(activation, players, samples, seed):
    return shapley.exact(activation, players), 0.0


def _sampling(activation, players, samples, seed):
    values, se = shapley.sampling(activation, players, samples, seed)
    return values, float(se.max())


def _with_shap(engine: str):
    def run(activation, players, samples, seed):
        return shapley.with_shap(activation, players, engine, samples, seed), 0.0
    return run


def prepare_many(split, ffs, ins: list[torch.Tensor]) -> list:
    """``split``'s preparation of several FFs (a mixture's experts on their routed rows): in one pass where the
    split can join them (``prepare_batched``; FFs of one activation and kind), else one by one."""
    batched = getattr(split, "prepare_batched", None)
    if batched is not None and len(ffs) > 1 and all(
            ff.activation is ffs[0].activation and ff.gated == ffs[0].gated for ff in ffs):
        return batched(ffs, ins)
    return [split.prepare(ff, x) for ff, x in zip(ffs, ins)]


FF_SPLITS = {
    "ig": IntegratedGradientsSplit(),
    "decompx": TangentSplit(),
    "shapley-exact": ShapleySplit("shapley-exact", _exact),
    "shapley-sampling": ShapleySplit("shapley-sampling", _sampling),
    "shap-exact": ShapleySplit("shap-exact", _with_shap("shap-exact")),
    "shap-permutation": ShapleySplit("shap-permutation", _with_shap("shap-permutation")),
    "shapley-kernel": ShapleySplit("shapley-kernel", _with_shap("shapley-kernel")),
}
FF_ATTRIBUTIONS = tuple(FF_SPLITS)
