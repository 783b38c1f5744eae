"""The one call shape every method plugin has (like captum's ``Attribution`` base class).

``method(adapter, texts, target=..., layers=..., value_bias=..., truncate=...) -> list[MethodResult]``,
one result per text. ``output`` says what ``values`` holds: ``"maps"`` (layers, n, n) token-to-token
maps, or ``"scores"`` (n,) input attributions for the target. ``supports(adapter)`` says why a
method cannot run on a model (``None`` when it can).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .aggregate import rollout, row_normalise, with_identity
from .decompose import decompose, scopes_for
from .decompose.engine import FF_SCOPES
from .errors import InputError
from .models import TransformerAdapter
from .targets import Target, explained_row


@dataclass
class MethodResult:
    method: str
    model: str
    tokens: list[str]
    values: np.ndarray  # "maps": (layers, n, n), [l, i, j] = contribution of token j to i; "scores": (n,)
    residual: Optional[float]  # max relative completeness residual, for methods that claim it
    meta: dict = field(default_factory=dict)  # layers, value_bias, dtype, truncated

    def to_json(self) -> dict:
        return {"method": self.method, "model": self.model, "tokens": self.tokens, "values": self.values.tolist(),
                "residual": self.residual, **self.meta}


class Method:
    """Base class. Subclasses set ``family``, ``description``, ``output``, ``complete``, ``reference``."""

    name: str = ""
    family: str = ""
    description: str = ""
    output: str = "maps"
    complete: bool = False  # its parts provably sum to the real forward pass (checked on every call)
    reference: str = ""
    ff_attribution: str | None = None  # FF-inclusive methods: how the FF activation is split ("ig", Shapley ...)

    def with_ff_attribution(self, ff_attribution: str) -> "Method":
        """A copy splitting the FF activation another way (IG or a Shapley variant); FF-inclusive methods only."""
        import copy

        if self.ff_attribution is None:
            raise InputError(f"'{self.name}' does not go through the FF block, so it has no FF split to choose")
        clone = copy.copy(self)
        clone.ff_attribution = ff_attribution
        return clone

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        return None

    def __call__(self, adapter: TransformerAdapter, texts: Sequence[str] | str, *,
                 target: Target | str | None = None, layers: Optional[Sequence[int]] = None,
                 value_bias: str = "token", truncate: bool = False) -> list[MethodResult]:
        reason = self.supports(adapter)
        if reason:
            raise InputError(f"method '{self.name}' cannot run on '{adapter.name}': {reason}")
        target = target if isinstance(target, Target) else Target.parse(target)
        return self.run(adapter, texts, target=target, layers=layers, value_bias=value_bias, truncate=truncate)

    def run(self, adapter, texts, *, target, layers, value_bias, truncate) -> list[MethodResult]:
        raise NotImplementedError


class ScopeMap(Method):
    """The n x n map of one decomposition scope of the engine, per layer."""

    def __init__(self, scope: str, family: str, description: str, complete: bool, reference: str):
        self.name, self.scope, self.family = scope, scope, family
        self.description, self.complete, self.reference = description, complete, reference
        self.ff_attribution = "ig" if scope in FF_SCOPES else None

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        if self.scope in scopes_for(adapter.norm_first):
            return None
        kind = "Pre-LN" if adapter.norm_first else "Post-LN"
        return f"scope '{self.scope}' does not exist in a {kind} model; see `attrbench methods`"

    def run(self, adapter, texts, *, target, layers, value_bias, truncate) -> list[MethodResult]:
        results = decompose(adapter, texts, scopes=[self.scope], layers=layers, value_bias=value_bias,
                            truncate=truncate, ff_attribution=self.ff_attribution or "ig")
        return [MethodResult(self.name, adapter.name, d.tokens, d.maps[self.scope], d.residuals.get(self.scope),
                             {"layers": d.layers, "value_bias": d.value_bias, "dtype": d.dtype,
                              "truncated": d.truncated, "ff_attribution": d.ff_attribution if self.ff_attribution else None})
                for d in results]


class Rollout(Method):
    """Input attribution: per-layer maps, row-normalised, multiplied across all layers; the target's row.

    ``source(adapter)`` names the engine map (a scope or a derived map) each layer contributes;
    ``identity`` adds the residual as attention rollout does (``0.5 A + 0.5 I``).
    """

    output = "scores"

    def __init__(self, name: str, source, family: str, description: str, reference: str,
                 identity: bool = False, through_ff: bool = False):
        self.name, self.family, self.description, self.reference = name, family, description, reference
        self.source, self.identity = source, identity
        self.ff_attribution = "ig" if through_ff else None

    def run(self, adapter, texts, *, target, layers, value_bias, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' rolls out all layers; leave layers unset")
        key = self.source(adapter)
        derived = [key] if key not in scopes_for(adapter.norm_first) else []
        scope = "atb" if derived else key
        results = []
        for dec in decompose(adapter, texts, scopes=[scope], derived=derived, value_bias=value_bias,
                             truncate=truncate, ff_attribution=self.ff_attribution or "ig"):
            per_layer = dec.maps[key].astype(np.float64)
            per_layer = row_normalise(with_identity(per_layer) if self.identity else per_layer)
            row = explained_row(adapter, dec.input_ids, target)
            results.append(MethodResult(self.name, adapter.name, dec.tokens, rollout(per_layer)[row], None,
                                        {"target": str(target), "row": row, "source": key,
                                         "value_bias": dec.value_bias, "dtype": dec.dtype,
                                         "truncated": dec.truncated, "ff_attribution": self.ff_attribution}))
        return results
