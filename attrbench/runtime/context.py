"""One process's view of a run: its options, loaded models, dataset examples and shared work.

:class:`RunContext` owns what every unit of a run shares (the driver's, or each Ray worker's):
models by name (loaded with the run's :class:`~attrbench.runtime.options.RunOptions`), each
dataset's examples as a model reads them, methods not in the registry (external attributions),
and — as a :class:`~attrbench.plugin.Workspace` — the memoised attributions and per-example work
the evaluations share.
"""
from __future__ import annotations

from typing import Optional

from ..datasets.base import Example
from ..datasets.lookup import examples_for
from ..models import load_model
from ..plugin.evaluation import Workspace
from ..plugin.method import Method
from ..plugin.registry import METHODS
from .options import RunOptions


class RunContext(Workspace):
    """One process's options, models, examples and shared work (see the module docstring)."""

    def __init__(self, options: Optional[RunOptions] = None, data_dir=None, cache_size: int = 20_000):
        self.options = options or RunOptions()
        super().__init__(self.options.batch_size, cache_size)
        self.data_dir = data_dir
        self._adapters: dict[str, object] = {}
        self._examples: dict[tuple, tuple[list[Example], dict]] = {}
        self._local_methods: dict[str, Method] = {}

    def add_adapter(self, adapter) -> None:
        """A model loaded by the caller (CLI, Python API), used for units that name it."""
        self._adapters[adapter.name] = adapter

    def adapter(self, name: str):
        if name not in self._adapters:
            self._adapters[name] = load_model(name, dtype=self.options.dtype)
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
        method = self._local_methods.get(name) or METHODS.get(name)
        return method.with_params(**params)
