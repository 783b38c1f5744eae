"""The model-randomisation check: the randomised copies (what is re-initialised, seeded, the trained model untouched),
the target fixed on the trained model, and ρ = 1 for a method that does not read the weights."""
import numpy as np
import pytest
import torch

from attrbench.errors import InputError
from attrbench.evals.randomisation import Randomisation, fixed_target, randomised, reinitialised
from attrbench.ops.targets import resolve_text
from attrbench.plugin import EvalContext, Example, Method, MethodResult
from attrbench.registry import EVALS, METHODS
from attrbench.runtime.context import RunContext
from attrbench.runtime.external import Precomputed
from attrbench.runtime.pipeline import evaluate

CAUSAL = ["the keys to the cabinet are", "a wonderful film about the dogs", "the boys see the cat and"]
MASKED = ["the keys to the cabinet [MASK] on the table", "a wonderful [MASK] about the dogs"]


class TokenLengths(Method):
    """Scores that read the text only: each token's length."""

    name, family, output = "token_lengths", "test", "scores"

    def run(self, adapter, texts, *, targets, layers, truncate):
        batch = adapter.encode(texts, truncate=truncate)
        return [MethodResult(self.name, adapter.name, tokens, np.array([len(t) for t in tokens], dtype=float), None)
                for tokens in batch.tokens]


def state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def call(adapter, methods, texts, target="auto"):
    examples = [Example(f"e{k}", text, target) for k, text in enumerate(texts)]
    context = EvalContext("test", shared=RunContext(), progress=False)
    records = EVALS.get("randomisation")(adapter, methods, examples, context)
    return {(r["method"], r["metric"]): r for r in records}, context


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_runs_through_the_registry_and_leaves_the_trained_model_as_it_was(tiny_models, model):
    adapter = tiny_models[(model, "float32")]
    before, tied = state(adapter.model), adapter.model.get_output_embeddings().weight
    by, context = call(adapter, [METHODS.get("grad_l2"), METHODS.get("attn_rollout"), TokenLengths()],
                       CAUSAL if adapter.causal else MASKED)
    after = adapter.model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert adapter.model.get_output_embeddings().weight is tied is adapter.model.get_input_embeddings().weight
    assert set(by) == {(m, f"spearman_{level}") for m in ("grad_l2", "attn_rollout", "token_lengths")
                       for level in ("top", "all")}
    n = 3 if adapter.causal else 2
    for record in by.values():
        assert len(record["values"]) == n and record["higher_is_better"] is False and record["threshold"] == 0.5
    assert by[("token_lengths", "spearman_top")]["values"] == pytest.approx([1.0] * n)
    assert by[("token_lengths", "spearman_all")]["values"] == pytest.approx([1.0] * n)
    assert min(by[("grad_l2", "spearman_all")]["values"]) < 0.99  # the gradient reads the weights
    names = {r.model for r in context.shared._attributions.values()}
    assert names == {model, f"{model}@randomised(top=1,seed=0)", f"{model}@randomised(top=2,seed=0)"}
    evaluation = EVALS.get("randomisation")
    assert not evaluation.ranked and evaluation.primary_metric == "spearman_all" and evaluation.family == "sanity"
    assert Randomisation.insensitive(by[("token_lengths", "spearman_all")]["values"]) is True


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert", "tiny-llama", "tiny-distilbert"])
def test_the_copy_differs_in_the_head_and_top_blocks_only_and_is_seeded(tiny_models, model):
    adapter = tiny_models[(model, "float32")]
    original = state(adapter.model)
    for blocks in (1, adapter.n_layers):
        copy = randomised(adapter, blocks, seed=0)
        chosen = reinitialised(adapter, blocks)
        assert sum(name.split(".")[-1].isdigit() for name in chosen) == blocks  # the blocks, and the head
        changed = {k for k, v in copy.model.state_dict().items() if not torch.equal(v, original[k])}
        assert changed == {k for k in original if any(k.startswith(c + ".") for c in chosen)}
        assert any(k.endswith("embeddings.weight") or "wte" in k or "embed_tokens" in k for k in original
                   if k not in changed)  # the input embeddings are kept
        again, other = randomised(adapter, blocks, seed=0), randomised(adapter, blocks, seed=1)
        assert all(torch.equal(v, again.model.state_dict()[k]) for k, v in copy.model.state_dict().items())
        assert any(not torch.equal(v, other.model.state_dict()[k]) for k, v in copy.model.state_dict().items())
        assert copy.weights_sha256 == again.weights_sha256 != other.weights_sha256
        assert copy.weights_sha256 != adapter.weights_sha256 and copy.name == f"{model}@randomised(top={blocks},seed=0)"
        # drawn in float32 on the CPU, then cast: the float64 copy is the float32 one in float64
        wide = randomised(tiny_models[(model, "float64")], blocks, seed=0)
        assert all(torch.equal(v.double(), wide.model.state_dict()[k]) for k, v in copy.model.state_dict().items())
    assert all(torch.equal(v, original[k]) for k, v in adapter.model.state_dict().items())


def test_a_predicted_target_is_fixed_on_the_trained_model(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    destroyed, moved = randomised(adapter, adapter.n_layers, seed=0), 0
    for text in CAUSAL:
        ids = adapter.tokenizer(text)["input_ids"]
        trained = resolve_text(adapter, ids, "auto")
        fixed = fixed_target(adapter, ids, "auto", trained)
        assert fixed.startswith("token:")
        again = resolve_text(destroyed, ids, fixed)
        assert (again.row, again.index) == (trained.row, trained.index)
        moved += resolve_text(destroyed, ids, "auto").index != trained.index
    assert moved  # "auto" would have explained another token on the randomised model
    ids = adapter.tokenizer("the dogs")["input_ids"]
    assert fixed_target(adapter, ids, "contrast:are/is", resolve_text(adapter, ids, "contrast:are/is")) \
        == "contrast:are/is"
    assert fixed_target(adapter, ids, "position:0", resolve_text(adapter, ids, "position:0")) is None


def test_runs_in_a_suite_and_declines_attributions_from_another_tool(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    records = evaluate(adapter, ["grad_l2", "random"], ["randomisation"], "sva-generated", n=2, progress=False)
    by = {(r["method"], r["metric"]): r for r in records}
    assert by[("random", "spearman_all")]["values"] == pytest.approx([1.0, 1.0])  # seeded by the text alone
    grad = by[("grad_l2", "spearman_all")]
    assert all(v is not None for v in grad["values"]) and grad["threshold"] == 0.5
    external = Precomputed("other_tool", {})
    with pytest.raises(InputError, match="computed by another tool"):
        call(adapter, [external], CAUSAL[:1])


def test_weights_loaded_from_a_folder_are_re_initialised_too(tiny_models, tmp_path):
    from attrbench.models import load_model

    source = tiny_models[("tiny-gpt2", "float32")]
    source.model.save_pretrained(tmp_path)
    source.tokenizer.save_pretrained(tmp_path)
    adapter = load_model(str(tmp_path))  # transformers marks loaded weights initialised
    original, chosen = state(adapter.model), reinitialised(adapter, 1)
    copy = randomised(adapter, 1, seed=0)
    changed = {k for k, v in copy.model.state_dict().items() if not torch.equal(v, original[k])}
    assert changed == {k for k in original if any(k.startswith(c + ".") for c in chosen)}
