"""The one call shape every evaluation plugin has, and what it declares for the report.

``evaluation(adapter, methods, examples, context) -> list[dict]``: one record per (method, metric),
each with at least ``model, method, eval, dataset, metric, mean, std, n`` and the example ids it
was computed on (see :meth:`Evaluation.record`). Evaluations that score methods get their input
attributions from ``context.attributions``, so every evaluation of a run explains the same
examples with the same targets and shares the work (:class:`Workspace`). Analyses of the model itself (the papers'
figures) take no methods (``needs_methods = False``).

What the report shows is declared here, not in the report: the metric a table is ranked by and
each metric's direction, the figure kinds (``attrbench.report.figures.FIGURES``), the columns an
evaluation adds to the other tables of its suite (cost), and a published reference per record
(``published = {"value", "source"}``). A new evaluation plugin gets its table and figure from these.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Sequence

from tqdm.auto import tqdm

from ..datasets.base import Example
from ..decompose import decompose
from ..errors import InputError
from ..ops.perturb import Deletions
from ..ops.stats import summary
from ..ops.targets import resolve_text
from .method import Method, MethodResult
from .params import Configurable


class Workspace:
    """What the evaluations of one process share: memoised attributions and per-example work.

    Methods are deterministic (a conformance check), so an attribution is keyed by model, dtype,
    method with its parameters, text and target, and computed once however many evaluations score
    it; per-example work that does not depend on the method (an example's deletion curves, NAOPC's
    bounds) is memoised by a key naming everything it depends on. The run context
    (``attrbench.runtime.context.RunContext``) is one; a plain one serves a single call.
    """

    def __init__(self, batch_size: int = 64, cache_size: int = 20_000):
        self.batch_size, self.cache_size = batch_size, cache_size
        self._attributions: "OrderedDict[tuple, MethodResult]" = OrderedDict()
        self._memo: "OrderedDict[tuple, object]" = OrderedDict()

    def memo(self, key: tuple, compute):
        """A value shared by the units of this process, computed once per key (which names all it depends on)."""
        if key not in self._memo:
            self._memo[key] = compute()
            if len(self._memo) > self.cache_size:
                self._memo.popitem(last=False)
        return self._memo[key]

    def attributions(self, adapter, method: Method, examples: Sequence[Example], progress: bool = False,
                     desc: str = "") -> list[MethodResult]:
        """One method's input attributions for each example's own target (memoised)."""
        results = []
        for e in tqdm(examples, desc=desc or method.name, unit="ex", disable=not progress, leave=False):
            key = (adapter.name, str(adapter.dtype), method.key, e.text, e.target)
            if key not in self._attributions:
                self._attributions[key] = method(adapter, [e.text], target=e.target)[0]
                if len(self._attributions) > self.cache_size:
                    self._attributions.popitem(last=False)
            results.append(self._attributions[key])
        return results

    def deletions(self, adapter, input_ids: Sequence[int], target: str) -> Deletions:
        """The one :class:`~attrbench.ops.perturb.Deletions` of an example (model, text, target): every method and
        every erasure metric of that example reads and fills the same memo, so a set of deleted tokens that two
        methods' rankings (or AOPC, NAOPC and ABPC) reach goes through the model once."""
        ids = list(input_ids)
        return self.memo(("deletions", adapter.name, str(adapter.dtype), tuple(ids), target),
                         lambda: Deletions(adapter, ids, resolve_text(adapter, ids, target), self.batch_size))


@dataclass
class EvalContext:
    """What one evaluation call runs in, besides the model, methods and examples."""

    dataset: str
    seed: int = 0
    progress: bool = True
    notes: dict = field(default_factory=dict)  # the dataset's split, target convention, file hash
    shared: Workspace = field(default_factory=Workspace)  # attributions and per-example work shared in a run

    def attributions(self, adapter, method: Method, examples: Sequence[Example], desc: str = "") -> list[MethodResult]:
        """One method's input attributions for each example's own target, shared by the run's evaluations."""
        return self.shared.attributions(adapter, method, examples, self.progress, desc)

    def deletions(self, adapter, input_ids: Sequence[int], target: str) -> Deletions:
        """The example's deletion memo, shared by every method and erasure metric of the run."""
        return self.shared.deletions(adapter, input_ids, target)

    def memo(self, key: tuple, compute):
        """A per-example value shared by every method (e.g. NAOPC's bounds); ``key`` names all it depends on."""
        return self.shared.memo(key, compute)


class Evaluation(Configurable):
    """Base class. Subclasses set ``name``, ``family``, ``description``, ``reference`` and what the report needs."""

    kind = "evaluation"
    family: str = ""
    description: str = ""
    reference: str = ""
    needs_methods: bool = True
    score_methods_only: bool = True  # needs input attributions (not token-to-token maps)
    # -- for the report --
    primary_metric: Optional[str] = None  # the metric its tables are ranked by (default: the first)
    higher_is_better: dict[str, bool] = {}  # each metric's direction, recorded with every result
    figures: tuple[str, ...] = ("bars",)  # figure kinds, by name in attrbench.report.figures.FIGURES
    cost_columns: dict[str, tuple[str, int]] = {}  # metric -> (column, decimals) it adds to the suite's method tables

    def takes(self, method: Method) -> bool:
        return method.output == "scores" or not self.score_methods_only

    def check(self, adapter, methods: Sequence[Method], context: EvalContext) -> None:
        """Raise before any work if this evaluation cannot serve these methods on this model."""
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

    def __call__(self, adapter, methods: Sequence[Method], examples: Sequence[Example],
                 context: EvalContext) -> list[dict]:
        if not examples:
            raise InputError(f"evaluation '{self.name}' got an empty sample: give --n of at least 1")
        self.check(adapter, methods, context)
        self.check_examples(adapter, examples)
        return self.run(adapter, list(methods), list(examples), context)

    def run(self, adapter, methods, examples, context) -> list[dict]:
        raise NotImplementedError

    def record(self, adapter, context: EvalContext, method: Method | str, metric: str, values,
               examples: Sequence[Example], **extra) -> dict:
        """A result row: mean ± std over the defined per-example ``values`` (None marks undefined ones).

        ``values`` (and ``per_example``, when given) are kept per example, in the order of
        ``example_ids``, so records of several shards merge exactly (:meth:`merge`). ``method`` is
        the scored method (its parameters are recorded) or a label ("-" for the model itself).
        """
        values = [None if v is None else float(v) for v in values]
        scored = {"method": method.name, "method_params": method.get_params()} if isinstance(method, Method) else {
            "method": method or "-"}
        direction = {"higher_is_better": self.higher_is_better[metric]} if metric in self.higher_is_better else {}
        return {"model": adapter.name, **scored, "eval": self.name, "eval_params": self.get_params(),
                "dataset": context.dataset, "metric": metric, **summary(values), "seed": context.seed,
                "example_ids": [e.id for e in examples], "values": values, **direction, **context.notes, **extra}

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

    def check(self, adapter, methods, context):
        pass  # methods given alongside other evaluations are simply not used here
