"""Reading a run back: the records of its stored rows, with their intervals, and the folder's metadata.

Apart from the pipeline that computes the rows (``attrbench.runtime.pipeline``): the report, the Python API's
``load_run`` and the referee read a folder through :func:`collect` without loading a model or planning a job.
A stored suite (``describe``) names its cells' keys; each scoring cell's rows are summarised by its evaluation,
over the examples it has been computed on, into records of the one shape :func:`attrbench.ops.records.make_record`
gives.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..errors import InputError
from ..models.zoo import cache_dir
from ..ops.environment import device_kind
from ..ops.records import make_record
from ..ops.stats import RESAMPLES, with_intervals
from ..ops.verdicts import FLOOR
from ..registry import EVALS
from .store import COMPACT, SHARED, Store, StoreError, row_key, run_store


def records_of(suite: dict, store: Store) -> list[dict]:
    """A suite's records (without intervals) from its stored rows: each scoring evaluation's payloads
    summarised over the examples it has been computed on, its random floor's (:func:`floor_records`), and each
    analysis's records."""
    def key(eval_key: str, method_key: str, example_id: str, tag: str) -> str:
        return row_key(suite["weights"], suite["dtype"], suite["dataset"], suite["split"], eval_key, method_key,
                       example_id, tag)

    records = []
    for cell in suite["scoring"]:
        evaluation = EVALS.get(cell["eval"]).with_params(**cell["eval_params"])
        examples = suite["examples"][:cell["n"]]
        shared_keys = [key(cell["eval_key"], SHARED, i, tag) for i, tag in examples]
        shared_rows = store.get(shared_keys)
        covered = [k for k, key in enumerate(shared_keys) if key in shared_rows]
        if not covered:
            continue
        method_keys = {m["key"]: [key(cell["eval_key"], m["key"], examples[k][0], examples[k][1])
                                  for k in covered] for m in cell["methods"]}
        rows = store.get([key for keys in method_keys.values() for key in keys])
        scored = {key: [rows.get(k) for k in keys] for key, keys in method_keys.items()}
        shared = [shared_rows[shared_keys[k]] for k in covered]
        summaries = evaluation.summarise(scored, shared)
        for method in cell["methods"]:
            present = [j for j, k in enumerate(method_keys[method["key"]]) if k in rows]
            if not present:
                continue
            scored_as = {"method": method["name"], "method_params": method["params"], "method_family": method["family"]}
            records += _stored_records(suite, cell, evaluation, scored_as, summaries[method["key"]], present, covered,
                                       cell["n"])
        records += floor_records(suite, cell, evaluation, store, covered, scored, shared, key)
    analysis_rows = store.get([a["key"] for a in suite["analyses"]])
    for analysis in suite["analyses"]:
        if analysis["key"] in analysis_rows:
            records += analysis_rows[analysis["key"]]["records"]
    label = suite_dataset(suite)
    return records if label == suite["dataset"] else [{**r, "dataset": label} for r in records]


def metric_bounds(records: Sequence[dict]) -> dict[tuple[str, str], tuple]:
    """Each (evaluation, metric) of ``records`` whose evaluation declares the metric's range (``bounds``)."""
    out = {}
    for name in dict.fromkeys(r["eval"] for r in records if "eval" in r):
        for metric, bounds in EVALS.get(name).bounds.items():
            out[(name, metric)] = bounds
    return out


def suite_dataset(suite: dict) -> str:
    """How a stored suite's dataset is named in its records and report: the dataset, with its split where a config
    named one (a model may be scored on two splits of a dataset, e.g. published and held-out items)."""
    return f"{suite['dataset']}:{suite['split']}" if suite.get("split") else suite["dataset"]


def floor_records(suite: dict, cell: dict, evaluation, store: Store, covered: list[int], scored: dict,
                  shared: list, key: Callable[..., str]) -> list[dict]:
    """The records of a cell's random floor (``method = "random_floor"``, family ``baseline``), on the examples
    that have a floor row: per metric the per-example ``values`` and ``mc_se`` and the ``floor`` description,
    else the fields of a method's record. Read for every evaluation that declares a floor, so floor rows added to
    a folder whose stored plan predates floors are read too (``cell["floor"]`` names the key where given)."""
    if not evaluation.has_floor:
        return []
    floor_key = (cell.get("floor") or {}).get("key", evaluation.floor_key)
    planned = (cell.get("floor") or {}).get("n", cell["n"])  # a config's floor_n: the first examples only
    examples = suite["examples"][:cell["n"]]
    keys = [key(cell["eval_key"], floor_key, examples[k][0], examples[k][1]) if k < planned else None
            for k in covered]
    rows = store.get([k for k in keys if k is not None])
    present = [j for j, k in enumerate(keys) if k in rows]
    if not present:
        return []
    summaries = evaluation.summarise_floor([rows.get(k) for k in keys], shared, scored)
    for entry in summaries.values():
        if (cell.get("floor") or {}).get("draws") is not None:  # the draws its rows were computed with
            entry["floor"] = {**entry.get("floor", {}), "draws": cell["floor"]["draws"]}
    return _stored_records(suite, cell, evaluation, {"method": FLOOR, "method_params": {}, "method_family": "baseline"},
                           summaries, present, covered, planned)


def _stored_records(suite: dict, cell: dict, evaluation, scored: dict, summaries: dict, present: list[int],
                    covered: list[int], planned: int) -> list[dict]:
    """One record per metric of a method's (or the floor's) summaries, on the ``present`` of the ``covered``
    examples: per-example fields cut to those, the rest as the evaluation gave them."""
    examples = suite["examples"][:cell["n"]]
    ids = [examples[covered[j]][0] for j in present]
    records = []
    for metric, entry in summaries.items():
        extra = {k: ([v[j] for j in present] if isinstance(v, list) and len(v) == len(covered) else v)
                 for k, v in entry.items() if k != "values"}
        records.append(make_record(
            suite["model"], scored, cell["eval"], cell["eval_params"], suite["dataset"], metric,
            [entry["values"][j] for j in present], suite["seed"], ids, evaluation.higher_is_better, suite["notes"],
            **{"sample_size": len(present), "planned_n": planned, **extra}))
    return records


def costs_kind(meta: dict) -> str:
    """The kind of device a folder's costs (timing rows, CPU or GPU hours, the cost per example that prices the
    rest) were measured on, from its metadata. Folders from before ``device_kind`` was stored ran on their stored
    options' device."""
    return meta.get("device_kind") or device_kind((meta.get("options") or {}).get("device", "cpu"))


META_KEYS = ("config", "plan", "versions", "models", "options", "device_kind", "started", "finished", "executor",
             "last_run", "runs", "cpu_hours", "example_costs", "extended_from", "failures")


def collect(run_dir: str | Path) -> tuple[list[dict], dict]:
    """The records of a run (with intervals) and its metadata, read from its store only (no model is loaded)."""
    path = run_store(run_dir, cache_dir())
    if path is None:
        raise InputError(f"{run_dir} is not a run folder (no store.sqlite or {COMPACT}); run `attrbench run` first")
    store = Store(path, readonly=True)
    try:
        meta = {k: store.meta(k) for k in META_KEYS}
        if meta["config"] is None or meta["plan"] is None:
            raise StoreError(f"{path} has no run metadata; it was not written by `attrbench run`")
        store.hold()  # the records read nearly every row
        records = [r for suite in meta["plan"] for r in records_of(suite, store)]
    finally:
        store.close()
    if not records:
        raise StoreError(f"run {run_dir} has no results yet; rerun `attrbench run` (with a larger --budget) to "
                         "compute some")
    config = meta["config"]
    return with_intervals(records, config["seed"], config.get("bootstrap_resamples", RESAMPLES),
                          metric_bounds(records)), meta


def failure_lines(failures: Sequence[dict]) -> list[str]:
    """One line per (suite, method) whose rows failed: how many examples, the first error, and that a rerun tries
    them again."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for failure in failures:
        grouped.setdefault((failure["suite"], failure["method"]), []).append(failure)
    return [f"{method} failed on {len({f['example'] for f in group})} example(s) of {suite} "
            f"({', '.join(sorted({f['eval'] for f in group}))}): {group[0]['reason']}; its cells hold the other "
            "examples, and a rerun tries these again" for (suite, method), group in grouped.items()]


def underived_statistic(folder: Path, store: Store) -> Optional[str]:
    """The first mean of a folder's ``statistics.json`` that its stored rows do not give again, as a phrase (None
    where every one they can be compared on does, or the folder has no statistics.json): rows altered after the
    report was written. A mean is compared where the method's examples in the table are its rows' examples."""
    path = Path(folder) / "statistics.json"
    if not path.is_file():
        return None
    records = {(f"{r['model']} · {r['dataset']} · {r['eval']}", r["metric"], r["method"]): r
               for suite in store.meta("plan") or [] for r in records_of(suite, store)}
    for title, table in json.loads(path.read_text()).items():
        if not isinstance(table, dict) or not isinstance(table.get("mean"), dict):
            continue
        for method, mean in table["mean"].items():
            record = records.get((title, table.get("metric"), method))
            if record is None or (table.get("n_by_method") or {}).get(method) != record.get("sample_size"):
                continue
            given = record.get("mean")
            if (mean is None) != (given is None) or (
                    mean is not None and not math.isclose(mean, given, rel_tol=1e-9, abs_tol=1e-12)):
                return f"{title}, {method}: its rows give a mean of {given}, statistics.json says {mean}"
    return None
