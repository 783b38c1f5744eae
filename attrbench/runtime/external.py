"""Scoring attributions computed by another tool, so any explainer can be put on the leaderboard.

The input is JSON lines, one object per example::

    {"id": "sst2:dev:17", "tokens": ["[CLS]", "a", ...], "scores": [0.1, ...]}

``id`` names a dataset example (as attrbench records them); ``text`` may be given instead and is
matched to the dataset's text. ``tokens`` (or ``input_ids``) must be the model's own tokenisation of
that text, special tokens included, so every score lands on the token it was meant for; a mismatch
is an error naming the line, never a silent realignment.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets.text import json_lines
from ..errors import InputError
from ..params import Param
from ..plugin.method import Method, MethodResult


class Precomputed(Method):
    """A method whose scores were computed elsewhere, keyed by text; ``file`` names where they came from."""

    family, output = "external", "scores"
    description = "attributions computed by another tool"
    params = {"file": Param("", "the JSON-lines file the attributions were read from")}

    def __init__(self, name: str, by_text: dict[str, tuple[list[str], np.ndarray]], file: str = ""):
        self.name, self.by_text, self.file = name, by_text, file

    def run(self, adapter, texts, *, targets, layers, truncate):
        results = []
        for text in texts:
            if text not in self.by_text:
                raise InputError(f"no external attributions for text '{text[:60]}'")
            tokens, scores = self.by_text[text]
            results.append(MethodResult(self.name, adapter.name, tokens, scores, None))
        return results


def read_attributions(adapter, path: str | Path, examples) -> tuple[Precomputed, list]:
    by_id = {e.id: e for e in examples}
    by_text = {e.text: e for e in examples}
    path = Path(path)
    if not path.is_file():
        raise InputError(f"attributions file {path} does not exist")
    chosen, table, seen = [], {}, {}
    for line_no, obj in json_lines(path):
        where = f"{path} line {line_no}"
        if not isinstance(obj, dict) or "scores" not in obj or not ({"tokens", "input_ids"} & set(obj)):
            raise InputError(f"{where}: needs \"scores\" and \"tokens\" (or \"input_ids\")")
        key = "id" if "id" in obj else "text"
        if not isinstance(obj.get(key), str):
            raise InputError(f"{where}: \"{key}\" must be a string (give \"id\" as attrbench records it, or \"text\")")
        example = by_id.get(obj["id"]) if key == "id" else by_text.get(obj["text"].strip())
        if example is None:
            raise InputError(f"{where}: example {obj[key][:60]!r} is not in this dataset for this model (give an "
                             "id like those attrbench records, or the exact text)")
        if example.text in seen:
            raise InputError(f"{where}: example {example.id} is already given on line {seen[example.text]}")
        ids = adapter.tokenizer(example.text)["input_ids"]
        tokens = adapter.tokenizer.convert_ids_to_tokens(ids)
        given = obj.get("tokens", obj.get("input_ids"))
        field = "tokens" if "tokens" in obj else "input_ids"
        if not isinstance(given, list) or not all(isinstance(g, str if field == "tokens" else int)
                                                  and not isinstance(g, bool) for g in given):
            raise InputError(f"{where}: \"{field}\" must be a list of {'strings' if field == 'tokens' else 'integers'}")
        if given != (tokens if field == "tokens" else ids):
            raise InputError(f"{where}: {field} differ from {adapter.name}'s tokenisation of the text "
                             f"({len(given)} given, {len(tokens)} expected); attribute the model's own tokens")
        raw_scores = obj["scores"]
        if not isinstance(raw_scores, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                       for v in raw_scores):
            raise InputError(f"{where}: \"scores\" must be a list of {len(tokens)} numbers, one per token")
        scores = np.asarray(raw_scores, dtype=np.float64)
        if scores.shape != (len(tokens),) or not np.isfinite(scores).all():
            raise InputError(f"{where}: scores must be {len(tokens)} finite numbers, one per token")
        seen[example.text] = line_no
        table[example.text] = (tokens, scores)
        chosen.append(example)
    if not chosen:
        raise InputError(f"{path} holds no attributions")
    return chosen, table
