"""The interval figures of docs/reading-a-leaderboard.md and docs/metrics.md are
benchmarks/results/intervals-cpu.json's (``python benchmarks/bench_intervals.py``), read from the pages with their
whitespace normalised; a range "a–b" is the recorded smallest and largest values as the page rounds them, and the
record's metric-validity taus are reports/full's published ones."""
from __future__ import annotations

import json
import re

from attrbench.runtime.config import read_config
from tests.test_docs_performance import ROOT, page, record

INTERVALS = "intervals-cpu.json"


def percent(share: float) -> int:
    return round(100 * share)


def stated(name: str, pattern: str, what: str) -> re.Match:
    """Where ``pattern`` matches docs/``name``; fails saying ``what`` the page no longer says."""
    found = re.search(pattern, page(ROOT / "docs" / name))
    assert found, f"docs/{name} no longer says {what}"
    return found


def test_the_record_says_where_and_how_it_was_measured():
    rec = record(INTERVALS)
    assert rec["processor"] and rec["cores"] == 2 and re.fullmatch(r"[0-9a-f]{7,40}", rec["commit"])
    assert rec["scipy"] and rec["trials"] == 1000 and rec["resamples"] == 2000
    assert (ROOT / "benchmarks" / "bench_intervals.py").exists()


def test_the_coverage_figures_are_the_recorded_ones():
    coverage = record(INTERVALS)["coverage"]
    said = stated("reading-a-leaderboard.md",
                  r"in (\d+),000 seeded repetitions it covered a known mean in (\d+)–(\d+) % of them with (\d+) "
                  r"to (\d+) examples of normal data, and in (\d+)–(\d+) % with skewed \(gamma\) data of the shape "
                  r"of AOPCs, where a percentile bootstrap covers only (\d+) / (\d+) / (\d+) % with (\d+) / (\d+) / "
                  r"(\d+) examples \(`benchmarks/bench_intervals.py`, `benchmarks/results/intervals-cpu.json`\)",
                  "how often the intervals cover")
    assert int(said[1]) * 1000 == record(INTERVALS)["trials"]
    ns = sorted({int(key.split("=")[1]) for key in coverage})
    assert (ns[0], ns[-1]) == (int(said[4]), int(said[5]))
    for shape, low, high in (("normal", said[2], said[3]), ("gamma", said[6], said[7])):
        shares = [percent(coverage[f"{shape} n={n}"]["t"]) for n in ns]
        assert (min(shares), max(shares)) == (int(low), int(high)), shape
    for share, n in zip(said.groups()[7:10], said.groups()[10:13]):
        assert percent(coverage[f"gamma n={n}"]["percentile bootstrap"]) == int(share), n


def test_the_bootstrap_figures_are_the_recorded_ones_and_the_validity_taus_the_published_ones():
    rec = record(INTERVALS)
    said = stated("metrics.md",
                  r"on MiniLM's (\d+) agreement test items, (\d+) % of the ([\d,]+) draws of Soft-NS's validity τ "
                  r"fell below its estimate of ([\d.]+), and (\d+) to (\d+) % of each metric's\) .+? it excluded 0 "
                  r"in (\d+) to (\d+) of (\d+) samples, the percentile interval in (\d+) to (\d+) \((\d+) methods, "
                  r"(\d+), (\d+) and (\d+) examples; `benchmarks/bench_intervals.py`",
                  "which way the bootstrap of tau leans")
    pull, soft_ns = rec["pull"], rec["pull"]["soft_erasure.soft_ns"]
    assert soft_ns["n"] == int(said[1]) and percent(soft_ns["draws_below"]) == int(said[2])
    assert f"{soft_ns['tau']:.2f}" == said[4]
    shares = [percent(entry["draws_below"]) for entry in pull.values()]
    assert (min(shares), max(shares)) == (int(said[5]), int(said[6]))
    full = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())
    assert int(said[3].replace(",", "")) == read_config("full")["bootstrap_resamples"]
    published = {e["metric"]: e for e in full["minilm-l6-sva · sva-linzen · metric validity"]}
    assert set(published) == set(pull)
    for metric, entry in pull.items():  # the record recomputed the published table, draws and all
        assert (entry["n"], entry["tau"], entry["ci"]) == (published[metric]["n"], published[metric]["tau"],
                                                           published[metric]["ci"]), metric
    null = rec["null_tau"]
    bca = [v["BCa"] for v in null.values()]
    kept = [v["percentile"] for v in null.values()]
    assert (min(bca), max(bca), int(said[9])) == (int(said[7]), int(said[8]), rec["null_samples"])
    assert (min(kept), max(kept)) == (int(said[10]), int(said[11])) and int(said[12]) == rec["methods"]
    assert sorted(int(key.split("=")[1]) for key in null) == [int(said[13]), int(said[14]), int(said[15])]
