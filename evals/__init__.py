"""Built-in evaluation plugins: importing this package registers each (one module per evaluation)."""
from . import (context_change, erasure_aopc, faithfulness_corr, ff_amp, ln_outliers, mixing_ratio,  # noqa: F401
               res_ff_norms, timing)
