"""The call shapes of evaluation plugins, and what they declare for the report.

Two kinds:

- **scoring evaluations** (``needs_methods``) work per example. ``score(work, result)`` gives one
  method's payload on one example (``{metric: value, ...}``); ``shared(work)`` gives what every method
  of that example shares (e.g. NAOPC's bounds); ``summarise`` turns the payloads of a sample into each
  metric's per-example values (where a metric needs all methods at once, as NAOPC's normalisation
  does). Model outputs are asked for by yielding :class:`~attrbench.ops.perturb.Forward` requests
  (``yield from work.perturbations(...).drops(...)``), so a run answers every request of a shard at
  once, deduplicated and batched (``attrbench.ops.batching``), and keeps each payload per example:
  adding a method or raising n computes only the missing ones.
- a scoring evaluation may declare a **floor** (``floor(work)``): per example, the expected payload under a
  uniformly random attribution (exact where the metric allows it, else ``FLOOR_DRAWS`` seeded draws, with its
  Monte-Carlo standard error), which leaderboard runs put in its table in place of one random draw
  (:meth:`Evaluation.floor`, :meth:`Evaluation.summarise_floor`).
- **analyses** of the model itself (the papers' figures; ``needs_methods = False``) compute records
  over a whole sample with :meth:`Evaluation.run`.

Both are called as ``evaluation(adapter, methods, examples, context) -> list[dict]``: one record per
(method, metric), each with ``model, method, eval, dataset, metric, mean, std, n``, the example ids
and per-example values (:meth:`Evaluation.record`). Attributions come from ``work.attribution`` /
``context.attributions``, so every evaluation of a run explains the same examples with the same
targets and shares the work (:class:`SharedWork`: the run's attribution cache, ``attrbench.runtime.workspace``).

What the report shows is declared here, not in the report: the metric a table is ranked by and
each metric's direction, the figure kinds (``attrbench.report.figures.FIGURES``), the columns an
evaluation adds to the other tables of its suite (cost), a published reference per record
(``published = {"value", "source"}``), and whether a metric is derived from another evaluation's.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..datasets.base import Example
from ..decompose import decompose
from ..errors import InputError
from ..models.architectures import no_reader_reason
from ..ops.perturb import Perturbations
from ..ops.records import make_record
from ..ops.stats import summary
from ..ops.targets import ResolvedTarget, resolve_text
from ..ops.verdicts import FLOOR
from ..params import Configurable
from .method import Method, MethodResult

# The Monte-Carlo draws of a floor that is not exact. A constant, not a parameter: parameters are part of every row's
# key; this is part of the floor rows' key only (``Evaluation.floor_key``), so changing it recomputes those alone.
FLOOR_DRAWS = 100


class SharedWork(Protocol):
    """What the evaluations of one process share, as they use it: memoised attributions (each with its measured cost,
    ``meta["cost"]``), per-example work, values memoised by key, and the batcher that answers model-output requests
    (``attrbench.ops.batching.Batcher``). ``attrbench.runtime.workspace.Workspace`` is the implementation."""

    batcher: Any

    def attribution(self, adapter, method: Method, example: Example) -> MethodResult: ...

    def attributions(self, adapter, method: Method, examples: Sequence[Example], progress: bool = False,
                     desc: str = "") -> list[MethodResult]: ...

    def work(self, adapter, example: Example, seed: int = 0, dataset: str = "") -> "ExampleWork": ...

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any: ...


class ExampleWork:
    """One example as the evaluations see it: its tokens, its resolved target, its perturbations, attributions."""

    def __init__(self, workspace: SharedWork, adapter, example: Example, seed: int = 0, dataset: str = ""):
        self.workspace, self.adapter, self.example, self.seed = workspace, adapter, example, seed
        self.dataset = dataset  # the dataset's name (or a file's path), for evaluations whose choices depend on it
        self.ids: list[int] = adapter.tokenizer(example.text)["input_ids"]
        self._resolved: Optional[ResolvedTarget] = None
        self._perturbations: dict[tuple, Perturbations] = {}
        self.given: dict[str, Any] = {}  # evaluation key -> this example's shared payload, as a run already holds it

    @property
    def resolved(self) -> ResolvedTarget:
        """The example's target made concrete (the model's prediction, for ``auto``): computed once."""
        if self._resolved is None:
            self._resolved = resolve_text(self.adapter, self.ids, self.example.target)
        return self._resolved

    def perturbations(self, operator: str = "delete", unit: str = "token") -> Perturbations:
        """The example's memo of perturbed inputs for one operator and unit, shared by every metric and method."""
        key = (operator, unit)
        if key not in self._perturbations:
            self._perturbations[key] = Perturbations(self.adapter, self.ids, self.resolved, operator, unit,
                                                     self.example.text)
        return self._perturbations[key]

    def attribution(self, method: Method) -> MethodResult:
        return self.workspace.attribution(self.adapter, method, self.example)

    def shared_payload(self, evaluation: "Evaluation") -> Any:
        """``evaluation``'s shared payload of this example (one that :attr:`Evaluation.score_reads_shared`): the one
        the run holds where it gave it (a published run's row, so that a method added to it does not recompute
        what the row holds), else computed once here. None where the held row predates what it holds now."""
        if evaluation.key not in self.given:
            self.given[evaluation.key] = evaluation.shared(self)
        return self.given[evaluation.key]

    def rng(self, salt: str) -> np.random.Generator:
        """A generator seeded by the run's seed, the example and ``salt``: the same draws for every method."""
        return np.random.default_rng(zlib.crc32(f"{self.seed}:{self.example.id}:{salt}".encode()))


@dataclass
class EvalContext:
    """What one evaluation call runs in, besides the model, methods and examples. ``shared`` is the run's work
    (``attrbench.runtime.workspace.Workspace``; a run's ``RunContext`` is one): the plugin layer declares what it
    needs of it (:class:`SharedWork`) and the runtime, which owns caching, storage and timing, supplies it."""

    dataset: str
    seed: int = 0
    progress: bool = True
    notes: dict = field(default_factory=dict)  # the dataset's split, target convention, file hash
    shared: Optional[SharedWork] = None  # attributions and per-example work shared in a run

    @property
    def work_shared(self) -> SharedWork:
        if self.shared is None:
            raise InputError("this EvalContext has no shared work to compute with: give it "
                             "shared=attrbench.runtime.workspace.Workspace(), or call attrbench.evaluate")
        return self.shared

    def attributions(self, adapter, method: Method, examples: Sequence[Example], desc: str = "") -> list[MethodResult]:
        """One method's input attributions for each example's own target, shared by the run's evaluations."""
        return self.work_shared.attributions(adapter, method, examples, self.progress, desc)

    def work(self, adapter, example: Example) -> ExampleWork:
        return self.work_shared.work(adapter, example, self.seed, self.dataset)

    def memo(self, key: tuple, compute):
        """A per-example value shared by every method; ``key`` names all it depends on."""
        return self.work_shared.memo(key, compute)


class Evaluation(Configurable):
    """Base class. Subclasses set ``name``, ``family``, ``description``, ``reference`` and what the report needs."""

    kind = "evaluation"
    family: str = ""
    description: str = ""
    reference: str = ""
    needs_methods: bool = True
    score_methods_only: bool = True  # needs input attributions (not token-to-token maps)
    # whether ``score`` reads the example's shared payload (``work.shared_payload(self)``; ``shared`` then gives a
    # plain dict that depends on the example's text and target only): a run hands a job the stored one
    score_reads_shared: bool = False
    # -- for the report --
    primary_metric: Optional[str] = None  # the metric its tables are ranked by (default: the first)
    higher_is_better: dict[str, bool] = {}  # each metric's direction (its keys: the metrics score() gives)
    # each metric's possible range, (low, high) with None for no limit: a mean's t-interval is clipped to it, so a
    # small sample of a bounded metric never shows a share above 1 (the mean lies in the range: coverage unchanged)
    bounds: dict[str, tuple[Optional[float], Optional[float]]] = {}
    derived: Optional[str] = None  # how its metric follows from another evaluation's (it is then not counted apart)
    ranked: bool = True  # whether its tables rank methods (cost is shown, not tiered)
    headline: int = 100  # which faithfulness table leads a suite's summary (lowest first)
    figures: tuple[str, ...] = ("bars",)  # figure kinds, by name in attrbench.report.figures.FIGURES
    cost_columns: dict[str, tuple[str, int]] = {}  # metric -> (column, decimals) it adds to the suite's method tables
    # the cost a suite's summary shows beside faithfulness (short table, findings, faithfulness vs cost), by role:
    # "seconds" (per example) and "forward_passes" (the same time in forward passes of the model) -> its metric
    cost_metrics: dict[str, str] = {}
    rope: dict[str, float] = {}  # region of practical equivalence per metric (default 0.01)
    metric_names: dict[str, str] = {}  # each metric as a reader names it in findings ("NAOPC comprehensiveness")
    # why a metric has no value on an example, and why it sits at its upper bound, as a table's note says it
    undefined_when: dict[str, str] = {}
    at_bound_when: dict[str, str] = {}
    robustness: Optional[tuple[str, ...]] = None  # the metrics that vote in a suite's robustness panel (default: the
    # primary metric of an independent faithfulness evaluation; none of a derived one)
    record_fields: tuple[str, ...] = ()  # payload fields that are the same on every example, kept in the records
    floor_draws: int = FLOOR_DRAWS  # draws of a sampled floor (read at call time: part of ``floor_key``)
    floor_how: str = ""  # how its floor is computed, for the records (else a payload's ``floor["how"]``)
    # a check of a method's own claim (its primary metric 1.0 where an example meets it, 0.0 where not): the share of
    # examples a method × suite cell must meet to pass; the report shows the share beside the method's scores and
    # names the cells below it in the findings. None: not such a check
    check_share: Optional[float] = None

    def takes(self, method: Method) -> bool:
        return method.output == "scores" or not self.score_methods_only

    def supports(self, adapter) -> Optional[str]:
        """Why this evaluation cannot run on ``adapter`` (None when it can); an analysis that decomposes the layers
        needs a layer reader."""
        return None

    def check_model(self, adapter) -> None:
        """Raise before any work if this evaluation cannot run on this model (:meth:`supports`)."""
        reason = self.supports(adapter)
        if reason:
            raise InputError(f"evaluation '{self.name}' cannot run on '{adapter.name}': {reason}")

    def check(self, adapter, methods: Sequence[Method], context: EvalContext) -> None:
        """Raise before any work if this evaluation cannot serve these methods on this model."""
        self.check_model(adapter)
        if self.needs_methods and not methods:
            raise InputError(f"evaluation '{self.name}' scores methods: give --method (one or more)")
        for method in methods:
            if not self.takes(method):
                raise InputError(f"'{method.name}' gives token-to-token maps, not input attributions; "
                                 f"'{self.name}' needs a scores method (e.g. its rollout)")
            reason = method.supports(adapter)
            if reason:
                raise InputError(f"method '{method.name}' cannot run on '{adapter.name}': {reason}")

    def check_examples(self, adapter, examples: Sequence[Example]) -> None:
        """Raise before any work if these examples lack what this evaluation reads (e.g. human rationales)."""

    def resolve(self, adapter, dataset: str, examples: Sequence[Example]) -> "Evaluation":
        """This evaluation with every parameter whose value depends on the suite (an ``auto``) fixed to a concrete
        value (``with_params``), so that a row's key says what its payload was computed with. Called once when a
        suite is planned, before any key is made; by default the evaluation itself."""
        return self

    def __call__(self, adapter, methods: Sequence[Method], examples: Sequence[Example],
                 context: EvalContext) -> list[dict]:
        if not examples:
            raise InputError(f"evaluation '{self.name}' got an empty sample: give --n of at least 1")
        self.check(adapter, methods, context)
        self.check_examples(adapter, examples)
        return self.run(adapter, list(methods), list(examples), context)

    # -- scoring evaluations: per example ------------------------------------------------------------
    def shared(self, work: ExampleWork) -> Any:
        """What every method of this example shares (a payload dict, a generator giving one, or None for nothing)."""
        return None

    def score(self, work: ExampleWork, result: MethodResult) -> Any:
        """One method's payload on one example: ``{metric: value or None, ...}``, or a generator giving it."""
        raise NotImplementedError

    @property
    def per_example(self) -> bool:
        """Whether it scores one example at a time (``score``); one that only implements ``run`` is run on one
        example at a time instead (:meth:`payload_by_run`)."""
        return type(self).score is not Evaluation.score

    def payload_by_run(self, work: ExampleWork, method: Method, context: "EvalContext") -> dict:
        """The payload of an evaluation that implements only :meth:`run`: its records on this one example."""
        records = self.run(work.adapter, [method], [work.example], context)
        return {r["metric"]: r["values"][0] for r in records}

    def summarise(self, scored: dict[str, list[Optional[dict]]], shared: list[Optional[dict]]
                  ) -> dict[str, dict[str, dict]]:
        """Per method key and metric, ``{"values": [one per example, None where undefined], **extra}`` from the
        payloads of a sample (``scored[method key][k]`` and ``shared[k]`` for example k). By default each metric's
        value is read from each payload; evaluations whose metrics need every method (normalisation) override it."""
        out = {}
        for key, payloads in scored.items():
            fields = {f: next((p[f] for p in payloads if p is not None and p.get(f) is not None), None)
                      for f in self.record_fields}
            out[key] = {metric: {"values": [None if p is None else p.get(metric) for p in payloads], **fields}
                        for metric in self.higher_is_better}
        return out

    # -- the random floor: per example, a metric's expectation under a uniformly random attribution --------
    def floor(self, work: ExampleWork) -> Any:
        """The floor's payload on one example (or a generator giving it): the payload fields a method's payload has,
        at their expected value under a uniformly random attribution (a uniformly random ordering of the features,
        for an erasure metric), with ``mc_se`` (``{field: Monte-Carlo standard error}``, 0.0 where exact) and
        ``floor`` (``{"exact": bool, ...}``: how it was computed on this example). Exact where the metric allows
        it, else at least ``floor_draws`` seeded draws (``work.rng``). Not overridden: no floor."""
        return None

    @property
    def has_floor(self) -> bool:
        return type(self).floor is not Evaluation.floor

    @property
    def floor_key(self) -> str:
        """The method part of the floor rows' keys: the floor's settings (its rows sit beside the shared ones)."""
        return f"floor(draws={self.floor_draws})"

    def summarise_floor(self, floor: list[Optional[dict]], shared: list[Optional[dict]],
                        scored: dict[str, list[Optional[dict]]]) -> dict[str, dict]:
        """Per metric, ``{"values", "mc_se", "floor", **extra}`` of the floor's payloads (``floor[k]``, None where
        missing) beside the methods' (``scored``, for a normalisation that needs them). By default the floor is
        summarised as a method would be, which is right for a metric linear in the payload's fields (an
        expectation of the field is the expectation of the metric), with each metric's ``mc_se`` read from the
        payloads. A nonlinear metric overrides this and averages the metric over the draws instead."""
        out = self.summarise({FLOOR: floor}, shared)[FLOOR]
        for metric, entry in out.items():
            entry["mc_se"] = [None if p is None or v is None else float((p.get("mc_se") or {}).get(metric, 0.0))
                              for p, v in zip(floor, entry["values"])]
            entry["floor"] = self.floor_description(floor)
        return out

    def floor_description(self, floor: list[Optional[dict]]) -> dict:
        """What a floor record says of how it was computed: the draws, how many examples were exact, and how."""
        given = [p["floor"] for p in floor if p is not None and p.get("floor")]
        return {"draws": self.floor_draws, "exact_examples": sum(1 for f in given if f.get("exact")),
                "sampled_examples": sum(1 for f in given if not f.get("exact")),
                "how": self.floor_how or next((f["how"] for f in given if f.get("how")), "")}

    def run(self, adapter, methods, examples, context) -> list[dict]:
        """Records of one sample: every payload computed (model outputs batched across examples), then summarised."""
        works = [context.work(adapter, e) for e in examples]
        jobs = {}
        for k, work in enumerate(works):
            jobs[("shared", k)] = self.shared(work)
        for method in methods:
            for k, work in enumerate(works):
                jobs[(method.key, k)] = self.score(work, work.attribution(method))
        done = context.work_shared.batcher.run(jobs)
        summaries = self.summarise({m.key: [done[(m.key, k)] for k in range(len(works))] for m in methods},
                                   [done[("shared", k)] for k in range(len(works))])
        return [self.record(adapter, context, method, metric, entry["values"], examples,
                            **{k: v for k, v in entry.items() if k != "values"})
                for method in methods for metric, entry in summaries[method.key].items()]

    # -- records ---------------------------------------------------------------------------------
    def record(self, adapter, context: EvalContext, method: Method | str, metric: str, values,
               examples: Sequence[Example], **extra) -> dict:
        """A result row: mean ± std over the defined per-example ``values`` (None marks undefined ones).

        ``values`` (and ``per_example``, when given) are kept per example, in the order of
        ``example_ids``, so records of several shards merge exactly (:meth:`merge`). ``method`` is
        the scored method (its parameters are recorded) or a label ("-" for the model itself).
        """
        scored = {"method": method.name, "method_params": method.get_params()} if isinstance(method, Method) else {
            "method": method or "-"}
        return make_record(adapter.name, scored, self.name, self.get_params(), context.dataset, metric, values,
                           context.seed, [e.id for e in examples], self.higher_is_better, context.notes, **extra)

    def merge(self, shards: Sequence[dict]) -> dict:
        """One record from the same record of several example shards (in shard order)."""
        merged = dict(shards[0])
        for key in ("values", "example_ids", "per_example"):
            if key in merged:
                merged[key] = [v for shard in shards for v in shard[key]]
        merged.update(summary(merged["values"]), sample_size=len(merged["example_ids"]))
        return merged

    def layer_summary(self, record: dict) -> str:
        """The report's "per layer" cell of an analysis record (a flat ``per_layer`` list by default)."""
        layers = record.get("per_layer")
        if isinstance(layers, list) and layers and not isinstance(layers[0], (list, dict)):
            return " ".join("-" if v is None else f"{v:.2f}" for v in layers)
        return ""


def decompositions(adapter, examples: Sequence[Example], scopes: Optional[Sequence[str]], progress: bool = False,
                   desc: str = "decompose", **options):
    """Decompose each example's text (one at a time, so kept parts stay small); yields Decompositions.

    ``scopes=None`` decomposes every scope of the model.
    """
    for example in tqdm(examples, desc=desc, unit="ex", disable=not progress, leave=False):
        yield decompose(adapter, [example.text], scopes=None if scopes is None else list(scopes), **options)[0]


class Analysis(Evaluation):
    """A paper's analysis of the model itself: runs the engine on the dataset's texts, takes no methods."""

    family = "analysis"
    needs_methods = False
    figures = ("per_layer",)

    def supports(self, adapter) -> Optional[str]:
        return no_reader_reason(adapter)

    def check(self, adapter, methods, context):
        self.check_model(adapter)  # methods given alongside other evaluations are simply not used here
