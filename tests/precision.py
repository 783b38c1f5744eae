"""Tolerances from a dtype's precision and a computation's depth, not from what one CPU happened to measure.

A chain of k correctly rounded floating-point operations has a relative error of at most
gamma_k = k u / (1 - k u), with u the unit roundoff (half the machine epsilon; Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., Lemma 3.1). CPUs differ in how their kernels order sums and whether they fuse
multiply-adds (torch's AVX2, AVX-512 and portable kernels, ``ATEN_CPU_CAPABILITY``), so float32 results move in
their last digits from one machine to the next; a bound of this form holds on all of them, where a bound fitted
to one machine's measurement may not. A sum whose terms cancel is bounded relative to the sum of their
magnitudes, not to the (smaller) result.

The tests that rest on such bounds carry the ``numerics`` marker; CI runs them under torch's portable kernels
(``ATEN_CPU_CAPABILITY=default``) as well as the machine's own.
"""
from __future__ import annotations

import torch


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = eps / 2: the largest relative error of one correctly rounded operation (float32: 6.0e-8)."""
    return torch.finfo(dtype).eps / 2


def gamma(k: int, dtype: torch.dtype) -> float:
    """gamma_k: the relative error bound of ``k`` chained roundings in ``dtype``."""
    ku = k * unit_roundoff(dtype)
    return ku / (1 - ku)


def float32_stages(adapter) -> int:
    """The operations a float64 model still rounds to float32 on every forward pass: the norms and softmaxes that
    its Hugging Face code computes in float32 (``Architecture.float32_internals``), one per module and layer; 0 for
    a model that computes in float64 throughout."""
    internals = adapter.architecture.float32_internals if adapter.architecture is not None else ""
    if not internals:
        return 0
    norms = sum("RMSNorm" in type(m).__name__ for m in adapter.model.modules()) if "RMSNorm" in internals else 0
    softmaxes = adapter.n_layers if "softmax" in internals else 0
    return norms + softmaxes
