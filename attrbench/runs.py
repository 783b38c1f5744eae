"""Leaderboard runs: a config of models × methods × evaluations × datasets, split into units.

A config (TOML, or YAML if PyYAML is installed; ``default.toml`` is the shipped one) looks like::

    name = "default"
    seed = 0
    dtype = "float32"
    shard_size = 20                     # examples per unit

    [[suite]]
    model = "MODEL"
    dataset = "DATASET"
    n = 40                              # sampled examples (seeded)
    methods = "all"                     # or a list of method names
    exclude_methods = ["NAME", ...]     # optional, with "all": every method but these (at the top: every suite's)
    evals = ["EVAL", ...]

    [suite.method_params.METHOD]        # optional: a method's parameters (`attrbench methods --json`)
    PARAM = VALUE
    [suite.eval_params.EVAL]            # optional: an evaluation's parameters
    PARAM = VALUE

A unit is (model, dataset, evaluation, method, example shard), each with its parameters, planned by
``attrbench.planning``; the papers' analyses take no method and run as one unit over the suite's
sample. Units are computed by an executor — local (this process, ``threads`` torch threads) or Ray
(one task per unit, on ``ray.init()`` or a given address) — and each result is committed to the run
folder's store as it arrives, so a rerun computes only what is missing and a killed run resumes
with nothing lost or duplicated. Parameters are part of a unit's key: changing one in the config and
rerunning in the same folder recomputes exactly the units it affects.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from .errors import AttrbenchError, InputError
from .context import RunContext
from .planning import Unit, plan_units, run_unit, select_methods
from .stats import MIN_RESAMPLES, RESAMPLES, with_intervals

DEFAULT_CONFIG = Path(__file__).parent / "default.toml"
TOP_KEYS = {"name": str, "seed": int, "dtype": str, "shard_size": int, "bootstrap_resamples": int,
            "exclude_methods": list, "suite": list}
SUITE_KEYS = {"model": str, "dataset": str, "n": int, "methods": (str, list), "exclude_methods": list,
              "evals": list, "split": str, "method_params": dict, "eval_params": dict}
PARAM_KEYS = ("method_params", "eval_params")  # may change between runs in one folder: they are in the unit keys
DTYPES = ("float32", "float64")


class ConfigError(InputError):
    pass


# -- config ----------------------------------------------------------------------------------
def read_config(path: Optional[str | Path] = None) -> dict:
    """Parse and validate a run config; errors name the key and what is allowed."""
    path = Path(path) if path else DEFAULT_CONFIG
    shipped = DEFAULT_CONFIG.parent / f"{path}.toml"
    if not path.is_file() and path.suffix == "" and shipped.is_file():
        path = shipped  # a shipped config by name: `attrbench run full`
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; the shipped configs are "
                          f"{', '.join(sorted(p.stem for p in DEFAULT_CONFIG.parent.glob('*.toml')))}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"config {path} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset "
                          f"{err.start}); save it as UTF-8") from None
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
    from .datafiles import looks_like_file
    from .registry import DATASETS, EVALS, METHODS

    if not isinstance(raw, dict):
        raise ConfigError(f"config {source} must be a table of keys: {', '.join(TOP_KEYS)}")
    for key, value in raw.items():
        if key not in TOP_KEYS:
            raise ConfigError(f"config key '{key}' is not known; allowed: {', '.join(TOP_KEYS)}")
        _check_type(key, value, TOP_KEYS[key])
    config = {"name": raw.get("name", Path(source).stem), "seed": raw.get("seed", 0),
              "dtype": raw.get("dtype", "float32"), "shard_size": raw.get("shard_size", 20),
              "bootstrap_resamples": raw.get("bootstrap_resamples", RESAMPLES), "suite": []}
    if config["dtype"] not in DTYPES:
        raise ConfigError(f"config key 'dtype' is '{config['dtype']}'; allowed: {', '.join(DTYPES)}")
    name = config["name"]
    if not name.strip() or name.strip(".") == "" or re.search(r"[/\\\x00-\x1f]", name):
        raise ConfigError(f"config key 'name' is {name!r}: it names the run's folder, so give a plain name "
                          "(no slashes, not '.' or '..')")
    if config["seed"] < 0:
        raise ConfigError("config key 'seed' must be 0 or more")
    if config["shard_size"] < 1:
        raise ConfigError("config key 'shard_size' must be at least 1")
    if config["bootstrap_resamples"] < MIN_RESAMPLES:
        raise ConfigError(f"config key 'bootstrap_resamples' is {config['bootstrap_resamples']}; allowed: "
                          f"{MIN_RESAMPLES} or more (default {RESAMPLES})")
    if not raw.get("suite"):
        raise ConfigError("config has no [[suite]] entry: add at least one (model, dataset, evals)")
    method_names, eval_names = METHODS.names(), EVALS.names()
    for name in raw.get("exclude_methods", []):
        if name not in method_names:
            raise ConfigError(f"config key 'exclude_methods' names unknown method '{name}'; allowed: "
                              f"{', '.join(method_names)}")
    base = Path(source).parent if Path(source).is_file() else Path.cwd()
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
        dataset = entry["dataset"]
        if dataset not in DATASETS.names():
            if not looks_like_file(dataset):
                raise ConfigError(f"config key '{where}.dataset' is '{dataset}'; allowed: "
                                  f"{', '.join(DATASETS.names())}, or the path of a .jsonl, .csv or .tsv file")
            path = Path(dataset).expanduser()
            path = path if path.is_absolute() else base / path  # relative to the config file, not the cwd
            if not path.is_file():
                raise ConfigError(f"config key '{where}.dataset': file {path} does not exist (a relative path is "
                                  "read from the config file's folder)")
            dataset = str(path.resolve())
        for name in entry["evals"]:
            if name not in eval_names:
                raise ConfigError(f"config key '{where}.evals' names unknown evaluation '{name}'; allowed: "
                                  f"{', '.join(eval_names)}")
        methods = entry.get("methods", [])
        excluded = entry.get("exclude_methods", raw.get("exclude_methods", []) if methods == "all" else [])
        if isinstance(methods, str):
            if methods != "all":
                raise ConfigError(f"config key '{where}.methods' must be a list of method names or \"all\"")
        elif excluded:
            raise ConfigError(f"config key '{where}.exclude_methods' goes with methods = \"all\"; with a list, "
                              "leave the methods out of the list")
        for key, names in (("methods", [] if methods == "all" else methods), ("exclude_methods", excluded)):
            for name in names:
                if name not in method_names:
                    raise ConfigError(f"config key '{where}.{key}' names unknown method '{name}'; allowed: "
                                      f"{', '.join(method_names)}" + (" or \"all\"" if key == "methods" else ""))
        if not entry["evals"]:
            raise ConfigError(f"config key '{where}.evals' is empty; name at least one (see `attrbench evals`)")
        for name in entry["evals"]:
            other = seen.setdefault((entry["model"], dataset, name), k)
            if other != k:
                raise ConfigError(f"config key '{where}.evals': {name} on {entry['model']} / {entry['dataset']} is "
                                  f"already in suite[{other}]; each (model, dataset, evaluation) may appear once")
        n = entry.get("n", 100)
        if n < 1:
            raise ConfigError(f"config key '{where}.n' must be at least 1")
        _check_params(f"{where}.method_params", entry.get("method_params", {}), METHODS,
                      [m for m in method_names if m not in excluded] if methods == "all" else methods)
        _check_params(f"{where}.eval_params", entry.get("eval_params", {}), EVALS, entry["evals"])
        config["suite"].append({"model": entry["model"], "dataset": dataset, "n": n, "methods": methods,
                                **({"exclude_methods": list(excluded)} if excluded else {}),
                                "evals": list(entry["evals"]), "split": entry.get("split"),
                                "method_params": entry.get("method_params", {}),
                                "eval_params": entry.get("eval_params", {})})
    return config


def _check_params(where: str, params: dict, registry, names) -> None:
    """Each named plugin is in the suite and takes these parameters with these values."""
    for name, values in params.items():
        if name not in names:
            raise ConfigError(f"config key '{where}.{name}': '{name}' is not in this suite; its {registry.kind}s: "
                              f"{', '.join(names)}")
        if not isinstance(values, dict):
            raise ConfigError(f"config key '{where}.{name}' must be a table of parameter = value")
        try:
            registry.get(name).with_params(**values)
        except InputError as err:
            raise ConfigError(f"config key '{where}.{name}': {err}") from None


def config_hash(config: dict) -> str:
    """Identity of a run folder's experiment: everything but the name and the parameters (those are in
    the unit keys, so a changed parameter recomputes its units in the same folder)."""
    body = {k: v for k, v in config.items() if k not in ("name", "bootstrap_resamples")}  # statistics only
    body["suite"] = [{k: v for k, v in entry.items() if k not in PARAM_KEYS} for entry in config["suite"]]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# -- planning --------------------------------------------------------------------------------
def plan(config: dict, context: Optional[RunContext] = None) -> tuple[list[Unit], list[dict]]:
    """All units of a config (checking every model/method/evaluation pairing first) and the samples."""
    from .datasets import sample
    from .planning import configured
    from .registry import EVALS

    context = context or RunContext(config["dtype"])
    units, samples = [], []
    for entry in config["suite"]:
        adapter = context.adapter(entry["model"])
        examples, notes = context.examples(adapter, entry["dataset"], entry.get("split"))
        chosen = sample(examples, entry["n"], config["seed"])
        ids = [e.id for e in chosen]
        samples.append({"model": entry["model"], "dataset": entry["dataset"], "evals": entry["evals"],
                        "example_ids": ids, **notes})
        evaluations = configured(EVALS, entry["evals"], entry.get("eval_params"))
        methods, named = select_methods(adapter, entry["methods"], entry.get("method_params"),
                                        entry.get("exclude_methods", ()))
        units += plan_units(adapter, entry["dataset"], entry.get("split"), evaluations, methods, named, chosen,
                            config["shard_size"])
    return units, samples


# -- executors -------------------------------------------------------------------------------
def timed_unit(context: RunContext, seed: int, unit: Unit) -> tuple[list[dict], float]:
    start = time.perf_counter()
    records = run_unit(context, unit, seed)
    return records, time.perf_counter() - start


class LocalExecutor:
    """Units one after another in this process, sharing the driver's run context (models, attributions)."""

    name = "local"

    def __init__(self, threads: Optional[int] = None):
        self.threads = threads

    def map(self, config: dict, units: list[Unit], context: RunContext) -> Iterable[tuple[Unit, list[dict], float]]:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        for unit in units:
            yield unit, *timed_unit(context, config["seed"], unit)


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

    def map(self, config: dict, units: list[Unit], context: RunContext) -> Iterable[tuple[Unit, list[dict], float]]:
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


@lru_cache(maxsize=4)
def worker_context(dtype: str) -> RunContext:
    """A Ray worker process's run context: its models and caches live as long as the worker."""
    return RunContext(dtype)


def _ray_unit(config: dict, unit: dict, cache: Optional[str]):
    if cache:  # the worker uses the driver's model cache when it shares the file system
        os.environ.setdefault("ATTRBENCH_CACHE", cache)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    return timed_unit(worker_context(config["dtype"]), config["seed"], Unit.from_dict(unit))


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
        context = RunContext(config["dtype"])
        units, samples = plan(config, context)
        plan_seconds = time.perf_counter() - stage
        for before, now in zip(store.meta("samples") or [], samples):  # a data file edited since then
            if before.get("file_sha256") != now.get("file_sha256"):
                raise StoreError(f"run folder {run_dir} holds results on another version of {now['dataset']} "
                                 f"(sha256 {str(before.get('file_sha256'))[:12]}…, now {now['file_sha256'][:12]}…); "
                                 "use a new folder (--out) or restore the file")
        executor = executor or LocalExecutor()
        if stored is None:
            store.set_meta(config_hash=digest, versions=library_versions(), samples=samples,
                           models={e["model"]: model_provenance(context.adapter(e["model"])) for e in config["suite"]},
                           started=time.strftime("%Y-%m-%d %H:%M:%S"))
        store.set_meta(config=config, planned=[u.key for u in units])  # this config's parameters and units
        done = store.done()
        todo = [u for u in units if u.key not in done]
        bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=f"run {config['name']}", unit="unit",
                   disable=not progress)
        stage = time.perf_counter()
        for unit, records, seconds in executor.map(config, todo, context):
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
        planned = set(meta["planned"] or [])
        missing = planned - store.done()
        if missing:
            raise StoreError(f"run {run_dir} is incomplete: {len(missing)} of {len(meta['planned'])} units are "
                             "missing; rerun `attrbench run` with the same config to finish it")
        groups: dict[tuple, list[dict]] = {}
        # units of the current config only: results of parameters changed since stay stored, unused
        units = sorted((u for u in store.units() if u["key"] in planned), key=lambda u: u["shard"])
        for unit in units:
            for record in unit["records"]:
                record = {**record, "unit_seconds": unit["seconds"]}
                groups.setdefault((record["model"], record["dataset"], record["eval"], record["method"],
                                   record["metric"]), []).append(record)
        meta["unit_count"] = len(units)
    finally:
        store.close()
    merged = [EVALS.get(key[2]).merge(shards) if len(shards) > 1 else shards[0] for key, shards in groups.items()]
    return with_intervals(merged, config["seed"], config.get("bootstrap_resamples", RESAMPLES)), meta
