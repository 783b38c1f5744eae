"""Decomposition engine: per-layer parts of every scope, checked against the real forward pass."""
from .engine import (
                     VALUE_BIAS,
                     ChunkView,
                     DecomposeOptions,
                     Decomposition,
                     DerivedMap,
                     LayerDecomposition,
                     decompose,
                     decompose_layer,
                     scopes_for,
)
from .ff_split import FF_ATTRIBUTIONS, FF_SPLITS
from .layout import POST_LN, PRE_LN, Layout, ff_output_readers, layout_for

__all__ = ["decompose", "decompose_layer", "DecomposeOptions", "Decomposition", "LayerDecomposition", "DerivedMap",
           "ChunkView", "scopes_for", "layout_for", "Layout", "POST_LN", "PRE_LN", "ff_output_readers", "VALUE_BIAS",
           "FF_SPLITS", "FF_ATTRIBUTIONS"]
