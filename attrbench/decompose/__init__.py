"""Decomposition engine: per-layer parts of every scope, checked against the real forward pass."""
from .engine import (FF_SCOPES, POST_LN_SCOPES, PRE_LN_SCOPES, VALUE_BIAS, Decomposition, LayerDecomposition,
                     decompose, decompose_layer, scopes_for)

__all__ = ["decompose", "decompose_layer", "Decomposition", "LayerDecomposition", "scopes_for",
           "POST_LN_SCOPES", "PRE_LN_SCOPES", "FF_SCOPES", "VALUE_BIAS"]
