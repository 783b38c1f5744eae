"""What the built-in plugins use beyond :mod:`attrbench.plugin`: internal, and free to change between releases.

The decomposition engine's stages and readers, the model-family specs, the deletion and floor operations, the shared
datasets' readers, the per-example work of the evaluations and the pooled perturbations of captum's sampling methods.
A third-party plugin should need none of it; one that does depends on attrbench's internals, as the built-ins may.
"""
from ..datasets.agreement import SVA_SPLIT, SVA_SPLIT_SEED, agreement_examples, contrast_reading, model_task, sva_split
from ..datasets.readers import SST2_FILES, SVA_FILES, read_sst2, read_sva
from ..datasets.shortcuts import evaluation_rows
from ..decompose import FF_ATTRIBUTIONS, VALUE_BIAS, ChunkView, ff_output_readers, layout_for, propagate, stages
from ..decompose.derived import ALTI_MAP
from ..decompose.readout import check_logit, head_logit, real_logits, stream_parts
from ..decompose.stages import ACTIVATION_RULES, BIAS_SPLITS
from ..models.adapter import forward_hooks
from ..models.architectures import norm_spec
from ..models.heads import Activation, head_steps, no_readout_reason
from ..ops.aggregate import row_normalise, visible_cells, with_identity
from ..ops.floors import expected_spearman, stratum_mean, subsets_of_size
from ..ops.hashing import file_sha256
from ..ops.maxflow import max_flows
from ..ops.measure import timed
from ..ops.numeric import safe_divide
from ..ops.perturb import OPERATORS, UNITS, Forward, MaskedEmbeddings, Perturbations, ceil_count, target_probabilities
from ..ops.stats import RANKS, map_change, mean_of_defined
from ..ops.targets import head_kind, resolve_text
from ..ops.tokens import non_special, special_mask, word_tokens
from ..params import params_key
from .captum_pool import Pooled, answer_pooled, noise_draw, pool_sampler
from .evaluation import FLOOR_DRAWS, ExampleWork, decompositions
from ..registry import Registry
from .gradient import BASELINE_PARAM, BASELINES, baseline_ids
from .method import AXIOMS, FF_PARAMS, VALUE_BIAS_PARAM

__all__ = [
    "ExampleWork", "params_key", "VALUE_BIAS_PARAM", "FF_PARAMS", "FLOOR_DRAWS",
    "AXIOMS", "BASELINE_PARAM", "BASELINES", "baseline_ids", "Registry", "decompositions", "ChunkView", "ALTI_MAP",
    "stages", "propagate", "layout_for", "ff_output_readers", "visible_cells", "VALUE_BIAS", "FF_ATTRIBUTIONS",
    "check_logit", "head_logit", "real_logits", "stream_parts", "ACTIVATION_RULES", "BIAS_SPLITS", "forward_hooks",
    "norm_spec", "Activation", "head_steps", "no_readout_reason", "row_normalise", "with_identity", "max_flows",
    "safe_divide", "timed", "file_sha256", "Perturbations", "Forward", "MaskedEmbeddings", "OPERATORS", "UNITS",
    "ceil_count", "target_probabilities", "RANKS", "map_change", "mean_of_defined", "expected_spearman",
    "subsets_of_size", "stratum_mean", "head_kind", "resolve_text", "non_special", "special_mask", "word_tokens",
    "read_sst2", "read_sva", "SST2_FILES", "SVA_FILES", "agreement_examples", "contrast_reading", "model_task",
    "sva_split", "SVA_SPLIT", "SVA_SPLIT_SEED", "evaluation_rows", "Pooled", "answer_pooled", "noise_draw",
    "pool_sampler",
]
