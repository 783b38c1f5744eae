"""What a run computes: suites made concrete, their result rows, and the jobs that compute missing rows.

A :class:`Suite` says what to compute on one (model, dataset): evaluations × methods on the first n
examples of a seeded permutation of the dataset. :func:`plan_suite` makes it concrete in a run
context, checking every pairing, parameter and target before any work (a method is given to each
evaluation that takes it; a named method that none takes is an error; so is an evaluation left
without methods). A :class:`SuitePlan` knows the key of every result row, so the store says which
are missing.

Work is example-major: a :class:`Job` is a shard of a suite's examples with, per example, the
(evaluation, method) rows it still lacks. A leaderboard run (``Suite.baseline``) adds to each evaluation that
declares a random floor (``Evaluation.floor``) one floor row per example, keyed like the shared rows with the
floor's settings as its method (``Evaluation.floor_key``). :func:`run_job` computes a job: each example's
attributions (memoised and cached, timed), then every row's payload with all model-output requests of
the shard answered together (``attrbench.ops.batching``). Analyses of the model run once per suite on
their sample. Every executor goes through :func:`run_job`.
"""
from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from tqdm.auto import tqdm

from ..datasets.base import Example
from ..datasets.lookup import sample
from ..errors import AttrbenchError, InputError, MethodError
from ..ops.environment import cost_seconds
from ..ops.hashing import text_sha256
from ..ops.targets import Target, resolve, same_contrast
from ..plugin.evaluation import EvalContext, Evaluation
from ..plugin.method import Method
from ..registry import EVALS, METHODS
from .context import RunContext
from .store import SHARED, row_key


@dataclass(frozen=True)
class Suite:
    """What to compute on one (model, dataset): evaluations × methods on the first ``n`` examples of a seeded
    permutation (all when n is None).

    ``methods`` is a list of names or ``"all"`` (every registered method the model supports, but
    ``exclude_methods``). ``eval_n`` caps an evaluation's sample (e.g. timing, or an analysis).
    ``example_ids`` fixes the examples instead (external attributions are scored on those they cover).
    ``baseline`` (leaderboard runs): put the random floor in every table whose evaluation declares one (the
    metric's expectation under a uniformly random attribution: ``Evaluation.floor``), and the one-draw ``random``
    method in the other faithfulness tables; ``methods = "all"`` then leaves ``random`` out (name it to keep it).
    ``floor_n`` puts the floor on the first ``floor_n`` examples of each table only: a sampled floor is costly
    (soft erasure's takes as many model inputs as 100 methods'), and a method is compared with it on their common
    examples.
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
    dataset_params: dict = field(default_factory=dict)
    eval_n: dict = field(default_factory=dict)
    shared_params: dict = field(default_factory=dict)  # a value for every evaluation that declares it (--rank)
    example_ids: Optional[tuple[str, ...]] = None
    baseline: bool = False
    floor_draws: Optional[int] = None  # seeded draws of a sampled floor (None: the evaluation's, 100)
    floor_n: Optional[int] = None  # the floor on each table's first floor_n examples (None: on all of them)

    @classmethod
    def from_config(cls, entry: dict) -> "Suite":
        methods = entry["methods"]
        return cls(entry["model"], entry["dataset"], tuple(entry["evals"]),
                   methods if isinstance(methods, str) else tuple(methods), entry.get("n"), entry.get("split"),
                   tuple(entry.get("exclude_methods", ())), entry.get("method_params") or {},
                   entry.get("eval_params") or {}, entry.get("dataset_params") or {}, entry.get("eval_n") or {},
                   baseline=True, floor_draws=entry.get("floor_draws"), floor_n=entry.get("floor_n"))


def configured(plugins, names: Sequence[str], params: Optional[dict] = None, shared: Optional[dict] = None) -> list:
    """Registered plugins by name, each with its parameters from ``params[name]`` and those of
    ``shared`` (e.g. a CLI option) that it declares."""
    out = []
    for name in names:
        plugin = plugins.get(name)
        values = {k: v for k, v in (shared or {}).items() if k in plugin.params}
        out.append(plugin.with_params(**{**values, **(params or {}).get(name, {})}))
    return out


def select_methods(adapter, names: Sequence[str] | str, params: Optional[dict] = None, exclude: Sequence[str] = (),
                   lookup: Callable[[str], Method] = METHODS.get) -> tuple[list[Method], bool]:
    """The methods named, each with its parameters from ``params[name]``, and whether they were named:
    ``"all"`` is every registered method the model supports, but those in ``exclude``. ``lookup`` finds a
    method by name (the run context's, which also knows methods outside the registry)."""
    named = not (names == "all" or list(names) == ["all"])
    if not named:
        names = [m.name for m in METHODS.all() if m.supports(adapter) is None and m.name not in exclude]
    return [lookup(name).with_params(**(params or {}).get(name, {})) for name in names], named


def left_out_cells(adapter, evaluations: Sequence[Evaluation], exclude: Sequence[str] = ()) -> dict:
    """What a suite whose methods are "all" leaves out on this model, with why (``supports``): the registered
    methods that give input attributions and cannot run on it, and the evaluations that cannot; empty parts omitted.
    A report names them beside its tables, so a leaderboard never drops a method silently."""
    methods = {m.name: m.supports(adapter) for m in METHODS.all() if m.output == "scores" and m.name not in exclude}
    evals = {e.name: e.supports(adapter) for e in evaluations}
    out = {"methods": {k: v for k, v in methods.items() if v}, "evaluations": {k: v for k, v in evals.items() if v}}
    return {k: v for k, v in out.items() if v}


def assign_methods(adapter, evaluations: Sequence[Evaluation], methods: Sequence[Method], named: bool,
                   dataset: str) -> list[tuple[Evaluation, list[Method]]]:
    """Each evaluation with the methods it takes; every pairing is checked here, before any work."""
    if not evaluations:
        raise InputError("no evaluation given; see `attrbench evals`")
    scoring = [e for e in evaluations if e.needs_methods]
    if named and methods and not scoring:
        raise InputError(f"{', '.join(e.name for e in evaluations)} analyse(s) the model itself and take(s) "
                         "no --method")
    for method in methods if named else ():
        if not any(e.takes(method) for e in scoring):
            scoring[0].check(adapter, [method], EvalContext(dataset))  # raises, naming why
    plans = []
    for evaluation in evaluations:
        given = [m for m in methods if evaluation.takes(m)] if evaluation.needs_methods else []
        evaluation.check(adapter, given, EvalContext(dataset))
        plans.append((evaluation, given))
    return plans


def check_targets(adapter, examples: Sequence[Example], methods: Sequence[Method] = ()) -> None:
    """Each example's target fits the model (the model's prediction is not needed to know that), and its length
    every method's token limit (``Method.token_limit``): found at planning, not hours into a run when a shard
    reaches the one long example. One tokenisation per example serves both."""
    limited = [(method, method.token_limit()) for method in methods]
    limited = [(method, limit) for method, limit in limited if limit is not None]
    for example in examples:
        ids = adapter.tokenizer(example.text)["input_ids"]
        try:
            resolve(adapter, ids, Target.parse(example.target), predict=False)
        except InputError as err:
            raise InputError(f"example {example.id}: {err}") from None
        for method, limit in limited:
            if len(ids) > limit:
                raise InputError(f"example {example.id} has {len(ids)} tokens and {method.name} takes at most "
                                 f"{limit}: raise {method.name}.max_tokens (method_params), or leave {method.name} out")


def example_tag(example: Example) -> str:
    """What a row's key needs of an example beside its id: its text and target (a changed data file or target
    gives other rows, never mixed with these)."""
    return text_sha256(example.text + "\x00" + example.target)


@dataclass
class SuitePlan:
    """A suite made concrete: its model, its examples in sampling order, and every (evaluation, method) cell."""

    index: int
    suite: Suite
    model: str
    weights: str
    dtype: str
    dataset: str
    split: Optional[str]
    notes: dict
    examples: list[Example]  # the sample, in sampling order
    scoring: list[tuple[Evaluation, list[Method]]]
    analyses: list[Evaluation]
    seed: int = 0
    stand_in: Optional[Example] = None  # the dataset's shortest example: each method's untimed warm-up runs on it
    floors: frozenset = frozenset()  # the keys of the evaluations that get floor rows (leaderboard runs)
    _by_key: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # see :meth:`_lookup`
    _rows: list = field(default_factory=list, init=False, repr=False, compare=False)  # see :meth:`keyed_rows`

    @property
    def name(self) -> str:
        return f"{self.model}|{self.dataset}:{self.split or 'default'}"

    def sample_for(self, evaluation: Evaluation) -> list[Example]:
        cap = self.suite.eval_n.get(evaluation.name)
        return self.examples if cap is None else self.examples[:cap]

    def has_floor(self, evaluation: Evaluation) -> bool:
        return evaluation.key in self.floors

    def floor_sample_for(self, evaluation: Evaluation) -> list[Example]:
        """The examples of an evaluation that get its floor's rows: its sample's first ``floor_n`` (none: no floor)."""
        if not self.has_floor(evaluation):
            return []
        sample = self.sample_for(evaluation)
        return sample if self.suite.floor_n is None else sample[:self.suite.floor_n]

    def _lookup(self) -> dict[str, dict]:
        """Evaluations and methods by key, and whether each evaluation has floor rows, made once: a key is built from
        the plugin's parameters on every read, and a job looks them up for each of its rows."""
        if not self._by_key:
            evaluations: dict = {}
            for evaluation in [*(e for e, _ in self.scoring), *self.analyses]:
                evaluations.setdefault(evaluation.key, evaluation)  # the first of a key, as a scan finds it
            methods: dict = {}
            for _, group in self.scoring:
                for method in group:
                    methods.setdefault(method.key, method)
            self._by_key.update(evaluations=evaluations, methods=methods,
                                floors={key: e.floor_key for key, e in evaluations.items() if key in self.floors})
        return self._by_key

    def floor_of(self, eval_key: str) -> Optional[str]:
        """The method part of the floor rows' keys of the evaluation keyed ``eval_key``; None: it has no floor rows."""
        return self._lookup()["floors"].get(eval_key)

    def row_key(self, evaluation: Evaluation, method: Optional[Method | str], example: Example) -> str:
        """The key of a row: ``method`` a Method, None for the shared row, or a floor key (:func:`method_key`)."""
        return row_key(self.weights, self.dtype, self.dataset, self.split, evaluation.key, method_key(method),
                       example.id, example_tag(example))

    def cells(self, evaluation: Evaluation, methods: Sequence[Method]) -> list[Optional[Method | str]]:
        """An evaluation's rows per example: the shared one (None), its floor's (its key) and each method's."""
        return [None, *([evaluation.floor_key] if self.has_floor(evaluation) else []), *methods]

    def rows(self) -> list[tuple[Evaluation, Optional[Method | str], Example, str]]:
        """Every scoring row of the suite: (evaluation, method (None for the shared row, the floor's key for the
        floor's, on :meth:`floor_sample_for` only), example, key)."""
        return [row[:4] for row in self.keyed_rows()]

    def keyed_rows(self) -> list[tuple[Evaluation, Optional[Method | str], Example, str, str, str]]:
        """:meth:`rows` with each row's evaluation key and method key (:func:`method_key`), made once per plan: a
        run asks for them when it looks up what is stored, copies published rows and makes its jobs (half a
        million rows on reports/full)."""
        if self._rows:
            return self._rows
        for evaluation, methods in self.scoring:  # each key's parts made once per cell and per example
            eval_key, cells = evaluation.key, [(m, method_key(m)) for m in self.cells(evaluation, methods)]
            floored = len(self.floor_sample_for(evaluation))
            for k, example in enumerate(self.sample_for(evaluation)):
                tag = example_tag(example)
                self._rows += [(evaluation, method, example, row_key(self.weights, self.dtype, self.dataset,
                                                                     self.split, eval_key, key, example.id, tag),
                                eval_key, key)
                               for method, key in cells if k < floored or not isinstance(method, str)]
        return self._rows

    def rows_per_example(self) -> list[int]:
        """How many scoring rows each example has, in sampling order (an evaluation's sample is a prefix)."""
        counts = [0] * len(self.examples)
        for evaluation, methods in self.scoring:
            floored = len(self.floor_sample_for(evaluation))
            for k in range(len(self.sample_for(evaluation))):
                counts[k] += len(self.cells(evaluation, methods)) - (self.has_floor(evaluation) and k >= floored)
        return counts

    def analysis_key(self, evaluation: Evaluation) -> str:
        sample = "\x00".join(e.id + "\x01" + example_tag(e) for e in self.sample_for(evaluation))
        return row_key(self.weights, self.dtype, self.dataset, self.split, evaluation.key, SHARED,
                       "sample:" + text_sha256(sample))

    def evaluation(self, key: str) -> Evaluation:
        return self._lookup()["evaluations"][key]

    def method(self, key: str) -> Method:
        return self._lookup()["methods"][key]


def method_key(method: Optional[Method | str]) -> str:
    """The method part of a row's key: SHARED for None, a floor's key as it is, else the method's key."""
    return SHARED if method is None else method if isinstance(method, str) else method.key


def plan_suite(context: RunContext, suite: Suite, index: int, seed: int) -> SuitePlan:
    """A suite made concrete in a run context, every pairing, parameter and target checked before any work."""
    adapter = context.adapter(suite.model)
    evaluations = configured(EVALS, suite.evals, suite.eval_params, suite.shared_params)
    # a leaderboard's floor replaces the one-draw random method: "all" leaves it out (named, it stays)
    exclude = (*suite.exclude_methods, *(("random",) if suite.baseline else ()))
    methods, named = select_methods(adapter, list(suite.methods) if not isinstance(suite.methods, str)
                                    else suite.methods, suite.method_params, exclude,
                                    lambda name: context.method(name, {}))
    left_out = left_out_cells(adapter, evaluations, exclude) if not named else {}
    if suite.baseline:  # a leaderboard leaves out, and names, the evaluations this model cannot have
        evaluations = [e for e in evaluations if e.name not in left_out.get("evaluations", {})]
    examples, notes = context.examples(adapter, suite.dataset, suite.split, suite.dataset_params)
    passed_over: list[str] = []
    if suite.example_ids is None:  # a contrast of one token with itself explains nothing: passed over, named
        chosen = sample(examples, suite.n, seed, lambda e: not same_contrast(adapter, e.target), passed_over)
    else:
        by_id = {e.id: e for e in examples}
        chosen = [by_id[i] for i in suite.example_ids]
    check_targets(adapter, chosen, methods)
    evaluations = [e.resolve(adapter, suite.dataset, chosen) for e in evaluations]  # an "auto" fixed before any key
    plans = assign_methods(adapter, evaluations, methods, named, suite.dataset)
    scoring, analyses, floors = [], [], set()
    for evaluation, given in plans:
        evaluation.check_examples(adapter, chosen)
        if not evaluation.needs_methods:
            analyses.append(evaluation)
            continue
        if suite.baseline and evaluation.has_floor:
            if suite.floor_draws is not None:  # an instance setting: part of the floor rows' key alone
                evaluation = copy.copy(evaluation)
                evaluation.floor_draws = suite.floor_draws
            floors.add(evaluation.key)
        elif suite.baseline and evaluation.family == "faithfulness" and "random" not in {m.name for m in given} \
                and "random" not in suite.exclude_methods:
            given = [*given, context.method("random", {})]  # a faithfulness table without a floor of its own
        scoring.append((evaluation, given))
    notes = {**notes, "dataset_size": len(examples), **({"skipped_same_contrast": passed_over} if passed_over else {}),
             **({"left_out": left_out} if left_out else {})}
    return SuitePlan(index, suite, adapter.name, adapter.weights_sha256, str(adapter.dtype).replace("torch.", ""),
                     suite.dataset, suite.split, notes, chosen, scoring, analyses, seed,
                     min(examples, key=lambda e: len(e.text), default=None), frozenset(floors))


@dataclass
class Job:
    """A shard of one suite's examples with the rows each still lacks, or one analysis of a suite's sample."""

    suite: int
    rows: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # example id -> (eval, method, key)
    analysis: Optional[tuple[str, str]] = None  # (evaluation key, row key)
    # the stored shared payloads its rows' scores read (``Evaluation.score_reads_shared``), by the shared row's key
    given: dict[str, object] = field(default_factory=dict)

    def size(self) -> int:
        return sum(len(v) for v in self.rows.values()) + (self.analysis is not None)

    def as_dict(self) -> dict:
        return {"suite": self.suite, "rows": self.rows, "analysis": self.analysis, "given": self.given}

    @classmethod
    def from_dict(cls, job: dict) -> "Job":
        return cls(job["suite"], {k: [tuple(r) for r in v] for k, v in job["rows"].items()},
                   tuple(job["analysis"]) if job["analysis"] else None, job.get("given") or {})

    def shared_reads(self, plan: "SuitePlan") -> dict[str, tuple[str, str]]:
        """The shared rows its method rows' scores read (:attr:`Evaluation.score_reads_shared`) that it does not
        compute itself: key -> (evaluation key, example id)."""
        by_id = {e.id: e for e in plan.examples}
        out = {}
        for example_id, cells in self.rows.items():
            computed = {eval_key for eval_key, cell, _ in cells if cell == SHARED}
            for eval_key, cell, _ in cells:
                evaluation = plan.evaluation(eval_key)
                if evaluation.score_reads_shared and eval_key not in computed and cell != plan.floor_of(eval_key) \
                        and cell != SHARED:
                    out[plan.row_key(evaluation, None, by_id[example_id])] = (eval_key, example_id)
        return out


def missing_jobs(plan: SuitePlan, done: set[str], shard_size: int,
                 only: Optional[set[tuple[str, str]]] = None) -> list[Job]:
    """The jobs that compute a suite's missing rows: its analyses, then shards of examples in sampling order
    (``only``: just the rows of these (evaluation key, example id) cells, and no analysis)."""
    jobs = [Job(plan.index, analysis=(e.key, plan.analysis_key(e))) for e in plan.analyses
            if plan.analysis_key(e) not in done and only is None]
    todo: dict[str, list] = {}
    for _, _, example, key, eval_key, mkey in plan.keyed_rows():
        if key not in done and (only is None or (eval_key, example.id) in only):
            todo.setdefault(example.id, []).append((eval_key, mkey, key))
    order = [e.id for e in plan.examples if e.id in todo]
    for start in range(0, len(order), shard_size):
        jobs.append(Job(plan.index, {i: todo[i] for i in order[start:start + shard_size]}))
    return jobs


def failure_reason(err: BaseException) -> str:
    """An error as one line: its type and the first line of its message."""
    text = str(err).strip().split("\n")[0]
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def run_job(context: RunContext, plan: SuitePlan, job: Job, progress: bool = False) -> tuple[list[dict], dict]:
    """Compute a job in a run context: its rows (``key, suite, eval, method, example, payload``) and counts."""
    began = time.perf_counter()
    adapter = context.adapter(plan.model)
    eval_context = EvalContext(plan.dataset, plan.seed, progress, {**plan.notes}, shared=context)
    if job.analysis is not None:
        evaluation = plan.evaluation(job.analysis[0])
        sample = plan.sample_for(evaluation)
        records = evaluation(adapter, [], sample, EvalContext(plan.dataset, plan.seed, progress, {
            **plan.notes, "sample_size": len(sample)}, shared=context))
        return [{"key": job.analysis[1], "suite": plan.name, "eval": evaluation.key, "method": SHARED,
                 "example": "sample", "payload": {"records": records}}], {"rows": 1}
    by_id = {e.id: e for e in plan.examples}
    if plan.stand_in is not None:
        context.warm_up_on(adapter, plan.stand_in)
    batcher = context.batcher
    before = (batcher.rows_sent, batcher.rows_distinct, batcher.rows_cached, context.attributions_computed,
              batcher.rows_requested, batcher.forward_seconds, context.attribution_seconds,
              Counter(batcher.lengths_sent))
    work, meta = {}, {}
    pairs = [(example_id, cell) for example_id, cells in job.rows.items() for cell in cells]
    scored: dict[str, list[Example]] = {}  # per method, the examples whose attribution the job's rows score
    for example_id, (eval_key, cell, _) in pairs:
        if plan.evaluation(eval_key).per_example and cell != SHARED and cell != plan.floor_of(eval_key):
            scored.setdefault(cell, []).append(by_id[example_id])
    for cell, examples in scored.items():  # a batched method's attributions of the whole shard in one call
        try:
            context.prefetch(adapter, plan.method(cell), examples)
        except Exception:  # noqa: BLE001 -- a text the method fails on: each is attributed on its own below
            pass
    failures: list[dict] = []  # a method's rows it failed to give (its error), left out: a rerun tries them again
    for example_id, (eval_key, cell, key) in tqdm(pairs, desc=f"shard of {plan.model}", unit="row",
                                                  disable=not progress, leave=False):
        evaluation, example = plan.evaluation(eval_key), by_id[example_id]
        item = eval_context.work(adapter, example)
        if job.given and evaluation.score_reads_shared and eval_key not in item.given:
            held = job.given.get(plan.row_key(evaluation, None, example))
            if held is not None:
                item.given[eval_key] = held
        if cell == SHARED:
            work[key] = evaluation.shared(item)
        elif cell == plan.floor_of(eval_key):
            work[key] = evaluation.floor(item)
        else:
            try:
                work[key] = (evaluation.score(item, item.attribution(plan.method(cell))) if evaluation.per_example
                             else evaluation.payload_by_run(item, plan.method(cell), eval_context))
            except Exception as err:  # noqa: BLE001 -- a method (a plugin's, often) that fails on this example
                if not context.keep_going:
                    if isinstance(err, AttrbenchError):
                        raise
                    raise MethodError(f"method '{plan.method(cell).name}' failed on example {example_id} of "
                                      f"{plan.name}: {failure_reason(err)}") from err
                failures.append({"suite": plan.name, "method": plan.method(cell).name, "method_key": cell,
                                 "eval": evaluation.name, "eval_key": eval_key, "example": example_id,
                                 "reason": failure_reason(err)})
                continue
        meta[key] = (eval_key, cell, example_id)
    done = context.batcher.run(work)
    rows = [{"key": key, "suite": plan.name, "eval": meta[key][0], "method": meta[key][1], "example": meta[key][2],
             "payload": done[key]} for key in work]
    return rows, {"rows": len(rows), "failures": failures, "model_rows": batcher.rows_sent - before[0],
                  "distinct_rows": batcher.rows_distinct - before[1], "cached_rows": batcher.rows_cached - before[2],
                  "attributions": context.attributions_computed - before[3],
                  "requested_rows": batcher.rows_requested - before[4],
                  "forward_seconds": batcher.forward_seconds - before[5],
                  "attribution_seconds": context.attribution_seconds - before[6],
                  "model_lengths": batcher.lengths_sent - before[7],
                  # the job's cost as this process counts it (a Ray worker runs on one thread); the key predates GPU
                  # folders, whose cost is in GPU seconds (published folders keep the name)
                  "cpu_seconds": cost_seconds(time.perf_counter() - began, adapter.device.type)}
