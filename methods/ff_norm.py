"""FF-inclusive norm-based maps of whole layers (Kobayashi et al. 2024, §4, Fig. 1).

Each scope extends the attention block ``atb`` through the feed-forward block, whose activation
is split over tokens by exact zero-baseline Integrated Gradients (closed form; docs/architecture.md):

    Post-LN: atb = LN1∘RES1∘ATTN, atb_ff (+FF), atb_ff_res (+RES2), atb_ff_res_ln (+LN2 = whole layer)
    Pre-LN:  atb = RES1∘ATTN∘LN1, atb_ln (+LN2), atb_ln_ff (+FF), atb_ln_ff_res (+RES2 = whole layer)

RES2 adds every token's attention-block part (the complete form; the paper's printed Eq. 53/57
adds only the j = i part, which does not reconstruct the forward pass). Every map's parts sum to
the real hidden state at that boundary; the residual is checked on every call.
"""
from attrbench.plugin import METHODS, ScopeMap

_REF = "Kobayashi et al. 2024, 'Analyzing feed-forward blocks in Transformers through the lens of attention maps'"
SCOPES = {
    "atb": "attention block: ATTN + RES1 + LN1 (Post-LN: ATTNRESLN-N) or LN1 + ATTN + RES1 (Pre-LN)",
    "atb_ff": "Post-LN: attention block then feed-forward (FF output parts)",
    "atb_ff_res": "Post-LN: attention block, FF and the second residual",
    "atb_ff_res_ln": "Post-LN: the whole layer (attention block, FF, RES2, LN2)",
    "atb_ln": "Pre-LN: attention block then LN2",
    "atb_ln_ff": "Pre-LN: attention block, LN2 and feed-forward (FF output parts)",
    "atb_ln_ff_res": "Pre-LN: the whole layer (attention block, LN2, FF, RES2)",
}
for scope, description in SCOPES.items():
    METHODS.add(ScopeMap(scope, "norm-ff", description, complete=True, reference=_REF))
