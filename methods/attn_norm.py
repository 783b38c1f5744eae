"""Norm-based maps of the attention block (Kobayashi et al. 2020, 2021).

- ``attn_n`` (ATTN-N): ``||sum_h alpha^h_ij (x_j W_V^h + b_V^h) W_O^h||`` — the attention output split
  over the tokens it reads, bias ``b_O``.
- ``attn_res_n`` (ATTNRES-N): the same plus the residual, ``x_i`` added to the part of ``j = i``.
  (In a Pre-LN model this equals ``atb``.)

Both reconstruct the real attention (+ residual) output exactly; checked on every call.
"""
from attrbench.plugin import ScopeMap, register

register(ScopeMap("attn_n", "norm", "norms of the attention output per input token (ATTN-N)", complete=True,
                  reference="Kobayashi et al. 2020, 'Attention is not only a weight'"))
register(ScopeMap("attn_res_n", "norm", "ATTN-N plus the residual connection (ATTNRES-N)", complete=True,
                  reference="Kobayashi et al. 2021, 'Incorporating residual and normalization layers'"))
