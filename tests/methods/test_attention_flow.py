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
