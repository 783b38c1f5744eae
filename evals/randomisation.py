"""Model randomisation: whether an attribution changes when the model it explains is destroyed from the top.

The cascading model-randomisation test of Adebayo et al. 2018 ("Sanity Checks for Saliency Maps", NeurIPS, §3.1),
adapted to text. An explanation meant to show what the model does has to change when the weights it explains are
re-initialised; one that barely changes reflects the input (or the architecture) rather than what was learned, as the
paper found for guided backprop on images.

Per example and method: the Spearman correlation between the method's scores on the trained model and on a copy whose
top layers were re-initialised, over the non-special tokens (None with fewer than 3, or when either side is constant).
Two levels of the cascade from the top, each one metric:

- ``spearman_top``: the output head and the last block re-initialised;
- ``spearman_all`` (primary): the output head and every block re-initialised, the paper's full cascade.

The head is everything above the last block: the final norm, a pooler or OPT's ``project_out``, the classifier or LM
head. The blocks are the adapter's (``adapter.blocks``: the layer reader's, or for any other family the module list
that holds them, found in the module tree), so the check runs on every model attrbench loads. The embeddings, a text
model's input, are kept (the paper re-initialised the layers above the input). A model of one block has ``top`` equal to ``all``. Re-initialised with the model's own ``_init_weights`` (what a model built
from its config draws) under ``torch.manual_seed(seed)``, on the CPU in float32 and then moved to the model's device
and dtype, so a seed gives the same weights everywhere. The copy is made once per process, level and seed; an LM head
tied to the input embeddings is untied in the copy only, and the trained model is never modified. The copy's adapter
is named ``<model>@randomised(top=K,seed=S)`` and its weights hash is that of the trained weights with K and S, so its
attributions are never memoised or stored as the trained model's.

The target is fixed on the trained model: a target that asks for the model's prediction (``auto``, ``next``,
``mask``, ``cls``) would pick another class or token on the randomised model, and a change of the explained output is
not the check. It is rewritten as the string naming the trained model's class or token (``class:K``,
``token:WORD``), checked to resolve to the same row and index; where no string does (a prediction at
``position:N``, a token with no spelling of its own), the example has no value.

Lower is more sensitive to the model: every metric has ``higher_is_better`` False, and the evaluation flags, it does not
rank (``ranked = False``); a method whose median |ρ| at the full cascade is at or above :attr:`Randomisation.threshold`
is flagged as insensitive (:meth:`Randomisation.insensitive`). No floor: what it compares with is the method itself.
The ``random`` method scores a text the same on every model (it is seeded by the text alone), so its row is ρ = 1: the
check's example of an explanation independent of the model, which is flagged. Cost: one more attribution per level,
method and example, and one copy of the model per level kept in memory.
"""
from __future__ import annotations

import copy
import hashlib
from typing import Optional

import numpy as np
import torch
from torch import nn

from attrbench.plugin import Evaluation, Example, InputError, Param, TransformerAdapter, register, spearman
from attrbench.plugin.internal import non_special, resolve_text

LEVELS = ("top", "all")  # the blocks re-initialised with the head: the last one, every one
OUTPUT_SIDE = ("pooler", "project_out")  # modules inside a base model that act after its last block
MIN_TOKENS = 3  # fewer non-special tokens give no meaningful rank correlation


def blocks_at(adapter, level: str) -> int:
    """How many of the top blocks ``level`` re-initialises."""
    return 1 if level == "top" else adapter.n_layers


def reinitialised(adapter, blocks: int) -> list[str]:
    """Names (in ``adapter.model``) of the modules a level re-initialises: the head and the top ``blocks`` blocks."""
    model = adapter.model
    names = {id(m): n for n, m in model.named_modules()}
    base = model.base_model
    head = [n for n, m in model.named_children() if m is not base] if base is not model else []
    prefix = names[id(base)] + "." if base is not model else ""
    head += [prefix + n for n, m in base.named_modules() if n and n.rsplit(".", 1)[-1] in OUTPUT_SIDE]
    if adapter.final_norm is not None:
        head.append(names[id(adapter.final_norm)])
    top = [names[id(block)] for block in adapter.blocks[adapter.n_layers - blocks:]]
    return [n for n in dict.fromkeys(head + top) if any(True for _ in model.get_submodule(n).parameters())]


def randomised(adapter, blocks: int, seed: int) -> TransformerAdapter:
    """A copy of ``adapter`` with its head and top ``blocks`` blocks re-initialised (seeded); ``adapter`` is
    untouched."""
    chosen = reinitialised(adapter, blocks)
    clone = copy.deepcopy(adapter.model)
    modules = [clone.get_submodule(n) for n in chosen]
    kept = {id(p) for n, p in clone.named_parameters(remove_duplicate=False)  # every name a parameter has
            if not any(n.startswith(c + ".") for c in chosen)}
    for module in modules:  # untie what is shared with a kept module (a tied LM head): a fresh tensor in the copy
        for sub in module.modules():
            for name, param in list(sub.named_parameters(recurse=False)):
                if id(param) in kept:
                    setattr(sub, name, nn.Parameter(param.detach().clone(), requires_grad=param.requires_grad))
    if hasattr(clone.config, "tie_word_embeddings"):
        clone.config.tie_word_embeddings = False
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in modules:
            module.to(device="cpu", dtype=torch.float32)
            for sub in module.modules():  # transformers marks loaded weights initialised, and init skips those
                for tensor in [sub, *sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                    tensor.__dict__.pop("_is_hf_initialized", None)
            module.apply(clone._init_weights)
            module.to(device=adapter.device, dtype=adapter.dtype)
    label = f"randomised(top={blocks},seed={seed})"
    out = TransformerAdapter(clone, adapter.tokenizer, f"{adapter.name}@{label}", source=adapter.source)
    out.weights_sha256 = hashlib.sha256(f"{adapter.weights_sha256}@{label}".encode()).hexdigest()
    return out


def fixed_target(adapter, ids: list[int], written: str, resolved) -> Optional[str]:
    """``written`` as a target string that explains on any weights what it explains on ``adapter``'s (the class or
    token ``resolved`` picked), or None where no string names it."""
    target = resolved.target
    if resolved.head is None or target.kind in ("class", "token", "contrast"):
        return written  # a row alone, or an index the string names: the same on every weights
    if resolved.head in ("classifier", "token_classifier"):
        candidates = [f"class:{resolved.index}"]
    else:
        word = adapter.tokenizer.decode([resolved.index])
        candidates = list(dict.fromkeys([f"token:{word}", f"token:{word.strip()}"]))
    for candidate in candidates:
        try:
            check = resolve_text(adapter, ids, candidate)
        except InputError:
            continue
        if (check.row, check.index, check.contrast_index) == (resolved.row, resolved.index, resolved.contrast_index):
            return candidate
    return None


class Randomisation(Evaluation):
    """``threshold``: a method whose median |ρ| at the full cascade (``spearman_all``) is at or above it is flagged as
    insensitive to the model (its explanation survives the loss of everything the model learned above the
    embeddings)."""

    name, family = "randomisation", "sanity"
    description = ("per example, Spearman between the attribution on the trained model and on the model with its head "
                   "and top block (top) or every block (all) re-initialised; high means insensitive to the model")
    reference = "Adebayo et al. 2018 (Sanity Checks for Saliency Maps), cascading model randomisation"
    params = {"seed": Param(0, "seed of the re-initialisation", minimum=0)}
    ranked = False
    primary_metric = "spearman_all"
    higher_is_better = {"spearman_top": False, "spearman_all": False}
    bounds = {"spearman_top": (-1.0, 1.0), "spearman_all": (-1.0, 1.0)}
    metric_names = {"spearman_top": "Spearman with the top-randomised model",
                    "spearman_all": "Spearman with the fully randomised model"}
    undefined_when = dict.fromkeys(("spearman_top", "spearman_all"),
                                   "fewer than 3 scored tokens, a target no string names, or the method's scores "
                                   "constant on the trained or the re-initialised model: no rank correlation")
    record_fields = ("threshold",)
    threshold = 0.5

    def takes(self, method) -> bool:
        return super().takes(method) and method.family != "external"

    def check(self, adapter, methods, context) -> None:
        for method in methods:
            if method.family == "external":
                raise InputError(f"'{method.name}' was computed by another tool, so it cannot be recomputed on the "
                                 "randomised model that 'randomisation' compares it with")
        super().check(adapter, methods, context)

    def randomised(self, work, level: str) -> TransformerAdapter:
        """The randomised copy of the example's model at ``level`` (made once per process)."""
        adapter, blocks = work.adapter, blocks_at(work.adapter, level)
        key = ("randomised", adapter.weights_sha256, str(adapter.dtype), str(adapter.device), blocks, self.seed)
        return work.workspace.memo(key, lambda: randomised(adapter, blocks, self.seed))

    def payload(self, work, method) -> dict:
        """One method's payload on one example: ρ at each level (None where undefined) and the threshold."""
        out = {"threshold": self.threshold, **dict.fromkeys(self.higher_is_better)}
        keep = non_special(work.adapter, work.ids)
        target = fixed_target(work.adapter, work.ids, work.example.target, work.resolved)
        if len(keep) < MIN_TOKENS or target is None:
            return out
        trained = work.attribution(method).values
        example = Example(work.example.id, work.example.text, target, work.example.meta)
        for level in LEVELS:
            other = work.workspace.attribution(self.randomised(work, level), method, example).values
            out[f"spearman_{level}"] = spearman(np.asarray(trained)[keep], np.asarray(other)[keep])
        return out

    # It recomputes each method on the randomised models, so it needs the method, not only its result (``score``):
    # the per-example payload comes through ``payload_by_run``, one example at a time as a scoring evaluation's would.
    def payload_by_run(self, work, method, context) -> dict:
        return self.payload(work, method)

    def run(self, adapter, methods, examples, context):
        works = [context.work(adapter, e) for e in examples]
        summaries = self.summarise({m.key: [self.payload(w, m) for w in works] for m in methods}, [None] * len(works))
        return [self.record(adapter, context, method, metric, entry["values"], examples,
                            **{k: v for k, v in entry.items() if k != "values"})
                for method in methods for metric, entry in summaries[method.key].items()]

    @classmethod
    def insensitive(cls, values) -> Optional[bool]:
        """Whether per-example ρ ``values`` (None where undefined) flag a method: median |ρ| ≥ ``threshold``."""
        defined = [abs(v) for v in values if v is not None]
        return None if not defined else bool(np.median(defined) >= cls.threshold)


register(Randomisation)
