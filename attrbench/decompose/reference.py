"""The straightforward formulation the paper used, kept as an independent check and a baseline.

Kobayashi et al. (2024) decomposed the FF activation with captum's IntegratedGradients, one call per
output row i with Gauss-Legendre steps, after projecting every (i, j) part through W_in unfactored.
This module does exactly that from the engine's ``atb``/``atb_ln`` parts, so tests can compare it
with the engine's closed form and the benchmark can time the speed-up. It is slow by design.
"""
from __future__ import annotations

import torch
from captum.attr import IntegratedGradients

from ..models.spec import FeedForwardSpec


def _ig(activation, ff: FeedForwardSpec, inputs: tuple[torch.Tensor, ...], steps: int) -> tuple[torch.Tensor, ...]:
    """captum IG of ``sum_k FF_act(sum_j parts)_k`` from a zero baseline; the parts are the players."""
    if ff.gated:
        def forward(gate, up):
            return (activation(gate.sum(1)) * up.sum(1)).sum(-1)
    else:
        def forward(pre):
            return activation(pre.sum(1)).sum(-1)
    ig = IntegratedGradients(forward)
    with torch.enable_grad():
        attributions = ig.attribute(tuple(x[None] for x in inputs), n_steps=steps, method="gausslegendre")
    return tuple(a[0] for a in attributions)


def ff_parts_reference(ff: FeedForwardSpec, in_parts: torch.Tensor, in_bias: torch.Tensor,
                       steps: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """FF output parts (n, n, d) and bias (n, d) from FF-input parts (n, n, d) and bias (n, d).

    The bias term is one more player of the IG game, as in the paper.
    """
    n = in_parts.shape[0]
    parts, biases = [], []
    for i in range(n):
        players = torch.cat([in_parts[i], in_bias[i][None]])  # (n + 1, d)
        projections = [players @ ff.w_in.weight] + ([players @ ff.up.weight] if ff.gated else [])
        for p, proj in zip(projections, [ff.w_in] + ([ff.up] if ff.gated else [])):
            if proj.bias is not None:
                p[-1] += proj.bias
        attributions = _ig(ff.activation, ff, tuple(projections), steps)
        act = sum(attributions)  # IG of gate and up parts of the same token add up
        out = (act @ ff.w_out.weight).detach()
        parts.append(out[:-1])
        biases.append(out[-1] + (ff.w_out.bias if ff.w_out.bias is not None else 0))
    return torch.stack(parts), torch.stack(biases)
