"""Built-in method plugins (installed as ``attrbench.methods``): importing registers them."""
from . import (alti, attention_flow, attn_norm, attn_rollout, attn_w, blank_out, captum_zoo, ff_norm,  # noqa: F401
               ff_rollout, globenc, grad_l2, grad_x_input, integrated_gradients, norm_rollout, value_zeroing)
