"""The random floor of each evaluation against brute force: the exact floors equal the mean over every ordering
(NAOPC, erasure AOPC, ABPC) or permutation (faithfulness_corr); the sampled ones lie within 4 Monte-Carlo standard
errors of the exact value; soft erasure's draws are a method's, and its metric is averaged over them."""
from itertools import permutations
from types import SimpleNamespace

import numpy as np
import pytest

from attrbench.datasets.base import Example
from attrbench.evals.soft_erasure import keep_probabilities, masked_probability
from attrbench.ops.perturb import MaskedEmbeddings, answer
from attrbench.ops.stats import spearman
from attrbench.ops.tokens import non_special, special_mask
from attrbench.plugin.evaluation import Evaluation
from attrbench.runtime.workspace import Workspace
from attrbench.registry import EVALS, METHODS

GPT2 = ("tiny-gpt2", "the keys to the cabinet near", "contrast:are/is")  # 6 tokens, no special one
BERT = ("tiny-bert", "the keys to the [MASK] on the table", "contrast:are/is")  # 7 words, [CLS] [MASK] [SEP]


def _work(adapter, text, target, seed=0):
    return Workspace().work(adapter, Example("x", text, target), seed, "sva-generated")


def _ordered(perturbations, order):
    """A method result whose scores rank the features in ``order`` (most relevant first)."""
    values = np.zeros(len(perturbations.ids))
    for rank, feature in enumerate(order):
        values[perturbations.features[feature][0]] = len(order) - rank
    return SimpleNamespace(values=values)


def _brute_force(evaluation, work, operator, unit):
    """Every field of ``evaluation``'s payload averaged over every ordering of the example's features."""
    perturbations = work.perturbations(operator, unit)
    payloads = [answer(evaluation.score(work, _ordered(perturbations, order)))
                for order in permutations(range(perturbations.m))]
    return {key: np.mean([p[key] for p in payloads], axis=0) for key in payloads[0] if key != "by_bin"} | {
        "by_bin": {kind: np.mean([p["by_bin"][kind] for p in payloads], axis=0) for kind in
                   ("comprehensiveness", "sufficiency")} if "by_bin" in payloads[0] else None}


@pytest.mark.parametrize("model,text,target,operator", [(*GPT2, "delete"), (*BERT, "mask")])
def test_the_exact_naopc_floor_is_the_mean_over_every_ordering(tiny_models, model, text, target, operator):
    """E[AOPC_comp] = E[AOPC_suff] over all m! orderings, from the bounds' own subsets; normalised by the bounds."""
    naopc = EVALS.get("naopc").with_params(perturbation=operator, unit="token")
    work = _work(tiny_models[(model, "float64")], text, target)
    floor = answer(naopc.floor(work))
    brute = _brute_force(naopc, work, operator, "token")
    assert floor["floor"]["exact"] and floor["floor"]["subsets"] == 2 ** work.perturbations(operator).m - 2
    for kind in ("comprehensiveness", "sufficiency"):
        assert floor[f"aopc_{kind}"] == pytest.approx(brute[f"aopc_{kind}"], abs=1e-12)
        assert floor["mc_se"][f"aopc_{kind}"] == 0.0
    shared = answer(naopc.shared(work))
    low, high = shared["bounds"]
    out = naopc.summarise_floor([floor], [shared], {})
    expected = (brute["aopc_comprehensiveness"] - low) / (high - low)
    assert out["naopc_comprehensiveness"]["values"] == [pytest.approx(expected, abs=1e-12)]
    assert out["naopc_sufficiency"]["values"] == out["naopc_comprehensiveness"]["values"]
    assert out["naopc_comprehensiveness"]["mc_se"] == [0.0] and out["naopc_comprehensiveness"]["floor"] == {
        "draws": naopc.floor_draws, "exact_examples": 1, "sampled_examples": 0, "how": naopc.floor_how}


@pytest.mark.parametrize("model,text,target,operator", [(*GPT2, "delete"), (*BERT, "mask")])
def test_the_exact_erasure_floor_is_the_mean_over_every_ordering(tiny_models, model, text, target, operator):
    """Each bin's expected drop over all m! orderings of score()'s own top-r sets; the AOPCs their mean."""
    erasure = EVALS.get("erasure_aopc").with_params(perturbation=operator)
    work = _work(tiny_models[(model, "float64")], text, target)
    floor = answer(erasure.floor(work))
    brute = _brute_force(erasure, work, operator, "token")
    assert floor["floor"]["exact"]
    for kind in ("comprehensiveness", "sufficiency"):
        assert floor[f"{kind}_aopc"] == pytest.approx(brute[f"{kind}_aopc"], abs=1e-12)
        assert floor["by_bin"][kind] == pytest.approx(brute["by_bin"][kind], abs=1e-12)
        assert floor["mc_se"][f"{kind}_aopc"] == 0.0
    out = erasure.summarise_floor([floor], [None], {})
    assert out["comprehensiveness_aopc"]["values"] == [floor["comprehensiveness_aopc"]]
    assert out["comprehensiveness_aopc"]["per_example"] == [floor["by_bin"]["comprehensiveness"]]
    one_word = _work(tiny_models[("tiny-gpt2", "float64")], "dogs", "contrast:are/is")  # deletion would leave nothing
    assert answer(erasure.with_params(perturbation="delete").floor(one_word))["comprehensiveness_aopc"] is None


@pytest.mark.parametrize("name,metrics,params", [
    ("naopc", ("aopc_comprehensiveness",), {"exact_up_to": 2}),
    ("erasure_aopc", ("comprehensiveness_aopc", "sufficiency_aopc"), {}),
])
def test_a_sampled_floor_lies_within_four_standard_errors_of_the_exact_one(tiny_models, monkeypatch, name, metrics,
                                                                          params):
    """Forced to sample (5 subsets per size, where every size has more), on an example small enough to enumerate:
    on each of 8 seeds the estimate is off the exact floor by less than 4 of its own standard errors."""
    evaluation = EVALS.get(name).with_params(perturbation="delete", **params)
    adapter = tiny_models[("tiny-gpt2", "float64")]
    exact = answer(evaluation.floor(_work(adapter, *GPT2[1:])))
    monkeypatch.setattr(Evaluation, "floor_draws", 5)
    assert evaluation.floor_key == "floor(draws=5)"  # fewer draws: other floor rows, the same method rows
    for seed in range(8):
        sampled = answer(evaluation.floor(_work(adapter, *GPT2[1:], seed=seed)))
        assert not sampled["floor"]["exact"]
        for metric in metrics:
            se = sampled["mc_se"][metric]
            assert 0 < se and abs(sampled[metric] - exact[metric]) < 4 * se, (seed, metric)


def test_the_abpc_floor_is_zero_as_every_ordering_averages(tiny_models):
    """E[ABPC] = 0 exactly (the reverse of a uniform ordering is uniform): the mean over all 720 orderings."""
    abpc = EVALS.get("abpc").with_params(perturbation="delete", unit="token")
    work = _work(tiny_models[("tiny-gpt2", "float64")], *GPT2[1:])
    brute = _brute_force(abpc, work, "delete", "token")
    assert brute["abpc"] == pytest.approx(0.0, abs=1e-12)
    assert abpc.floor(work) == {"abpc": 0.0, "mc_se": {"abpc": 0.0}, "floor": {"exact": True}}
    assert abpc.floor(_work(tiny_models[("tiny-gpt2", "float64")], "dogs", "contrast:are/is"))["abpc"] is None


@pytest.mark.parametrize("rank", ["scipy", "dense"])
def test_the_faithfulness_corr_floor_is_the_mean_over_every_permutation(tiny_models, rank):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    evaluation = EVALS.get("faithfulness_corr").with_params(reference_method="grad_l2", rank=rank)
    work = _work(adapter, *GPT2[1:])
    reference = work.attribution(METHODS.get("grad_l2")).values[non_special(adapter, work.ids)]
    mean = np.mean([spearman(np.array(p, dtype=float), reference, rank)
                    for p in permutations(range(len(reference)))])
    floor = evaluation.floor(work)
    assert floor["spearman"] == pytest.approx(mean, abs=1e-12) and floor["mc_se"] == {"spearman": 0.0}
    assert floor["reference"] == "grad_l2" and floor["rank"] == rank and floor["floor"]["exact"]


def test_soft_erasure_floor_draws_are_a_random_methods_and_its_metric_is_averaged_over_them(tiny_models, monkeypatch):
    """Each draw is a uniform score vector through the methods' masks, as a method would be scored (all draws in
    one request); Soft-NC / Soft-NS are the mean over draws of the clipped metric, not the metric of the mean;
    a small-draw estimate lies within 4 standard errors of a large one."""
    adapter = tiny_models[("tiny-bert", "float64")]
    soft = EVALS.get("soft_erasure").with_params(samples=4)
    work = _work(adapter, "the dog near the cars [MASK] here", "contrast:is/are")
    monkeypatch.setattr(Evaluation, "floor_draws", 200)
    large = answer(soft.floor(work))
    draws = work.rng("floor:soft_erasure").random((200, len(work.ids)))
    special = special_mask(adapter, work.ids)
    p_full = answer(work.perturbations().full())
    for r in (0, 117, 199):  # minmax: draw r's sufficiency is that of the mirrored draw 1 − u_r
        for u, field, flip in ((draws[r], "comprehensiveness", True), (1 - draws[r], "sufficiency", False)):
            q = keep_probabilities(u, special)
            kept = masked_probability(adapter, work.ids, work.resolved.row, work.resolved,
                                      np.where(special, 1.0, 1.0 - q) if flip else q, soft._uniform(work))
            assert large["draws"][field][r] == pytest.approx(p_full - kept, abs=1e-12)
    shared = answer(soft.shared(work))
    scale = shared["p_full"] - shared["p_zero"]
    assert scale > 0
    out = soft.summarise_floor([large], [shared], {})
    nc = np.clip(np.maximum(0, large["draws"]["comprehensiveness"]) / scale, 0, 1)
    assert out["soft_nc"]["values"] == [pytest.approx(nc.mean())]
    assert out["soft_nc"]["mc_se"] == [pytest.approx(nc.std(ddof=1) / np.sqrt(200))]
    assert out["soft_comprehensiveness_raw"]["mc_se"] == [large["mc_se"]["soft_comprehensiveness_raw"]]
    # the clip is not linear: two draws, one below 0, average to 0.4, where the mean drop would give 0.2
    toy = {"soft_comprehensiveness_raw": 0.1, "soft_sufficiency_raw": 0.1, "mc_se": {},
           "draws": {"comprehensiveness": [-0.2, 0.4], "sufficiency": [0.1, 0.1]}, "floor": {"exact": False}}
    toy_out = soft.summarise_floor([toy], [{"p_full": 0.9, "p_zero": 0.4}], {})
    assert toy_out["soft_nc"]["values"] == [pytest.approx(0.4)] and toy_out["soft_nc"]["mc_se"] == [pytest.approx(0.4)]
    monkeypatch.setattr(Evaluation, "floor_draws", 12)
    small = answer(soft.floor(_work(adapter, "the dog near the cars [MASK] here", "contrast:is/are")))
    small_out = soft.summarise_floor([small], [shared], {})
    for metric in ("soft_nc", "soft_ns", "soft_comprehensiveness_raw", "soft_sufficiency_raw"):
        a, b = out[metric], small_out[metric]
        assert b["mc_se"][0] > 0
        assert abs(a["values"][0] - b["values"][0]) < 4 * np.hypot(a["mc_se"][0], b["mc_se"][0]), metric


def test_the_minmax_soft_floor_takes_half_the_inputs_and_is_marked_mirrored(tiny_models):
    """minmax(1 − u) = 1 − minmax(u) on the non-special tokens (specials kept), so the sufficiency masks of the
    mirrored draws are the comprehensiveness masks: one request of samples · draws inputs, not twice as many as the
    sigmoid floor's (where 1 − u gives no such identity), and a key of its own; pi_soft_erasure is not mirrored."""
    adapter = tiny_models[("tiny-bert", "float64")]
    work = _work(adapter, "the dog near the cars [MASK] here", "contrast:is/are")
    special = special_mask(adapter, work.ids)
    rng = np.random.default_rng(0)
    for u in rng.random((1000, len(work.ids))):
        up, down = keep_probabilities(u, special), keep_probabilities(1 - u, special)
        assert np.abs(down[~special] - (1 - up[~special])).max() < 1e-12 and (down[special] == 1).all()

    def sent(evaluation):
        """The masked model inputs the floor asks for, and its payload."""
        requests = []

        def recorded(generator):
            values = None
            try:
                while True:
                    request = generator.send(values)
                    requests.append(request)
                    values = yield request
            except StopIteration as stop:
                return stop.value

        payload = answer(recorded(evaluation.floor(work)))
        return sum(r.samples for r in requests if isinstance(r, MaskedEmbeddings)), payload

    minmax = EVALS.get("soft_erasure").with_params(samples=4)
    sigmoid = EVALS.get("soft_erasure").with_params(samples=4, importance="sigmoid")
    (half, mirrored), (whole, plain) = sent(minmax), sent(sigmoid)
    assert (half, whole) == (4 * minmax.floor_draws, 2 * 4 * sigmoid.floor_draws)
    assert mirrored["draws"]["sufficiency"] == mirrored["draws"]["comprehensiveness"] and mirrored["floor"]["mirrored"]
    assert plain["draws"]["sufficiency"] != plain["draws"]["comprehensiveness"] and not plain["floor"]["mirrored"]
    assert (minmax.floor_key, sigmoid.floor_key) == ("floor(draws=100,mirrored)", "floor(draws=100)")
    assert EVALS.get("pi_soft_erasure").floor_key == "floor(draws=100)" and "mirror" in minmax.floor_how
