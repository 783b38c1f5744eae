"""Benchmark: the decomposition of each block shape against the same engine on a model of the same size it reduces to.

    python benchmarks/bench_families.py [--n 128] [--repeats 5] [--out benchmarks/results/families-cpu.json]

Every family with a layer reader is built as a random model of one size (4 layers, width 256, 4 heads of 64, FF
1024, float32, eager attention) and decomposed at every scope of every layer on a text of n tokens, side by side
with its reference, alternating the two ``repeats`` times (the median is kept): a LLaMA of the same size for a
decoder (for a mixture of experts, a LLaMA whose FF is its k active experts side by side, so the same FF work per
token), a BERT of the same size for an encoder (both see every position; a causal LLaMA computes only j <= i). The
ratio is the family's seconds over its reference's: what a reader and its block shape add to the engine's work. The
reference takes the family's FF activation; a parallel or ungated family's reference is gated (LLaMA's), so more
work. tests/test_docs_performance.py reads the record back; docs/performance.md quotes it.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SIZE = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
        "head_dim": 64, "intermediate_size": 1024, "ffn_dim": 1024, "n_inner": 1024, "max_position_embeddings": 512,
        "n_positions": 512, "sliding_window": 512}
EXPERTS = {"num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 512,
           "moe_intermediate_size": 512}
ENCODERS = ("modernbert", "deberta-v2", "xlm-roberta", "electra")
FAMILIES = ("gemma3_text", "gemma2", "olmo2", "qwen3", "phi3", "gpt_neox", "gptj", "phi", "mixtral", "olmoe",
            "qwen3_moe", "modernbert", "deberta-v2", "xlm-roberta", "electra")


def build(model_type: str, **overrides):
    from attrbench.models import TransformerAdapter
    from attrbench.models.tiny import build_family, shrunk_config

    config = shrunk_config(model_type)
    fields = set(config.to_dict()) | set(config.attribute_map)  # its own names and the standard ones it maps
    size = {k: v for k, v in {**SIZE, **overrides}.items() if k in fields or k in ("head_dim",)}
    head = "masked_lm" if model_type in ENCODERS or model_type == "bert" else "causal_lm"
    model, tokenizer = build_family(model_type, head, **size)
    tokenizer.model_max_length = SIZE["max_position_embeddings"]
    return TransformerAdapter(model.float(), tokenizer, f"bench-{model_type}")


def reference_of(model_type: str, family) -> tuple[str, dict]:
    """The reference's type and what it takes of the family: its FF activation (GELU-tanh costs more than SiLU)."""
    config = family.model.config
    act = {"hidden_act": getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", None)}
    act = {k: v for k, v in act.items() if isinstance(v, str)}
    if model_type in ENCODERS:
        return "bert", act
    if model_type in ("mixtral", "olmoe", "qwen3_moe"):
        return "llama", {"intermediate_size": EXPERTS["num_experts_per_tok"] * EXPERTS["intermediate_size"], **act}
    return "llama", act


def text_for(adapter, n: int) -> str:
    words = "the keys to the cabinet are on the table and the dogs run".split()
    out: list[str] = []
    while len(adapter.tokenizer(" ".join(out))["input_ids"]) < n:
        out.append(words[len(out) % len(words)])
    return " ".join(out)


def seconds(adapter, text: str) -> float:
    import attrbench

    began = time.perf_counter()
    attrbench.decompose(adapter, [text])
    return time.perf_counter() - began


def compare(model_type: str, n: int, repeats: int) -> dict:
    torch.manual_seed(0)
    overrides = EXPERTS if model_type in ("mixtral", "olmoe", "qwen3_moe") else {}
    family = build(model_type, **overrides)
    ref_type, ref_overrides = reference_of(model_type, family)
    reference = build(ref_type, **ref_overrides)
    text_f, text_r = text_for(family, n), text_for(reference, n)
    seconds(family, text_f), seconds(reference, text_r)  # warm-up
    times_f, times_r = [], []
    for _ in range(repeats):
        times_f.append(seconds(family, text_f))
        times_r.append(seconds(reference, text_r))
    f, r = statistics.median(times_f), statistics.median(times_r)
    return {"family": model_type, "shape": family.layers[0].structure, "reference": ref_type,
            "reference_overrides": ref_overrides, "n": len(family.tokenizer(text_f)["input_ids"]),
            "seconds": round(f, 4), "reference_seconds": round(r, 4), "ratio": round(f / r, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "families-cpu.json"))
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_grad_enabled(False)
    rows = []
    for model_type in args.families.split(","):
        rows.append(compare(model_type, args.n, args.repeats))
        print(json.dumps(rows[-1]), flush=True)
    record = {"what": "all-scope decomposition of each block shape against the same engine on a model of the same "
                      "size (LLaMA for decoders, with the k active experts as its FF for a mixture; BERT for "
                      "encoders), medians of alternating runs",
              "command": "python benchmarks/bench_families.py", "size": SIZE, "experts": EXPERTS,
              "repeats": args.repeats, "threads": torch.get_num_threads(), "transformers": transformers.__version__,
              "torch": torch.__version__, "processor": platform.processor() or platform.machine(), "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
