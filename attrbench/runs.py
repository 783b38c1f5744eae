"""Leaderboard runs: a config of models × methods × evaluations × datasets, split into units.

A config (TOML, or YAML if PyYAML is installed) looks like::

    name = "default"
    seed = 0
    dtype = "float32"
    shard_size = 20                     # examples per unit

    [[suite]]
    model = "minilm-l6-sst2"
    dataset = "sst2"
    n = 40                              # sampled examples (seeded)
    methods = "all"                     # or a list of method names
    evals = ["faithfulness_corr", "erasure_aopc", "timing", "mixing_ratio"]

A unit is (model, dataset, evaluation, method, example shard); the papers' analyses take no
method and run as one unit over the suite's sample. Token-to-token map methods (``atb_ff`` …) only
go to evaluations that take them (``timing``); rollouts and the other score methods go to all. Units are computed by an executor — local
(this process, ``threads`` torch threads) or Ray (one task per unit, on ``ray.init()`` or a given
address) — and each result is committed to the run folder's store as it arrives, so a rerun
computes only what is missing and a killed run resumes with nothing lost or duplicated.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .errors import AttrbenchError, InputError

DEFAULT_CONFIG = Path(__file__).parent / "default.toml"
TOP_KEYS = {"name": str, "seed": int, "dtype": str, "shard_size": int, "suite": list}
SUITE_KEYS = {"model": str, "dataset": str, "n": int, "methods": (str, list), "evals": list, "split": str}
DTYPES = ("float32", "float64")


class ConfigError(InputError):
    pass


@dataclass(frozen=True)
class Unit:
    model: str
    dataset: str
    eval: str
    method: str  # "-" for analyses
    shard: int
    example_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.model}|{self.dataset}|{self.eval}|{self.method}|{self.shard}"

    def as_dict(self) -> dict:
        return {"model": self.model, "dataset": self.dataset, "eval": self.eval, "method": self.method,
                "shard": self.shard, "example_ids": list(self.example_ids)}


# -- config ----------------------------------------------------------------------------------
def read_config(path: Optional[str | Path] = None) -> dict:
    """Parse and validate a run config; errors name the key and what is allowed."""
    path = Path(path) if path else DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ConfigError("YAML configs need PyYAML (pip install pyyaml); or write the config in TOML") from None
            raw = yaml.safe_load(text)
        else:
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            raw = tomllib.loads(text)
    except ConfigError:
        raise
    except Exception as err:  # tomllib.TOMLDecodeError, yaml.YAMLError
        raise ConfigError(f"config {path} does not parse: {str(err).splitlines()[0]}") from None
    return validate_config(raw, str(path))


def _check_type(where: str, value, kind) -> None:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (bool in map(type, [value]) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(f"config key '{where}' must be {names}, not {type(value).__name__} ({value!r})")


def validate_config(raw: dict, source: str = "<config>") -> dict:
    from .datasets import DATASETS
    from .registry import EVALS, METHODS

    if not isinstance(raw, dict):
        raise ConfigError(f"config {source} must be a table of keys: {', '.join(TOP_KEYS)}")
    for key, value in raw.items():
        if key not in TOP_KEYS:
            raise ConfigError(f"config key '{key}' is not known; allowed: {', '.join(TOP_KEYS)}")
        _check_type(key, value, TOP_KEYS[key])
    config = {"name": raw.get("name", Path(source).stem), "seed": raw.get("seed", 0),
              "dtype": raw.get("dtype", "float32"), "shard_size": raw.get("shard_size", 20), "suite": []}
    if config["dtype"] not in DTYPES:
        raise ConfigError(f"config key 'dtype' is '{config['dtype']}'; allowed: {', '.join(DTYPES)}")
    if config["shard_size"] < 1:
        raise ConfigError("config key 'shard_size' must be at least 1")
    if not raw.get("suite"):
        raise ConfigError("config has no [[suite]] entry: add at least one (model, dataset, evals)")
    method_names, eval_names = METHODS.names(), EVALS.names()
    seen: dict[tuple, int] = {}
    for k, entry in enumerate(raw["suite"]):
        where = f"suite[{k}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"config key '{where}' must be a table with keys {', '.join(SUITE_KEYS)}")
        for key, value in entry.items():
            if key not in SUITE_KEYS:
                raise ConfigError(f"config key '{where}.{key}' is not known; allowed: {', '.join(SUITE_KEYS)}")
            _check_type(f"{where}.{key}", value, SUITE_KEYS[key])
        for key in ("model", "dataset", "evals"):
            if key not in entry:
                raise ConfigError(f"config key '{where}.{key}' is missing")
        if entry["dataset"] not in DATASETS:
            raise ConfigError(f"config key '{where}.dataset' is '{entry['dataset']}'; allowed: {', '.join(DATASETS)}")
        for name in entry["evals"]:
            if name not in eval_names:
                raise ConfigError(f"config key '{where}.evals' names unknown evaluation '{name}'; allowed: "
                                  f"{', '.join(eval_names)}")
        methods = entry.get("methods", [])
        if isinstance(methods, str):
            if methods != "all":
                raise ConfigError(f"config key '{where}.methods' must be a list of method names or \"all\"")
        else:
            for name in methods:
                if name not in method_names:
                    raise ConfigError(f"config key '{where}.methods' names unknown method '{name}'; allowed: "
                                      f"{', '.join(method_names)} or \"all\"")
        for name in entry["evals"]:
            other = seen.setdefault((entry["model"], entry["dataset"], name), k)
            if other != k:
                raise ConfigError(f"config key '{where}.evals': {name} on {entry['model']} / {entry['dataset']} is "
                                  f"already in suite[{other}]; each (model, dataset, evaluation) may appear once")
        n = entry.get("n", 100)
        if n < 1:
            raise ConfigError(f"config key '{where}.n' must be at least 1")
        config["suite"].append({"model": entry["model"], "dataset": entry["dataset"], "n": n, "methods": methods,
                                "evals": list(entry["evals"]), "split": entry.get("split")})
    return config


def config_hash(config: dict) -> str:
    """Identity of what a run computes (its name is left out: renaming a run changes nothing)."""
    body = {k: v for k, v in config.items() if k != "name"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# -- planning --------------------------------------------------------------------------------
_ADAPTERS: dict = {}


def adapter_for(name: str, dtype: str):
    """Models are loaded once per process (the driver, or each Ray worker)."""
    from .models import load_model

    if (name, dtype) not in _ADAPTERS:
        _ADAPTERS[(name, dtype)] = load_model(name, dtype=dtype)
    return _ADAPTERS[(name, dtype)]


_EXAMPLES: dict = {}


def examples_of(adapter, dataset: str, split: Optional[str]):
    """A dataset's examples as a model reads them, read and tokenised once per process (not per unit)."""
    from .datasets import examples_for

    key = (adapter.name, str(adapter.dtype), dataset, split)
    if key not in _EXAMPLES:
        _EXAMPLES[key] = examples_for(adapter, dataset, split)
    return _EXAMPLES[key]


def suite_sample(config: dict, entry: dict):
    from .datasets import sample

    adapter = adapter_for(entry["model"], config["dtype"])
    examples, notes = examples_of(adapter, entry["dataset"], entry.get("split"))
    return adapter, sample(examples, entry["n"], config["seed"]), notes


def plan(config: dict) -> tuple[list[Unit], dict]:
    """All units of a config (checking every model/method/evaluation pairing first) and the samples."""
    from .evaluation import EvalContext
    from .registry import EVALS

    units, samples = [], []
    for entry in config["suite"]:
        adapter, chosen, notes = suite_sample(config, entry)
        ids = tuple(e.id for e in chosen)
        samples.append({"model": entry["model"], "dataset": entry["dataset"], "evals": entry["evals"],
                        "example_ids": list(ids), **notes})
        for eval_name in entry["evals"]:
            evaluation = EVALS.get(eval_name)
            if not evaluation.needs_methods:
                evaluation.check(adapter, [], EvalContext(entry["dataset"]))
                units.append(Unit(entry["model"], entry["dataset"], eval_name, "-", 0, ids))
                continue
            # token-to-token map methods only go to evaluations that take them (timing)
            methods = [m for m in evaluation.methods_for(adapter, entry["methods"]) if evaluation.takes(m)]
            evaluation.check(adapter, methods, EvalContext(entry["dataset"]))
            size = config["shard_size"]
            for method in methods:
                for shard in range(math.ceil(len(ids) / size)):
                    units.append(Unit(entry["model"], entry["dataset"], eval_name, method.name, shard,
                                      ids[shard * size:(shard + 1) * size]))
    return units, samples


def run_unit(config: dict, unit: dict) -> tuple[list[dict], float]:
    """Compute one unit (in this process): its records and wall seconds."""
    from .evaluation import EvalContext
    from .registry import EVALS, METHODS

    start = time.perf_counter()
    entry = next(e for e in config["suite"] if e["model"] == unit["model"] and e["dataset"] == unit["dataset"]
                 and unit["eval"] in e["evals"])
    adapter = adapter_for(unit["model"], config["dtype"])
    examples, notes = examples_of(adapter, unit["dataset"], entry.get("split"))
    by_id = {e.id: e for e in examples}
    chosen = [by_id[i] for i in unit["example_ids"]]
    evaluation = EVALS.get(unit["eval"])
    methods = [] if unit["method"] == "-" else [METHODS.get(unit["method"])]
    context = EvalContext(unit["dataset"], config["seed"], progress=False,
                          notes={**notes, "sample_size": len(chosen), "dataset_size": len(examples)})
    records = evaluation(adapter, methods, chosen, context)
    return records, time.perf_counter() - start


# -- executors -------------------------------------------------------------------------------
class LocalExecutor:
    name = "local"

    def __init__(self, threads: Optional[int] = None):
        self.threads = threads

    def map(self, config: dict, units: list[Unit]) -> Iterable[tuple[Unit, list[dict], float]]:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        for unit in units:
            records, seconds = run_unit(config, unit.as_dict())
            yield unit, records, seconds


class RayExecutor:
    name = "ray"

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None):
        try:
            import ray
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

    def map(self, config: dict, units: list[Unit]) -> Iterable[tuple[Unit, list[dict], float]]:
        ray = self.ray
        remote = ray.remote(num_cpus=1)(_ray_unit)
        cache = os.environ.get("ATTRBENCH_CACHE")
        pending = {remote.remote(config, unit.as_dict(), cache): unit for unit in units}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                unit = pending.pop(ref)
                records, seconds = ray.get(ref)
                yield unit, records, seconds


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    import socket

    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as err:
        raise InputError(f"Ray at '{address}' does not answer ({err}); start it (ray start --head) or check the "
                         "address (host:port, or ray://host:port)") from None


def _ray_unit(config: dict, unit: dict, cache: Optional[str]):
    if cache:  # the worker uses the driver's model cache when it shares the file system
        os.environ.setdefault("ATTRBENCH_CACHE", cache)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    return run_unit(config, unit)


# -- a run -----------------------------------------------------------------------------------
def run_leaderboard(config: dict, run_dir: str | Path, executor=None, progress: bool = True) -> dict:
    """Compute every unit of ``config`` not yet in ``run_dir``'s store; return a summary."""
    from tqdm.auto import tqdm

    from .results import library_versions, model_provenance
    from .store import Store, StoreError

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = Store(run_dir / "store.sqlite")
    try:
        digest = config_hash(config)
        stored = store.meta("config_hash")
        if stored is not None and stored != digest:
            old = store.meta("config") or {}
            changed = sorted(k for k in set(old) | set(config) if k != "name" and old.get(k) != config.get(k))
            raise StoreError(f"run folder {run_dir} holds results of a different config (differs in: "
                             f"{', '.join(changed) or 'suite'}); use a new folder (--out) or the same config")
        stage = time.perf_counter()
        units, samples = plan(config)
        plan_seconds = time.perf_counter() - stage
        executor = executor or LocalExecutor()
        if stored is None:
            store.set_meta(config=config, config_hash=digest, planned=[u.key for u in units], versions=library_versions(), samples=samples,
                           models={e["model"]: model_provenance(adapter_for(e["model"], config["dtype"]))
                                   for e in config["suite"]},
                           started=time.strftime("%Y-%m-%d %H:%M:%S"))
        done = store.done()
        todo = [u for u in units if u.key not in done]
        bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=f"run {config['name']}", unit="unit",
                   disable=not progress)
        stage = time.perf_counter()
        for unit, records, seconds in executor.map(config, todo):
            store.put(unit.key, unit.as_dict(), records, seconds)
            bar.update()
        bar.close()
        compute_seconds = time.perf_counter() - stage
        store.set_meta(finished=time.strftime("%Y-%m-%d %H:%M:%S"), executor=executor.name)
        missing = {u.key for u in units} - store.done()
        if missing:
            raise AttrbenchError(f"{len(missing)} units are missing after the run (e.g. {sorted(missing)[0]})")
        return {"units": len(units), "computed": len(todo), "reused": len(units) - len(todo),
                "plan_seconds": plan_seconds, "compute_seconds": compute_seconds}
    finally:
        store.close()


def collect(run_dir: str | Path) -> tuple[list[dict], dict]:
    """The merged records of a run (shards joined per record) and its metadata; incomplete runs raise."""
    from .registry import EVALS
    from .store import Store, StoreError

    path = Path(run_dir) / "store.sqlite"
    if not path.is_file():
        raise InputError(f"{run_dir} is not a run folder (no store.sqlite); run `attrbench run` first")
    store = Store(path)
    try:
        config = store.meta("config")
        if config is None:
            raise StoreError(f"{path} has no run metadata; it was not written by `attrbench run`")
        meta = {k: store.meta(k) for k in ("config", "config_hash", "versions", "samples", "models", "started",
                                           "finished", "executor", "planned")}
        missing = set(meta["planned"] or []) - store.done()
        if missing:
            raise StoreError(f"run {run_dir} is incomplete: {len(missing)} of {len(meta['planned'])} units are "
                             "missing; rerun `attrbench run` with the same config to finish it")
        groups: dict[tuple, list[dict]] = {}
        units = sorted(store.units(), key=lambda u: u["shard"])
        for unit in units:
            for record in unit["records"]:
                record = {**record, "unit_seconds": unit["seconds"]}
                groups.setdefault((record["model"], record["dataset"], record["eval"], record["method"],
                                   record["metric"]), []).append(record)
        meta["unit_count"] = len(units)
    finally:
        store.close()
    merged = [EVALS.get(key[2]).merge(shards) if len(shards) > 1 else shards[0] for key, shards in groups.items()]
    return merged, meta
