"""Checks that every method plugin must pass (like scikit-learn's ``check_estimator``).

``check_method(method, adapter)`` runs the method on a few texts and raises ``AssertionError``
naming the broken property: declared parameters (JSON values, recorded in every result, and a copy
``with_params(**get_params())`` that computes the same), result shapes, finiteness, completeness
(for methods that claim it), the record of a declared axiom, batch = one-by-one, determinism, and no
attribution to future tokens in causal models. The test suite runs it over every registered method and
every tiny model the method supports, so a plugin is tested the moment it registers.
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from ..decompose.engine import default_tolerance
from ..models import TransformerAdapter
from .method import Method

TEXTS = ("the keys to the cabinet are on the table .", "a wonderful film", "dogs run")


def check_method(method: Method, adapter: TransformerAdapter, texts: Sequence[str] = TEXTS) -> list[str]:
    """Run all conformance checks; return the names of the checks passed."""
    name = f"{method.name} on {adapter.name}"
    for attr in ("name", "family", "description"):
        assert getattr(method, attr), f"{name}: method has no {attr}"
    assert method.output in ("maps", "scores"), f"{name}: unknown output kind '{method.output}'"
    params = method.get_params()
    assert set(params) == set(method.params), (f"{name}: get_params() {sorted(params)} != declared "
                                               f"{sorted(method.params)}")
    assert json.loads(json.dumps(params)) == params, f"{name}: parameter values must be plain JSON values"
    batched = method(adapter, list(texts))
    assert all(r.meta.get("params") == params for r in batched), f"{name}: results do not record the parameters"
    assert len(batched) == len(texts), f"{name}: {len(batched)} results for {len(texts)} texts"
    tol = default_tolerance(adapter)
    for text, result in zip(texts, batched):
        n = len(result.tokens)
        shape = (adapter.n_layers, n, n) if method.output == "maps" else (n,)
        assert result.values.shape == shape, f"{name}: values of shape {result.values.shape}, expected {shape}"
        assert np.isfinite(result.values).all(), f"{name}: non-finite values"
        if method.complete:
            assert result.residual is not None and result.residual <= tol, \
                f"{name}: completeness residual {result.residual} above {tol}"
        if method.axiom is not None:
            axiom = result.meta["axiom"]  # the call checked that it is there, named as declared
            assert {"residual", "tolerance", "passes"} <= set(axiom) and np.isfinite(axiom["residual"]) \
                and axiom["passes"] == (axiom["residual"] <= axiom["tolerance"]), f"{name}: malformed axiom {axiom}"
        if adapter.causal and method.output == "maps":
            future = np.triu(np.ones((n, n), dtype=bool), 1)
            assert not result.values[:, future].any(), f"{name}: attribution to future tokens in a causal model"
        single = method(adapter, [text])[0]
        assert single.tokens == result.tokens, f"{name}: batched tokens differ from single"
        scale = max(1e-12, float(np.abs(single.values).max()))
        gap = float(np.abs(single.values - result.values).max()) / scale
        assert gap <= max(tol, 1e-5), f"{name}: batched run differs from one-by-one by {gap:.1e} (relative)"
    again = method.with_params(**params)(adapter, list(texts))
    assert all(np.array_equal(a.values, b.values) for a, b in zip(batched, again)), \
        f"{name}: not deterministic (or a copy with the same parameters computes something else)"
    checks = ["metadata", "params", "shapes", "finite", "batch_invariance", "determinism"]
    return checks + (["completeness"] if method.complete else []) + ([method.axiom] if method.axiom else []) + (
        ["causal"] if adapter.causal else [])
