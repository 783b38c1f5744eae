"""The one pipeline behind ``attrbench run``, ``eval``, ``score`` and the Python API.

context (models, examples, shared work) → configured plugins → units → execution → merged records
with intervals. A :class:`Suite` says what to compute on one (model, dataset); a :class:`Pipeline`
plans the units of its suites (checking every pairing, target and parameter before any work),
executes them with an executor, and merges their records (shards joined, intervals added).
:func:`run_leaderboard` keeps the results in a run folder's store as units finish, so a rerun
computes only what is missing; :func:`collect` reads them back through the same merge.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from tqdm.auto import tqdm

from ..datasets.lookup import sample
from ..errors import AttrbenchError, InputError
from ..ops.environment import library_versions
from ..ops.stats import RESAMPLES, with_intervals
from ..plugin.method import Method
from ..plugin.registry import EVALS
from .config import config_hash
from .context import RunContext
from .executors import LocalExecutor
from .external import Precomputed, read_attributions
from .options import RunOptions
from .plan import Unit, configured, plan_units, select_methods
from .provenance import model_provenance
from .store import Store, StoreError


@dataclass(frozen=True)
class Suite:
    """What to compute on one (model, dataset): evaluations × methods on a seeded sample of ``n`` examples.

    ``methods`` is a list of names or ``"all"`` (every registered method the model supports, but
    ``exclude_methods``); ``example_ids`` fixes the examples instead of sampling (external
    attributions are scored on the examples they cover).
    """

    model: str
    dataset: str
    evals: tuple[str, ...]
    methods: tuple[str, ...] | str = ()
    n: Optional[int] = None
    split: Optional[str] = None
    exclude_methods: tuple[str, ...] = ()
    method_params: dict = field(default_factory=dict)
    eval_params: dict = field(default_factory=dict)
    shared_params: dict = field(default_factory=dict)  # a value for every evaluation that declares it (--rank)
    example_ids: Optional[tuple[str, ...]] = None

    @classmethod
    def from_config(cls, entry: dict) -> "Suite":
        methods = entry["methods"]
        return cls(entry["model"], entry["dataset"], tuple(entry["evals"]),
                   methods if isinstance(methods, str) else tuple(methods), entry["n"], entry.get("split"),
                   tuple(entry.get("exclude_methods", ())), entry.get("method_params") or {},
                   entry.get("eval_params") or {})


class Pipeline:
    """Plans, executes and merges the units of suites in one run context (see the module docstring)."""

    def __init__(self, options: Optional[RunOptions] = None, *, seed: int = 0, shard_size: Optional[int] = None,
                 data_dir=None, resamples: int = RESAMPLES, context: Optional[RunContext] = None):
        self.context = context or RunContext(options, data_dir)
        self.options, self.seed, self.shard_size, self.resamples = self.context.options, seed, shard_size, resamples

    def add_adapter(self, adapter) -> None:
        self.context.add_adapter(adapter)

    def add_method(self, method: Method) -> None:
        self.context.add_method(method)

    def plan(self, suites: Sequence[Suite]) -> tuple[list[Unit], list[dict]]:
        """Every unit of the suites (all pairings checked first) and each suite's sample."""
        units, samples = [], []
        for suite in suites:
            adapter = self.context.adapter(suite.model)
            evaluations = configured(EVALS, suite.evals, suite.eval_params, suite.shared_params)
            methods, named = select_methods(adapter, list(suite.methods) if not isinstance(suite.methods, str)
                                            else suite.methods, suite.method_params, suite.exclude_methods,
                                            lambda name: self.context.method(name, {}))
            examples, notes = self.context.examples(adapter, suite.dataset, suite.split)
            if suite.example_ids is None:
                chosen = sample(examples, suite.n, self.seed)
            else:
                by_id = {e.id: e for e in examples}
                chosen = [by_id[i] for i in suite.example_ids]
            samples.append({"model": suite.model, "dataset": suite.dataset, "evals": list(suite.evals),
                            "example_ids": [e.id for e in chosen], **notes})
            units += plan_units(adapter, suite.dataset, suite.split, evaluations, methods, named, chosen,
                                self.shard_size)
        return units, samples

    def execute(self, units: Sequence[Unit], executor=None) -> Iterable[tuple[Unit, list[dict], float]]:
        """(unit, records, seconds) as each unit finishes."""
        return (executor or LocalExecutor()).map(list(units), self.context, self.seed)

    def records(self, suites: Sequence[Suite], executor=None) -> list[dict]:
        """Plan, execute and merge in memory (``eval``, ``score``, the Python API): records with intervals."""
        units, _ = self.plan(suites)
        executor = executor or LocalExecutor(progress=self.options.progress)
        return merge_records(list(self.execute(units, executor)), self.seed, self.resamples)


def merge_records(finished: Iterable[tuple[Unit | dict, list[dict], float]], seed: int,
                  resamples: int = RESAMPLES) -> list[dict]:
    """One record per (model, dataset, evaluation, method, metric): shards joined in shard order, with intervals."""
    groups: dict[tuple, list[dict]] = {}
    for unit, records, seconds in sorted(finished, key=lambda f: f[0]["shard"] if isinstance(f[0], dict)
                                         else f[0].shard):
        for record in records:
            record = {**record, "unit_seconds": seconds}
            groups.setdefault((record["model"], record["dataset"], record["eval"], record["method"],
                               record["metric"]), []).append(record)
    merged = [EVALS.get(key[2]).merge(shards) if len(shards) > 1 else shards[0] for key, shards in groups.items()]
    return with_intervals(merged, seed, resamples)


# -- leaderboard runs: a config into a run folder's store ------------------------------------
def config_pipeline(config: dict, options: Optional[RunOptions] = None) -> Pipeline:
    """The pipeline of a run config: its dtype, seed and shard size."""
    options = (options or RunOptions()).with_(dtype=config["dtype"])
    return Pipeline(options, seed=config["seed"], shard_size=config["shard_size"],
                    resamples=config.get("bootstrap_resamples", RESAMPLES))


def plan_config(config: dict, options: Optional[RunOptions] = None) -> tuple[list[Unit], list[dict]]:
    """Every unit of a run config and each suite's sample (all pairings checked first)."""
    return config_pipeline(config, options).plan([Suite.from_config(entry) for entry in config["suite"]])


def run_leaderboard(config: dict, run_dir: str | Path, executor=None, options: Optional[RunOptions] = None,
                    progress: Optional[bool] = None) -> dict:
    """Compute every unit of ``config`` not yet in ``run_dir``'s store; return a summary."""
    options = (options or RunOptions()).with_(progress=progress)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = Store(run_dir / "store.sqlite")
    try:
        digest = config_hash(config)
        stored = store.meta("config_hash")
        if stored is not None and stored != digest:
            old = store.meta("config") or {}
            changed = sorted(k for k in set(old) | set(config) if k != "name" and old.get(k) != config.get(k))
            raise StoreError(f"run folder {run_dir} holds results of a different config (differs in: "
                             f"{', '.join(changed) or 'suite'}); use a new folder (--out) or the same config")
        stage = time.perf_counter()
        pipeline = config_pipeline(config, options)
        units, samples = pipeline.plan([Suite.from_config(entry) for entry in config["suite"]])
        plan_seconds = time.perf_counter() - stage
        for before, now in zip(store.meta("samples") or [], samples):  # a data file edited since then
            if before.get("file_sha256") != now.get("file_sha256"):
                raise StoreError(f"run folder {run_dir} holds results on another version of {now['dataset']} "
                                 f"(sha256 {str(before.get('file_sha256'))[:12]}…, now {now['file_sha256'][:12]}…); "
                                 "use a new folder (--out) or restore the file")
        executor = executor or LocalExecutor()
        if stored is None:
            context = pipeline.context
            store.set_meta(config_hash=digest, versions=library_versions(), samples=samples,
                           models={e["model"]: model_provenance(context.adapter(e["model"])) for e in config["suite"]},
                           started=time.strftime("%Y-%m-%d %H:%M:%S"))
        store.set_meta(config=config, planned=[u.key for u in units])  # this config's parameters and units
        done = store.done()
        todo = [u for u in units if u.key not in done]
        bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=f"run {config['name']}", unit="unit",
                   disable=not pipeline.options.progress)
        stage = time.perf_counter()
        for unit, records, seconds in pipeline.execute(todo, executor):
            store.put(unit.key, unit.as_dict(), records, seconds)
            bar.update()
        bar.close()
        compute_seconds = time.perf_counter() - stage
        store.set_meta(finished=time.strftime("%Y-%m-%d %H:%M:%S"), executor=executor.name)
        missing = {u.key for u in units} - store.done()
        if missing:
            raise AttrbenchError(f"{len(missing)} units are missing after the run (e.g. {sorted(missing)[0]})")
        return {"units": len(units), "computed": len(todo), "reused": len(units) - len(todo),
                "plan_seconds": plan_seconds, "compute_seconds": compute_seconds}
    finally:
        store.close()


META_KEYS = ("config", "config_hash", "versions", "samples", "models", "started", "finished", "executor", "planned")


def collect(run_dir: str | Path) -> tuple[list[dict], dict]:
    """The merged records of a run (shards joined per record) and its metadata; incomplete runs raise."""
    path = Path(run_dir) / "store.sqlite"
    if not path.is_file():
        raise InputError(f"{run_dir} is not a run folder (no store.sqlite); run `attrbench run` first")
    store = Store(path, readonly=True)
    try:
        config = store.meta("config")
        if config is None:
            raise StoreError(f"{path} has no run metadata; it was not written by `attrbench run`")
        meta = {k: store.meta(k) for k in META_KEYS}
        planned = set(meta["planned"] or [])
        missing = planned - store.done()
        if missing:
            raise StoreError(f"run {run_dir} is incomplete: {len(missing)} of {len(meta['planned'])} units are "
                             "missing; rerun `attrbench run` with the same config to finish it")
        # units of the current config only: results of parameters changed since stay stored, unused
        units = [u for u in store.units() if u["key"] in planned]
        meta["unit_count"] = len(units)
    finally:
        store.close()
    return merge_records([(u, u["records"], u["seconds"]) for u in units], config["seed"],
                         config.get("bootstrap_resamples", RESAMPLES)), meta


# -- eval and score: one sample, results in memory ---------------------------------------------
def evaluate(adapter, method_names: Sequence[str] | str, eval_names: Sequence[str], dataset: str, *,
             n: Optional[int] = 500, seed: int = 0, split: Optional[str] = None, rank: Optional[str] = None,
             data_dir=None, options: Optional[RunOptions] = None, progress: Optional[bool] = None,
             method_params: Optional[dict] = None, eval_params: Optional[dict] = None) -> list[dict]:
    """Run evaluations on a seeded sample of a dataset (``attrbench eval``); every check is made before
    any work starts. ``rank`` sets the Spearman convention of the evaluations that have one."""
    for kind, params, names in (("evaluation", eval_params, eval_names), ("method", method_params, method_names)):
        unused = [name for name in params or {} if name not in names and names not in ("all", ["all"])]
        if unused:
            raise InputError(f"parameters given for {kind} '{unused[0]}', which is not among those run: "
                             f"{', '.join(names) or 'none'}")
    options = (options or RunOptions()).with_(dtype=dtype_name(adapter), progress=progress)
    pipeline = Pipeline(options, seed=seed, data_dir=data_dir)
    pipeline.add_adapter(adapter)
    return pipeline.records([Suite(adapter.name, dataset, tuple(eval_names), method_names if isinstance(
        method_names, str) else tuple(method_names), n, split, method_params=method_params or {},
        eval_params=eval_params or {}, shared_params={} if rank is None else {"rank": rank})])


def score_attributions(adapter, path: str | Path, eval_names: Sequence[str], dataset: str, *,
                       rank: str | None = None, name: str = "external", options: Optional[RunOptions] = None,
                       progress: Optional[bool] = None) -> list[dict]:
    """Put another tool's attributions on attrbench's evaluations (the ones that score input attributions)."""
    pipeline = Pipeline((options or RunOptions()).with_(dtype=dtype_name(adapter), progress=progress))
    pipeline.add_adapter(adapter)
    shared = {} if rank is None else {"rank": rank}
    configured(EVALS, eval_names, shared=shared)  # unknown names first
    scoring = [e.name for e in EVALS.all() if e.needs_methods and e.score_methods_only]
    if not eval_names:
        raise InputError(f"no evaluation given: --eval one or more of {', '.join(scoring)}")
    for eval_name in eval_names:
        if eval_name not in scoring:
            raise InputError(f"'{eval_name}' does not score attributions; use {', '.join(scoring)}")
    examples, _ = pipeline.context.examples(adapter, dataset, None)
    chosen, table = read_attributions(adapter, path, examples)
    pipeline.add_method(Precomputed(name, table, str(path)))
    return pipeline.records([Suite(adapter.name, dataset, tuple(eval_names), (name,), shared_params=shared,
                                   example_ids=tuple(e.id for e in chosen))])


def dtype_name(adapter) -> str:
    return str(adapter.dtype).replace("torch.", "")
