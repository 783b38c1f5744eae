"""Where things are in a layer, once per norm placement: scope order, the FF's neighbours, RES2, the next norm.

Every part of attrbench that needs a layer's shape (the engine, the rollouts, the analyses, the
report's heatmaps) reads it from here instead of spelling scope names out itself.

    Post-LN (BERT family): attn_w, attn_n, attn_res_n, atb, atb_ff, atb_ff_res, atb_ff_res_ln
    Pre-LN (GPT-2/OPT/LLaMA): attn_w, attn_n, attn_res_n, atb, atb_ln, atb_ln_ff, atb_ln_ff_res

Scopes are named after Kobayashi et al. 2024 (§4, Fig. 1). Each scope after ``atb`` adds one
component (``ln``, ``ff`` or ``res``) to the one before it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    norm_first: bool
    scopes: tuple[str, ...]  # the engine's hook points, in data-flow order
    added: tuple[tuple[str, str], ...]  # (scope, the component it adds), for the scopes after atb
    boundaries: tuple[tuple[str, str], ...]  # (scope, captured tensor its parts sum to; see LayerCapture)

    attention_block: str = "atb"

    @property
    def kind(self) -> str:
        return "Pre-LN" if self.norm_first else "Post-LN"

    @property
    def ff_scopes(self) -> tuple[str, ...]:
        """Scopes whose parts went through the FF block (they depend on how its activation is split)."""
        return self.scopes[self.scopes.index(self.after_ff):]

    @property
    def after_ff(self) -> str:
        return next(scope for scope, component in self.added if component == "ff")

    @property
    def before_ff(self) -> str:
        return self.scopes[self.scopes.index(self.after_ff) - 1]

    @property
    def after_res2(self) -> str:
        return next(scope for scope, component in self.added if component == "res")

    @property
    def whole_layer(self) -> str:
        return self.scopes[-1]

    @property
    def through_layer(self) -> tuple[str, ...]:
        """atb through the whole layer: the series of the FF paper's heatmaps (Fig. 9-10)."""
        return self.scopes[self.scopes.index(self.attention_block):]

    @property
    def steps(self) -> dict[str, tuple[str, str]]:
        """component -> (scope before it, scope after it), in data-flow order."""
        order = self.through_layer
        return {component: (order[k], scope) for k, (scope, component) in enumerate(self.added)}

    @property
    def since_ff(self) -> dict[str, tuple[str, str]]:
        """``ff``, ``ff_res``, ``ff_res_ln`` ... -> (scope before the FF, scope after those components)."""
        scopes = [s for s, _ in self.added]
        start = scopes.index(self.after_ff)
        names = [c for _, c in self.added]
        return {"_".join(names[start:k + 1]): (self.before_ff, scopes[k]) for k in range(start, len(scopes))}

    def boundary(self, scope: str) -> str:
        """The captured tensor (a ``LayerCapture`` field) that a scope's parts must sum to."""
        return dict(self.boundaries)[scope]


POST_LN = Layout(
    norm_first=False,
    scopes=("attn_w", "attn_n", "attn_res_n", "atb", "atb_ff", "atb_ff_res", "atb_ff_res_ln"),
    added=(("atb_ff", "ff"), ("atb_ff_res", "res"), ("atb_ff_res_ln", "ln")),
    boundaries=(("attn_n", "attn_out"), ("attn_res_n", "ln1_in"), ("atb", "ln1_out"), ("atb_ff", "ff_out"),
                ("atb_ff_res", "ln2_in"), ("atb_ff_res_ln", "out")),
)
PRE_LN = Layout(
    norm_first=True,
    scopes=("attn_w", "attn_n", "attn_res_n", "atb", "atb_ln", "atb_ln_ff", "atb_ln_ff_res"),
    added=(("atb_ln", "ln"), ("atb_ln_ff", "ff"), ("atb_ln_ff_res", "res")),
    boundaries=(("attn_n", "attn_out"), ("attn_res_n", "attn_res"), ("atb", "attn_res"), ("atb_ln", "ln2_out"),
                ("atb_ln_ff", "ff_out"), ("atb_ln_ff_res", "out")),
)
ALL_FF_SCOPES = tuple(dict.fromkeys(POST_LN.ff_scopes + PRE_LN.ff_scopes))  # of either placement


def layout_for(norm_first: bool) -> Layout:
    return PRE_LN if norm_first else POST_LN


def ff_output_readers(adapter) -> list:
    """Per layer, the norm module that next reads the FF output (Post-LN: LN2; Pre-LN: its post-norm where the
    block has one, else the next layer's first norm, or the final norm; None where the model has none)."""
    if not adapter.norm_first:
        return [spec.ln2.module for spec in adapter.layers]
    following = [spec.ln1.module for spec in adapter.layers[1:]] + [adapter.final_norm]
    return [spec.ff_post_norm.module if spec.ff_post_norm is not None else after
            for spec, after in zip(adapter.layers, following)]


