"""ATTN-W: raw attention weights, averaged over heads (the map most analyses start from).

``M[i, j] = (1/H) sum_h alpha^h_ij``. Not a decomposition of any output (no completeness).
Reference: e.g. Clark et al. 2019; the baseline of Kobayashi et al. 2020.
"""
from attrbench.plugin import ScopeMap, register

register(ScopeMap("attn_w", "attention", "attention weights averaged over heads (ATTN-W)", complete=False,
                  reference="Clark et al. 2019; Kobayashi et al. 2020"))
