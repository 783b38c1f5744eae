"""Shared base for captum gradient baselines, attributed at the word-embedding output.

The gradient is taken once at the output of the model's input-embedding module (captum's layer
attributions hook it); embeddings are never fed back through the embedding module, which would
change the scores (captum #1132). The explained score is the target's logit (or a logit difference
for contrast targets) from the model's own head.
"""
from __future__ import annotations

import numpy as np
import torch

from .method import Method, MethodResult
from .targets import no_head_reason


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

            def forward(input_ids, attention_mask):
                return resolved.logit(adapter.row_logits(resolved.row, input_ids=input_ids,
                                                         attention_mask=attention_mask))

            with torch.enable_grad():
                scores, meta = self.attribute(forward, adapter.model.get_input_embeddings(), ids, mask, adapter)
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], scores, None,
                                        {"dtype": str(adapter.dtype).replace("torch.", ""),
                                         "truncated": batch.truncated[b], **meta}))
        return results
