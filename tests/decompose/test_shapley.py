"""Shapley-value split of the FF activation: our engines against shap, efficiency, convergence."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from transformers.activations import ACT2FN

import attrbench
from attrbench.decompose import shapley
from tests.precision import gamma
from attrbench.errors import InputError

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)


def _game(players=7, rows=2, elements=12, gated=False, seed=3):
    """A random game of its own seed: the same parts whichever tests ran before it in the process (pytest-xdist
    deals tests to workers in no fixed order)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (players, rows, elements)
    parts = [torch.randn(shape, dtype=torch.float64, generator=generator) for _ in range(2 if gated else 1)]
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


@pytest.mark.parametrize("name,gated", [("gelu", False), ("gelu_new", False), ("gelu_pytorch_tanh", False),
                                        ("silu", True), ("silu", False), ("relu", False)])
@pytest.mark.parametrize("players", [1, 2, 9, 12])
def test_fused_kernel_equals_float64_exact(name, gated, players):
    """float32 games take the fused numba kernel: same values as the float64 torch engine, efficient."""
    from attrbench.decompose.shapley import fused as shapley_fused

    g = ACT2FN[name]
    assert shapley_fused.ACTIVATIONS[shapley_fused.activation_code(g)] == name.replace("_new", "_tanh").replace(
        "_pytorch_tanh", "_tanh")
    _, parts = _game(players=players, rows=3, elements=10, gated=gated)
    parts = [2 * p for p in parts]
    ours = shapley.exact(g, [p.float() for p in parts])
    want = shapley.exact_dense(g, parts)
    scale = float(want.abs().max())
    assert ours.dtype == torch.float32 and ours.shape == want.shape
    assert (ours.double() - want).abs().max() < 1e-6 * max(1.0, scale)  # float32 rounding: 4e-7 seen
    total = g(parts[0].sum(0)) * (parts[1].sum(0) if gated else 1)
    assert (ours.double().sum(0) - total).abs().max() < 1e-6 * max(1.0, float(total.abs().max()))


def test_both_float32_gelus_are_within_float32s_bound_and_the_performance_page_quotes_its_cpus_record():
    """The fused kernel's exp-free float32 GELU and torch's own, each against float64 on the same evenly spaced points
    of [-12, 12]: both within gamma_8 (1 + |x|) everywhere, on every CPU. GELU(x) = x Phi(x) with Phi(x) = (1 +
    erf(x / sqrt 2)) / 2 in [0, 1]: a float32 Phi is off by a few u (absolute), which the factor x carries, and the
    product is rounded once more; eight roundings' worth bounds both (measured here: at most 4.8 u (1 + |x|)). Which of the two is closer depends on the CPU, so the
    page quotes benchmarks/results/gelu-cpu.json as its CPU's figures, and they are re-measured here only on that CPU."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_gelu

    x = np.linspace(-12, 12, bench_gelu.POINTS).astype(np.float32)
    exact = torch.nn.functional.gelu(torch.from_numpy(x).double()).numpy()
    bound = (1 + np.abs(x.astype(np.float64))) * gamma(8, torch.float32)
    for name, ours in (("torch", torch.nn.functional.gelu(torch.from_numpy(x)).double().numpy()),
                       ("kernel", bench_gelu.kernel_gelu(x).astype(np.float64))):
        excess = np.abs(ours - exact) - bound
        assert excess.max() <= 0, f"{name}'s float32 GELU is off by more than float32's bound at x = {x[excess.argmax()]}"
    record = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gelu-cpu.json").read_text())
    cpu = record["cpu"]
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text().split())
    torch32, ours = record["torch_float32"]["max_abs_error"], record["kernel_float32"]["max_abs_error"]
    assert (f"on the CPU its record names ({cpu['model_name']}, family {cpu['family']}, model {cpu['model']}, "
            f"torch's {cpu['torch_capability']} kernels), torch's is the {'less' if torch32 > ours else 'more'} accurate "
            f"({torch32:.1e} against {ours:.1e} on {record['points']:,} evenly spaced points of [−12, 12], against "
            "float64)").replace("e-0", "e-") in page
    if bench_gelu.cpu_signature() == cpu:  # the CPU it was measured on: the figures hold here as recorded
        measured = bench_gelu.measure()
        for name in ("torch_float32", "kernel_float32"):
            assert f"{measured[name]['max_abs_error']:.1e}" == f"{record[name]['max_abs_error']:.1e}", name


def test_unknown_activation_takes_the_torch_engine():
    from attrbench.decompose.shapley import fused as shapley_fused

    for name in ("quick_gelu", "tanh", "sigmoid"):
        g = ACT2FN[name]
        assert shapley_fused.activation_code(g) is None
        _, (parts,) = _game(players=6)
        assert torch.equal(shapley.exact(g, [parts.float()]), shapley.exact_dense(g, [parts.float()]))


def test_fused_kernel_follows_torch_threads():
    g, (parts,) = _game(players=10, rows=4, elements=64)
    parts = parts.float()
    both = shapley.exact(g, [parts])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = shapley.exact(g, [parts])
    finally:
        torch.set_num_threads(threads)
    assert (one - both).abs().max() < 1e-6


def test_fused_kernel_leaves_torchs_threads_as_they_were():
    """numba's OpenMP layer shares its thread count with torch: the first call in a process, which starts that
    layer, must not raise a process set to one thread back to numba's default (every core)."""
    import subprocess
    import sys

    code = ("import torch; torch.set_num_threads(1)\n"
            "from tests.decompose.test_shapley import _game, shapley\n"
            "g, (parts,) = _game(players=6, rows=2, elements=8)\n"
            "shapley.exact(g, [parts.float()]); print(torch.get_num_threads())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "1"


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


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_float32_models_take_the_fused_kernel(tiny_models, name):
    """Real decompositions in float32 go through the fused kernel and stay complete."""
    from attrbench.decompose.shapley import fused as shapley_fused

    f32, f64 = tiny_models[(name, "float32")], tiny_models[(name, "float64")]
    assert shapley_fused.activation_code(f32.layers[0].ff.activation) is not None
    text = "the keys to the cabinet are on the table"
    ours = attrbench.decompose(f32, text, ff_attribution="shapley-exact", layers=[0])[0]
    assert max(ours.residuals.values()) < 1e-4
    want = attrbench.decompose(f64, text, ff_attribution="shapley-exact", layers=[0])[0]
    scope = [s for s in ours.maps if s in ("atb_ff", "atb_ln_ff")][0]
    assert np.abs(ours.maps[scope] - want.maps[scope]).max() < 1e-4 * np.abs(want.maps[scope]).max()


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
