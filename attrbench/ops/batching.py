"""Forward passes made once: every request of a shard gathered, deduplicated, sorted by length and batched.

Evaluations ask for model outputs by yielding :class:`~attrbench.ops.perturb.Forward` requests from
generators (one per example and metric and method). :class:`Batcher` advances all of a shard's
generators in rounds, as lm-evaluation-harness's ``Collator`` gathers its requests: each round it
collects the requests every generator is waiting on, looks each distinct (model, readout, row, token
ids) up in a cache (in memory, or the run's shared-work cache, ``attrbench.runtime.workcache``),
sends the rest through the model in length-sorted batches bounded by a token budget
(``RunOptions.batch_tokens``) and by the padding a batch may carry (``pad_tokens``), stores the outputs,
and answers every generator that asked. A CUDA out-of-memory halves the batch and retries; the batch size
that worked is kept.
"""
from __future__ import annotations

import hashlib
import inspect
import struct
import time
from collections import Counter
from typing import Any, Callable, Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from .tokens import pad_ids
from .perturb import Forward, MaskedEmbeddings, masked_probabilities, read


def forward_key(weights: str, dtype: str, index: int, contrast: Optional[int], row: int, ids) -> bytes:
    """The content address of one model output: weights, dtype, readout, row and token ids."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{weights}|{dtype}|{index}|{contrast}|{row}|".encode())
    digest.update(struct.pack(f"<{len(ids)}q", *ids))
    return digest.digest()


def batch_end(lengths, start: int, batch_tokens: int, pad_tokens: int, max_batch: Optional[int] = None,
              same_length: bool = False) -> int:
    """Where the batch that begins at ``start`` of ascending ``lengths`` ends: the most rows whose padded tokens stay
    within ``batch_tokens``, whose padding (the shorter rows padded up to the longest) stays within ``pad_tokens``
    (on a CPU a padded token costs what a real one does), at most ``max_batch`` rows, of one length only with
    ``same_length``. The first row always fits: a row longer than the budget goes alone."""
    end, padding = start + 1, 0
    while end < len(lengths) and (max_batch is None or end - start < max_batch):
        length = lengths[end]
        more = padding + (end - start) * (length - lengths[end - 1])  # the rows before pad up
        if (end - start + 1) * length > batch_tokens or more > pad_tokens or (
                same_length and length != lengths[start]):
            break
        end, padding = end + 1, more
    return end


def pack(lengths, batch_tokens: int, pad_tokens: int, max_batch: Optional[int] = None,
         same_length: bool = False) -> list[list[int]]:
    """Indices of ``lengths`` in length-sorted batches (:func:`batch_end`'s bounds): the packing of the model-output
    requests (:class:`Batcher`) and of the batched methods (``Method.batches``) alike."""
    order = sorted(range(len(lengths)), key=lambda b: (lengths[b], b))
    ordered = [lengths[b] for b in order]
    out, start = [], 0
    while start < len(order):
        end = batch_end(ordered, start, batch_tokens, pad_tokens, max_batch, same_length)
        out.append(order[start:end])
        start = end
    return out


def each_batch(groups, compute: Callable[[list[int]], None],
               halved: Optional[Callable[[list[int]], None]] = None) -> None:
    """``compute(group)`` for each group of texts; a group too large for the device (``torch.OutOfMemoryError``)
    is halved and retried, down to one text, which re-raises. ``halved(group)`` is told of each group halved (a
    method may shrink its budget for the batches to come). The out-of-memory policy of the batched methods, as
    :class:`Batcher` has its own for the model-output requests."""
    todo = [list(g) for g in groups]
    while todo:
        group = todo.pop(0)
        try:
            compute(group)
        except torch.OutOfMemoryError:
            if len(group) == 1:
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if halved is not None:
                halved(group)
            todo[:0] = [group[:len(group) // 2], group[len(group) // 2:]]


class MemoryCache:
    """Model outputs by content address, for this process only."""

    def __init__(self):
        self.values: dict[bytes, float] = {}

    def forward_get(self, keys) -> dict[bytes, float]:
        return {k: self.values[k] for k in keys if k in self.values}

    def forward_put(self, items: dict[bytes, float]) -> None:
        self.values.update(items)


class Batcher:
    """Answers the :class:`Forward` requests of many generators (see the module docstring)."""

    # a round with at least this many sequences to compute shows its own progress bar (with tqdm's estimate of
    # the time left): the bounds of NAOPC on long texts are minutes of forward passes after every row is queued
    PROGRESS_ROWS = 2000

    def __init__(self, cache=None, batch_tokens: int = 4096, max_batch: int = 256, pad_tokens: int = 64,
                 progress: bool = False):
        self.cache = cache or MemoryCache()  # anything with forward_get(keys) and forward_put(items)
        self.progress = progress
        self.batch_tokens, self.max_batch = batch_tokens, max_batch
        # the padding a batch of mixed lengths may carry (RunOptions.pad_tokens: another pass costs about this
        # many tokens); padding full batches freely had cost up to 1.5 x their distinct tokens on 2 CPU cores
        self.pad_tokens = pad_tokens
        self.rows_requested = 0  # sequences asked for, repeats included
        self.rows_distinct = 0  # distinct sequences asked for in a round, summed over rounds
        self.rows_cached = 0  # distinct sequences a cache answered
        self.lengths_sent: Counter = Counter()  # sequences sent through a model, per length (a floor prices each)
        self.batches = 0
        self.oom_halvings = 0
        self.forward_seconds = 0.0  # wall seconds inside the model's forward passes (synchronised on CUDA)

    def run(self, work: dict[Any, Any]) -> dict[Any, Any]:
        """Drive every generator (or take every plain value) of ``work`` to its result: {key: result}."""
        results, waiting = {}, {}
        for key, item in work.items():
            if inspect.isgenerator(item):
                self._advance(key, item, None, results, waiting)
            else:
                results[key] = item
        while waiting:
            requests = list(waiting.values())
            self.answer([request for _, request in requests])
            current, waiting = waiting, {}
            for key, (generator, request) in current.items():
                self._advance(key, generator, request.answer, results, waiting)
        return results

    @staticmethod
    def _advance(key, generator, value, results: dict, waiting: dict) -> None:
        try:
            request = generator.send(value)
        except StopIteration as done:
            results[key] = done.value
            return
        if not isinstance(request, (Forward, MaskedEmbeddings)):
            raise TypeError(f"an evaluation yielded {type(request).__name__}; it may yield Forward or "
                            "MaskedEmbeddings requests only")
        waiting[key] = (generator, request)

    def answer(self, requests: list[Forward | MaskedEmbeddings]) -> None:
        """Fill each request's ``answer``: cached outputs, and the rest from batched forward passes."""
        self._answer_masked([request for request in requests if isinstance(request, MaskedEmbeddings)])
        requests = [request for request in requests if isinstance(request, Forward)]
        keys = []
        unique: dict[bytes, tuple] = {}
        for request in requests:
            adapter, readout = request.adapter, request.readout
            dtype = str(adapter.dtype).replace("torch.", "")
            request_keys = [forward_key(adapter.weights_sha256, dtype, readout.index, readout.contrast, row, ids)
                            for ids, row in zip(request.sequences, request.rows)]
            keys.append(request_keys)
            for key, ids, row in zip(request_keys, request.sequences, request.rows):
                unique.setdefault(key, (adapter, readout, ids, row))
            self.rows_requested += len(request_keys)
        known = self.cache.forward_get(unique)
        missing = [(key, *unique[key]) for key in unique if key not in known]
        self.rows_distinct += len(unique)
        self.rows_cached += len(unique) - len(missing)
        if missing:
            computed = self._compute(missing)
            self.cache.forward_put(computed)
            known.update(computed)
        for request, request_keys in zip(requests, keys):
            request.answer = np.array([known[k] for k in request_keys], dtype=np.float64)

    @property
    def rows_sent(self) -> int:
        """Sequences sent through a model."""
        return sum(self.lengths_sent.values())

    @torch.no_grad()
    def _compute(self, items: list[tuple]) -> dict[bytes, float]:
        """Outputs of (key, adapter, readout, ids, row) items: per model, length-sorted, token-budgeted batches."""
        out = {}
        by_model: dict[int, list[tuple]] = {}
        for item in items:
            by_model.setdefault(id(item[1]), []).append(item)
        bar = tqdm(total=len(items), desc="model outputs", unit="seq", leave=False,
                   disable=not self.progress or len(items) < self.PROGRESS_ROWS)
        for group in by_model.values():
            group.sort(key=lambda item: len(item[3]))
            lengths = [len(item[3]) for item in group]
            start = 0
            while start < len(group):
                end = batch_end(lengths, start, self.batch_tokens, self.pad_tokens, self.max_batch)
                done = self._run_batch(group[start:end], out, start)
                bar.update(done - start)
                start = done
        bar.close()
        return out

    def _halve(self, rows: int, length: int) -> None:
        """Called while handling a CUDA out-of-memory on a batch of ``rows``: later batches are half as large; a
        single row that does not fit re-raises it."""
        if rows == 1:
            raise  # noqa: PLE0704 -- the out-of-memory being handled
        torch.cuda.empty_cache()
        self.oom_halvings += 1
        self.max_batch = max(1, rows // 2)
        self.batch_tokens = max(length, self.batch_tokens // 2)

    def _run_batch(self, batch: list[tuple], out: dict, start: int) -> int:
        adapter = batch[0][1]
        began = time.perf_counter()
        try:
            ids, mask = pad_ids([item[3] for item in batch], adapter.tokenizer.pad_token_id, adapter.device)
            logits = adapter.row_logits([item[4] for item in batch], input_ids=ids, attention_mask=mask)
        except torch.OutOfMemoryError:
            self._halve(len(batch), len(batch[0][3]))
            return start  # the caller packs a smaller batch from the same place
        values = read(logits, [item[2] for item in batch])  # to numpy: the device's work is finished here
        self.forward_seconds += time.perf_counter() - began
        out.update(zip((item[0] for item in batch), values.tolist()))
        self.lengths_sent.update(len(item[3]) for item in batch)
        self.batches += 1
        return start + len(batch)

    def _answer_masked(self, requests: list[MaskedEmbeddings]) -> None:
        """Soft erasure's masked-embedding samples of every method and example of a round, in length-sorted batches
        of one model bounded by the token budget (nothing to deduplicate or cache): of one length, or, where the model
        allows padded embeddings (all but a decoder read by a sequence-classification head), of mixed lengths within
        the padding allowance, as :meth:`answer` packs token ids. A round's samples are a few dozen per example, each
        example of its own length: one pass per length costs a pass's fixed cost for every few hundred tokens."""
        groups: dict[tuple, list[tuple[MaskedEmbeddings, int]]] = {}
        for request in requests:
            request.answer = np.empty(request.samples)
            mixed = getattr(request.adapter, "pads_embeddings", False)
            groups.setdefault((id(request.adapter),) if mixed else (id(request.adapter), len(request.ids)), []).extend(
                (request, s) for s in range(request.samples))
            self.rows_requested += request.samples
            self.rows_distinct += request.samples
        for samples in groups.values():
            samples.sort(key=lambda item: len(item[0].ids))  # stable: a request's samples stay together, in order
            lengths = [len(request.ids) for request, _ in samples]
            start = 0
            while start < len(samples):
                end = batch_end(lengths, start, self.batch_tokens, self.pad_tokens, self.max_batch)
                chunk = samples[start:end]
                pieces = []  # (request, first sample, last sample + 1), consecutive samples of one request together
                for request, s in chunk:
                    if pieces and pieces[-1][0] is request:
                        pieces[-1][2] = s + 1
                    else:
                        pieces.append([request, s, s + 1])
                began = time.perf_counter()
                try:
                    values = masked_probabilities(pieces)
                except torch.OutOfMemoryError:
                    self._halve(len(chunk), lengths[end - 1])
                    continue  # a smaller batch from the same place
                self.forward_seconds += time.perf_counter() - began
                at = 0
                for request, first, stop in pieces:
                    request.answer[first:stop] = values[at:at + stop - first]
                    at += stop - first
                self.lengths_sent.update(lengths[start:end])
                self.batches += 1
                start = end
