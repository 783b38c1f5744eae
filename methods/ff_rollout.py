"""FF-inclusive rollout: rollout of whole-layer maps that include the feed-forward block.

Per layer the map of the whole layer, FF included (``atb_ff_res_ln`` for Post-LN, ``atb_ln_ff_res``
for Pre-LN; Kobayashi et al. 2024), with each row divided by its sum — so every layer passes on a
unit of relevance per token, split in proportion to the norms of the exact parts; then
``R = M^L ··· M^1``. The FF-inclusive input attribution no published tool offers. The FF activation
is split by exact IG unless its ``ff_attribution`` parameter (CLI ``--ff-attribution``) picks a Shapley split.
"""
from attrbench.plugin import Rollout, register

register(Rollout("ff_rollout", lambda layout: layout.whole_layer, "rollout",
                 "whole-layer FF-inclusive norm maps, row-normalised and rolled out",
                 "built on Kobayashi et al. 2024", through_ff=True))
