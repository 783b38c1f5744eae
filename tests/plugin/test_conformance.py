"""Every registered method (built-in or entry point) passes the conformance suite on every tiny model."""
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from attrbench.models import load_model
from attrbench.models.tiny import TINY_MODELS
from attrbench.plugin.conformance import check_method
from attrbench.plugin.method import Method, MethodResult, ScopeMap
from attrbench.registry import METHODS, Registry

ADAPTERS = {n: load_model(n) for n in TINY_MODELS}
PAIRS = [(m.name, n) for m in METHODS.all() for n in TINY_MODELS if m.supports(ADAPTERS[n]) is None]


def test_every_method_runs_somewhere():
    assert {m for m, _ in PAIRS} == set(METHODS.names())
    assert len(METHODS.names()) >= 10


@pytest.mark.parametrize("method,model", PAIRS)
def test_conformance(method, model):
    passed = check_method(METHODS.get(method), ADAPTERS[model])
    assert "batch_invariance" in passed


class _Noisy(Method):
    name, family, description = "noisy", "test", "random maps"

    def run(self, adapter, texts, **kw):
        batch = adapter.encode(texts)
        return [MethodResult(self.name, adapter.name, t, np.random.rand(adapter.n_layers, len(t), len(t)), None)
                for t in batch.tokens]


class _ClaimsCompleteness(ScopeMap):
    def run(self, adapter, texts, **kw):
        results = super().run(adapter, texts, **kw)
        for r in results:
            r.residual = 0.5
        return results


def test_conformance_catches_broken_plugins():
    adapter = ADAPTERS["tiny-bert"]
    with pytest.raises(AssertionError, match="one-by-one|deterministic"):
        check_method(_Noisy(), adapter)
    liar = _ClaimsCompleteness("atb", "test", "wrong residual", complete=True, reference="")
    with pytest.raises(AssertionError, match="completeness"):
        check_method(liar, adapter)


def test_entry_point_plugins_are_registered(monkeypatch):
    registry = Registry("method", "attrbench.methods", "attrbench.methods")
    ep = EntryPoint(name="third_party_noisy", value="tests.plugin.test_conformance:_Noisy", group="attrbench.methods")
    monkeypatch.setattr("attrbench.registry.entry_points", lambda group: [ep] if group == "attrbench.methods" else [])
    assert "third_party_noisy" in registry.names()
    assert isinstance(registry.get("third_party_noisy"), _Noisy)


def test_unknown_method_lists_known():
    from attrbench.errors import UnknownPluginError

    with pytest.raises(UnknownPluginError, match="attn_n"):
        METHODS.get("nope")
