"""What a causal LM's head costs in a batch of texts that end at different rows, on the shipped decoders.

    python benchmarks/bench_head_rows.py [--models smollm2-135m,gemma3-270m] [--out benchmarks/results/head-rows-cpu.json]

The model-output requests of a leaderboard are right-padded, length-sorted batches, so their target rows differ
within a batch. transformers' ``logits_to_keep`` keeps the same positions of every sequence: asked for the batch's
distinct rows, it computes the head at each of them in every text. ``TransformerAdapter.row_logits`` gives the
head each text's own row alone. For a batch of 64 texts of 10 to 25 tokens (16 distinct rows), this times both
(the fastest of ``--repeats``, side by side in one process: timing drifts between runs) and checks that they give
the same logits.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attrbench.models import load_model  # noqa: E402
from attrbench.ops.tokens import pad_ids  # noqa: E402


def fastest(call, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - began)
    return best


@torch.no_grad()
def measure(name: str, repeats: int, texts: int = 64) -> dict:
    adapter = load_model(name)
    generator = torch.Generator().manual_seed(0)
    lengths = [10 + (i % 16) for i in range(texts)]
    sequences = [torch.randint(100, 5000, (n,), generator=generator).tolist() for n in lengths]
    ids, mask = pad_ids(sequences, adapter.tokenizer.pad_token_id, adapter.device)
    rows = [n - 1 for n in lengths]
    every = torch.arange(texts)
    keep, where = torch.unique(torch.as_tensor(rows), return_inverse=True)

    def every_distinct_row():  # logits_to_keep alone: the head at each of the batch's rows, in every text
        return adapter.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits[every, where]

    def own_row():
        return adapter.row_logits(rows, input_ids=ids, attention_mask=mask)

    difference = float((every_distinct_row() - own_row()).abs().max())
    before, after = fastest(every_distinct_row, repeats), fastest(own_row, repeats)
    return {"model": name, "vocabulary": adapter.model.get_output_embeddings().out_features, "texts": texts,
            "lengths": [min(lengths), max(lengths)], "distinct_rows": len(keep),
            "every_distinct_row_s": round(before, 3), "own_row_s": round(after, 3),
            "speed_up": round(before / after, 2), "max_abs_difference": difference}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "head-rows-cpu.json"))
    args = parser.parse_args(argv)
    rows = [measure(name, args.repeats) for name in args.models.split(",")]
    record = {"what": "a causal LM's head in a batch of texts ending at different rows: logits_to_keep at every "
                      "distinct row against each text's own row (TransformerAdapter.row_logits)",
              "command": "python benchmarks/bench_head_rows.py", "threads": torch.get_num_threads(),
              "torch": torch.__version__, "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for row in rows:
        print(f"{row['model']}: {row['every_distinct_row_s']} s -> {row['own_row_s']} s ({row['speed_up']}x), "
              f"max |difference| {row['max_abs_difference']}")


if __name__ == "__main__":
    main()
