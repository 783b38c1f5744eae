"""Facts about the software a result was computed with, recorded beside every result."""
from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time

import torch
import transformers

from .._version import __version__
from ..errors import InputError


def library_versions() -> dict:
    return {"attrbench": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0], "platform": platform.platform()}


DEVICE_SYNTAX = "auto, cpu, cuda, cuda:N or mps"


def device_kind(device: str) -> str:
    """``cuda:1`` -> ``cuda``: the kind of device, which batching defaults and measured costs go by."""
    return device.split(":")[0]


def cost_seconds(wall_seconds: float, kind: str) -> float:
    """Wall time as a run folder counts its cost: CPU seconds (wall x torch threads) on the CPU, whose threads are
    what a run takes; seconds of one device on an accelerator, whatever the host's thread count."""
    return wall_seconds * (torch.get_num_threads() if kind == "cpu" else 1)


def cost_unit(kind: str) -> str:
    """What reports call that unit: "CPU" hours and seconds, or "GPU" ones (CUDA and Apple's MPS)."""
    return "CPU" if kind == "cpu" else "GPU"


def resolve_device(device: str) -> str:
    """A device name made concrete (``auto``: the first GPU, else Apple's MPS, else the CPU), checked to exist
    here, so a run on the wrong machine stops with one line before loading anything."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if not isinstance(device, str) or not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
        raise InputError(f"device {device!r} is not understood; use {DEVICE_SYNTAX}")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"device '{device}' asked for, but this machine has no CUDA GPU (torch "
                             f"{torch.__version__}); use --device cpu or auto")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise InputError(f"device '{device}' does not exist: this machine has {torch.cuda.device_count()} GPU(s), "
                             f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    if device == "mps" and not torch.backends.mps.is_available():
        raise InputError("device 'mps' asked for, but Apple's MPS is not available here; use --device cpu or auto")
    return device


DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice (the cores), before any run changes it


def _own_running() -> int:
    """This process's threads that are running or runnable now (this reading thread included)."""
    running = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as handle:
                running += handle.read().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:  # a thread that ended meanwhile
            continue
    return max(1, running)


def busy_elsewhere(samples: int = 3, interval: float = 0.01) -> int | None:
    """How many tasks of other processes are running on this machine now: the kernel's count of runnable tasks
    (``/proc/loadavg``) less this process's own (its pool's threads may still spin after a job), median of a few
    samples; None where it cannot be read (not Linux)."""
    counts = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]) - _own_running())
        except (OSError, ValueError, IndexError):
            return None
        time.sleep(interval)
    return max(0, int(statistics.median(counts)))


def free_threads(cores: int | None = None, busy: int | None = None) -> int:
    """The torch threads a CPU run should take: torch's default less the cores that other work keeps busy, at
    least one. A thread that shares its core with another busy process slows every parallel region of the others
    (``benchmarks/bench_drift.py --spinner``: on 2 cores beside one spinning process 1 thread beats 2)."""
    cores = cores or DEFAULT_THREADS
    busy = busy_elsewhere() if busy is None else busy
    return cores if busy is None else max(1, cores - busy)
