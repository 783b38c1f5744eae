"""Batched gradient methods: a padded batch of texts, each with its own target, gives each text's own result, and a
run's workspace computes a shard's attributions of a batched method in one call."""
import numpy as np
import pytest
import torch

from attrbench.datasets.base import Example
from attrbench.models import load_model
from attrbench.models.tiny import TINY_MODELS
from attrbench.runtime.workspace import Workspace
from attrbench.registry import METHODS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

ADAPTERS = {n: load_model(n) for n in TINY_MODELS}
TEXTS = ["the keys to the cabinet are on the table .", "dogs run", "a wonderful film about the sea"]
# GradientShap draws no noise by default; with it, each text's noise must be what it draws alone
VARIANTS = {"gradient_shap+noise": METHODS.get("gradient_shap").with_params(noise=0.1)}
BATCHED = [(m.name, n) for m in METHODS.all() if m.batched for n in TINY_MODELS
           if m.supports(ADAPTERS[n]) is None] + [(name, n) for name in VARIANTS for n in TINY_MODELS]


def test_the_gradient_and_perturbation_families_are_batched():
    assert {"grad_l2", "grad_x_input", "integrated_gradients", "saliency", "deeplift", "smooth_grad",
            "gradient_shap", "feature_ablation", "occlusion", "lime", "kernel_shap",
            "shapley_sampling", "blank_out", "attn_lrp"} <= {name for name, _ in BATCHED}
    assert all(METHODS.get(name).pads for name in ("grad_l2", "integrated_gradients", "saliency", "deeplift",
                                                   "smooth_grad", "gradient_shap"))
    # perturbation methods pool their texts' forward passes, each text drawn as alone (no padding)
    assert not any(METHODS.get(name).pads for name in ("occlusion", "lime", "kernel_shap", "shapley_sampling"))
    assert METHODS.get("occlusion").with_params(window=2).batched
    assert METHODS.get("gradient_shap").with_params(noise=0.1).batched


@pytest.mark.parametrize("method,model", BATCHED)
def test_a_batch_with_a_target_per_text_equals_one_text_at_a_time(method, model):
    adapter, method = ADAPTERS[model], VARIANTS.get(method) or METHODS.get(method)
    lengths = [len(adapter.tokenizer(t)["input_ids"]) for t in TEXTS]
    targets = [f"position:{min(k + 1, n - 1)}" for k, n in enumerate(lengths)]  # another row per text
    together = method(adapter, TEXTS, target=targets)
    for text, target, batched in zip(TEXTS, targets, together):
        (alone,) = method(adapter, [text], target=target)
        assert batched.tokens == alone.tokens and batched.meta["row"] == alone.meta["row"]
        scale = max(1e-12, float(np.abs(alone.values).max()))
        assert float(np.abs(batched.values - alone.values).max()) / scale <= 1e-5, (method.name, model, text)
        for key in ("n_steps", "segments", "converged"):
            assert batched.meta.get(key) == alone.meta.get(key)


def test_batches_keep_to_the_token_budget_and_decoder_classifiers_to_one_length(monkeypatch):
    lengths = [3, 5, 2, 5, 9]
    method = METHODS.get("grad_l2").with_params()
    method.batch_tokens = 12
    groups = method.groups(ADAPTERS["tiny-bert"], lengths)
    assert sorted(b for g in groups for b in g) == [0, 1, 2, 3, 4]
    assert all(len(g) * max(lengths[b] for b in g) <= 12 for g in groups)
    assert groups[0] == [2, 0]  # length-sorted
    assert len(METHODS.get("grad_l2").groups(ADAPTERS["tiny-bert"], lengths)) == 1  # the default budget
    # a decoder read by a sequence-classification head pools its last position, which padding would move
    from attrbench.plugin import method as method_module
    monkeypatch.setattr(method_module, "head_kind", lambda adapter: "classifier")
    groups = METHODS.get("grad_l2").groups(ADAPTERS["tiny-llama"], [4, 4, 5, 4])
    assert sorted(len(g) for g in groups) == [1, 3] and all(len({[4, 4, 5, 4][b] for b in g}) == 1 for g in groups)
    assert len(METHODS.get("grad_l2").groups(ADAPTERS["tiny-bert"], [4, 4, 5, 4])) == 1  # an encoder pads


def test_the_workspace_computes_a_batched_methods_attributions_together():
    adapter = ADAPTERS["tiny-llama"]
    examples = [Example(f"e{k}", text, "auto") for k, text in enumerate(TEXTS)]
    workspace = Workspace()
    method = METHODS.get("integrated_gradients")
    workspace.prefetch(adapter, method, examples + examples[:1])  # a repeat is computed once
    assert workspace.attributions_computed == 3
    costs = [workspace.attribution(adapter, method, e).meta["cost"] for e in examples]
    assert workspace.attributions_computed == 3  # found, not computed again
    assert all(c["batch"] == 3 for c in costs)
    assert sum(c["seconds"] for c in costs) == pytest.approx(workspace.attribution_seconds)
    shares = [c["seconds"] / c["n_tokens"] for c in costs]
    assert max(shares) == pytest.approx(min(shares))  # shared out by tokens
    for example in examples:  # the same scores as a workspace that computes each alone
        alone = Workspace().attribution(adapter, method, example)
        together = workspace.attribution(adapter, method, example)
        assert np.allclose(alone.values, together.values, rtol=1e-5, atol=1e-7)
        assert "batch" not in alone.meta["cost"]
    one_at_a_time, unbatched = Workspace(), METHODS.get("random").with_params()
    unbatched.batched = False  # every registered method is batched: a plugin's need not be
    one_at_a_time.prefetch(adapter, unbatched, examples)
    assert one_at_a_time.attributions_computed == 0  # not batched: each is computed when asked


def test_a_batch_too_large_for_the_device_is_halved_until_it_fits(monkeypatch):
    adapter, method = ADAPTERS["tiny-bert"], METHODS.get("grad_x_input").with_params()
    attribute, sizes = type(method).attribute, []

    def small_device(self, forward, layer, input_ids, attention_mask, adapter):
        sizes.append(len(input_ids))
        if len(input_ids) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return attribute(self, forward, layer, input_ids, attention_mask, adapter)

    monkeypatch.setattr(type(method), "attribute", small_device)
    halved = method(adapter, TEXTS)
    assert sizes[0] == 3 and sizes.count(1) == 3 and method.batch_tokens < type(method).batch_tokens
    monkeypatch.undo()
    for text, result in zip(TEXTS, halved):
        assert np.allclose(result.values, METHODS.get("grad_x_input")(adapter, [text])[0].values, atol=1e-6)


def test_a_method_within_a_devices_budget_is_a_sized_copy():
    method = METHODS.get("integrated_gradients")
    sized = method.within(65536, 3200)  # CUDA's run budget
    assert (sized.batch_tokens, sized.pad_tokens) == (16384, 3200)  # a quarter per pass that keeps activations
    assert (method.batch_tokens, method.pad_tokens) == (1024, 64)  # the registered one is left as it was
    assert sized.get_params() == method.get_params()
    assert len(sized.groups(ADAPTERS["tiny-bert"], [30] * 40)) == 1 and len(method.groups(
        ADAPTERS["tiny-bert"], [30] * 40)) == 2


def test_a_method_that_sends_many_rows_per_text_pads_its_batches_that_much_less():
    """A batch's padding is computed once per row: grad_x_input (one row per text) may pad a batch with the whole
    budget, Integrated Gradients (n_steps rows per text) with the budget divided by n_steps, and SmoothGrad by its
    copies times their steps."""
    adapter, lengths = ADAPTERS["tiny-bert"], [10, 12, 14, 20, 21, 40]

    def padding(method):
        return [sum(max(lengths[b] for b in group) - lengths[b] for b in group)
                for group in method.groups(adapter, lengths)]

    plain = METHODS.get("grad_x_input").within(4096, 64)
    assert plain.rows_per_text() == 1 and max(padding(plain)) > 1 and max(padding(plain)) <= 64
    ig = METHODS.get("integrated_gradients").within(4096, 64)
    assert ig.rows_per_text() == 50 and max(padding(ig)) <= 64 // 50
    assert len(ig.groups(adapter, lengths)) > len(plain.groups(adapter, lengths))
    assert METHODS.get("integrated_gradients").with_params(n_steps=16).within(4096, 64).rows_per_text() == 16
    smooth = METHODS.get("smooth_grad")
    assert smooth.rows_per_text() == smooth.get_params()["n_samples"] * smooth.get_params()["n_steps"]
    wide = METHODS.get("integrated_gradients").within(4096, 3200)  # CUDA's budget: 64 tokens a batch for IG
    assert max(padding(wide)) > 1 and max(padding(wide)) <= 3200 // 50


@pytest.mark.parametrize("name", ["alti", "value_zeroing"])
def test_a_decomposition_or_value_zeroing_batch_too_large_for_the_device_is_halved(name, monkeypatch):
    """Batches of the decomposition wrappers and Value Zeroing's clean passes, like the gradient methods', halve on
    an out-of-memory error down to one text, with each text's own result."""
    from attrbench.methods import value_zeroing
    from attrbench.plugin import method as method_module

    adapter, method, sizes = ADAPTERS["tiny-bert"], METHODS.get(name), []
    module, attribute = (method_module, "decompose") if name == "alti" else (value_zeroing, "value_zeroing_batch")
    real = getattr(module, attribute)

    def small_device(adapter, texts, *args, **kwargs):
        size = len(texts) if name == "alti" else len(texts.lengths)
        sizes.append(size)
        if size > 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(adapter, texts, *args, **kwargs)

    monkeypatch.setattr(module, attribute, small_device)
    halved = method(adapter, TEXTS)
    assert sizes[0] == 3 and sizes.count(1) == 3
    monkeypatch.undo()
    for text, result in zip(TEXTS, halved):
        assert np.allclose(result.values, method(adapter, [text])[0].values, atol=1e-6)
