"""The one call shape every method plugin has (like captum's ``Attribution`` base class).

``method(adapter, texts, layers=..., value_bias=..., truncate=...) -> list[MethodResult]``, one result
per text. ``supports(adapter)`` says why a method cannot run on a model (``None`` when it can).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .decompose import decompose, scopes_for
from .errors import InputError
from .models import TransformerAdapter


@dataclass
class MethodResult:
    method: str
    model: str
    tokens: list[str]
    values: np.ndarray  # output "maps": (layers, n, n) with [l, i, j] = contribution of token j to i
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

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        return None

    def __call__(self, adapter: TransformerAdapter, texts: Sequence[str] | str, *,
                 layers: Optional[Sequence[int]] = None, value_bias: str = "token",
                 truncate: bool = False) -> list[MethodResult]:
        reason = self.supports(adapter)
        if reason:
            raise InputError(f"method '{self.name}' cannot run on '{adapter.name}': {reason}")
        return self.run(adapter, texts, layers=layers, value_bias=value_bias, truncate=truncate)

    def run(self, adapter, texts, *, layers, value_bias, truncate) -> list[MethodResult]:
        raise NotImplementedError


class ScopeMap(Method):
    """The n x n map of one decomposition scope of the engine, per layer."""

    def __init__(self, scope: str, family: str, description: str, complete: bool, reference: str):
        self.name, self.scope, self.family = scope, scope, family
        self.description, self.complete, self.reference = description, complete, reference

    def supports(self, adapter: TransformerAdapter) -> Optional[str]:
        if self.scope in scopes_for(adapter.norm_first):
            return None
        kind = "Pre-LN" if adapter.norm_first else "Post-LN"
        return f"scope '{self.scope}' does not exist in a {kind} model; see `attrbench methods`"

    def run(self, adapter, texts, *, layers, value_bias, truncate) -> list[MethodResult]:
        results = decompose(adapter, texts, scopes=[self.scope], layers=layers, value_bias=value_bias,
                            truncate=truncate)
        return [MethodResult(self.name, adapter.name, d.tokens, d.maps[self.scope], d.residuals.get(self.scope),
                             {"layers": d.layers, "value_bias": d.value_bias, "dtype": d.dtype,
                              "truncated": d.truncated}) for d in results]
