"""A result record, the one shape every evaluation's, floor's and stored suite's results take.

A record is one (model, method, evaluation, dataset, metric) with its per-example ``values`` (None marks an
undefined one) in the order of ``example_ids``, their summary (:func:`attrbench.ops.stats.summary`), the seed of the
examples' order and the context's notes; records of several shards merge exactly. Built here, and only here, so an
evaluation's records in memory and the records read back from a run's rows have the same fields in the same order.
"""
from __future__ import annotations

from typing import Sequence

from .stats import summary


def make_record(model: str, scored: dict, eval_name: str, eval_params: dict, dataset: str, metric: str, values,
                seed: int, example_ids: Sequence[str], higher_is_better: dict, notes: dict, **extra) -> dict:
    """``scored``: the method's fields (``method``, and ``method_params`` and ``method_family`` where known);
    ``higher_is_better``: the evaluation's directions, of which the metric's is kept; ``extra`` comes last."""
    values = [None if v is None else float(v) for v in values]
    direction = {"higher_is_better": higher_is_better[metric]} if metric in higher_is_better else {}
    return {"model": model, **scored, "eval": eval_name, "eval_params": eval_params, "dataset": dataset,
            "metric": metric, **summary(values), "seed": seed, "example_ids": list(example_ids), "values": values,
            **direction, **notes, **extra}
