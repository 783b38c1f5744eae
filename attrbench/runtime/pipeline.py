"""The one pipeline behind ``attrbench run``, ``eval``, ``score`` and the Python API.

context (models, examples, shared work) → suites planned (every pairing, parameter and target
checked before any work) → the jobs that compute missing rows → execution (local or Ray, within a
time budget) → rows in a store → records with intervals (read back by ``attrbench.runtime.records``).
``eval``, ``score`` and the API run it on an in-memory store; :func:`run_leaderboard` on a run folder's store
(``store.sqlite``) and shared-work cache (``work.sqlite``), so a rerun computes only missing rows and a killed run
resumes with nothing lost or duplicated.

**Anytime runs.** Every suite's examples are taken in a seeded random order and computed in shards;
shards are taken round-robin across suites, so all cells grow together, and no new shard starts once
the budget (``--budget 15m``) would be spent. A later run with a larger budget or n continues where
this one stopped; the leaderboard shows n per cell.
"""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from tqdm.auto import tqdm

from ..errors import InputError, MethodError
from ..models.zoo import cache_dir
from ..ops.environment import cost_seconds, device_kind, library_versions
from ..ops.reuse import FILE as REUSE_FILE
from ..ops.stats import RESAMPLES, minimum_floor_n, minimum_n, with_intervals
from ..plugin.method import Method
from ..registry import EVALS
from .config import parse_budget
from .context import RunContext
from .executors import LocalExecutor
from .external import Precomputed, read_attributions
from .options import DEFAULT_SHARD_SIZE, RunOptions
from .plan import Job, Suite, SuitePlan, configured, example_tag, missing_jobs, plan_suite
from .provenance import model_provenance
from .records import costs_kind, failure_lines, metric_bounds, records_of, underived_statistic
from .store import COMPACT, Store, StoreError, run_store, writer_lock


class Pipeline:
    """Plans, executes and collects suites in one run context and one store (see the module docstring)."""

    def __init__(self, options: Optional[RunOptions] = None, *, seed: int = 0, shard_size: int = 8, data_dir=None,
                 resamples: int = RESAMPLES, context: Optional[RunContext] = None, cache=None, store=None):
        self.context = context or RunContext(options, data_dir, cache)
        self.options, self.seed, self.shard_size, self.resamples = self.context.options, seed, shard_size, resamples
        self.store = store or Store(":memory:")

    def add_adapter(self, adapter) -> None:
        self.context.add_adapter(adapter)

    def add_method(self, method: Method) -> None:
        self.context.add_method(method)

    def plan(self, suites: Sequence[Suite]) -> list[SuitePlan]:
        """Every suite made concrete, all pairings, parameters and targets checked before any work."""
        return [plan_suite(self.context, suite, k, self.seed) for k, suite in enumerate(suites)]

    def jobs(self, plans: Sequence[SuitePlan], only: Optional[list[set[tuple[str, str]]]] = None) -> list[list[Job]]:
        """Per suite, the jobs that compute its rows not yet in the store (``only``: per suite, the (evaluation,
        example) cells to compute, and no analysis)."""
        out = []
        for k, plan in enumerate(plans):
            keys = [key for *_, key in plan.rows()] + [plan.analysis_key(e) for e in plan.analyses]
            jobs = missing_jobs(plan, self.store.done(keys), self.shard_size, None if only is None else only[k])
            out.append(jobs)
        return out

    def execute(self, plans: Sequence[SuitePlan], executor=None, budget: Optional[float] = None,
                started: Optional[float] = None, only: Optional[list[set[tuple[str, str]]]] = None,
                tally: Optional[Callable[[dict, bool], dict]] = None) -> dict:
        """Compute the missing rows, shards round-robin across suites, no new shard once ``budget`` seconds
        (counted from ``started``) would be spent; each finished job's rows are stored in one transaction,
        with ``tally(example_costs so far, rows stored)`` as metadata where given (a killed run keeps its costs)."""
        started = time.monotonic() if started is None else started
        filled = [self.store.cells(plan.name) for plan in plans]  # where other methods have rows already
        queue = _schedule(plans, self.jobs(plans, only), filled)
        executor = executor or LocalExecutor(progress=self.options.progress and len(queue) == 1)
        # one job (evaluate, score): its shard's bars, and the model outputs' of a long round, are the progress
        self.context.batcher.progress = self.options.progress and len(queue) == 1
        seconds: dict[int, list[float]] = {}
        state = {"stopped": False, "last": time.monotonic()}

        def feed() -> Iterator[tuple[SuitePlan, Job]]:
            for job in queue:
                # the job's expected seconds: the median seconds per row of the jobs of its kind so far, times its
                # rows (a placed method's joined job holds several shards: a job's own median would undercount it)
                per_row = sorted(seconds.get((job.suite, job.analysis is not None), [0.0]))
                typical = per_row[len(per_row) // 2] * job.size()
                if budget is not None and time.monotonic() - started + typical > budget:
                    state["stopped"] = True
                    return
                # what its scores read of stored shared rows (a published run's, or an earlier job's), handed over
                held = self.store.get(job.shared_reads(plans[job.suite]))
                job.given = {key: payload for key, payload in held.items() if payload is not None}
                yield plans[job.suite], job

        keys = ("rows", "model_rows", "distinct_rows", "cached_rows", "attributions", "requested_rows",
                "forward_seconds", "attribution_seconds")
        # per suite (a floor is priced per model: benchmarks/bench_place.py), the run's totals their sums
        by_suite: dict[str, dict] = {}  # model_lengths: rows sent per input length
        finished = 0
        whole = {plan.index: dict(zip((e.id for e in plan.examples), plan.rows_per_example())) for plan in plans}
        costs: dict[str, dict] = {}  # per suite: the examples this run computed whole and their CPU seconds
        partial: dict[tuple, list] = {}  # (suite, example) -> [rows computed by this run, their CPU seconds]
        # with a budget the planned rows are a ceiling, not a goal: the bar shows rows done and the budget
        # the rows a method failed to give (its error): kept in the store's metadata until a run computes them
        failed = {(f["suite"], f["eval_key"], f["method_key"], f["example"]): f
                  for f in self.store.meta("failures") or []}
        failed_now = 0
        bar = tqdm(total=None if budget is not None else sum(job.size() for job in queue), unit="row",
                   desc="rows" if budget is None else f"rows (budget {budget / 60:.0f} min)",
                   disable=not self.options.progress)
        for plan, job, rows, counts in executor.map(feed(), self.context):
            now = time.monotonic()
            seconds.setdefault((plan.index, job.analysis is not None), []).append((now - state["last"]) / job.size())
            state["last"] = now
            finished += 1
            suite = by_suite.setdefault(plan.name, {**dict.fromkeys(keys, 0), "model_lengths": Counter()})
            for key in keys:
                suite[key] += counts.get(key, 0)
            suite["model_lengths"].update(counts.get("model_lengths", {}))
            # an example is priced once this run has computed all of its rows, in one shard or over a verdict's
            # shard and a later one (each shard's seconds shared by its rows); an added method's rows price none
            if job.analysis is None:
                size = sum(len(cells) for cells in job.rows.values())
                for e, cells in job.rows.items():
                    part = partial.setdefault((plan.index, e), [0, 0.0])
                    part[0] += len(cells)
                    part[1] += counts.get("cpu_seconds", 0.0) * len(cells) / size
                    if part[0] == whole[plan.index][e]:
                        cost = costs.setdefault(plan.name, {"examples": 0, "cpu_seconds": 0.0})
                        cost["examples"] += 1
                        cost["cpu_seconds"] += part[1]
            new = counts.get("failures", [])
            mended = [failed.pop((r["suite"], r["eval"], r["method"], r["example"]), None) for r in rows]
            failed.update({(f["suite"], f["eval_key"], f["method_key"], f["example"]): f for f in new})
            failed_now += len(new)
            extra = {"failures": list(failed.values())} if new or any(mended) else {}
            self.store.put(rows, meta={**(tally(costs, bool(rows)) if tally else {}), **extra} or None)
            bar.update(job.size())
        bar.close()
        missing = sum(len(jobs) for jobs in self.jobs(plans, only))
        totals = {"jobs": finished, **{key: sum(suite[key] for suite in by_suite.values()) for key in keys},
                  "model_lengths": sum((suite["model_lengths"] for suite in by_suite.values()), Counter())}
        return {**totals, "suites": by_suite, "example_costs": costs, "planned_jobs": len(queue),
                "missing_jobs": missing, "failed_rows": failed_now, "failures": failure_lines(list(failed.values())),
                "stopped_by_budget": state["stopped"] and missing > 0}

    def collect(self, plans: Sequence[SuitePlan]) -> list[dict]:
        """Records with intervals of every cell, read from the store (see :func:`records_of`)."""
        records = [r for plan in plans for r in records_of(describe(plan), self.store)]
        return with_intervals(records, self.seed, self.resamples, metric_bounds(records))

    def records(self, suites: Sequence[Suite], executor=None, published: Sequence[Path] = ()) -> list[dict]:
        """Plan, execute and collect in memory (``eval``, ``score``, the Python API): records with intervals.
        ``published``: run folders whose shared rows and random floors are taken where they fit (:meth:`reuse`).
        A method that fails on an example stops it with that error, in one line: records of a one-off evaluation
        on fewer examples than asked would pass unnoticed (a leaderboard run keeps going and names them instead)."""
        plans = self.plan(suites)
        self.reuse(plans, published)
        self.context.keep_going = False  # this process's jobs; a Ray worker's are named in the summary, raised here
        try:
            done = self.execute(plans, executor)
        finally:
            self.context.keep_going = True
        if done["failures"]:
            raise MethodError(done["failures"][0])
        return self.collect(plans)

    def reuse(self, plans: Sequence[SuitePlan], folders: Sequence[Path]) -> int:
        """Copy into the store the rows that ``folders`` (published runs) hold of what every method's scores share:
        the shared rows (NAOPC's bounds, a reference's scores) and the random floors. A row is taken only where
        its key matches, and the key names the model's weights, dtype, dataset, split, evaluation with its
        parameters and example, so a copied row is the one this run would compute. Returns the rows copied."""
        wanted = {key: (plan.name, eval_key, method_key, example.id)
                  for plan in plans for _, method, example, key, eval_key, method_key in plan.keyed_rows()
                  if method is None or isinstance(method, str)}
        missing = set(wanted) - self.store.done(wanted)
        copied = 0
        for folder in folders:
            if not missing:
                break
            path = run_store(folder, cache_dir())
            if path is None:
                continue
            with closing(Store(path, readonly=True)) as source:
                found = source.get(sorted(missing))
            self.store.put([{"key": key, "suite": wanted[key][0], "eval": wanted[key][1], "method": wanted[key][2],
                             "example": wanted[key][3], "payload": payload} for key, payload in found.items()])
            missing -= set(found)
            copied += len(found)
        return copied


def _schedule(plans: Sequence[SuitePlan], per_suite: list[list[Job]],
              filled: Optional[list[set[tuple[str, str]]]] = None) -> list[Job]:
    """The order of a run's jobs, verdicts first within a budget.

    First the rows of methods placed beside others (``filled``: per suite the (evaluation, example) cells that
    already hold rows, e.g. a method added to a grown or published folder): by :func:`placement_tier` (the headline
    metric with the cost, then the known answers, then the axiom and sanity checks, then the other metrics), each
    tier on every suite before the next, so a provisional headline verdict on every suite comes first; each tier's
    first shard of a suite alone (a costly method's first job measures its cost before a budget commits to more),
    its others joined :data:`PLACED_JOIN` at a time (one method's rows of one tier fill few batches per shard).
    Then, for each suite that can reach a verdict, the rows of its headline evaluation (and of the unranked ones,
    cost and checks, which read the attributions and cost no model output) on the examples the verdict needs
    (:func:`ranking_needs`), suite by suite in the config's order (so a budget too short for all still brings the
    first suites to their verdicts, rather than every suite short of one); then the analyses of the models; then
    every suite's remaining rows (the other metrics of those examples, then whole examples) round-robin, so all
    cells grow together."""
    placing: list[list[list[Job]]] = [[[] for _ in per_suite] for _ in range(PLACEMENT_TIERS)]
    if filled is not None:
        kept = []
        for k, (plan, jobs) in enumerate(zip(plans, per_suite)):
            tier = placement_tier(plan)
            rest = []
            for job in jobs:
                if job.analysis is not None:
                    rest.append(job)
                    continue
                beside = {i: [c for c in cells if (c[0], i) in filled[k]] for i, cells in job.rows.items()}
                for t in range(PLACEMENT_TIERS):
                    rows = {i: [c for c in cells if tier(c[0]) == t] for i, cells in beside.items()}
                    if any(rows.values()):
                        placing[t][k].append(Job(job.suite, {i: c for i, c in rows.items() if c}))
                left = {i: [c for c in cells if (c[0], i) not in filled[k]] for i, cells in job.rows.items()}
                if any(left.values()):
                    rest.append(Job(job.suite, {i: c for i, c in left.items() if c}))
            kept.append(rest)
        per_suite = kept
    placing = [[jobs[:1] + _joined(jobs[1:], PLACED_JOIN) for jobs in tier] for tier in placing]
    placed = [job for tier in placing for round_ in _round_robin(tier) for job in round_]
    scoring = [[job for job in jobs if job.analysis is None] for jobs in per_suite]
    analyses = [job for jobs in per_suite for job in jobs if job.analysis is not None]
    heads, tails = [], []
    for plan, jobs in zip(plans, scoring):
        needed = {example.id for example in plan.examples[:ranking_needs(plan)]}
        lead = {evaluation.key for evaluation in headline_evaluations(plan)}
        head, tail = [], []
        for job in jobs:
            first = {i: [c for c in cells if c[0] in lead] for i, cells in job.rows.items() if i in needed}
            rest = {i: [c for c in cells if i not in needed or c[0] not in lead] for i, cells in job.rows.items()}
            head += [Job(job.suite, {i: c for i, c in first.items() if c})] if any(first.values()) else []
            tail += [Job(job.suite, {i: c for i, c in rest.items() if c})] if any(rest.values()) else []
        heads.append(head)
        tails.append(tail)
    return (placed + [job for jobs in heads for job in jobs] + analyses
            + [job for round_ in _round_robin(tails) for job in round_])


PLACEMENT_TIERS = 4
# A placed method's jobs hold this many shards' examples: a shard of one method's rows of one tier is a few dozen
# model inputs spread over its examples' lengths, so its batches are mostly partial and a batched method attributes
# few examples at once. Joined, a placement on reports/full's suites (2 CPU cores, --budget 2m) sent its inputs at
# 5 to 17 % fewer forward seconds each per suite and reached 124 to 160 examples per suite instead of 117 to 128.
PLACED_JOIN = 4


def _joined(jobs: list[Job], size: int) -> list[Job]:
    """Consecutive jobs of one suite, ``size`` at a time, as one (their examples in order)."""
    out = []
    for start in range(0, len(jobs), size):
        rows = {}
        for job in jobs[start:start + size]:
            rows.update(job.rows)
        out.append(Job(jobs[start].suite, rows))
    return out


def placement_tier(plan: SuitePlan) -> Callable[[str], int]:
    """The order in which a placed method's rows come (an evaluation key to its tier): 0 the headline evaluation and
    the cost (unranked, no model output), 1 the known answers, 2 the axiom and sanity checks, 3 the other metrics."""
    lead = headline_evaluations(plan)
    headline = {lead[0].key} if lead else set()
    tiers = {}
    for evaluation, _ in plan.scoring:
        tiers[evaluation.key] = (0 if evaluation.key in headline else 1 if evaluation.family == "ground truth" else
                                 2 if evaluation.family == "sanity" or evaluation.check_share is not None else
                                 0 if not evaluation.ranked else 3)
    return lambda key: tiers.get(key, 3)


def headline_evaluations(plan: SuitePlan) -> list:
    """What a suite's first verdict needs: its headline evaluation (its ranked faithfulness evaluation with the lowest
    ``headline``), its known answer where it has one (ground truth reads the same attributions, no model output), and
    its unranked scoring evaluations (cost, axiom checks), but not the sanity check, which computes every attribution
    again on two randomised models and comes with the rest."""
    ranked = [e for e, _ in plan.scoring if e.ranked and e.family == "faithfulness"]
    if not ranked:
        return []
    return [min(ranked, key=lambda e: e.headline)] + [e for e, _ in plan.scoring if e.family == "ground truth"] + [
        e for e, _ in plan.scoring if not e.ranked and e.family != "sanity"]


def ranking_needs(plan: SuitePlan) -> int:
    """The examples a suite's headline must have for its verdicts: enough for a pair of its methods to be separated
    (``minimum_n``) and for a method to be separated from the random floor (``minimum_floor_n``), or the first of
    these that its sample can reach; 0 when neither can (it waits behind the suites that can)."""
    lead = headline_evaluations(plan)
    if not lead:
        return 0
    methods = next(methods for evaluation, methods in plan.scoring if evaluation is lead[0])
    sample = len(plan.sample_for(lead[0]))
    needs = sorted({minimum_n(len(methods)), minimum_floor_n(len(methods))} if plan.has_floor(lead[0])
                   else {minimum_n(len(methods))})
    return max((need for need in needs if sample >= need), default=0)


def _round_robin(per_suite: list[list[Job]]) -> Iterator[list[Job]]:
    """Job k of every suite, then job k + 1 of every suite, ...: all cells grow together."""
    for k in range(max((len(jobs) for jobs in per_suite), default=0)):
        yield [jobs[k] for jobs in per_suite if k < len(jobs)]


# -- a suite as stored, for reading its rows back (attrbench.runtime.records) -------------------
def describe(plan: SuitePlan) -> dict:
    """What :func:`records_of` needs to read a suite's rows back without loading its model (kept in the
    store's metadata): the row keys' parts, the examples in sampling order, every cell (with its floor's row key
    and draws, or None)."""
    return {"name": plan.name, "model": plan.model, "weights": plan.weights, "dtype": plan.dtype,
            "dataset": plan.dataset, "split": plan.split, "notes": plan.notes, "seed": plan.seed,
            "examples": [[e.id, example_tag(e)] for e in plan.examples],
            "scoring": [{"eval": e.name, "eval_params": e.get_params(), "eval_key": e.key,
                         "n": len(plan.sample_for(e)),
                         "floor": {"key": e.floor_key, "draws": e.floor_draws,
                                   **({"n": len(plan.floor_sample_for(e))} if plan.suite.floor_n is not None else {})}
                         if plan.has_floor(e) else None,
                         "methods": [{"name": m.name, "params": m.get_params(), "key": m.key, "family": m.family}
                                     for m in methods]} for e, methods in plan.scoring],
            "analyses": [{"eval": e.name, "eval_params": e.get_params(), "key": plan.analysis_key(e)}
                         for e in plan.analyses]}


# -- leaderboard runs: a config into a run folder ----------------------------------------------
def config_pipeline(config: dict, options: Optional[RunOptions] = None, store=None, cache=None) -> Pipeline:
    """The pipeline of a run config: its dtype, device, batch budget, seed and shard size."""
    options = (options or RunOptions()).with_(dtype=config["dtype"], device=config.get("device"),
                                              batch_tokens=config.get("batch_tokens"))
    shard_size = config["shard_size"] or DEFAULT_SHARD_SIZE[device_kind(options.device)]
    return Pipeline(options, seed=config["seed"], shard_size=shard_size,
                    resamples=config.get("bootstrap_resamples", RESAMPLES), store=store, cache=cache)


def plan_config(config: dict, options: Optional[RunOptions] = None) -> list[SuitePlan]:
    """Every suite of a run config made concrete (all pairings, parameters and targets checked first)."""
    return config_pipeline(config, options).plan([Suite.from_config(entry) for entry in config["suite"]])


def run_leaderboard(config: dict, run_dir: str | Path, executor=None, options: Optional[RunOptions] = None,
                    progress: Optional[bool] = None, budget: Optional[str | float] = None,
                    extend: Optional[str | Path] = None) -> dict:
    """Compute every row of ``config`` not yet in ``run_dir``'s store, within ``budget`` (or the config's);
    ``extend``: start from a copy of another run folder's results (a published leaderboard) and compute what
    the config adds on the examples published there, and a suite it adds in full (a later run in the folder,
    without ``extend``, grows every cell as usual). Returns a summary."""
    started = time.monotonic()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with writer_lock(run_dir):
        return _run_locked(config, run_dir, executor, options, progress, budget, extend, started)


def _run_locked(config, run_dir: Path, executor, options, progress, budget, extend, started: float) -> dict:
    options = (options or RunOptions()).with_(progress=progress)
    kind = device_kind(options.with_(device=config.get("device")).device)  # as config_pipeline will resolve it
    if extend is not None:
        _extend_from(Path(extend), run_dir, kind)
    budget = parse_budget(budget if budget is not None else config.get("budget"))
    store = Store(run_dir / "store.sqlite")
    try:
        before = _costs_device(store)
        if before not in (None, kind):
            raise StoreError(f"{run_dir} holds costs measured on {before} and this run is on {kind}: run it with "
                             f"--device {before}, or into a new folder (--out) for {kind}")
        pipeline = config_pipeline(config, options, store, run_dir / "work.sqlite")
        plans = pipeline.plan([Suite.from_config(entry) for entry in config["suite"]])
        models = {plan.model: model_provenance(pipeline.context.adapter(plan.model)) for plan in plans}
        _check_weights(store, models, run_dir)
        plan_seconds = time.monotonic() - started
        store.set_meta(config=config, plan=[describe(plan) for plan in plans],
                       models={**(store.meta("models") or {}), **models}, versions=library_versions(),
                       options=pipeline.options.as_dict(), device_kind=kind,
                       started=store.meta("started") or time.strftime(
                           "%Y-%m-%d %H:%M:%S"), executor=(executor or LocalExecutor()).name)
        stage = time.monotonic()
        # extending: what the config adds on the published cells only, each metric on the examples it was published
        # with (no cell grows, no metric is added to an example, no analysis is added); a suite the published run
        # does not have is what the config adds, whole
        only = [store.cells(plan.name) or None for plan in plans] if extend is not None else None
        before = {key: store.meta(key) for key in ("runs", "cpu_hours", "example_costs")}

        def tally(costs: dict, stored: bool) -> dict:
            """The folder's totals with this run in so far; a run that stored nothing (a resume of a finished
            folder, an --extend copy) is not counted as one."""
            return {"finished": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": (before["runs"] or 0) + stored,
                    "cpu_hours": (before["cpu_hours"] or 0.0) + cost_seconds(time.monotonic() - started, kind) / 3600,
                    "example_costs": add_costs(before["example_costs"] or {}, costs)}

        done = pipeline.execute(plans, executor, budget, started, only, tally)
        seconds = time.monotonic() - started
        store.set_meta(**tally(done["example_costs"], done["rows"] > 0),
                       last_run={**done, "seconds": round(seconds, 1), "budget_seconds": budget})
        return {**done, "plan_seconds": plan_seconds, "compute_seconds": time.monotonic() - stage}
    finally:
        store.close()


def add_costs(before: dict, run: dict) -> dict:
    """Per suite, the examples computed whole and their CPU seconds, summed over a folder's runs."""
    out = {name: dict(cost) for name, cost in before.items()}
    for name, cost in run.items():
        total = out.setdefault(name, {"examples": 0, "cpu_seconds": 0.0})
        total["examples"] += cost["examples"]
        total["cpu_seconds"] += cost["cpu_seconds"]
    return out


def _extend_from(source: Path, run_dir: Path, kind: str) -> None:
    """Start a run folder from a copy of another's results (and shared work, where there is some); a folder
    already extended from the same source resumes as it is. A source whose costs were measured on another kind of
    device than ``kind`` is refused before anything is copied."""
    published = run_store(source, cache_dir())
    if published is None:
        raise InputError(f"--extend {source}: not a run folder (no store.sqlite or {COMPACT}); give a folder like "
                         "reports/default")
    with closing(Store(published, readonly=True)) as store:  # refuses a damaged or older store before copying
        before = _costs_device(store)
        altered = _altered(source, published, store)
    if altered:
        rows = source / COMPACT if (source / COMPACT).is_file() else source / "store.sqlite"
        raise StoreError(f"--extend {source}: {rows} was altered after its report was written ({altered}): restore "
                         f"it (git checkout -- {source}), or, if the change is yours, rewrite its report first "
                         f"(attrbench report {source})")
    if before not in (None, kind):
        raise StoreError(f"--extend {source}: its costs were measured on {before} and this run is on {kind}: extend "
                         f"it with --device {before}, or run without --extend into a new folder for {kind}")
    origin = str(source.resolve())
    if (run_dir / "store.sqlite").exists():
        existing = Store(run_dir / "store.sqlite", readonly=True)
        try:
            if existing.meta("extended_from") == origin:
                return
        finally:
            existing.close()
        raise InputError(f"--extend {source}: {run_dir} already holds other results; extend into a new folder (--out)")
    _copy_renderings(source, run_dir)
    for name, path in (("work.sqlite", source / "work.sqlite"), ("store.sqlite", published)):  # the store last:
        if path.is_file():  # it marks a finished copy. SQLite's backup: consistent, rows still in a WAL included
            with closing(sqlite3.connect(path)) as src, \
                    closing(sqlite3.connect(run_dir / f"{name}.partial")) as dst:
                src.backup(dst)
            if name == "store.sqlite":
                copy = Store(run_dir / f"{name}.partial")
                copy.set_meta(extended_from=origin)
                copy.close()
            (run_dir / f"{name}.partial").replace(run_dir / name)


def _altered(source: Path, published: Path, store: Store) -> Optional[str]:
    """:func:`underived_statistic` of a folder, checked once per machine for a compact published folder: its rows
    are rebuilt into a cache file named by their content, and a mark beside it, named by its statistics.json's
    content, says these rows give these statistics (reading half a million rows again on every extension would
    cost each placement seconds). A store.sqlite, which changes in place, is checked every time."""
    statistics = source / "statistics.json"
    if not (source / COMPACT).is_file() or not statistics.is_file() or published.parent == source:
        return underived_statistic(source, store)
    mark = published.with_name(f"{published.stem}.derives-"
                               f"{hashlib.blake2b(statistics.read_bytes(), digest_size=16).hexdigest()}")
    if mark.is_file():
        return None
    altered = underived_statistic(source, store)
    if altered is None:
        mark.touch()
    return altered


def _copy_renderings(source: Path, run_dir: Path) -> None:
    """The published figures and what its report computed (``reuse.json.gz``), so that the extension's report
    computes and draws only what the added rows change (:mod:`attrbench.ops.reuse`)."""
    if not (source / REUSE_FILE).is_file() or (run_dir / REUSE_FILE).exists():
        return
    if (source / "figures").is_dir() and not (run_dir / "figures").exists():
        shutil.copytree(source / "figures", run_dir / "figures")
    shutil.copyfile(source / REUSE_FILE, run_dir / REUSE_FILE)


def _check_weights(store: Store, models: dict, run_dir: Path) -> None:
    """A model whose weights differ from those the folder's results were computed with is refused."""
    for name, before in (store.meta("models") or {}).items():
        now = models.get(name)
        if now is not None and before.get("weights_sha256") != now["weights_sha256"]:
            raise StoreError(f"{run_dir} holds results of '{name}' with weights sha256 "
                             f"{str(before.get('weights_sha256'))[:12]}…, but '{name}' here has "
                             f"{now['weights_sha256'][:12]}…; use a new folder (--out) for these weights")


def _costs_device(store: Store) -> Optional[str]:
    """A folder's ``costs_kind``, None for a new folder: a run on another kind would mix them unmarked."""
    if store.meta("device_kind") is None and not store.count():
        return None
    return costs_kind({key: store.meta(key) for key in ("device_kind", "options")})


# -- eval and score: one sample, results in memory ---------------------------------------------
def evaluate(adapter, method_names: Sequence[str] | str, eval_names: Sequence[str], dataset: str, *,
             n: Optional[int] = 500, seed: int = 0, split: Optional[str] = None, rank: Optional[str] = None,
             data_dir=None, options: Optional[RunOptions] = None, progress: Optional[bool] = None,
             method_params: Optional[dict] = None, eval_params: Optional[dict] = None,
             dataset_params: Optional[dict] = None, extra_methods: Sequence[Method] = (),
             published: bool = True) -> list[dict]:
    """Run evaluations on a seeded sample of a dataset (``attrbench eval``); every check is made before
    any work starts. ``rank`` sets the Spearman convention of the evaluations that have one;
    ``extra_methods``: methods that are not registered (a notebook's), named in ``method_names``;
    ``published``: take the shared rows and floors the published runs hold (:func:`published_runs`)."""
    for kind, params, names in (("evaluation", eval_params, eval_names), ("method", method_params, method_names)):
        unused = [name for name in params or {} if name not in names and names not in ("all", ["all"])]
        if unused:
            raise InputError(f"parameters given for {kind} '{unused[0]}', which is not among those run: "
                             f"{', '.join(names) or 'none'}")
    options = (options or RunOptions()).with_(dtype=dtype_name(adapter), device=str(adapter.device),
                                              progress=progress)
    pipeline = Pipeline(options, seed=seed, data_dir=data_dir, shard_size=1_000_000)
    pipeline.add_adapter(adapter)
    for method in extra_methods:
        pipeline.add_method(method)
    return pipeline.records([Suite(adapter.name, dataset, tuple(eval_names), method_names if isinstance(
        method_names, str) else tuple(method_names), n, split, method_params=method_params or {},
        eval_params=eval_params or {}, dataset_params=dataset_params or {},
        shared_params={} if rank is None else {"rank": rank})], published=published_runs() if published else ())


PUBLISHED_RUNS = ("full", "default")


def published_runs() -> list[Path]:
    """The published runs beside the package, in a clone or an editable install (``reports/full``,
    ``reports/default``): what :meth:`Pipeline.reuse` reads. A wheel ships none, and computes everything."""
    root = Path(__file__).resolve().parents[2] / "reports"
    return [root / name for name in PUBLISHED_RUNS if (root / name / COMPACT).is_file()
            or (root / name / "store.sqlite").is_file()]


def score_attributions(adapter, path: str | Path, eval_names: Sequence[str], dataset: str, *,
                       rank: str | None = None, name: str = "external", options: Optional[RunOptions] = None,
                       progress: Optional[bool] = None) -> list[dict]:
    """Put another tool's attributions on attrbench's evaluations (the ones that score input attributions)."""
    options = (options or RunOptions()).with_(dtype=dtype_name(adapter), device=str(adapter.device),
                                              progress=progress)
    pipeline = Pipeline(options, shard_size=1_000_000)
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
