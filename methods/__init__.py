"""Built-in method plugins (installed as ``attrbench.methods``): importing registers them."""
from . import (alti, alti_logit, attention_flow, attn_lrp, attn_norm, attn_rollout, attn_w, blank_out, captum_zoo,  # noqa: F401
               decompx,
               ff_norm, ff_rollout, globenc, grad_l2, grad_x_input, integrated_gradients, norm_rollout, value_zeroing)
