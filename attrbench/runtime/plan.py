"""Units: what a run computes, planned once for ``attrbench run``, ``eval``, ``score`` and the Python API.

A unit is (model, dataset, evaluation with its parameters, method with its parameters, shard of
examples). :func:`plan_units` makes the units of one (model, dataset) from the evaluations, the
methods and the sampled examples, checking every pairing before any work: a method is given to
each evaluation that takes it (token-to-token maps only to those that take maps), a named method
that none of them takes is an error, and so is an evaluation left without methods.

:func:`run_unit` computes one unit in a :class:`~attrbench.runtime.context.RunContext` (the caches a
run shares); every executor goes through it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..datasets.base import Example
from ..errors import InputError
from ..ops.targets import Target, resolve
from ..plugin.evaluation import EvalContext, Evaluation
from ..plugin.method import Method
from ..plugin.params import params_key
from ..plugin.registry import EVALS, METHODS
from .context import RunContext


@dataclass(frozen=True)
class Unit:
    model: str
    dataset: str
    split: Optional[str]  # None: the dataset's default split
    eval: str
    eval_params: tuple  # sorted (name, value) pairs
    method: str  # "-" for analyses
    method_params: tuple
    shard: int
    example_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        """Every input of the unit's result except the examples, which the run's config fixes."""
        return "|".join([self.model, f"{self.dataset}:{self.split or 'default'}",
                         params_key(self.eval, dict(self.eval_params)),
                         params_key(self.method, dict(self.method_params)), str(self.shard)])

    def as_dict(self) -> dict:
        return {"model": self.model, "dataset": self.dataset, "split": self.split, "eval": self.eval,
                "eval_params": dict(self.eval_params), "method": self.method,
                "method_params": dict(self.method_params), "shard": self.shard, "example_ids": list(self.example_ids)}

    @classmethod
    def from_dict(cls, unit: dict) -> "Unit":
        return cls(unit["model"], unit["dataset"], unit["split"], unit["eval"], _pairs(unit["eval_params"]),
                   unit["method"], _pairs(unit["method_params"]), unit["shard"], tuple(unit["example_ids"]))


def _pairs(params: dict) -> tuple:
    return tuple(sorted(params.items()))


def select_methods(adapter, names: Sequence[str] | str, params: Optional[dict] = None, exclude: Sequence[str] = (),
                   lookup: Callable[[str], Method] = METHODS.get) -> tuple[list[Method], bool]:
    """The methods named, each with its parameters from ``params[name]``, and whether they were named:
    ``"all"`` is every registered method the model supports, but those in ``exclude``. ``lookup`` finds a
    method by name (the run context's, which also knows methods outside the registry)."""
    named = not (names == "all" or list(names) == ["all"])
    if not named:
        names = [m.name for m in METHODS.all() if m.supports(adapter) is None and m.name not in exclude]
    return [lookup(name).with_params(**(params or {}).get(name, {})) for name in names], named


def assign_methods(adapter, evaluations: Sequence[Evaluation], methods: Sequence[Method], named: bool,
                   dataset: str) -> list[tuple[Evaluation, list[Method]]]:
    """Each evaluation with the methods it takes; every pairing is checked here, before any work."""
    if not evaluations:
        raise InputError("no evaluation given; see `attrbench evals`")
    scoring = [e for e in evaluations if e.needs_methods]
    if named and methods and not scoring:
        raise InputError(f"{', '.join(e.name for e in evaluations)} analyse(s) the model itself and take(s) no --method")
    for method in methods if named else ():
        if not any(e.takes(method) for e in scoring):
            scoring[0].check(adapter, [method], EvalContext(dataset))  # raises, naming why
    plans = []
    for evaluation in evaluations:
        given = [m for m in methods if evaluation.takes(m)] if evaluation.needs_methods else []
        evaluation.check(adapter, given, EvalContext(dataset))
        plans.append((evaluation, given))
    return plans


def plan_units(adapter, dataset: str, split: Optional[str], evaluations: Sequence[Evaluation],
               methods: Sequence[Method], named: bool, examples: Sequence[Example],
               shard_size: Optional[int] = None) -> list[Unit]:
    """The units of one (model, dataset): analyses one unit each, scored methods in shards of examples.

    Every example's target is validated against the model here, before any unit runs.
    """
    check_targets(adapter, examples)
    ids = tuple(e.id for e in examples)
    size = shard_size or max(1, len(ids))
    units = []
    for evaluation, given in assign_methods(adapter, evaluations, methods, named, dataset):
        evaluation.check_examples(adapter, examples)
        common = dict(model=adapter.name, dataset=dataset, split=split, eval=evaluation.name,
                      eval_params=_pairs(evaluation.get_params()))
        if not evaluation.needs_methods:
            units.append(Unit(**common, method="-", method_params=(), shard=0, example_ids=ids))
            continue
        for method in given:
            for shard in range(math.ceil(len(ids) / size)):
                units.append(Unit(**common, method=method.name, method_params=_pairs(method.get_params()),
                                  shard=shard, example_ids=ids[shard * size:(shard + 1) * size]))
    return units


def check_targets(adapter, examples: Sequence[Example]) -> None:
    """Each example's target fits the model (the model's prediction is not needed to know that)."""
    for example in examples:
        try:
            resolve(adapter, adapter.tokenizer(example.text)["input_ids"], Target.parse(example.target), predict=False)
        except InputError as err:
            raise InputError(f"example {example.id}: {err}") from None


def run_unit(context: RunContext, unit: Unit, seed: int, progress: bool = False) -> list[dict]:
    """Compute one unit in a run context: its records."""
    adapter = context.adapter(unit.model)
    examples, notes = context.examples(adapter, unit.dataset, unit.split)
    by_id = {e.id: e for e in examples}
    chosen = [by_id[i] for i in unit.example_ids]
    evaluation = EVALS.get(unit.eval).with_params(**dict(unit.eval_params))
    methods = [] if unit.method == "-" else [context.method(unit.method, dict(unit.method_params))]
    eval_context = EvalContext(unit.dataset, seed, progress, {**notes, "sample_size": len(chosen),
                                                              "dataset_size": len(examples)}, shared=context)
    return evaluation(adapter, methods, chosen, eval_context)


def configured(plugins, names: Sequence[str], params: Optional[dict] = None, shared: Optional[dict] = None) -> list:
    """Registered plugins by name, each with its parameters from ``params[name]`` and those of
    ``shared`` (e.g. a CLI option) that it declares."""
    out = []
    for name in names:
        plugin = plugins.get(name)
        values = {k: v for k, v in (shared or {}).items() if k in plugin.params}
        out.append(plugin.with_params(**{**values, **(params or {}).get(name, {})}))
    return out
