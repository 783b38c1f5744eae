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
the next layer the real output, so each layer is zeroed on its own real input. Several texts share
passes: their copies are pooled (right-padded, each copy with its own text's mask and real outputs).
The last layer is read after the model's final norm where it has one (the representation the head
reads, as in HF's ``hidden_states`` and inseq).
"""
from __future__ import annotations

import numpy as np
import torch

from attrbench.plugin import InputError, Method, MethodResult, Param, each_batch, register, rollout
from attrbench.plugin.internal import forward_hooks, safe_divide


def _zeroing_hooks(adapter, zeroed: torch.Tensor, clean: list[torch.Tensor], corrupted: list):
    """Copy b zeroes the values of token ``zeroed[b]``; every layer passes on its real output."""
    def zero_values(spec):
        def hook(module, args, output):
            output = output.clone()
            columns = torch.arange(output.shape[-1], device=output.device)[spec.value_columns]  # a slice or indices
            output[torch.arange(len(zeroed), device=output.device)[:, None], zeroed[:, None], columns[None]] = 0
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
    return value_zeroing_batch(adapter, adapter.encode_ids([ids]), threshold, batch_size)[0]


@torch.no_grad()
def value_zeroing_batch(adapter, batch, threshold: float = 0.0, batch_size: int = 64,
                        copies_per_pass: int = 0) -> list[np.ndarray]:
    """Each text's (layers, n, n) maps from a right-padded ``batch``: one clean pass of the batch, then every text's
    zeroed copies pooled into passes of ``max(batch_size, copies_per_pass)`` copies (texts in length order, so a
    pass pads little), each copy with its own text's mask and real layer outputs."""
    lengths = list(batch.lengths)
    clean = [cap.out for cap in adapter.capture(batch)]
    final_norm = adapter.final_norm if adapter.final_norm is not None else (lambda x: x)
    read = [*clean[:-1], final_norm(clean[-1])]
    maps = [clean[0].new_zeros((adapter.n_layers, n, n), dtype=torch.float64) for n in lengths]
    copies = [(b, j) for b in sorted(range(len(lengths)), key=lambda b: lengths[b]) for j in range(lengths[b])]
    per_pass = max(batch_size, copies_per_pass)
    for start in range(0, len(copies), per_pass):
        chunk = copies[start:start + per_pass]
        owner = torch.tensor([b for b, _ in chunk], device=adapter.device)
        zeroed = torch.tensor([j for _, j in chunk], device=adapter.device)
        width = max(lengths[b] for b, _ in chunk)
        corrupted: list = [None] * adapter.n_layers
        with _zeroing_hooks(adapter, zeroed, [c[owner, :width] for c in clean], corrupted):
            adapter.model.base_model(input_ids=batch.input_ids[owner, :width],
                                     attention_mask=batch.attention_mask[owner, :width])
        corrupted[-1] = final_norm(corrupted[-1])
        for layer, (real, new) in enumerate(zip(read, corrupted)):
            distances = cosine_distance(real[owner, :width], new)  # (copies, width): row i of copy (b, j)
            for k, (b, j) in enumerate(chunk):
                maps[b][layer][:, j] = distances[k, :lengths[b]].to(torch.float64)
    out = []
    for text_maps in maps:
        if adapter.causal:
            text_maps = text_maps.tril()
        text_maps = torch.where(text_maps < threshold, 0.0, text_maps).double().cpu().numpy()
        out.append(safe_divide(text_maps, text_maps.sum(-1, keepdims=True)))
    return out


class ValueZeroing(Method):
    name, family, output = "value_zeroing", "rollout", "scores"
    description = "cosine change of each token when another token's values are zeroed, rolled out"
    reference = "Mohebbi et al. 2023, 'Quantifying Context Mixing in Transformers'"
    params = {"threshold": Param(0.0, "distances below it count as 0 (inseq: 1e-5)", minimum=0.0),
              "batch_size": Param(64, "zeroed copies per forward pass (bounds memory)", minimum=1)}
    batched = True  # a clean pass per length-sorted group of texts, their zeroed copies pooled into full passes
    batch_tokens = 0  # a run's device budget (``within``): passes of up to that many tokens where it exceeds batch_size
    needs_layers = True  # it zeroes the value vectors of each layer's attention, found by the layer reader

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        if layers is not None:
            raise InputError(f"'{self.name}' rolls out all layers; leave layers unset")
        batch, values = adapter.encode(texts, truncate=truncate), self.get_params()
        results: list = [None] * len(texts)

        def compute(group):
            part = adapter.encode([texts[b] for b in group], truncate=truncate)
            copies = self.batch_tokens // max(part.lengths) if self.batch_tokens else 0
            maps = value_zeroing_batch(adapter, part, values["threshold"], values["batch_size"], copies)
            for k, b in enumerate(group):
                results[b] = MethodResult(self.name, adapter.name, part.tokens[k], rollout(maps[k])[targets[b].row],
                                          None, {"dtype": str(adapter.dtype).replace("torch.", ""),
                                                 "truncated": part.truncated[k]})

        # the clean pass keeps every layer's tensors: length-sorted groups within the token budget bound its memory,
        # and a group too large for the device is halved
        each_batch(self.batches(adapter, batch.lengths, self.batch_tokens or Method.batch_tokens), compute)
        return results


register(ValueZeroing)
