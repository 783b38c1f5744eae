"""Built-in method plugins (installed as ``attrbench.methods``): importing registers them."""
from . import (alti, attn_norm, attn_rollout, attn_w, blank_out, captum_zoo, ff_norm, ff_rollout, globenc,  # noqa: F401
               grad_l2, grad_x_input, integrated_gradients, norm_rollout, value_zeroing)
