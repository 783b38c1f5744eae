"""captum's zoo, wired to our targets and baselines: each method against a recomputation by hand.

The algorithms are captum's own; what these tests check is everything around them: that the
input-space methods (which get word embeddings as ``inputs_embeds``) explain the same score as the
layer methods, that a token's features are its whole embedding, that the baseline is the text with
its non-special tokens replaced, and the sampled methods' guarantees (Shapley efficiency).
"""
import itertools
import math
import re

import numpy as np
import pytest
import torch

from attrbench.errors import InputError
from attrbench.models import load_model
from attrbench.plugin.gradient import baseline_ids
from attrbench.registry import METHODS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are"
MODELS = ["tiny-bert", "tiny-llama"]


def _setup(name):
    adapter = load_model(name, "float64")
    ids = adapter.encode([TEXT]).input_ids[:1]
    result = METHODS.get("grad_l2")(adapter, [TEXT])[0]  # resolves the default target the same way
    row, index = result.meta["row"], result.meta["index"]

    def score(input_ids=None, inputs_embeds=None):
        logits = adapter.model(input_ids=input_ids, inputs_embeds=inputs_embeds).logits
        return logits[:, row, index] if logits.ndim == 3 else logits[:, index]

    return adapter, ids, score


def _run(adapter, method, **params):
    return METHODS.get(method).with_params(**params)(adapter, [TEXT])[0].values


@pytest.mark.parametrize("name", MODELS)
def test_feature_ablation_and_occlusion_are_output_differences(name):
    adapter, ids, score = _setup(name)
    base = baseline_ids(adapter, ids, "pad")
    n = ids.shape[1]

    def without(tokens):
        variant = ids.clone()
        variant[0, list(tokens)] = base[0, list(tokens)]
        return float((score(ids) - score(variant)).detach())

    np.testing.assert_allclose(_run(adapter, "feature_ablation"), [without([j]) for j in range(n)], atol=1e-10)
    np.testing.assert_allclose(_run(adapter, "occlusion"), [without([j]) for j in range(n)], atol=1e-10)
    windows = {start: without([start, start + 1]) for start in range(n - 1)}  # window 2, stride 1
    by_hand = [np.mean([windows[s] for s in (j - 1, j) if s in windows]) for j in range(n)]
    np.testing.assert_allclose(_run(adapter, "occlusion", window=2), by_hand, atol=1e-10)


def _exact_shapley(adapter, ids, score):
    """Shapley values of the tokens by enumerating all coalitions (absent tokens: the baseline's)."""
    base, n = baseline_ids(adapter, ids, "pad"), ids.shape[1]
    value = {}
    for mask in itertools.product([0, 1], repeat=n):
        variant = torch.where(torch.tensor(mask, dtype=torch.bool)[None], ids, base)
        value[mask] = float(score(variant).detach())
    phi = np.zeros(n)
    for mask, v in value.items():
        for j in range(n):
            if mask[j]:
                continue
            size = sum(mask)
            with_j = mask[:j] + (1,) + mask[j + 1:]
            phi[j] += math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n) * (value[with_j] - v)
    return phi, value[(1,) * n] - value[(0,) * n]


@pytest.mark.parametrize("name", MODELS)
def test_shapley_sampling_is_efficient_and_near_the_exact_values(name):
    adapter, ids, score = _setup(name)
    exact, total = _exact_shapley(adapter, ids, score)
    sampled = _run(adapter, "shapley_sampling", n_samples=300)
    # every permutation sums to v(N) - v(∅); captum accumulates the sums in float32 even for float64 models
    assert sampled.sum() == pytest.approx(total, rel=2e-6)
    assert np.abs(sampled - exact).max() <= 0.1 * np.abs(exact).max()
    kernel = _run(adapter, "kernel_shap", n_samples=2000)
    assert np.abs(kernel - exact).max() <= 0.2 * np.abs(exact).max()


@pytest.mark.parametrize("name", MODELS)
def test_gradient_methods_by_hand(name):
    adapter, ids, score = _setup(name)
    embed = adapter.model.get_input_embeddings()
    e = embed(ids).detach().requires_grad_()
    grad, = torch.autograd.grad(score(inputs_embeds=e).sum(), e)
    np.testing.assert_allclose(_run(adapter, "saliency"), grad[0].abs().sum(-1).numpy(), rtol=1e-10, atol=1e-12)
    # no nn.Module nonlinearity DeepLift knows is in these models: its rule is gradient x (input - baseline)
    delta_e = (e - embed(baseline_ids(adapter, ids, "pad"))).detach()
    np.testing.assert_allclose(_run(adapter, "deeplift"), (grad * delta_e)[0].sum(-1).numpy(), rtol=1e-8, atol=1e-10)
    # with no noise, SmoothGrad over IG is IG; through inputs_embeds it equals the layer method
    ig = METHODS.get("integrated_gradients").with_params(n_steps=16)(adapter, [TEXT])[0].values
    np.testing.assert_allclose(_run(adapter, "smooth_grad", noise=0.0, n_samples=1, n_steps=16), ig,
                               rtol=1e-8, atol=1e-10)
    # GradientShap with no noise: IG's path integral by Monte Carlo
    shap = _run(adapter, "gradient_shap", n_samples=4000)
    assert np.abs(shap - ig).max() <= 0.1 * np.abs(ig).max()


def test_bad_parameters_are_one_line_errors():
    adapter = load_model("tiny-bert")
    with pytest.raises(InputError, match="window of 40 tokens is longer than the text \\(8 tokens\\)"):
        METHODS.get("occlusion").with_params(window=40)(adapter, [TEXT])
    for method in ("lime", "kernel_shap", "shapley_sampling", "gradient_shap", "smooth_grad"):
        with pytest.raises(InputError, match="'n_samples' is 0; it must be at least 1"):
            METHODS.get(method).with_params(n_samples=0)

def test_parameters_are_recorded_and_seeds_matter():
    adapter = load_model("tiny-bert")
    lime = METHODS.get("lime")
    first = lime(adapter, [TEXT])[0]
    assert first.meta["params"] == {"baseline": "pad", "n_samples": 200, "batch_size": 32, "seed": 0}
    other = lime.with_params(seed=1)(adapter, [TEXT])[0]
    assert not np.array_equal(first.values, other.values)


def test_shapley_sampling_per_token_mask_gives_the_full_masks_scores():
    """The method hands captum one mask entry per token (broadcast over the embedding), not one per element: the
    same products in the same order, so the same scores to the bit."""
    from attrbench.methods.captum_zoo import CaptumMethod, _sampled

    method = METHODS.get("shapley_sampling")
    full = CaptumMethod("full_mask", method.family, "", "", method.params, _sampled("ShapleyValueSampling"), "mean")
    for name in MODELS:
        adapter = load_model(name)
        assert np.array_equal(method(adapter, [TEXT])[0].values, full(adapter, [TEXT])[0].values)


@pytest.mark.parametrize("name", MODELS)
def test_smoothgrad_and_gradient_shap_equal_captums_own_calls(name):
    """Both draw each text's noise (and GradientShap its baseline index and path points) themselves, so that a text
    in a batch gets its own draws: on one text, with the seeds set as the method sets them, they equal captum's
    NoiseTunnel over IntegratedGradients and captum's GradientShap called as captum documents them."""
    from captum.attr import GradientShap, IntegratedGradients, NoiseTunnel

    adapter, ids, score = _setup(name)
    layer = adapter.model.get_input_embeddings()
    embeds, base = layer(ids).detach(), layer(baseline_ids(adapter, ids, "pad")).detach()

    def forward(inputs_embeds):
        return score(inputs_embeds=inputs_embeds)

    def seeded(call, seed=0):
        torch.manual_seed(seed)
        np.random.seed(seed)
        return call().detach().sum(-1)[0].numpy()

    for noise in (0.1, 0.3):
        stdev = noise * float(embeds.std())
        captum_sg = seeded(lambda: NoiseTunnel(IntegratedGradients(forward)).attribute(
            embeds.clone().requires_grad_(), nt_type="smoothgrad", nt_samples=8, stdevs=stdev,
            nt_samples_batch_size=1, baselines=base, n_steps=16, method="gausslegendre"))
        np.testing.assert_allclose(_run(adapter, "smooth_grad", noise=noise), captum_sg, rtol=1e-9, atol=1e-12)
    for noise in (0.0, 0.2):
        captum_gs = seeded(lambda: GradientShap(forward).attribute(
            embeds.clone().requires_grad_(), baselines=base, n_samples=20, stdevs=noise * float(embeds.std())))
        np.testing.assert_allclose(_run(adapter, "gradient_shap", noise=noise), captum_gs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_sampled_perturbation_methods_equal_captums_own_calls(name):
    """Pooled (every perturbation recorded, answered in shared batches, replayed; samples, model inputs and
    permutation steps made together), LIME, KernelSHAP and Shapley sampling on one text equal captum's Lime,
    KernelShap and ShapleyValueSampling called as captum documents them, with the seed set as the method sets it:
    the same samples, the same fit."""
    from captum.attr import KernelShap, Lime, ShapleyValueSampling

    adapter, ids, score = _setup(name)
    layer = adapter.model.get_input_embeddings()
    embeds, base = layer(ids).detach(), layer(baseline_ids(adapter, ids, "pad")).detach()
    tokens = torch.arange(ids.shape[1])[None, :, None].expand_as(embeds).contiguous()

    def forward(inputs_embeds):
        return score(inputs_embeds=inputs_embeds)

    for method, algorithm, counts in (("lime", Lime, (50, 200)), ("kernel_shap", KernelShap, (50, 200)),
                                      ("shapley_sampling", ShapleyValueSampling, (1, 25))):
        for n_samples in counts:
            torch.manual_seed(0)
            np.random.seed(0)
            theirs = algorithm(forward).attribute(embeds.clone().requires_grad_(), baselines=base,
                                                  feature_mask=tokens, n_samples=n_samples,
                                                  perturbations_per_eval=32).detach().mean(-1)[0].numpy()
            ours = _run(adapter, method, n_samples=n_samples, baseline="pad")
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9, err_msg=f"{method} {n_samples}")
            assert np.abs(theirs).max() > 0


@pytest.mark.parametrize("tokens, hidden", [(3, 16), (40, 384), (60, 576)])
@pytest.mark.parametrize("algorithm", ["Lime", "KernelShap"])
def test_samples_made_together_are_captums_to_the_last_bit(algorithm, tokens, hidden):
    """What the recording makes at once (LIME's and KernelSHAP's samples, their model inputs, LIME's kernel weights)
    is bit for bit what captum's loop makes one sample at a time, on two threads, for texts whose flat embeddings
    are below (40 x 384) and above (60 x 576) the length beyond which torch splits one vector's sum over threads."""
    import captum.attr

    from attrbench.plugin.captum_pool import captum_sampler, default_from_interp_rep_transform, samples_at_once

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generator = torch.Generator().manual_seed(tokens)
        x = torch.randn(1, tokens, hidden, generator=generator)
        base = torch.randn(1, tokens, hidden, generator=generator) * 0.1
        mask = torch.arange(tokens)[None, :, None].expand(1, tokens, hidden).contiguous()
        engine = getattr(captum.attr, algorithm)(lambda inputs: inputs.sum(dim=(1, 2)))
        kwargs = {"baselines": base, "feature_mask": mask, "num_interp_features": tokens}
        if algorithm == "KernelShap":
            kwargs["num_select_distribution"] = torch.distributions.Categorical(torch.ones(tokens - 1))
        torch.manual_seed(0)
        theirs = captum_sampler(engine, x, **kwargs)
        theirs = [theirs() for _ in range(50)]
        torch.manual_seed(0)
        ours, weights = samples_at_once(engine, 50)(x, **kwargs)
        for (a, b), (c, d) in zip(theirs, ours):
            assert torch.equal(a, c) and a.dtype == c.dtype and torch.equal(b, d) and b.shape == d.shape
            assert torch.equal(b, default_from_interp_rep_transform(a, x, **kwargs))
        if algorithm == "Lime":
            assert weights is None if tokens * hidden > 32768 else weights == [
                engine.similarity_func(x, b, a, **kwargs) for a, b in theirs]
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("name", MODELS)
def test_identities_are_recorded_against_the_models_own_scores(name):
    """Shapley sampling and KernelShap meet efficiency within their tolerance; captum's DeepLift misses
    summation-to-delta here (plain gradients through GELU/SiLU and the softmax), and its record says so."""
    adapter, ids, score = _setup(name)
    total = float((score(ids) - score(baseline_ids(adapter, ids, "pad"))).detach())
    records = {}
    for method, identity in (("shapley_sampling", "efficiency"), ("kernel_shap", "efficiency"),
                             ("deeplift", "conservation")):
        result = METHODS.get(method)(adapter, [TEXT])[0]
        axiom = records[method] = result.meta["axiom"]
        assert axiom["name"] == identity and axiom["expected"] == pytest.approx(total, rel=1e-10)
        assert axiom["residual"] == pytest.approx(abs(result.values.sum() - total) / abs(total), rel=1e-6, abs=1e-12)
    assert records["shapley_sampling"]["passes"] and records["shapley_sampling"]["residual"] <= 2e-6
    assert records["kernel_shap"]["passes"]
    assert not records["deeplift"]["passes"] and records["deeplift"]["residual"] > 0.01


def test_an_unsupported_captum_is_refused_in_one_line_and_pyproject_pins_the_same_range():
    """The captum methods read some of captum's internals: a release outside the tested range stops them with the
    fix, and the installed one is inside it."""
    from pathlib import Path

    import captum

    from attrbench.plugin.gradient import CAPTUM_SUPPORTED, captum_attr, check_captum

    captum_attr()  # the installed captum passes
    check_captum(captum.__version__)
    for version in ("0.10.0", "0.7.2", "1.0"):
        with pytest.raises(InputError, match=rf"^captum {re.escape(version)} is not supported \(.+\): pip install "
                                             r"'captum>=0\.8,<0\.10'$"):
            check_captum(version)
    (low, high) = CAPTUM_SUPPORTED
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert re.findall(r'"(captum[^"]*)"', pyproject) == [f"captum>={low[0]}.{low[1]},<{high[0]}.{high[1]}"]
