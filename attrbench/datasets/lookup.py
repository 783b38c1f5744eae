"""Finding a dataset by name (a registered plugin, or a file of the user's) and sampling its examples.

Sampling is seeded and every example carries a stable id (``dataset:split:row``) recorded with each result.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..errors import InputError
from ..registry import DATASETS
from .base import Dataset, Example
from .files import FileDataset, looks_like_file


def examples_for(adapter, dataset: str, split: Optional[str] = None, data_dir=None,
                 params: Optional[dict] = None) -> tuple[list[Example], dict]:
    """All examples of ``dataset`` as ``adapter`` reads them, and notes (split, skipped rows, file hash).
    ``params``: the dataset plugin's parameters (e.g. sst2's ``target``).

    Texts longer than the model's positions are left out (and counted), never truncated: a cut
    could remove the very word the target reads.
    """
    plugin = dataset_plugin(dataset).with_params(**(params or {}))
    examples, notes = plugin.examples(adapter, split or plugin.default_split, data_dir)
    if plugin.params:
        notes["dataset_params"] = plugin.get_params()
    lengths = [len(ids) for ids in adapter.tokenizer([e.text for e in examples])["input_ids"]]
    fits = [e for e, n in zip(examples, lengths) if n <= adapter.max_positions]
    notes["skipped_too_long"] = len(examples) - len(fits)
    return fits, notes


def dataset_plugin(name: str) -> Dataset:
    """A registered dataset by name, or a local .jsonl/.csv/.tsv/.parquet file (``attrbench.datasets.files``)
    by path."""
    if name in DATASETS.names():
        return DATASETS.get(name)
    if looks_like_file(name):
        return FileDataset(name)
    raise InputError(f"unknown dataset '{name}'; registered: {', '.join(DATASETS.names())}; or give the path of "
                     "a .jsonl, .csv, .tsv or .parquet file (docs/own-data.md)")


def sample(examples: list[Example], n: Optional[int], seed: int,
           usable: Optional[Callable[[Example], bool]] = None, skipped: Optional[list[str]] = None) -> list[Example]:
    """The first ``n`` examples of a seeded random order (all of them, in that order, when n is None or larger):
    the sample of size n is the start of the sample of size n + 1, so raising n extends a sample instead of
    drawing another (anytime runs grow their cells). Examples that ``usable`` refuses are passed over in that
    order, their ids appended to ``skipped``: the others keep their places (leaving them out of ``examples``
    would draw another order)."""
    if not examples:
        raise InputError("the dataset has no usable example for this model (all skipped)")
    if n is not None and n < 1:
        raise InputError(f"--n {n}: the sample must hold at least one example")
    if seed < 0:
        raise InputError(f"--seed {seed}: the sampling seed must be 0 or more")
    order = np.random.default_rng(seed).permutation(len(examples))
    chosen = []
    for k in order:
        if n is not None and len(chosen) == n:
            break
        if usable is None or usable(examples[k]):
            chosen.append(examples[k])
        elif skipped is not None:
            skipped.append(examples[k].id)
    return chosen
