"""The scorecard: which method to trust on each suite, at a glance, from the same statistics as the tables.

One row per method (aliases merged), one column per suite. A cell reads, in order:

* the headline metric's group (1 is the top) and the verdict against the random floor: ``▲`` better, ``=`` not
  separated, ``▼`` worse; then how many of the suite's voting metrics put the method in their top group (``3/5``);
* ``K`` and the known answer's group and floor verdict, where the suite has a known answer;
* the sanity check: ``✓`` passes, ``✗`` flagged as insensitive to the model, ``?`` unchecked (no value: e.g. scores
  constant on the re-initialised model);
* ``ax✓`` / ``ax✗``: the method meets / fails its own axiom (completeness, efficiency, conservation);
* the median seconds per example.

A method with fewer examples than the table's others is provisional (``*``): in no group until it has them, its floor
verdict from its own family of comparisons (:func:`attrbench.report.tables.placements`).
Rows are ordered by the mean headline group over the suites that rank the method, then by its median cost.

The recommendation per suite follows one rule (:func:`recommend`), which docs/reading-a-leaderboard.md spells out
and the referee recomputes: *use* the cheapest methods (at most three) of the best known-answer group that holds a
method which beats the floor by the headline metric, is not flagged by the sanity check (and passes it where the
suite runs one), meets its own axiom where it claims one and is not provisional; a suite without a known answer, or
whose known answer does not rank the methods, takes the headline's groups instead, and says so. *Avoid* the methods
not better than the floor by the headline metric or flagged by the sanity check (a provisional one is not judged
yet). *The metrics disagree on* the
methods in some but not all voting metrics' top groups.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from .tables import Table, alias_label, aliased, listing, suite_title

FLOOR_MARK = {"better": "▲", "not separated": "=", "worse": "▼"}
SANITY_MARK = {"passes": "✓", "flagged": "✗", "unchecked": "?"}
USE_AT_MOST = 3


def _group(stats: Optional[dict], method: str) -> Optional[int]:
    if not stats or stats.get("verdict") not in ("ranked", "one method"):
        return None
    tier = (stats.get("tier") or {}).get(method)
    return int(tier) if tier is not None else None


def _floor(stats: Optional[dict], method: str) -> Optional[str]:
    return ((stats or {}).get("floor") or {}).get(method, {}).get("verdict")


def cells(headline: Table, truth: Optional[Table], panel: list[dict], sanity: dict, checks: dict,
          seconds: dict[str, list]) -> dict[str, dict]:
    """Per method kept by the headline's aliases, its scorecard entry on one suite (what the cell says, as data)."""
    stats = headline.statistics
    dropped = aliased(stats)
    votes = [e for e in panel if e["vote"]]
    n_by = stats.get("n_by_method") or {}
    most = max(n_by.values(), default=0)
    out = {}
    placed = stats.get("provisional") or {}
    for method in [*stats.get("order", []), *placed]:
        if method in dropped or method == stats.get("reference"):
            continue
        flag = sanity.get(method)
        check = checks.get(method)
        cost = [s for s in seconds.get(method, []) if s is not None]
        out[method] = {
            "label": alias_label(method, stats),
            "group": _group(stats, method), "floor": _floor(stats, method),
            "votes": sum(method in (e["statistics"].get("top") or []) for e in votes), "voters": len(votes),
            "known_group": _group(truth.statistics, method) if truth is not None else None,
            "known_floor": _floor(truth.statistics, method) if truth is not None else None,
            "has_known": truth is not None,
            "sanity": None if flag is None else {True: "flagged", False: "passes"}.get(flag[0], "unchecked"),
            "axiom": None if check is None else bool(check["passes"]),
            "seconds": float(np.median(cost)) if cost else None,
            "provisional": method in placed or bool(most and n_by.get(method, most) < most),
            "n": placed[method]["n"] if method in placed else n_by.get(method),
        }
        if method in placed:  # short of the headline's examples: no group, its floor verdict its own family's
            truth_placed = ((truth.statistics or {}).get("provisional") or {}).get(method) if truth else None
            out[method].update(floor=(placed[method].get("floor") or {}).get("verdict"), votes=0,
                               known_floor=((truth_placed or {}).get("floor") or {}).get("verdict"))
    return out


def cell_text(entry: Optional[dict]) -> str:
    if entry is None:
        return "–"
    parts = [("–" if entry["group"] is None else str(entry["group"])) + FLOOR_MARK.get(entry["floor"], "")
             + ("*" if entry["provisional"] else "") + (f" {entry['votes']}/{entry['voters']}" if entry["voters"]
                                                         else "")]
    if entry["has_known"]:
        parts.append("K" + ("–" if entry["known_group"] is None else str(entry["known_group"]))
                     + FLOOR_MARK.get(entry["known_floor"], ""))
    if entry["sanity"] is not None:
        parts.append(SANITY_MARK[entry["sanity"]])
    if entry["axiom"] is not None:
        parts.append("ax✓" if entry["axiom"] else "ax✗")
    if entry["seconds"] is not None:
        parts.append(f"{entry['seconds']:.2g} s")
    return " · ".join(parts)


def order(card: dict[str, dict[str, dict]]) -> list[str]:
    """Methods by their mean headline group over the suites that rank them, then by median cost (unranked last)."""
    methods = list(dict.fromkeys(m for suite in card.values() for m in suite))

    def key(method):
        groups = [s[method]["group"] for s in card.values() if method in s and s[method]["group"] is not None]
        costs = [s[method]["seconds"] for s in card.values() if method in s and s[method]["seconds"] is not None]
        return (np.mean(groups) if groups else np.inf, np.median(costs) if costs else np.inf, method)

    return sorted(methods, key=key)


def recommend(entries: dict[str, dict], ranked: bool, n: int, runs_sanity: bool) -> dict:
    """The rule of the module docstring applied to one suite's entries."""
    if not ranked:
        return {"ranked": False, "n": n}
    by_known = any(e["known_group"] is not None for e in entries.values())  # a known answer that ranks them

    def trusted(e):
        return (e["floor"] == "better" and not e["provisional"] and e["sanity"] != "flagged"
                and (e["sanity"] == "passes" or not runs_sanity) and e["axiom"] is not False)

    which = "known_group" if by_known else "group"
    use, group = [], None
    for g in sorted({e[which] for e in entries.values() if e[which] is not None}):
        pool = [m for m, e in entries.items() if e[which] == g and trusted(e)]
        if pool:
            use = sorted(pool, key=lambda m: (entries[m]["seconds"] is None, entries[m]["seconds"] or 0, m))
            use, group = use[:USE_AT_MOST], g
            break
    avoid = [m for m, e in entries.items() if not e["provisional"]
             and (e["floor"] in ("not separated", "worse") or e["sanity"] == "flagged")]
    tops = [m for m, e in entries.items() if e["voters"] and 0 < e["votes"] < e["voters"]]
    return {"ranked": True, "by": "known answer" if by_known else "headline metric", "group": group, "use": use,
            "avoid": avoid, "disagree": tops, "n": n}


def _names(methods: list[str], entries: dict) -> str:
    return listing([entries[m]["label"] for m in methods])


def recommendation_line(name: str, rec: dict, entries: dict) -> str:
    if not rec["ranked"]:
        return f"{name}: n = {rec['n']} is too small to rank the methods, so nothing is recommended yet."
    if rec["use"]:
        known = any(e["has_known"] for e in entries.values())
        how = (f"group {rec['group']} by the known answer" if rec["by"] == "known answer" else
               f"group {rec['group']} by the headline metric (the known answer does not rank the methods yet)" if known
               else f"group {rec['group']} by the headline metric (this suite has no known answer)")
        text = f"{name}: use {_names(rec['use'], entries)} ({how}, cheapest first)"
    else:
        text = f"{name}: no method meets every condition to be recommended"
    if rec["avoid"]:
        text += f"; avoid {_names(rec['avoid'], entries)} (not better than the floor, or flagged by the sanity check)"
    if rec["disagree"]:
        text += f"; the metrics disagree on {_names(rec['disagree'], entries)}"
    return text + "."


def scorecard(suites: list[tuple[tuple, Table, Optional[Table], list[dict], dict, dict, dict]]
              ) -> tuple[pd.DataFrame, str, list[str], dict]:
    """The table, its note, one recommendation per suite, and the same as data for statistics.json.

    ``suites``: per suite ``((model, dataset), headline, truth, panel, sanity, checks, seconds)``."""
    card, recs, titles, headlines = {}, {}, {}, {}
    for key, headline, truth, panel, sanity, checks, seconds in suites:
        name = suite_title(*key)
        titles[name], headlines[name] = key, headline.title
        card[name] = cells(headline, truth, panel, sanity, checks, seconds)
        stats = headline.statistics
        recs[name] = recommend(card[name], stats.get("verdict") == "ranked", stats.get("n") or 0, bool(sanity))
    rows = []
    for method in order(card):
        label = next(s[method]["label"] for s in card.values() if method in s)
        rows.append({"method": label, **{name: cell_text(suite.get(method)) for name, suite in card.items()}})
    frame = pd.DataFrame(rows, columns=["method", *card])
    note = ("cell: headline group (1 = top) and floor verdict (▲ better, = not separated, ▼ worse; * provisional: "
            "fewer examples than the others), top groups among the voting metrics; K: the known answer's group and "
            "floor verdict; sanity check ✓ passes, ✗ flagged, ? unchecked; ax✓/ax✗ own axiom met or failed; "
            "median seconds per example; rows by mean headline group over the suites, then cost")
    lines = [recommendation_line(name, recs[name], card[name]) for name in card]
    data = {"headlines": headlines, "cells": card, "recommendations": recs, "order": list(frame["method"])}
    return frame, note, lines, data
