"""Derived maps that more than one method reads: ALTI's contributions (Ferrando et al. 2022, Eq. 9-10).

Per layer, with ``y_i`` the attention block's real output and ``T_i(x_j)`` its parts (bias left out):
``d_ij = ||y_i - T_i(x_j)||_1``, ``C_ij = max(0, ||y_i||_1 - d_ij) / sum_k max(0, ||y_i||_1 - d_ik)``.
ALTI rolls them out; ALTI-Logit carries each layer's logit parts to the inputs with them.
"""
from __future__ import annotations

from . import stages
from .engine import DerivedMap


class ALTIContributions(DerivedMap):
    """C (Eq. 10) of one layer, from the attention block's parts and its real output."""

    name, reads = "alti", "atb"

    def compute(self, parts, bias, view):
        return stages.l1_proximity(parts, view.real(self.reads))


ALTI_MAP = ALTIContributions()
