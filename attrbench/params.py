"""Hyperparameters declared in one place, like scikit-learn's ``get_params()``.

A method or evaluation declares ``params = {"n_steps": Param(50, "...", minimum=1), ...}``; its
current values are attributes of the instance. ``with_params(**values)`` gives a checked copy (an
unknown name or a bad value is a one-line error naming what is allowed), ``get_params()`` the
values, and ``key`` a stable text identity of the plugin and its values. That identity is part of a
leaderboard unit's key and of the memo cache's key, and every result records the values, so results
computed with other parameters are never mixed with these.

A parameter added to a plugin whose rows are already stored declares ``legacy``: the value the rows
computed before it existed had (``Param(False, "...", legacy=False)``). ``key`` leaves the parameter
out while it has that value, so those rows keep their keys (a published store is not orphaned) and
any other value gives a new key, so rows of the new meaning are computed, never mixed with the old.
``get_params()`` still lists it, so every result records its value. The legacy value must mean
exactly what the stored rows were computed with; a value that depends on the run (an ``auto``) is
not one: fix it first (``Evaluation.resolve``) and key the concrete value.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from .errors import InputError


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()  # a parameter without a legacy value (``None`` can be one)


@dataclass(frozen=True)
class Param:
    default: Any
    help: str
    kind: Optional[type | tuple[type, ...]] = None  # default: the type of ``default``
    choices: Optional[tuple] = None
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    legacy: Any = UNSET  # the value rows stored before this parameter existed had: left out of ``key``

    def is_legacy(self, value: Any) -> bool:
        """Whether ``value`` is the one stored rows had before this parameter existed (it is then not in a key)."""
        return self.legacy is not UNSET and type(value) is type(self.legacy) and value == self.legacy

    def check(self, owner: str, name: str, value: Any) -> Any:
        kinds = self.kind or type(self.default)
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join("none" if k is type(None) else k.__name__ for k in kinds)
            raise InputError(f"{owner} parameter '{name}' must be {names}, not {value!r}")
        if self.choices is not None and value not in self.choices:
            raise InputError(f"{owner} parameter '{name}' is {value!r}; allowed: {', '.join(map(str, self.choices))}")
        if isinstance(value, float) and value != value and (self.minimum is not None or self.maximum is not None):
            raise InputError(f"{owner} parameter '{name}' must be a number, not nan")
        if self.minimum is not None and value is not None and value < self.minimum:
            raise InputError(f"{owner} parameter '{name}' is {value!r}; it must be at least {self.minimum:g}")
        if self.maximum is not None and value is not None and value > self.maximum:
            raise InputError(f"{owner} parameter '{name}' is {value!r}; it must be at most {self.maximum:g}")
        return value


class Configurable:
    """Base of methods and evaluations: a name and declared hyperparameters."""

    name: str = ""
    kind: ClassVar[str] = "plugin"  # "method" or "evaluation", for messages
    params: dict[str, Param] = {}

    def __getattr__(self, name: str):  # a parameter not set on the instance reads as its default
        params = self.__dict__.get("params", type(self).params)  # plugins built from one class declare their own
        if not name.startswith("__") and name in params:
            return params[name].default
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def get_params(self) -> dict:
        return {name: getattr(self, name, param.default) for name, param in self.params.items()}

    def with_params(self, **values) -> "Configurable":
        """A copy with these parameter values (checked); the instance itself is left as it is."""
        owner = f"{self.kind} '{self.name}'"
        for name in values:
            if name not in self.params:
                allowed = ", ".join(self.params) or "none"
                raise InputError(f"{owner} has no parameter '{name}'; its parameters: {allowed}")
        clone = copy.copy(self)
        for name, value in values.items():
            setattr(clone, name, self.params[name].check(owner, name, value))
        return clone

    @property
    def key(self) -> str:
        return params_key(self.name, self.get_params(), self.params)


def params_key(name: str, values: dict, params: Optional[dict[str, Param]] = None) -> str:
    """``name`` or ``name(k=v,...)``: a plugin with its parameter values, stable across runs. A parameter of
    ``params`` that has its ``legacy`` value is left out (the key rows had before it existed)."""
    params = params or {}
    values = {k: v for k, v in values.items() if k not in params or not params[k].is_legacy(v)}
    return name + ("(" + ",".join(f"{k}={values[k]}" for k in sorted(values)) + ")" if values else "")
