"""Per-layer decomposition of a real forward pass into every scope of Kobayashi et al. (2024).

Scopes are named after the paper (§4, Fig. 1) and are the engine's hook points, in data-flow order:

    Post-LN (BERT family): attn_w, attn_n, attn_res_n, atb, atb_ff, atb_ff_res, atb_ff_res_ln
    Pre-LN (GPT-2/OPT/LLaMA): attn_w, attn_n, attn_res_n, atb, atb_ln, atb_ln_ff, atb_ln_ff_res

(For Pre-LN, ``attn_res_n`` equals ``atb`` = RES1∘ATTN∘LN1.) Every scope except ``attn_w`` is a
decomposition ``y_i = sum_j F_i(x_j) + b_i`` whose map is ``||F_i(x_j)||``; each is checked against
the tensor the unmodified model produced at that boundary, and a residual above tolerance raises.

Rows i are processed in chunks so memory stays ~``chunk_bytes``; for causal models only columns
j <= i are computed. The FF's first projection is folded onto per-head value vectors
(``folded_norm_weight``), which leaves ``n^2 d' d`` multiply-adds (the FF output projection of
every part) as the dominant cost.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import CompletenessError, InputError
from ..models.adapter import LayerCapture, TransformerAdapter
from ..models.spec import LayerSpec
from . import shapley, stages

POST_LN_SCOPES = ("attn_w", "attn_n", "attn_res_n", "atb", "atb_ff", "atb_ff_res", "atb_ff_res_ln")
PRE_LN_SCOPES = ("attn_w", "attn_n", "attn_res_n", "atb", "atb_ln", "atb_ln_ff", "atb_ln_ff_res")
FF_SCOPES = ("atb_ff", "atb_ff_res", "atb_ff_res_ln", "atb_ln_ff", "atb_ln_ff_res")
VALUE_BIAS = ("token", "bias")
# Maps computed from the attention block's parts in the same pass (not decompositions themselves):
# ALTI's L1 proximity (Ferrando 2022) and GlobEnc's norms through LN2 with the FF left out (Modarressi
# 2022; for Pre-LN leaving the FF out leaves the attention block, so it equals the atb norms).
DERIVED_MAPS = ("alti", "globenc")
TOLERANCE = {torch.float64: 1e-8, torch.float32: 1e-4}
# float64 runs of models that normalise or softmax in float32 internally are only float32-exact there.
FLOAT32_INTERNALS_TOLERANCE = 1e-6
DEFAULT_CHUNK_BYTES = 32 * 2**20


def scopes_for(norm_first: bool) -> tuple[str, ...]:
    return PRE_LN_SCOPES if norm_first else POST_LN_SCOPES


@dataclass
class LayerDecomposition:
    maps: dict[str, torch.Tensor]  # scope -> (n, n)
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

    def to_json(self) -> dict:
        return {"model": self.model, "tokens": self.tokens, "input_ids": self.input_ids, "layers": self.layers,
                "maps": {s: m.tolist() for s, m in self.maps.items()}, "residuals": self.residuals,
                "value_bias": self.value_bias, "dtype": self.dtype, "truncated": self.truncated,
                "ff_attribution": self.ff_attribution, "ff_sampling_se": self.ff_sampling_se}


def _targets(cap: LayerCapture, norm_first: bool) -> dict[str, torch.Tensor]:
    """The real tensor each scope's parts must sum to."""
    if norm_first:
        return {"attn_n": cap.attn_out, "attn_res_n": cap.ln2_in, "atb": cap.ln2_in, "atb_ln": cap.ln2_out,
                "atb_ln_ff": cap.ff_out, "atb_ln_ff_res": cap.out}
    return {"attn_n": cap.attn_out, "attn_res_n": cap.ln1_in, "atb": cap.ln1_out, "atb_ff": cap.ff_out,
            "atb_ff_res": cap.ln2_in, "atb_ff_res_ln": cap.out}


def decompose_layer(spec: LayerSpec, cap: LayerCapture, scopes: Sequence[str], *, causal: bool,
                    value_bias: str = "token", chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    keep_parts: bool = False, workspace: stages.Workspace | None = None,
                    derived: Sequence[str] = (), ff_attribution: str = "ig", shapley_samples: int = 256,
                    seed: int = 0) -> LayerDecomposition:
    """Decompose one layer of one sequence (``cap`` sliced to its n real tokens)."""
    ws = workspace or stages.Workspace()
    order = scopes_for(spec.norm_first)
    deepest = max([order.index(s) for s in scopes] + [order.index("atb")] * bool(derived))
    n, d = cap.x.shape
    norm_first, ff = spec.norm_first, spec.ff
    maps = {s: torch.zeros(n, n, dtype=cap.x.dtype) for s in [*scopes, *derived]}
    residuals = {s: 0.0 for s in scopes if s != "attn_w"}
    kept: dict[str, list] = {s: [] for s in residuals} if keep_parts else {}
    sampling_se = 0.0
    targets = _targets(cap, norm_first)
    if "attn_w" in scopes:
        maps["attn_w"] = cap.attn_probs.mean(0)
    if deepest == 0:
        return LayerDecomposition(maps, residuals)

    # LN1 of a Pre-LN layer acts on one token at a time: all of it but beta is that token's.
    ln1_parts = None
    if norm_first:
        ln1_parts = cap.ln1_out if spec.ln1.beta is None else cap.ln1_out - spec.ln1.beta
    attn_in = cap.ln1_out if norm_first else cap.x
    values, attn_bias = stages.value_vectors(spec, attn_in, value_bias, ln1_parts)

    # The norm in front of the FF (Post-LN: LN1, Pre-LN: LN2) with its real scale per token.
    ff_norm = spec.ln2 if norm_first else spec.ln1
    ff_scale = ff_norm.scale(cap.ln2_in if norm_first else cap.ln1_in)
    out_scale = None if norm_first else spec.ln2.scale(cap.ln2_in)
    want_ff = any(s in FF_SCOPES for s in order[: deepest + 1])
    if want_ff:
        ff_in = cap.ln2_out if norm_first else cap.ln1_out
        projections = [ff.w_in] + ([ff.up] if ff.gated else [])
        folded = [stages.folded_norm_weight(ff_norm, p) for p in projections]
        per_head_pre = [(values.flatten(0, 1) @ w).view(n, spec.n_heads, -1) for w in folded]  # (n, H, d')
        own_pre = [cap.x @ w for w in folded]  # residual token's share, (n, d')
        if ff.gated:
            factors = stages.gated_ig_factors(ff.activation, ff.w_in(ff_in), ff.up(ff_in))
        else:
            factors = (stages.ig_share(ff.activation, ff.w_in(ff_in)),)
    # Equal row chunks whose widest tensor, (n, rows, d' or d), stays within chunk_bytes.
    width = ff.w_out.weight.shape[0] if want_ff else d
    rows_max = max(1, min(n, chunk_bytes // max(1, n * width * cap.x.element_size())))
    rows_per_chunk = -(-n // -(-n // rows_max))

    def record(scope: str, parts: torch.Tensor, bias: torch.Tensor, r0: int, r1: int) -> None:
        """Norm map and completeness residual of one chunk of (m, c, d) parts (kept parts are copies,
        so the stages may overwrite ``parts`` afterwards)."""
        if scope not in residuals:
            return
        m = parts.shape[0]
        maps[scope][r0:r1, :m] = torch.linalg.vector_norm(parts, dim=-1).T
        residuals[scope] = max(residuals[scope],
                               stages.relative_residual(parts.sum(0), bias, targets[scope][r0:r1]))
        if keep_parts:  # handed out row-major: (i, j, d)
            full = parts.new_zeros(r1 - r0, n, d)
            full[:, :m] = parts.transpose(0, 1)
            kept[scope].append((full, bias.clone()))

    for r0 in range(0, n, rows_per_chunk):
        r1 = min(n, r0 + rows_per_chunk)
        rows, c = torch.arange(r0, r1), r1 - r0
        m = r1 if causal else n  # causal rows see only j <= i
        alpha_t = cap.attn_probs[:, r0:r1, :m].permute(2, 1, 0).contiguous()  # (m, c, H)
        parts = stages.mix_heads(alpha_t, values[:m], out=ws.get("attn", (m, c, d), cap.x))
        bias = attn_bias.expand(c, d)
        record("attn_n", parts, bias, r0, r1)
        parts = stages.add_to_own_token(parts, rows, cap.x[r0:r1])  # RES1
        record("attn_res_n", parts, bias, r0, r1)
        if norm_first:
            atb, atb_bias = parts, bias
            record("atb", atb, atb_bias, r0, r1)
            ff_in_parts, ff_in_bias = stages.norm_parts(atb, atb_bias, spec.ln2, ff_scale[r0:r1])
            record("atb_ln", ff_in_parts, ff_in_bias, r0, r1)
        else:
            atb, atb_bias = stages.norm_parts(parts, bias, spec.ln1, ff_scale[r0:r1], inplace=True)
            record("atb", atb, atb_bias, r0, r1)
            ff_in_bias = atb_bias
        if "alti" in derived:
            maps["alti"][r0:r1, :m] = stages.l1_proximity(atb, targets["atb"][r0:r1]).T
        if "globenc" in derived:
            enc = atb if norm_first else stages.norm_parts(atb, atb_bias, spec.ln2, out_scale[r0:r1])[0]
            maps["globenc"][r0:r1, :m] = torch.linalg.vector_norm(enc, dim=-1).T
        if not want_ff:
            continue
        # FF input parts projected through W_in (folded: mixes per-head projections, no n^2 d d').
        pre = []
        for k, (per_head, own, proj) in enumerate(zip(per_head_pre, own_pre, projections)):
            p = stages.mix_heads(alpha_t, per_head[:m], out=ws.get(f"pre{k}", (m, c, per_head.shape[-1]), cap.x))
            p = stages.add_to_own_token(p, rows, own[r0:r1])
            pre.append((p.div_(ff_scale[r0:r1, None]), proj(ff_in_bias)))
        if ff_attribution != "ig":  # Shapley: players are the token parts and the bias
            players = [torch.cat([p, p_bias[None]]) for p, p_bias in pre]  # (m + 1, c, d')
            if ff_attribution == "shapley-exact":
                split = shapley.exact(ff.activation, players)
            elif ff_attribution == "shapley-sampling":
                split, se = shapley.sampling(ff.activation, players, shapley_samples, seed)
                sampling_se = max(sampling_se, float(se.max()))
            else:
                split = shapley.with_shap(ff.activation, players, ff_attribution, shapley_samples, seed)
            act, act_bias = split[:-1], split[-1]
        elif ff.gated:  # IG(a_j) + IG(c_j) = a_j S_c I1 + c_j I0
            (gate, gate_bias), (up, up_bias) = pre
            k1, k0 = factors[0][r0:r1], factors[1][r0:r1]
            act = gate.mul_(k1).add_(up.mul_(k0))
            act_bias = gate_bias * k1 + up_bias * k0
        else:  # IG(p_j) = p_j g(S)/S
            (p, p_bias), share = pre[0], factors[0][r0:r1]
            act, act_bias = p.mul_(share), p_bias * share
        ff_parts = torch.mm(act.view(m * c, -1), ff.w_out.weight, out=ws.get("ff", (m * c, d), cap.x)).view(m, c, d)
        ff_bias = ff.w_out(act_bias)
        del act, pre
        record("atb_ln_ff" if norm_first else "atb_ff", ff_parts, ff_bias, r0, r1)
        res_parts, res_bias = ff_parts.add_(atb), ff_bias + atb_bias  # RES2
        record("atb_ln_ff_res" if norm_first else "atb_ff_res", res_parts, res_bias, r0, r1)
        if not norm_first:
            ln_parts, ln_bias = stages.norm_parts(res_parts, res_bias, spec.ln2, out_scale[r0:r1], inplace=True)
            record("atb_ff_res_ln", ln_parts, ln_bias, r0, r1)

    parts_out = {s: (torch.cat([c[0] for c in chunks]), torch.cat([c[1] for c in chunks]))
                 for s, chunks in kept.items()}
    return LayerDecomposition(maps, residuals, parts_out, sampling_se)


def default_tolerance(adapter: TransformerAdapter) -> float:
    if adapter.dtype == torch.float64 and adapter.architecture.float32_internals:
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


def decompose(adapter: TransformerAdapter, texts: Sequence[str] | str, *,
              scopes: Optional[Sequence[str]] = None, layers: Optional[Sequence[int]] = None,
              value_bias: str = "token", truncate: bool = False, tolerance: Optional[float] = None,
              chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep_parts: bool = False,
              derived: Sequence[str] = (), ff_attribution: str = "ig", shapley_samples: int = 256,
              seed: int = 0, progress: bool = False) -> list[Decomposition]:
    """Decompose every requested layer of every text (batched forward; padding masked out).

    Raises :class:`CompletenessError` (and returns nothing) if any scope's parts do not sum to the
    real forward pass within ``tolerance`` (default 1e-8 for float64, 1e-4 for float32).
    """
    if value_bias not in VALUE_BIAS:
        raise InputError(f"value_bias '{value_bias}' is not known: use 'token' or 'bias'")
    scopes = _check_scopes(adapter, scopes)
    layers = _check_layers(adapter, layers)
    unknown = set(derived) - set(DERIVED_MAPS)
    if unknown:
        raise InputError(f"unknown derived map(s) {', '.join(sorted(unknown))}; known: {', '.join(DERIVED_MAPS)}")
    tol = tolerance if tolerance is not None else default_tolerance(adapter)
    if ff_attribution not in shapley.FF_ATTRIBUTIONS:
        raise InputError(f"ff_attribution '{ff_attribution}' is not known; use {', '.join(shapley.FF_ATTRIBUTIONS)}")
    batch = adapter.encode(texts, truncate=truncate)
    if any(s in FF_SCOPES for s in scopes):
        shapley.check_players(ff_attribution, max(batch.lengths) + 1)
    captures = adapter.capture(batch)
    results = []
    steps = tqdm(total=len(batch.lengths) * len(layers), desc="decompose", disable=not progress, unit="layer")
    workspace = stages.Workspace()
    with torch.no_grad():
        for b, n in enumerate(batch.lengths):
            per_layer = []
            for layer in layers:
                cap = captures[layer].sequence(b, n)
                per_layer.append(decompose_layer(adapter.layers[layer], cap, scopes, causal=adapter.causal,
                                                 value_bias=value_bias, chunk_bytes=chunk_bytes,
                                                 keep_parts=keep_parts, workspace=workspace, derived=derived,
                                                 ff_attribution=ff_attribution, shapley_samples=shapley_samples,
                                                 seed=seed))
                steps.update()
                for scope, res in per_layer[-1].residuals.items():
                    if not res <= tol:
                        raise CompletenessError(
                            f"scope '{scope}' of layer {layer} misses the real forward pass by {res:.2e} "
                            f"(relative, tolerance {tol:.0e}); this is a bug in attrbench's support for "
                            f"'{adapter.model.config.model_type}': please report it")
            results.append(Decomposition(
                model=adapter.name, tokens=batch.tokens[b], layers=layers,
                maps={s: torch.stack([p.maps[s] for p in per_layer]).numpy() for s in [*scopes, *derived]},
                residuals={s: max(p.residuals[s] for p in per_layer) for s in scopes if s != "attn_w"},
                value_bias=value_bias, dtype=str(adapter.dtype).replace("torch.", ""),
                input_ids=batch.input_ids[b, :n].tolist(), truncated=batch.truncated[b],
                ff_attribution=ff_attribution,
                ff_sampling_se=max(p.ff_sampling_se for p in per_layer) if ff_attribution == "shapley-sampling" else None,
                parts=[p.parts for p in per_layer] if keep_parts else None))
    steps.close()
    return results
