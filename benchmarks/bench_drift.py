"""How far the same forward pass's seconds drift within one run on this machine: why the benchmarks report the
fastest of repeated runs.

    python benchmarks/bench_drift.py [--model minilm-l6-sst2] [--length 31] [--batches 14] [--threads T]
                                     [--spinner] [--note TEXT] [--json OUT.json]

One batch of distinct inputs of ``--length`` tokens, as many as the CPU batch budget holds (``RunOptions``: 4,096
tokens, so 132 of 31 tokens), drawn from the model's vocabulary, goes through the batcher ``--batches`` times, each
time through a fresh batcher (no cache), after one warm-up pass. Recorded: each pass's seconds, the fastest and the
slowest, the torch threads (default: what a run takes, :func:`attrbench.ops.environment.free_threads`) and the
tasks of other processes running at the start (:func:`attrbench.ops.environment.busy_elsewhere`), and ``--note``
(what else the machine was doing). ``--spinner`` runs the passes beside a process of this script that spins on one
core throughout (a machine shared with other work, reproducibly): what torch's threads cost when one of them
shares its core (docs/performance.md).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from pathlib import Path

import numpy as np
from bench_batching import one_pass, random_sequences, take_threads  # same folder: run as python benchmarks/...

from attrbench.models import load_model
from attrbench.ops.perturb import Readout
from attrbench.runtime.options import DEFAULT_BATCH_TOKENS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-l6-sst2")
    parser.add_argument("--length", type=int, default=31)
    parser.add_argument("--batches", type=int, default=14)
    parser.add_argument("--threads", type=int, help="torch threads (default: what a run takes)")
    parser.add_argument("--spinner", action="store_true", help="beside a process spinning on one core")
    parser.add_argument("--note", help="what else the machine was doing, kept in the record")
    parser.add_argument("--json")
    args = parser.parse_args()
    spinner = multiprocessing.Process(target=spin, daemon=True) if args.spinner else None
    if spinner is not None:
        spinner.start()
        time.sleep(1.0)  # running before the threads are chosen, as other work would be
    try:
        measured(args)
    finally:
        if spinner is not None:
            spinner.terminate()


def spin() -> None:
    while True:
        pass


def measured(args) -> None:
    machine = take_threads(args.threads)
    adapter = load_model(args.model)
    rows = DEFAULT_BATCH_TOKENS["cpu"] // args.length
    sequences = random_sequences(adapter, rows, args.length, np.random.default_rng(0))
    readout = Readout(index=1, contrast=None)
    one_pass(adapter, readout, sequences)  # warm-up
    seconds = [one_pass(adapter, readout, sequences) for _ in range(args.batches)]
    result = {"model": args.model, "device": "cpu", **machine, "inputs": rows, "tokens": args.length,
              "batches": args.batches, "seconds": seconds, "fastest s": min(seconds), "slowest s": max(seconds),
              "slowest / fastest": max(seconds) / min(seconds), "spinner": args.spinner,
              **({"note": args.note} if args.note else {})}
    print(f"{args.batches} identical batches of {rows} inputs of {args.length} tokens ({args.model}, "
          f"{machine['threads']} thread(s), {machine['busy elsewhere']} other tasks running): {min(seconds):.2f} to "
          f"{max(seconds):.2f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
