"""The closed-form IG equals captum's IntegratedGradients (Gauss-Legendre, 256 steps)."""
import pytest
import torch
from captum.attr import IntegratedGradients
from transformers.activations import ACT2FN

import attrbench
from attrbench.decompose import stages
from attrbench.decompose.reference import ff_parts_reference

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)


def _captum(forward, inputs):
    ig = IntegratedGradients(forward)
    return ig.attribute(tuple(x[None] for x in inputs), n_steps=256, method="gausslegendre")


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu", "silu", "tanh"])
def test_closed_form_ig_equals_captum(act):
    g = ACT2FN[act]
    parts = torch.randn(7, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    parts[:, 0] = 0  # a zero total exercises the g'(0) limit
    ours = parts * stages.ig_share(g, parts.sum(0))
    (theirs,) = _captum(lambda p: g(p.sum(1)).sum(-1), (parts,))
    assert (ours - theirs[0]).abs().max() < 1e-5
    assert torch.allclose(ours.sum(0), g(parts.sum(0)), atol=1e-12)  # completeness


def test_gated_ig_equals_captum():
    gen = torch.Generator().manual_seed(2)
    gate, up = (3 * torch.randn(6, 40, dtype=torch.float64, generator=gen) for _ in range(2))
    gate[:, :2] *= 1e-5  # tiny totals take the quadrature branch of I1
    g = ACT2FN["silu"]
    k1, k0 = stages.gated_ig_factors(g, gate.sum(0), up.sum(0))
    ours_gate, ours_up = gate * k1, up * k0
    theirs_gate, theirs_up = _captum(lambda a, c: (g(a.sum(1)) * c.sum(1)).sum(-1), (gate, up))
    assert (ours_gate - theirs_gate[0]).abs().max() < 1e-5
    assert (ours_up - theirs_up[0]).abs().max() < 1e-5
    assert torch.allclose((ours_gate + ours_up).sum(0), g(gate.sum(0)) * up.sum(0), atol=1e-12)


@pytest.mark.parametrize("name,ff_in,ff_out", [("tiny-bert", "atb", "atb_ff"), ("tiny-gpt2", "atb_ln", "atb_ln_ff"),
                                               ("tiny-llama", "atb_ln", "atb_ln_ff")])
def test_engine_ff_parts_equal_paper_formulation(tiny_models, name, ff_in, ff_out):
    """Factored closed-form engine = captum IG per row on unfactored projections (the paper's way)."""
    adapter = tiny_models[(name, "float64")]
    dec = attrbench.decompose(adapter, ["the keys to the cabinet are on the table"], keep_parts=True)[0]
    for layer, parts in enumerate(dec.parts):
        ref_parts, ref_bias = ff_parts_reference(adapter.layers[layer].ff, *parts[ff_in], steps=256)
        ours, ours_bias = parts[ff_out]
        assert (ref_parts - ours).abs().max() < 1e-5 * ours.abs().max()
        assert (ref_bias - ours_bias).abs().max() < 1e-5 * ours.abs().max()
