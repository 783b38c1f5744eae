"""The surface plugins import from (``from attrbench.plugin import ...``), and nothing else.

A method, evaluation or dataset plugin (built in, from an entry point, or defined in a notebook)
needs: the base classes and their parameter declarations, the registries and :func:`register`,
and the engine's and the shared operations' public pieces (decomposition, rollout, targets, token
rules, deletion curves, statistics). Everything here is stable API; what is not here is internal.
"""
from ..datasets.agreement import SVA_SPLIT, SVA_SPLIT_SEED, agreement_examples, contrast_reading, model_task, sva_split
from ..datasets.base import Dataset, Example
from ..datasets.readers import SST2_FILES, SVA_FILES, read_sst2, read_sva
from ..datasets.shortcuts import evaluation_rows
from ..decompose import (
                         FF_ATTRIBUTIONS,
                         VALUE_BIAS,
                         ChunkView,
                         Decomposition,
                         DerivedMap,
                         decompose,
                         ff_output_readers,
                         layout_for,
                         propagate,
                         readout,
                         stages,
)
from ..decompose.derived import ALTI_MAP
from ..decompose.engine import default_tolerance
from ..decompose.layout import visible_cells
from ..decompose.readout import check_logit, head_logit, real_logits, stream_parts
from ..decompose.stages import ACTIVATION_RULES, BIAS_SPLITS
from ..errors import AttrbenchError, CompletenessError, InputError, MethodError, UnknownPluginError
from ..models import TransformerAdapter
from ..models.adapter import forward_hooks
from ..models.architectures import norm_spec
from ..models.heads import Activation, head_steps, no_readout_reason
from ..ops.aggregate import rollout, row_normalise, with_identity
from ..ops.floors import expected_spearman, stratum_mean, subsets_of_size
from ..ops.hashing import file_sha256
from ..ops.maxflow import max_flows
from ..ops.measure import timed
from ..ops.numeric import safe_divide
from ..ops.perturb import (
                           OPERATORS,
                           UNITS,
                           Forward,
                           MaskedEmbeddings,
                           Perturbations,
                           Readout,
                           answer,
                           ceil_count,
                           target_probabilities,
)
from ..ops.stats import RANKS, map_change, mean_of_defined, spearman
from ..ops.targets import ResolvedTarget, Target, head_kind, no_head_reason, resolve_text
from ..ops.tokens import non_special, ranked, special_mask, word_tokens
from ..params import Configurable, Param, params_key
from ..registry import DATASETS, EVALS, METHODS, Registry, register
from .conformance import check_method
from .evaluation import (
                         FLOOR_DRAWS,
                         FLOOR_METHOD,
                         Analysis,
                         EvalContext,
                         Evaluation,
                         ExampleWork,
                         Workspace,
                         decompositions,
)
from .gradient import BASELINE_PARAM, BASELINES, GradientMethod, TargetForward, baseline_ids, captum_attr
from .method import FF_PARAMS, VALUE_BIAS_PARAM, Method, MethodResult, Rollout, ScopeMap, each_batch
from .method import AXIOMS, axiom_check

__all__ = [
    # plugin kinds and their declarations
    "Method", "MethodResult", "ScopeMap", "Rollout", "GradientMethod", "Evaluation", "Analysis", "EvalContext",
    "Workspace", "ExampleWork", "TargetForward", "Dataset", "Example", "Param", "Configurable", "params_key",
    "VALUE_BIAS_PARAM", "FF_PARAMS", "FLOOR_DRAWS", "FLOOR_METHOD",
    "AXIOMS", "axiom_check",
    "BASELINE_PARAM", "BASELINES", "baseline_ids", "captum_attr", "decompositions", "check_method", "each_batch",
    # registries
    "METHODS", "EVALS", "DATASETS", "Registry", "register",
    # errors
    "AttrbenchError", "InputError", "MethodError", "CompletenessError", "UnknownPluginError",
    # the engine
    "decompose", "Decomposition", "DerivedMap", "ChunkView", "ALTI_MAP", "stages", "propagate", "readout",
    "layout_for", "ff_output_readers", "visible_cells", "default_tolerance", "VALUE_BIAS", "FF_ATTRIBUTIONS",
    "check_logit", "head_logit", "real_logits", "stream_parts", "ACTIVATION_RULES", "BIAS_SPLITS",
    # models
    "TransformerAdapter", "forward_hooks", "norm_spec", "Activation", "head_steps", "no_readout_reason",
    # shared operations
    "rollout", "row_normalise", "with_identity", "max_flows", "safe_divide", "timed", "file_sha256",
    "Perturbations", "Forward",
    "MaskedEmbeddings", "answer", "Readout", "OPERATORS", "UNITS", "ceil_count",
    "target_probabilities", "RANKS", "spearman", "map_change", "mean_of_defined", "expected_spearman",
    "subsets_of_size", "stratum_mean", "Target", "ResolvedTarget",
    "head_kind", "no_head_reason", "resolve_text", "non_special", "ranked", "special_mask", "word_tokens",
    # data
    "read_sst2", "read_sva", "SST2_FILES", "SVA_FILES", "agreement_examples", "contrast_reading", "model_task",
    "sva_split", "SVA_SPLIT", "SVA_SPLIT_SEED", "evaluation_rows",
]
