"""Which tokens of a text are special ([CLS], [SEP], [MASK], padding, BOS/EOS): one rule for every module.

[UNK] stands for a real input word, so it is treated like one: it is scored, perturbed and replaced
by baselines as any word is.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import torch

from ..errors import InputError


def special_mask(adapter, input_ids: Sequence[int]) -> np.ndarray:
    """(n,) bool: True at special tokens."""
    special = set(adapter.tokenizer.all_special_ids) - {adapter.tokenizer.unk_token_id}
    return np.array([int(t) in special for t in input_ids], dtype=bool)


def non_special(adapter, input_ids: Sequence[int]) -> np.ndarray:
    """Positions of the tokens an attribution is judged on (all but the special tokens)."""
    return np.flatnonzero(~special_mask(adapter, input_ids)).astype(np.int64)


def ranked(scores: Sequence[float]) -> list[int]:
    """Indices from the highest score to the lowest, ties in order of position: how every evaluation reads
    an attribution as a ranking (erasure curves, top-k plausibility)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable").tolist()


def word_tokens(adapter, text: str, words: Sequence[int]) -> np.ndarray:
    """(n,) bool over the tokens of ``text`` (special tokens included, never marked): True where a token
    covers part of one of the whitespace-separated words with these indices (e.g. a human rationale)."""
    if not adapter.tokenizer.is_fast:
        raise InputError(f"mapping words to tokens needs a fast tokenizer (character offsets); "
                         f"'{adapter.name}' has a slow one")
    encoded = adapter.tokenizer(text, return_offsets_mapping=True)
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    marked = [spans[k] for k in words]
    special = special_mask(adapter, encoded["input_ids"])
    return np.array([not sp and end > start and any(start < b and end > a for a, b in marked)
                     for (start, end), sp in zip(encoded["offset_mapping"], special)], dtype=bool)


def pad_ids(sequences: Sequence[Sequence[int]], pad_id: int,
            device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token-id sequences into (input_ids, attention_mask) on ``device``."""
    n = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), n), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(sequences), n), dtype=torch.long, device=device)
    for b, seq in enumerate(sequences):
        input_ids[b, :len(seq)] = torch.as_tensor(list(seq), dtype=torch.long, device=device)
        mask[b, :len(seq)] = 1
    return input_ids, mask
