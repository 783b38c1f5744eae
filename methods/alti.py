"""ALTI: Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al. 2022, Eq. 9-11).

Per layer, with ``y_i`` the attention block's real output and ``T_i(x_j)`` its parts (bias left out):
``d_ij = ||y_i - T_i(x_j)||_1``, ``C_ij = max(0, ||y_i||_1 - d_ij) / sum_k max(0, ||y_i||_1 - d_ik)``;
``R = C^L ··· C^1``; the explanation is the target row of R.
"""
from attrbench.decompose import DerivedMap, stages
from attrbench.method import Rollout
from attrbench.registry import METHODS


class ALTIContributions(DerivedMap):
    """C (Eq. 10) of one layer, from the attention block's parts and its real output."""

    name, reads = "alti", "atb"

    def compute(self, parts, bias, view):
        return stages.l1_proximity(parts, view.real(self.reads))


ALTI_MAP = ALTIContributions()
METHODS.add(Rollout("alti", lambda layout: ALTI_MAP, "rollout",
                    "L1-proximity contributions of the attention block, rolled out (ALTI)",
                    "Ferrando et al. 2022, 'Measuring the Mixing of Contextual Information in the Transformer'"))
