"""On real weights and a CPU, does batching a method's texts cost anything? A method's texts together (as a run
gives them) against one at a time, side by side in one process; for a method that pads its batches, also with the
run's whole padding budget per batch (``RunOptions.pad_tokens``, not divided by the rows each text sends:
``GradientMethod.groups``) and padded to the longest text with no bound.

    python benchmarks/bench_batched_methods.py [--model minilm-l6-sst2] [--n 16] [--repeats 2] [--methods
        grad_x_input,integrated_gradients,smooth_grad,gradient_shap,shapley_sampling] [--fewer shapley_sampling=8]
        [--json OUT.json]

The texts are SST-2 dev's first ``--n`` sentences (``--fewer`` gives a slow method fewer), each explained for
class 1. Each way is timed ``--repeats`` times after one warm-up call, the fastest kept; the batched scores are
compared with the one-at-a-time scores (largest difference relative to the text's largest score), since a
batch must not change a result. On 2 cores a forward pass already runs near the matmul peak, so batching is
not expected to gain much here: what it must not do is cost (the GPU is where it pays, docs/performance.md).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from bench_readme_python import write_record  # same folder: run as python benchmarks/bench_batched_methods.py

from attrbench.datasets.readers import read_sst2
from attrbench.models import load_model
from attrbench.plugin import METHODS
from attrbench.runtime.options import RunOptions


def fastest(call, repeats: int):
    """The fastest of ``repeats`` timed calls, and the last call's results."""
    seconds, out = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        out = call()
        seconds.append(time.perf_counter() - began)
    return min(seconds), out


def gap(a, b) -> float:
    """Largest difference of two texts' scores, relative to the larger score of the pair."""
    a, b = np.asarray(a.values, dtype=np.float64), np.asarray(b.values, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max(), np.abs(b).max(), 1e-30))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-l6-sst2")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--methods",
                        default="grad_x_input,integrated_gradients,smooth_grad,gradient_shap,shapley_sampling")
    parser.add_argument("--fewer", default="shapley_sampling=8", help="method=n: a slow method's texts")
    parser.add_argument("--json")
    args = parser.parse_args()
    options = RunOptions(device="cpu")
    options.apply()
    adapter = load_model(args.model)
    sentences = [r["sentence"] for r in read_sst2("dev")]
    fewer = {k: int(v) for k, v in (pair.split("=") for pair in args.fewer.split(",") if pair)}
    rows = []
    for name in args.methods.split(","):
        texts = sentences[:fewer.get(name, args.n)]
        targets = ["class:1"] * len(texts)
        method = METHODS.get(name).within(options.batch_tokens, options.pad_tokens)
        method(adapter, texts[:1], target=targets[:1])  # warm-up
        together_s, together = fastest(lambda: method(adapter, texts, target=targets), args.repeats)
        alone_s, alone = fastest(lambda: [method(adapter, [t], target=[g])[0] for t, g in zip(texts, targets)],
                                 args.repeats)
        row = {"method": name, "texts": len(texts), "batched s": together_s, "one at a time s": alone_s,
               "largest relative difference": max(gap(a, b) for a, b in zip(together, alone))}
        if getattr(method, "pads", False):
            row["rows per text"] = method.rows_per_text()
            whole = METHODS.get(name).within(options.batch_tokens, options.pad_tokens)
            whole.rows_per_text = lambda: 1  # the run's whole padding budget for each batch
            unbounded = METHODS.get(name).within(options.batch_tokens, 10 ** 9)
            for label, variant in (("whole padding budget s", whole), ("padded to the longest s", unbounded)):
                row[label], _ = fastest(lambda: variant(adapter, texts, target=targets), args.repeats)
        rows.append(row)
        print(f"{name} on {len(texts)} texts: batched {together_s:.2f} s, one at a time {alone_s:.2f} s" + "".join(
            f", {label[:-2]} {row[label]:.2f} s" for label in ("whole padding budget s", "padded to the longest s")
            if label in row) + f"; largest relative difference {row['largest relative difference']:.1e}", flush=True)
    if args.json:
        write_record(args.json, {"command": "python benchmarks/bench_batched_methods.py", "model": args.model,
                                 "device": "cpu", "threads": torch.get_num_threads(),
                                 "pad tokens": options.pad_tokens, "batch tokens": options.batch_tokens,
                                 "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
