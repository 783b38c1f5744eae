"""One process's view of a run: loaded models, dataset examples and memoised attributions.

:class:`RunContext` owns the caches that every unit of a run shares (the driver's, or each Ray
worker's): models by name, each dataset's examples as a model reads them, and the attributions the
evaluations score, keyed by model, dtype, method with its parameters, text and target (methods are
deterministic, a conformance check). Evaluations reach it through their ``EvalContext``.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence

from tqdm.auto import tqdm

from .datasets import Example, examples_for
from .method import Method, MethodResult


class RunContext:
    """One process's models, examples and memoised attributions (see the module docstring)."""

    def __init__(self, dtype: str = "float32", data_dir=None, cache_size: int = 20_000):
        self.dtype, self.data_dir, self.cache_size = dtype, data_dir, cache_size
        self._adapters: dict[str, object] = {}
        self._examples: dict[tuple, tuple[list[Example], dict]] = {}
        self._attributions: "OrderedDict[tuple, MethodResult]" = OrderedDict()
        self._local_methods: dict[str, Method] = {}
        self._memo: "OrderedDict[tuple, object]" = OrderedDict()

    # -- what units refer to by name ------------------------------------------------------------
    def add_adapter(self, adapter) -> None:
        """A model loaded by the caller (CLI, Python API), used for units that name it."""
        self._adapters[adapter.name] = adapter

    def adapter(self, name: str):
        if name not in self._adapters:
            from .models import load_model

            self._adapters[name] = load_model(name, dtype=self.dtype)
        return self._adapters[name]

    def examples(self, adapter, dataset: str, split: Optional[str]) -> tuple[list[Example], dict]:
        """A dataset's examples as a model reads them, read and tokenised once per context."""
        key = (adapter.name, str(adapter.dtype), dataset, split)
        if key not in self._examples:
            self._examples[key] = examples_for(adapter, dataset, split, self.data_dir)
        return self._examples[key]

    def add_method(self, method: Method) -> None:
        """A method that is not in the registry (e.g. external attributions), found by name in units."""
        self._local_methods[method.name] = method

    def method(self, name: str, params: dict) -> Method:
        from .registry import METHODS

        method = self._local_methods.get(name) or METHODS.get(name)
        return method.with_params(**params)

    # -- work -----------------------------------------------------------------------------------
    def memo(self, key: tuple, compute):
        """A value shared by the units of this process (e.g. an example's NAOPC bounds, the same for every
        method), computed once per key; ``key`` names everything the value depends on."""
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
