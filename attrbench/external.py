"""Scoring attributions computed by another tool, so any explainer can be put on the leaderboard.

The input is JSON lines, one object per example::

    {"id": "sst2:dev:17", "tokens": ["[CLS]", "a", ...], "scores": [0.1, ...]}

``id`` names a dataset example (as attrbench records them); ``text`` may be given instead and is
matched to the dataset's text. ``tokens`` (or ``input_ids``) must be the model's own tokenisation of
that text, special tokens included, so every score lands on the token it was meant for; a mismatch
is an error naming the line, never a silent realignment.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .datasets import examples_for
from .errors import InputError
from .evaluation import EvalContext
from .method import Method, MethodResult


class Precomputed(Method):
    """A method whose scores were computed elsewhere, keyed by text."""

    family, output = "external", "scores"
    description = "attributions computed by another tool"

    def __init__(self, name: str, by_text: dict[str, tuple[list[str], np.ndarray]]):
        self.name, self.by_text = name, by_text

    def run(self, adapter, texts, *, target, layers, value_bias, truncate):
        results = []
        for text in texts:
            if text not in self.by_text:
                raise InputError(f"no external attributions for text '{text[:60]}'")
            tokens, scores = self.by_text[text]
            results.append(MethodResult(self.name, adapter.name, tokens, scores, None, {"target": str(target)}))
        return results


def read_attributions(adapter, path: str | Path, examples) -> tuple[Precomputed, list]:
    by_id = {e.id: e for e in examples}
    by_text = {e.text: e for e in examples}
    path = Path(path)
    if not path.is_file():
        raise InputError(f"attributions file {path} does not exist")
    chosen, table = [], {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {line_no}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: not valid JSON ({err.msg})") from None
        if not isinstance(obj, dict) or "scores" not in obj or not ({"tokens", "input_ids"} & set(obj)):
            raise InputError(f"{where}: needs \"scores\" and \"tokens\" (or \"input_ids\")")
        example = by_id.get(obj.get("id")) if "id" in obj else by_text.get(obj.get("text", "").strip())
        if example is None:
            raise InputError(f"{where}: example {obj.get('id') or repr(obj.get('text', ''))[:60]} is not in this "
                             "dataset for this model (give an id like those attrbench records, or the exact text)")
        ids = adapter.tokenizer(example.text)["input_ids"]
        tokens = adapter.tokenizer.convert_ids_to_tokens(ids)
        given = obj["tokens"] if "tokens" in obj else adapter.tokenizer.convert_ids_to_tokens(obj["input_ids"])
        if list(given) != tokens:
            raise InputError(f"{where}: tokens differ from {adapter.name}'s tokenisation of the text "
                             f"({len(given)} given, {len(tokens)} expected); attribute the model's own tokens")
        scores = np.asarray(obj["scores"], dtype=np.float64)
        if scores.shape != (len(tokens),) or not np.isfinite(scores).all():
            raise InputError(f"{where}: scores must be {len(tokens)} finite numbers, one per token")
        table[example.text] = (tokens, scores)
        chosen.append(example)
    if not chosen:
        raise InputError(f"{path} holds no attributions")
    return chosen, table


def score_attributions(adapter, path: str | Path, eval_names: Sequence[str], dataset: str, *,
                       rank: str = "scipy", name: str = "external", progress: bool = True) -> list[dict]:
    from .registry import EVALS

    examples, notes = examples_for(adapter, dataset)
    chosen, table = read_attributions(adapter, path, examples)
    method = Precomputed(name, table)
    records = []
    for eval_name in eval_names:
        evaluation = EVALS.get(eval_name)
        if not evaluation.needs_methods or not evaluation.score_methods_only:
            raise InputError(f"'{eval_name}' does not score attributions; use faithfulness_corr or erasure_aopc")
        context = EvalContext(dataset, 0, rank, progress, {**notes, "sample_size": len(chosen),
                                                           "attributions": str(path)})
        records += evaluation(adapter, [method], chosen, context)
    if not records:
        raise InputError("no evaluation given: --eval faithfulness_corr and/or erasure_aopc")
    return records
