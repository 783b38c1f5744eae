"""What attention flow costs as texts grow, against networkx's Edmonds-Karp (the authors' solver): the figures of
the method's docstring, which explain its ``max_tokens`` limit.

    python benchmarks/bench_attention_flow.py [--lengths 25,54,69] [--repeats 3] [--json OUT.json]

On ``minilm-l6-sva``'s attention graphs of Linzen items (6 layers), for the first item of each length in
``--lengths`` MiniLM tokens: the seconds of ``attention_flow`` (the registered method: the model's forward pass,
then one Dinic max flow per input token; the fastest of ``--repeats`` calls), and of the same flows by networkx's
Edmonds-Karp on the same capacities (once, at the shortest length only: it is the slow one).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from bench_readme_python import write_record  # same folder: run as python benchmarks/bench_attention_flow.py

from attrbench.datasets.lookup import examples_for
from attrbench.methods.attention_flow import networkx_flows
from attrbench.models import load_model
from attrbench.ops.aggregate import row_normalise, with_identity
from attrbench.registry import METHODS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "attention-flow-cpu.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="25,54,69")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=str(OUT))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    adapter = load_model("minilm-l6-sva")
    flow, weights = METHODS.get("attention_flow"), METHODS.get("attn_w")
    items = {}
    for example in examples_for(adapter, "sva-linzen")[0]:
        items.setdefault(len(adapter.encode([example.text]).input_ids[0]), example)
    rows, lengths = [], [int(n) for n in args.lengths.split(",")]
    for length in lengths:
        text = items[length].text
        flow(adapter, [text])  # warm-up (numba compiles on the first call)
        seconds = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            ours = flow(adapter, [text])[0]
            seconds.append(time.perf_counter() - began)
        row = {"tokens": length, "example": items[length].id, "seconds": min(seconds)}
        if length == min(lengths):
            per_layer = row_normalise(with_identity(weights(adapter, [text])[0].values))
            began = time.perf_counter()
            theirs = networkx_flows(per_layer, ours.meta["row"])
            row["networkx_seconds"] = time.perf_counter() - began
            row["largest_difference"] = float(np.abs(ours.values - theirs).max())
        rows.append(row)
        print(f"{length} tokens: attention_flow {row['seconds']:.3f} s" + (
            f", networkx {row['networkx_seconds']:.2f} s (largest difference {row['largest_difference']:.1g})"
            if "networkx_seconds" in row else ""), flush=True)
    write_record(args.json, {"what": "attention flow's seconds per text on MiniLM's attention graphs, and "
                                     "networkx's", "model": "minilm-l6-sva", "threads": args.threads, "rows": rows})


if __name__ == "__main__":
    main()
