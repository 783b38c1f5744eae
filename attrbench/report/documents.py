"""The run's documents: ``leaderboard.md`` and a self-contained ``report.html`` with figures.

Both are generated from the run's store only (``attrbench report RUN_DIR``), which the report reads and
never writes, so a report can be rebuilt anywhere. An incomplete run raises instead of producing a report
that looks complete.
Published numbers of the source papers are shown beside ours where they exist, marked as from
their (different) models.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from ..ops.stats import RESAMPLES
from ..runtime.pipeline import collect
from ..runtime.provenance import write_atomic
from .figures import faithfulness_vs_cost, make_figures
from .tables import CI_NOTE, TIER_NOTE, agreement_tables, headline_table, leaderboard_tables, markdown_table


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


def write_report(run_dir: str | Path) -> dict:
    """Write ``leaderboard.md``, ``report.html`` and ``figures/`` into the run folder."""
    run_dir = Path(run_dir)
    records, meta = collect(run_dir)
    tables = leaderboard_tables(records)
    statistics = {title: stats for title, _, _, stats in tables if stats}
    write_atomic(run_dir / "statistics.json", json.dumps(statistics, indent=1))
    figures = make_figures(records, run_dir / "figures")
    sections = []  # (title, table, note, figures): the headline first, then each table with its figures
    headline = headline_table(records, statistics)
    if headline:
        pareto = faithfulness_vs_cost(records, run_dir / "figures")
        sections.append(("Headline: which method is most faithful, and at what cost", *headline,
                         [f for group in pareto.values() for f in group]))
    sections += [(title, frame, note, []) for title, frame, note in agreement_tables(records)]
    sections += [(title, frame, note, figures.get(title, [])) for title, frame, note, _ in tables]
    shown = {path.name for *_, pictures in sections for _, path in pictures}
    for stale in (run_dir / "figures").glob("*.png"):  # left by an earlier rendering of this folder
        if stale.name not in shown:
            stale.unlink()
    ci_note = CI_NOTE.format(resamples=meta["config"].get("bootstrap_resamples", RESAMPLES))
    explain = [f"{ci_note[0].upper()}{ci_note[1:]}.", f"{TIER_NOTE[0].upper()}{TIER_NOTE[1:]}; p-values in "
               "statistics.json."]
    if any(r.get("published") for r in records):
        explain.append("Published numbers are from the papers' own models (BERT-base family, GPT-2), not from "
                       "these models: they are context, not a comparison.")
    md = [f"# attrbench leaderboard: {meta['config']['name']}", "", *_provenance_lines(meta), "",
          *[line for text in explain for line in (text, "")]]
    for title, frame, note, pictures in sections:
        md += [f"## {title}", "", f"_{note}_", "", markdown_table(frame), ""]
        md += [line for caption, path in pictures for line in (f"![{caption}](figures/{path.name})", "")]
    write_atomic(run_dir / "leaderboard.md", "\n".join(md) + "\n")
    body = [f"<h1>attrbench leaderboard: {html.escape(meta['config']['name'])}</h1>",
            "<ul>" + "".join(f"<li>{html.escape(line[2:])}</li>" for line in _provenance_lines(meta)) + "</ul>",
            *[f"<p>{html.escape(text)}</p>" for text in explain]]
    for title, frame, note, pictures in sections:
        body += [f"<h2>{html.escape(title)}</h2>", f"<p><em>{html.escape(note)}</em></p>",
                 "<div class=\"scroll\">" + frame.to_html(index=False, classes="leaderboard", border=0, na_rep="")
                 + "</div>"]  # a wide table scrolls inside the page instead of widening it
        for caption, path in pictures:
            data = base64.b64encode(path.read_bytes()).decode()
            body.append(f"<figure><img alt=\"{html.escape(caption)}\" src=\"data:image/png;base64,{data}\">"
                        f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
             "table.leaderboard{border-collapse:collapse;margin-bottom:1em;font-size:13px}"
             "table.leaderboard td,table.leaderboard th{border:1px solid #ccc;padding:3px 8px}"
             "img{max-width:100%}figure{margin:1em 0}div.scroll{overflow-x:auto}")
    page = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>attrbench: "
            f"{html.escape(meta['config']['name'])}</title><style>{style}</style></head><body>"
            + "\n".join(body) + "</body></html>")
    write_atomic(run_dir / "report.html", page)
    return {"leaderboard": run_dir / "leaderboard.md", "html": run_dir / "report.html", "tables": len(sections),
            "figures": sum(len(pictures) for *_, pictures in sections)}
