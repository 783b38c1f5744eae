"""Your own data: a JSONL, CSV, TSV or parquet file as a dataset (``--dataset PATH``).

Each row is one example, in one of two layouts (other fields are ignored):

- **text rows**: ``text`` and what it is explained for, either ``label`` (a class index, or a label
  name from the model's ``id2label``) or ``target`` in the CLI's syntax (``class:K``, ``token:W``,
  ``contrast:A/B``, ``position:N``, ``next``, ``mask``, or ``auto`` for the model's prediction);
  optionally ``id`` and a human rationale: ``rationale`` (indices of the whitespace-separated words
  of ``text``) or ``rationale_mask`` (0/1 per word); and a known answer for the ``ground_truth``
  evaluation: ``evidence`` (the word indices that decide the output, e.g. a planted shortcut or the
  subject of an agreement verb) and optionally ``attractors`` (word indices that should rank below it).
- **minimal pairs** (the BLiMP layout): ``sentence_good`` and ``sentence_bad``, the same sentence
  but for one word. The target is the contrast at that word (``datasets.contrast_reading``): a
  causal LM explains logit(good) − logit(bad) for the next token after the shared prefix, a masked
  LM the same at a mask in its place. Pairs that differ in more than one place, or whose two words
  are not single tokens, are skipped and counted in the notes, never scored.

Rows are read with the standard library's ``csv`` and ``json`` rather than pandas or HF
``datasets``, because those do not say which line of the file a row came from, and every error here
names it. CSV and TSV use the usual quoting (``"`` around fields holding the delimiter or a line
break, as pandas and spreadsheet programs write them). Nothing is scored on a guessed target: a row
without one, a label the model does not have or a target that does not fit the model is an error
naming its line.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..errors import InputError
from ..ops.hashing import file_sha256
from ..ops.targets import Target, head_kind, resolve
from .agreement import contrast_reading
from .base import Dataset, Example
from .text import json_lines, read_text

DELIMITERS = {".csv": ",", ".tsv": "\t"}
SUFFIXES = (".jsonl", ".csv", ".tsv", ".parquet")
TARGETS = {"text": "text rows: as each row gives it (label or target)",
           "minimal pairs": "minimal pairs: logit(good) - logit(bad) at the differing word"}
HEADS = {"classifier": "a sequence classifier", "token_classifier": "a token-classification probe",
         "masked_lm": "a masked LM", "causal_lm": "a causal LM", None: "a bare model without an output head"}
PAIR_FIELDS = {"sentence_good", "sentence_bad"}
PAIR_WORD = re.compile(r"\w+|[^\w\s]")  # minimal pairs compare words and punctuation marks separately


def looks_like_file(name: str) -> bool:
    return Path(name).suffix.lower() in SUFFIXES


def read_rows(path: Path) -> list[tuple[int, dict]]:
    """(line, fields) per row; JSONL values keep their JSON types, CSV/TSV values are strings."""
    rows = []
    if path.suffix.lower() == ".parquet":
        rows = _parquet_rows(path)
    elif path.suffix.lower() == ".jsonl":
        for line_no, obj in json_lines(path):
            if not isinstance(obj, dict):
                raise InputError(f"{path} line {line_no}: each line must be a JSON object such as "
                                 '{"text": "...", "label": 1}')
            rows.append((line_no, obj))
    else:
        text = read_text(path, "utf-8-sig")  # a byte-order mark (as spreadsheet programs write) is not a field
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=DELIMITERS[path.suffix.lower()])
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InputError(f"{path} is empty; expected a header row such as text,label") from None
        except csv.Error as err:
            raise InputError(f"{path} line 1: {err}") from None
        duplicated = sorted({h for h in header if header.count(h) > 1})
        if duplicated:
            raise InputError(f"{path} line 1: column {duplicated[0]!r} appears twice in the header")
        start = reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as err:
                raise InputError(f"{path} line {start}: {err}") from None
            if any(cell.strip() for cell in row):
                if len(row) != len(header):
                    raise InputError(f"{path} line {start}: {len(row)} fields, but the header has {len(header)}; "
                                     "quote fields that hold the delimiter")
                rows.append((start, dict(zip(header, row))))
            start = reader.line_num + 1
    if not rows:
        raise InputError(f"{path} has no rows; each row needs text (with label or target) or "
                         "sentence_good and sentence_bad")
    return rows


def _parquet_rows(path: Path) -> list[tuple[int, dict]]:
    """(row number from 1, fields) of a parquet file, values as Python types (a missing value is left out)."""
    import pyarrow.parquet as pq  # heavy: only for parquet files
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a damaged or foreign file
        raise InputError(f"{path} is not a readable parquet file ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'no detail'})") from None
    names = table.column_names
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputError(f"{path}: column {duplicated[0]!r} appears twice")
    return [(k + 1, {str(key): v for key, v in row.items() if v is not None})
            for k, row in enumerate(table.to_pylist())]


class FileDataset(Dataset):
    """A local JSONL/CSV/TSV file read as a dataset (see the module docstring for its fields)."""

    family = "your data"
    default_split = "all"

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = str(path)
        self.description = f"local file {self.path.name}"
        self.reference = f"{self.path.resolve()}"
        self.files = {"all": str(self.path)}
        if not self.path.is_file():
            raise InputError(f"dataset file {self.path} does not exist")

    def file(self, split: str, data_dir=None) -> Path:
        self._check_split(split)
        return self.path

    def _check_split(self, split: str) -> None:
        if split != "all":
            raise InputError(f"{self.path} is one file and has no split '{split}'; leave --split out")

    def examples(self, adapter, split: str, data_dir=None) -> tuple[list[Example], dict]:
        self._check_split(split)
        head = head_kind(adapter)
        examples, seen, counts = [], {}, {"multi_token": 0, "not_one_word_difference": 0, "no_left_context": 0}
        layouts = set()
        for line, fields in read_rows(self.path):
            where = f"{self.path} line {line}"
            values = {k: v for k, v in fields.items() if v is not None and v != ""}
            pair = bool(PAIR_FIELDS & set(values))
            if "text" in values and pair:
                raise InputError(f"{where}: give text or sentence_good/sentence_bad, not both")
            if "text" in values:
                layouts.add("text")
                example = self._text_example(adapter, head, where, line, values)
            elif pair:
                layouts.add("minimal pairs")
                example = self._pair_example(adapter, head, where, line, values)
                if isinstance(example, str):
                    counts[example] += 1
                    continue
            else:
                raise InputError(f"{where}: needs a text field (with label or target), or sentence_good and "
                                 f"sentence_bad; found {', '.join(sorted(values)) or 'no fields'}")
            if example.id in seen:
                raise InputError(f"{where}: id {example.id.split(':', 1)[1]!r} is already used on line "
                                 f"{seen[example.id]}; ids must be unique")
            seen[example.id] = line
            examples.append(example)
        skipped = sum(counts.values())
        if not examples:
            raise InputError(f"{self.path} has no usable row for '{adapter.name}': all {skipped} minimal pairs were "
                             f"skipped ({_counted(counts)})")
        notes = {"split": "all", "data_file": str(self.path.resolve()), "file_sha256": file_sha256(self.path),
                 "layout": " and ".join(sorted(layouts)),
                 "target": "; ".join(TARGETS[layout] for layout in sorted(layouts)),
                 "with_rationale": sum("rationale" in e.meta for e in examples),
                 "with_evidence": sum("evidence" in e.meta for e in examples)}
        if "minimal pairs" in layouts:
            notes.update({f"skipped_{k}": v for k, v in counts.items()})
        return examples, notes

    # -- one row each ---------------------------------------------------------------------------
    def _example_id(self, where: str, line: int, values: dict) -> str:
        given = values.get("id")
        if given is None:
            return f"{self.path.stem}:{line}"
        if isinstance(given, bool) or not isinstance(given, (str, int)) or not str(given).strip():
            raise InputError(f"{where}: id must be a non-empty string or integer, not {given!r}")
        return f"{self.path.stem}:{str(given).strip()}"

    def _text_example(self, adapter, head, where, line, values) -> Example:
        text = values["text"]
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: text must be a non-empty string")
        text = text.strip()
        if "label" in values and "target" in values:
            raise InputError(f"{where}: give label or target, not both")
        if "label" in values:
            target = Target("class", label=self._label(adapter, head, where, values["label"]))
        elif "target" in values:
            if not isinstance(values["target"], str):
                raise InputError(f"{where}: target must be a string such as class:1 or token:WORD")
            try:
                target = Target.parse(values["target"].strip())
            except InputError as err:
                raise InputError(f"{where}: {err}") from None
        else:
            raise InputError(f"{where}: no target: give label (a class) or target (e.g. token:WORD, "
                             "contrast:GOOD/BAD, or auto for the model's prediction)")
        try:  # the target fits this model and this text (no forward pass needed for that)
            resolve(adapter, adapter.tokenizer(text)["input_ids"], target, predict=False)
        except InputError as err:  # the CLI's wording ("--target X") is this file's field ("target X")
            raise InputError(f"{where}: {str(err).replace('--target ', 'target ')}") from None
        meta = {"line": line}
        rationale = self._rationale(where, text, values)
        if rationale is not None:
            meta["rationale"] = rationale
        for key in ("evidence", "attractors"):  # the known answer, for the ground_truth evaluation
            if key in values:
                meta[key] = self._word_indices(where, key, values[key], len(text.split()))
        return Example(self._example_id(where, line, values), text, str(target), meta)

    def _label(self, adapter, head, where, label) -> int:
        if head not in ("classifier", "token_classifier"):
            raise InputError(f"{where}: a label (class target) needs a classifier or a probe; '{adapter.name}' is "
                             f"{HEADS[head]}: give target instead (e.g. token:WORD or contrast:GOOD/BAD)")
        id2label = {int(k): v for k, v in (getattr(adapter.model.config, "id2label", None) or {}).items()}
        if isinstance(label, str) and re.fullmatch(r"\s*-?\d+\s*", label):
            label = int(label)
        if isinstance(label, int) and not isinstance(label, bool):
            if not 0 <= label < adapter.model.config.num_labels:
                raise InputError(f"{where}: label {label} does not exist: '{adapter.name}' has classes "
                                 f"0..{adapter.model.config.num_labels - 1}")
            return label
        names = {str(v): k for k, v in id2label.items()}
        if not isinstance(label, str) or label.strip() not in names:
            raise InputError(f"{where}: label {label!r} is not one of {adapter.name}'s labels: "
                             + ", ".join(f"{k} ({v})" for k, v in sorted(id2label.items())))
        return names[label.strip()]

    def _rationale(self, where, text, values) -> list[int] | None:
        """Sorted word indices a person marked, from ``rationale`` (indices) or ``rationale_mask`` (0/1 per word)."""
        if "rationale" in values and "rationale_mask" in values:
            raise InputError(f"{where}: give rationale (word indices) or rationale_mask (0/1 per word), not both")
        key = "rationale" if "rationale" in values else "rationale_mask" if "rationale_mask" in values else None
        if key is None:
            return None
        n_words = len(text.split())
        items = _int_list(values[key])
        if items is None:
            raise InputError(f"{where}: {key} must be a list of integers, e.g. [0, 3] or \"0 3\"")
        if key == "rationale_mask":
            if len(items) != n_words or set(items) - {0, 1}:
                raise InputError(f"{where}: rationale_mask must be {n_words} values of 0 or 1, one per word of text "
                                 f"(got {len(items)})")
            return [k for k, v in enumerate(items) if v]
        return self._word_indices(where, key, items, n_words)

    @staticmethod
    def _word_indices(where, key, value, n_words) -> list[int]:
        """Sorted distinct word indices of text (rationale, evidence, attractors), each checked to exist."""
        items = _int_list(value)
        if items is None:
            raise InputError(f"{where}: {key} must be a list of integers, e.g. [0, 3] or \"0 3\"")
        outside = [k for k in items if not 0 <= k < n_words]
        if outside:
            raise InputError(f"{where}: {key} index {outside[0]} is outside the {n_words} words of text "
                             f"(indices 0..{n_words - 1})")
        return sorted(set(items))

    def _pair_example(self, adapter, head, where, line, values) -> Example | str:
        good, bad = values.get("sentence_good"), values.get("sentence_bad")
        if not isinstance(good, str) or not isinstance(bad, str) or not good.strip() or not bad.strip():
            raise InputError(f"{where}: a minimal pair needs both sentence_good and sentence_bad as non-empty text")
        if head not in ("masked_lm", "causal_lm"):
            raise InputError(f"{where}: minimal pairs are read as a word contrast, which needs a masked or causal LM; "
                             f"'{adapter.name}' is {HEADS[head]}")
        if any(k in values for k in ("rationale", "rationale_mask", "evidence", "attractors")):
            raise InputError(f"{where}: a rationale or evidence marks words of text; minimal-pair rows cannot have one")
        a, b = list(PAIR_WORD.finditer(good.strip())), list(PAIR_WORD.finditer(bad.strip()))
        differ = [k for k, (x, y) in enumerate(zip(a, b)) if x.group() != y.group()]
        if len(a) != len(b) or len(differ) != 1:
            return "not_one_word_difference"
        word, sentence = a[differ[0]], good.strip()
        reading = contrast_reading(adapter, head, sentence[:word.start()], sentence[word.end():], word.group(),
                                   b[differ[0]].group())
        if isinstance(reading, str):
            return reading
        text, target = reading
        return Example(self._example_id(where, line, values), text, target,
                       {"line": line, "good": word.group(), "bad": b[differ[0]].group()})


def _int_list(value) -> list[int] | None:
    """A JSON list of integers, or (from CSV/TSV) text such as "[0, 3]", "0 3" or "0,3"."""
    if isinstance(value, str):
        parts = [p for p in re.split(r"[\s,]+", value.strip().strip("[]")) if p]
        if not all(re.fullmatch(r"-?\d+", p) for p in parts):
            return None
        return [int(p) for p in parts]
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _counted(counts: dict) -> str:
    return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) or "none"
