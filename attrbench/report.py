"""Comparison reports of a run: ``leaderboard.md`` and a self-contained ``report.html`` with figures.

Both are generated from the run's store only (``attrbench report RUN_DIR``), so a report can be
rebuilt anywhere. An incomplete run raises instead of producing a report that looks complete.
Published numbers of the source papers are shown beside ours where they exist, marked as from
their (different) models.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np
import pandas as pd

from .decompose import Decomposition, scopes_for
from .plot import _save, plot_maps
from .results import write_atomic
from .runs import collect

PRIMARY = {"faithfulness_corr": "spearman", "erasure_aopc": "comprehensiveness_aopc", "timing": "seconds_per_example"}


def _fmt(mean, std, digits=3) -> str:
    if mean is None:
        return "undefined"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _groups(records: list[dict]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["model"], r["dataset"], r["eval"]), []).append(r)
    return groups


def _analysis_table(eval_name: str, group: list[dict]) -> pd.DataFrame:
    rows = []
    for r in group:
        layers = r.get("per_layer")
        flat = isinstance(layers, list) and layers and not isinstance(layers[0], (list, dict))
        if flat:
            per_layer = " ".join("-" if v is None else f"{v:.2f}" for v in layers)
        elif eval_name == "ff_amp":  # top pairs per layer: "to ← from (score)"
            per_layer = "; ".join(f"L{k}: " + ", ".join(f"{p['to']} ← {p['from']} ({p['ff_amp']:.2f})" for p in top[:2])
                                  for k, top in enumerate(layers))
        else:
            per_layer = ""
        row = {"view / scope": f"{r['view']} ({r['method']})" if r.get("view") else r["method"], "metric": r["metric"],
               "mean ± std": _fmt(r["mean"], r["std"]), "n": r["n"], "per layer": per_layer}
        if r.get("published_bert_base") is not None:
            row["published (BERT-base, another model)"] = f"{r['published_bert_base']:.3f}"
        if r.get("published"):
            row["published (BERT-base / GPT-2)"] = r["published"]
        rows.append(row)
    return pd.DataFrame(rows)


def _method_table(group: list[dict], timing: dict, model: str, dataset: str, eval_name: str) -> tuple:
    primary = PRIMARY.get(eval_name, group[0]["metric"])
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    better = {r["metric"]: r.get("higher_is_better", True) for r in group}
    label = {m: m + (" ↑" if better[m] else " ↓") for m in metrics}
    rows: dict[str, dict] = {}
    for r in group:
        row = rows.setdefault(r["method"], {"method": r["method"]})
        row[label[r["metric"]]] = _fmt(r["mean"], r["std"])
        row["_" + r["metric"]] = r["mean"]
        row["n"] = r["n"]
        row["undefined"] = row.get("undefined", 0) + r.get("n_undefined", 0)
        if r.get("published_bert") is not None:
            row["published (BERT, another model)"] = f"{r['published_bert']:.2f}"
        if eval_name != "timing":
            seconds = timing.get((model, dataset, r["method"], "seconds_per_example"))
            peak = timing.get((model, dataset, r["method"], "peak_mb"))
            row["s / example"] = "" if seconds is None else f"{seconds['mean']:.3f}"
            row["peak MB"] = "" if peak is None or peak["mean"] is None else f"{peak['mean']:.0f}"
    frame = pd.DataFrame(rows.values())
    key = primary if "_" + primary in frame else metrics[0]
    frame = frame.sort_values("_" + key, ascending=not better[key], na_position="last", kind="stable")
    columns = ["method", *label.values(), "n"]
    columns += [c for c in ("undefined", "published (BERT, another model)", "s / example", "peak MB")
                if c in frame and frame[c].fillna("").astype(str).str.strip().replace("0", "").any()]
    frame = frame[columns]
    frame.insert(0, "rank", range(1, len(frame) + 1))
    reference = next((r.get("reference") for r in group if r.get("reference")), None)
    note = f"ranked by {key}" + (f"; reference method: {reference}" if reference else "")
    if group[0].get("rank"):
        note += f"; Spearman ranks: {group[0]['rank']}"
    if "undefined" in frame:
        note += "; undefined = examples with constant scores (no Spearman), left out of the mean"
    return frame, note


def leaderboard_tables(records: list[dict]) -> list[tuple[str, pd.DataFrame, str]]:
    """(title, table, note) per (model, dataset, evaluation); methods ranked by the primary metric."""
    from .registry import EVALS

    timing = {(r["model"], r["dataset"], r["method"], r["metric"]): r for r in records if r["eval"] == "timing"}
    tables = []
    for (model, dataset, eval_name), group in _groups(records).items():
        title = f"{model} · {dataset} · {eval_name}"
        if not EVALS.get(eval_name).needs_methods:
            tables.append((title, _analysis_table(eval_name, group), "analysis of the model itself"))
        else:
            tables.append((title, *_method_table(group, timing, model, dataset, eval_name)))
    return tables


def markdown_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else str(v) for v in row]
                                                 for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in cells[0]) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])


def _provenance_lines(meta: dict) -> list[str]:
    config, versions = meta["config"], meta.get("versions") or {}
    lines = [f"- config `{config['name']}` (sha256 {meta['config_hash'][:12]}…), seed {config['seed']}, "
             f"dtype {config['dtype']}, {meta['unit_count']} units, executor {meta.get('executor')}",
             f"- started {meta.get('started')}, finished {meta.get('finished')}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())]
    return lines + [model_line(name, model) for name, model in (meta.get("models") or {}).items()]


def model_line(name: str, model: dict) -> str:
    """A model's provenance: its weights' hash; for a task model also the base model's and its training."""
    own, base = model.get("loaded_weights_sha256") or {}, model.get("weights_sha256")
    line = f"- model `{name}`: {model.get('model_source')}"
    if own:  # task models and local folders: the weights as loaded, then the zoo model they came from
        line += ", weights sha256 " + ", ".join(f"{sha[:12]}…" for sha in own.values())
        line += f" (base model {base[:12]}…)" if base else ""
    elif base:
        line += f", weights sha256 {base[:12]}…"
    training = model.get("training")
    if training:
        accuracy = training.get("dev_accuracy", training.get("test_accuracy"))
        line += f"; trained locally {training.get('built')}, accuracy {accuracy:.3f}"
    return line


# -- figures ---------------------------------------------------------------------------------
def _bars(group: list[dict], path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    metrics = list(dict.fromkeys(r["metric"] for r in group))
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 0.35 * len({r["method"] for r in group}) + 1.6),
                             squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        rows = [r for r in group if r["metric"] == metric and r["mean"] is not None]
        rows.sort(key=lambda r: r["mean"])
        ax.barh([r["method"] for r in rows], [r["mean"] for r in rows], xerr=[r["std"] for r in rows],
                color="#4c72b0", ecolor="#555", capsize=3)
        published = [(r["method"], r["published_bert"]) for r in rows if r.get("published_bert") is not None]
        if published:
            ax.scatter([p for _, p in published], [m for m, _ in published], marker="D", color="#c44e52", zorder=3,
                       label="published (BERT, another model)")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_title(metric, fontsize=9)
        ax.tick_params(labelsize=8)
    return _save(fig, path, title)


def _cost(group: list[dict], path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in group:
        if r["metric"] != "seconds_per_example":
            continue
        rows = sorted(r["per_example"], key=lambda x: x["n_tokens"])
        ax.plot([x["n_tokens"] for x in rows], [x["seconds"] for x in rows], "o-", ms=3, lw=0.8, label=r["method"])
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("seconds per example")
    ax.legend(fontsize=6, ncol=2)
    return _save(fig, path, title)


def _per_layer(group: list[dict], path: Path, title: str, label_key: str = "metric") -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in group:
        layers = r.get("per_layer")
        if not isinstance(layers, list) or not layers or isinstance(layers[0], (list, dict)):
            continue
        ax.plot(range(len(layers)), [np.nan if v is None else v for v in layers], "o-", ms=3,
                label=str(r.get(label_key) or r["metric"]))
    ax.set_xlabel("layer")
    ax.legend(fontsize=7)
    return _save(fig, path, title)


def _mixing(group: list[dict], path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [f"{r.get('view')}\n({r['method']})" for r in group]
    ax.bar(names, [r["mean"] for r in group], yerr=[r["std"] for r in group], color="#4c72b0", capsize=3,
           label="ours")
    ax.scatter(names, [r["published_bert_base"] for r in group], marker="D", color="#c44e52", zorder=3,
               label="published, BERT-base (another model)")
    ax.set_ylabel("mixing ratio")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    return _save(fig, path, title)


def _maps(record: dict, folder: Path, stem: str) -> list[Path]:
    paths = []
    for k, kept in enumerate(record.get("examples_kept", [])):
        series = scopes_for("atb_ln" in kept["maps"])[3:]  # atb through the whole layer
        maps = {s: np.array(kept["maps"][s]) for s in series}
        dec = Decomposition(model=record["model"], tokens=kept["tokens"], layers=kept["layers"], maps=maps,
                            residuals=kept["residuals"], value_bias=kept["value_bias"], dtype=kept["dtype"])
        for layer in kept["layers"]:
            paths.append(plot_maps(dec, folder / f"{stem}-ex{k}-layer{layer}.png", layer=layer,
                                   title=f"{record['model']} — {kept['id']} — layer {layer}: "
                                         + " → ".join(series)))
    return paths


def make_figures(records: list[dict], folder: Path) -> list[tuple[str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for (model, dataset, eval_name), group in _groups(records).items():
        stem = f"{model}-{dataset}-{eval_name}".replace("/", "_")
        title = f"{model} · {dataset} · {eval_name}"
        if eval_name == "timing":
            figures.append((title + " (cost vs n)", _cost(group, folder / f"{stem}-cost.png", title)))
            figures.append((title, _bars(group, folder / f"{stem}.png", title)))
        elif eval_name in ("faithfulness_corr", "erasure_aopc"):
            figures.append((title, _bars(group, folder / f"{stem}.png", title)))
        elif eval_name == "mixing_ratio":
            figures.append((title, _mixing(group, folder / f"{stem}.png", title)))
        elif eval_name in ("context_change", "res_ff_norms", "ln_outliers"):
            figures.append((title + " (per layer)", _per_layer(group, folder / f"{stem}.png", title)))
        elif eval_name == "example_maps":
            figures += [(title, p) for p in _maps(group[0], folder, stem)]
    return figures


# -- documents -------------------------------------------------------------------------------
def write_report(run_dir: str | Path) -> dict:
    """Write ``leaderboard.md``, ``report.html`` and ``figures/`` into the run folder."""
    run_dir = Path(run_dir)
    records, meta = collect(run_dir)
    tables = leaderboard_tables(records)
    figures = make_figures(records, run_dir / "figures")
    md = [f"# attrbench leaderboard: {meta['config']['name']}", "", *_provenance_lines(meta), "",
          "Values are mean ± std over examples. Published numbers are from the papers' own models (BERT-base "
          "family), not from these models: they are context, not a comparison.", ""]
    for title, frame, note in tables:
        md += [f"## {title}", "", f"_{note}_", "", markdown_table(frame), ""]
    md += ["## Figures", ""] + [f"![{t}](figures/{p.name})" for t, p in figures]
    write_atomic(run_dir / "leaderboard.md", "\n".join(md) + "\n")
    body = [f"<h1>attrbench leaderboard: {html.escape(meta['config']['name'])}</h1>",
            "<ul>" + "".join(f"<li>{html.escape(line[2:])}</li>" for line in _provenance_lines(meta)) + "</ul>",
            "<p>Values are mean ± std over examples. Published numbers are from the papers' own models "
            "(BERT-base family), not from these models.</p>"]
    for title, frame, note in tables:
        body += [f"<h2>{html.escape(title)}</h2>", f"<p><em>{html.escape(note)}</em></p>",
                 frame.to_html(index=False, classes="leaderboard", border=0)]
    body.append("<h2>Figures</h2>")
    for title, path in figures:
        data = base64.b64encode(path.read_bytes()).decode()
        body.append(f"<figure><img alt=\"{html.escape(title)}\" src=\"data:image/png;base64,{data}\">"
                    f"<figcaption>{html.escape(title)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
             "table.leaderboard{border-collapse:collapse;margin-bottom:1em;font-size:13px}"
             "table.leaderboard td,table.leaderboard th{border:1px solid #ccc;padding:3px 8px}"
             "img{max-width:100%}figure{margin:1em 0}")
    page = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>attrbench: "
            f"{html.escape(meta['config']['name'])}</title><style>{style}</style></head><body>"
            + "\n".join(body) + "</body></html>")
    write_atomic(run_dir / "report.html", page)
    return {"leaderboard": run_dir / "leaderboard.md", "html": run_dir / "report.html", "tables": len(tables),
            "figures": len(figures)}
