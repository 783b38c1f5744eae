"""The registries' order: "all" means one list in every process."""
import json
import subprocess
import sys

LISTING = "from attrbench.registry import METHODS, EVALS; print(json.dumps([METHODS.names(), EVALS.names()]))"
PLUGIN_FIRST = """
from attrbench.methods.grad_x_input import GradXInput  # a plugin file importing a built-in module first
from attrbench.evals.timing import Timing
import attrbench


@attrbench.register
class Mine(GradXInput):
    '''gradient x input under a user's name'''
    name = "mine"
"""


def _names(code: str) -> list[list[str]]:
    out = subprocess.run([sys.executable, "-c", f"import json\n{code}\n{LISTING}"], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_built_ins_keep_their_order_whatever_a_plugin_imports_first():
    plain, methods_and_evals = _names(""), _names(PLUGIN_FIRST)
    methods, evals = methods_and_evals
    assert methods[-1] == "mine"  # a user's plugin after every built-in
    assert methods[:-1] == plain[0] and evals == plain[1]
    assert plain[0].index("grad_x_input") > plain[0].index("alti")  # the order is the modules', not the imports'
