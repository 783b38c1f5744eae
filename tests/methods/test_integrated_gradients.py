"""Integrated gradients refined until complete: the residual it records is the real one, the refinement reaches
the tolerance where a fixed rule does not, and its segments add up to the integral over the whole path."""
import numpy as np
import pytest
import torch

from attrbench.models import load_model
from attrbench.plugin.gradient import baseline_ids
from attrbench.registry import METHODS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

IG = METHODS.get("integrated_gradients")
TEXTS = {"tiny-bert": "the keys to the cabinet [MASK] on the table", "tiny-llama": "the keys to the cabinet"}


def _explained(adapter, text, result):
    """F(x) - F(x') by two plain forward passes, x' the pad baseline."""
    ids = adapter.encode([text]).input_ids
    with torch.no_grad():
        logits = [adapter.model(input_ids=i).logits[0, result.meta["row"]]
                  for i in (ids, baseline_ids(adapter, ids, "pad"))]
    return float(logits[0][result.meta["index"]] - logits[1][result.meta["index"]])


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-llama"])
def test_records_its_completeness_residual(name):
    adapter, text = load_model(name, "float64"), TEXTS[name]
    result = IG(adapter, [text], target="token:are")[0]
    explained = _explained(adapter, text, result)
    axiom = result.meta["axiom"]
    assert axiom["name"] == "completeness" and axiom["expected"] == pytest.approx(explained, rel=1e-10)
    assert axiom["residual"] == pytest.approx(abs(result.values.sum() - explained) / abs(explained), rel=1e-6)
    assert axiom["residual"] == result.meta["relative_delta"] < 1e-5 and axiom["passes"] and result.meta["converged"]
    assert result.meta["n_steps"] == 50 and result.meta["segments"] == 1  # smooth here: the fixed rule's cost


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-llama"])
def test_refines_where_the_fixed_rule_is_incomplete(name):
    adapter, text = load_model(name, "float64"), TEXTS[name]
    fixed = IG.with_params(n_steps=2, max_steps=2)(adapter, [text], target="token:are")[0]
    assert fixed.meta["relative_delta"] > 0.05 and not fixed.meta["converged"] and not fixed.meta["axiom"]["passes"]
    refined = IG.with_params(n_steps=2)(adapter, [text], target="token:are")[0]
    assert refined.meta["segments"] > 1 and refined.meta["n_steps"] > 2 and refined.meta["converged"]
    # the gaps' sum bounds the total gap (triangle inequality), equal to it when all have one sign: up to rounding
    assert refined.meta["relative_delta"] <= refined.meta["segment_delta"] * (1 + 1e-12) <= 0.05
    assert refined.meta["axiom"]["passes"]


def test_segments_add_up_to_the_integral():
    """Short segments with two nodes each, refined far, give the per-token integral of a fine single rule."""
    adapter, text = load_model("tiny-llama", "float64"), TEXTS["tiny-llama"]
    reference = IG.with_params(n_steps=200)(adapter, [text], target="token:are")[0]
    refined = IG.with_params(n_steps=2, tolerance=1e-5, max_steps=4000)(adapter, [text], target="token:are")[0]
    assert refined.meta["segments"] > 8 and refined.meta["converged"]
    np.testing.assert_allclose(refined.values, reference.values, atol=1e-4 * np.abs(reference.values).max())


def test_stops_at_the_cap_and_says_so():
    adapter, text = load_model("tiny-llama", "float64"), TEXTS["tiny-llama"]
    capped = IG.with_params(n_steps=2, tolerance=1e-9, max_steps=11)(adapter, [text], target="token:are")[0]
    assert capped.meta["n_steps"] <= 11 and not capped.meta["converged"]
    assert capped.meta["segments"] == 1 + (capped.meta["n_steps"] - 2) // 4


def test_a_new_default_gets_a_new_key():
    """Rows of the fixed 50-step rule (key ``integrated_gradients(baseline=pad,n_steps=50)``) are not reused."""
    assert IG.key == "integrated_gradients(baseline=pad,max_steps=1600,n_steps=50,tolerance=0.05)"
