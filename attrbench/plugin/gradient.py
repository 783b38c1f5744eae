"""Shared base for captum gradient baselines, attributed at the word-embedding output.

The gradient is taken once at the output of the model's input-embedding module (captum's layer
attributions hook it); embeddings are never fed back through the embedding module, which would
change the scores (captum #1132). captum's input-space methods get the word embeddings as
``inputs_embeds``, to which the model adds positions as it does to its own lookup. The explained
score is the target's logit (or a logit difference for contrast targets) from the model's own head.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np
import torch

from ..errors import InputError
from ..ops.batching import each_batch
from ..ops.targets import no_head_reason
from ..ops.tokens import special_mask
from ..params import Param
from .method import Method, MethodResult

BASELINES = ("pad", "mask", "unk", "eos")
BASELINE_PARAM = Param("pad", "token the baseline puts in place of every non-special token", choices=BASELINES)


def baseline_ids(adapter, input_ids: torch.Tensor, baseline: str) -> torch.Tensor:
    """(B, n) ids with every non-special token replaced by the ``baseline`` token (pad, mask, unk or eos)."""
    tok = adapter.tokenizer
    baseline_id = dict(zip(BASELINES, (tok.pad_token_id, tok.mask_token_id, tok.unk_token_id,
                                       tok.eos_token_id)))[baseline]
    if baseline_id is None:
        raise InputError(f"baseline token '{baseline}' is not available for '{adapter.name}': "
                         f"use one of {', '.join(BASELINES)} that it has")
    special = torch.from_numpy(np.stack([special_mask(adapter, row.tolist()) for row in input_ids])).to(
        input_ids.device)
    return torch.where(special, input_ids, baseline_id)


CAPTUM_SUPPORTED = ((0, 8), (0, 10))  # [lowest, above highest): captum_pool.py reads its internals


def captum_attr():
    """captum's ``attr`` module, imported on first use by the methods that call it; a captum release outside
    ``CAPTUM_SUPPORTED`` (pyproject pins the same range) is refused in one line, since the captum methods read
    some of its internals and another release may change their scores or break them."""
    import captum.attr  # heavy (captum pulls in matplotlib and more): never at import, so listing methods stays light

    check_captum(captum.__version__)
    return captum.attr


def check_captum(version: str) -> None:
    """Refuse, in one line naming the fix, a captum version outside ``CAPTUM_SUPPORTED``."""
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    (low, high) = CAPTUM_SUPPORTED
    if not low <= parts < high:
        raise InputError(f"captum {version} is not supported (the captum methods read some of its internals; "
                         f"tested on {low[0]}.{low[1]} to {high[0]}.{high[1] - 1}): pip install "
                         f"'captum>={low[0]}.{low[1]},<{high[0]}.{high[1]}'")


class TargetForward:
    """The explained score of a batch of texts, each for its own target, as captum calls it: ``forward(inputs,
    attention_mask, rows, index, contrast)`` -> (B,) scores, where ``inputs`` are token ids or word embeddings.

    captum expands every tensor of ``additional_forward_args`` as it expands the inputs (steps, perturbations,
    noisy copies), so passing :attr:`args` keeps each copy with its own text's mask and target; a text attributed
    alone may pass its mask only (the target then broadcasts over the copies, as before batching)."""

    def __init__(self, adapter, targets, attention_mask: torch.Tensor):
        device = adapter.device
        self.adapter = adapter
        self.rows = torch.tensor([t.row for t in targets], dtype=torch.long, device=device)
        self.index = torch.tensor([t.index for t in targets], dtype=torch.long, device=device)
        self.contrast = torch.tensor([-1 if t.contrast_index is None else t.contrast_index for t in targets],
                                     dtype=torch.long, device=device)
        self.args = (attention_mask, self.rows, self.index, self.contrast)

    def repeated(self, times: int) -> tuple:
        """:attr:`args` for ``times`` copies of the batch stacked (``torch.cat([a, b])`` of two batches)."""
        return tuple(a.repeat(times, *([1] * (a.ndim - 1))) for a in self.args)

    def __call__(self, inputs, attention_mask, rows=None, index=None, contrast=None):
        return self.score(inputs, *self.per_copy(len(inputs), attention_mask, rows, index, contrast))

    def per_copy(self, size: int, attention_mask, rows=None, index=None, contrast=None) -> tuple:
        """(mask, rows, index, contrast) of each of ``size`` inputs: captum's expansion where it passed one, else
        the batch's own broadcast over the copies (a text attributed alone)."""
        def fit(values):
            if len(values) == size:
                return values
            if len(values) != 1:
                raise ValueError(f"{size} inputs for a batch of {len(values)} texts: pass forward.args to captum "
                                 "(additional_forward_args) so that it expands each text's target with its copies")
            return values.expand(size, *values.shape[1:])

        return tuple(fit(own if given is None else given) for given, own in (
            (attention_mask, attention_mask), (rows, self.rows), (index, self.index), (contrast, self.contrast)))

    def score(self, inputs, mask, rows, index, contrast) -> torch.Tensor:
        """(B,) explained scores of token ids or word embeddings, each copy with its own mask and target."""
        key = "inputs_embeds" if inputs.is_floating_point() else "input_ids"
        logits = self.adapter.row_logits(rows.tolist(), **{key: inputs}, attention_mask=mask)
        every = torch.arange(len(inputs), device=logits.device)
        score = logits[every, index]
        other = logits[every, contrast.clamp(min=0)]
        return torch.where(contrast >= 0, score - other, score)


class GradientMethod(Method):
    """A captum method at the word embeddings. ``batched = False``: :meth:`attribute` gets one text at a time,
    (1, n), and returns its (n,) scores and metadata. ``batched = True``: it gets a right-padded batch (B, n) whose
    texts each have their own target (``forward.args``), and returns (B, n) scores (padding's ignored) and B
    metadata dicts; the results equal those of one text at a time to float tolerance (the conformance check)."""

    output = "scores"
    family = "gradient"
    batched = False

    def supports(self, adapter):
        return super().supports(adapter) or no_head_reason(adapter)

    @property
    def pads(self) -> bool:
        """Whether :meth:`attribute` takes a padded batch (a batched method may batch its texts otherwise)."""
        return self.batched

    def attribute(self, forward: TargetForward, layer, input_ids, attention_mask, adapter):
        """Scores and metadata of one text, or of a batch when ``batched`` (see the class docstring)."""
        raise NotImplementedError

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        batch = adapter.encode(texts, truncate=truncate)
        layer = adapter.model.get_input_embeddings()
        results: list[Optional[MethodResult]] = [None] * len(texts)

        def compute(group):
            n = max(batch.lengths[b] for b in group)
            ids, mask = batch.input_ids[group, :n], batch.attention_mask[group, :n]
            forward = TargetForward(adapter, [targets[b] for b in group], mask)
            with torch.enable_grad():
                scores, meta = self.attribute(forward, layer, ids, mask, adapter)
            scores, metas = (scores, meta) if self.pads else ([scores], [meta])
            for k, b in enumerate(group):
                results[b] = self.result(adapter, batch, b, scores[k], metas[k])

        def shrink(group):  # a GPU too small for the batch: the batches to come are smaller too
            self.batch_tokens = max(max(batch.lengths[b] for b in group), self.batch_tokens // 2)

        each_batch(self.groups(adapter, batch.lengths), compute, shrink)
        return results

    def result(self, adapter, batch, b: int, scores, meta: dict) -> MethodResult:
        """Text ``b`` of ``batch``'s result: its scores (padding cut off) and metadata."""
        return MethodResult(self.name, adapter.name, batch.tokens[b], np.asarray(scores)[:batch.lengths[b]], None,
                            {"dtype": str(adapter.dtype).replace("torch.", ""), "truncated": batch.truncated[b],
                             **meta})

    def rows_per_text(self) -> int:
        """The model rows one text sends through in one call: its ``n_samples`` copies times its ``n_steps`` path
        points where it has them (Integrated Gradients: 50), else one."""
        values = self.get_params()
        return int(values.get("n_samples", 1)) * int(values.get("n_steps", 1))

    def groups(self, adapter, lengths: Sequence[int]) -> list[list[int]]:
        """The texts attributed together: one at a time unless ``pads``, else :meth:`batches` of ``batch_tokens``.
        A batch's padding is computed once per row, and a text that joins a batch saves about one call, which costs
        what ``pad_tokens`` tokens do: so a method that sends many rows per text may pad that budget divided by its
        rows (the whole budget made Integrated Gradients, SmoothGrad and GradientShap slower than one text at a time
        on 2 CPU cores: ``benchmarks/bench_batched_methods.py``, docs/performance.md)."""
        if not self.pads:
            return [[b] for b in range(len(lengths))]
        return self.batches(adapter, lengths, self.batch_tokens, self.pad_tokens // self.rows_per_text())
