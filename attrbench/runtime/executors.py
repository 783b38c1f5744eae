"""Executors: where a run's units are computed. Each yields (unit, records, seconds) as units finish.

- :class:`LocalExecutor`: one after another in this process, sharing the driver's run context
  (models, attributions, per-example work);
- :class:`RayExecutor`: one Ray task per unit, on a local instance or a cluster; each worker process
  keeps a run context of its own for as long as it lives.

Both compute a unit with :func:`attrbench.runtime.plan.run_unit`, with the run's options and seed.
"""
from __future__ import annotations

import os
import socket
import time
from functools import lru_cache
from typing import Iterable, Optional

import torch
import transformers

from ..errors import InputError
from .context import RunContext
from .options import RunOptions
from .plan import Unit, run_unit

Finished = Iterable[tuple[Unit, list[dict], float]]


def timed_unit(context: RunContext, seed: int, unit: Unit, progress: bool = False) -> tuple[list[dict], float]:
    start = time.perf_counter()
    records = run_unit(context, unit, seed, progress)
    return records, time.perf_counter() - start


class LocalExecutor:
    """Units one after another in this process, sharing the driver's run context (models, attributions)."""

    name = "local"

    def __init__(self, progress: bool = False):
        self.progress = progress  # progress bars inside each unit (a run shows one bar over its units instead)

    def map(self, units: list[Unit], context: RunContext, seed: int) -> Finished:
        context.options.apply()
        for unit in units:
            yield unit, *timed_unit(context, seed, unit, self.progress)


class RayExecutor:
    """One Ray task per unit (one CPU each), on ``ray.init()`` or the cluster at ``address``."""

    name = "ray"

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None):
        try:
            import ray  # optional: the 'ray' extra; heavy to import
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'attrbench[ray]' (or pip install ray)") from None
        self.ray = ray
        if address and address != "auto":
            _check_reachable(address)  # ray.init retries an unreachable address for minutes
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)
            except Exception as err:  # ConnectionError, TimeoutError, RuntimeError from ray.init
                raise InputError(f"Ray at '{address or 'local'}' does not answer: {str(err).splitlines()[0]}; "
                                 "start it (ray start --head) or check the address") from None

    def map(self, units: list[Unit], context: RunContext, seed: int) -> Finished:
        ray = self.ray
        remote = ray.remote(num_cpus=1)(_ray_unit)
        cache = os.environ.get("ATTRBENCH_CACHE")
        options = context.options.as_dict()
        pending = {remote.remote(options, seed, unit.as_dict(), cache): unit for unit in units}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                unit = pending.pop(ref)
                records, seconds = ray.get(ref)
                yield unit, records, seconds


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as err:
        raise InputError(f"Ray at '{address}' does not answer ({err}); start it (ray start --head) or check the "
                         "address (host:port, or ray://host:port)") from None


@lru_cache(maxsize=4)
def worker_context(options: RunOptions) -> RunContext:
    """A Ray worker process's run context: its models and caches live as long as the worker."""
    return RunContext(options)


def _ray_unit(options: dict, seed: int, unit: dict, cache: Optional[str]):
    if cache:  # the worker uses the driver's model cache when it shares the file system
        os.environ.setdefault("ATTRBENCH_CACHE", cache)
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    return timed_unit(worker_context(RunOptions(**{**options, "progress": False})), seed, Unit.from_dict(unit))
