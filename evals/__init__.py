"""Built-in evaluation plugins: importing this package registers each (one module per evaluation)."""
from . import (context_change, erasure_aopc, example_maps, faithfulness_corr, ff_amp, ln_outliers,  # noqa: F401
               mixing_ratio, res_ff_norms, timing)
