"""Value Zeroing equals inseq's implementation (decoders) and a by-hand recomputation (encoders).

inseq 0.7.1 (installed --no-deps in the test extra) does not run on transformers 5 as shipped, for
two reasons the test patches and nothing else:
1. its layer hook rebuilds the layer output as a tuple, but transformers 5 decoder layers return a
   tensor;
2. it finds the values by tracing a local variable named in its model table ("value" for GPT-2),
   which transformers 5 renamed to "value_states".

inseq supports decoder-only and encoder-decoder models, not encoders. For BERT-style encoders the
maps are recomputed by hand from the paper's definition. Each layer runs on its real input through
the model's own submodules, one zeroed token at a time, with no hooks and no batching.
"""
import numpy as np
import pytest
import torch

import attrbench.methods.value_zeroing as value_zeroing_module
from attrbench.methods.value_zeroing import value_zeroing_batch, value_zeroing_maps
from attrbench.models import load_model
from attrbench.ops.aggregate import rollout
from attrbench.registry import METHODS
from tests.precision import gamma

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are on the table"


def _inseq_rows(adapter, ids):
    """inseq's value-zeroing rows of the last token of every prefix of ``ids``: (n - 1, layers, n)."""
    import inseq
    from inseq.attr.feat.ops import value_zeroing as inseq_vz

    def patch_hook(self, block_idx, hidden_state_idx=0):  # fix 1: tensor outputs
        def hook(module, args, output):
            states = output if isinstance(output, torch.Tensor) else output[hidden_state_idx]
            self.corrupted_block_output_states[block_idx] = states.clone().float().detach().cpu()
            clean = self.clean_block_output_states[block_idx].to(states.dtype)
            return clean if isinstance(output, torch.Tensor) else (*output[:hidden_state_idx], clean,
                                                                   *output[hidden_state_idx + 1:])
        return hook

    original = inseq_vz.ValueZeroing.get_states_extract_and_patch_hook
    inseq_vz.ValueZeroing.get_states_extract_and_patch_hook = patch_hook
    try:
        model = inseq.load_model(adapter.model, "value_zeroing", tokenizer=adapter.tokenizer)
        model.config.value_vector = "value_states"  # fix 2
        rows = []
        for end in range(2, len(ids) + 1):  # inseq explains the token after the prefix ids[:end]
            prefix = adapter.tokenizer.decode(ids[:end])
            out = model.attribute(prefix, generation_args={"max_new_tokens": 1}, show_progress=False)
            scores = out.sequence_attributions[0].target_attributions[:end, 0].T  # (layers, end)
            rows.append(np.pad(scores.double().numpy(), ((0, 0), (0, len(ids) - end))))
        return np.stack(rows)
    finally:
        inseq_vz.ValueZeroing.get_states_extract_and_patch_hook = original


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-opt"])
def test_equals_inseq_on_decoders(name, monkeypatch):
    adapter = load_model(name, "float64")
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    ours = value_zeroing_maps(adapter, ids, threshold=1e-5)  # (layers, n, n); inseq's min_score_threshold
    theirs = _inseq_rows(adapter, ids)
    ours_rows = np.stack([ours[:, end - 1] for end in range(2, len(ids) + 1)])
    assert theirs.shape == ours_rows.shape
    # inseq takes the cosine in float32: each distance 1 - cos of d-wide states is off by up to delta = gamma_{d+2}
    # (the dot product and the two norms), and a row normalised by its sum S carries (1 + n s) delta / S on a share s
    monkeypatch.setattr(value_zeroing_module, "safe_divide", lambda a, b: a)  # the raw distances, unnormalised
    sums = value_zeroing_maps(adapter, ids, threshold=1e-5).sum(-1, keepdims=True)
    sums = np.stack([sums[:, end - 1] for end in range(2, len(ids) + 1)])
    delta = gamma(adapter.model.config.hidden_size + 2, torch.float32)
    bound = (1 + len(ids) * ours_rows) * delta / np.where(sums > 0, sums, np.inf)
    assert np.all(np.abs(ours_rows - theirs) <= bound), float((np.abs(ours_rows - theirs) - bound).max())


@torch.no_grad()
def _by_hand(adapter, ids):
    """The paper's definition, layer by layer, one zeroed token at a time, through HF's own submodules."""
    model = adapter.model.base_model
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    n, maps = len(ids), []
    for layer, spec in enumerate(adapter.layers):
        x, probs = out.hidden_states[layer], out.attentions[layer]  # real input, (1, H, n, n)
        real = out.hidden_states[layer + 1][0]
        heads, head_dim = spec.n_heads, spec.head_dim
        rows = torch.zeros(n, n, dtype=x.dtype)
        for j in range(n):
            values = spec.value_module(x).view(1, n, heads, head_dim).transpose(1, 2).clone()
            values[:, :, j] = 0
            context = (probs @ values).transpose(1, 2).reshape(1, n, heads * head_dim)
            if adapter.model.config.model_type == "distilbert":
                block = spec.layer
                mixed = block.sa_layer_norm(block.attention.out_lin(context) + x)
                new = block.output_layer_norm(block.ffn(mixed) + mixed)
            else:
                block = spec.layer
                mixed = block.attention.output(context, x)
                new = block.output(block.intermediate(mixed), mixed)
            rows[:, j] = 1 - torch.nn.functional.cosine_similarity(real, new[0], dim=-1)
        maps.append((rows / rows.sum(-1, keepdim=True)).numpy())
    return np.stack(maps)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-distilbert"])
def test_equals_by_hand_recomputation_on_encoders(name):
    adapter = load_model(name, "float64")
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    np.testing.assert_allclose(value_zeroing_maps(adapter, ids), _by_hand(adapter, ids), atol=1e-10)


def test_scores_are_the_rollout_at_the_target_row_and_chunking_changes_nothing():
    adapter = load_model("tiny-bert", "float64")
    ids = adapter.encode([TEXT]).input_ids[0].tolist()
    maps = value_zeroing_maps(adapter, ids)
    np.testing.assert_allclose(value_zeroing_maps(adapter, ids, batch_size=3), maps, atol=1e-12)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-12)
    result = METHODS.get("value_zeroing")(adapter, [TEXT])[0]
    np.testing.assert_allclose(result.values, rollout(maps)[0], atol=1e-12)  # the [CLS] row


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-opt", "tiny-llama"])
def test_pooled_passes_of_several_texts_equal_each_text_alone(name):
    """Passes that straddle texts (5 copies each, texts of different lengths, padded) give each text its own maps."""
    adapter = load_model(name, "float64")
    texts = [TEXT, "dogs run", "the cabinet near the kitchen table"]
    batch = adapter.encode(texts)
    assert len(set(batch.lengths)) == 3
    pooled = value_zeroing_batch(adapter, batch, batch_size=5)
    # a model that softmaxes in float32 even in float64 (OPT, Llama in transformers) is float32-exact there: a padded
    # pass's float64 scores may round to other float32 values than the text's alone (CPU-dependent)
    atol = 1e-6 if adapter.architecture.float32_internals else 1e-10
    for b, n in enumerate(batch.lengths):
        np.testing.assert_allclose(pooled[b], value_zeroing_maps(adapter, batch.input_ids[b, :n].tolist()),
                                   atol=atol)
