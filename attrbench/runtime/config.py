"""Run configs: models × methods × evaluations × datasets, read and validated before any work.

A config (TOML, or YAML if PyYAML is installed; ``configs/default.toml`` is the shipped one) looks like::

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
``attrbench.runtime.plan`` and computed by ``attrbench.runtime.pipeline``. Parameters are part of a
unit's key: changing one in the config and rerunning in the same folder recomputes exactly the
units it affects; everything else in the config is the run folder's identity (:func:`config_hash`).
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from ..datasets.files import looks_like_file
from ..errors import InputError
from ..ops.stats import MIN_RESAMPLES, RESAMPLES
from ..plugin.registry import DATASETS, EVALS, METHODS
from .options import DTYPES

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "default.toml"
TOP_KEYS = {"name": str, "seed": int, "dtype": str, "shard_size": int, "bootstrap_resamples": int,
            "exclude_methods": list, "suite": list}
SUITE_KEYS = {"model": str, "dataset": str, "n": int, "methods": (str, list), "exclude_methods": list,
              "evals": list, "split": str, "method_params": dict, "eval_params": dict}
PARAM_KEYS = ("method_params", "eval_params")  # may change between runs in one folder: they are in the unit keys


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
                import yaml  # optional (the test extra): only YAML configs need it
            except ImportError:
                raise ConfigError("YAML configs need PyYAML (pip install pyyaml); or write the config in TOML") from None
            raw = yaml.safe_load(text)
        else:
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
