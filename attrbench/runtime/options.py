"""Run options: how a run computes, as opposed to what it computes. One object, from the CLI, a
config or the Python API into every worker and cache key.

``dtype`` changes results (float32 vs float64), so it is part of every result's and cached item's
key and recorded with every result; ``device``, ``threads``, ``batch_size``, ``batch_tokens`` and
``pad_tokens`` change only speed and memory (results on another device agree to float tolerance, tested on
CPU with the model moved between dtypes and devices).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Optional

import torch

from ..errors import InputError
from ..ops.environment import device_kind, free_threads, resolve_device

DTYPES = ("float32", "float64")
DEFAULT_BATCH_TOKENS = {"cpu": 4096, "cuda": 65536, "mps": 16384}
# The padding one batch may carry: about what a forward pass's fixed cost (weights read, kernels launched) is
# worth in tokens. Measured with benchmarks/bench_batching.py on 2 CPU cores (SmolLM2: a pass of 1 x 2 tokens
# costs what 52 tokens cost in a full batch, 64 x 64; benchmarks/results/batching-smollm2-cpu.json) and on an H200
# (a pass of 1 x 8 tokens costs what 3,294 / 3,207 tokens cost in the best-filled batch, 1,024 x 128, MiniLM /
# SmolLM2; about 3,100 in the largest a run sends, 256 x 128; benchmarks/results/batching-cuda-h200.json). MPS is
# reasoned, not measured.
DEFAULT_PAD_TOKENS = {"cpu": 64, "cuda": 3200, "mps": 256}
# Examples per job where a config names none. A job's examples are what a batched method attributes together and
# what the metrics' batcher pools, so a GPU wants many; on a CPU a pass is already near the matmul peak, and a
# small job keeps resuming and the time budget fine-grained.
DEFAULT_SHARD_SIZE = {"cpu": 8, "cuda": 64, "mps": 16}


@dataclass(frozen=True)
class RunOptions:
    dtype: str = "float32"  # float32 or float64: the model's weights and every computation
    device: str = "cpu"  # auto, cpu, cuda, cuda:N or mps
    threads: Optional[int] = None  # torch threads of this process (None: torch's default)
    batch_size: int = 64  # perturbed sequences per forward pass where a method batches its own
    batch_tokens: Optional[int] = None  # padded tokens per batch of model-output requests (None: by device)
    pad_tokens: Optional[int] = None  # padding tokens a batch of mixed lengths may carry (None: by device)
    progress: bool = True  # progress bars on stderr

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise InputError(f"dtype '{self.dtype}' is not supported: use {' or '.join(DTYPES)}")
        object.__setattr__(self, "device", resolve_device(self.device))
        for name in ("threads", "batch_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"{name.replace('_', ' ')} must be a whole number of at least 1, not {value!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"batch size must be a whole number of at least 1, not {self.batch_size!r}")
        if self.pad_tokens is not None and (isinstance(self.pad_tokens, bool) or not isinstance(self.pad_tokens, int)
                                            or self.pad_tokens < 0):
            raise InputError(f"pad tokens must be a whole number of at least 0, not {self.pad_tokens!r}")
        kind = device_kind(self.device)
        if self.batch_tokens is None:
            object.__setattr__(self, "batch_tokens", DEFAULT_BATCH_TOKENS[kind])
        if self.pad_tokens is None:
            object.__setattr__(self, "pad_tokens", DEFAULT_PAD_TOKENS[kind])

    def with_(self, **changes) -> "RunOptions":
        """A copy with these options changed (``None`` values are left as they are)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict:
        return asdict(self)

    def apply(self) -> None:
        """Set this process's torch threads: the ones asked for, else on the CPU torch's default less the cores other
        work keeps busy now (:func:`attrbench.ops.environment.free_threads`), so a shared machine slows a run by the
        cores it lends, not by threads stalling each other."""
        if self.threads:
            torch.set_num_threads(self.threads)
        elif device_kind(self.device) == "cpu":
            torch.set_num_threads(free_threads())
