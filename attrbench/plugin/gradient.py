"""Shared base for captum gradient baselines, attributed at the word-embedding output.

The gradient is taken once at the output of the model's input-embedding module (captum's layer
attributions hook it); embeddings are never fed back through the embedding module, which would
change the scores (captum #1132). captum's input-space methods get the word embeddings as
``inputs_embeds``, to which the model adds positions as it does to its own lookup. The explained
score is the target's logit (or a logit difference for contrast targets) from the model's own head.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import InputError
from ..ops.targets import no_head_reason
from ..ops.tokens import special_mask
from ..params import Param
from .method import Method, MethodResult

BASELINES = ("pad", "mask", "unk", "eos")
BASELINE_PARAM = Param("pad", "token the baseline puts in place of every non-special token", choices=BASELINES)


def baseline_ids(adapter, input_ids: torch.Tensor, baseline: str) -> torch.Tensor:
    """(1, n) ids with every non-special token replaced by the ``baseline`` token (pad, mask, unk or eos)."""
    tok = adapter.tokenizer
    baseline_id = dict(zip(BASELINES, (tok.pad_token_id, tok.mask_token_id, tok.unk_token_id,
                                       tok.eos_token_id)))[baseline]
    if baseline_id is None:
        raise InputError(f"baseline token '{baseline}' is not available for '{adapter.name}': "
                         f"use one of {', '.join(BASELINES)} that it has")
    special = torch.from_numpy(special_mask(adapter, input_ids[0].tolist())).to(input_ids.device)
    return torch.where(special, input_ids[0], baseline_id)[None]


def captum_attr():
    """captum's ``attr`` module, imported on first use by the methods that call it."""
    import captum.attr  # heavy (captum pulls in matplotlib and more): never at import, so listing methods stays light

    return captum.attr


class GradientMethod(Method):
    output = "scores"
    family = "gradient"

    def supports(self, adapter):
        return no_head_reason(adapter)

    def attribute(self, forward, layer, input_ids, attention_mask, adapter) -> tuple[np.ndarray, dict]:
        """(n,) scores and extra metadata for one text; subclasses call one captum method."""
        raise NotImplementedError

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        batch = adapter.encode(texts, truncate=truncate)
        results = []
        for b, (n, resolved) in enumerate(zip(batch.lengths, targets)):
            ids, mask = batch.input_ids[b:b + 1, :n], batch.attention_mask[b:b + 1, :n]

            def forward(inputs, attention_mask):  # token ids, or word embeddings (captum's input-space methods)
                key = "inputs_embeds" if inputs.is_floating_point() else "input_ids"
                mask = attention_mask.expand(len(inputs), -1)  # captum batches perturbed copies of one text
                return resolved.logit(adapter.row_logits(resolved.row, **{key: inputs}, attention_mask=mask))

            with torch.enable_grad():
                scores, meta = self.attribute(forward, adapter.model.get_input_embeddings(), ids, mask, adapter)
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], scores, None,
                                        {"dtype": str(adapter.dtype).replace("torch.", ""),
                                         "truncated": batch.truncated[b], **meta}))
        return results
