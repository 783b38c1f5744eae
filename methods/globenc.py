"""GlobEnc (Modarressi et al. 2022): norms through the whole encoder layer except the FF, rolled out.

Per layer, the attention block's parts (ATTN, RES1, LN1) pass through RES2 and LN2 as if the FF
output were zero, with LN2's real scale: ``||LN2-part(atb_ij)||``, row-normalised and rolled out.
For Pre-LN models leaving out the FF leaves the attention block itself, so the per-layer map is the
``atb`` norm map (GlobEnc then coincides with norm rollout).
"""
import torch

from attrbench.plugin import DerivedMap, Rollout, register
from attrbench.plugin.internal import stages


class GlobEncNorms(DerivedMap):
    name, reads = "globenc", "atb"

    def compute(self, parts, bias, view):
        if not view.layout.norm_first:  # through LN2 with its real scale (RES2 adds the FF output, left out)
            ln2 = view.spec.ln2
            parts = stages.norm_parts(parts, bias, ln2, ln2.scale(view.capture.ln2_in[view.rows]))[0]
        return torch.linalg.vector_norm(parts, dim=-1)


GLOBENC_MAP = GlobEncNorms()
register(Rollout("globenc", lambda layout: GLOBENC_MAP, "rollout",
                 "norms through ATTN, RES1, LN1, RES2, LN2 (FF left out), rolled out (GlobEnc)",
                 "Modarressi et al. 2022, 'GlobEnc'"))
