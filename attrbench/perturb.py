"""Perturb-then-read: the target's probability on perturbed token-id sequences, one helper for all.

Used by the erasure methods (blank-out) and the erasure evaluations (comprehensiveness and
sufficiency). Perturbations stay in token-id space (never decoded and re-tokenised), the target is
fixed on the unperturbed text (its predicted class or token), and each sequence is read at the row
the caller gives (deletions move the explained row; replacements do not).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np
import torch

from .models.adapter import pad_ids
from .targets import ResolvedTarget


@torch.no_grad()
def target_probabilities(adapter, resolved: ResolvedTarget, sequences: Sequence[Sequence[int]],
                         rows: Sequence[int], batch_size: int = 64) -> np.ndarray:
    """p(explained class/token) of each sequence read at ``rows[k]``: (len(sequences),).

    Sequences go through the model in length-sorted (stable), right-padded batches of
    ``batch_size``. The softmax runs in the model's dtype: the logits carry no more precision than
    that, so a change below it is no change (a blanked token that moves nothing scores exactly 0).
    """
    out = np.zeros(len(sequences))
    order = np.argsort([len(s) for s in sequences], kind="stable")
    for k in range(0, len(order), batch_size):
        chunk = order[k:k + batch_size]
        ids, mask = pad_ids([sequences[i] for i in chunk], adapter.tokenizer.pad_token_id)
        logits = adapter.model(input_ids=ids, attention_mask=mask).logits
        for b, i in enumerate(chunk):
            out[i] = float(replace(resolved, row=int(rows[i])).probability(logits[b:b + 1])[0])
    return out


def ceil_count(percent: float, m: int) -> int:
    """How many of m tokens a bin of ``percent`` % holds: ceil(percent m / 100), at least 1, at most m."""
    return min(m, max(1, math.ceil(percent * m / 100)))
