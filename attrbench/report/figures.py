"""The report's figures: a table of named kinds that evaluations ask for (``Evaluation.figures``).

Each kind is ``kind(group, folder, stem, title) -> [(caption, path)]`` over the records of one
(model, dataset, evaluation). A new kind is one more entry in ``FIGURES``.

Within a report (:func:`attrbench.ops.reuse.reusing`) a figure whose inputs, drawing code and matplotlib are those of
the last rendering, and whose file is still the one drawn then, is not drawn again (:func:`cached`): adding a method
redraws the tables it enters, and the papers' analyses of the model, which no method changes, are kept.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import transforms as mtransforms
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator, NullFormatter

from ..decompose import Decomposition
from ..errors import InputError
from ..ops.reuse import active, key_of, source_digest
from ..ops.stats import median_iqr
from ..registry import EVALS
from . import drawer as drawer_module, plot as plot_module, scorecard as scorecard_module, tables as tables_module
from .plot import new_figure, pending_writer, plot_maps, save_figure
from .scorecard import cell_text
from .tables import Table, alias_label, aliased, groups, short, suite_title, table_title

# A suite's CD diagram and faithfulness-vs-cost figure stand side by side above its table, so that both fit one
# screen at 1280 px: each is half the page wide (561 px at 110 dpi), its title wrapped to fit.
HALF_PAGE_INCHES, HALF_PAGE_TITLE_CHARS = 5.1, 62


SAFE = str.maketrans({"/": "_", ":": "_"})  # a figure's file name from a path, or a dataset named with its split


def _file_digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def _by_rows(value, reuse):
    """A figure's input for its key, its records by their digests (each record digested once per rendering); a
    table by what a figure reads of it (its note and cells are words, which no figure draws: a note that says a
    method is still computing redraws nothing)."""
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return {"~rows": reuse.rows(value)}
    if isinstance(value, Table):
        return {"~table": [value.title, _by_rows(value.group, reuse), value.evaluation, value.statistics]}
    return value


def cached(draw):
    """A figure function whose figures are kept while its inputs and the drawing code are unchanged (module
    docstring); outside a report's reuse block it draws as it is."""
    signature = inspect.signature(draw)

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        reuse = active()
        if reuse is None:
            return draw(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        inputs = dict(bound.arguments)
        folder = Path(inputs.pop("folder"))
        try:
            code = [source_digest(module) for module in (drawer_module, plot_module, scorecard_module,
                                                         tables_module)]
            key = key_of(draw, code, {name: _by_rows(value, reuse) for name, value in inputs.items()})
        except TypeError:  # an input without a digest: drawn
            return draw(*args, **kwargs)

        def drawn() -> list:
            made = draw(*args, **kwargs)

            def entry(_=None) -> list:
                return [[caption, path.name, _file_digest(path)] for caption, path in made]

            writer = pending_writer()
            if writer is not None and made and writer.after(made[0][1], lambda _: reuse.put(key, entry())):
                return [[caption, path.name, None] for caption, path in made]  # its digests once written
            return entry()

        def intact(entry) -> bool:  # each file as drawn, here or (copied from there) in the folder reused from
            elsewhere = None if reuse.folder is None else reuse.folder / folder.name
            for _, name, sha in entry:
                if (folder / name).is_file() and _file_digest(folder / name) == sha:
                    continue
                if elsewhere is None or not (elsewhere / name).is_file() or _file_digest(elsewhere / name) != sha:
                    return False
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(elsewhere / name, folder / name)
            return True

        return [(caption, folder / name) for caption, name, _ in reuse.get(key, drawn, intact)]

    return wrapper


def _label(record: dict) -> str:
    return record.get("label") or record["method"]


def _ci_errors(rows: list[dict]) -> np.ndarray:
    """(2, k) distances from each mean to its CI ends (0 where there is no CI), for error bars."""
    return np.array([[r["mean"] - r["ci"][0], r["ci"][1] - r["mean"]] if r.get("ci") else [0.0, 0.0]
                     for r in rows]).T.reshape(2, len(rows))


@cached
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
        # residuals of 1e-4 would print as 0.000025 side by side: a few ticks, a power of ten beside the axis
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
    return [(title, save_figure(fig, folder / f"{stem}.png", title))]


@cached
def medians(group: list[dict], folder: Path, stem: str, title: str) -> list[tuple[str, Path]]:
    """Per metric, each method's median over its examples with the interquartile range: what a cost table reports
    (a mean's t-interval would reach below zero on skewed times and sizes). Two panels a row, so each stays
    readable at the page's width."""
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    cols = min(2, len(metrics))
    rows_of_panels = -(-len(metrics) // cols)
    height = 0.3 * len({_label(r) for r in group}) + 1.4
    fig, axes = new_figure((5.4 * cols, height * rows_of_panels), rows_of_panels, cols, squeeze=False)
    for ax in axes.flat[len(metrics):]:
        ax.axis("off")
    for ax, metric in zip(axes.flat, metrics):
        quartiles = sorted(((_label(r), np.percentile(np.asarray(r["values"], dtype=float), [25, 50, 75]))
                            for r in group if r["metric"] == metric and len(r.get("values") or ())),
                           key=lambda item: item[1][1])
        if not quartiles:
            ax.axis("off")
            continue
        q = np.array([v for _, v in quartiles])
        ax.errorbar(q[:, 1], [name for name, _ in quartiles], xerr=np.vstack([q[:, 1] - q[:, 0], q[:, 2] - q[:, 1]]),
                    fmt="o", ms=4, color="#4c72b0", ecolor="#555", capsize=2)
        if (q[:, 1] > 0).all() and q[:, 2].max() > 30 * q[:, 1].min():
            ax.set_xscale("log")  # costs span orders of magnitude across methods
        ax.set_title(f"{metric}: median [IQR]", fontsize=9)
        ax.tick_params(labelsize=7)
    return [(title, save_figure(fig, folder / f"{stem}.png", title))]


@cached
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


@cached
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


@cached
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
    """The mean-rank view of a ranked table (Demšar's critical-difference diagram, scikit-posthocs): average ranks on
    a line, methods within one Nemenyi group joined by a bar, the critical difference drawn to scale. Labelled as
    the mean-rank view: which pairs it joins depends on the other methods in the pool; the verdicts are pairwise.
    Kept while what it draws is unchanged (a method still computing changes the table's note, not this view)."""
    stats = table.statistics
    view = (stats or {}).get("mean_rank") or {}
    if view.get("verdict") not in ("ranked", "no difference found") or stats["k"] < 2:
        return []
    return _critical_difference(table.title, table.model, table.dataset, table.evaluation.name, view,
                                {k: stats[k] for k in ("alpha", "metric", "n")}, folder)


@cached
def _critical_difference(name: str, model: str, dataset: str, evaluation: str, view: dict, stats: dict,
                         folder: Path) -> list[tuple[str, Path]]:
    import scikit_posthocs as sp  # heavy (seaborn, statsmodels): only when a report is drawn

    ranks = pd.Series(view["average_rank"])
    order = list(ranks.sort_values().index)
    matrix = pd.DataFrame(1.0, index=order, columns=order)
    for pair, p in (view.get("nemenyi") or {}).items():
        a, b = pair.split(" vs ")
        matrix.loc[a, b] = matrix.loc[b, a] = 0.0 if p < stats["alpha"] else 1.0
    # labels alternate sides, so 0.14 in per method leaves 0.28 in between labels
    fig, ax = new_figure((HALF_PAGE_INCHES, 0.14 * len(order) + 1.6))
    sp.critical_difference_diagram(ranks, matrix, ax=ax, alpha=stats["alpha"], label_props={"fontsize": 8})
    for line in ax.lines:  # a crossbar's points come from a set (order varies by process): sorted, the same bytes
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        if len(x) > 1 and np.all(y == y[0]):
            line.set_data(np.sort(x), y)
    if view.get("cd"):  # drawn above the rank axis's tick labels (scikit-posthocs draws it across them)
        start, end = ranks.min(), ranks.min() + view["cd"]
        left, right = ax.get_xlim()
        ax.set_xlim(left, max(right, end))  # a CD wider than the ranks' span stays to scale, inside the figure
        above = mtransforms.offset_copy(ax.get_xaxis_transform(), fig=fig, y=20, units="points")
        ax.plot([start, end], [1, 1], transform=above, color="k", lw=2, clip_on=False)
        ax.text((start + end) / 2, 1, f"CD = {view['cd']:.2g}", transform=mtransforms.offset_copy(
            above, fig=fig, y=3, units="points"), ha="center", va="bottom", fontsize=8)
    title = (f"{name}: mean-rank view of {stats['metric']} (n = {stats['n']}, "
             f"{'Nemenyi CD %.2f' % view['cd'] if view.get('cd') else view['verdict']}; depends on the pool, "
             "not the verdicts)")
    stem = f"{short(model)}-{short(dataset)}-{evaluation}-{stats['metric']}-cd".translate(SAFE)
    return [(title, save_figure(fig, folder / f"{stem}.png", textwrap.fill(title, HALF_PAGE_TITLE_CHARS)))]


TIER_COLOURS = ("#c44e52", "#dd8452", "#4c72b0", "#55a868", "#8172b3", "#937860")
FLOOR_MARKS = {"better": ("▲", "#2a7a2a"), "not separated": ("●", "#777777"), "worse": ("▼", "#b22222")}


def verdicts(table: Table, folder: Path) -> list[tuple[str, Path]]:
    """The pairwise verdicts of a ranked table at a glance: each method's mean with its 95 % interval, best at the
    top, coloured by its group (from the pairwise tests), the random floor's mean as a dashed line, and each
    method's verdict against the floor (▲ better, ● not separated, ▼ worse) at the right. Drawn from the ranked
    methods only (a provisional one is in no group), and kept while what it draws is unchanged."""
    stats = table.statistics
    if stats is None or not stats.get("order"):
        return []
    by_method = {r["method"]: r for r in table.group if r["metric"] == stats["metric"] and r["mean"] is not None}
    rows = [{"method": m, "mean": by_method[m]["mean"], "ci": by_method[m].get("ci")}
            for m in stats["order"] if m in by_method]
    if not rows:
        return []
    floors = {r["method"]: (stats.get("floor") or {}).get(r["method"], {}).get("verdict") for r in rows}
    shown = {"tier": stats.get("tier") or {}, "floor": floors,
             "floor_mean": (stats.get("floor_summary") or {}).get("mean"),
             "aliases": {r["method"]: alias_label(r["method"], stats) for r in rows},
             **{k: stats.get(k) for k in ("metric", "higher_is_better", "pair_n", "verdict")}}
    return _verdicts(table.title, table.model, table.dataset, table.evaluation.name, rows, shown, folder)


@cached
def _verdicts(name: str, model: str, dataset: str, evaluation: str, rows: list[dict], stats: dict, folder: Path
              ) -> list[tuple[str, Path]]:
    fig, ax = new_figure((HALF_PAGE_INCHES, 0.19 * len(rows) + 1.3))
    y = np.arange(len(rows))[::-1]
    tier = stats["tier"]
    colours = [TIER_COLOURS[(tier.get(r["method"], 0) - 1) % len(TIER_COLOURS)] if tier.get(r["method"])
               else "#888888" for r in rows]
    errors = _ci_errors(rows)
    for yi, r, colour, low, high in zip(y, rows, colours, errors[0], errors[1]):
        ax.errorbar(r["mean"], yi, xerr=[[low], [high]], fmt="o", ms=4, color=colour, ecolor=colour, capsize=2)
    ax.set_yticks(y, [stats["aliases"][r["method"]] for r in rows], fontsize=7)
    floor = stats["floor_mean"]
    if floor is not None:
        ax.axvline(floor, color="#555", ls="--", lw=1, label="random floor (expected score)")
        for yi, r in zip(y, rows):
            verdict = stats["floor"][r["method"]]
            if verdict in FLOOR_MARKS:
                mark, colour = FLOOR_MARKS[verdict]
                ax.text(1.01, yi, mark, transform=ax.get_yaxis_transform(), color=colour, fontsize=7, va="center")
        ax.legend(fontsize=7, loc="lower right" if stats["higher_is_better"] else "lower left")
    ax.set_xlabel(f"{stats['metric']} {'↑' if stats['higher_is_better'] else '↓'}, mean and 95 % CI", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    groups_shown = sorted({t for t in tier.values()})
    what = (f"groups {groups_shown[0]}–{groups_shown[-1]} by colour" if len(groups_shown) > 1 else
            "one group" if groups_shown else stats["verdict"])
    title = (f"{name}: {stats['metric']} (n = {stats['pair_n'][1] if stats.get('pair_n') else 0}; "
             f"pairwise Wilcoxon–Holm, {what}; ▲●▼ vs the random floor)")
    stem = f"{short(model)}-{short(dataset)}-{evaluation}-{stats['metric']}-verdicts"
    return [(title, save_figure(fig, folder / f"{stem.translate(SAFE)}.png",
                                textwrap.fill(title, HALF_PAGE_TITLE_CHARS)))]


LABEL_OFFSETS = ((4, 3, "left"), (4, -10, "left"), (-4, 3, "right"), (-4, -10, "right"), (0, 7, "center"),
                 (0, -14, "center"), (8, -3, "left"), (-8, -3, "right"))  # points from the marker, then alignment


def place_labels(fig, ax, points: list[tuple[float, float, str]]) -> list[str]:
    """Label each (x, y, name) in the first offset where its text overlaps no label placed before it and stays in
    the axes; a label that fits nowhere is left out. Returns the names left out (the table lists every method)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    placed, left_out = [], []
    frame = ax.get_window_extent(renderer)
    for x, y, name in points:
        for dx, dy, align in LABEL_OFFSETS:
            text = ax.annotate(name, (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points", ha=align)
            box = text.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            text.remove()
        else:
            left_out.append(name)
    return left_out


@cached
def faithfulness_vs_cost(table: Table, cost: dict[str, list], folder: Path) -> list[tuple[str, Path]]:
    """A suite's headline metric (mean with CI) against each method's median seconds per example (log axis, with
    the interquartile range), the Pareto front marked. Labelled: the front and the top group, where a label fits
    without overlapping another; the table beside it names every method."""
    stats = table.statistics
    metric, higher = stats["metric"], stats["higher_is_better"]
    dropped = aliased(stats)
    rows = [r for r in table.group if r["metric"] == metric and r["mean"] is not None and r["method"] in cost
            and r["method"] not in dropped and median_iqr(cost[r["method"]]) is not None]
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
    floor = (stats.get("floor_summary") or {}).get("mean")
    if floor is not None:
        ax.axhline(floor, color="#555", ls="--", lw=1, label="random floor (expected score)")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor log labels overlap
    ax.set_xlabel("seconds per example, median and IQR (log)")
    ax.set_ylabel(f"{metric} {'↑' if higher else '↓'}")
    ax.legend(fontsize=7, loc="lower right" if higher else "upper right")
    title = f"{suite_title(table.model, table.dataset)}: faithfulness vs cost (labelled: Pareto front, top group)"
    fig.suptitle(textwrap.fill(title, HALF_PAGE_TITLE_CHARS), fontsize=10)
    fig.tight_layout()  # the layout the labels are placed in (save_figure keeps it)
    top = set(stats.get("top") or [])
    named = [i for i in front] + [i for i, r in enumerate(rows) if r["method"] in top and i not in front]
    place_labels(fig, ax, [(x[i], rows[i]["mean"], rows[i]["method"]) for i in named])
    stem = f"{short(table.model)}-{short(table.dataset)}-pareto".translate(SAFE)
    return [(title, save_figure(fig, folder / f"{stem}.png", textwrap.fill(title, HALF_PAGE_TITLE_CHARS)))]


FIGURES = {"bars": bars, "medians": medians, "cost": cost, "per_layer": per_layer, "heatmaps": heatmaps}


def make_figures(records: list[dict], folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Every figure the evaluations of these records ask for, by the title of the table they go with."""
    folder.mkdir(parents=True, exist_ok=True)
    figures: dict[str, list[tuple[str, Path]]] = {}
    for (model, dataset, eval_name), group in groups(records).items():
        stem = f"{short(model)}-{short(dataset)}-{eval_name}".translate(SAFE)
        title = table_title(model, dataset, eval_name)
        for kind in EVALS.get(eval_name).figures:
            if kind not in FIGURES:
                raise InputError(f"evaluation '{eval_name}' asks for figure kind '{kind}'; known: {', '.join(FIGURES)}")
            figures.setdefault(title, []).extend(FIGURES[kind](group, folder, stem, title))
    return figures


# Okabe & Ito's colour-blind-safe palette: the scorecard's cells by the headline verdict, with the text in each cell
SCORECARD_COLOURS = {"top": "#0072B2", "better": "#56B4E9", "not separated": "#E69F00", "worse": "#D55E00",
                     "unranked": "#DDDDDD"}


def _scorecard_kind(cell: dict) -> str:
    if cell["group"] is None:
        return "unranked"
    if cell["floor"] == "better":
        return "top" if cell["group"] == 1 else "better"
    return cell["floor"] if cell["floor"] in ("not separated", "worse") else "unranked"


@cached
def scorecard_figure(frame: pd.DataFrame, data: dict, folder: Path) -> list[tuple[str, Path]]:
    """The scorecard as a grid: a row per method, a column per suite, each cell coloured by its headline verdict
    (top group and better than the floor; another group, better; not separated from the floor; worse; unranked) and
    holding the table's text for that cell (drawn in a size that fits its width)."""
    suites = list(frame.columns[1:])
    if not suites or frame.empty:
        return []
    order = data["order"]
    methods = {c["label"]: m for suite in data["cells"].values() for m, c in suite.items()}
    width = 14.0
    fig, ax = new_figure((width, 0.26 * len(order) + 1.6))
    ax.set_xlim(0, len(suites))
    ax.set_ylim(len(order), 0)
    for i, label in enumerate(order):
        method = methods[label]
        for j, suite in enumerate(suites):
            cell = data["cells"][suite].get(method)
            kind = "unranked" if cell is None else _scorecard_kind(cell)
            ax.add_patch(Rectangle((j + 0.01, i + 0.05), 0.98, 0.9, color=SCORECARD_COLOURS[kind], lw=0))
            ax.text(j + 0.5, i + 0.5, cell_text(cell), ha="center", va="center", fontsize=6.5,
                    color="white" if kind in ("top", "worse") else "black")
    ax.set_yticks(np.arange(len(order)) + 0.5, order, fontsize=7)
    ax.set_xticks(np.arange(len(suites)) + 0.5, suites, fontsize=7.5)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in SCORECARD_COLOURS.values()]
    ax.legend(handles, ["top group, better than the floor", "another group, better than the floor",
                        "not separated from the floor", "worse than the floor", "not ranked"],
              fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.01), frameon=False)
    title = ("scorecard: the headline metric's group and floor verdict (colour), top groups among the voting metrics, "
             "the known answer (K), the sanity check, the own axiom and the cost per suite")
    return [(title, save_figure(fig, folder / "scorecard.png", textwrap.fill(title, 160)))]
