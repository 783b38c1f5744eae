"""NAOPC bounds, soft erasure and ABPC against brute force, closed forms and hand computations."""
from itertools import permutations

import numpy as np
import pytest
import torch

from attrbench.errors import InputError
from attrbench.evals.abpc import abpc
from attrbench.evals.naopc import KINDS, beam_bounds, exact_bounds
from attrbench.evals.soft_erasure import keep_probabilities, soft_drops
from attrbench.ops.perturb import Deletions
from attrbench.ops.targets import resolve_text
from attrbench.ops.tokens import special_mask
from attrbench.plugin.evaluation import EvalContext
from attrbench.plugin.registry import EVALS


def _deletions(adapter, text, target):
    ids = adapter.tokenizer(text)["input_ids"]
    return ids, Deletions(adapter, ids, resolve_text(adapter, ids, target))


@pytest.mark.parametrize("model,text,target", [
    ("tiny-gpt2", "the keys to the cabinet near", "contrast:are/is"),  # 6 tokens, no specials
    ("tiny-bert", "the keys to the [MASK] on", "contrast:table/house"),  # 5 words + [MASK] + [CLS]/[SEP]
])
def test_exact_naopc_bounds_equal_brute_force_over_all_orderings(tiny_models, model, text, target):
    _, deletions = _deletions(tiny_models[(model, "float64")], text, target)
    assert 4 <= deletions.m <= 6
    for kind in KINDS:
        aopcs = [deletions.curve(list(order), keep=kind == "sufficiency").mean()
                 for order in permutations(range(deletions.m))]
        low, high = exact_bounds(deletions, kind)
        assert low == pytest.approx(min(aopcs), abs=1e-12) and high == pytest.approx(max(aopcs), abs=1e-12)
        for width in (1, 2, 4):  # beam search finds orderings, so its bounds lie inside the exact range
            beam_low, beam_high = beam_bounds(deletions, kind, width)
            assert low - 1e-12 <= beam_low <= beam_high <= high + 1e-12
        assert beam_bounds(deletions, kind, 10 ** 4) == pytest.approx((low, high), abs=1e-12)  # a full beam is exact


def test_soft_erasure_with_equal_scores_is_its_closed_form(tiny_models):
    """All-equal scores keep every dimension with q = 1: sufficiency 0, comprehensiveness the drop when every
    non-special embedding is zeroed."""
    adapter = tiny_models[("tiny-bert", "float64")]
    ids = adapter.tokenizer("the keys to the [MASK] on the table")["input_ids"]
    resolved = resolve_text(adapter, ids, "contrast:is/are")
    special = special_mask(adapter, ids)
    q = keep_probabilities(np.full(len(ids), 0.7), special)
    assert np.all(q == 1.0)
    comp, suff = soft_drops(adapter, ids, resolved, q, special, samples=5, seed=0)
    with torch.no_grad():
        tokens = torch.tensor([ids])
        embeds = adapter.model.get_input_embeddings()(tokens) * torch.from_numpy(special)[None, :, None]
        ones = torch.ones_like(tokens)
        p_full = resolved.probability(adapter.model(input_ids=tokens, attention_mask=ones).logits)[0]
        p_zeroed = resolved.probability(adapter.model(inputs_embeds=embeds, attention_mask=ones).logits)[0]
    assert suff == pytest.approx(0.0, abs=1e-12)
    assert comp == pytest.approx(float(p_full - p_zeroed), abs=1e-12) and abs(comp) > 1e-6
    assert keep_probabilities(np.array([0.0, -1.0, 0.0]), np.array([True, False, False])) is None  # no evidence


def test_soft_erasure_masks_are_seeded_and_shared(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    ids = adapter.tokenizer("the keys to the cabinet")["input_ids"]
    resolved = resolve_text(adapter, ids, "contrast:are/is")
    special = special_mask(adapter, ids)
    q = keep_probabilities(np.array([0.1, 0.9, 0.2, 0.0, 0.5]), special)
    first = soft_drops(adapter, ids, resolved, q, special, samples=8, seed=3)
    assert first == soft_drops(adapter, ids, resolved, q, special, samples=8, seed=3)
    assert first != soft_drops(adapter, ids, resolved, q, special, samples=8, seed=4)


class _Toy(Deletions):
    """p(target) = 1 − the summed weight of the deleted tokens."""

    def __init__(self, weights):
        self.weights, self.positions, self.p_full, self._p = weights, np.arange(len(weights)), 1.0, {}

    def probabilities(self, sets):
        return np.array([1.0 - sum(self.weights[i] for i in s) for s in sets])


def test_abpc_equals_a_hand_computation():
    toy = _Toy([0.5, 0.3, 0.2])
    # scores 3, 1, 2: most relevant first 0, 2, 1 -> drops 0.5, 0.7; least relevant first 1, 2, 0 -> 0.3, 0.5
    assert abpc(toy, np.array([3.0, 1.0, 2.0])) == pytest.approx(((0.5 - 0.3) + (0.7 - 0.5)) / 2)
    assert abpc(toy, np.array([1.0, 2.0, 3.0])) == pytest.approx(((0.2 - 0.5) + (0.5 - 0.8)) / 2)  # reversed: < 0
    assert abpc(_Toy([1.0]), np.array([1.0])) is None  # one token: no curve


def test_naopc_of_the_best_and_worst_ordering_is_one_and_zero(tiny_models):
    """A method whose scores produce the extreme orderings gets NAOPC 1 (best) and 0 (worst)."""
    adapter = tiny_models[("tiny-gpt2", "float64")]
    _, deletions = _deletions(adapter, "the keys to the cabinet", "contrast:are/is")
    orders = list(permutations(range(deletions.m)))
    aopcs = [deletions.curve(list(o)).mean() for o in orders]
    low, high = exact_bounds(deletions, "comprehensiveness")
    best = orders[int(np.argmax(aopcs))]
    scores = np.zeros(deletions.m)
    scores[list(best)] = np.arange(deletions.m, 0, -1)  # rank = the best ordering
    assert (deletions.curve(deletions.order(scores)).mean() - low) / (high - low) == pytest.approx(1.0)


def test_bad_parameters_and_unreachable_embeddings_are_refused_before_work(tiny_models, monkeypatch):
    with pytest.raises(InputError, match="beam_width"):
        EVALS.get("naopc").with_params(beam_width=0)
    with pytest.raises(InputError, match="samples"):
        EVALS.get("soft_erasure").with_params(samples=0)
    adapter = tiny_models[("tiny-gpt2", "float32")]
    monkeypatch.setattr(adapter.model, "get_input_embeddings", lambda: None)
    with pytest.raises(InputError, match="soft_erasure' cannot run on 'tiny-gpt2'.*erasure_aopc or naopc"):
        EVALS.get("soft_erasure").check(adapter, [], EvalContext("sva-generated"))


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_shared_deletions_equal_one_method_at_a_time_and_send_fewer_sequences(tiny_models, model, monkeypatch):
    """Every method and erasure metric of an example fill one memo of deleted sets; the scores equal those
    of each method alone (own context, own batches) to 1e-5, with fewer sequences through the model."""
    import attrbench.ops.perturb
    from attrbench.datasets.lookup import examples_for, sample
    from attrbench.plugin.registry import METHODS
    from attrbench.runtime.context import RunContext

    adapter = tiny_models[(model, "float32")]
    examples = sample(examples_for(adapter, "sva-generated")[0], 3, 0)
    methods = [METHODS.get(m) for m in ("attn_rollout", "alti", "grad_l2", "blank_out")]
    evals = [EVALS.get("erasure_aopc"), EVALS.get("abpc"), EVALS.get("naopc").with_params(beam_width=1)]
    sent = []
    real = attrbench.ops.perturb.target_probabilities
    monkeypatch.setattr(attrbench.ops.perturb, "target_probabilities",
                        lambda adapter, resolved, sequences, *a, **k: sent.append(len(sequences)) or real(
                            adapter, resolved, sequences, *a, **k))

    def scores(shared: bool):
        sent.clear()
        run, values = RunContext(), {}
        for method in methods:
            for evaluation in evals:
                context = EvalContext("sva-generated", shared=run if shared else RunContext())
                for r in evaluation(adapter, [method], examples, context):
                    values[(method.name, r["eval"], r["metric"])] = r["values"]
        return values, sum(sent)

    alone, sent_alone = scores(shared=False)
    shared, sent_shared = scores(shared=True)
    assert alone.keys() == shared.keys()
    for key in alone:
        assert np.allclose(np.array(shared[key], dtype=float), np.array(alone[key], dtype=float), atol=1e-5,
                           equal_nan=True), key
    assert sent_shared < 0.6 * sent_alone
