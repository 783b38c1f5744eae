"""Run configs: models × methods × evaluations × datasets, read and validated before any work.

A config (TOML, or YAML if PyYAML is installed; ``configs/default.toml`` is the shipped one) looks like::

    name = "default"
    seed = 0
    dtype = "float32"
    device = "auto"                     # optional: auto, cpu, cuda, cuda:N or mps (default cpu)
    budget = "15m"                      # optional: stop starting shards after this long (s, m or h)
    shard_size = 8                      # optional: examples per job (default by device: 8 CPU, 64 CUDA, 16 MPS)
    batch_tokens = 4096                 # optional: padded tokens per batch of model-output requests

    [[suite]]
    model = "MODEL"
    dataset = "DATASET"
    n = 40                              # the first n of a seeded order of the examples (all when left out)
    methods = "all"                     # or a list of method names
    exclude_methods = ["NAME", ...]     # optional, with "all": every method but these (at the top: every suite's)
    evals = ["EVAL", ...]

    [suite.method_params.METHOD]        # optional: a method's parameters (`attrbench methods --json`)
    PARAM = VALUE
    [suite.eval_params.EVAL]            # optional: an evaluation's parameters
    PARAM = VALUE
    [suite.dataset_params]              # optional: the dataset's parameters (e.g. sst2: target = "label")
    PARAM = VALUE
    [suite.eval_n]                      # optional: a smaller sample for an evaluation (e.g. an analysis)
    EVAL = N
    floor_draws = 100                   # optional: seeded draws of a sampled random floor (a budget may take fewer)
    floor_n = 300                       # optional: the random floor on each table's first N examples only

Every result row is keyed by all it depends on (``attrbench.runtime.store``), so a config may change
between runs in one folder: a changed parameter, an added method or a larger n computes exactly the
rows it adds, and the leaderboard shows the rows the current config asks for.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from ..datasets.files import looks_like_file
from ..datasets.lookup import dataset_plugin
from ..errors import InputError
from ..ops.stats import MIN_RESAMPLES, RESAMPLES
from ..registry import DATASETS, EVALS, METHODS
from .options import DTYPES

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "default.toml"
TOP_KEYS = {"name": str, "seed": int, "dtype": str, "device": str, "budget": (str, int, float), "shard_size": int,
            "batch_tokens": int, "bootstrap_resamples": int, "exclude_methods": list, "suite": list}
SUITE_KEYS = {"model": str, "dataset": str, "n": int, "methods": (str, list), "exclude_methods": list,
              "evals": list, "split": str, "method_params": dict, "eval_params": dict, "dataset_params": dict,
              "eval_n": dict, "floor_draws": int, "floor_n": int}
BUDGET_SYNTAX = "a number of seconds, or e.g. 90s, 15m, 1.5h, 1h50m"
_BUDGET_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smh])")


def parse_budget(value) -> Optional[float]:
    """Seconds from a budget (``15m``, ``90s``, ``1.5h``, ``1h50m`` or a number of seconds); None for no budget."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"budget {value!r} is not understood: give {BUDGET_SYNTAX}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        elif re.fullmatch(rf"(?:{_BUDGET_PART.pattern}\s*)+", text):  # e.g. "1h 50m"
            seconds = sum(float(amount) * {"s": 1, "m": 60, "h": 3600}[unit]
                          for amount, unit in _BUDGET_PART.findall(text))
        else:
            raise ConfigError(f"budget '{value}' is not understood: give {BUDGET_SYNTAX}")
    if not seconds > 0:
        raise ConfigError(f"budget '{value}' must be more than 0 ({BUDGET_SYNTAX})")
    return seconds


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
                raise ConfigError("YAML configs need PyYAML (pip install pyyaml); "
                                  "or write the config in TOML") from None
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
              "dtype": raw.get("dtype", "float32"), "shard_size": raw.get("shard_size"),
              "bootstrap_resamples": raw.get("bootstrap_resamples", RESAMPLES), "suite": []}
    for key in ("device", "budget", "batch_tokens"):
        if key in raw:
            config[key] = raw[key]
    if config["dtype"] not in DTYPES:
        raise ConfigError(f"config key 'dtype' is '{config['dtype']}'; allowed: {', '.join(DTYPES)}")
    if "budget" in config:
        parse_budget(config["budget"])
    if "device" in config and not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", config["device"]):
        raise ConfigError(f"config key 'device' is '{config['device']}'; allowed: auto, cpu, cuda, cuda:N, mps")
    if config.get("batch_tokens", 1) < 1:
        raise ConfigError("config key 'batch_tokens' must be at least 1")
    name = config["name"]
    if not name.strip() or name.strip(".") == "" or re.search(r"[/\\\x00-\x1f]", name):
        raise ConfigError(f"config key 'name' is {name!r}: it names the run's folder, so give a plain name "
                          "(no slashes, not '.' or '..')")
    if config["seed"] < 0:
        raise ConfigError("config key 'seed' must be 0 or more")
    if config["shard_size"] is not None and config["shard_size"] < 1:
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
            split = entry.get("split")  # the dataset's default split named or not: the same examples
            if dataset in DATASETS.names() and split == getattr(DATASETS.get(dataset), "default_split", None):
                split = None
            other = seen.setdefault((entry["model"], dataset, split, name), k)
            if other != k:
                split = f" (split {split})" if split else ""
                raise ConfigError(f"config key '{where}.evals': {name} on {entry['model']} / {entry['dataset']}{split} "
                                  f"is already in suite[{other}]; each (model, dataset, split, evaluation) may appear "
                                  "once")
        n = entry.get("n")
        if n is not None and n < 1:
            raise ConfigError(f"config key '{where}.n' must be at least 1")
        _check_params(f"{where}.method_params", entry.get("method_params", {}), METHODS,
                      [m for m in method_names if m not in excluded] if methods == "all" else methods)
        _check_params(f"{where}.eval_params", entry.get("eval_params", {}), EVALS, entry["evals"])
        if entry.get("dataset_params"):
            try:
                dataset_plugin(dataset).with_params(**entry["dataset_params"])
            except InputError as err:
                raise ConfigError(f"config key '{where}.dataset_params': {err}") from None
        for name, cap in entry.get("eval_n", {}).items():
            if name not in entry["evals"]:
                raise ConfigError(f"config key '{where}.eval_n.{name}': '{name}' is not in this suite's evals")
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise ConfigError(f"config key '{where}.eval_n.{name}' must be a whole number of at least 1")
        draws = entry.get("floor_draws")
        if draws is not None and draws < 2:
            raise ConfigError(f"config key '{where}.floor_draws' must be at least 2 (a floor's Monte-Carlo error "
                              "needs two draws)")
        floor_n = entry.get("floor_n")
        if floor_n is not None and floor_n < 1:
            raise ConfigError(f"config key '{where}.floor_n' must be a whole number of at least 1 (leave it out for "
                              "the floor on every example)")
        config["suite"].append({"model": entry["model"], "dataset": dataset, "n": n, "methods": methods,
                                **({"exclude_methods": list(excluded)} if excluded else {}),
                                "evals": list(entry["evals"]), "split": entry.get("split"),
                                "method_params": entry.get("method_params", {}),
                                "eval_params": entry.get("eval_params", {}),
                                "dataset_params": entry.get("dataset_params", {}),
                                "eval_n": entry.get("eval_n", {}),
                                **({"floor_draws": draws} if draws is not None else {}),
                                **({"floor_n": floor_n} if floor_n is not None else {})})
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
