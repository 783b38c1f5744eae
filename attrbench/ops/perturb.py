"""Perturb-then-read: the scored probability of perturbed token-id sequences, one path for every erasure curve.

What is scored is the probability of the explained target, read at its row: p(class) for a
classifier, p(token) for a language model, and for a contrast target (``contrast:A/B``, what the
methods explain as logit(A) − logit(B)) the same contrast as a probability, σ(logit A − logit B) =
p(A | {A, B}). Perturbations stay in token-id space (never decoded and re-tokenised); the target is
fixed on the unperturbed text.

An erasure metric removes *features* of an example, each a set of its non-special tokens:

- ``unit``: ``token`` (every non-special token is a feature) or ``word`` (the tokens of one word, as the
  tokenizer's pre-tokenizer splits words: Edin et al.'s word map; see :func:`word_features` for a tokenizer
  that marks none);
- ``operator``: ``delete`` (the tokens leave the sequence; the explained row moves with it), ``mask``
  or ``pad`` (each token is replaced by the mask or pad token; rows stay), or ``auto`` (``mask`` for an
  encoder whose tokenizer has a mask token, ``delete`` for a decoder, which was never trained with one).

Special tokens ([CLS], [SEP], the probe's [MASK], BOS) always stay. :class:`Perturbations` asks for
model outputs through :class:`Forward` requests that a generator yields (``yield from``), so a
scheduler can gather the requests of many examples, metrics and methods, send each distinct
sequence through the model once, in batches, and cache it (``attrbench.ops.batching``);
:func:`answer` serves one generator alone.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Generator, Optional, Sequence

import numpy as np
import torch
from tokenizers.pre_tokenizers import Whitespace

from ..errors import InputError
from .tokens import pad_ids
from .targets import ResolvedTarget, explained_row
from .tokens import non_special, ranked

OPERATORS = ("auto", "delete", "mask", "pad")
UNITS = ("token", "word")


@dataclass(frozen=True)
class Readout:
    """The scored number of a model output row: p(index), or σ(logit index − logit contrast) for a contrast."""

    index: int
    contrast: Optional[int] = None

    @classmethod
    def of(cls, resolved: ResolvedTarget) -> "Readout":
        if resolved.index is None:
            raise InputError(f"target '{resolved.target}' reads no output: the model has no head to perturb")
        return cls(resolved.index, resolved.contrast_index)


def read(logits: torch.Tensor, readouts: Sequence[Readout]) -> np.ndarray:
    """(B,) scored probabilities of (B, classes or vocabulary) logits, one readout per row."""
    rows = torch.arange(len(readouts), device=logits.device)
    index = torch.tensor([r.index for r in readouts], device=logits.device)
    contrast = [r.contrast for r in readouts]
    if all(c is None for c in contrast):
        return logits.softmax(-1)[rows, index].double().cpu().numpy()
    probs = logits.softmax(-1)[rows, index]
    other = torch.tensor([-1 if c is None else c for c in contrast], device=logits.device)
    pairs = torch.sigmoid(logits[rows, index] - logits[rows, other.clamp_min(0)])
    has = torch.tensor([c is not None for c in contrast], device=logits.device)
    return torch.where(has, pairs, probs).double().cpu().numpy()


@torch.no_grad()
def target_probabilities(adapter, readout: Readout | Sequence[Readout], sequences: Sequence[Sequence[int]],
                         rows: Sequence[int], batch_size: int = 64, equal_lengths: bool = False) -> np.ndarray:
    """The scored probability of each sequence read at ``rows[k]`` under ``readout`` (one for all, or one per
    sequence): (len(sequences),).

    Sequences go through the model in length-sorted (stable), right-padded batches of ``batch_size``; with
    ``equal_lengths``, a batch holds one length only (no padding: each sequence's numbers are those of its own
    length's batch, whatever else is pooled with it). The softmax runs in the model's dtype: the logits carry no
    more precision than that, so a change below it is no change (a blanked token that moves nothing scores
    exactly 0).
    """
    readouts = [readout] * len(sequences) if isinstance(readout, Readout) else list(readout)
    out = np.zeros(len(sequences))
    order = np.argsort([len(s) for s in sequences], kind="stable")
    chunks, start = [], 0
    while start < len(order):
        end = min(start + batch_size, len(order))
        if equal_lengths:
            width = len(sequences[order[start]])
            end = start + next((k for k in range(end - start) if len(sequences[order[start + k]]) != width),
                               end - start)
        chunks.append(order[start:end])
        start = end
    for chunk in chunks:
        ids, mask = pad_ids([sequences[i] for i in chunk], adapter.tokenizer.pad_token_id, adapter.device)
        logits = adapter.row_logits([int(rows[i]) for i in chunk], input_ids=ids, attention_mask=mask)
        out[chunk] = read(logits, [readouts[i] for i in chunk])
    return out


@dataclass
class Forward:
    """A request for the scored probability of token sequences, each read at its row, under one readout."""

    adapter: Any
    readout: Readout
    sequences: list[tuple[int, ...]]
    rows: list[int]
    answer: Optional[np.ndarray] = field(default=None, repr=False)


@dataclass
class MaskedEmbeddings:
    """A request for the scored probability of one example under masks of its input embeddings (soft erasure):
    sample s keeps dimension d of token i where ``uniform[s, i, d] < keep[i]``. Each sample is one model input,
    never cached (the masks follow one method's scores); ``answer`` holds one probability per sample.

    ``keep`` may also be (K, n), K keep vectors through the same S masks in one request (the random floor's
    draws): sample j = r·S + s is keep row r under mask s, so the batcher packs all K·S into full batches."""

    adapter: Any
    readout: Readout
    ids: tuple[int, ...]
    row: int
    keep: np.ndarray  # (n,) keep probabilities, or (K, n): K vectors of them
    uniform: torch.Tensor  # (S, n, d) float64 uniform draws on the CPU, shared by every method of an example
    answer: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def samples(self) -> int:
        return int(self.uniform.shape[0]) * (1 if np.ndim(self.keep) == 1 else len(self.keep))

    def inputs(self, start: int, stop: int) -> torch.Tensor:
        """The masked input embeddings of samples ``start`` .. ``stop``: (stop − start, n, d), on the model's device."""
        device = self.adapter.device
        embeds = self.adapter.model.get_input_embeddings()(torch.tensor([self.ids], device=device))  # (1, n, d)
        keep = torch.as_tensor(self.keep, dtype=self.uniform.dtype, device=self.uniform.device).reshape(
            -1, len(self.ids))
        at = torch.arange(start, stop, device=self.uniform.device)
        draws = self.uniform.shape[0]
        masks = (self.uniform[at % draws] < keep[at // draws][:, :, None]).to(device=device, dtype=embeds.dtype)
        return embeds * masks


@torch.no_grad()
def masked_probabilities(pieces: Sequence[tuple[MaskedEmbeddings, int, int]]) -> np.ndarray:
    """The scored probabilities of samples ``start`` .. ``stop`` of each (request, start, stop), in one forward
    pass: the requests share a model; of different lengths, they are right-padded with zero embeddings that the
    attention mask hides (only where the model allows it: :attr:`ModelAdapter.pads_embeddings`)."""
    adapter = pieces[0][0].adapter
    samples = [sample for request, start, stop in pieces for sample in request.inputs(start, stop)]  # (n_i, d) each
    rows = [request.row for request, start, stop in pieces for _ in range(start, stop)]
    readouts = [request.readout for request, start, stop in pieces for _ in range(start, stop)]
    embeds = torch.nn.utils.rnn.pad_sequence(samples, batch_first=True)  # zeros after each sample's length
    lengths = torch.tensor([len(sample) for sample in samples], device=adapter.device)
    mask = (torch.arange(embeds.shape[1], device=adapter.device) < lengths[:, None]).long()
    return read(adapter.row_logits(rows, inputs_embeds=embeds, attention_mask=mask), readouts)


Requests = Generator[Forward | MaskedEmbeddings, np.ndarray, Any]


def answer(generator: Requests, batch_size: int = 64):
    """Run one request generator alone, answering each request with direct forward passes."""
    try:
        request = next(generator)
        while True:
            if isinstance(request, MaskedEmbeddings):
                values = np.concatenate([masked_probabilities([(request, k, min(k + batch_size, request.samples))])
                                         for k in range(0, request.samples, batch_size)])
            else:
                values = target_probabilities(request.adapter, request.readout, request.sequences, request.rows,
                                              batch_size)
            request = generator.send(values)
    except StopIteration as done:
        return done.value


def ceil_count(percent: float, m: int) -> int:
    """How many of m features a bin of ``percent`` % holds: ceil(percent m / 100), at least 1, at most m."""
    return min(m, max(1, math.ceil(percent * m / 100)))


def resolve_operator(adapter, operator: str) -> str:
    """``auto`` made concrete for a model; ``mask`` on a model without a mask token is an error naming the fix."""
    if operator not in OPERATORS:
        raise InputError(f"perturbation '{operator}' is not known; use {', '.join(OPERATORS)}")
    has_mask = adapter.tokenizer.mask_token_id is not None
    if operator == "auto":  # a masked LM's own blank; a decoder was never trained with one
        return "mask" if has_mask and not adapter.causal else "delete"
    if operator == "mask" and not has_mask:
        raise InputError(f"'{adapter.name}' has no mask token to replace tokens with: use perturbation delete or pad "
                         "(or auto)")
    return operator


def marks_words(tokenizer) -> bool:
    """Whether the tokenizer's word ids split words: a SentencePiece tokenizer whose spaces become ▁ before its
    pre-tokenizer runs (Gemma's, Llama 2's) gives one word id to the whole text."""
    return len({w for w in tokenizer("one two", add_special_tokens=False).word_ids() if w is not None}) > 1


def word_features(adapter, text: str, input_ids: Sequence[int]) -> list[list[int]]:
    """The non-special token positions of ``text`` grouped by word: the tokenizer's own word split (its word ids);
    where it marks no words (:func:`marks_words`), the words of the ``Whitespace`` pre-tokenizer (runs of letters
    and digits, runs of other non-space characters, as a BERT-style split), each token in the word its characters
    overlap (a whitespace-only token in the next word; the words one token spans, one feature)."""
    if not adapter.tokenizer.is_fast:
        raise InputError(f"word units need a fast tokenizer (word ids); '{adapter.name}' has a slow one: "
                         "use unit token")
    own = marks_words(adapter.tokenizer)
    encoding = adapter.tokenizer(text, return_offsets_mapping=not own)
    if list(encoding["input_ids"]) != list(input_ids):
        raise InputError("word units need the text the token ids came from")
    positions = non_special(adapter, input_ids).tolist()
    if own:
        word_ids = encoding.word_ids()
    else:
        spans = [span for _, span in Whitespace().pre_tokenize_str(text)]
        ends = [b for _, b in spans]  # ascending: the words are disjoint and in text order

        def overlapped(start: int, end: int) -> list[int]:
            """The words that share a character with the token's span."""
            words, k = [], bisect.bisect_right(ends, start)  # the first word ending after the token starts
            while k < len(spans) and spans[k][0] < end:
                words.append(k)
                k += 1
            return words

        hits = {p: overlapped(*encoding["offset_mapping"][p]) for p in positions}
        if not any(hits.values()):  # no word at all (whitespace only): each token a feature
            return [[p] for p in positions]
        root = list(range(len(spans)))  # union-find: the words one token spans become one

        def find(k: int) -> int:
            while root[k] != k:
                k = root[k]
            return k

        for words in hits.values():
            for k in words[1:]:
                root[find(k)] = find(words[0])
        word_ids, following = [None] * len(encoding["input_ids"]), None
        for p in reversed(positions):  # a token on no word joins the next token's word (the last: the previous)
            following = find(hits[p][0]) if hits[p] else following
            word_ids[p] = following
        last = next(word_ids[p] for p in positions if word_ids[p] is not None)
        for p in positions:
            last = word_ids[p] = last if word_ids[p] is None else word_ids[p]
    words: dict[int, list[int]] = {}
    for position in positions:
        if word_ids[position] is not None:
            words.setdefault(word_ids[position], []).append(position)
    return list(words.values())


class Perturbations:
    """The scored probability of one example with sets of its features removed, memoised.

    Every erasure curve of an example (AOPC, NAOPC and its bounds, ABPC, sufficiency) comes from here,
    so a set of removed features is read once however many orderings, metrics and methods reach it.
    ``removed`` sets hold feature indices (features in text order). Methods take and return
    generators of :class:`Forward` requests (see the module docstring).
    """

    def __init__(self, adapter, input_ids: Sequence[int], resolved: ResolvedTarget, operator: str = "delete",
                 unit: str = "token", text: Optional[str] = None):
        if unit not in UNITS:
            raise InputError(f"perturbation unit '{unit}' is not known; use {' or '.join(UNITS)}")
        self.adapter, self.ids, self.resolved = adapter, list(input_ids), resolved
        self.readout = Readout.of(resolved)
        self.operator, self.unit = resolve_operator(adapter, operator), unit
        if unit == "word":
            if text is None:
                raise InputError("word units need the example's text")
            self.features = word_features(adapter, text, self.ids)
        else:
            self.features = [[int(p)] for p in non_special(adapter, self.ids)]
        token = {"mask": adapter.tokenizer.mask_token_id, "pad": adapter.tokenizer.pad_token_id}
        self._replacement = token.get(self.operator)
        self._p: dict[frozenset, float] = {}

    @property
    def m(self) -> int:
        """The number of features."""
        return len(self.features)

    @property
    def positions(self) -> list[int]:
        """Every feature's token positions, in order (the tokens an attribution is judged on)."""
        return [p for feature in self.features for p in feature]

    @property
    def evaluated(self) -> list[frozenset]:
        """The distinct removal sets read so far."""
        return list(self._p)

    def sequence(self, removed: frozenset) -> tuple[tuple[int, ...], int]:
        """The token ids with the features in ``removed`` removed, and the row the target is read at."""
        gone = {p for i in removed for p in self.features[i]}
        if self._replacement is None:
            ids = tuple(t for p, t in enumerate(self.ids) if p not in gone)
            return ids, explained_row(self.adapter, list(ids), self.resolved.target)
        ids = tuple(self._replacement if p in gone else t for p, t in enumerate(self.ids))
        return ids, self.resolved.row

    def empty_after(self, removed: frozenset) -> bool:
        """Whether removing these features leaves no token at all (a one-word prompt of a decoder, deleted)."""
        return self._replacement is None and len(self.ids) == sum(len(self.features[i]) for i in removed)

    def probabilities(self, sets: Sequence[frozenset]) -> Requests:
        """The scored probability with each set of features removed; unseen sets in one request."""
        new = list(dict.fromkeys(s for s in sets if s not in self._p))
        if new:
            sequences, rows = zip(*(self.sequence(s) for s in new))
            values = yield Forward(self.adapter, self.readout, list(sequences), list(rows))
            self._p.update(zip(new, np.asarray(values, dtype=np.float64).tolist()))
        return np.array([self._p[s] for s in sets], dtype=np.float64)

    def full(self) -> Requests:
        """p(target | x): nothing removed."""
        return float((yield from self.probabilities([frozenset()]))[0])

    def drops(self, sets: Sequence[frozenset], keep: bool = False) -> Requests:
        """p(x) − p(x') with each set of features removed (``keep``: only that set kept), in one request."""
        everything = frozenset(range(self.m))
        asked = [everything - s for s in sets] if keep else list(sets)
        values = yield from self.probabilities([frozenset()] + asked)
        return values[0] - values[1:]

    def order(self, scores: np.ndarray) -> list[int]:
        """Feature indices, most relevant first: a feature's score is the sum of its tokens' (ties: earlier first)."""
        scores = np.asarray(scores, dtype=np.float64)
        return ranked([scores[feature].sum() for feature in self.features])

    def curve(self, order: Sequence[int], keep: bool = False) -> Requests:
        """Drops for k = 1 .. m−1 features of ``order`` removed (``keep``: only those kept).

        k = m is left out: removing (or keeping) every feature is the same input for every ordering.
        """
        return (yield from self.drops([frozenset(order[:k]) for k in range(1, self.m)], keep))
