"""Griffe extension for the API reference (mkdocs.yml loads it; it is not part of the package).

1. ``attrbench/ops`` and ``attrbench/runtime`` have no ``__init__.py``: Python imports them as implicit
   namespace subpackages, but griffe skips such folders inside a regular package, so every name re-exported
   from them (``attrbench.RunOptions``, ``attrbench.plugin.rollout``, ...) would be missing from the
   reference. Each such folder that holds Python files is declared a subpackage before griffe loads
   submodules.
2. Docstrings use Sphinx roles (``:func:`register```); they are rendered as inline code.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`~?([^`]+)`")


class NamespaceFolders(griffe.Extension):
    def on_module_members(self, *, mod: griffe.Module, **kwargs: Any) -> None:
        filepath = mod.filepath
        if isinstance(filepath, list) or filepath is None or filepath.name != "__init__.py":
            return
        for folder in sorted(Path(filepath).parent.iterdir()):
            if (folder.is_dir() and not (folder / "__init__.py").exists() and any(folder.glob("*.py"))
                    and folder.name not in mod.members):
                mod.set_member(folder.name, griffe.Module(folder.name, filepath=[folder]))

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
