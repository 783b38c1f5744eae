"""Erasure metrics against brute force, closed forms, identities and hand computations: NAOPC's bounds and
renormalisation, ABPC, soft erasure, the perturbation operators and units."""
from itertools import permutations
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attrbench.errors import InputError
from attrbench.evals.naopc import NAOPC, beam_bounds, converged_beam_bounds, exact_bounds
from attrbench.evals.soft_erasure import at_retain, keep_probabilities, masked_probability
from attrbench.ops.perturb import Perturbations, answer, resolve_operator, target_probabilities
from attrbench.ops.targets import resolve_text
from attrbench.ops.tokens import special_mask
from attrbench.plugin.evaluation import EvalContext
from attrbench.runtime.workspace import Workspace
from attrbench.datasets.base import Example
from attrbench.registry import EVALS, METHODS


def _perturbations(adapter, text, target, operator="delete", unit="token"):
    ids = adapter.tokenizer(text)["input_ids"]
    return Perturbations(adapter, ids, resolve_text(adapter, ids, target), operator, unit, text)


def _aopc(perturbations, order, keep=False):
    return float(answer(perturbations.curve(list(order), keep)).mean())


@pytest.mark.parametrize("model,text,target", [
    ("tiny-gpt2", "the keys to the cabinet near", "contrast:are/is"),  # 6 tokens, no specials
    ("tiny-bert", "the keys to the [MASK] on", "contrast:table/house"),  # 5 words + [MASK] + [CLS]/[SEP]
])
def test_exact_bounds_equal_brute_force_and_serve_both_kinds(tiny_models, model, text, target):
    """One search gives the range of AOPC over every ordering, and sufficiency ranges over the same values
    (AOPC_suff(order) = AOPC_comp(reversed order))."""
    perturbations = _perturbations(tiny_models[(model, "float64")], text, target)
    assert 4 <= perturbations.m <= 6
    orders = list(permutations(range(perturbations.m)))
    comp = [_aopc(perturbations, o) for o in orders]
    suff = [_aopc(perturbations, o, keep=True) for o in orders]
    low, high = answer(exact_bounds(perturbations))
    assert low == pytest.approx(min(comp), abs=1e-12) and high == pytest.approx(max(comp), abs=1e-12)
    assert min(suff) == pytest.approx(low, abs=1e-12) and max(suff) == pytest.approx(high, abs=1e-12)
    search = exact_bounds(_perturbations(tiny_models[(model, "float64")], text, target))  # nothing memoised yet
    request = next(search)  # every subset in one request (full batches), not one round per subset size
    assert len(request.sequences) == 2 ** perturbations.m - 1  # the 2^m - 2 subsets and the unperturbed input
    with pytest.raises(StopIteration):
        search.send(target_probabilities(request.adapter, request.readout, request.sequences, request.rows))
    for o in orders[:10]:
        assert _aopc(perturbations, o, keep=True) == pytest.approx(_aopc(perturbations, o[::-1]), abs=1e-12)
    for width in (1, 2, 4):  # beam search finds orderings, so its bounds lie inside the exact range
        beam_low, beam_high = answer(beam_bounds(perturbations, width))
        assert low - 1e-12 <= beam_low <= beam_high <= high + 1e-12
    assert answer(beam_bounds(perturbations, 10 ** 4)) == pytest.approx((low, high), abs=1e-12)  # a full beam is exact
    *bounds, width, converged = answer(converged_beam_bounds(perturbations, 50))
    assert width in (5, 10, 20, 50) and low - 1e-12 <= bounds[0] <= bounds[1] <= high + 1e-12


def test_naopc_renormalises_when_a_method_beats_the_beam(tiny_models):
    """With greedy bounds a method can find a better ordering: the example's bounds widen to it, every method
    is renormalised from stored raw AOPCs, and no value leaves [0, 1]; with exact bounds nothing widens."""
    adapter = tiny_models[("tiny-gpt2", "float64")]
    perturbations = _perturbations(adapter, "a dog near the house sees the", "contrast:are/is")  # 7 tokens
    orders = list(permutations(range(perturbations.m)))
    exact_low, exact_high = answer(exact_bounds(perturbations))
    greedy = answer(beam_bounds(perturbations, 1))
    best = max(orders, key=lambda o: _aopc(perturbations, o))
    assert _aopc(perturbations, best) > greedy[1] + 1e-9, "this text needs an ordering that beats greedy"
    naopc = NAOPC().with_params(perturbation="delete", unit="token")
    shared = [{"m": perturbations.m, "bounds": list(greedy), "search": "beam", "beam_width": 1, "converged": False}]
    winner = {"aopc_comprehensiveness": _aopc(perturbations, best),
              "aopc_sufficiency": _aopc(perturbations, best, True)}
    other = {"aopc_comprehensiveness": _aopc(perturbations, orders[1]),
             "aopc_sufficiency": _aopc(perturbations, orders[1], True)}
    out = naopc.summarise({"winner": [winner], "other": [other]}, shared)
    assert out["winner"]["naopc_comprehensiveness"]["values"] == [pytest.approx(1.0)]
    assert out["winner"]["naopc_comprehensiveness"]["beam_bounds_broken"] == 1
    low, high = out["winner"]["naopc_comprehensiveness"]["bounds"][0]
    assert high == pytest.approx(winner["aopc_comprehensiveness"]) and exact_low - 1e-12 <= low
    for key in out:
        for metric in out[key].values():
            assert all(0.0 <= v <= 1.0 for v in metric["values"])
    exact = naopc.summarise({"other": [other]}, [{"m": perturbations.m, "bounds": [exact_low, exact_high],
                                                   "search": "exact"}])
    assert exact["other"]["naopc_comprehensiveness"]["bounds"][0] == [exact_low, exact_high]
    assert exact["other"]["naopc_comprehensiveness"]["beam_bounds_broken"] == 0
    # past an exact bound only by rounding (outputs batched differently from the search's): counted apart from beam
    # breaks, with its size; the bound stays (the other method's score unchanged, to the bit) and the score is 1
    exact_shared = [{"m": perturbations.m, "bounds": [exact_low, exact_high], "search": "exact"}]
    rounded = {**other, "aopc_comprehensiveness": exact_high + 2e-7}
    both = naopc.summarise({"rounded": [rounded], "other": [other]}, exact_shared)
    passed = both["rounded"]["naopc_comprehensiveness"]
    assert (passed["beam_bounds_broken"], passed["exact_bounds_passed"]) == (0, 1)
    assert passed["exact_bounds_excess"] == pytest.approx(2e-7) and passed["values"] == [1.0]
    assert passed["bounds"][0] == [exact_low, exact_high]
    assert both["other"]["naopc_comprehensiveness"]["values"] == exact["other"]["naopc_comprehensiveness"]["values"]
    # past it by more than rounding (a fault): widened alike, so that no score leaves [0, 1] and the excess shows
    faulty = {**other, "aopc_comprehensiveness": exact_high + 1e-3}
    wide = naopc.summarise({"faulty": [faulty], "other": [other]}, exact_shared)
    assert wide["faulty"]["naopc_comprehensiveness"]["bounds"][0][1] == pytest.approx(exact_high + 1e-3)
    assert wide["faulty"]["naopc_comprehensiveness"]["exact_bounds_excess"] == pytest.approx(1e-3)
    assert wide["other"]["naopc_comprehensiveness"]["values"] != exact["other"]["naopc_comprehensiveness"]["values"]
    assert out["winner"]["naopc_comprehensiveness"]["exact_bounds_passed"] == 0  # a beam break is not rounding


class _Toy(Perturbations):
    """p(target) = 1 − the summed weight of the removed features."""

    def __init__(self, weights):
        self.weights, self.features, self._p = weights, [[i] for i in range(len(weights))], {}

    def probabilities(self, sets):
        return np.array([1.0 - sum(self.weights[i] for i in s) for s in sets])
        yield  # a generator, as the real one


def test_abpc_is_comprehensiveness_minus_sufficiency_and_a_hand_computation(tiny_models):
    toy = _Toy([0.5, 0.3, 0.2])

    class Work:
        def perturbations(self, *_):
            return toy

    class Result:
        values = np.array([3.0, 1.0, 2.0])

    abpc = EVALS.get("abpc")
    # scores 3, 1, 2: most relevant first 0, 2, 1 -> drops 0.5, 0.7; least relevant first 1, 2, 0 -> 0.3, 0.5
    assert answer(abpc.score(Work(), Result()))["abpc"] == pytest.approx(((0.5 - 0.3) + (0.7 - 0.5)) / 2)
    perturbations = _perturbations(tiny_models[("tiny-gpt2", "float64")], "the keys to the cabinet near",
                                   "contrast:are/is")
    order = [3, 0, 5, 1, 4, 2]
    morf, lerf = (answer(perturbations.curve(o)) for o in (order, order[::-1]))
    assert (morf - lerf).mean() == pytest.approx(_aopc(perturbations, order) - _aopc(perturbations, order, True),
                                                 abs=1e-12)


def test_operators_and_word_units(tiny_models):
    """mask and pad replace in place (same length, same row), delete shortens; word units group a word's tokens."""
    adapter = tiny_models[("tiny-bert", "float64")]
    text = "the keys to the [MASK] on the table"
    masked = _perturbations(adapter, text, "contrast:is/are", "mask")
    ids, row = masked.sequence(frozenset({0, 1}))
    assert len(ids) == len(masked.ids) and row == masked.resolved.row
    assert ids[1] == ids[2] == adapter.tokenizer.mask_token_id
    deleted = _perturbations(adapter, text, "contrast:is/are", "delete")
    ids, row = deleted.sequence(frozenset({0, 1}))
    assert len(ids) == len(deleted.ids) - 2 and ids[row] == adapter.tokenizer.mask_token_id
    assert _perturbations(adapter, text, "contrast:is/are", "auto").operator == "mask"
    gpt2 = tiny_models[("tiny-gpt2", "float64")]
    assert _perturbations(gpt2, "the keys", "contrast:are/is", "auto").operator == "delete"
    without_mask = SimpleNamespace(name="gpt2-like", causal=True, tokenizer=SimpleNamespace(mask_token_id=None))
    with pytest.raises(InputError, match="no mask token.*delete or pad"):
        resolve_operator(without_mask, "mask")
    words = _perturbations(adapter, "the keys, to the [MASK]", "contrast:is/are", unit="word")
    assert words.features == [[1], [2], [3], [4], [5]]  # the tiny tokenizer splits punctuation into words
    scores = np.array([0.0, 0.1, 0.2, 0.9, 0.3, 0.4, 0.0, 0.0])
    assert words.order(scores)[0] == 2  # the comma's word, scored 0.9


def test_soft_normalised_metrics_follow_the_paper(tiny_models):
    """Soft-NC and Soft-NS from the raw drops and p(0) as in the authors' code; equal scores say nothing
    (min-max); the positive rescaling with equal scores keeps everything: soft sufficiency 0."""
    adapter = tiny_models[("tiny-bert", "float64")]
    ids = adapter.tokenizer("the keys to the [MASK] on the table")["input_ids"]
    resolved = resolve_text(adapter, ids, "contrast:is/are")
    special = special_mask(adapter, ids)
    assert keep_probabilities(np.full(len(ids), 0.7), special) is None
    q = keep_probabilities(np.full(len(ids), 0.7), special, "positive")
    assert np.all(q == 1.0)
    uniform = torch.from_numpy(np.random.default_rng(0).random((5, len(ids), 32)))
    with torch.no_grad():
        tokens = torch.tensor([ids])
        p_full = float(resolved.probability(adapter.model(input_ids=tokens).logits)[0])
    assert masked_probability(adapter, ids, resolved.row, resolved, q, uniform) == pytest.approx(p_full, abs=1e-12)
    soft = EVALS.get("soft_erasure")
    shared = [{"p_full": 0.9, "p_zero": 0.4}, {"p_full": 0.5, "p_zero": 0.6}]
    scored = {"m": [{"soft_comprehensiveness_raw": 0.3, "soft_sufficiency_raw": 0.1},
                    {"soft_comprehensiveness_raw": 0.2, "soft_sufficiency_raw": 0.0}]}
    out = soft.summarise(scored, shared)["m"]
    assert out["soft_nc"]["values"] == [pytest.approx(0.3 / 0.5), None]  # the second: zeroing raises p
    assert out["soft_ns"]["values"] == [pytest.approx((0.5 - 0.1) / 0.5), None]
    assert out["soft_comprehensiveness_raw"]["values"] == [0.3, 0.2]


def test_retained_soft_erasure_brings_every_method_to_one_expected_share_of_kept_dimensions():
    """π-Soft-NC's rescaling (Huang & Chan 2026): min(1, c·q) has mean π exactly, keeps the order and the ratios
    of q below the cap, and is refused (None) where too few q are positive for any c to reach π."""
    rng = np.random.default_rng(0)
    for m in (2, 3, 7, 30):
        for _ in range(50):
            q = rng.random(m)
            q = (q - q.min()) / np.ptp(q)  # minmax: one q is 0, one is 1
            for retain in (0.05, 0.3, 0.5, 0.8):
                kept = at_retain(q, retain)
                if kept is None:
                    assert np.count_nonzero(q) < retain * m
                    continue
                assert kept.mean() == pytest.approx(retain, abs=1e-12)
                assert kept.min() >= 0 and kept.max() <= 1
                assert np.all(np.diff(kept[np.argsort(q, kind="stable")]) >= -1e-15)  # the order is the method's
                below = (kept < 1) & (q > 0)
                ratios = kept[below] / q[below]
                assert np.allclose(ratios, ratios[0] if len(ratios) else 0)  # one scale below the cap
    assert at_retain(np.array([0.0, 0.0, 1.0]), 0.5) is None  # one positive q of three cannot average 0.5
    assert at_retain(np.array([1.0, 0.3, 0.0]), 2 / 3).mean() == pytest.approx(2 / 3)  # π = the positives' share
    with np.errstate(over="ignore"):
        assert at_retain(np.array([1.0, 5e-324, 0.0]), 0.5) is None  # a q too small to scale: no share, not a wrong one
    # two methods with the same order, one keeping far more: Soft-NS's masks differ, π-Soft-NS's keep the same share
    special = np.array([True, False, False, False, False, True])
    low, high = np.array([0, 0.0, 0.1, 0.2, 1.0, 0]), np.array([0, 0.0, 0.8, 0.9, 1.0, 0])
    assert keep_probabilities(low, special)[~special].mean() < 0.4 < keep_probabilities(high, special)[~special].mean()
    for scores in (low, high):
        q = keep_probabilities(scores, special, retain=0.5)
        assert q[~special].mean() == pytest.approx(0.5) and np.all(q[special] == 1)
    with pytest.raises(InputError, match="retain' is 1.0; it must be at most 0.99"):
        EVALS.get("pi_soft_erasure").with_params(retain=1.0)
    with pytest.raises(InputError, match="retain' must be a number, not nan"):
        EVALS.get("pi_soft_erasure").with_params(retain=float("nan"))


def test_retained_soft_erasure_scores_a_method_and_the_floor_through_soft_erasures_masks(tiny_models):
    """A method's π-soft drops are soft erasure's drops of its rescaled keep probabilities, on the same uniform
    draws; every draw of its random floor is rescaled too; the table names its metrics π-Soft-NC and π-Soft-NS."""
    adapter = tiny_models[("tiny-bert", "float64")]
    work = Workspace().work(adapter, Example("x", "the keys to the [MASK] on the table", "contrast:is/are"), 0,
                            "sva-generated")
    soft, retained = EVALS.get("soft_erasure").with_params(samples=3), EVALS.get("pi_soft_erasure").with_params(
        samples=3, retain=0.4)
    scores = SimpleNamespace(values=np.linspace(-1.0, 2.0, len(work.ids)) ** 2)
    special = special_mask(adapter, work.ids)
    p_full = answer(work.perturbations().full())
    q = keep_probabilities(scores.values, special, retain=0.4)
    drops = answer(retained.score(work, scores))
    uniform = soft._uniform(work)
    for key, keep in (("soft_sufficiency_raw", q), ("soft_comprehensiveness_raw", np.where(special, 1.0, 1.0 - q))):
        kept = masked_probability(adapter, work.ids, work.resolved.row, work.resolved, keep, uniform)
        assert drops[key] == pytest.approx(p_full - kept, abs=1e-12)
    assert drops != answer(soft.score(work, scores))
    floor = answer(retained.floor(work))
    draws = work.rng("floor:soft_erasure").random((retained.floor_draws, len(work.ids)))
    first = keep_probabilities(draws[0], special, retain=0.4)
    kept = masked_probability(adapter, work.ids, work.resolved.row, work.resolved, first, uniform)
    assert floor["draws"]["sufficiency"][0] == pytest.approx(p_full - kept, abs=1e-12)
    assert retained.metric_names["soft_nc"] == "π-Soft-NC" and retained.robustness == ()


def test_contrast_targets_are_scored_as_the_same_contrast(tiny_models):
    """A contrast A/B is scored as p(A | {A, B}) = sigmoid(logit A - logit B), what the methods explain."""
    adapter = tiny_models[("tiny-gpt2", "float64")]
    ids = adapter.tokenizer("the keys to the cabinet")["input_ids"]
    resolved = resolve_text(adapter, ids, "contrast:are/is")
    with torch.no_grad():
        logits = adapter.model(input_ids=torch.tensor([ids])).logits[0, -1]
    expected = torch.sigmoid(logits[resolved.index] - logits[resolved.contrast_index])
    perturbations = Perturbations(adapter, ids, resolved)
    assert answer(perturbations.full()) == pytest.approx(float(expected), abs=1e-12)


def test_bad_parameters_and_unreachable_embeddings_are_refused_before_work(tiny_models, monkeypatch):
    with pytest.raises(InputError, match="max_beam_width"):
        EVALS.get("naopc").with_params(max_beam_width=0)
    with pytest.raises(InputError, match="samples"):
        EVALS.get("soft_erasure").with_params(samples=0)
    with pytest.raises(InputError, match="perturbation"):
        EVALS.get("erasure_aopc").with_params(perturbation="erase")
    adapter = tiny_models[("tiny-gpt2", "float32")]
    monkeypatch.setattr(adapter.model, "get_input_embeddings", lambda: None)
    with pytest.raises(InputError, match="soft_erasure' cannot run on 'tiny-gpt2'.*erasure_aopc or naopc"):
        EVALS.get("soft_erasure").check(adapter, [], EvalContext("sva-generated"))


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_shared_requests_equal_one_method_at_a_time_and_send_fewer_sequences(tiny_models, model):
    """Every method and erasure metric of a sample share one batcher and memo of removal sets: the values equal
    each method run alone (own context, own batches), with fewer sequences sent through the model."""
    from attrbench.datasets.lookup import examples_for, sample
    from attrbench.runtime.context import RunContext

    adapter = tiny_models[(model, "float32")]
    examples = sample(examples_for(adapter, "sva-generated")[0], 3, 0)
    methods = [METHODS.get(m) for m in ("attn_rollout", "alti", "grad_l2", "blank_out")]
    evals = [EVALS.get("erasure_aopc"), EVALS.get("abpc"), EVALS.get("naopc").with_params(max_beam_width=1)]

    def scores(shared: bool):
        run, values, sent = RunContext(), {}, 0
        for method in methods:
            for evaluation in evals:
                context = EvalContext("sva-generated", shared=run if shared else RunContext())
                for r in evaluation(adapter, [method], examples, context):
                    values[(method.name, r["eval"], r["metric"])] = r["values"]
                sent += 0 if shared else context.shared.batcher.rows_sent
        return values, (run.batcher.rows_sent if shared else sent)

    alone, sent_alone = scores(shared=False)
    shared, sent_shared = scores(shared=True)
    assert alone.keys() == shared.keys()
    for key in alone:
        assert np.allclose(np.array(shared[key], dtype=float), np.array(alone[key], dtype=float), atol=1e-5,
                           equal_nan=True), key
    assert sent_shared < 0.6 * sent_alone
