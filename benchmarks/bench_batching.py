"""What one forward pass costs by its shape, to set a device's batching defaults (``RunOptions.pad_tokens``,
``batch_tokens``) from measurements.

    python benchmarks/bench_batching.py MODEL [MODEL ...] [--device cuda] [--rows 1,4,16] [--lengths 8,16]
                                        [--max-tokens N] [--threads T] [--note TEXT] [--json OUT.json]

For each model, seconds per pass of R distinct random sequences of L tokens (the fastest of ``--repeat``, through
the batcher as a run sends them: padded ids, the readout rows), over a grid of R (``--rows``) and L
(``--lengths``) up to ``--max-tokens`` tokens a pass; on a CPU with the torch threads a run takes
(:func:`attrbench.ops.environment.free_threads`) unless ``--threads`` says, the tasks of other processes running
then and ``--note`` (what else the machine was doing) recorded with it. From the grid:

- ``token s``: seconds per token in the best-filled batch (the floor a token costs);
- ``pass s``: one pass of one short sequence (R = 1, the shortest L): what a pass costs whatever it holds;
- ``pass / token``: their ratio, the tokens of padding a batch may carry before padding costs more than another
  pass (``pad_tokens``);
- per R × L, the tokens per second relative to the best, so a batch budget (``batch_tokens``, and the
  batcher's cap of 256 rows) can be read off where throughput stops rising.
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

ROWS = (1, 4, 16, 64, 256, 1024)
LENGTHS = (8, 16, 32, 64, 128)


def random_sequences(adapter, rows: int, length: int, rng) -> list[tuple[int, ...]]:
    """``rows`` distinct-in-practice sequences of ``length`` token ids drawn from the model's vocabulary."""
    return [tuple(int(t) for t in rng.integers(5, adapter.tokenizer.vocab_size, length)) for _ in range(rows)]


def one_pass(adapter, readout, sequences: list[tuple[int, ...]]) -> float:
    """Seconds for equal-length ``sequences`` as one batch through a fresh batcher (no cache)."""
    rows, length = len(sequences), len(sequences[0])
    batcher = Batcher(batch_tokens=rows * length, max_batch=rows, pad_tokens=0)
    began = time.perf_counter()
    batcher.answer([Forward(adapter, readout, sequences, [length - 1] * rows)])
    assert batcher.batches == 1
    return time.perf_counter() - began


def pass_seconds(adapter, readout, rows: int, length: int, rng, repeat: int) -> float:
    """The fastest of ``repeat`` passes, each of new random sequences."""
    return min(one_pass(adapter, readout, random_sequences(adapter, rows, length, rng)) for _ in range(repeat))


def take_threads(threads: int | None = None) -> dict:
    """Set torch's CPU threads (default: what a run takes beside the other work running now) and say, for the
    record, how many cores, threads and tasks of other processes there were."""
    busy = busy_elsewhere()
    torch.set_num_threads(threads or free_threads(busy=busy))
    return {"cpus": os.cpu_count(), "threads": torch.get_num_threads(), "busy elsewhere": busy}


def measure(model: str, device: str, repeat: int, max_tokens: int, rows_grid=ROWS, lengths=LENGTHS) -> dict:
    adapter = load_model(model, device=device)
    lengths = sorted(lengths)
    readout = Readout(index=1, contrast=None)
    rng = np.random.default_rng(0)
    pass_seconds(adapter, readout, 16, 16, rng, 2)  # warm-up: kernels, allocator
    grid = {}
    for length in lengths:
        for rows in rows_grid:
            if rows * length <= max_tokens:
                grid[(rows, length)] = pass_seconds(adapter, readout, rows, length, rng, repeat)
    token = min(s / (r * n) for (r, n), s in grid.items())
    one = grid[(1, lengths[0])]
    return {"model": Path(model).name, "device": str(adapter.device), "token s": token, "pass s": one,
            "pass / token": round(one / token),
            "grid": [{"rows": r, "length": n, "seconds": s, "tokens/s vs best": round(token * r * n / s, 3)}
                     for (r, n), s in grid.items()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=131072, help="largest R x L measured")
    parser.add_argument("--rows", default=",".join(map(str, ROWS)), help="the grid's R")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="the grid's L (the shortest: a pass's "
                        "own cost)")
    parser.add_argument("--threads", type=int, help="torch threads on a CPU (default: what a run takes)")
    parser.add_argument("--note", help="what else the machine was doing, kept in the record")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows_grid = [int(r) for r in args.rows.split(",")]
    lengths = sorted(int(n) for n in args.lengths.split(","))
    machine = take_threads(args.threads) if args.device == "cpu" else {}
    results = []
    for model in args.models:
        result = {**measure(model, args.device, args.repeat, args.max_tokens, rows_grid, lengths), **machine}
        if args.note:
            result["note"] = args.note
        results.append(result)
        print(f"{result['model']} on {result['device']}: {result['token s']:.3g} s per token at best, "
              f"{result['pass s']:.3g} s for a pass of 1 x {lengths[0]} tokens = {result['pass / token']} tokens",
              flush=True)
        table = {(g["rows"], g["length"]): g["tokens/s vs best"] for g in result["grid"]}
        print("tokens/s vs best (rows down, length across):\n        " + "".join(f"{n:>8}" for n in lengths))
        for r in rows_grid:
            print(f"{r:>8}" + "".join(f"{table[(r, n)]:>8}" if (r, n) in table else " " * 8 for n in lengths))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
