"""The workspace the evaluations share: each method's untimed warm-up call, on a short stand-in example."""
import numpy as np
import pytest

from attrbench.datasets.base import Example
from attrbench.methods.grad_l2 import GradL2
from attrbench.runtime.workspace import Workspace


class Recording(GradL2):
    """grad_l2, recording the texts it is called on; it refuses the text ``refuse``."""

    def __init__(self, refuse=None, **params):
        super().__init__(**params)
        self.texts, self.refuse = [], refuse

    def __call__(self, adapter, texts, **kwargs):
        self.texts.append(texts[0])
        if texts[0] == self.refuse:
            raise ValueError("not this one")
        return super().__call__(adapter, texts, **kwargs)


EXAMPLES = [Example("a", "the keys to the cabinet are on the table .", "auto"), Example("b", "dogs run", "auto"),
            Example("c", "a wonderful film", "auto")]


def test_the_warm_up_runs_on_the_stand_in_and_changes_no_result(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    plain, method = Workspace(), Recording()
    expected = plain.attribution(adapter, method, EXAMPLES[0])
    assert method.texts == [EXAMPLES[0].text] * 2  # no stand-in named: the warm-up is the example itself

    workspace, method = Workspace(), Recording()
    workspace.warm_up_on(adapter, EXAMPLES[1])
    result = workspace.attribution(adapter, method, EXAMPLES[0])
    workspace.attribution(adapter, method, EXAMPLES[2])
    assert method.texts == ["dogs run", EXAMPLES[0].text, EXAMPLES[2].text]  # one warm-up per method and model
    np.testing.assert_array_equal(result.values, expected.values)
    assert result.meta["cost"]["n_tokens"] == len(result.tokens)


def test_a_stand_in_the_method_refuses_falls_back_to_the_example(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    workspace, method = Workspace(), Recording(refuse="dogs run")
    workspace.warm_up_on(adapter, EXAMPLES[1])
    workspace.attribution(adapter, method, EXAMPLES[2])
    assert method.texts == ["dogs run", EXAMPLES[2].text, EXAMPLES[2].text]
    workspace, refusing = Workspace(), Recording(refuse=EXAMPLES[2].text)
    workspace.warm_up_on(adapter, EXAMPLES[1])
    with pytest.raises(ValueError, match="not this one"):  # an example the method refuses still raises
        workspace.attribution(adapter, refusing, EXAMPLES[2])
    assert refusing.texts == ["dogs run", EXAMPLES[2].text]
