"""Norm rollout: rollout of the attention-block norm maps (Kobayashi et al. 2021 contributions).

Per layer the row-normalised ``atb`` map (ATTNRESLN-N for Post-LN, RES1∘ATTN∘LN1 for Pre-LN; the
residual is already inside, so no identity is added); ``R = M^L ··· M^1``. The "Norm Rollout"
baseline of Ferrando et al. 2022.
"""
from attrbench.plugin import Rollout, register

register(Rollout("norm_rollout", lambda layout: layout.attention_block, "rollout",
                 "attention-block norm maps, rolled out over layers",
                 "Kobayashi et al. 2021; as a baseline in Ferrando et al. 2022"))
