"""Per-layer decomposition of a real forward pass into every scope of Kobayashi et al. (2024).

Scopes are named after the paper (§4, Fig. 1) and are the engine's hook points, in data-flow order
(``layout.py``; for Pre-LN, ``attn_res_n`` equals ``atb`` = RES1∘ATTN∘LN1). Every scope except ``attn_w`` is a
decomposition ``y_i = sum_j F_i(x_j) + b_i`` whose map is ``||F_i(x_j)||``; each is checked against
the tensor the unmodified model produced at that boundary, and a residual above tolerance raises.

Rows i are processed in chunks so memory stays ~``chunk_bytes``; for causal models only columns
j <= i are computed. The FF's first projection is folded onto per-head value vectors
(``folded_norm_weight``), which leaves ``n^2 d' d`` multiply-adds (the FF output projection of
every part) as the dominant cost.

Extension points, so a method never edits the engine: how the FF activation is split is a named
strategy (``ff_split.FF_SPLITS``), and maps computed from a scope's parts (ALTI, GlobEnc) are
:class:`DerivedMap` plugins defined by their methods. All options travel as one
:class:`DecomposeOptions`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import CompletenessError, InputError
from ..models.adapter import LayerCapture, TransformerAdapter
from ..models.architectures import no_reader_reason
from ..models.spec import LayerSpec, Linear
from . import shapley, stages
from .ff_split import FF_SPLITS, prepare_many
from .layout import Layout, layout_for

VALUE_BIAS = ("token", "bias")
TOLERANCE = {torch.float64: 1e-8, torch.float32: 1e-4}
# float64 runs of models that normalise or softmax in float32 internally are only float32-exact there.
FLOAT32_INTERNALS_TOLERANCE = 1e-6
DEFAULT_CHUNK_BYTES = 32 * 2**20


def scopes_for(norm_first: bool) -> tuple[str, ...]:
    return layout_for(norm_first).scopes


@dataclass(frozen=True)
class DecomposeOptions:
    """Everything a decomposition can be asked for, in one object (``decompose(..., **fields)`` builds it)."""

    scopes: Optional[Sequence[str]] = None  # None: every scope of the model
    layers: Optional[Sequence[int]] = None  # None: every layer; negative numbers count from the end
    value_bias: str = "token"  # where b_V goes: each token's part ("token") or the bias ("bias")
    ff_attribution: str = "ig"  # how the FF activation is split: a name in ff_split.FF_SPLITS
    shapley_samples: int = 256  # permutations (shapley-sampling) or evaluations (shap's samplers)
    seed: int = 0  # for the sampled FF splits
    derived: Sequence["DerivedMap"] = ()  # maps computed from a scope's parts in the same pass
    keep_parts: bool = False  # hand out every scope's (n, n, d) parts too (memory: n^2 d per scope)
    keep_captures: bool = False  # hand out the real tensors each layer was decomposed against too
    truncate: bool = False
    tolerance: Optional[float] = None  # completeness; default by dtype (see default_tolerance)
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    progress: bool = False


@dataclass(frozen=True)
class ChunkView:
    """What a derived map sees of one chunk of output rows: the layer, its real tensors and its layout."""

    spec: LayerSpec
    capture: LayerCapture
    layout: Layout
    rows: slice

    def real(self, scope: str) -> torch.Tensor:
        """The real tensor a scope's parts sum to, for these rows."""
        return getattr(self.capture, self.layout.boundary(scope))[self.rows]


class DerivedMap:
    """A token-to-token map computed from one scope's parts in the engine's pass (e.g. ALTI, GlobEnc).

    Methods define these next to themselves; the engine only calls them. ``compute`` gets the
    scope's parts (m, c, d) (input-major: ``parts[j, i]``), its bias (c, d) and a :class:`ChunkView`,
    and returns the (m, c) map cells ``[j, i]`` for those rows. It must not modify ``parts``.
    """

    name: str = ""
    reads: str = "atb"  # the scope whose parts it reads

    def compute(self, parts: torch.Tensor, bias: torch.Tensor, view: ChunkView) -> torch.Tensor:
        raise NotImplementedError


@dataclass
class LayerDecomposition:
    maps: dict[str, torch.Tensor]  # scope or derived map -> (n, n)
    residuals: dict[str, float]  # scope -> max relative completeness residual over rows
    parts: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # (n,n,d), (n,d)
    ff_sampling_se: float = 0.0  # largest standard error of sampled Shapley values (0 when exact)


@dataclass
class Decomposition:
    """One sequence: per-scope maps over the chosen layers and their completeness residuals."""

    model: str
    tokens: list[str]
    layers: list[int]
    maps: dict[str, np.ndarray]  # scope -> (len(layers), n, n)
    residuals: dict[str, float]  # scope -> max relative residual over layers and rows
    value_bias: str
    dtype: str
    input_ids: list[int] = field(default_factory=list)
    truncated: bool = False
    ff_attribution: str = "ig"
    ff_sampling_se: Optional[float] = None
    parts: Optional[list[dict[str, tuple[torch.Tensor, torch.Tensor]]]] = None  # per layer, if kept
    captures: Optional[list[LayerCapture]] = None  # per layer, sliced to this sequence, if kept

    def to_json(self) -> dict:
        return {"model": self.model, "tokens": self.tokens, "input_ids": self.input_ids, "layers": self.layers,
                "maps": {s: m.tolist() for s, m in self.maps.items()}, "residuals": self.residuals,
                "value_bias": self.value_bias, "dtype": self.dtype, "truncated": self.truncated,
                "ff_attribution": self.ff_attribution, "ff_sampling_se": self.ff_sampling_se}


def decompose_layer(spec: LayerSpec, cap: LayerCapture, scopes: Sequence[str], *, causal: bool,
                    options: DecomposeOptions = DecomposeOptions(),
                    workspace: stages.Workspace | None = None) -> LayerDecomposition:
    """Decompose one layer of one sequence (``cap`` sliced to its n real tokens)."""
    ws = workspace or stages.Workspace()
    layout = layout_for(spec.norm_first)
    order, derived = layout.scopes, list(options.derived)
    deepest = max(order.index(s) for s in [*scopes, *(d.reads for d in derived)])
    n, d = cap.x.shape
    norm_first, ff = spec.norm_first, spec.ff
    keep_parts = options.keep_parts
    maps = {s: cap.x.new_zeros(n, n) for s in [*scopes, *(m.name for m in derived)]}
    residuals = {s: 0.0 for s in scopes if s != "attn_w"}
    kept: dict[str, list] = {s: [] for s in residuals} if keep_parts else {}
    sampling_se = 0.0
    if "attn_w" in scopes:
        maps["attn_w"] = cap.attn_probs.mean(0)
    if deepest == 0:
        return LayerDecomposition(maps, residuals)

    # LN1 of a Pre-LN layer acts on one token at a time: all of it but beta is that token's.
    ln1_parts = None
    if norm_first:
        ln1_parts = cap.ln1_out if spec.ln1.beta is None else cap.ln1_out - spec.ln1.beta
    attn_in = cap.ln1_out if norm_first else cap.x
    values, attn_bias = stages.value_vectors(spec, attn_in, options.value_bias, ln1_parts)
    # Sandwich blocks norm each sublayer's output before the residual add, with its real scale per token.
    post, ff_post = spec.attn_post_norm, spec.ff_post_norm
    post_scale = None if post is None else post.scale(cap.attn_post_in)
    ff_post_scale = None if ff_post is None else ff_post.scale(cap.ff_post_in)

    # The norm in front of the FF (Post-LN: LN1, Pre-LN: LN2) with its real scale per token.
    ff_norm = spec.ln2 if norm_first else spec.ln1
    ff_scale = ff_norm.scale(cap.ln2_in if norm_first else cap.ln1_in)
    out_scale = None if norm_first else spec.ln2.scale(cap.ln2_in)
    want_ff = deepest >= order.index(layout.after_ff)
    if want_ff:
        ff_in = cap.ln2_out if norm_first else cap.ln1_out
        ff_split = FF_SPLITS[options.ff_attribution]
        units: dict[int, tuple] = {}
        routed_rows, prepared_experts = {}, {}
        if spec.experts is not None:  # each expert's rows, and the split's preparation on them, for all at once
            routed_rows = {e: rows for e, rows, _ in stages.routed(cap.expert_ids, cap.expert_weights,
                                                                   len(spec.experts))}
            prepared_experts = dict(zip(routed_rows, prepare_many(ff_split, [spec.experts[e] for e in routed_rows],
                                                                  [ff_in[rows] for rows in routed_rows.values()])))

        def unit(e: int) -> tuple:
            """One FF's weights folded for the chunks (a mixture of experts has one per expert, made when a token
            is first routed to it): its projections, their per-head and own-token pre-activations, the split's
            preparation on the real FF input."""
            if e not in units:
                ff_e = ff if spec.experts is None else spec.experts[e]
                projections = [ff_e.w_in] + ([ff_e.up] if ff_e.gated else [])
                folded = [stages.folded_norm_weight(ff_norm, p) for p in projections]
                # the attention's parts reach the FF through the post-norm too (folded the same way); a parallel FF
                # reads the layer input, all of it the token's own
                through = folded if post is None else [stages.folded_norm_weight(post, Linear(w, None)) for w in folded]
                per_head_pre = None if spec.parallel else [
                    (values.flatten(0, 1) @ w).view(n, spec.n_heads, -1) for w in through]  # (n, H, d')
                own_pre = [cap.x @ w for w in folded]  # residual token's share, (n, d')
                if spec.experts is None:
                    units[e] = ff_e, projections, per_head_pre, own_pre, ff_split.prepare(ff_e, ff_in), None
                else:  # the split's preparation on the rows routed to the expert only; ``place`` finds them there
                    routed = routed_rows[e]
                    place = torch.full((n,), -1, dtype=torch.long, device=cap.x.device)
                    place[routed] = torch.arange(len(routed), device=cap.x.device)
                    units[e] = ff_e, projections, per_head_pre, own_pre, prepared_experts[e], place
            return units[e]

        def ff_chunk(e: int, r0: int, r1: int, alpha_t: torch.Tensor, ff_in_bias: torch.Tensor, m: int,
                     sel: Optional[torch.Tensor] = None):
            """FF ``e``'s output parts (m, c', d) and bias (c', d) for rows r0:r1 (or those ``sel`` picks of them):
            its input parts projected through W_in, folded (per-head projections mixed, no n^2 d d')."""
            ff_e, projections, per_head_pre, own_pre, prepared, place = unit(e)
            at = slice(r0, r1) if sel is None else r0 + sel  # rows of the sequence
            mine = slice(None) if sel is None else sel  # rows of the chunk
            rows = torch.arange(r0, r1, device=cap.x.device)[mine]
            a = alpha_t if sel is None else alpha_t[:, sel].contiguous()
            pre = []
            for k, (own, proj) in enumerate(zip(own_pre, projections)):
                buffer = ws.get(f"pre{k}", (m, len(rows), own.shape[-1]), cap.x)
                if per_head_pre is None:
                    p = buffer.zero_()
                else:
                    p = stages.mix_heads(a, per_head_pre[k][:m], out=buffer)
                    if post is not None:
                        p.div_(post_scale[at, None])
                p = stages.add_to_own_token(p, rows, own[at])
                pre.append((p.div_(ff_scale[at, None]), proj(ff_in_bias[mine])))
            act = ff_split.split(ff_e, prepared, pre, at if place is None else place[at], options.shapley_samples,
                                 options.seed)
            parts = torch.mm(act.parts.view(-1, act.parts.shape[-1]), ff_e.w_out.weight,
                             out=ws.get("ff" if sel is None else "expert", (m * len(rows), d), cap.x))
            return parts.view(m, len(rows), d), ff_e.w_out(act.bias), act.sampling_se

    # Equal row chunks whose widest tensor, (n, rows, d' or d), stays within chunk_bytes. A mixture's rows each reach
    # k experts: chunked as a dense FF of the k experts' width, so a causal model skips as many columns j > i.
    width = ff.w_out.weight.shape[0] * (1 if spec.experts is None else cap.expert_ids.shape[-1]) if want_ff else d
    rows_max = max(1, min(n, options.chunk_bytes // max(1, n * width * cap.x.element_size())))
    rows_per_chunk = -(-n // -(-n // rows_max))

    def record(scope: str, parts: torch.Tensor, bias: torch.Tensor, view: ChunkView) -> None:
        """Norm map, completeness residual and derived maps of one chunk of (m, c, d) parts (kept parts
        are copies, so the stages may overwrite ``parts`` afterwards)."""
        m, (r0, r1) = parts.shape[0], (view.rows.start, view.rows.stop)
        for derived_map in derived:
            if derived_map.reads == scope:
                maps[derived_map.name][r0:r1, :m] = derived_map.compute(parts, bias, view).T
        if scope not in residuals:
            return
        maps[scope][r0:r1, :m] = torch.linalg.vector_norm(parts, dim=-1).T
        residuals[scope] = max(residuals[scope], stages.relative_residual(parts.sum(0), bias, view.real(scope)))
        if keep_parts:  # handed out row-major: (i, j, d)
            full = parts.new_zeros(r1 - r0, n, d)
            full[:, :m] = parts.transpose(0, 1)
            kept[scope].append((full, bias.clone()))

    for r0 in range(0, n, rows_per_chunk):
        r1 = min(n, r0 + rows_per_chunk)
        rows, c = torch.arange(r0, r1, device=cap.x.device), r1 - r0
        view = ChunkView(spec, cap, layout, slice(r0, r1))
        m = r1 if causal else n  # causal rows see only j <= i
        alpha_t = cap.attn_probs[:, r0:r1, :m].permute(2, 1, 0).contiguous()  # (m, c, H)
        parts = stages.mix_heads(alpha_t, values[:m], out=ws.get("attn", (m, c, d), cap.x))
        bias = attn_bias.expand(c, d)
        if post is not None:
            parts, bias = stages.norm_parts(parts, bias, post, post_scale[r0:r1], inplace=True)
        record("attn_n", parts, bias, view)
        parts = stages.add_to_own_token(parts, rows, cap.x[r0:r1])  # RES1
        record("attn_res_n", parts, bias, view)
        if norm_first:
            atb, atb_bias = parts, bias
            record("atb", atb, atb_bias, view)
            if spec.parallel:  # the FF's input is LN2 of the layer input: each row's own token
                own = stages.add_to_own_token(ws.get("own", (m, c, d), cap.x).zero_(), rows, cap.x[r0:r1])
                ff_in_parts, ff_in_bias = stages.norm_parts(own, torch.zeros_like(bias), spec.ln2, ff_scale[r0:r1],
                                                            inplace=True)
            else:
                ff_in_parts, ff_in_bias = stages.norm_parts(atb, atb_bias, spec.ln2, ff_scale[r0:r1])
            record("atb_ln", ff_in_parts, ff_in_bias, view)
        else:
            atb, atb_bias = stages.norm_parts(parts, bias, spec.ln1, ff_scale[r0:r1], inplace=True)
            record("atb", atb, atb_bias, view)
            ff_in_bias = atb_bias
        if not want_ff:
            continue
        if spec.experts is None:
            ff_parts, ff_bias, se = ff_chunk(0, r0, r1, alpha_t, ff_in_bias, m)
        else:  # each row's routed experts, weighted as the router weighted them in the forward pass
            ff_parts, ff_bias, se = ws.get("ff", (m, c, d), cap.x).zero_(), cap.x.new_zeros(c, d), 0.0
            for e, sel, weight in stages.routed(cap.expert_ids[r0:r1], cap.expert_weights[r0:r1].to(cap.x.dtype),
                                                len(spec.experts)):
                parts_e, bias_e, se_e = ff_chunk(e, r0, r1, alpha_t, ff_in_bias, m, sel)
                ff_parts.index_add_(1, sel, parts_e.mul_(weight[None, :, None]))
                ff_bias.index_add_(0, sel, bias_e * weight[:, None])
                se = max(se, se_e)
        sampling_se = max(sampling_se, se)
        if ff_post is not None:
            ff_parts, ff_bias = stages.norm_parts(ff_parts, ff_bias, ff_post, ff_post_scale[r0:r1], inplace=True)
        record(layout.after_ff, ff_parts, ff_bias, view)
        res_parts, res_bias = ff_parts.add_(atb), ff_bias + atb_bias  # RES2
        record(layout.after_res2, res_parts, res_bias, view)
        if not norm_first:
            ln_parts, ln_bias = stages.norm_parts(res_parts, res_bias, spec.ln2, out_scale[r0:r1], inplace=True)
            record("atb_ff_res_ln", ln_parts, ln_bias, view)

    parts_out = {s: (torch.cat([c[0] for c in chunks]), torch.cat([c[1] for c in chunks]))
                 for s, chunks in kept.items()}
    return LayerDecomposition(maps, residuals, parts_out, sampling_se)


def default_tolerance(adapter: TransformerAdapter) -> float:
    if adapter.dtype == torch.float64 and adapter.architecture is not None and adapter.architecture.float32_internals:
        return FLOAT32_INTERNALS_TOLERANCE
    return TOLERANCE.get(adapter.dtype, 1e-2)


def _check_scopes(adapter: TransformerAdapter, scopes: Optional[Sequence[str]]) -> list[str]:
    valid = scopes_for(adapter.norm_first)
    if scopes is None:
        return list(valid)
    scopes = list(dict.fromkeys(scopes))
    if not scopes:
        raise InputError(f"no scope given; choose from {', '.join(valid)}")
    for s in scopes:
        if s not in valid:
            other = scopes_for(not adapter.norm_first)
            kind = "Pre-LN" if adapter.norm_first else "Post-LN"
            hint = f"'{s}' is a scope of {'Post' if adapter.norm_first else 'Pre'}-LN models; " if s in other else ""
            raise InputError(f"{hint}'{adapter.name}' is {kind}: choose scopes from {', '.join(valid)}")
    return scopes


def _check_layers(adapter: TransformerAdapter, layers: Optional[Sequence[int]]) -> list[int]:
    L = adapter.n_layers
    if layers is None:
        return list(range(L))
    out = []
    for layer in layers:
        if not -L <= int(layer) < L:
            raise InputError(f"layer {layer} does not exist: '{adapter.name}' has layers 0..{L - 1}")
        out.append(int(layer) % L)
    if not out:
        raise InputError(f"no layer given: '{adapter.name}' has layers 0..{L - 1}")
    return sorted(set(out))


def decompose(adapter: TransformerAdapter, texts: Sequence[str] | str,
              options: Optional[DecomposeOptions] = None, **fields) -> list[Decomposition]:
    """Decompose every requested layer of every text (batched forward; padding masked out).

    ``options`` (a :class:`DecomposeOptions`), with any of its fields overridden by keyword.
    Raises :class:`CompletenessError` (and returns nothing) if any scope's parts do not sum to the
    real forward pass within the tolerance (default 1e-8 for float64, 1e-4 for float32).
    """
    options = replace(options or DecomposeOptions(), **fields)
    reason = no_reader_reason(adapter)
    if reason:
        raise InputError(f"'{adapter.name}' cannot be decomposed: {reason}")
    if options.value_bias not in VALUE_BIAS:
        raise InputError(f"value_bias '{options.value_bias}' is not known: use 'token' or 'bias'")
    scopes = _check_scopes(adapter, options.scopes)
    layers = _check_layers(adapter, options.layers)
    for derived_map in options.derived:
        if not isinstance(derived_map, DerivedMap) or derived_map.reads not in scopes_for(adapter.norm_first):
            raise InputError(f"derived map {derived_map!r} is not a DerivedMap reading a scope of '{adapter.name}'")
    tol = options.tolerance if options.tolerance is not None else default_tolerance(adapter)
    if options.ff_attribution not in FF_SPLITS:
        raise InputError(f"ff_attribution '{options.ff_attribution}' is not known; use {', '.join(FF_SPLITS)}")
    batch = adapter.encode(texts, truncate=options.truncate)
    if any(s in layout_for(adapter.norm_first).ff_scopes for s in scopes):
        shapley.check_players(options.ff_attribution, max(batch.lengths) + 1)
    captures = adapter.capture(batch)
    results = []
    steps = tqdm(total=len(batch.lengths) * len(layers), desc="decompose", disable=not options.progress,
                 unit="layer")
    workspace = stages.Workspace()
    with torch.no_grad():
        for b, n in enumerate(batch.lengths):
            per_layer, kept_captures = [], []
            for layer in layers:
                cap = captures[layer].sequence(b, n)
                kept_captures.append(cap)
                per_layer.append(decompose_layer(adapter.layers[layer], cap, scopes, causal=adapter.causal,
                                                 options=options, workspace=workspace))
                steps.update()
                for scope, res in per_layer[-1].residuals.items():
                    if not res <= tol:
                        raise CompletenessError(
                            f"scope '{scope}' of layer {layer} misses the real forward pass by {res:.2e} "
                            f"(relative, tolerance {tol:.0e}); this is a bug in attrbench's support for "
                            f"'{adapter.model.config.model_type}': please report it")
            sampled = options.ff_attribution == "shapley-sampling"
            results.append(Decomposition(
                model=adapter.name, tokens=batch.tokens[b], layers=layers,
                maps={s: torch.stack([p.maps[s] for p in per_layer]).cpu().numpy() for s in per_layer[0].maps},
                residuals={s: max(p.residuals[s] for p in per_layer) for s in scopes if s != "attn_w"},
                value_bias=options.value_bias, dtype=str(adapter.dtype).replace("torch.", ""),
                input_ids=batch.input_ids[b, :n].tolist(), truncated=batch.truncated[b],
                ff_attribution=options.ff_attribution,
                ff_sampling_se=max(p.ff_sampling_se for p in per_layer) if sampled else None,
                parts=[p.parts for p in per_layer] if options.keep_parts else None,
                captures=kept_captures if options.keep_captures else None))
    steps.close()
    return results
