"""Executors: where a run's jobs are computed. Each takes jobs lazily (a budgeted run stops handing them out)
and yields (plan, job, rows, counts) as jobs finish.

- :class:`LocalExecutor`: one after another in this process, sharing the driver's run context
  (models, attributions, per-example work, the shared-work cache);
- :class:`RayExecutor`: one Ray task per job on a local instance or a cluster, as many in flight as
  it has CPUs (one per task; one GPU per task when the device is CUDA). Each worker process keeps a
  run context of its own for as long as it lives, on the same shared-work cache file, so what one
  worker computed another reuses. A task whose worker dies is retried by Ray; rows are keyed, so a
  retried job never stores a row twice.

Both compute a job with :func:`attrbench.runtime.plan.run_job`.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from functools import lru_cache
from typing import Iterable, Iterator, Optional

import torch
import transformers

from ..errors import InputError
from .context import RunContext
from .options import RunOptions
from .plan import Job, Suite, SuitePlan, plan_suite, run_job

Finished = Iterator[tuple[SuitePlan, Job, list[dict], dict]]


class LocalExecutor:
    """Jobs one after another in this process, in the driver's run context."""

    name = "local"

    def __init__(self, progress: bool = False):
        self.progress = progress  # progress bars inside each job (a run shows one bar over its jobs instead)

    def map(self, jobs: Iterable[tuple[SuitePlan, Job]], context: RunContext) -> Finished:
        for plan, job in jobs:
            context.options.apply()  # per job: the cores other work leaves free may change during a run
            rows, counts = run_job(context, plan, job, self.progress)
            yield plan, job, rows, counts


class RayExecutor:
    """One Ray task per job, on ``ray.init()`` (``num_cpus`` CPUs) or the cluster at ``address``."""

    name = "ray"

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None, max_retries: int = 3):
        try:
            import ray  # optional: the 'ray' extra; heavy to import
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'attrbench[ray]' (or pip install ray)") from None
        self.ray, self.max_retries = ray, max_retries
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

    def map(self, jobs: Iterable[tuple[SuitePlan, Job]], context: RunContext) -> Finished:
        ray = self.ray
        gpu = 1 if context.options.device.startswith("cuda") else 0
        remote = ray.remote(num_cpus=1, num_gpus=gpu, max_retries=self.max_retries)(_ray_job)
        in_flight = max(1, int(ray.cluster_resources().get("GPU" if gpu else "CPU", 1)))
        options = {**context.options.as_dict(), "progress": False}
        cache = str(context.cache.path) if context.cache.path else None
        local = ray.put(context.local_methods)  # methods defined outside the registry travel with the jobs
        jobs, pending = iter(jobs), {}
        while True:
            while len(pending) < in_flight:
                item = next(jobs, None)
                if item is None:
                    break
                plan, job = item
                ref = remote.remote(options, dataclasses.asdict(plan.suite), plan.index, plan.seed, job.as_dict(),
                                    cache, os.environ.get("ATTRBENCH_CACHE"), local)
                pending[ref] = (plan, job)
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                plan, job = pending.pop(ref)
                rows, counts = ray.get(ref)
                yield plan, job, rows, counts


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as err:
        raise InputError(f"Ray at '{address}' does not answer ({err}); start it (ray start --head) or check the "
                         "address (host:port, or ray://host:port)") from None


@lru_cache(maxsize=4)
def worker_context(options: RunOptions, cache: Optional[str]) -> RunContext:
    """A Ray worker process's run context: its models and caches live as long as the worker."""
    return RunContext(options, cache=cache)


_PLANS: dict[tuple, SuitePlan] = {}


def _ray_job(options: dict, suite: dict, index: int, seed: int, job: dict, cache: Optional[str],
             model_cache: Optional[str], local: dict):
    if model_cache:  # the worker uses the driver's model cache when it shares the file system
        os.environ.setdefault("ATTRBENCH_CACHE", model_cache)
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    context = worker_context(RunOptions(**options), cache)
    for method in local.values():
        context.add_method(method)
    key = (repr(sorted(suite.items(), key=str)), index, seed)
    if key not in _PLANS:
        spec = {k: tuple(v) if isinstance(v, list) else v for k, v in suite.items()}
        _PLANS[key] = plan_suite(context, Suite(**spec), index, seed)
    return run_job(context, _PLANS[key], Job.from_dict(job))
