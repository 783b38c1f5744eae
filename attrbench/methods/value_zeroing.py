"""Value Zeroing (Mohebbi et al. 2023, "Quantifying Context Mixing in Transformers", EACL).

Per layer l and token j: zero token j's value vectors in every head, run layer l on its real input,
and score each output token i by the cosine distance between its real and its new representation,
``VZ^l_ij = 1 - cos(x̃^l_i, x̃^l_i(¬j))``. Each row is normalised to sum to 1; a causal model's row
i reads tokens j <= i only. inseq also counts distances below 1e-5 as 0 (``threshold=1e-5``
reproduces it). The default keeps them: in SmolLM2, whose massive activations make every cosine
change tiny, some layers have no distance above 1e-5 in a row, which zeroes the whole rollout. The input
attribution is the target row of the rollout ``VZ^L ··· VZ^1`` (the paper's "Value Zeroing
rollout"; the maps already include the residual stream, so no identity is added).

All n zeroings of a text run as one batched forward pass of n copies (in chunks of ``batch_size``):
a hook zeroes row j of copy j at every layer's value projection, and a hook on every layer hands
the next layer the real output, so each layer is zeroed on its own real input. The last layer is
read after the model's final norm where it has one (the representation the head reads, as in HF's
``hidden_states`` and inseq).
"""
from __future__ import annotations

import numpy as np
import torch

from attrbench.plugin import InputError, Method, MethodResult, Param, forward_hooks, register, rollout, safe_divide


def _zeroing_hooks(adapter, zeroed: torch.Tensor, clean: list[torch.Tensor], corrupted: list):
    """Copy b zeroes the values of token ``zeroed[b]``; every layer passes on its real output."""
    def zero_values(spec):
        def hook(module, args, output):
            output = output.clone()
            output[torch.arange(len(zeroed), device=output.device), zeroed, spec.value_columns] = 0
            return output
        return hook

    def patch_output(layer_index):
        def hook(module, args, output):
            states = output if isinstance(output, torch.Tensor) else output[0]
            corrupted[layer_index] = states.detach()
            real = clean[layer_index].expand_as(states)
            return real if isinstance(output, torch.Tensor) else (real, *output[1:])
        return hook

    return forward_hooks([hook for i, spec in enumerate(adapter.layers)
                          for hook in ((spec.value_module, zero_values(spec)), (spec.layer, patch_output(i)))])


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """1 - cos(a, b) along the last axis, as |a/|a| - b/|b||^2 / 2 in float64: the same quantity without the
    cancellation of 1 - cos for nearly equal vectors (in float32 that alone moved scores by 3e-3)."""
    a, b = a.double(), b.double()
    unit_a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    unit_b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return (unit_a - unit_b).pow(2).sum(-1) / 2


@torch.no_grad()
def value_zeroing_maps(adapter, ids: list[int], threshold: float = 0.0, batch_size: int = 64) -> np.ndarray:
    """(layers, n, n) row-normalised Value Zeroing maps of one token sequence; [l, i, j]: j zeroed, i read."""
    n = len(ids)
    batch = adapter.encode_ids([ids])
    input_ids, mask = batch.input_ids, batch.attention_mask
    clean = [cap.out for cap in adapter.capture(batch)]
    final_norm = adapter.final_norm if adapter.final_norm is not None else (lambda x: x)
    read = [*clean[:-1], final_norm(clean[-1])]
    maps = clean[0].new_zeros((adapter.n_layers, n, n), dtype=torch.float64)
    for start in range(0, n, batch_size):
        zeroed = torch.arange(start, min(n, start + batch_size), device=adapter.device)
        corrupted: list = [None] * adapter.n_layers
        with _zeroing_hooks(adapter, zeroed, clean, corrupted):
            adapter.model.base_model(input_ids=input_ids.expand(len(zeroed), n),
                                     attention_mask=mask.expand(len(zeroed), n))
        corrupted[-1] = final_norm(corrupted[-1])
        for layer, (real, new) in enumerate(zip(read, corrupted)):
            maps[layer][:, zeroed] = cosine_distance(real, new).T.to(maps.dtype)  # (n, chunk)
    if adapter.causal:
        maps = maps.tril()
    maps = torch.where(maps < threshold, 0.0, maps).double().cpu().numpy()
    return safe_divide(maps, maps.sum(-1, keepdims=True))


class ValueZeroing(Method):
    name, family, output = "value_zeroing", "rollout", "scores"
    description = "cosine change of each token when another token's values are zeroed, rolled out"
    reference = "Mohebbi et al. 2023, 'Quantifying Context Mixing in Transformers'"
    params = {"threshold": Param(0.0, "distances below it count as 0 (inseq: 1e-5)", minimum=0.0),
              "batch_size": Param(64, "zeroed copies per forward pass (bounds memory)", minimum=1)}

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' rolls out all layers; leave layers unset")
        batch, values = adapter.encode(texts, truncate=truncate), self.get_params()
        results = []
        for b, (n, resolved) in enumerate(zip(batch.lengths, targets)):
            maps = value_zeroing_maps(adapter, batch.input_ids[b, :n].tolist(), **values)
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], rollout(maps)[resolved.row], None,
                                        {"dtype": str(adapter.dtype).replace("torch.", ""),
                                         "truncated": batch.truncated[b]}))
        return results


register(ValueZeroing)
