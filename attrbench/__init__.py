"""attrbench: compare token attribution methods for transformer language models.

Layers, each importing only from those before it: plugin API (``attrbench.plugin``) → built-in
plugins (``methods``, ``evals``, ``datasets.builtin``) → models → decomposition (``decompose``) →
shared operations (``ops``) → runtime (options, units, executors, store) → report → the Python API
(``attrbench.api``: attribute, evaluate, run, load_run), re-exported here.
"""
from ._version import __version__
from .api import Attributions, RunResults, Scores, as_dataset, attribute, evaluate, load_run, run
from .decompose import Decomposition, decompose
from .errors import AttrbenchError, CompletenessError, InputError, ModelLoadError, UnknownPluginError
from .models import load_model
from .registry import register
from .runtime.options import RunOptions

__all__ = ["load_model", "attribute", "evaluate", "run", "load_run", "as_dataset", "register", "decompose",
           "Attributions", "Scores", "RunResults", "Decomposition", "RunOptions", "AttrbenchError",
           "CompletenessError", "InputError", "ModelLoadError", "UnknownPluginError", "__version__"]
