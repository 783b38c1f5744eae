"""The axioms evaluation: per example, the residual each method recorded and whether it passes, for the methods
that claim an identity; methods that claim none are declined."""
import numpy as np
import pytest

from attrbench.errors import InputError
from attrbench.plugin import MethodResult
from attrbench.registry import EVALS
from attrbench.runtime.pipeline import evaluate

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

METHODS = ("integrated_gradients", "shapley_sampling", "deeplift", "attn_lrp")


def test_residuals_and_passes_per_example(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    records = evaluate(adapter, list(METHODS), ["axioms"], "sva-generated", n=3, progress=False)
    by = {(r["method"], r["metric"]): r for r in records}
    assert set(by) == {(m, k) for m in METHODS for k in ("passes", "residual")}
    axioms = {"integrated_gradients": "completeness", "shapley_sampling": "efficiency", "deeplift": "conservation",
              "attn_lrp": "conservation"}
    for method, axiom in axioms.items():
        residual, passes = by[(method, "residual")], by[(method, "passes")]
        assert residual["axiom"] == passes["axiom"] == axiom and len(residual["values"]) == 3
        assert passes["values"] == [1.0 if r <= residual["tolerance"] else 0.0 for r in residual["values"]]
        assert passes["higher_is_better"] and not residual["higher_is_better"]
    assert by[("integrated_gradients", "passes")]["tolerance"] == 0.05
    assert by[("integrated_gradients", "passes")]["mean"] == by[("shapley_sampling", "passes")]["mean"] == 1.0
    assert by[("attn_lrp", "passes")]["mean"] == 1.0 and max(by[("attn_lrp", "residual")]["values"]) < 1e-8
    assert by[("deeplift", "passes")]["mean"] == 0.0  # captum's DeepLift passes plain gradients through GELU
    assert not EVALS.get("axioms").ranked


def test_methods_without_an_axiom_are_declined(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    with pytest.raises(InputError, match="'grad_l2' claims no axiom"):
        evaluate(adapter, ["grad_l2"], ["axioms"], "sva-generated", n=2, progress=False)
    records = evaluate(adapter, ["grad_l2", "shapley_sampling"], ["axioms", "timing"], "sva-generated", n=2,
                       progress=False)
    assert {r["method"] for r in records if r["eval"] == "axioms"} == {"shapley_sampling"}
    assert {r["method"] for r in records if r["eval"] == "timing"} == {"grad_l2", "shapley_sampling"}
    with pytest.raises(InputError, match="'axioms' checks methods that claim an axiom and got none; give one of "
                                         ".*integrated_gradients"):
        evaluate(adapter, ["grad_l2"], ["axioms", "timing"], "sva-generated", n=2, progress=False)


def test_reads_the_record_and_computes_nothing():
    axioms = EVALS.get("axioms")
    record = {"name": "efficiency", "residual": 0.2, "tolerance": 0.1, "passes": False}
    result = MethodResult("m", "model", ["a"], np.zeros(1), None, {"axiom": record})
    assert axioms.score(None, result) == {"passes": 0.0, "residual": 0.2, "axiom": "efficiency", "tolerance": 0.1}
    stored_before = MethodResult("m", "model", ["a"], np.zeros(1), None, {})  # cached before axioms were recorded
    assert axioms.score(None, stored_before)["passes"] is None
