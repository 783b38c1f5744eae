"""Plugin registries for methods, evaluations and datasets, resolved lazily by name.

A plugin is an instance (a class is instantiated) with a ``name``, a ``family`` and a one-line
``description``. Where plugins come from:

- built-ins: every module of the registry's package (``attrbench.methods``, ``attrbench.evals``,
  ``attrbench.datasets.builtin``) registers its plugins when it is imported. A name is looked up in
  the module of the same name first (``alti`` -> ``attrbench.methods.alti``), so using one plugin
  imports one module; listing imports them all. Plugin modules import heavy libraries (captum,
  shap, numba) only where they compute, so listing stays light (tested);
- third parties: the entry-point groups ``attrbench.methods``, ``attrbench.evals``,
  ``attrbench.datasets`` (the entry point loads a class or an instance; its name is the plugin name),
  loaded when a name is not a built-in or when everything is listed;
- a notebook or script: :func:`register`.

Every registered method is picked up by the conformance suite and the CLI.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Iterable, Optional

from .errors import InputError, UnknownPluginError


class Registry:
    def __init__(self, kind: str, group: str, builtin_package: str):
        self.kind, self.group, self.builtin_package = kind, group, builtin_package
        self._plugins: dict[str, Any] = {}
        self._origin: dict[str, str] = {}  # a built-in plugin's name -> the built-in module that registered it
        self._builtins_loaded = self._entry_points_loaded = False

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
        origin = _registering_module(self.builtin_package)
        if origin is not None:
            self._origin[name] = origin
        return plugin

    def remove(self, name: str) -> None:
        """Forget a plugin registered by :meth:`add` (e.g. one defined in a notebook cell)."""
        self._plugins.pop(name, None)

    # -- loading -----------------------------------------------------------------------------
    def _builtin_modules(self) -> list[str]:
        package = importlib.import_module(self.builtin_package)
        return [f"{self.builtin_package}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]

    def _load_builtins(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            modules = self._builtin_modules()
            for module in modules:
                importlib.import_module(module)
            # built-ins in their modules' order whatever was imported first (a plugin file that imports a built-in
            # module registers its methods early), so that "all" means the same list in every process: a run
            # extended with a plugin keeps the published order and its figures and statistics are reused
            rank = {module: k for k, module in enumerate(modules)}
            order = sorted(enumerate(self._plugins), key=lambda item: (
                rank.get(self._origin.get(item[1]), len(rank)), item[0]))
            self._plugins = {name: self._plugins[name] for _, name in order}

    def _load_entry_points(self) -> None:
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            for ep in entry_points(group=self.group):
                if ep.name not in self._plugins:
                    self.add(ep.load(), ep.name)

    def load(self) -> None:
        """Import every built-in module and every installed entry point (once)."""
        self._load_builtins()
        self._load_entry_points()

    def get(self, name: str) -> Any:
        if name not in self._plugins:
            module = f"{self.builtin_package}.{name.replace('-', '_')}"
            if module in self._builtin_modules():
                importlib.import_module(module)
        if name not in self._plugins:
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


def _registering_module(package: str) -> Optional[str]:
    """The module of ``package`` whose code is registering a plugin now (the nearest such frame), or None."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(package + "."):
            return name
        frame = frame.f_back
    return None


METHODS = Registry("method", "attrbench.methods", "attrbench.methods")
EVALS = Registry("evaluation", "attrbench.evals", "attrbench.evals")
DATASETS = Registry("dataset", "attrbench.datasets", "attrbench.datasets.builtin")
REGISTRIES = {"method": METHODS, "evaluation": EVALS, "dataset": DATASETS}


def register(plugin: Any, name: str | None = None) -> Any:
    """Register a method, evaluation or dataset (an instance or a class) by its ``kind``; returns it, so it
    also works as a class decorator. Registering a name again with a new class of the same name replaces it."""
    instance = plugin() if isinstance(plugin, type) else plugin
    registry = REGISTRIES.get(getattr(instance, "kind", None))
    if registry is None:
        raise TypeError(f"{plugin!r} is not a Method, Evaluation or Dataset (its kind is "
                        f"{getattr(instance, 'kind', None)!r})")
    key = name or instance.name
    old = registry._plugins.get(key)
    if old is not None and type(old).__qualname__ == type(instance).__qualname__:
        registry.remove(key)  # a notebook cell run again: its new class replaces the old one
    registry.add(instance, name)
    return plugin


def load_plugin_files(paths: Iterable[str | Path]) -> list[str]:
    """Import Python files that register plugins (``@attrbench.register``), as a package's entry points would:
    the CLI's ``--plugins FILE``. Returns the names they added; a file that cannot be imported, or that registers
    nothing, is a one-line error."""
    added = []
    for path in map(Path, paths):
        if path.suffix != ".py" or not path.is_file():
            raise InputError(f"--plugins {path}: not a Python file; give the path of a .py file that registers "
                             "its plugins with @attrbench.register")
        spec = importlib.util.spec_from_file_location(f"attrbench_plugins_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # so its classes pickle (Ray) and dataclasses resolve their module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[spec.name]
            raise InputError(f"--plugins {path}: importing it failed ({type(err).__name__}: {err}); fix the file "
                             "(run it with python to see the traceback)") from err
        new = [name for registry in REGISTRIES.values() for name, plugin in registry._plugins.items()
               if type(plugin).__module__ == spec.name]
        if not new:
            raise InputError(f"--plugins {path}: it registers no plugin; decorate its classes with "
                             "@attrbench.register")
        added += new
    return added
