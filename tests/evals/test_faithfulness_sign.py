"""faithfulness_corr's yardstick: the signed leave-one-out for a language model's logit and contrast targets, the
paper's unsigned references for classes; fixed when a suite is planned, named in every result and in the row keys."""
import numpy as np
import pytest

from attrbench.datasets.lookup import examples_for, sample
from attrbench.errors import InputError
from attrbench.plugin.internal import non_special
from attrbench.plugin.evaluation import EvalContext
from attrbench.registry import EVALS, METHODS
from attrbench.runtime.options import RunOptions
from attrbench.runtime.pipeline import Pipeline, evaluate
from attrbench.runtime.plan import Suite
from attrbench.runtime.workspace import Workspace
from attrbench.ops.stats import spearman

STORED_KEY = "faithfulness_corr(rank=scipy,reference_method=auto)"  # its rows' key before reference_sign existed
SIGNED_KEY = "faithfulness_corr(rank=scipy,reference_method=auto,reference_sign=signed)"


def planned(adapter, dataset, eval_params=None, n=3):
    """faithfulness_corr as a suite's plan fixes it (what its rows are keyed by)."""
    pipeline = Pipeline(RunOptions().with_(dtype=str(adapter.dtype).replace("torch.", ""), device="cpu",
                                           progress=False))
    pipeline.add_adapter(adapter)
    [plan] = pipeline.plan([Suite(adapter.name, dataset, ("faithfulness_corr",), ("alti",), n,
                                  eval_params={"faithfulness_corr": eval_params or {}})])
    return plan.scoring[0][0]


def by_method(records):
    return {r["method"]: r for r in records if r["eval"] == "faithfulness_corr"}


def test_a_contrast_target_gets_the_signed_reference_by_default(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    assert planned(adapter, "sva-generated").key == SIGNED_KEY
    records = by_method(evaluate(adapter, ["grad_x_input", "blank_out"], ["faithfulness_corr"], "sva-generated",
                                 n=4, seed=1, progress=False))
    gxi = records["grad_x_input"]
    assert gxi["reference"] == "blank_out(signed=True)" and gxi["eval_params"]["reference_sign"] == "signed"
    assert gxi["published"] is None  # the paper's numbers are for its unsigned reference
    # by hand: Spearman with p(x) - p(x with token j blanked), not with its absolute value
    example = sample(examples_for(adapter, "sva-generated")[0], 4, 1)[0]
    assert gxi["example_ids"][0] == example.id
    ids = adapter.tokenizer(example.text)["input_ids"]
    keep = non_special(adapter, ids)
    scores = METHODS.get("grad_x_input")(adapter, [example.text], target=example.target)[0].values[keep]
    signed = METHODS.get("blank_out").with_params(signed=True)(adapter, [example.text], target=example.target)[0]
    assert gxi["values"][0] == pytest.approx(spearman(scores, signed.values[keep]))
    # the ranked (unsigned) blank_out is scored against it, not taken for it
    assert records["blank_out"]["reference"] == "blank_out(signed=True)"
    unsigned = by_method(evaluate(adapter, ["grad_x_input", "blank_out"], ["faithfulness_corr"], "sva-generated",
                                  n=4, seed=1, progress=False, eval_params={
                                      "faithfulness_corr": {"reference_sign": "unsigned"}}))
    assert unsigned["grad_x_input"]["reference"] == "blank_out"
    assert unsigned["blank_out"]["mean"] == pytest.approx(1.0)  # its own reference
    assert gxi["values"] != unsigned["grad_x_input"]["values"]  # the sign changes what is measured
    assert gxi["values"][0] != pytest.approx(spearman(scores, np.abs(signed.values[keep])))


def test_class_targets_keep_the_papers_unsigned_reference_and_their_keys(task_models):
    sva, sst2 = task_models["sva"], task_models["sst2"]
    for adapter, dataset in ((sva, "sva-linzen"), (sst2, "sst2")):
        evaluation = planned(adapter, dataset)
        assert evaluation.reference_sign == "unsigned" and evaluation.key == STORED_KEY
    alti = by_method(evaluate(sva, ["alti"], ["faithfulness_corr"], "sva-linzen", n=3, progress=False))["alti"]
    assert alti["reference"] == "blank_out" and alti["eval_params"]["reference_sign"] == "unsigned"
    assert alti["published"]["value"] == 0.40  # Ferrando et al. 2022, Table 2
    example = sample(examples_for(sva, "sva-linzen")[0], 3, 0)[0]
    assert alti["example_ids"][0] == example.id
    keep = non_special(sva, sva.tokenizer(example.text)["input_ids"])
    scores = METHODS.get("alti")(sva, [example.text], target=example.target)[0].values[keep]
    reference = METHODS.get("blank_out")(sva, [example.text], target=example.target)[0].values[keep]
    assert alti["values"][0] == pytest.approx(spearman(scores, reference))


def test_an_explicit_sign_overrides_and_names_its_key(task_models, tiny_models):
    gpt2, probe = tiny_models[("tiny-gpt2", "float32")], task_models["sva"]
    assert planned(gpt2, "sva-generated", {"reference_sign": "unsigned"}).key == STORED_KEY
    signed = planned(probe, "sva-linzen", {"reference_sign": "signed"})
    assert signed.key == SIGNED_KEY
    alti = by_method(evaluate(probe, ["alti"], ["faithfulness_corr"], "sva-linzen", n=2, progress=False,
                              eval_params={"faithfulness_corr": {"reference_sign": "signed"}}))["alti"]
    assert alti["reference"] == "blank_out(signed=True)" and alti["published"] is None
    # a reference with one form: auto takes it as it is (the legacy key), an explicit signed is refused up front
    grad = planned(gpt2, "sva-generated", {"reference_method": "grad_l2"})
    assert grad.key == "faithfulness_corr(rank=scipy,reference_method=grad_l2)"
    with pytest.raises(InputError, match="reference 'grad_l2' has no signed form"):
        planned(gpt2, "sva-generated", {"reference_method": "grad_l2", "reference_sign": "signed"})
    with pytest.raises(InputError, match="'reference_sign' is 'both'; allowed: auto, signed, unsigned"):
        EVALS.get("faithfulness_corr").with_params(reference_sign="both")


def test_auto_left_unfixed_still_reads_the_model(tiny_models):
    """Called directly (no plan), ``auto`` follows the model's head at scoring time, as a plan would fix it."""
    adapter = tiny_models[("tiny-gpt2", "float32")]
    examples = sample(examples_for(adapter, "sva-generated")[0], 2, 0)
    evaluation = EVALS.get("faithfulness_corr")
    assert evaluation.reference_sign == "auto"
    [record] = evaluation(adapter, [METHODS.get("alti")], examples, EvalContext("sva-generated", progress=False,
                                                                                  shared=Workspace()))
    assert record["reference"] == "blank_out(signed=True)"
    assert evaluation.resolve(adapter, "sva-generated", examples).reference_sign == "signed"
