"""Readers of the shipped data files (SST-2, the SVA sets): malformed rows name their file and line.

The files' places under the data folder are declared here, once: the dataset plugins serve them and
the task models are trained on them (``attrbench.models.training``).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from ..errors import InputError
from .base import PACKAGE_DATA, data_path
from .text import read_text

SST2_FILES = {"train": "sst2/train.tsv", "dev": "sst2/dev.tsv", "test": "sst2/test_unlabeled_glue.tsv"}
SVA_FILES = {"sva-linzen": "sva/linzen_testset.tsv", "sva-generated": "sva/generated_en.tsv"}
# per SVA set, the subject's and attractors' word positions of its rows (a dependency parse; data/README.md)
SVA_EVIDENCE = {"sva-linzen": "sva/linzen_evidence.tsv"}
SVA_COLUMNS = ["n_attractors", "orig_sentence", "masked_sentence", "correct_verb", "wrong_verb", "verb_index",
               "correct_is_singular"]


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


def sst2_file(split: str, data_dir=None) -> Path:
    if split not in SST2_FILES:
        raise InputError(f"sst2 has splits {', '.join(SST2_FILES)}, not '{split}'")
    return data_path(SST2_FILES[split], data_dir)


def read_sst2(split: str, data_dir=None) -> list[dict]:
    """``[{"row", "sentence", "label"}]``; test rows have label None."""
    path = sst2_file(split, data_dir)
    if split == "test":
        return [{"row": k, "sentence": r["sentence"], "label": None}
                for k, r in enumerate(read_tsv(path, ["index", "sentence"]))]
    return [{"row": k, "sentence": r["sentence"], "label": _int(r, "label", path, {0, 1})}
            for k, r in enumerate(read_tsv(path, ["sentence", "label"]))]


def sva_file(name: str, data_dir=None) -> Path:
    return data_path(SVA_FILES[name], data_dir)


def read_sva(name: str, data_dir=None) -> list[dict]:
    """The rows of an SVA set (``sva-linzen`` or ``sva-generated``), each checked to point at its verb."""
    path = sva_file(name, data_dir)
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
    for k, (subject, attractors) in read_sva_evidence(name, data_dir).items():
        if not 0 <= subject < rows[k]["verb_index"] or any(not 0 <= a < rows[k]["verb_index"] for a in attractors):
            raise InputError(f"{SVA_EVIDENCE[name]} row {k}: a subject or attractor position is not before the verb")
        rows[k].update(evidence=[subject], attractors=attractors)
    return rows


def read_sva_evidence(name: str, data_dir=None) -> dict[int, tuple[int, list[int]]]:
    """{row: (subject word index, attractor word indices)} of an SVA set's rows with known evidence ({} if none)."""
    if name not in SVA_EVIDENCE or not (Path(data_dir or PACKAGE_DATA) / SVA_EVIDENCE[name]).is_file():
        return {}
    path = data_path(SVA_EVIDENCE[name], data_dir)
    out = {}
    for r in read_tsv(path, ["row", "subject", "attractors"]):
        row = _int(r, "row", path)
        attractors = [int(a) for a in r["attractors"].split(",") if a.strip()]
        out[row] = (_int(r, "subject", path), attractors)
    return out
