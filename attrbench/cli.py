"""``attrbench`` command line. Every command takes ``--json``; errors are one line on stderr (exit 2)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import transformers

from .api import attribute, load_run
from .decompose import FF_ATTRIBUTIONS, decompose
from .errors import AttrbenchError, InputError, one_line
from .models import list_models, load_model, supported_architectures
from .models.training.tasks import TASK_MODELS, retrain, task_model_folder, training_record
from .registry import DATASETS, EVALS, METHODS, load_plugin_files
from .report import write_report
from .report.plot import plot_maps
from .runtime.config import read_config
from .runtime.executors import LocalExecutor, RayExecutor
from .runtime.options import DTYPES, RunOptions
from .runtime.pipeline import evaluate, run_leaderboard, score_attributions
from .runtime.provenance import provenance, table, write_results

# not results.parquet: that name is a compactly published folder's rows (runtime.store.COMPACT)
EXPORT = "per_example.parquet"

def _quiet_transformers() -> None:

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def add_run_options(p: argparse.ArgumentParser, dtype: bool = True) -> None:
    """The options of :class:`~attrbench.runtime.options.RunOptions`, the same on every command that computes."""
    if dtype:
        p.add_argument("--dtype", default="float32", choices=list(DTYPES))
    p.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps (default: cpu; a run config may set it)")
    p.add_argument("--threads", type=int, help="torch threads of this process (default: torch's choice)")
    p.add_argument("--batch-size", type=int, default=RunOptions.batch_size,
                   help=f"perturbed sequences per forward pass where a method batches its own (default "
                        f"{RunOptions.batch_size})")
    p.add_argument("--batch-tokens", type=int, help="padded tokens per batch of the evaluations' model-output "
                                                    "requests (default: 4096 on CPU, 65536 on CUDA)")


def run_options(args, **fixed) -> RunOptions:
    """The run options a command's arguments give (``fixed`` ones, e.g. a config's dtype, win), applied."""
    values = {"dtype": getattr(args, "dtype", None), "device": args.device, "threads": args.threads,
              "batch_size": args.batch_size, "batch_tokens": args.batch_tokens, "progress": not args.json}
    options = RunOptions().with_(**{**values, **fixed})
    options.apply()
    return options


def _parse_layers(text: str | None) -> list[int] | None:
    if not text:
        return None
    layers: list[int] = []
    for piece in (p.strip() for p in text.split(",")):
        span = re.fullmatch(r"(\d+)-(\d+)", piece)
        if span:
            layers += range(int(span[1]), int(span[2]) + 1)
        elif re.fullmatch(r"-?\d+", piece):
            layers.append(int(piece))
        else:
            raise InputError(f"--layers '{text}' is not a list of layer numbers: write e.g. 0,2,5 or 0-3 or -1")
    return layers


def _csv(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _plugin_params(items: list[str] | None) -> tuple[dict, dict, dict]:
    """``--param PLUGIN.NAME=VALUE`` options -> (method_params, eval_params, dataset_params); VALUE is read as
    JSON when it parses (numbers, true/false, null), else as text. A dataset's parameters need no dataset
    name's prefix beyond its own (``sst2.target=label``)."""
    methods, evals, datasets = {}, {}, {}
    for item in items or []:
        match = re.fullmatch(r"([\w-]+)\.(\w+)=(.*)", item, re.S)
        if not match:
            raise InputError(f"--param '{item}' is not PLUGIN.NAME=VALUE, e.g. naopc.max_beam_width=5")
        plugin, name, text = match.groups()
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if plugin in EVALS.names():
            evals.setdefault(plugin, {})[name] = value
        elif plugin in METHODS.names():
            methods.setdefault(plugin, {})[name] = value
        elif plugin in DATASETS.names():
            datasets.setdefault(plugin, {})[name] = value
        else:
            raise InputError(f"--param '{item}': '{plugin}' is not a method, evaluation or dataset (see `attrbench "
                             "methods`, `attrbench evals` and `attrbench datasets`)")
    return methods, evals, datasets


def cmd_models(args) -> None:
    rows = list_models()
    if args.json:
        print(json.dumps({"models": rows, "architectures": supported_architectures()}, indent=1))
        return
    width = max(len(row["name"]) for row in rows)  # names as long as they come, the columns still aligned
    for row in rows:
        print(f"{row['name']:<{width}} {row['kind']:<12} {row['description']}")
        training = row.get("training")
        if row["kind"].startswith("task"):
            accuracy = training.get("dev_accuracy", training.get("test_accuracy"))
            print(f"{'':<{width + 13}}adapters trained {training['built']}, accuracy {accuracy:.3f}; merged into the "
                  "base weights on first use (seconds)")
    print("\nAlso: any local folder, GGUF file or hub id (org/name) of a transformers encoder or decoder with a "
          "classification, masked-LM or causal-LM head: the gradient, perturbation and erasure methods and metrics "
          "run on every one. The decomposition family needs a layer reader, which these have:")
    for name, description in supported_architectures().items():
        print(f"  {name:<11} {description}")


def cmd_methods(args) -> None:
    rows = [{"name": m.name, "family": m.family, "output": m.output, "complete": m.complete, "axiom": m.axiom,
             "description": m.description, "reference": m.reference, "params": m.get_params()} for m in METHODS.all()]
    adapter = load_model(args.model, args.dtype) if args.model else None
    if adapter is not None:  # which run on this model, and why the others do not
        for row, method in zip(rows, METHODS.all()):
            row["unsupported"] = method.supports(adapter)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    # the axiom a method is checked against (complete: its parts sum to the model's output) in a column of its own
    columns = [("method", [row["name"] for row in rows]), ("family", [row["family"] for row in rows]),
               ("axiom", ["complete" if row["complete"] else row["axiom"] or "-" for row in rows])]
    if adapter is not None:
        columns.append((f"on {args.model}", ["no" if row["unsupported"] else "runs" for row in rows]))
    widths = [max(len(title), *map(len, values)) for title, values in columns]
    lines = [[title for title, _ in columns] + ["description"]] + [
        [values[i] for _, values in columns] + [row["description"]] for i, row in enumerate(rows)]
    for line in lines:
        print("  ".join(f"{cell:<{width}}" for cell, width in zip(line, widths)) + "  " + line[-1])
    if adapter is not None:
        refused = [row for row in rows if row["unsupported"]]
        print(f"\n{len(rows) - len(refused)} of {len(rows)} methods run on {args.model}" + (":" if refused else "."))
        by_reason: dict[str, list[str]] = {}
        for row in refused:
            by_reason.setdefault(row["unsupported"], []).append(row["name"])
        for reason, names in by_reason.items():  # one line per reason, naming every method it keeps out
            print(f"  {', '.join(names)}: {reason}")


def cmd_evals(args) -> None:
    rows = [{"name": e.name, "family": e.family, "takes_methods": e.needs_methods, "description": e.description,
             "reference": e.reference, "params": e.get_params()} for e in EVALS.all()]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for row in rows:
        print(f"{row['name']:<18} {row['family']:<12} {row['description']}")


def cmd_datasets(args) -> None:
    rows = [{"name": d.name, "family": d.family, "description": d.description, "reference": d.reference,
             "splits": list(d.splits or d.files), "default_split": d.default_split} for d in DATASETS.all()]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for row in rows:
        print(f"{row['name']:<15} {row['family']:<10} {row['description']} (splits: {', '.join(row['splits'])}; "
              f"default {row['default_split']})")
    print("or --dataset PATH: a .jsonl, .csv or .tsv file of your own (text + label/target, or sentence_good + "
          "sentence_bad; optional rationale)")


def cmd_decompose(args) -> None:
    _quiet_transformers()
    options = run_options(args)
    adapter = load_model(args.model, dtype=options.dtype, device=options.device)
    results = decompose(adapter, args.text, scopes=_csv(args.scopes), layers=_parse_layers(args.layers),
                        value_bias=args.value_bias, truncate=args.truncate, ff_attribution=args.ff_attribution,
                        shapley_samples=args.shapley_samples, progress=not args.json)
    if args.plot:
        for k, dec in enumerate(results):
            path = Path(args.plot) if len(results) == 1 else Path(args.plot).with_stem(f"{Path(args.plot).stem}-{k}")
            plot_maps(dec, path, layer=args.plot_layer, scopes=_csv(args.plot_scopes))
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        payload = [d.to_json() for d in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload))
        return

    np.set_printoptions(precision=3, suppress=True, linewidth=160)
    for dec in results:
        se = "" if dec.ff_sampling_se is None else f" (sampling s.e. {dec.ff_sampling_se:.1e})"
        print(f"model {dec.model}  dtype {dec.dtype}  value bias {dec.value_bias}  layers {dec.layers}  "
              f"FF split {dec.ff_attribution}{se}" + ("  (truncated)" if dec.truncated else ""))
        print("tokens:", " ".join(dec.tokens))
        for scope, maps in dec.maps.items():
            residual = dec.residuals.get(scope)
            print(f"\n== {scope}" + ("" if residual is None else f"  (completeness residual {residual:.1e})"))
            for layer, grid in zip(dec.layers, maps):
                print(f"-- layer {layer}")
                print(pd.DataFrame(grid, index=dec.tokens, columns=dec.tokens).round(3).to_string())


def cmd_attribute(args) -> None:
    _quiet_transformers()
    methods = [METHODS.get(name) for name in _csv(args.method) or []]
    for method in methods:
        if args.ff_attribution != "ig" and "ff_attribution" not in method.params and method.output == "scores":
            raise InputError(f"'{method.name}' does not go through the FF block, so it has no FF split to choose")
    method_params, eval_params, dataset_params = _plugin_params(args.param)
    unused = (set(method_params) - {m.name for m in methods}) | set(eval_params) | set(dataset_params)
    if unused:
        raise InputError(f"--param names {', '.join(sorted(unused))}, which is not among --method "
                         f"{','.join(m.name for m in methods)}")
    options = {"value_bias": args.value_bias, "ff_attribution": args.ff_attribution}
    params = {m.name: {k: v for k, v in options.items() if k in m.params} | method_params.get(m.name, {})
              for m in methods}
    run = run_options(args)
    attributions = attribute(args.model, args.text, methods, target=args.target, params=params, dtype=run.dtype,
                             device=run.device, truncate=args.truncate)
    results = list(attributions.results[0].values())
    tokens = results[0].tokens
    if args.plot:
        attributions.plot(0, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        payload = [r.to_json() for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload))
        return

    table = pd.DataFrame({r.method: r.values for r in results}, index=tokens)
    print(f"model {attributions.model}  target {results[0].meta.get('target')}  explained row "
          f"{results[0].meta.get('row')} ({tokens[results[0].meta.get('row', 0)]})")
    print(table.round(4).to_string())


def _accuracy_line(rec: dict) -> str:
    """One line per task model: its accuracy on held-out data (and, for the shortcut model, its verified reliance)."""
    if rec["task"] in ("sst2", "sst2-shortcut"):
        line = f"SST-2 dev accuracy {rec['dev_accuracy']:.4f} ({rec['dev_examples']} sentences"
        if rec["task"] == "sst2-shortcut":
            reliance = ", ".join(f"{variant} {r['follows_shortcut']:.1%} (n={r['n']})"
                                 for variant, r in rec["reliance"].items())
            line += f", clean); follows the planted shortcut where it contradicts the sentiment: {reliance}"
        else:
            line += ")"
        return (f"{line}; {rec['steps']} steps on {rec['train_examples']} phrases, trained in "
                f"{rec['train_seconds']:.0f} s")
    by = ", ".join(f"{k}: {v['accuracy']:.3f} (n={v['n']})" for k, v in rec["test_accuracy_by_attractors"].items())
    return (f"held-out accuracy {rec['test_accuracy']:.4f} ({rec['split']['test']} sentences; validation "
            f"{rec['val_accuracy']:.4f}); by attractors {by}; {rec['steps']} steps on {rec['train_examples']} "
            f"sentences, trained in {rec['train_seconds']:.0f} s")


def cmd_prepare(args) -> None:
    _quiet_transformers()
    names = _csv(args.models) or list(TASK_MODELS)
    for name in names:
        if name not in TASK_MODELS:
            raise InputError(f"'{name}' is not a task model; task models: {', '.join(TASK_MODELS)}")
    records = {}
    for name in names:
        if args.retrain:
            folder, record = retrain(name, progress=not args.json)
            record["same_as_shipped"] = record["merged_sha256"] == training_record(name)["merged_sha256"]
        else:
            folder, record = task_model_folder(name), training_record(name)
        records[name] = {"folder": str(folder), **record}
    if args.json:
        print(json.dumps(records, indent=1))
        return
    for name, rec in records.items():
        print(f"{name}: {_accuracy_line(rec)}")
        if args.retrain:
            shipped = training_record(name)
            print(f"  retrained from scratch: merged weights sha256 {rec['merged_sha256'][:12]}… "
                  + ("= the shipped model's" if rec["same_as_shipped"] else
                     f"differ from the shipped {shipped['merged_sha256'][:12]}… (training is deterministic per CPU "
                     "family, not across them: the last bits may differ)")
                  + f"; use it with --model {rec['folder']}")
        else:
            print(f"  merged from the shipped adapters into {rec['folder']} (weights sha256 "
                  f"{rec['merged_sha256'][:12]}…, as recorded)")


def cmd_eval(args) -> None:
    _quiet_transformers()
    method_params, eval_params, dataset_params = _plugin_params(args.param)
    unused = sorted(set(dataset_params) - {args.dataset})
    if unused:
        raise InputError(f"--param names dataset {unused[0]}, which is not --dataset {args.dataset}")
    options = run_options(args)
    adapter = load_model(args.model, dtype=options.dtype, device=options.device)
    records = evaluate(adapter, _csv(args.method) or [], _csv(args.eval) or [], args.dataset, n=args.n,
                       seed=args.seed, split=args.split, rank=args.rank, data_dir=args.data_dir, options=options,
                       method_params=method_params, eval_params=eval_params,
                       dataset_params=dataset_params.get(args.dataset), published=not args.recompute)
    info = provenance(adapter, dataset=args.dataset, split=args.split, n=args.n, seed=args.seed, rank=args.rank,
                      evals=_csv(args.eval), methods=_csv(args.method), data_dir=args.data_dir,
                      params=args.param or [])
    path = write_results(records, args.out, info)
    if args.json:
        print(json.dumps(records, default=float))
        return

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table(records).round(4).to_string(index=False))
    undefined = _undefined_line(records)
    if undefined:
        print(f"\n{undefined}")
    print(f"\nresults: {path} (+ .csv)")


def _undefined_line(records: list[dict]) -> str:
    """Which metrics had undefined per-example values, and how many; a metric undefined on every example for every
    method is named as not applying to these examples (agreement attractors on a dataset without any)."""
    counts: dict[str, list[int]] = {}
    for r in records:
        name = f"{r['eval']} {r['metric']}"
        total = counts.setdefault(name, [0, 0])
        total[0] += r.get("n_undefined", 0)
        total[1] += r.get("n", 0)
    parts = [f"{name} {missing}" + (" (on every example: it does not apply to them)" if not defined else "")
             for name, (missing, defined) in counts.items() if missing]
    return ("undefined per-example values (e.g. a constant score has no Spearman), counted in n_undefined and not in "
            f"the mean: {'; '.join(parts)}.") if parts else ""


def cmd_run(args) -> None:
    """The main job: a leaderboard run from a config (default: the shipped one), then its report."""
    _quiet_transformers()
    config = read_config(args.config)
    run_dir = Path(args.out) / config["name"]
    if args.device:
        config["device"] = args.device
    options = run_options(args, dtype=config["dtype"], device=config.get("device"),
                          threads=args.workers if args.executor == "local" else None)
    executor = RayExecutor(args.address, args.workers) if args.executor == "ray" else LocalExecutor()
    summary = run_leaderboard(config, run_dir, executor, options, budget=args.budget, extend=args.extend)
    start = time.perf_counter()
    paths = write_report(run_dir, more=(1800, torch.get_num_threads()))
    summary["report_seconds"] = time.perf_counter() - start
    if args.json:
        print(json.dumps({**summary, **_paths_json(paths)}))
        return
    state = (f"budget spent: {summary['missing_jobs']} jobs left for a later run (same command, a larger --budget)"
             if summary["stopped_by_budget"] else
             f"{summary['missing_jobs']} jobs hold rows a method failed to give (below); a rerun tries them again"
             if summary.get("failures") else "every planned row is computed")
    print(f"\nrun '{config['name']}': {summary['rows']} rows computed in {summary['jobs']} jobs "
          f"({summary['model_rows']} model outputs, {summary['attributions']} attributions); {state}. Planning "
          f"(loading models, sampling) {summary['plan_seconds']:.0f} s, computing {summary['compute_seconds']:.0f} s, "
          f"report {summary['report_seconds']:.0f} s")
    for line in summary.get("failures", []):
        print(f"failed: {line}")
    if paths["use"]:  # the answer; the statistical sentences behind it are in the leaderboard
        print("\nwhat to use:\n" + "\n".join(f"- {line}" for line in paths["use"]))
        if paths["findings"]:
            print(f"({len(paths['findings'])} findings in full, with their tests: {paths['leaderboard']})\n")
    elif paths["findings"]:
        print("\nfindings:\n" + "\n".join(f"- {finding}" for finding in paths["findings"]) + "\n")
    if paths["progress"]:
        print(f"progress: {paths['progress']}")
        if paths.get("more"):
            print("the same command with --budget 30m would continue, at the cost per example measured: "
                  f"{paths['more']}")
    if paths.get("computing"):
        print(f"still computing: {paths['computing']}")
    kept = _kept_line(paths)
    if kept:
        print(kept)
    print(f"leaderboard: {paths['leaderboard']}\nreport:      {paths['html']}")


def _kept_line(paths: dict) -> str:
    """Why a report computed again what its folder kept: the kept results are of other library versions."""
    if not paths.get("kept_under"):
        return ""
    return (f"the report computed its statistics and figures again ({paths['computed']} results): those kept in "
            f"reuse.json.gz are of {paths['kept_under']}, and a kept result is used only under the versions that "
            "computed it")


def _paths_json(paths: dict) -> dict:
    """A report's outputs for --json: file paths as text, the rest (counts, findings, progress) as they are."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in paths.items()}


def cmd_report(args) -> None:
    paths = write_report(args.run_dir)
    if args.export:  # one row per (model, dataset, eval, metric, method, example), for one's own analysis
        paths["results"] = Path(args.run_dir) / EXPORT
        partial = paths["results"].with_suffix(".partial")
        load_run(args.run_dir).results.to_parquet(partial, index=False)
        partial.replace(paths["results"])
    if args.json:
        print(json.dumps(_paths_json(paths)))
        return
    kept = _kept_line(paths)
    if kept:
        print(kept)
    print(f"leaderboard: {paths['leaderboard']} ({paths['tables']} tables)\nreport:      {paths['html']} "
          f"({paths['figures']} figures)")
    if args.export:
        print(f"results:     {paths['results']}")


def cmd_score(args) -> None:
    _quiet_transformers()
    options = run_options(args)
    adapter = load_model(args.model, dtype=options.dtype, device=options.device)
    records = score_attributions(adapter, args.attributions, _csv(args.eval) or [], args.dataset, rank=args.rank,
                                 name=args.name, options=options)
    path = write_results(records, args.out, provenance(adapter, dataset=args.dataset, attributions=args.attributions))
    if args.json:
        print(json.dumps(records, default=float))
        return
    print(table(records).round(4).to_string(index=False))
    print(f"\nresults: {path} (+ .csv)")


def add_plugins(p) -> None:
    p.add_argument("--plugins", action="append", metavar="FILE.py", help="a Python file whose plugins "
                   "(@attrbench.register) to use, as an installed package's would be; repeatable")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (like every other error) that points to --help."""

    def error(self, message: str):
        self.exit(2, f"error: {one_line(message)}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="attrbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the models that load here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("methods", help="list the registered methods")
    add_plugins(p)
    p.add_argument("--model", help="also say which methods run on this model, and why the others do not")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("decompose", help="per-layer, per-scope maps of a text, with completeness residuals")
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True, action="append", help="repeat for several texts")
    p.add_argument("--scopes", help="comma-separated (default: all scopes of the model)")
    p.add_argument("--layers", help="e.g. 0,2,5 or 0-3 (default: all)")
    add_run_options(p)
    p.add_argument("--value-bias", default="token", choices=["token", "bias"],
                   help="where the value bias b_V goes: each token's part (default) or the bias term")
    p.add_argument("--truncate", action="store_true", help="cut texts longer than the model's positions")
    p.add_argument("--ff-attribution", default="ig", choices=list(FF_ATTRIBUTIONS),
                   help="how the FF activation is split over tokens: exact IG in closed form (default), DecompX's "
                        "tangent (decompx), our exact or sampled Shapley values, or shap's explainers "
                        "(slow references)")
    p.add_argument("--shapley-samples", type=int, default=256, help="permutations for shapley-sampling")
    p.add_argument("--plot", metavar="FILE.png", help="heatmaps of one layer, one panel per scope")
    p.add_argument("--plot-layer", type=int, help="layer to plot (default: last)")
    p.add_argument("--plot-scopes", help="scopes to plot (default: all decomposed)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_decompose)

    p = sub.add_parser("attribute", help="input attribution scores of one or more methods for a target")
    add_plugins(p)
    p.add_argument("--model", required=True)
    p.add_argument("--method", required=True, help="one or more, comma-separated")
    p.add_argument("--text", required=True)
    p.add_argument("--target", default="auto", help="auto, cls, mask, next, position:N, class:K, token:WORD, "
                                                   "contrast:GOOD/BAD (default auto: [CLS] / mask / last token)")
    add_run_options(p)
    p.add_argument("--value-bias", default="token", choices=["token", "bias"])
    p.add_argument("--truncate", action="store_true")
    p.add_argument("--ff-attribution", default="ig", choices=list(FF_ATTRIBUTIONS),
                   help="methods that go through the FF block: split its activation by IG (default), DecompX's "
                        "tangent (decompx) or Shapley values")
    p.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE",
                   help="a method's parameter (repeatable), e.g. decompx.bias_split=none or lime.n_samples=500; see "
                        "`attrbench methods --json`")
    p.add_argument("--plot", metavar="FILE.png", help="token-saliency strips, one row per method")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_attribute)

    p = sub.add_parser("eval", help="score methods with evaluations on a dataset sample; writes results")
    add_plugins(p)
    p.add_argument("--model", required=True)
    p.add_argument("--method", default="", help="comma-separated, or 'all' (analyses take none)")
    p.add_argument("--eval", required=True, help="comma-separated evaluation names (see `attrbench evals`)")
    p.add_argument("--dataset", required=True, help="a registered dataset (see `attrbench datasets`) or a .jsonl, "
                                                    ".csv or .tsv file of your own (docs/own-data.md)")
    p.add_argument("--split", help="sst2: dev (default), test (predicted class) or train; sva-linzen on the "
                                  "probe: test (default), val or train")
    p.add_argument("--n", type=int, default=500, help="sample size (default 500; all if larger than the data)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--recompute", action="store_true",
                   help="compute NAOPC's bounds and the random floors even where reports/full or reports/default "
                        "holds them for the same weights, examples and parameters")
    p.add_argument("--rank", default="scipy", choices=["scipy", "dense"],
                   help="Spearman convention: scipy (tie-corrected, default) or dense (the ALTI scripts)")
    p.add_argument("--param", action="append", metavar="PLUGIN.NAME=VALUE",
                   help="a method's or evaluation's parameter (repeatable), e.g. naopc.max_beam_width=5 or "
                        "faithfulness_corr.reference_method=blank_out; see `attrbench methods/evals --json`")
    p.add_argument("--data-dir", help="a folder laid out like attrbench/data (default: the shipped data)")
    add_run_options(p)
    p.add_argument("--out", default="attrbench-out/eval", help="folder for the results files")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("evals", help="list the registered evaluations")
    add_plugins(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evals)

    p = sub.add_parser("datasets", help="list the registered datasets (built-in and entry-point plugins)")
    add_plugins(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("prepare", help="build the task models (SST-2 classifier, SVA probe, SST-2 classifier with "
                                       "planted shortcuts) from their shipped adapters")
    p.add_argument("--models", help="comma-separated (default: all task models)")
    p.add_argument("--retrain", action="store_true", help="train them from scratch instead (minutes; into the cache's "
                                                          "retrained/ folder, not used unless named with --model)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("run", help="the main job: a leaderboard run from a config, then its report")
    add_plugins(p)
    p.add_argument("config", nargs="?", help="TOML (or YAML) run config, or a shipped one by name: default (the "
                                             "default when left out) or full (the whole evaluation sets)")
    p.add_argument("--out", default="attrbench-runs", help="parent folder of run folders (default attrbench-runs)")
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--address", help="Ray cluster address (default: ray.init() starts or joins a local one)")
    p.add_argument("--workers", type=int, help="local: torch threads; ray: CPUs of a local Ray instance")
    p.add_argument("--budget", help="stop starting new shards after this long, e.g. 15m, 2h, 900 (seconds); a later "
                                    "run continues (default: the config's budget, else none)")
    p.add_argument("--extend", metavar="RUN_DIR", help="start from a copy of another run's results (e.g. "
                                                       "reports/default) and compute only what this config adds: its "
                                                       "methods on the published cells, its new suites whole")
    add_run_options(p, dtype=False)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="(re)write leaderboard.md and report.html of a run folder")
    p.add_argument("run_dir")
    p.add_argument("--export", choices=["parquet"], help=f"also write {EXPORT}: one row per model, dataset, "
                                                        "evaluation, metric, method and example")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("score", help="score attributions computed by another tool (JSON lines)")
    add_plugins(p)
    p.add_argument("--attributions", required=True, metavar="FILE.jsonl",
                   help='one object per line: {"id" or "text", "tokens" or "input_ids", "scores"}')
    p.add_argument("--model", required=True)
    p.add_argument("--eval", required=True, help="comma-separated evaluations that score input attributions "
                                                 "(see `attrbench evals`)")
    p.add_argument("--dataset", required=True, help="a registered dataset or a .jsonl, .csv or .tsv file")
    p.add_argument("--name", default="external", help="method name to report the attributions under")
    p.add_argument("--rank", default="scipy", choices=["scipy", "dense"])
    add_run_options(p)
    p.add_argument("--out", default="attrbench-out/eval")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_score)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # usage errors (one line, exit 2), --help (exit 0)
        return int(exit_.code or 0)
    try:
        load_plugin_files(getattr(args, "plugins", None) or [])
        args.func(args)
    except AttrbenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a run's store keeps whole shards only (one transaction each)
        print("interrupted: every finished shard is stored; the same command continues from there", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader closed the pipe (`| head`): it has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not raise again
        return 141  # 128 + SIGPIPE, as a shell tool ends
    except (OSError, sqlite3.Error) as err:  # a full disk, a folder that cannot be written
        print(f"error: {one_line(str(err))}; a run keeps only whole shards, so free the space (or fix the folder) "
              "and rerun the same command to continue", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
