"""What the tables' intervals cover, and which way a bootstrap of a tau of means leans: the figures of
docs/reading-a-leaderboard.md (Values) and docs/metrics.md (the intervals of tau).

    python benchmarks/bench_intervals.py [--json benchmarks/results/intervals-cpu.json]

- ``coverage``: in 1,000 seeded repetitions per case, how often a 95 % interval holds the known mean of normal
  (0.3, 0.2) data and of gamma(2, 0.1) data (mean 0.2; the right skew of AOPCs) at n = 4, 6, 10 and 60: the
  Student-t interval every table prints (:func:`attrbench.ops.stats.interval`) and scipy's percentile bootstrap
  (``scipy.stats.bootstrap``, 2,000 resamples).
- ``null_tau``: two metrics with nothing to agree on (12 methods; the first metric's means spread over [0, 1], the
  second's all equal; per-example noise sd 1.5), 100 seeded samples at each of n = 30, 60 and 120: how often the
  95 % interval of Kendall's tau of the method means excludes 0, for the percentile interval the reports print
  (:func:`attrbench.ops.stats.agreement_interval`) and for scipy's BCa interval of the same statistic.
- ``pull``: reports/full's metric-validity taus on MiniLM's agreement test items, recomputed from the published
  rows with the report's seed and resamples (the record holds its interval, to check against statistics.json),
  and the share of the bootstrap draws that fall below each estimate.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import scipy
from bench_readme_python import write_record  # same folder: run as python benchmarks/bench_intervals.py
from scipy.stats import bootstrap

from attrbench.ops.stats import agreement_draws, agreement_interval, interval, kendall_tau_b

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "intervals-cpu.json"
NS, TRIALS, RESAMPLES = (4, 6, 10, 60), 1000, 2000
NULL_NS, NULL_SAMPLES, METHODS = (30, 60, 120), 100, 12


def coverage() -> dict:
    """Per data shape and n, the share of repetitions whose t and percentile-bootstrap intervals hold the mean."""
    out = {}
    for shape, truth in (("normal", 0.3), ("gamma", 0.2)):
        for n in NS:
            rng = np.random.default_rng([n, shape == "gamma"])
            held = {"t": 0, "percentile bootstrap": 0}
            for _ in range(TRIALS):
                sample = rng.gamma(2.0, 0.1, n) if shape == "gamma" else rng.normal(0.3, 0.2, n)
                low, high = interval(sample.tolist())["ci"]
                held["t"] += int(low <= truth <= high)
                boot = bootstrap((sample,), np.mean, n_resamples=RESAMPLES, method="percentile", rng=rng)
                ci = boot.confidence_interval
                held["percentile bootstrap"] += int(ci.low <= truth <= ci.high)
            out[f"{shape} n={n}"] = {k: v / TRIALS for k, v in held.items()}
            print(f"coverage, {shape} data, n = {n}: " + ", ".join(f"{k} {v / TRIALS:.1%}" for k, v in held.items()),
                  flush=True)
    return out


def null_tau() -> dict:
    """Per n, how many of the samples' 95 % tau intervals exclude 0: percentile (the reports') against BCa."""
    out = {}
    spread = np.linspace(0, 1, METHODS)[:, None]
    for n in NULL_NS:
        rng = np.random.default_rng(n)
        excluded = {"percentile": 0, "BCa": 0}
        for _ in range(NULL_SAMPLES):
            a, b = spread + rng.normal(0, 1.5, (METHODS, n)), rng.normal(0, 1.5, (METHODS, n))
            seed = int(rng.integers(1 << 30))
            shown = agreement_interval({"A": {f"m{k}": a[k].tolist() for k in range(METHODS)},
                                        "B": {f"m{k}": b[k].tolist() for k in range(METHODS)}}, "A", "B",
                                       resamples=RESAMPLES, seed=seed)["ci"]
            excluded["percentile"] += int(shown[0] > 0 or shown[1] < 0)

            def tau(rows, axis=-1):  # rows: (..., m) example indices of resamples (m < n: the jackknife's)
                rows = np.asarray(rows, dtype=int)
                flat = rows.reshape(-1, rows.shape[-1])
                taus = kendall_tau_b(a[:, flat].mean(2).T, b[:, flat].mean(2).T)
                return taus.reshape(rows.shape[:-1])

            bca = bootstrap((np.arange(n),), tau, n_resamples=RESAMPLES, method="BCa", vectorized=True,
                            rng=np.random.default_rng(seed)).confidence_interval
            excluded["BCa"] += int(bca.low > 0 or bca.high < 0)
        out[f"n={n}"] = excluded
        print(f"no agreement, n = {n}: the 95 % interval of tau excludes 0 in " +
              ", ".join(f"{v} of {NULL_SAMPLES} ({k})" for k, v in excluded.items()), flush=True)
    return out


def pull() -> dict:
    """reports/full's metric-validity taus on the agreement test items, their intervals and the share of draws
    below each estimate, with the report's own selection of methods and examples."""
    from attrbench import load_run
    from attrbench.ops.verdicts import FLOOR
    from attrbench.report.tables import aliased, by_example, columns, shared_examples
    from attrbench.runtime.config import read_config

    config = read_config("full")
    records = [r for r in load_run(ROOT / "reports" / "full").records
               if (r["model"], r["dataset"]) == ("minilm-l6-sva", "sva-linzen")]
    statistics = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())

    def leave_out(evaluation: str) -> tuple:
        """As the report: the table's reference method, the floor and the methods shown as another's row."""
        table = statistics[f"minilm-l6-sva · sva-linzen · {evaluation}"]
        return table.get("reference"), FLOOR, *aliased(table)

    answer = by_example([r for r in records if r["eval"] == "ground_truth"], "mrr", leave_out("ground_truth"))
    out = {}
    for evaluation, metric in (("naopc", "naopc_comprehensiveness"), ("naopc", "naopc_sufficiency"),
                               ("soft_erasure", "soft_nc"), ("soft_erasure", "soft_ns"),
                               ("erasure_aopc", "comprehensiveness_aopc"), ("abpc", "abpc")):
        group = [r for r in records if r["eval"] == evaluation]
        sign = 1.0 if next(r for r in group if r["metric"] == metric)["higher_is_better"] else -1.0
        values = by_example(group, metric, leave_out(evaluation))
        methods = [m for m in answer if m in values]
        ids = shared_examples(answer, values, methods)
        truth = np.array(list(columns(answer, methods, ids).values()), dtype=np.float64)
        scores = np.array(list(columns(values, methods, ids, sign).values()), dtype=np.float64)
        n = len(ids)
        point, draws = agreement_draws(truth, scores, config["bootstrap_resamples"], config["seed"])
        out[f"{evaluation}.{metric}"] = {
            "methods": len(methods), "n": n, "tau": point,
            "ci": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
            "draws_below": float(np.mean(draws < point))}
        print(f"validity of {metric} on {n} agreement items: tau {point:.2f}, "
              f"{np.mean(draws < point):.0%} of {len(draws)} draws below it", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(OUT))
    args = parser.parse_args()
    began = time.perf_counter()
    record = {"what": __doc__.split("\n\n")[0].replace("\n", " "), "numpy": np.__version__,
              "scipy": scipy.__version__, "trials": TRIALS, "resamples": RESAMPLES, "null_samples": NULL_SAMPLES,
              "methods": METHODS, "coverage": coverage(), "null_tau": null_tau(), "pull": pull()}
    write_record(args.json, {**record, "seconds": round(time.perf_counter() - began, 1)})


if __name__ == "__main__":
    main()
