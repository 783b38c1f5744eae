"""The one call shape every method plugin has (like captum's ``Attribution`` base class).

``method(adapter, texts, target=..., layers=..., truncate=...) -> list[MethodResult]``, one result
per text. Hyperparameters (steps, samples, baselines, value bias, FF split) are not call arguments:
each method declares them (``params``) and ``method.with_params(...)`` gives a configured copy, as
in scikit-learn; every result records them. ``output`` says what ``values`` holds: ``"maps"``
(layers, n, n) token-to-token maps, or ``"scores"`` (n,) input attributions for the target.
``supports(adapter)`` says why a method cannot run on a model (``None`` when it can).

A method whose output must meet an identity declares it (``axiom``, one of :data:`AXIOMS`) and records, in
every result, ``meta["axiom"]`` = :func:`axiom_check` of that identity on that attribution; a call checks
that it did. The identities (Sundararajan et al. 2017; Lundberg & Lee 2017; Bach et al. 2015; Shrikumar
et al. 2017):

- ``completeness``: the attributions sum to F(x) − F(x') along a path from the baseline x' (IG);
- ``efficiency``: Shapley values sum to F(x) − F(x'), the value of all players less that of none;
- ``conservation``: the relevance at the input, plus what named sinks (biases, other embeddings, a
  non-conservative rule) absorb, sums to the explained output (LRP, DeepLIFT's summation-to-delta).
"""
from __future__ import annotations

import copy

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ..decompose import FF_ATTRIBUTIONS, VALUE_BIAS, DerivedMap, Layout, decompose, layout_for
from ..decompose.layout import ALL_FF_SCOPES
from ..errors import InputError, MethodError
from ..models import TransformerAdapter
from ..models.architectures import no_reader_reason
from ..ops.batching import each_batch, pack
from ..ops.aggregate import rollout, row_normalise, with_identity
from ..ops.targets import ResolvedTarget, Target, head_kind, resolve_text
from ..params import Configurable, Param

AXIOMS = ("completeness", "efficiency", "conservation")
TINY = 1e-12  # the smallest |expected total| a relative residual divides by


def axiom_check(name: str, attributed: float, expected: float, tolerance: float, **detail) -> dict:
    """The record of one attribution against its method's identity ``name``: ``residual`` = |attributed −
    expected| / max(|expected|, TINY), the share of the explained total the attribution leaves unaccounted for,
    and ``passes`` = residual <= tolerance. ``detail``: how the totals were made (sinks, steps, ...)."""
    if name not in AXIOMS:
        raise ValueError(f"unknown axiom '{name}'; known: {', '.join(AXIOMS)}")
    residual = abs(float(attributed) - float(expected)) / max(abs(float(expected)), TINY)
    return {"name": name, "residual": residual, "tolerance": float(tolerance), "passes": bool(residual <= tolerance),
            "attributed": float(attributed), "expected": float(expected), **detail}


VALUE_BIAS_PARAM = Param("token", "where the value bias b_V goes: each token's part (token) or the bias term (bias)",
                         choices=VALUE_BIAS)
FF_PARAMS = {"ff_attribution": Param("ig", "how the FF activation is split over tokens", choices=FF_ATTRIBUTIONS),
             "shapley_samples": Param(256, "permutations / evaluations of the sampled Shapley splits", minimum=1)}


@dataclass
class MethodResult:
    method: str
    model: str
    tokens: list[str]
    values: np.ndarray  # "maps": (layers, n, n), [l, i, j] = contribution of token j to i; "scores": (n,)
    residual: Optional[float]  # max relative completeness residual, for methods that claim it
    meta: dict = field(default_factory=dict)  # target (resolved), params, dtype, truncated, ...

    def to_json(self) -> dict:
        """``scores`` (n,) for input attributions, ``maps`` (layers, n, n) for token-to-token maps."""
        kind = "scores" if self.values.ndim == 1 else "maps"
        return {"method": self.method, "model": self.model, "tokens": self.tokens, kind: self.values.tolist(),
                "residual": self.residual, **self.meta}


class Method(Configurable):
    """Base class. Subclasses set ``family``, ``description``, ``output``, ``complete``, ``reference``, ``params``,
    and ``axiom`` where their output must meet one."""

    kind = "method"
    family: str = ""
    description: str = ""
    output: str = "maps"
    complete: bool = False  # its parts provably sum to the real forward pass (checked on every call)
    axiom: Optional[str] = None  # the identity of AXIOMS its output meets; each result's meta["axiom"] says how well
    reference: str = ""
    # ``run`` computes several texts together (padded batches, or pooled forward passes): a run hands it every example
    # of a shard at once
    # (``Workspace.prefetch``); the results equal one text at a time to float tolerance (the conformance check)
    batched: bool = False
    # padded tokens per pass of a batched method; a run gives it a quarter of its batcher's budget (``within``), since
    # a pass that keeps its activations (for a backward pass, or every scope's parts) holds several times a plain
    # pass's memory per token
    batch_tokens: int = 1024
    pad_tokens: int = 64  # the padding one batch may carry (a run sets its own: ``RunOptions.pad_tokens``)
    # it reads the layers' weights (the decomposition family): a model needs a layer reader (``architectures.py``)
    needs_layers: bool = False

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        """Why this method cannot run on ``adapter``, in words that name what works instead (None when it can). A
        subclass that adds a condition calls ``super().supports(adapter)`` first."""
        return no_reader_reason(adapter) if self.needs_layers else None

    def token_limit(self) -> Optional[int]:
        """The longest text in tokens this method takes (None: any), by convention its parameter ``max_tokens``. A
        call refuses a longer text and a run's plan checks every sampled example against it before any work, so a
        run never stops half-way on one."""
        return None

    def __call__(self, adapter: TransformerAdapter, texts: Sequence[str] | str, *,
                 target: Target | str | Sequence[Target | str] | None = None,
                 layers: Optional[Sequence[int]] = None, truncate: bool = False) -> list[MethodResult]:
        """One result per text, each for ``target`` (one for all texts, or a sequence of one per text)."""
        reason = self.supports(adapter)
        if reason:
            raise InputError(f"method '{self.name}' cannot run on '{adapter.name}': {reason}")
        texts = [texts] if isinstance(texts, str) else list(texts)
        given = list(target) if isinstance(target, (list, tuple)) else [target] * len(texts)
        if len(given) != len(texts):
            raise InputError(f"{len(given)} targets for {len(texts)} texts: give one target, or one per text")
        given = [t if isinstance(t, Target) else Target.parse(t) for t in given]
        batch = adapter.encode(texts, truncate=truncate)  # the same tokens every method sees
        limit, longest = self.token_limit(), max(batch.lengths)
        if limit is not None and longest > limit:
            raise InputError(f"{self.name} takes at most {limit} tokens and a text has {longest}: shorten it, or raise "
                             f"{self.name}.max_tokens")
        targets = [resolve_text(adapter, batch.input_ids[b, :n].tolist(), t)  # before any method runs
                   for b, (n, t) in enumerate(zip(batch.lengths, given))]
        results = self.run(adapter, texts, targets=targets, layers=layers, truncate=truncate)
        params = self.get_params()
        for text, tokens, resolved, result in zip(texts, batch.tokens, targets, results, strict=True):
            shape = (len(tokens),) if self.output == "scores" else (len(result.values), len(tokens), len(tokens))
            if result.tokens != tokens or result.values.shape != shape:
                raise MethodError(f"method '{self.name}' gave values of shape {result.values.shape} for the "
                                  f"{len(tokens)} tokens of '{text[:40]}'; it is broken, report it")
            if not np.isfinite(result.values).all():
                raise MethodError(f"method '{self.name}' gave non-finite values on '{text[:40]}' in "
                                  f"{adapter.dtype}: try --dtype float64")
            recorded = result.meta.get("axiom")
            if self.axiom is not None and (not isinstance(recorded, dict) or recorded.get("name") != self.axiom):
                raise MethodError(f"method '{self.name}' declares the axiom '{self.axiom}' but its result on "
                                  f"'{text[:40]}' does not record it (meta['axiom']); it is broken, report it")
            result.meta.update(resolved.meta())
            result.meta["params"] = params
        return results

    def run(self, adapter, texts, *, targets: list[ResolvedTarget], layers, truncate) -> list[MethodResult]:
        """One result per text; ``targets[k]`` is text k's target, already validated against the model."""
        raise NotImplementedError

    def within(self, batch_tokens: int, pad_tokens: int) -> "Method":
        """A copy that batches its texts within a device's token budget (``RunOptions.batch_tokens``): a quarter of
        it per pass, since a pass that keeps its activations for a backward pass holds several times a plain pass's
        memory per token, and at most ``pad_tokens`` of padding per batch."""
        sized = copy.copy(self)
        sized.batch_tokens, sized.pad_tokens = max(1, batch_tokens // 4), pad_tokens
        return sized

    def batches(self, adapter, lengths: Sequence[int], batch_tokens: int,
                pad_tokens: Optional[int] = None) -> list[list[int]]:
        """Length-sorted batches of at most ``batch_tokens`` padded tokens, of which at most ``pad_tokens`` (default:
        the method's) padding (on a CPU a padded token costs what a real one does). A decoder read by a
        sequence-classification head takes equal lengths only: given embeddings, it pools the last position, which
        padding would move."""
        pad_tokens = self.pad_tokens if pad_tokens is None else pad_tokens
        return pack(lengths, batch_tokens, pad_tokens,
                    same_length=adapter.causal and head_kind(adapter) == "classifier")


def decomposed(method: Method, adapter, texts: Sequence[str], **fields) -> list:
    """``decompose`` of ``texts`` in ``method``'s length-sorted batches (:meth:`Method.batches` of its
    ``batch_tokens``), each a padded batch with one capture pass; results in the texts' order."""
    lengths = adapter.encode(texts, truncate=fields.get("truncate", False)).lengths
    results: list = [None] * len(texts)

    def compute(group):
        for b, dec in zip(group, decompose(adapter, [texts[b] for b in group], **fields)):
            results[b] = dec

    each_batch(method.batches(adapter, lengths, method.batch_tokens), compute)
    return results


class ScopeMap(Method):
    """The n x n map of one decomposition scope of the engine, per layer."""

    batched = True  # a run's texts decomposed in length-sorted padded batches (one capture pass each)
    needs_layers = True

    def __init__(self, scope: str, family: str, description: str, complete: bool, reference: str):
        self.name, self.scope, self.family = scope, scope, family
        self.description, self.complete, self.reference = description, complete, reference
        self.params = ({} if scope == "attn_w" else {"value_bias": VALUE_BIAS_PARAM}) | (
            FF_PARAMS if scope in ALL_FF_SCOPES else {})

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        reason = super().supports(adapter)
        if reason:
            return reason
        layout = layout_for(adapter.norm_first)
        if self.scope in layout.scopes:
            return None
        return f"scope '{self.scope}' does not exist in a {layout.kind} model; see `attrbench methods`"

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        results = decomposed(self, adapter, texts, scopes=[self.scope], layers=layers, truncate=truncate,
                             **self.get_params())
        return [MethodResult(self.name, adapter.name, d.tokens, d.maps[self.scope], d.residuals.get(self.scope),
                             {"layers": d.layers, "dtype": d.dtype, "truncated": d.truncated})
                for d in results]


class Rollout(Method):
    """Input attribution: per-layer maps, row-normalised, multiplied across all layers; the target's row.

    ``source(layout)`` gives what each layer contributes: a scope of the engine, or a
    :class:`DerivedMap` the engine computes from a scope's parts in the same pass. ``identity`` adds
    the residual as attention rollout does (``0.5 A + 0.5 I``). ``uses_values``: the maps depend on
    the value vectors (so on where b_V goes); ``through_ff``: on how the FF activation is split.
    """

    output = "scores"
    batched = True  # a run's texts decomposed in length-sorted padded batches (one capture pass each)
    needs_layers = True

    def __init__(self, name: str, source: Callable[[Layout], str | DerivedMap], family: str, description: str,
                 reference: str, identity: bool = False, uses_values: bool = True, through_ff: bool = False,
                 aggregate_params: Optional[dict[str, Param]] = None):
        self.name, self.family, self.description, self.reference = name, family, description, reference
        self.source, self.identity = source, identity
        self.decompose_params = ({"value_bias": VALUE_BIAS_PARAM} if uses_values else {}) | (
            FF_PARAMS if through_ff else {})
        self.params = self.decompose_params | (aggregate_params or {})  # the latter: for ``aggregate``

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' rolls out all layers; leave layers unset")
        source = self.source(layout_for(adapter.norm_first))
        derived = [source] if isinstance(source, DerivedMap) else []
        key = source.name if derived else source
        results = []
        options = {k: v for k, v in self.get_params().items() if k in self.decompose_params}
        for dec, resolved in zip(decomposed(self, adapter, texts, scopes=[source.reads if derived else source],
                                            derived=derived, truncate=truncate, **options), targets):
            per_layer = dec.maps[key].astype(np.float64)
            per_layer = row_normalise(with_identity(per_layer) if self.identity else per_layer)
            results.append(MethodResult(self.name, adapter.name, dec.tokens, self.aggregate(per_layer, resolved.row),
                                        None, {"source": key, "dtype": dec.dtype, "truncated": dec.truncated}))
        return results

    def aggregate(self, per_layer: np.ndarray, row: int) -> np.ndarray:
        """The input attribution of output token ``row`` from the (L, n, n) row-normalised maps: rollout."""
        return rollout(per_layer)[row]
