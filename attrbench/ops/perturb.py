"""Perturb-then-read: the target's probability on perturbed token-id sequences, one helper for all.

Used by the erasure methods (blank-out) and the erasure evaluations (comprehensiveness and
sufficiency). Perturbations stay in token-id space (never decoded and re-tokenised), the target is
fixed on the unperturbed text (its predicted class or token), and each sequence is read at the row
the caller gives (deletions move the explained row; replacements do not).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..models.adapter import pad_ids
from .targets import ResolvedTarget, explained_row
from .tokens import non_special, ranked


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
        logits = adapter.row_logits([int(rows[i]) for i in chunk], input_ids=ids, attention_mask=mask)
        out[chunk] = resolved.probability(logits).double().numpy()
    return out


def ceil_count(percent: float, m: int) -> int:
    """How many of m tokens a bin of ``percent`` % holds: ceil(percent m / 100), at least 1, at most m."""
    return min(m, max(1, math.ceil(percent * m / 100)))


class Deletions:
    """p(target) of one example with sets of its non-special tokens deleted, memoised.

    The deletion curves of every erasure metric (AOPC, NAOPC and its bounds, ABPC) come from here,
    so a set of deleted tokens is sent through the model once however many orderings reach it.
    ``removed`` sets hold indices into ``positions`` (the non-special tokens, in text order);
    deletions are in token-id space and the target is read at its own row of each sequence.
    """

    def __init__(self, adapter, input_ids: Sequence[int], resolved: ResolvedTarget, batch_size: int = 64):
        self.adapter, self.ids, self.resolved, self.batch_size = adapter, list(input_ids), resolved, batch_size
        self.positions = non_special(adapter, self.ids)
        self._row = lambda ids: explained_row(adapter, ids, resolved.target)
        self._p: dict[frozenset, float] = {}
        self.p_full = float(self.probabilities([frozenset()])[0])

    @property
    def m(self) -> int:
        return len(self.positions)

    @property
    def evaluated(self) -> list[frozenset]:
        """The distinct deletion sets sent through the model so far (each one text)."""
        return list(self._p)

    def sequence(self, removed: frozenset) -> list[int]:
        gone = {int(self.positions[i]) for i in removed}
        return [t for p, t in enumerate(self.ids) if p not in gone]

    def probabilities(self, sets: Sequence[frozenset]) -> np.ndarray:
        """p(target) with each set of (indices of) non-special tokens deleted; new sets in one batched pass."""
        new = list(dict.fromkeys(s for s in sets if s not in self._p))
        if new:
            sequences = [self.sequence(s) for s in new]
            values = target_probabilities(self.adapter, self.resolved, sequences, [self._row(s) for s in sequences],
                                          self.batch_size)
            self._p.update(zip(new, values.tolist()))
        return np.array([self._p[s] for s in sets])

    def order(self, scores: np.ndarray) -> list[int]:
        """Indices into ``positions``, most relevant first (ties: earlier token first)."""
        return ranked(np.asarray(scores)[self.positions])

    def drops(self, sets: Sequence[frozenset], keep: bool = False) -> np.ndarray:
        """p(x) − p(x') with each set of token indices deleted (``keep``: only that set kept), one batch."""
        everything = frozenset(range(self.m))
        return self.p_full - self.probabilities([everything - s for s in sets] if keep else list(sets))

    def curve(self, order: Sequence[int], keep: bool = False) -> np.ndarray:
        """Drops for k = 1 .. m−1 tokens of ``order`` deleted (``keep``: only those kept).

        k = m is left out: deleting (or keeping) every token is the same text for every ordering.
        """
        return self.drops([frozenset(order[:k]) for k in range(1, self.m)], keep)
