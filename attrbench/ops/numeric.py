"""Numerical helpers shared by methods and evaluations."""
from __future__ import annotations

import numpy as np
import torch


def safe_divide(numerator, denominator):
    """``numerator / denominator`` (broadcast), 0 where the denominator is 0: an empty row or column has
    nothing to share out. numpy arrays or torch tensors, keeping the input's type."""
    if isinstance(numerator, torch.Tensor):
        denominator = torch.as_tensor(denominator, dtype=numerator.dtype, device=numerator.device)
        zero = denominator == 0
        return torch.where(zero, 0.0, numerator / torch.where(zero, 1.0, denominator)).to(numerator.dtype)
    numerator, denominator = np.asarray(numerator), np.asarray(denominator)
    dtype = np.result_type(numerator, denominator, np.float32)
    out = np.zeros(np.broadcast_shapes(numerator.shape, denominator.shape), dtype=dtype)
    return np.divide(numerator, denominator, out=out, where=denominator != 0)
