"""Datasets: the plugin base class, the shipped files' readers, and sampling.

Each dataset is a plugin (``attrbench/corpora/``, one file each, or a third party's through the
entry-point group ``attrbench.datasets``), or a user's JSONL/CSV/TSV file given by its path
(``attrbench.datafiles``); the shipped data is in ``attrbench/data`` (sources and licences in its
README). A dataset turns into :class:`Example` s for one model: the text the model reads and the
target it is explained for. The same SVA item reads differently per model kind (as in Ferrando et al. 2022, §4):

- a verb-number probe (``minilm-l6-sva``) or a masked LM reads the sentence with the verb replaced
  by the mask token; the probe's target is the correct number class, a masked LM's the contrast of
  the correct and wrong verb forms at the mask;
- a causal LM reads the words before the verb, and its target is logit(correct) − logit(wrong) for
  the next token.

Files are validated as they are read: a malformed row raises naming the file and line. Sampling is
seeded and every example carries a stable id (``dataset:split:row``) recorded with each result.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from .errors import InputError
from .models.zoo import file_sha256
from .registry import DATASETS
from .textfiles import read_text

PACKAGE_DATA = Path(__file__).parent / "data"
SVA_SPLIT_SEED = 0  # the probe's 70/15/15 split of the Linzen set; fixed so training and evaluation agree
SVA_SPLIT = (0.70, 0.15, 0.15)


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    target: str  # Target syntax: "class:1", "contrast:is/are", "auto" (the model's prediction)
    meta: dict = field(default_factory=dict, compare=False, hash=False)


class Dataset:
    """Base class of a dataset plugin: turns the rows of its files into examples with targets for a model.

    Subclasses set ``name``, ``family``, ``description``, ``reference`` (source and licence),
    ``files`` (split -> path under the data folder) and ``default_split``, and implement
    :meth:`examples`. Built-ins live in ``attrbench/corpora/``; third parties register through the
    entry-point group ``attrbench.datasets``.
    """

    kind = "dataset"
    name: str = ""
    family: str = ""
    description: str = ""
    reference: str = ""
    files: dict = {}
    splits: tuple = ()  # the splits it serves, when they are not just the file keys
    default_split: str = "all"

    def examples(self, adapter, split: str, data_dir=None) -> tuple[list["Example"], dict]:
        """All examples of ``split`` as ``adapter`` reads them, and notes (split, target, file sha256, skips)."""
        raise NotImplementedError

    def file(self, split: str, data_dir=None) -> Path:
        if split not in self.files:
            raise InputError(f"{self.name} has splits {', '.join(self.files)}, not '{split}'")
        return data_path(self.files[split], data_dir)


SVA_COLUMNS = ["n_attractors", "orig_sentence", "masked_sentence", "correct_verb", "wrong_verb", "verb_index",
               "correct_is_singular"]


def data_path(relative: str, data_dir: Optional[str | Path] = None) -> Path:
    path = Path(data_dir or PACKAGE_DATA) / relative
    if not path.is_file():
        raise InputError(f"data file {path} is missing; reinstall attrbench or point --data-dir at a folder "
                         f"holding {relative}")
    return path


def read_tsv(path: Path, header: list[str]) -> list[dict]:
    """Rows of a tab-separated file whose header starts with ``header``; malformed rows name their line."""
    text = read_text(path)
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            first = next(reader)
        except StopIteration:
            raise InputError(f"{path} is empty; expected a header {'<TAB>'.join(header)}") from None
        if first[:len(header)] != header:
            raise InputError(f"{path} line 1: header {first[:len(header)]} is not {header}")
        rows = []
        for row in reader:
            if len(row) != len(first):
                raise InputError(f"{path} line {reader.line_num}: {len(row)} tab-separated fields, expected "
                                 f"{len(first)}")
            rows.append(dict(zip(first, row), _line=reader.line_num))
    if not rows:
        raise InputError(f"{path} has a header but no rows")
    return rows


def _int(row: dict, key: str, path: Path, allowed=None) -> int:
    try:
        value = int(row[key])
    except ValueError:
        value = None
    if value is None or (allowed is not None and value not in allowed):
        raise InputError(f"{path} line {row['_line']}: {key} '{row[key]}' is not "
                         + (f"one of {sorted(allowed)}" if allowed is not None else "an integer"))
    return value


def read_sst2(split: str, data_dir=None) -> list[dict]:
    """``[{"row", "sentence", "label"}]``; test rows have label None."""
    path = DATASETS.get("sst2").file(split, data_dir)
    if split == "test":
        return [{"row": k, "sentence": r["sentence"], "label": None}
                for k, r in enumerate(read_tsv(path, ["index", "sentence"]))]
    return [{"row": k, "sentence": r["sentence"], "label": _int(r, "label", path, {0, 1})}
            for k, r in enumerate(read_tsv(path, ["sentence", "label"]))]


def read_sva(name: str, data_dir=None) -> list[dict]:
    path = DATASETS.get(name).file("all", data_dir)
    rows = []
    for k, r in enumerate(read_tsv(path, SVA_COLUMNS)):
        words = r["orig_sentence"].split()
        index = _int(r, "verb_index", path)
        if not 0 <= index < len(words) or words[index] != r["correct_verb"] or "***mask***" not in r["masked_sentence"]:
            raise InputError(f"{path} line {r['_line']}: verb_index {index} does not point at the verb "
                             f"'{r['correct_verb']}' (or masked_sentence has no ***mask***)")
        rows.append({"row": k, "words": words, "verb_index": index, "masked": r["masked_sentence"],
                     "correct": r["correct_verb"], "wrong": r["wrong_verb"],
                     "singular": _int(r, "correct_is_singular", path, {0, 1}),
                     "n_attractors": _int(r, "n_attractors", path)})
    return rows


def sva_split(n_rows: int, seed: int = SVA_SPLIT_SEED) -> dict[str, np.ndarray]:
    """The probe's seeded 70/15/15 train/val/test split of row indices."""
    order = np.random.default_rng(seed).permutation(n_rows)
    a, b = int(round(SVA_SPLIT[0] * n_rows)), int(round((SVA_SPLIT[0] + SVA_SPLIT[1]) * n_rows))
    return {"train": np.sort(order[:a]), "val": np.sort(order[a:b]), "test": np.sort(order[b:])}


def model_task(adapter) -> Optional[str]:
    """What an adapter's head can be evaluated on: 'sst2', 'sva' (probe), 'masked_lm', 'causal_lm', or None."""
    from .targets import head_kind

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


def examples_for(adapter, dataset: str, split: Optional[str] = None, data_dir=None) -> tuple[list[Example], dict]:
    """All examples of ``dataset`` as ``adapter`` reads them, and notes (split, skipped rows, file hash).

    Texts longer than the model's positions are left out (and counted), never truncated: a cut
    could remove the very word the target reads.
    """
    examples, notes = _examples(adapter, dataset, split, data_dir)
    lengths = [len(ids) for ids in adapter.tokenizer([e.text for e in examples])["input_ids"]]
    fits = [e for e, n in zip(examples, lengths) if n <= adapter.max_positions]
    notes["skipped_too_long"] = len(examples) - len(fits)
    return fits, notes


def _examples(adapter, dataset: str, split: Optional[str], data_dir) -> tuple[list[Example], dict]:
    plugin = dataset_plugin(dataset)
    return plugin.examples(adapter, split or plugin.default_split, data_dir)


def dataset_plugin(name: str) -> Dataset:
    """A registered dataset by name, or a local .jsonl/.csv/.tsv file (``attrbench.datafiles``) by path."""
    from .datafiles import FileDataset, looks_like_file

    if name in DATASETS.names():
        return DATASETS.get(name)
    if looks_like_file(name):
        return FileDataset(name)
    raise InputError(f"unknown dataset '{name}'; registered: {', '.join(DATASETS.names())}; or give the path of "
                     "a .jsonl, .csv or .tsv file (see README, \"Your own data\")")


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
                "singular": r["singular"]}
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
             "target": {"sva": "probe class of the correct number", "masked_lm": "logit(correct) - logit(wrong) at "
                        "the mask", "causal_lm": "logit(correct) - logit(wrong) for the next token after the "
                        "left context"}[task]}
    return examples, notes


def sample(examples: list[Example], n: Optional[int], seed: int) -> list[Example]:
    """A seeded sample of ``n`` examples (all when n is None or larger), in file order."""
    if not examples:
        raise InputError("the dataset has no usable example for this model (all skipped)")
    if n is not None and n < 1:
        raise InputError(f"--n {n}: the sample must hold at least one example")
    if seed < 0:
        raise InputError(f"--seed {seed}: the sampling seed must be 0 or more")
    if n is None or n >= len(examples):
        return list(examples)
    picked = np.sort(np.random.default_rng(seed).choice(len(examples), size=n, replace=False))
    return [examples[k] for k in picked]
