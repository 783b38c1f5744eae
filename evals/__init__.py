"""Built-in evaluation plugins: importing this package registers each (one module per evaluation)."""
from . import (abpc, context_change, erasure_aopc, example_maps, faithfulness_corr, ff_amp,  # noqa: F401
               ln_outliers, mixing_ratio, naopc, plausibility, res_ff_norms, soft_erasure, timing)
