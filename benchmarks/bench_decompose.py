"""Benchmark: all-scope decomposition of all layers, against the machine's matmul rate and the paper's way.

    python benchmarks/bench_decompose.py [--model minilm-l6] [--sizes 16,32,64,128,256,512]

For each sequence length n (each in a fresh process, so peak RSS is that run's): seconds for the
whole decomposition (forward pass included), peak RSS, and achieved GFLOP/s on the dominant
matmuls (the FF output projection of every part: 2 * layers * n_rows * n_cols * d' * d flops).
The machine's plain fp32 matmul rate is measured on the same shape. At --reference-n, the paper's
formulation (captum IG per row, 32 Gauss-Legendre steps, unfactored projections) is timed on the
same layers and its FF maps are compared with ours. Prints a table; writes JSON and a PNG figure.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

WORDS = ("the film is a good and moving story about three old friends who meet again after many years "
         "in a small town near the sea where they grew up together as boys").split()


def text_of_length(adapter, n: int) -> str:
    """A text that tokenises to exactly n tokens (specials included)."""
    words: list[str] = []
    while True:
        words.append(WORDS[len(words) % len(WORDS)])
        length = len(adapter.tokenizer(" ".join(words))["input_ids"])
        if length == n:
            return " ".join(words)
        if length > n:
            raise SystemExit(f"cannot build a text of exactly {n} tokens")


def dominant_flops(adapter, n: int) -> float:
    spec = adapter.layers[0]
    d_ff, d = spec.ff.w_out.weight.shape
    pairs = n * (n + 1) / 2 if adapter.causal else n * n
    return 2.0 * adapter.n_layers * pairs * d_ff * d


def matmul_gflops(rows: int = 8192, inner: int = 1536, cols: int = 384, repeats: int = 5) -> float:
    """Best-of plain fp32 GEMM rate on the engine's dominant shape (and a square check)."""
    best = 0.0
    for shape in ((rows, inner, cols), (2048, 2048, 2048)):
        a, b = torch.randn(shape[0], shape[1]), torch.randn(shape[1], shape[2])
        a @ b
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = max(best, 2.0 * shape[0] * shape[1] * shape[2] / (time.perf_counter() - start) / 1e9)
    return best


def run_one(model: str, n: int, repeats: int) -> dict:
    import transformers

    import attrbench

    transformers.logging.set_verbosity_error()
    adapter = attrbench.load_model(model)
    text = text_of_length(adapter, n)
    attrbench.decompose(adapter, "warm up the kernels")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        dec = attrbench.decompose(adapter, text)[0]
        times.append(time.perf_counter() - start)
    seconds = min(times)
    return {"n": n, "seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "gflops": dominant_flops(adapter, n) / seconds / 1e9, "max_residual": max(dec.residuals.values())}


def run_reference(model: str, n: int) -> dict:
    """The paper's formulation on every layer vs the engine: time and agreement of the FF maps."""
    import transformers

    import attrbench
    from attrbench.decompose.reference import ff_parts_reference

    transformers.logging.set_verbosity_error()
    adapter = attrbench.load_model(model)
    text = text_of_length(adapter, n)
    ff_in, ff_out = ("atb_ln", "atb_ln_ff") if adapter.norm_first else ("atb", "atb_ff")
    attrbench.decompose(adapter, "warm up the kernels")
    engine_times = []
    for _ in range(3):  # best of 3, as for the size sweep
        start = time.perf_counter()
        ours = attrbench.decompose(adapter, text)[0]
        engine_times.append(time.perf_counter() - start)
    engine_seconds = min(engine_times)
    inputs = attrbench.decompose(adapter, text, scopes=[ff_in], keep_parts=True)[0]
    start = time.perf_counter()
    ref_maps = []
    for layer, parts in enumerate(inputs.parts):
        ref_parts, _ = ff_parts_reference(adapter.layers[layer].ff, *parts[ff_in], steps=32)
        ref_maps.append(torch.linalg.vector_norm(ref_parts, dim=-1))
    reference_seconds = time.perf_counter() - start
    ref = torch.stack(ref_maps).numpy()
    gap = float(abs(ref - ours.maps[ff_out]).max() / abs(ours.maps[ff_out]).max())
    return {"n": n, "engine_all_scopes_seconds": engine_seconds, "reference_ff_only_seconds": reference_seconds,
            "speedup": reference_seconds / engine_seconds, "max_relative_map_gap": gap}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _subprocess(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--sizes", default="16,32,64,128,256,512")
    parser.add_argument("--reference-n", type=int, default=68, help="0 skips the paper-formulation comparison")
    parser.add_argument("--out", default="benchmarks/results/decompose-cpu.json")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reference", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.model, args.one, repeats=3 if args.one <= 128 else 1)))
        return
    if args.reference:
        print(json.dumps(run_reference(args.model, args.reference)))
        return

    machine = {"cpu": _cpu_name(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
               "torch": torch.__version__, "matmul_gflops": matmul_gflops()}
    print(f"{machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}: plain fp32 matmul "
          f"{machine['matmul_gflops']:.0f} GFLOP/s", flush=True)
    print(f"{'n':>5} {'seconds':>9} {'peak RSS MB':>12} {'GFLOP/s':>9} {'% of matmul':>12} {'residual':>9}", flush=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        row = _subprocess(["--model", args.model, "--one", str(n)])
        row["fraction_of_matmul"] = row["gflops"] / machine["matmul_gflops"]
        rows.append(row)
        print(f"{n:>5} {row['seconds']:>9.3f} {row['peak_rss_mb']:>12.0f} {row['gflops']:>9.1f} "
              f"{100 * row['fraction_of_matmul']:>11.0f}% {row['max_residual']:>9.0e}", flush=True)
    reference = None
    if args.reference_n:
        reference = _subprocess(["--model", args.model, "--reference", str(args.reference_n)])
        print(f"\npaper formulation (captum IG per row, 32 GL steps, unfactored) at n={reference['n']}: "
              f"{reference['reference_ff_only_seconds']:.2f} s for the FF maps alone; engine, all scopes: "
              f"{reference['engine_all_scopes_seconds']:.3f} s -> {reference['speedup']:.0f}x faster; "
              f"max relative gap between their FF maps {reference['max_relative_map_gap']:.1e}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "machine": machine, "sizes": rows, "reference": reference},
                              indent=1))
    _plot(rows, machine, args.model, out.with_suffix(".png"))
    print(f"\nwrote {out} and {out.with_suffix('.png')}")


def _plot(rows: list[dict], machine: dict, model: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.loglog(ns, [r["seconds"] for r in rows], "o-")
    left.set(xlabel="sequence length n", ylabel="seconds (all layers, all scopes)", title=f"{model}: time")
    right.semilogx(ns, [100 * r["fraction_of_matmul"] for r in rows], "o-")
    right.axhline(50, ls="--", c="grey")
    right.set(xlabel="sequence length n", ylabel="% of plain fp32 matmul rate", ylim=(0, 100),
              title=f"achieved / {machine['matmul_gflops']:.0f} GFLOP/s")
    for ax in (left, right):
        ax.minorticks_off()
        ax.set_xticks(ns, [str(n) for n in ns])
    fig.suptitle(f"{machine['cpu']} ({machine['cores']} cores)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
