"""attrbench: compare token attribution methods for transformer language models.

Data flow: model adapter (``attrbench.models``) -> decomposition (``attrbench.decompose``) ->
method plugins (``attrbench.methods``) -> evaluations (``attrbench.evals``).
"""
from .decompose import Decomposition, decompose
from .errors import AttrbenchError, CompletenessError, InputError, ModelLoadError, UnknownPluginError
from .models import load_model

__version__ = "0.1.0"
__all__ = ["load_model", "decompose", "Decomposition", "AttrbenchError", "CompletenessError", "InputError",
           "ModelLoadError", "UnknownPluginError"]
