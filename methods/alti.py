"""ALTI: Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al. 2022, Eq. 9-11).

Per layer, with ``y_i`` the attention block's real output and ``T_i(x_j)`` its parts (bias left out):
``d_ij = ||y_i - T_i(x_j)||_1``, ``C_ij = max(0, ||y_i||_1 - d_ij) / sum_k max(0, ||y_i||_1 - d_ik)``
(``attrbench.decompose.derived.ALTI_MAP``); ``R = C^L ··· C^1``; the explanation is the target row of R.
"""
from attrbench.plugin import Rollout, register
from attrbench.plugin.internal import ALTI_MAP

register(Rollout("alti", lambda layout: ALTI_MAP, "rollout",
                 "L1-proximity contributions of the attention block, rolled out (ALTI)",
                 "Ferrando et al. 2022, 'Measuring the Mixing of Contextual Information in the Transformer'"))
