"""Mixing ratio (Kobayashi et al. 2021): how much of a token's update comes from its context.

``r_i = ||Σ_{j≠i} F_i(x_j)|| / (||Σ_{j≠i} F_i(x_j)|| + ||F_i(x_i)||)`` with the parts of a scope
(bias terms left out), averaged over tokens, layers and sentences. Three views of the attention
block: ATTN-W (head-averaged weights: ``1 − α_ii``), ATTN-N (weighted value vectors) and
ATTNRESLN-N (``atb``: attention + residual + LN1 in Post-LN models; RES1∘ATTN∘LN1 in Pre-LN ones).
Published BERT-base means: 97.1 %, 85.2 %, 18.8 %.
"""
import numpy as np

from attrbench.plugin import Analysis, register
from attrbench.plugin.internal import decompositions, safe_divide

VIEWS = {"attn_w": "ATTN-W", "attn_n": "ATTN-N", "atb": "ATTNRESLN-N"}
PUBLISHED_BERT_BASE = {"attn_w": 0.971, "attn_n": 0.852, "atb": 0.188}
PUBLISHED_SOURCE = "Kobayashi et al. 2021 (BERT-base, another model)"


def mixing_ratios(parts) -> np.ndarray:
    """(n,) ratios from (n, n, d) parts (row i: the parts of output i)."""
    own = parts.diagonal(dim1=0, dim2=1).T  # (n, d)
    context = parts.sum(1) - own
    c, s = context.norm(dim=-1), own.norm(dim=-1)
    return safe_divide(c, c + s).double().cpu().numpy()


class MixingRatio(Analysis):
    name = "mixing_ratio"
    description = "context share of each token's update through ATTN-W, ATTN-N and ATTNRESLN-N"
    reference = "Kobayashi et al. 2021, Exp. 1"
    figures = ("bars",)

    def run(self, adapter, methods, examples, context):
        per_view = {v: [] for v in VIEWS}  # example -> (layers,) mean ratio over tokens
        for dec in decompositions(adapter, examples, list(VIEWS), context.progress, self.name, keep_parts=True):
            per_view["attn_w"].append(1 - np.diagonal(dec.maps["attn_w"], axis1=1, axis2=2).mean(-1))
            for view in ("attn_n", "atb"):
                per_view[view].append(np.array([mixing_ratios(layer[view][0]).mean() for layer in dec.parts]))
        return [self.record(adapter, context, view, "mixing_ratio", np.mean(values, 1).tolist(), examples,
                            view=VIEWS[view], label=f"{VIEWS[view]} ({view})", per_layer=np.mean(values, 0).tolist(),
                            published={"value": PUBLISHED_BERT_BASE[view], "source": PUBLISHED_SOURCE})
                for view, values in per_view.items()]


register(MixingRatio)
