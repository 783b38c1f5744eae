"""The evaluation context the plugin layer declares: it computes with the shared work the runtime gives it."""
import pytest

from attrbench.datasets.base import Example
from attrbench.errors import InputError
from attrbench.plugin.evaluation import EvalContext, SharedWork
from attrbench.registry import METHODS
from attrbench.runtime.context import RunContext
from attrbench.runtime.workspace import Workspace


def test_a_context_without_shared_work_says_how_to_give_it(tiny_models):
    adapter, example = tiny_models[("tiny-gpt2", "float32")], Example("a", "dogs run", "auto")
    context = EvalContext("own", progress=False)
    with pytest.raises(InputError, match=r"shared=attrbench\.runtime\.workspace\.Workspace\(\)"):
        context.attributions(adapter, METHODS.get("grad_l2"), [example])
    with pytest.raises(InputError, match="attrbench.evaluate"):
        context.work(adapter, example)


def test_the_runtimes_workspaces_are_what_the_plugin_layer_asks_for(tiny_models):
    adapter, example = tiny_models[("tiny-gpt2", "float32")], Example("a", "dogs run", "auto")
    for shared in (Workspace(), RunContext()):
        assert all(callable(getattr(shared, name)) for name in ("attribution", "attributions", "work", "memo"))
        context = EvalContext("own", progress=False, shared=shared)
        [result] = context.attributions(adapter, METHODS.get("grad_l2"), [example])
        assert result.meta["cost"]["n_tokens"] == len(result.tokens)  # the runtime times what it computes
        assert context.work(adapter, example).attribution(METHODS.get("grad_l2")) is result  # memoised
        assert shared.batcher is not None
    assert SharedWork.__module__ == "attrbench.plugin.evaluation"
