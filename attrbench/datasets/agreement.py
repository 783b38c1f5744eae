"""Subject-verb agreement as each kind of model reads it (Ferrando et al. 2022, §4), and the probe's split.

The same SVA item reads differently per model kind:

- a verb-number probe (``minilm-l6-sva``) or a masked LM reads the sentence with the verb replaced
  by the mask token; the probe's target is the correct number class, a masked LM's the contrast of
  the correct and wrong verb forms at the mask;
- a causal LM reads the words before the verb, and its target is logit(correct) − logit(wrong) for
  the next token.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InputError
from ..ops.hashing import file_sha256
from ..ops.targets import head_kind
from .base import Dataset, Example

SVA_SPLIT_SEED = 0  # the probe's 70/15/15 split of the Linzen set; fixed so training and evaluation agree
SVA_SPLIT = (0.70, 0.15, 0.15)


def sva_split(n_rows: int, seed: int = SVA_SPLIT_SEED) -> dict[str, np.ndarray]:
    """The probe's seeded 70/15/15 train/val/test split of row indices."""
    order = np.random.default_rng(seed).permutation(n_rows)
    a, b = int(round(SVA_SPLIT[0] * n_rows)), int(round((SVA_SPLIT[0] + SVA_SPLIT[1]) * n_rows))
    return {"train": np.sort(order[:a]), "val": np.sort(order[a:b]), "test": np.sort(order[b:])}


def model_task(adapter) -> Optional[str]:
    """What an adapter's head can be evaluated on: 'sst2', 'sva' (probe), 'masked_lm', 'causal_lm', or None."""
    stamped = getattr(adapter.model.config, "attrbench_task", None)
    if stamped:
        return stamped
    kind = head_kind(adapter)
    if kind == "classifier" and adapter.model.config.num_labels == 2:
        return "sst2"  # any binary sentence classifier (e.g. a hub SST-2 model)
    return kind if kind in ("masked_lm", "causal_lm") else None


def _single_token(adapter, word: str) -> bool:
    text = " " + word if adapter.causal else word
    ids = adapter.tokenizer(text, add_special_tokens=False)["input_ids"]
    return len(ids) == 1 and ids[0] != adapter.tokenizer.unk_token_id


def contrast_reading(adapter, task: str, before: str, after: str, good: str, bad: str) -> tuple[str, str] | str:
    """How a language model reads the contrast of ``good`` and ``bad`` at the word between ``before`` and
    ``after``: (text, target), or the reason to skip the item ('multi_token', 'no_left_context').

    A causal LM reads the left context and explains logit(good) - logit(bad) for the next token; a
    masked LM reads the sentence with the word masked and explains the same at the mask. Both forms
    must be single tokens, or the contrast is not one logit difference.
    """
    if "/" in good or not (_single_token(adapter, good) and _single_token(adapter, bad)):
        return "multi_token"
    if task == "causal_lm":
        text = before.rstrip()
        if not text:
            return "no_left_context"
    else:
        text = f"{before}{adapter.tokenizer.mask_token}{after}"
    return text, f"contrast:{good}/{bad}"


def agreement_examples(adapter, dataset: Dataset, rows: list[dict], split: str, data_dir) -> tuple[list[Example], dict]:
    """Subject-verb agreement rows as ``adapter`` reads them (see the module docstring), and notes."""
    task = model_task(adapter)
    if task not in ("sva", "masked_lm", "causal_lm"):
        raise InputError(f"dataset {dataset.name} needs a verb-number probe, a masked LM or a causal LM; "
                         f"'{adapter.name}' is {task or 'a bare model without a head'}: use minilm-l6-sva or "
                         "smollm2-135m")
    examples, skipped = [], 0
    mask = adapter.tokenizer.mask_token
    for r in rows:
        meta = {"n_attractors": r["n_attractors"], "correct": r["correct"], "wrong": r["wrong"],
                "singular": r["singular"], **{k: r[k] for k in ("evidence", "attractors") if k in r}}
        if task == "sva":
            text, target = r["masked"].replace("***mask***", mask), f"class:{r['singular']}"
        else:
            words, i = r["words"], r["verb_index"]
            reading = contrast_reading(adapter, task, " ".join(words[:i]) + (" " if i else ""),
                                       (" " if i + 1 < len(words) else "") + " ".join(words[i + 1:]),
                                       r["correct"], r["wrong"])
            if isinstance(reading, str):
                skipped += 1  # a verb form of several tokens, or a verb-initial sentence for a causal LM
                continue
            text, target = reading
        examples.append(Example(f"{dataset.name}:{r['row']}", text, target, meta))
    notes = {"split": split, "skipped_multi_token_or_empty": skipped,
             "file_sha256": file_sha256(dataset.file("all", data_dir)),
             "target": {"sva": "the probe's class of the correct number", "masked_lm": "logit(correct) - "
                        "logit(wrong) at the mask (erasure metrics score its sigmoid, p(correct | {correct, wrong}))",
                        "causal_lm": "logit(correct) - logit(wrong) for the next token after the left context "
                        "(erasure metrics score its sigmoid, p(correct | {correct, wrong}))"}[task]}
    return examples, notes
