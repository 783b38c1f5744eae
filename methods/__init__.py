"""Built-in method plugins (installed as ``attrbench.methods``): importing registers them."""
from . import attn_norm, attn_w, ff_norm  # noqa: F401
