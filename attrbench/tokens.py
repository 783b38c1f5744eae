"""Which tokens of a text are special ([CLS], [SEP], [MASK], padding, BOS/EOS): one rule for every module.

[UNK] stands for a real input word, so it is treated like one: it is scored, perturbed and replaced
by baselines as any word is.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def special_mask(adapter, input_ids: Sequence[int]) -> np.ndarray:
    """(n,) bool: True at special tokens."""
    special = set(adapter.tokenizer.all_special_ids) - {adapter.tokenizer.unk_token_id}
    return np.array([int(t) in special for t in input_ids], dtype=bool)


def non_special(adapter, input_ids: Sequence[int]) -> np.ndarray:
    """Positions of the tokens an attribution is judged on (all but the special tokens)."""
    return np.flatnonzero(~special_mask(adapter, input_ids)).astype(np.int64)
