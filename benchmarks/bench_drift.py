"""How far the same forward pass's seconds drift within one run on this machine: why the benchmarks report the
fastest of repeated runs.

    python benchmarks/bench_drift.py [--model minilm-l6-sst2] [--length 31] [--batches 14] [--threads T]
                                     [--note TEXT] [--json OUT.json]

One batch of distinct inputs of ``--length`` tokens, as many as the CPU batch budget holds (``RunOptions``: 4,096
tokens, so 132 of 31 tokens), drawn from the model's vocabulary, goes through the batcher ``--batches`` times, each
time through a fresh batcher (no cache), after one warm-up pass. Recorded: each pass's seconds, the fastest and the
slowest, the torch threads (default: what a run takes, :func:`attrbench.ops.environment.free_threads`) and the
tasks of other processes running at the start (:func:`attrbench.ops.environment.busy_elsewhere`), and ``--note``
(what else the machine was doing).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.models import load_model  # noqa: E402
from attrbench.ops.batching import Batcher  # noqa: E402
from attrbench.ops.environment import busy_elsewhere, free_threads  # noqa: E402
from attrbench.ops.perturb import Forward, Readout  # noqa: E402
from attrbench.runtime.options import DEFAULT_BATCH_TOKENS, DEFAULT_PAD_TOKENS  # noqa: E402


def one_pass(adapter, readout, sequences: list[tuple[int, ...]]) -> float:
    batcher = Batcher(batch_tokens=DEFAULT_BATCH_TOKENS["cpu"], pad_tokens=DEFAULT_PAD_TOKENS["cpu"])
    began = time.perf_counter()
    batcher.answer([Forward(adapter, readout, sequences, [len(sequences[0]) - 1] * len(sequences))])
    assert batcher.batches == 1
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-l6-sst2")
    parser.add_argument("--length", type=int, default=31)
    parser.add_argument("--batches", type=int, default=14)
    parser.add_argument("--threads", type=int, help="torch threads (default: what a run takes)")
    parser.add_argument("--note", help="what else the machine was doing, kept in the record")
    parser.add_argument("--json")
    args = parser.parse_args()
    busy = busy_elsewhere()
    threads = args.threads or free_threads(busy=busy)
    torch.set_num_threads(threads)
    adapter = load_model(args.model)
    rows = DEFAULT_BATCH_TOKENS["cpu"] // args.length
    rng = np.random.default_rng(0)
    sequences = [tuple(int(t) for t in rng.integers(5, adapter.tokenizer.vocab_size, args.length))
                 for _ in range(rows)]
    readout = Readout(index=1, contrast=None)
    one_pass(adapter, readout, sequences)  # warm-up
    seconds = [one_pass(adapter, readout, sequences) for _ in range(args.batches)]
    result = {"model": args.model, "device": "cpu", "cpus": os.cpu_count(), "threads": threads,
              "busy elsewhere": busy, "inputs": rows, "tokens": args.length, "batches": args.batches,
              "seconds": seconds, "fastest s": min(seconds), "slowest s": max(seconds),
              "slowest / fastest": max(seconds) / min(seconds), **({"note": args.note} if args.note else {})}
    print(f"{args.batches} identical batches of {rows} inputs of {args.length} tokens ({args.model}, {threads} "
          f"thread(s), {busy} other tasks running): {min(seconds):.2f} to {max(seconds):.2f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
