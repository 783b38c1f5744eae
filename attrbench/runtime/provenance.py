"""Provenance of results (library versions, model weights and training) and writing ``eval``/``score`` results:
a JSON file with every record and the provenance, and a CSV table."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pandas as pd

from ..models.training.tasks import TASK_MODELS, training_record
from ..models.zoo import weights_hash
from ..ops.environment import library_versions

TABLE_COLUMNS = ["model", "dataset", "eval", "method", "metric", "mean", "ci_low", "ci_high", "n", "n_undefined"]


def model_provenance(adapter) -> dict:
    """Where a model's weights came from: their sha256 (the identity results are keyed by), a task model's base
    weights and training record."""
    record = {"model": adapter.name, "model_source": adapter.source, "weights_sha256": adapter.weights_sha256}
    if adapter.name in TASK_MODELS:
        record.update(base=TASK_MODELS[adapter.name].base, base_sha256=weights_hash(TASK_MODELS[adapter.name].base),
                      training=training_record(adapter.name))
    return record


def provenance(adapter, **options) -> dict:
    return {"created": time.strftime("%Y-%m-%d %H:%M:%S"), **library_versions(), **model_provenance(adapter),
            **options}


def table(records: list[dict]):
    frame = pd.DataFrame(records)
    if "ci" in frame:  # the 95 % Student-t CI of the mean (None where it does not exist: n < 2)
        frame["ci_low"] = [None if ci is None else ci[0] for ci in frame["ci"]]
        frame["ci_high"] = [None if ci is None else ci[1] for ci in frame["ci"]]
    return frame[[c for c in TABLE_COLUMNS if c in frame.columns]]


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: readers never see a half-written result."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_results(records: list[dict], out_dir: str | Path, info: dict) -> Path:
    """Write ``<out>/<model>-<dataset>-<timestamp>.json`` (+ ``.csv``) atomically; return the JSON path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model, dataset = (re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(info.get(key) or "eval")).name)  # paths: one name
                      for key in ("model", "dataset"))
    stem = f"{model}-{dataset}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, k = out / f"{stem}.json", 1
    while path.exists():  # two runs in the same second
        k += 1
        path = out / f"{stem}-{k}.json"
    stem = path.stem
    write_atomic(path, json.dumps({"run": info, "records": records}, indent=1, default=float))
    table(records).to_csv(out / f"{stem}.csv", index=False)
    return path
