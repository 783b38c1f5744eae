"""Built-in method plugins (installed as ``attrbench.methods``): importing registers them."""
from . import alti, attn_norm, attn_rollout, attn_w, ff_norm, ff_rollout, globenc, norm_rollout  # noqa: F401
