"""The report's figures: a table of named kinds that evaluations ask for (``Evaluation.figures``).

Each kind is ``kind(group, folder, stem, title) -> [(caption, path)]`` over the records of one
(model, dataset, evaluation). A new kind is one more entry in ``FIGURES``.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import transforms as mtransforms
from matplotlib.ticker import NullFormatter

from ..decompose import Decomposition
from ..errors import InputError
from ..ops.stats import median_iqr
from ..registry import EVALS
from .plot import new_figure, plot_maps, save_figure
from .tables import Table, groups, short, suite_title, table_title

# A suite's CD diagram and faithfulness-vs-cost figure stand side by side above its table, so that both fit one
# screen at 1280 px: each is half the page wide (561 px at 110 dpi), its title wrapped to fit.
HALF_PAGE_INCHES, HALF_PAGE_TITLE_CHARS = 5.1, 62


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
    fig, axes = new_figure((5 * len(metrics), height), 1, len(metrics), squeeze=False)
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

    fig, ax = new_figure((7, 4.5))
    for r in group:
        rows = r.get("per_example") or []
        if (not rows or not isinstance(rows[0], dict) or "seconds" not in rows[0]
                or r["metric"] != "seconds_per_example"):
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

    fig, ax = new_figure((7, 4))
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


def critical_difference(table: Table, folder: Path) -> list[tuple[str, Path]]:
    """Demšar's critical-difference diagram of a ranked table (scikit-posthocs): average ranks on a line,
    methods in one Nemenyi group joined by a bar, the critical difference drawn to scale."""
    import scikit_posthocs as sp  # heavy (seaborn, statsmodels): only when a report is drawn

    stats = table.statistics
    if stats is None or stats["verdict"] not in ("ranked", "no difference found") or stats["k"] < 2:
        return []
    order = stats["order"]
    if stats["verdict"] == "ranked":
        significant = {tuple(pair.split(" vs ")): p < stats["alpha"] for pair, p in stats["nemenyi"].items()}
    else:
        significant = {}
    matrix = pd.DataFrame(1.0, index=order, columns=order)
    for (a, b), different in significant.items():
        matrix.loc[a, b] = matrix.loc[b, a] = 0.0 if different else 1.0
    # labels alternate sides, so 0.14 in per method leaves 0.28 in between labels
    fig, ax = new_figure((HALF_PAGE_INCHES, 0.14 * len(order) + 1.6))
    ranks = pd.Series(stats["average_rank"])
    sp.critical_difference_diagram(ranks, matrix, ax=ax, alpha=stats["alpha"], label_props={"fontsize": 8})
    if stats.get("cd"):  # drawn above the rank axis's tick labels (scikit-posthocs draws it across them)
        start, end = ranks.min(), ranks.min() + stats["cd"]
        left, right = ax.get_xlim()
        ax.set_xlim(left, max(right, end))  # a CD wider than the ranks' span stays to scale, inside the figure
        above = mtransforms.offset_copy(ax.get_xaxis_transform(), fig=fig, y=20, units="points")
        ax.plot([start, end], [1, 1], transform=above, color="k", lw=2, clip_on=False)
        ax.text((start + end) / 2, 1, f"CD = {stats['cd']:.2g}", transform=mtransforms.offset_copy(
            above, fig=fig, y=3, units="points"), ha="center", va="bottom", fontsize=8)
    title = (f"{table.title}: average rank by {stats['metric']} (n = {stats['n']}, "
             f"{'Nemenyi CD %.2f' % stats['cd'] if stats.get('cd') else stats['verdict']})")
    stem = f"{short(table.model)}-{short(table.dataset)}-{table.evaluation.name}-cd".replace("/", "_")
    return [(title, save_figure(fig, folder / f"{stem}.png", textwrap.fill(title, HALF_PAGE_TITLE_CHARS)))]


def faithfulness_vs_cost(table: Table, cost: dict[str, list], folder: Path) -> list[tuple[str, Path]]:
    """A suite's headline metric (mean with CI) against each method's median seconds per example (log axis, with
    the interquartile range), the Pareto front marked."""
    metric, higher = table.statistics["metric"], table.statistics["higher_is_better"]
    rows = [r for r in table.group if r["metric"] == metric and r["mean"] is not None and r["method"] in cost
            and median_iqr(cost[r["method"]]) is not None]
    if len(rows) < 2:
        return []
    spans = [median_iqr(cost[r["method"]]) for r in rows]
    x = np.array([s[0] for s in spans])
    fig, ax = new_figure((HALF_PAGE_INCHES, 4.6))
    ax.errorbar(x, [r["mean"] for r in rows], xerr=np.array([[s[0] - s[1], s[2] - s[0]] for s in spans]).T,
                yerr=_ci_errors(rows), fmt="o", ms=4, color="#4c72b0", ecolor="#aaa", capsize=2)
    front = pareto_front([(c, r["mean"] if higher else -r["mean"]) for c, r in zip(x, rows)])
    front = sorted(front, key=lambda i: x[i])
    ax.plot([x[i] for i in front], [rows[i]["mean"] for i in front], "-o", color="#c44e52", ms=6, lw=1.2,
            label="Pareto front (no method is both cheaper and better)", zorder=3)
    for c, r in zip(x, rows):
        ax.annotate(r["method"], (c, r["mean"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor log labels overlap
    ax.set_xlabel("seconds per example, median and IQR (log)")
    ax.set_ylabel(f"{table.evaluation.name}: {metric} {'↑' if higher else '↓'}")
    ax.legend(fontsize=7)
    title = f"{suite_title(table.model, table.dataset)}: faithfulness vs cost"
    stem = f"{short(table.model)}-{short(table.dataset)}-pareto".replace("/", "_")
    return [(title, save_figure(fig, folder / f"{stem}.png", textwrap.fill(title, HALF_PAGE_TITLE_CHARS)))]


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
