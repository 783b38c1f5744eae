"""Compare the non-timing results of two leaderboard stores, unit by unit and field by field.

    python benchmarks/compare_stores.py OLD/store.sqlite NEW/store.sqlite [--tolerance 0] [--rtol 0] [--models A,B]

Units are matched by (model, dataset, evaluation, method, shard); records inside a unit by
(method, metric). Every field of the old record is compared with the new one (numbers exactly, or
within ``--tolerance``); fields only the new record has are listed. Renamed fields are declared in
``RENAMED`` and compared under their new name. Two numbers are equal when
``|old - new| <= tolerance + rtol * |old|`` (both 0 by default: exactly). Timing units (wall seconds, memory) are
skipped: they differ on every run. Prints a summary and exits 1 if anything differs beyond the tolerance.
"""
from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections import Counter

SKIP_EVALS = {"timing"}
# old field -> (new field, how to read the comparable value from it)
RENAMED = {"published_bert": ("published", lambda p: None if p is None else p["value"]),
           "published_bert_base": ("published", lambda p: None if p is None else p["value"])}
# old fields whose content changed on purpose (compared by eye, listed in the summary)
REPLACED = {"published": "context_change's text 'BERT-base 0.21, GPT-2 0.15' became one value for the model's "
                         "norm placement plus its source"}


def units(path: str, models: set[str] | None = None) -> dict[tuple, list[dict]]:
    db = sqlite3.connect(path)
    planned = db.execute("SELECT value FROM meta WHERE key = 'planned'").fetchone()
    keys = set(json.loads(planned[0])) if planned else None
    out = {}
    for key, model, dataset, eval_, method, shard, payload in db.execute(
            "SELECT key, model, dataset, eval, method, shard, payload FROM units"):
        if eval_ not in SKIP_EVALS and (keys is None or key in keys) and (models is None or model in models):
            out[(model, dataset, eval_, method, shard)] = json.loads(payload)
    return out


def differences(old, new, tolerance: float, where: str, out: list, stats: Counter, rtol: float = 0.0) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for k, v in old.items():
            if k not in new:
                out.append(f"{where}.{k}: missing in the new record")
            else:
                differences(v, new[k], tolerance, f"{where}.{k}", out, stats, rtol)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for k, (a, b) in enumerate(zip(old, new)):
            differences(a, b, tolerance, f"{where}[{k}]", out, stats, rtol)
    elif isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool):
        stats["numbers"] += 1
        gap = abs(old - new) if math.isfinite(old) and math.isfinite(new) else (0.0 if old == new else math.inf)
        stats["max_gap"] = max(stats["max_gap"], gap)
        if gap > tolerance + rtol * abs(old):
            out.append(f"{where}: {old!r} -> {new!r} (gap {gap:.3g})")
        elif gap:
            stats["within_tolerance"] += 1
    else:
        stats["other"] += 1
        if old != new:
            out.append(f"{where}: {old!r} -> {new!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--tolerance", type=float, default=0.0, help="largest absolute gap between numbers")
    parser.add_argument("--rtol", type=float, default=0.0, help="largest gap relative to the old number")
    parser.add_argument("--models", help="compare only these models (comma-separated), e.g. those whose weights "
                                         "both stores share")
    args = parser.parse_args(argv)
    models = set(args.models.split(",")) if args.models else None
    old, new = units(args.old, models), units(args.new, models)
    problems, stats, added, replaced = [], Counter(max_gap=0.0), Counter(), Counter()
    records = 0
    for unit, old_records in old.items():
        if unit not in new:
            problems.append(f"{unit}: not in the new store")
            continue
        by_key = {(r["method"], r["metric"]): r for r in new[unit]}
        for record in old_records:
            where = "|".join(map(str, unit)) + f"|{record['metric']}"
            match = by_key.get((record["method"], record["metric"]))
            if match is None:
                problems.append(f"{where}: record missing in the new store")
                continue
            records += 1
            record = dict(record)
            for old_key, (new_key, read) in RENAMED.items():
                if old_key in record:
                    differences(record.pop(old_key), read(match.get(new_key)), args.tolerance, f"{where}.{old_key}",
                                problems, stats, args.rtol)
            for old_key in REPLACED:
                if old_key in record and not isinstance(record[old_key], (dict, type(None))):
                    replaced[old_key] += 1
                    record.pop(old_key)
            added.update(k for k in match if k not in record and k not in {n for n, _ in RENAMED.values()})
            differences(record, match, args.tolerance, where, problems, stats, args.rtol)
    extra = sorted(set(new) - set(old))
    print(f"units compared: {len(old)} (timing skipped); records: {records}; numbers: {stats['numbers']}, "
          f"other values: {stats['other']}")
    print(f"largest gap between numbers: {stats['max_gap']:.3g}; nonzero gaps within the tolerance "
          f"({args.tolerance:g} + {args.rtol:g} relative): {stats['within_tolerance']}")
    print("fields only in the new records: " + ", ".join(f"{k} ({n})" for k, n in sorted(added.items())))
    for key, n in replaced.items():
        print(f"replaced on purpose in {n} records: {key}: {REPLACED[key]}")
    if extra:
        print(f"units only in the new store: {len(extra)} (e.g. {extra[0]})")
    print(f"differences: {len(problems)}")
    for line in problems[:40]:
        print("  " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
