"""The attribution cache a run's evaluations share: memoised, stored, warmed up and timed.

Runtime machinery, apart from the plugin layer: an evaluation asks its
:class:`~attrbench.plugin.evaluation.EvalContext` for attributions and per-example work
(:class:`~attrbench.plugin.evaluation.SharedWork` says what it needs); a :class:`Workspace` answers, backed by the
run's shared-work cache (``attrbench.runtime.workcache``) when it has one, and measures what each computed
attribution cost (the timing evaluation's rows).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..datasets.base import Example
from ..ops.batching import Batcher
from ..ops.measure import timed
from ..plugin.evaluation import ExampleWork
from ..plugin.method import Method, MethodResult


class Workspace:
    """What the evaluations of one process share: attributions (timed, memoised), per-example work, and the
    batcher that answers their model-output requests.

    Methods are deterministic (a conformance check), so an attribution is keyed by model weights,
    dtype, method with its parameters, text and target, and computed once however many evaluations
    score it; ``store`` (``attrbench.runtime.workcache.WorkCache``) keeps it across processes and runs.
    Each computed attribution records its cost (``meta["cost"]``: seconds and peak memory of that call,
    after one untimed warm-up call of the method per process, on the stand-in example the run named with
    :meth:`warm_up_on`, else on the example itself). The run context
    (:class:`~attrbench.runtime.context.RunContext`) is one; a plain one serves a single call. It is what the
    plugin layer's :class:`~attrbench.plugin.evaluation.SharedWork` describes.
    """

    def __init__(self, batch_size: int = 64, cache_size: int = 20_000, store=None, batcher: Optional[Batcher] = None):
        self.batch_size, self.cache_size, self.store = batch_size, cache_size, store
        self.batcher = batcher or Batcher(store)
        self._attributions: "OrderedDict[tuple, MethodResult]" = OrderedDict()
        self._memo: "OrderedDict[tuple, object]" = OrderedDict()
        self._warm: set[tuple] = set()
        self._stand_ins: dict[str, Example] = {}  # model weights -> the example each method's warm-up call uses
        self.attributions_computed = 0
        self.attribution_seconds = 0.0  # the measured cost of the attributions computed (not those cached)

    def memo(self, key: tuple, compute):
        """A value shared by the units of this process, computed once per key (which names all it depends on)."""
        if key not in self._memo:
            self._memo[key] = compute()
            if len(self._memo) > self.cache_size:
                self._memo.popitem(last=False)
        return self._memo[key]

    def warm_up_on(self, adapter, example: Example) -> None:
        """Warm each method up on ``example`` (a run names its dataset's shortest): the warm-up absorbs lazy imports
        and first-call costs, which do not grow with the input, so a short input does it for a fraction of a full
        call. The first example named for a model stays."""
        self._stand_ins.setdefault(adapter.weights_sha256, example)

    def _warm_up(self, adapter, method: Method, example: Example) -> None:
        """One untimed call of ``method`` per process and model, on the stand-in example where one was named."""
        if (adapter.weights_sha256, method.key) in self._warm:
            return
        stand_in = self._stand_ins.get(adapter.weights_sha256, example)
        try:
            method(adapter, [stand_in.text], target=stand_in.target)
        except Exception:  # noqa: BLE001 -- a stand-in some method cannot take: warm up on the example itself
            if stand_in is example:
                raise
            method(adapter, [example.text], target=example.target)
        self._warm.add((adapter.weights_sha256, method.key))

    def _key(self, adapter, method: Method, example: Example) -> tuple:
        return adapter.weights_sha256, str(adapter.dtype), method.key, example.text, example.target

    def _keep(self, key: tuple, result: MethodResult, store: bool) -> None:
        if store and self.store is not None:
            self.store.attribution_put("|".join(map(str, key)), {
                "tokens": result.tokens, "values": result.values.tolist(), "residual": result.residual,
                "meta": result.meta})
        self._attributions[key] = result
        if len(self._attributions) > self.cache_size:
            self._attributions.popitem(last=False)

    def _known(self, adapter, method: Method, example: Example) -> Optional[MethodResult]:
        """The attribution memoised in this process, or stored by an earlier one (then memoised)."""
        key = self._key(adapter, method, example)
        if key in self._attributions:
            return self._attributions[key]
        stored = self.store.attribution_get("|".join(map(str, key))) if self.store is not None else None
        if stored is None:
            return None
        result = MethodResult(method.name, adapter.name, stored["tokens"], np.asarray(stored["values"]),
                              stored["residual"], stored["meta"])
        self._keep(key, result, store=False)
        return result

    def attribution(self, adapter, method: Method, example: Example) -> MethodResult:
        """One method's input attribution of one example for its own target, with its cost (memoised, stored)."""
        known = self._known(adapter, method, example)
        if known is not None:
            return known
        self._warm_up(adapter, method, example)  # lazy imports, first calls: not the method's cost
        (result,), seconds, peak_mb = timed(lambda: method(adapter, [example.text], target=example.target),
                                            adapter.device)
        result.meta["cost"] = {"seconds": seconds, "peak_mb": peak_mb, "n_tokens": len(result.tokens)}
        self.attributions_computed += 1
        self.attribution_seconds += seconds
        self._keep(self._key(adapter, method, example), result, store=True)
        return result

    def prefetch(self, adapter, method: Method, examples: Sequence[Example]) -> None:
        """Compute a batched method's missing attributions of ``examples`` in one call (the method packs them into
        length-sorted padded batches of the run's token budget), so that later lookups find them. Each result's cost
        is the call's seconds shared out by tokens (``meta["cost"]["batch"]``: the texts timed together), which is
        what a text costs when a run attributes many; a method that is not batched computes each when asked."""
        if not method.batched:
            return
        todo, seen = [], set()
        for example in examples:
            key = self._key(adapter, method, example)
            if key not in seen and self._known(adapter, method, example) is None:
                seen.add(key)
                todo.append(example)
        if len(todo) < 2:
            return
        self._warm_up(adapter, method, todo[0])
        method = method.within(self.batcher.batch_tokens, self.batcher.pad_tokens)
        results, seconds, peak_mb = timed(lambda: method(adapter, [e.text for e in todo],
                                                         target=[e.target for e in todo]), adapter.device)
        tokens = sum(len(r.tokens) for r in results)
        for example, result in zip(todo, results, strict=True):
            result.meta["cost"] = {"seconds": seconds * len(result.tokens) / tokens, "peak_mb": peak_mb,
                                   "n_tokens": len(result.tokens), "batch": len(todo)}
            self._keep(self._key(adapter, method, example), result, store=True)
        self.attributions_computed += len(todo)
        self.attribution_seconds += seconds

    def attributions(self, adapter, method: Method, examples: Sequence[Example], progress: bool = False,
                     desc: str = "") -> list[MethodResult]:
        """One method's input attributions for each example's own target (memoised; a batched method's computed
        together)."""
        self.prefetch(adapter, method, examples)
        return [self.attribution(adapter, method, e)
                for e in tqdm(examples, desc=desc or method.name, unit="ex", disable=not progress, leave=False)]

    def work(self, adapter, example: Example, seed: int = 0, dataset: str = "") -> "ExampleWork":
        """The per-example view every evaluation of that example shares (memoised)."""
        return self.memo(("work", adapter.weights_sha256, str(adapter.dtype), example.text, example.target, seed,
                          dataset), lambda: ExampleWork(self, adapter, example, seed, dataset))
