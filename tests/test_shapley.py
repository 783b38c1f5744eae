"""Shapley-value split of the FF activation: our engines against shap, efficiency, convergence."""
import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from transformers.activations import ACT2FN

import attrbench
from attrbench.decompose import shapley
from attrbench.errors import InputError

GEN = torch.Generator().manual_seed(3)


def _game(players=7, rows=2, elements=12, gated=False):
    shape = (players, rows, elements)
    parts = [torch.randn(shape, dtype=torch.float64, generator=GEN) for _ in range(2 if gated else 1)]
    return ACT2FN["silu" if gated else "gelu"], parts


@pytest.mark.parametrize("gated", [False, True])
def test_own_exact_equals_shap_exact(gated):
    g, parts = _game(gated=gated)
    ours = shapley.exact(g, parts)
    theirs = shapley.with_shap(g, parts, "shap-exact")
    assert (ours - theirs).abs().max() < 1e-6
    kernel = shapley.with_shap(g, parts, "shapley-kernel")  # 2^7 coalitions < its sample budget: exact
    assert (ours - kernel).abs().max() < 1e-6


@pytest.mark.parametrize("gated", [False, True])
def test_efficiency(gated):
    g, parts = _game(players=9, gated=gated)
    total = g(parts[0].sum(0)) * (parts[1].sum(0) if gated else 1)
    assert (shapley.exact(g, parts).sum(0) - total).abs().max() < 1e-12
    sampled, _ = shapley.sampling(g, parts, samples=8)
    assert (sampled.sum(0) - total).abs().max() < 1e-12  # every permutation is efficient


def test_sampling_converges_to_exact():
    g, parts = _game(players=8)
    exact = shapley.exact(g, parts)
    errors = []
    for samples in (16, 256, 4096):
        sampled, se = shapley.sampling(g, parts, samples=samples, seed=1)
        errors.append(float((sampled - exact).abs().max()))
        if samples >= 256:  # enough pairs for the standard error itself to be reliable
            assert ((sampled - exact).abs() <= 5 * se + 1e-12).all()  # errors within 5 standard errors
    assert errors[2] < errors[1] < errors[0] and errors[2] < 0.02


def test_null_players_get_nothing():
    g, (parts,) = _game(players=5)
    parts[2] = 0
    assert shapley.exact(g, [parts])[2].abs().max() < 1e-14


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-llama"])
def test_shapley_decomposition_is_complete_and_matches_shap(tiny_models, name):
    adapter = tiny_models[(name, "float64")]
    text = "the keys to the cabinet"
    ours = attrbench.decompose(adapter, text, ff_attribution="shapley-exact", layers=[0])[0]
    limit = 1e-10 if name == "tiny-bert" else 1e-6  # LLaMA's own RMSNorm runs in float32
    assert max(ours.residuals.values()) < limit
    whole = attrbench.decompose(adapter, text, ff_attribution="ig", layers=[0])[0]
    ff_scope = [s for s in ours.maps if s in ("atb_ff", "atb_ln_ff")][0]
    theirs = attrbench.decompose(adapter, text, scopes=[ff_scope], ff_attribution="shap-exact", layers=[0])[0]
    assert np.abs(theirs.maps[ff_scope] - ours.maps[ff_scope]).max() < 1e-6
    assert np.abs(whole.maps["atb"] - ours.maps["atb"]).max() == 0  # only the FF split changes


def test_ig_and_shapley_maps_are_similar(tiny_models, capsys):
    """Kobayashi et al. 2024 (App. E) found IG and Shapley maps similar; we report their Spearman."""
    rows = []
    for name in ("tiny-bert", "tiny-gpt2", "tiny-llama"):
        adapter = tiny_models[(name, "float64")]
        ig, sv = (attrbench.decompose(adapter, "the keys to the cabinet are on the table", ff_attribution=f)[0]
                  for f in ("ig", "shapley-exact"))
        scope = [s for s in ig.maps if s in ("atb_ff", "atb_ln_ff")][0]
        rho = spearmanr(ig.maps[scope].ravel(), sv.maps[scope].ravel()).statistic
        rows.append((name, scope, rho))
        assert rho > 0.9
    with capsys.disabled():
        print("\nIG vs exact-Shapley FF maps, Spearman:", ", ".join(f"{n} {s} {r:.3f}" for n, s, r in rows))


def test_exact_beyond_the_player_limit_is_refused(tiny_models):
    adapter = tiny_models[("tiny-bert", "float32")]
    with pytest.raises(InputError, match="shapley-sampling") as err:
        attrbench.decompose(adapter, " ".join(["film"] * 20), ff_attribution="shapley-exact")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="not known"):
        attrbench.decompose(adapter, "a film", ff_attribution="lime")
    dec = attrbench.decompose(adapter, " ".join(["film"] * 20), ff_attribution="shapley-sampling",
                              shapley_samples=32, scopes=["atb_ff"])[0]
    assert dec.ff_sampling_se is not None and dec.ff_sampling_se > 0 and dec.residuals["atb_ff"] < 1e-4
