"""Rollout-family input attributions, checked against straightforward recomputations."""
import numpy as np
import pytest
import torch

import attrbench
from attrbench.errors import InputError
from attrbench.methods.alti import ALTI_MAP
from attrbench.methods.globenc import GLOBENC_MAP
from attrbench.ops.aggregate import rollout, row_normalise
from attrbench.ops.targets import Target
from attrbench.registry import METHODS
from tests.conftest import TEXTS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)


def _alti_by_hand(parts, output):
    """Eq. 9-10 written out row by row from the kept parts."""
    n = parts.shape[0]
    contrib = np.zeros((n, n))
    for i in range(n):
        y = output[i]
        prox = [max(0.0, float(y.abs().sum() - (y - parts[i, j]).abs().sum())) for j in range(n)]
        contrib[i] = np.array(prox) / sum(prox)
    return contrib


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-llama"])
def test_alti_matches_hand_computation(tiny_models, name):
    adapter = tiny_models[(name, "float64")]
    dec = attrbench.decompose(adapter, TEXTS[:1], scopes=["atb"], derived=[ALTI_MAP], keep_parts=True)[0]
    per_layer = []
    for layer, parts in enumerate(dec.parts):
        atb_parts, atb_bias = parts["atb"]
        output = atb_parts.sum(1) + atb_bias  # the real output (completeness checked)
        per_layer.append(_alti_by_hand(atb_parts, output))
        assert np.abs(per_layer[-1] - dec.maps["alti"][layer]).max() < 1e-12
    scores = METHODS.get("alti")(adapter, TEXTS[:1])[0].values
    row = 0 if not adapter.causal else len(dec.tokens) - 1
    assert np.abs(rollout(np.array(per_layer))[row] - scores).max() < 1e-10


def test_globenc_is_ln2_of_attention_block(tiny_models):
    adapter = tiny_models[("tiny-bert", "float64")]
    dec = attrbench.decompose(adapter, TEXTS[:1], scopes=["atb"], derived=[GLOBENC_MAP], keep_parts=True)[0]
    batch = adapter.encode(TEXTS[:1])
    captures = adapter.capture(batch)
    for layer, parts in enumerate(dec.parts):
        atb_parts, _ = parts["atb"]
        ln2 = adapter.layers[layer].ln2
        z = captures[layer].ln2_in[0]
        s = torch.sqrt(z.var(-1, unbiased=False) + ln2.eps)
        centred = atb_parts - atb_parts.mean(-1, keepdim=True)
        by_hand = torch.linalg.vector_norm(centred / s[:, None, None] * ln2.gamma.detach(), dim=-1).numpy()
        assert np.abs(by_hand - dec.maps["globenc"][layer]).max() < 1e-12


def test_rollouts_are_distributions_over_inputs(tiny_models):
    for name in ("tiny-bert", "tiny-gpt2", "tiny-llama"):
        adapter = tiny_models[(name, "float64")]
        for method in ("attn_rollout", "norm_rollout", "alti", "globenc", "ff_rollout"):
            for result in METHODS.get(method)(adapter, TEXTS):
                assert abs(result.values.sum() - 1) < 1e-10 and (result.values >= 0).all()


def test_attention_rollout_by_hand(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    dec = attrbench.decompose(adapter, TEXTS[:1], scopes=["attn_w"])[0]
    n = len(dec.tokens)
    relevance = np.eye(n)
    for a in dec.maps["attn_w"]:
        a_hat = 0.5 * a + 0.5 * np.eye(n)
        relevance = (a_hat / a_hat.sum(1, keepdims=True)) @ relevance
    result = METHODS.get("attn_rollout")(adapter, TEXTS[:1])[0]
    assert result.meta["row"] == n - 1
    assert np.abs(relevance[-1] - result.values).max() < 1e-12


def test_ff_rollout_differs_from_norm_rollout(tiny_models):
    adapter = tiny_models[("tiny-bert", "float64")]
    ff, norm = (METHODS.get(m)(adapter, TEXTS[:1])[0].values for m in ("ff_rollout", "norm_rollout"))
    assert np.abs(ff - norm).max() > 1e-3


def test_targets_choose_the_row(tiny_models):
    bert = tiny_models[("tiny-bert", "float32")]
    masked = "the keys to the cabinet [MASK] on the table"
    result = METHODS.get("alti")(bert, [masked], target="mask")[0]
    assert result.tokens[result.meta["row"]] == "[MASK]"
    assert METHODS.get("alti")(bert, [masked], target="token:are")[0].meta["row"] == result.meta["row"]
    assert METHODS.get("alti")(bert, [masked], target="position:2")[0].meta["row"] == 2
    for bad in ("mask", "next", "position:99"):
        with pytest.raises(InputError):
            METHODS.get("alti")(bert, [TEXTS[1]], target=bad)
    with pytest.raises(InputError):
        Target.parse("class:x")
    with pytest.raises(InputError):
        METHODS.get("alti")(tiny_models[("tiny-gpt2", "float32")], [TEXTS[1]], target="mask")


def test_row_normalise_keeps_zero_rows():
    maps = np.array([[[0.0, 0.0], [1.0, 3.0]]])
    assert np.allclose(row_normalise(maps), [[[0, 0], [0.25, 0.75]]])
