"""Gradient baselines (captum) and blank-out erasure, checked against direct computations."""
import numpy as np
import pytest
import torch
import transformers as hf

from attrbench.errors import InputError
from attrbench.models import TransformerAdapter
from attrbench.models.tiny import _configs, randomise, tiny_tokenizer
from attrbench.registry import METHODS

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

MASKED = "the keys to the cabinet [MASK] on the table"


def _embedding_grad(adapter, text, score):
    """d score / d word-embedding output, by a plain forward hook and autograd."""
    ids = adapter.encode([text]).input_ids
    kept = {}

    def hook(module, args, out):
        out.retain_grad()
        kept["e"] = out

    handle = adapter.model.get_input_embeddings().register_forward_hook(hook)
    with torch.enable_grad():
        logits = adapter.model(input_ids=ids).logits
        score(logits).backward()
    handle.remove()
    return kept["e"].grad[0], kept["e"][0].detach()


@pytest.mark.parametrize("name,text,row", [("tiny-bert", MASKED, 6), ("tiny-llama", "the dogs run", -1)])
def test_grad_l2_and_grad_x_input_match_autograd(tiny_models, name, text, row):
    adapter = tiny_models[(name, "float64")]
    result = METHODS.get("grad_l2")(adapter, [text])[0]
    token = result.meta["index"]
    grad, emb = _embedding_grad(adapter, text, lambda logits: logits[0, row, token])
    norms = grad.norm(dim=-1).numpy()
    assert np.abs(result.values - norms / norms.sum()).max() < 1e-10
    gxi = METHODS.get("grad_x_input")(adapter, [text])[0].values
    assert np.abs(gxi - (grad * emb).sum(-1).numpy()).max() < 1e-10


def test_integrated_gradients_is_complete(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    result = METHODS.get("integrated_gradients")(adapter, ["the dogs run to the house"], target="token:are")[0]
    assert result.meta["convergence_delta"] < 1e-6 and result.meta["n_steps"] == 50
    # relative_delta: |sum of attributions - (F(x) - F(x'))| / |F(x) - F(x')|, F(x') from a plain forward pass
    few = METHODS.get("integrated_gradients").with_params(n_steps=2, max_steps=2)(  # a fixed 2-step rule
        adapter, ["the dogs run to the house"], target="token:are")[0]
    ids = adapter.encode(["the dogs run to the house"]).input_ids
    token = few.meta["index"]
    with torch.no_grad():
        gap = float(adapter.model(input_ids=ids).logits[0, -1, token]
                    - adapter.model(
                        input_ids=torch.full_like(ids, adapter.tokenizer.pad_token_id)).logits[0, -1, token])
    assert few.meta["relative_delta"] == pytest.approx(abs(few.values.sum() - gap) / abs(gap), rel=1e-9)
    assert few.meta["relative_delta"] > 1e-4 > result.meta["relative_delta"]


def test_classifier_targets():
    config = _configs()["tiny-bert"]
    config.num_labels = 3
    torch.manual_seed(0)
    model = randomise(hf.BertForSequenceClassification(config).eval())
    model.config._attn_implementation = "eager"
    adapter = TransformerAdapter(model, tiny_tokenizer(encoder=True), "tiny-bert-cls")
    with torch.no_grad():
        logits = model(**adapter.tokenizer(["a wonderful film"], return_tensors="pt")).logits
    auto = METHODS.get("grad_l2")(adapter, ["a wonderful film"])[0]
    assert auto.meta["index"] == int(logits.argmax()) and auto.meta["row"] == 0
    assert METHODS.get("blank_out")(adapter, ["a wonderful film"], target="class:2")[0].meta["index"] == 2
    for bad in ("class:3", "token:film"):
        with pytest.raises(InputError):
            METHODS.get("grad_l2")(adapter, ["a wonderful film"], target=bad)


def test_headless_model_and_multi_token_targets_are_refused(tiny_models):
    headless = TransformerAdapter(tiny_models[("tiny-bert", "float32")].model.bert, tiny_tokenizer(True), "bare")
    with pytest.raises(InputError, match="no output head"):
        METHODS.get("grad_l2")(headless, ["a film"])
    with pytest.raises(InputError, match="one token"):
        METHODS.get("blank_out")(tiny_models[("tiny-gpt2", "float32")], ["the dogs"], target="token:dogs run")


def test_signed_blank_out_is_the_signed_change_and_ranks_as_the_logit_difference(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    text, target = "The thing to keep in mind", "contrast:is/are"
    signed = METHODS.get("blank_out").with_params(signed=True)(adapter, [text], target=target)[0]
    unsigned = METHODS.get("blank_out")(adapter, [text], target=target)[0]
    ids = adapter.encode([text]).input_ids[0]
    good, bad = (adapter.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (" is", " are"))

    def difference(seq):  # logit(is) - logit(are) at the last position
        with torch.no_grad():
            logits = adapter.model(input_ids=seq[None]).logits[0, -1]
        return (logits[good] - logits[bad]).item()

    blanked = []
    for j in range(len(ids)):
        seq = ids.clone()
        seq[j] = signed.meta["blank_id"]
        blanked.append(difference(seq))
    sigmoid = lambda x: 1 / (1 + np.exp(-np.asarray(x)))  # noqa: E731 -- the contrast's readout
    by_hand = sigmoid(difference(ids)) - sigmoid(blanked)  # p(x) - p(x with token j blanked)
    assert (by_hand < 0).any() and (by_hand > 0).any()  # both signs occur, so |.| would be caught
    assert np.abs(signed.values - by_hand).max() < 1e-12
    assert np.array_equal(np.abs(signed.values), unsigned.values)
    # σ is monotone: the signed scores rank the tokens as the change of the logit difference does
    logit_change = difference(ids) - np.asarray(blanked)
    assert np.array_equal(np.argsort(signed.values), np.argsort(logit_change))
    assert signed.meta["p_target"] == pytest.approx(sigmoid(difference(ids)), abs=1e-12)


def test_blank_out_matches_one_forward_per_variant_signed_and_unsigned(tiny_models):
    """Each score by hand, one forward pass per blanked variant: |p(x) - p(x_j)|, and signed p(x) - p(x_j)."""
    adapter = tiny_models[("tiny-bert", "float64")]
    signed = METHODS.get("blank_out").with_params(signed=True)(adapter, [MASKED], target="token:are")[0]
    unsigned = METHODS.get("blank_out")(adapter, [MASKED], target="token:are")[0]
    ids = adapter.encode([MASKED]).input_ids[0]
    are = adapter.tokenizer.convert_tokens_to_ids("are")
    mask_pos = ids.tolist().index(adapter.tokenizer.mask_token_id)

    def p(seq):
        with torch.no_grad():
            return adapter.model(input_ids=seq[None]).logits[0, mask_pos].softmax(-1)[are].item()

    by_hand = []
    for j in range(len(ids)):
        blanked = ids.clone()
        blanked[j] = adapter.tokenizer.mask_token_id
        by_hand.append(p(ids) - p(blanked))
    assert np.abs(signed.values - by_hand).max() < 1e-12
    assert np.abs(unsigned.values - np.abs(by_hand)).max() < 1e-12
    assert unsigned.values[mask_pos] == 0  # blanking the mask with the mask changes nothing
    assert np.array_equal(np.abs(signed.values), unsigned.values) and (signed.values < 0).any()
