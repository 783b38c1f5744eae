"""The report's figures: a table of named kinds that evaluations ask for (``Evaluation.figures``).

Each kind is ``kind(group, folder, stem, title) -> [(caption, path)]`` over the records of one
(model, dataset, evaluation). A new kind is one more entry in ``FIGURES``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from ..decompose import Decomposition
from ..errors import InputError
from ..plugin.registry import EVALS
from .plot import plot_maps, save_figure
from .tables import faithfulness_records, groups, short, table_title


def _label(record: dict) -> str:
    return record.get("label") or record["method"]


def _ci_errors(rows: list[dict]) -> np.ndarray:
    """(2, k) distances from each mean to its CI ends (0 where there is no CI), for error bars."""
    return np.array([[r["mean"] - r["ci"][0], r["ci"][1] - r["mean"]] if r.get("ci") else [0.0, 0.0]
                     for r in rows]).T.reshape(2, len(rows))


def bars(group: list[dict], folder: Path, stem: str, title: str) -> list[tuple[str, Path]]:
    """Per metric, mean with its 95 % CI per method (or view), with published values as diamonds."""

    metrics = list(dict.fromkeys(r["metric"] for r in group))
    height = 0.35 * len({_label(r) for r in group}) + 1.6
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), height), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        rows = sorted((r for r in group if r["metric"] == metric and r["mean"] is not None), key=lambda r: r["mean"])
        ax.barh([_label(r) for r in rows], [r["mean"] for r in rows], xerr=_ci_errors(rows),
                color="#4c72b0", ecolor="#555", capsize=3)
        published = [(_label(r), r["published"]) for r in rows if r.get("published")]
        if published:
            sources = ", ".join(dict.fromkeys(p["source"] for _, p in published))
            ax.scatter([p["value"] for _, p in published], [name for name, _ in published], marker="D",
                       color="#c44e52", zorder=3, label=f"published: {sources}")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_title(metric, fontsize=9)
        ax.tick_params(labelsize=8)
    return [(title, save_figure(fig, folder / f"{stem}.png", title))]


def cost(group: list[dict], folder: Path, stem: str, title: str) -> list[tuple[str, Path]]:
    """Seconds per example against sequence length, one line per method (records with per-example rows)."""

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in group:
        rows = r.get("per_example") or []
        if not rows or not isinstance(rows[0], dict) or "seconds" not in rows[0] or r["metric"] != "seconds_per_example":
            continue
        rows = sorted(rows, key=lambda x: x["n_tokens"])
        ax.plot([x["n_tokens"] for x in rows], [x["seconds"] for x in rows], "o-", ms=3, lw=0.8, label=r["method"])
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("seconds per example")
    ax.legend(fontsize=6, ncol=2)
    caption = f"{title} (cost vs n)"
    return [(caption, save_figure(fig, folder / f"{stem}-cost.png", title))]


def per_layer(group: list[dict], folder: Path, stem: str, title: str) -> list[tuple[str, Path]]:
    """One line per record with a flat ``per_layer`` list."""

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in group:
        layers = r.get("per_layer")
        if not isinstance(layers, list) or not layers or isinstance(layers[0], (list, dict)):
            continue
        ax.plot(range(len(layers)), [np.nan if v is None else v for v in layers], "o-", ms=3, label=r["metric"])
    ax.set_xlabel("layer")
    ax.legend(fontsize=7)
    return [(f"{title} (per layer)", save_figure(fig, folder / f"{stem}.png", title))]


def heatmaps(group: list[dict], folder: Path, stem: str, title: str) -> list[tuple[str, Path]]:
    """Side-by-side maps of the kept examples (``examples_kept``: tokens, layers, maps, series)."""
    out = []
    for record in group:
        for k, kept in enumerate(record.get("examples_kept", [])):
            series = kept["series"]
            dec = Decomposition(model=record["model"], tokens=kept["tokens"], layers=kept["layers"],
                                maps={s: np.array(kept["maps"][s]) for s in series}, residuals=kept["residuals"],
                                value_bias=kept["value_bias"], dtype=kept["dtype"])
            for layer in kept["layers"]:
                path = plot_maps(dec, folder / f"{stem}-ex{k}-layer{layer}.png", layer=layer,
                                 title=f"{record['model']} — {kept['id']} — layer {layer}: " + " → ".join(series))
                out.append((title, path))
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the (cost, quality) points no other point beats on both (lower cost, higher quality)."""
    return [i for i, (c, q) in enumerate(points)
            if not any(c2 <= c and q2 >= q and (c2, q2) != (c, q) for c2, q2 in points)]


def faithfulness_vs_cost(records: list[dict], folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Per suite: each faithfulness evaluation's primary metric against seconds per example (log axis),
    both with their CIs, the Pareto front marked. Cost is the first cost column an evaluation declares."""

    out: dict[str, list[tuple[str, Path]]] = {}
    for (model, dataset), group in faithfulness_records(records).items():
        cost_records = {r["method"]: r for r in records if (r["model"], r["dataset"]) == (model, dataset)
                        and list(EVALS.get(r["eval"]).cost_columns)[:1] == [r["metric"]] and r["mean"]}
        panels = []
        for eval_name in dict.fromkeys(r["eval"] for r in group):
            evaluation = EVALS.get(eval_name)
            metric = evaluation.primary_metric or group[0]["metric"]
            rows = [r for r in group if r["eval"] == eval_name and r["metric"] == metric
                    and r["mean"] is not None and r["method"] in cost_records]
            if len(rows) >= 2:
                panels.append((eval_name, metric, evaluation.higher_is_better.get(metric, True), rows))
        if not panels:
            continue

        cols = min(2, len(panels))  # two a row: the figure shows at its own size in the report
        rows_n = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(5.3 * cols, 4.2 * rows_n), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.axis("off")
        for ax, (eval_name, metric, higher, rows) in zip(axes.flat, panels):
            costs = [cost_records[r["method"]] for r in rows]
            ax.errorbar([c["mean"] for c in costs], [r["mean"] for r in rows], xerr=_ci_errors(costs),
                        yerr=_ci_errors(rows), fmt="o", ms=4, color="#4c72b0", ecolor="#999", capsize=2)
            front = pareto_front([(c["mean"], r["mean"] if higher else -r["mean"]) for c, r in zip(costs, rows)])
            front = sorted(front, key=lambda i: costs[i]["mean"])
            ax.plot([costs[i]["mean"] for i in front], [rows[i]["mean"] for i in front], "-o", color="#c44e52",
                    ms=6, lw=1.2, label="Pareto front", zorder=3)
            for c, r in zip(costs, rows):
                ax.annotate(r["method"], (c["mean"], r["mean"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # minor log labels overlap
            ax.set_xlabel("seconds per example (log)")
            ax.set_ylabel(f"{metric} {'↑' if higher else '↓'}")
            ax.set_title(eval_name, fontsize=9)
            ax.legend(fontsize=7)
        title = f"{short(model)} · {short(dataset)} · faithfulness vs cost"
        stem = f"{short(model)}-{short(dataset)}-pareto".replace("/", "_")
        out[title] = [(title, save_figure(fig, folder / f"{stem}.png", title))]
    return out


FIGURES = {"bars": bars, "cost": cost, "per_layer": per_layer, "heatmaps": heatmaps}


def make_figures(records: list[dict], folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Every figure the evaluations of these records ask for, by the title of the table they go with."""
    folder.mkdir(parents=True, exist_ok=True)
    figures: dict[str, list[tuple[str, Path]]] = {}
    for (model, dataset, eval_name), group in groups(records).items():
        stem = f"{short(model)}-{short(dataset)}-{eval_name}".replace("/", "_")
        title = table_title(model, dataset, eval_name)
        for kind in EVALS.get(eval_name).figures:
            if kind not in FIGURES:
                raise InputError(f"evaluation '{eval_name}' asks for figure kind '{kind}'; known: {', '.join(FIGURES)}")
            figures.setdefault(title, []).extend(FIGURES[kind](group, folder, stem, title))
    return figures
