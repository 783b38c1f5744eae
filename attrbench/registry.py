"""Plugin registry for methods, evaluations and datasets.

Built-ins register themselves when ``attrbench.methods`` / ``attrbench.evals`` / ``attrbench.corpora``
are imported; third parties add plugins through the entry-point groups ``attrbench.methods``,
``attrbench.evals`` and ``attrbench.datasets``
(the entry point loads a class or an instance; its name is the plugin name). Every registered
method is picked up by the conformance suite (``attrbench.conformance``) and the CLI.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from .errors import UnknownPluginError


class Registry:
    def __init__(self, kind: str, group: str, builtin_package: str):
        self.kind, self.group, self.builtin_package = kind, group, builtin_package
        self._plugins: dict[str, Any] = {}
        self._loaded = False

    def add(self, plugin: Any, name: str | None = None) -> Any:
        """Register an instance (a class is instantiated); the name defaults to ``plugin.name``."""
        if isinstance(plugin, type):
            plugin = plugin()
        name = name or plugin.name
        if not name or not getattr(plugin, "family", None) or not getattr(plugin, "description", None):
            raise ValueError(f"a {self.kind} plugin needs a name, a family and a one-line description")
        if name in self._plugins and type(self._plugins[name]) is not type(plugin):
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        plugin.name = name
        self._plugins[name] = plugin
        return plugin

    def load(self) -> None:
        """Import the built-ins and every installed entry point (once)."""
        if self._loaded:
            return
        self._loaded = True
        importlib.import_module(self.builtin_package)
        for ep in entry_points(group=self.group):
            if ep.name not in self._plugins:
                self.add(ep.load(), ep.name)

    def get(self, name: str) -> Any:
        self.load()
        if name not in self._plugins:
            raise UnknownPluginError(f"unknown {self.kind} '{name}'; known: {', '.join(sorted(self._plugins))}")
        return self._plugins[name]

    def names(self) -> list[str]:
        self.load()
        return list(self._plugins)

    def all(self) -> list[Any]:
        self.load()
        return list(self._plugins.values())


METHODS = Registry("method", "attrbench.methods", "attrbench.methods")
EVALS = Registry("evaluation", "attrbench.evals", "attrbench.evals")
DATASETS = Registry("dataset", "attrbench.datasets", "attrbench.corpora")
