"""Run options: how a run computes, as opposed to what it computes. One object, from the CLI, a
config or the Python API into every worker and cache key.

``dtype`` changes results (float32 vs float64), so it is part of every cache key and recorded with
every result; ``device``, ``threads`` and ``batch_size`` change only speed and memory.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Optional

import torch

from ..errors import InputError

DTYPES = ("float32", "float64")
DEVICES = ("cpu",)  # the engine issue adds auto, cuda[:N] and mps


@dataclass(frozen=True)
class RunOptions:
    dtype: str = "float32"  # float32 or float64: the model's weights and every computation
    device: str = "cpu"
    threads: Optional[int] = None  # torch threads of this process (None: torch's default)
    batch_size: int = 64  # perturbed sequences per forward pass
    progress: bool = True  # progress bars on stderr

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise InputError(f"dtype '{self.dtype}' is not supported: use {' or '.join(DTYPES)}")
        if self.device not in DEVICES:
            raise InputError(f"device '{self.device}' is not supported; use {', '.join(DEVICES)}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise InputError(f"threads must be a whole number of at least 1, not {self.threads!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"batch size must be a whole number of at least 1, not {self.batch_size!r}")

    def with_(self, **changes) -> "RunOptions":
        """A copy with these options changed (``None`` values are left as they are)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict:
        return asdict(self)

    def apply(self) -> None:
        """Set this process's torch threads."""
        if self.threads:
            torch.set_num_threads(self.threads)
