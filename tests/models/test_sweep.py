"""The architecture sweep (benchmarks/bench_sweep.py): a fixed sample of transformers' architectures in CI, and the
whole sweep's record as docs/own-data.md quotes it."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_sweep  # noqa: E402 - the benchmark's own check, so CI and the record run the same code

RECORD = json.loads((ROOT / "benchmarks" / "results" / "sweep-cpu.json").read_text())
# spread over the kinds: encoders under other names, decoders with parallel blocks, state-space and hybrid models,
# mixtures of experts, decoders read by a classification head, one family of each block shape a reader knows
SAMPLE = ("albert", "camembert", "mobilebert", "bloom", "mpt", "gpt_bigcode", "stablelm", "starcoder2", "cohere2",
          "granitemoe", "mamba", "falcon_h1", "qwen3_next", "t5", "llama", "gemma3_text", "gpt_neox", "qwen3_moe",
          "modernbert")


@pytest.mark.parametrize("model_type", SAMPLE)
def test_a_sample_of_architectures_does_what_the_sweep_recorded(model_type):
    heads = bench_sweep.model_types()
    row = bench_sweep.check_type(model_type, heads[model_type])
    recorded = next(r for r in RECORD["rows"] if r["type"] == model_type)
    assert row["status"] == recorded["status"], (row, recorded)
    assert row["decomposes"] == recorded["decomposes"], (row, recorded)
    if row["status"] != "runs":
        assert row["why"] and "\n" not in row["why"]


def test_the_sweep_covers_every_type_and_the_docs_quote_its_counts():
    import transformers

    assert RECORD["transformers"] == transformers.__version__  # a new transformers: rerun the sweep
    assert [r["type"] for r in RECORD["rows"]] == list(bench_sweep.model_types())
    counts = RECORD["counts"]
    assert sum(counts.values()) == RECORD["types"] == len(RECORD["rows"])
    text = " ".join((ROOT / "docs" / "own-data.md").read_text().split())
    loads = counts["runs"] + counts["loads, does not run"]
    said = (f"Of the {RECORD['types']} architectures transformers {RECORD['transformers']} builds with one of those "
            f"heads, {loads} load, {counts['runs']} run the model-agnostic methods and an erasure metric, and "
            f"{len(RECORD['decomposes'])} are decomposed exactly by a layer reader")
    assert said in text, said
    # every sample type was recorded with a status, and the named families of the docs run
    assert all(any(r["type"] == t for r in RECORD["rows"]) for t in SAMPLE)
    named = ("gemma2", "gemma3_text", "gpt_neox", "qwen3", "olmo2", "phi3", "modernbert", "deberta-v2",
             "xlm-roberta", "electra", "mixtral", "olmoe", "qwen3_moe")
    assert all(next(r for r in RECORD["rows"] if r["type"] == t)["status"] == "runs" for t in named)
    # every family with a reader that the sweep builds and runs is decomposed exactly: no reader misreads its
    # family's default configuration
    from attrbench.models.architectures import ARCHITECTURES

    assert RECORD["readers"] == sorted(ARCHITECTURES)  # a new reader: rerun the sweep
    import transformers as hf

    read = {r["type"] for r in RECORD["rows"]  # by the model type its config class gives (gpt-sw3 is GPT-2's)
            if hf.CONFIG_MAPPING[r["type"]].model_type in ARCHITECTURES and r["status"] == "runs"}
    assert read == set(RECORD["decomposes"]) and set(named) <= read
