"""attrbench: compare token attribution methods for transformer language models.

Layers, each importing only from those before it: plugin API (``attrbench.plugin``) → built-in
plugins (``methods``, ``evals``, ``datasets.builtin``) → models → decomposition (``decompose``) →
shared operations (``ops``) → runtime (options, units, executors, store) → report.
"""
from ._version import __version__
from .decompose import Decomposition, decompose
from .errors import AttrbenchError, CompletenessError, InputError, ModelLoadError, UnknownPluginError
from .models import load_model
from .registry import register
from .runtime.options import RunOptions
from .runtime.pipeline import evaluate

__all__ = ["load_model", "decompose", "Decomposition", "evaluate", "register", "RunOptions", "AttrbenchError",
           "CompletenessError", "InputError", "ModelLoadError", "UnknownPluginError", "__version__"]
