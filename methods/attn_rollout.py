"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Per layer ``Â = 0.5 A + 0.5 I`` with A the head-mean attention weights, row-normalised;
``R = Â^L ··· Â^1``; the explanation is the target row of R.
"""
from attrbench.plugin import Rollout, register

register(Rollout("attn_rollout", lambda layout: "attn_w", "rollout",
                 "attention weights + identity, rolled out over layers",
                 "Abnar & Zuidema 2020", identity=True, uses_values=False))
