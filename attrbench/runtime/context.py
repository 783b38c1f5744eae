"""One process's view of a run: its options, loaded models, dataset examples and shared work.

:class:`RunContext` owns what every job of a run shares (the driver's, or each Ray worker's):
models by name (loaded with the run's :class:`~attrbench.runtime.options.RunOptions`, on its
device), each dataset's examples as a model reads them, methods not in the registry (external
attributions, a notebook's), and — as a :class:`~attrbench.runtime.workspace.Workspace` — the memoised
attributions, the per-example work and the batcher that answers model-output requests, all backed
by the run's shared-work cache (``work.sqlite``) when the run has a folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..datasets.base import Example
from ..datasets.lookup import examples_for
from ..models import load_model
from ..ops.batching import Batcher
from .workspace import Workspace
from ..plugin.method import Method
from ..registry import METHODS
from .options import RunOptions
from .workcache import WorkCache


class RunContext(Workspace):
    """One process's options, models, examples and shared work (see the module docstring)."""

    def __init__(self, options: Optional[RunOptions] = None, data_dir=None, cache: Optional[str | Path] = None,
                 cache_size: int = 20_000):
        self.options = options or RunOptions()
        self.cache = WorkCache(cache)
        super().__init__(self.options.batch_size, cache_size, store=self.cache,
                         batcher=Batcher(self.cache, self.options.batch_tokens, pad_tokens=self.options.pad_tokens,
                                         max_batch=max(256, self.options.batch_tokens // 16)))
        self.data_dir = data_dir
        # a method failing on an example: True, its row is left out and named (a leaderboard run); False, the error
        # stops the job (a one-off evaluation, whose records on fewer examples than asked would pass unnoticed)
        self.keep_going = True
        self._adapters: dict[str, object] = {}
        self._examples: dict[tuple, tuple[list[Example], dict]] = {}
        self._local_methods: dict[str, Method] = {}

    def add_adapter(self, adapter) -> None:
        """A model loaded by the caller (CLI, Python API), used for jobs that name it."""
        self._adapters[adapter.name] = adapter

    def adapter(self, name: str):
        if name not in self._adapters:
            self._adapters[name] = load_model(name, dtype=self.options.dtype, device=self.options.device)
        return self._adapters[name]

    def examples(self, adapter, dataset: str, split: Optional[str], params: Optional[dict] = None
                 ) -> tuple[list[Example], dict]:
        """A dataset's examples as a model reads them, read and tokenised once per context."""
        key = (adapter.name, str(adapter.dtype), dataset, split, tuple(sorted((params or {}).items())))
        if key not in self._examples:
            self._examples[key] = examples_for(adapter, dataset, split, self.data_dir, params)
        return self._examples[key]

    def add_method(self, method: Method) -> None:
        """A method that is not in the registry (e.g. external attributions), found by name in jobs."""
        self._local_methods[method.name] = method

    def method(self, name: str, params: dict) -> Method:
        method = self._local_methods.get(name) or METHODS.get(name)
        return method.with_params(**params)

    @property
    def local_methods(self) -> dict[str, Method]:
        return dict(self._local_methods)
