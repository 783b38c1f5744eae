"""GlobEnc (Modarressi et al. 2022): norms through the whole encoder layer except the FF, rolled out.

Per layer, the attention block's parts (ATTN, RES1, LN1) pass through RES2 and LN2 as if the FF
output were zero, with LN2's real scale: ``||LN2-part(atb_ij)||``, row-normalised and rolled out.
For Pre-LN models leaving out the FF leaves the attention block itself, so the per-layer map is the
``atb`` norm map (GlobEnc then coincides with norm rollout).
"""
from attrbench.method import Rollout
from attrbench.registry import METHODS

METHODS.add(Rollout("globenc", lambda adapter: "globenc", "rollout",
                    "norms through ATTN, RES1, LN1, RES2, LN2 (FF left out), rolled out (GlobEnc)",
                    "Modarressi et al. 2022, 'GlobEnc'"))
