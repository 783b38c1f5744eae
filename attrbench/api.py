"""The Python API, for notebooks first: attribute, evaluate, run and read results as pandas.

Every function here is a thin front to the same pipeline as the CLI (``attrbench.runtime.pipeline``), so a
bad argument raises the CLI's one-line :class:`~attrbench.errors.AttrbenchError` (mostly ``InputError``) and a
result equals the CLI's.

>>> import attrbench
>>> a = attrbench.attribute("minilm-l6-sst2", "a wonderful film", ["alti", "grad_l2"], target="class:1")
>>> a.to_pandas().head()          # one row per (text, method, token); in Jupyter, ``a`` shows saliency strips
>>> scores = attrbench.evaluate("minilm-l6-sst2", ["alti", "grad_l2"], ["erasure_aopc"], "sst2", n=30)
>>> scores.summary                # mean [95 % CI] per (method, metric); ``scores.results`` per example
>>> run = attrbench.load_run("reports/default")
>>> run.results.groupby(["model", "dataset", "eval", "metric", "method"]).value.mean()
"""
from __future__ import annotations

import hashlib
import html
import json
import operator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from .errors import InputError
from .models import load_model
from .models.zoo import cache_dir
from .plugin.method import Method, MethodResult
from .registry import METHODS
from .report.documents import progress_line, write_report
from .report.plot import save_figure, scores_figure
from .report.tables import report_tables, table_title
from .runtime import pipeline
from .runtime import records as run_records
from .runtime.config import read_config, validate_config
from .runtime.store import is_run_folder
from .runtime.options import RunOptions

__all__ = ["Attributions", "Scores", "RunResults", "attribute", "evaluate", "run", "load_run", "as_dataset"]

RESULT_COLUMNS = ["model", "dataset", "eval", "metric", "method", "example", "value"]


# -- models and methods ---------------------------------------------------------------------------
def _model(model, dtype: str, device: str):
    """A loaded adapter as it is, or a name / folder loaded with the run options."""
    if isinstance(model, str):
        if not isinstance(dtype, str) or not isinstance(device, str):
            raise InputError(f"dtype and device are names (e.g. 'float32', 'cpu'), not {dtype!r} and {device!r}")
        options = RunOptions(dtype=dtype, device=device)
        return load_model(model, dtype=options.dtype, device=options.device)
    if not hasattr(model, "tokenizer") or not hasattr(model, "weights_sha256"):
        raise InputError(f"model must be a name (see `attrbench models`), a folder, or what attrbench.load_model "
                         f"returns; got {type(model).__name__}")
    return model


def _listed(value) -> Optional[list]:
    """The items of an ordered collection that is not a string or a mapping (list, tuple, pandas Series, numpy
    array), else None."""
    if (isinstance(value, (str, bytes, Mapping, AbstractSet)) or not isinstance(value, Iterable)
            or (isinstance(value, np.ndarray) and value.ndim == 0)):  # a set has no order; a 0-d array is one value
        return None
    return list(value)


def _strings(value, what: str, example: str) -> list[str]:
    """One string or a collection of strings (a list, a pandas Series, ...), as a list; anything else is the
    one-line error."""
    if isinstance(value, str):
        return [value]
    items = _listed(value)
    if items is not None and all(isinstance(v, str) for v in items):
        return [str(v) for v in items]  # numpy's str_ is a str; make it a plain one
    raise InputError(f"{what} must be a string or a list of strings (e.g. {example}), not {type(value).__name__}")


def _parameters(params, kind: str) -> dict[str, dict]:
    """``{name: {param: value}}`` as given, checked to be that shape."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                  for k, v in params.items()):
        raise InputError(f"{kind} params must map a name to its parameters, e.g. "
                         f"{{'integrated_gradients': {{'n_steps': 32}}}}; got {params!r:.60}")
    return {k: dict(v) for k, v in params.items()}


def _whole(value, what: str, least: int, none: bool = False) -> Optional[int]:
    """A whole number (a Python or numpy integer, not a bool or a float) of at least ``least``."""
    if value is None and none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        try:
            whole = operator.index(value)
        except TypeError:
            whole = None
        if whole is not None and whole >= least:
            return whole
    raise InputError(f"{what} must be a whole number of at least {least}{' or None' if none else ''}, not {value!r}")


def _methods(methods, params: Optional[Mapping[str, dict]] = None) -> list[Method]:
    """Names (a list, or one comma-separated string) or Method instances, configured with ``params``."""
    if isinstance(methods, (str, Method)):
        methods = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else [methods]
    elif methods is not None:
        methods = _listed(methods) if _listed(methods) is not None else methods
    if methods is not None and not isinstance(methods, list):
        raise InputError(f"methods must be names (a list, or one comma-separated string) or attrbench.plugin.Method "
                         f"instances, not {type(methods).__name__}")
    params = _parameters(params, "method")
    methods = list(methods or [])
    if not methods:
        raise InputError(f"no method given; known: {', '.join(METHODS.names())}")
    out = []
    for m in methods:
        if not isinstance(m, (str, Method)):
            raise InputError(f"a method is a registered name or an attrbench.plugin.Method, not {type(m).__name__}")
        method = METHODS.get(m) if isinstance(m, str) else m
        out.append(method.with_params(**(params or {}).get(method.name, {})))
    unused = set(params or {}) - {m.name for m in out}
    if unused:
        raise InputError(f"params given for '{sorted(unused)[0]}', which is not among the methods "
                         f"{', '.join(m.name for m in out)}")
    return out


# -- attribute --------------------------------------------------------------------------------------
@dataclass
class Attributions:
    """Input attributions of texts by several methods: ``results[text_index][method]`` (``MethodResult``)."""

    model: str
    texts: list[str]
    results: list[dict[str, MethodResult]]

    @property
    def methods(self) -> list[str]:
        return list(self.results[0]) if self.results else []

    def tokens(self, index: int = 0) -> list[str]:
        return next(iter(self.results[index].values())).tokens

    def scores(self, index: int = 0) -> dict[str, np.ndarray]:
        """{method: scores per token} of text ``index``."""
        return {name: r.values for name, r in self.results[index].items()}

    def to_pandas(self) -> pd.DataFrame:
        """Long format: one row per (text, method, token) with the score, the target and what it explains."""
        rows = []
        for k, (text, by_method) in enumerate(zip(self.texts, self.results)):
            for name, result in by_method.items():
                for position, (token, score) in enumerate(zip(result.tokens, result.values.tolist())):
                    rows.append({"text_index": k, "text": text, "method": name, "position": position, "token": token,
                                 "score": score, "target": result.meta.get("target"),
                                 "explains": result.meta.get("explains"), "model": self.model})
        return pd.DataFrame(rows)

    def plot(self, index: int = 0, path: Optional[str | Path] = None):
        """Saliency strips of text ``index``, one per method: a matplotlib Figure, or the saved file with ``path``."""
        first = next(iter(self.results[index].values()))
        title = f"{self.model}, target {first.meta.get('target')} (explains {first.meta.get('explains')})"
        figure = scores_figure(self.tokens(index), self.scores(index), title)
        if path is None:
            return figure
        return save_figure(figure, path, title)

    def _repr_html_(self) -> str:
        """Saliency strips as HTML (red: for the target, blue: against; each method scaled to its own max |score|)."""
        parts = [f"<div class='attrbench-attributions'><b>{html.escape(self.model)}</b>"]
        for k, by_method in enumerate(self.results):
            first = next(iter(by_method.values()))
            parts.append(f"<p>text {k}: target <code>{html.escape(str(first.meta.get('target')))}</code>, explains "
                         f"{html.escape(str(first.meta.get('explains')))}</p><table>")
            for name, result in by_method.items():
                scale = float(np.abs(result.values).max()) or 1.0
                cells = "".join(_cell(token, value / scale, value) for token, value in
                                zip(result.tokens, result.values.tolist()))
                parts.append(f"<tr><th style='text-align:left'>{html.escape(name)}</th><td>{cells}</td></tr>")
            parts.append("</table>")
        return "".join(parts) + "</div>"

    def __repr__(self) -> str:
        return f"Attributions(model={self.model!r}, texts={len(self.texts)}, methods={self.methods})"


def _cell(token: str, weight: float, value: float) -> str:
    """One token on a white-to-red (weight > 0) or white-to-blue (weight < 0) background."""
    fade = int(255 * (1 - min(abs(weight), 1.0)))
    rgb = (255, fade, fade) if weight >= 0 else (fade, fade, 255)
    return (f"<span class='saliency' title='{value:.4f}' style='background: rgb{rgb}; padding: 1px 3px; "
            f"margin: 1px; display: inline-block'>{html.escape(token)}</span>")


def attribute(model, texts: str | Sequence[str], methods, *, target: str | Sequence[str] = "auto",
              params: Optional[Mapping[str, dict]] = None, dtype: str = "float32", device: str = "cpu",
              truncate: bool = False) -> Attributions:
    """Input attributions of ``texts`` by ``methods`` for ``target`` (one for all texts, or one per text).

    ``model``: a name, a folder or a loaded model; ``methods``: names or ``Method`` instances (a notebook's
    own method works unregistered); ``params``: ``{method: {param: value}}``.

    >>> a = attrbench.attribute("minilm-l6-sst2", ["a wonderful film", "dull"], "alti,grad_l2", target="class:1")
    >>> a.to_pandas().pivot_table(index="token", columns="method", values="score")
    """
    texts = _strings(texts, "texts", "'a wonderful film'")
    if not texts:
        raise InputError("no text given: pass a string or a list of strings")
    targets = [target] * len(texts) if isinstance(target, str) else _strings(target, "target", "'class:1'")
    if len(targets) != len(texts):
        raise InputError(f"{len(targets)} targets for {len(texts)} texts: give one target, or one per text")
    configured = _methods(methods, params)
    for method in configured:
        if method.output != "scores":
            raise InputError(f"'{method.name}' gives token-to-token maps, not input scores: use "
                             f"attrbench.decompose (CLI: `attrbench decompose --scopes {method.name}`)")
    adapter = _model(model, dtype, device)
    budget = RunOptions(device=str(adapter.device))  # batches as large as a run's on this device
    per_method = {method.name: method.within(budget.batch_tokens, budget.pad_tokens)(adapter, texts, target=targets,
                                                                                      truncate=truncate)
                  for method in configured}
    results = [{name: results[k] for name, results in per_method.items()} for k in range(len(texts))]
    return Attributions(adapter.name, texts, results)


# -- datasets from the ecosystem ------------------------------------------------------------------------
def as_dataset(data, columns: Optional[Mapping[str, str]] = None) -> str:
    """A dataset name for ``data``: a name or file path as it is; a pandas DataFrame or a Hugging Face
    ``datasets.Dataset`` written once to a parquet file in the cache (named by its content) and read as a file of
    your own (docs/own-data.md). ``columns`` maps the data's column names to attrbench's fields
    (``text``, ``label``, ``target``, ``id``, ``rationale``, ``sentence_good``, ``sentence_bad``)."""
    if isinstance(data, (str, Path)):
        if columns:
            raise InputError("columns maps the columns of a DataFrame or Dataset; a file names its own fields")
        return str(data)
    if hasattr(data, "to_pandas") and not isinstance(data, pd.DataFrame):  # datasets.Dataset
        data = data.to_pandas()
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"dataset must be a name, a file path, a pandas DataFrame or a datasets.Dataset, not "
                         f"{type(data).__name__}")
    if columns is not None and not isinstance(columns, Mapping):
        raise InputError(f"columns maps the data's column names to attrbench's fields, e.g. {{'sentence': 'text'}}; "
                         f"got {type(columns).__name__}")
    columns = dict(columns or {})
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise InputError(f"columns maps '{missing[0]}', which is not a column of the data; its columns: "
                         f"{', '.join(map(str, data.columns))}")
    frame = data.rename(columns=columns)
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):
        raise InputError(f"the data has two columns named '{twice[0]}' (after columns= is applied); drop or rename "
                         f"one first")
    folder = cache_dir() / "frames"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        payload = frame.to_json(orient="records", force_ascii=False).encode()
        path = folder / f"frame-{hashlib.sha256(payload).hexdigest()[:16]}.parquet"
        if not path.exists():
            partial = path.with_suffix(".partial")
            frame.to_parquet(partial, index=False)
            partial.replace(path)
    except (ValueError, TypeError, OverflowError, NotImplementedError) as error:  # pyarrow's errors subclass these
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        mixed = type(error).__name__ in ("ArrowTypeError", "ArrowInvalid")  # a column holding values of two types
        hint = "; give each column one type, e.g. df['text'] = df['text'].astype(str)" if mixed else ""
        raise InputError(f"the data cannot be stored as a table ({first[:120]}){hint}") from error
    return str(path)


# -- evaluate ---------------------------------------------------------------------------------------------
@dataclass
class Scores:
    """Evaluation records: ``results`` (one row per method, metric and example) and ``summary`` (mean [95 % CI])."""

    records: list[dict]

    @property
    def results(self) -> pd.DataFrame:
        return results_frame(self.records)

    @property
    def summary(self) -> pd.DataFrame:
        rows = [{"model": r["model"], "dataset": r["dataset"], "eval": r["eval"], "metric": r["metric"],
                 "method": r.get("method"), "mean": r.get("mean"), "ci_low": (r.get("ci") or [None, None])[0],
                 "ci_high": (r.get("ci") or [None, None])[1], "n": r.get("n"), "n_undefined": r.get("n_undefined")}
                for r in self.records if "values" in r]
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        return self.summary.to_html(index=False, float_format=lambda v: f"{v:.4f}")


def results_frame(records: Sequence[dict]) -> pd.DataFrame:
    """Long format of records with a value per example: one row per (model, dataset, eval, metric, method,
    example). A record whose values are not per example (``values_per``: ``ln_outliers``' correlation is one
    per layer) has no rows here; its mean is in the record."""
    rows = [{"model": r["model"], "dataset": r["dataset"], "eval": r["eval"], "metric": r["metric"],
             "method": r.get("method"), "example": example, "value": value}
            for r in records if "values" in r and r.get("values_per", "example") == "example"
            and len(r["values"]) == len(r.get("example_ids", ()))
            for example, value in zip(r["example_ids"], r["values"])]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def evaluate(model, methods, evaluations: str | Sequence[str], dataset="sst2", *, n: Optional[int] = 100,
             seed: int = 0, split: Optional[str] = None, columns: Optional[Mapping[str, str]] = None,
             params: Optional[Mapping[str, dict]] = None, eval_params: Optional[Mapping[str, dict]] = None,
             dtype: str = "float32", device: str = "cpu", progress: Optional[bool] = None,
             published: bool = True) -> Scores:
    """Score ``methods`` with ``evaluations`` on a seeded sample of ``n`` examples of ``dataset`` (a name, a
    file, a DataFrame or a datasets.Dataset with ``columns``), as ``attrbench eval`` does.

    What every method's scores share (NAOPC's bounds, the random floors) is taken from the published runs in a
    clone of the repository (``reports/full``, ``reports/default``) where they hold it for the same weights,
    examples and parameters, and computed otherwise; ``published=False`` computes it all.

    >>> s = attrbench.evaluate("minilm-l6-sst2", ["alti", "random"], "erasure_aopc,naopc", "sst2", n=30)
    >>> s.summary, s.results
    """
    evaluations = [e.strip() for name in _strings(evaluations, "evaluations", "'erasure_aopc,naopc'")
                   for e in name.split(",")]
    n, seed = _whole(n, "n", 1, none=True), _whole(seed, "seed", 0)
    params, eval_params = _parameters(params, "method"), _parameters(eval_params, "evaluation")
    listed = _listed(methods)
    methods = listed if listed is not None else methods
    if (isinstance(methods, str) and methods.strip() == "all") or methods is None or (
            isinstance(methods, (str, list)) and not methods):
        # all: every method that fits; none: the analyses of the model, which take no method
        configured, names = [], "all" if methods else []
    else:
        configured = _methods(methods)
        names = [m.name for m in configured]
    adapter = _model(model, dtype, device)
    local = [m for m in configured if m.name not in METHODS.names() or METHODS.get(m.name) is not m]
    records = pipeline.evaluate(adapter, names, evaluations, as_dataset(dataset, columns), n=n, seed=seed,
                                split=split, progress=progress, method_params=dict(params or {}),
                                eval_params=dict(eval_params or {}), extra_methods=local, published=published)
    return Scores(records)


# -- leaderboard runs ---------------------------------------------------------------------------------------
@dataclass
class RunResults:
    """A run folder's results, read from its store: ``results`` (long DataFrame, every stored row), ``leaderboard``
    (the report's tables as DataFrames, by title: a method still being computed is left out until complete, and
    ``still_computing`` says which), ``statistics`` (ranks, groups, tests per table), ``meta`` and ``report()``."""

    run_dir: Path
    records: list[dict]
    meta: dict
    _tables: Optional[list] = field(default=None, repr=False)
    _held: Optional[dict] = field(default=None, repr=False)

    @property
    def results(self) -> pd.DataFrame:
        return results_frame(self.records)

    def _leaderboard_tables(self) -> list:
        if self._tables is None:
            self._tables, _, self._held = report_tables(self.records, self.meta.get("plan"),
                                                        self.meta["config"]["seed"])
        return self._tables

    @property
    def leaderboard(self) -> dict[str, pd.DataFrame]:
        return {t.title: t.frame for t in self._leaderboard_tables()}

    @property
    def statistics(self) -> dict[str, dict]:
        return {t.title: t.statistics for t in self._leaderboard_tables() if t.statistics}

    @property
    def still_computing(self) -> dict[str, dict[str, dict[str, int]]]:
        """What a growing run's tables leave out until it is complete, by table title: {method: {"examples": with
        rows, "of": planned}} (``random_floor``: the random floor), as the report's ``statistics.json`` has it; empty
        when every table is complete."""
        self._leaderboard_tables()
        return {table_title(*key): {m: {"examples": k, "of": n} for m, (k, n) in lagging.items()}
                for key, lagging in self._held.items()}

    @property
    def progress(self) -> Optional[str]:
        """How far each suite is from its planned n, and the CPU (or GPU) hours the rest would take at the measured
        cost per example; None when every planned example is scored."""
        self._leaderboard_tables()
        return progress_line(self.meta, self.records, self._held)

    def report(self, out: str | Path | None = None) -> dict:
        """Write ``leaderboard.md``, ``report.html``, ``statistics.json`` and the figures into ``out``; returns their
        paths. By default a run's folder gets them; a published folder (no run wrote it here, e.g.
        ``reports/default``) is left as it is and they go to ``attrbench-reports/<its name>``: pass
        ``out=run_dir`` to rewrite its own."""
        if out is None:
            out = self.run_dir if is_run_folder(self.run_dir) else Path("attrbench-reports") / self.run_dir.name
        return write_report(self.run_dir, out)

    def __repr__(self) -> str:
        n: dict[str, int] = {}
        for r in self.records:  # a suite's n: the most examples any of its metrics scored
            suite = f"{r['model']}|{r['dataset']}"
            n[suite] = max(n.get(suite, 0), r.get("n") or 0)
        methods = len({r["method"] for r in self.records})
        return (f"<RunResults {self.meta.get('config', {}).get('name', '?')!r} from {self.run_dir}: {methods} "
                f"methods, {len(self.records)} method × metric results; "
                + ", ".join(f"{s} n = {k}" for s, k in n.items()) + ">")

    def _repr_html_(self) -> str:
        tables = "".join(f"<h4>{html.escape(title)}</h4>{frame.to_html(index=False)}"
                         for title, frame in list(self.leaderboard.items())[:3])
        return f"<p>run <code>{html.escape(str(self.run_dir))}</code>: {len(self.results)} results</p>{tables}"


def load_run(run_dir: str | Path) -> RunResults:
    """The results of a run folder (e.g. ``reports/default``), from its store alone: no model is loaded.

    >>> r = attrbench.load_run("reports/default"); r.results.to_parquet("results.parquet")
    """
    records, meta = run_records.collect(run_dir)
    return RunResults(Path(run_dir), records, meta)


def run(config: str | Path | dict | None = None, run_dir: Optional[str | Path] = None, *,
        budget: Optional[str | float] = None, device: Optional[str] = None, extend: Optional[str | Path] = None,
        progress: Optional[bool] = None, report: bool = True) -> RunResults:
    """Run a leaderboard config (a path, a shipped name such as ``"default"``, or a dict) into ``run_dir``
    (default ``attrbench-runs/<name>``), as ``attrbench run`` does. A method of your own must be registered
    first (``@attrbench.register`` on its class): a config names methods. Returns the run's results (and
    writes its report unless ``report=False``).

    >>> r = attrbench.run({"name": "mine", "suite": [{"model": "tiny-bert", "dataset": "sva-generated", "n": 4,
    ...                    "methods": ["alti", "grad_l2"], "evals": ["erasure_aopc"]}]}, "runs/mine")
    >>> r.leaderboard
    """
    parsed = validate_config(json.loads(json.dumps(config))) if isinstance(config, dict) else read_config(config)
    folder = Path(run_dir) if run_dir is not None else Path("attrbench-runs") / parsed["name"]
    if device:
        parsed["device"] = device
    options = RunOptions(dtype=parsed["dtype"], device=parsed.get("device") or "cpu",
                         batch_tokens=parsed.get("batch_tokens"))
    pipeline.run_leaderboard(parsed, folder, options=options, progress=progress, budget=budget, extend=extend)
    if report:
        write_report(folder)
    return load_run(folder)
