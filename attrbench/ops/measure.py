"""Measuring cost: wall time and peak memory (resident, and on a CUDA GPU) of one call."""
from __future__ import annotations

import ctypes
import threading
import time

import psutil
import torch


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc), so the next call's peak shows in RSS again."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the peak may then read low after earlier calls
        pass


class PeakMemory:
    """Peak resident memory above the starting level while the block runs (sampled every 2 ms).

    Freed heap pages are returned to the OS first, else memory reused from earlier calls would not
    show.
    """

    peak_bytes = 0

    def __enter__(self):
        _release_free_memory()
        process = psutil.Process()
        self.base = process.memory_info().rss
        self._stop = threading.Event()
        self._max = self.base

        def sample():
            while not self._stop.is_set():
                self._max = max(self._max, process.memory_info().rss)
                self._stop.wait(0.002)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._max = max(self._max, psutil.Process().memory_info().rss)
        self.peak_bytes = self._max - self.base
        return False


def _synchronize() -> None:
    """Wait for queued GPU work, so that a CUDA call's time is its own."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(fn, device=None):
    """(result, seconds, peak MB above the start) of one call. The peak counts resident memory and, on a CUDA
    ``device`` (the model's), what torch allocated there above what it held before: a model on a GPU keeps its
    tensors there, where resident memory would not show them."""
    gpu = None if device is None or torch.device(device).type != "cuda" else torch.device(device)
    with PeakMemory() as memory:
        _synchronize()
        if gpu is not None:
            torch.cuda.reset_peak_memory_stats(gpu)
            held = torch.cuda.memory_allocated(gpu)
        start = time.perf_counter()
        result = fn()
        _synchronize()
        seconds = time.perf_counter() - start
    on_gpu = torch.cuda.max_memory_allocated(gpu) - held if gpu is not None else 0
    return result, seconds, (memory.peak_bytes + on_gpu) / 2**20
