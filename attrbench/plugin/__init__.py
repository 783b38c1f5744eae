"""The surface plugins import from (``from attrbench.plugin import ...``): what a plugin author needs, and stable.

A method, evaluation or dataset plugin (built in, from an entry point, or defined in a notebook) needs the base
classes and their parameter declarations, the registries and :func:`register`, the result types and errors, the
conformance check, captum (version-checked), and a few of the engine's and the shared operations' pieces: the
decomposition, rollout, the targets, token ranking, the deletion readout and Spearman's correlation. Each is
documented in the API reference.

The built-in plugins use more of the engine (``attrbench.plugin.internal``); those names may change between
releases, and the architecture test holds the built-ins to the two modules.
"""
from ..datasets.base import Dataset, Example
from ..decompose import Decomposition, DerivedMap, decompose, readout
from ..decompose.engine import default_tolerance
from ..errors import AttrbenchError, CompletenessError, InputError, MethodError, UnknownPluginError
from ..models import TransformerAdapter
from ..ops.aggregate import rollout
from ..ops.batching import each_batch
from ..ops.perturb import Readout, answer
from ..ops.stats import spearman
from ..ops.targets import ResolvedTarget, Target, no_head_reason
from ..ops.tokens import ranked
from ..params import Configurable, Param
from ..registry import DATASETS, EVALS, METHODS, register
from .conformance import check_method
from .evaluation import Analysis, EvalContext, Evaluation
from .gradient import GradientMethod, TargetForward, captum_attr
from .method import Method, MethodResult, Rollout, ScopeMap, axiom_check

__all__ = [
    # plugin kinds and their declarations
    "Method", "MethodResult", "ScopeMap", "Rollout", "GradientMethod", "TargetForward", "Evaluation", "Analysis",
    "EvalContext", "Dataset", "Example", "Param", "Configurable",
    # conformance and identities
    "check_method", "each_batch", "axiom_check", "default_tolerance", "captum_attr",
    # registries
    "METHODS", "EVALS", "DATASETS", "register",
    # errors
    "AttrbenchError", "InputError", "MethodError", "CompletenessError", "UnknownPluginError",
    # the engine and the shared operations
    "decompose", "Decomposition", "DerivedMap", "readout", "TransformerAdapter", "Target", "ResolvedTarget",
    "no_head_reason", "rollout", "spearman", "ranked", "answer", "Readout",
]
