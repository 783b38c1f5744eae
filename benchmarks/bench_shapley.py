"""Benchmark: exact Shapley split of one MiniLM layer's FF activation, ours vs shap's Exact explainer.

    python benchmarks/bench_shapley.py [--n 15] [--layer 0] [--shap-rows 2]

The game of Kobayashi et al. 2024 (App. E): for every output row i and each of the d' activation
elements, players = the n token parts of the pre-activation plus the bias (n + 1 players),
v(S) = g(sum_S p). shap is used at its best: one Exact-explainer call per row, all d' elements as
the outputs of one game. shap is timed on --shap-rows rows (each row is an independent call of
the same size) and its per-row time is multiplied by n; ours covers all n rows in one call.
Ours is timed twice: the default engine (the fused numba kernel for a float32 GELU game) and the
torch engine ``exact_dense`` that any activation and dtype can use.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from bench_decompose import text_of_length  # same folder: run as python benchmarks/bench_shapley.py

import attrbench
from attrbench.decompose import shapley


def players_of(adapter, text: str, layer: int) -> torch.Tensor:
    """(n + 1, n, d') pre-activation players of one layer: token parts and the bias, for all rows."""
    ff_in = "atb_ln" if adapter.norm_first else "atb"
    dec = attrbench.decompose(adapter, text, scopes=[ff_in], layers=[layer], keep_parts=True)[0]
    parts, bias = dec.parts[0][ff_in]  # (rows, n, d), (rows, d)
    w_in = adapter.layers[layer].ff.w_in
    with torch.no_grad():
        token_players = (parts @ w_in.weight).transpose(0, 1)  # (n, rows, d')
        bias_player = w_in(bias)[None]
    return torch.cat([token_players, bias_player]).detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--shap-rows", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/shapley-cpu.json")
    args = parser.parse_args()

    import transformers

    transformers.logging.set_verbosity_error()
    adapter = attrbench.load_model(args.model)
    text = text_of_length(adapter, args.n)
    players = players_of(adapter, text, args.layer)
    g = adapter.layers[args.layer].ff.activation
    P, rows, elements = players.shape
    print(f"{args.model} layer {args.layer}: n = {args.n} tokens -> {P} players (tokens + bias), {rows} rows, "
          f"{elements} activation elements per row", flush=True)

    start = time.perf_counter()
    shapley.exact(g, [players[:, :1]])
    first_call = time.perf_counter() - start
    print(f"first call: {first_call:.2f} s (imports numba, compiles the kernel or loads it from its cache)")

    def best_of(engine, repeats: int) -> tuple[torch.Tensor, float]:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            values = engine(g, [players])
            times.append(time.perf_counter() - start)
        return values, min(times)

    ours, ours_seconds = best_of(shapley.exact, 3)
    dense, dense_seconds = best_of(shapley.exact_dense, 2)
    print(f"ours (shapley-exact, all {rows} rows in one call): {ours_seconds:.3f} s; "
          f"torch engine (exact_dense): {dense_seconds:.3f} s", flush=True)

    start = time.perf_counter()
    theirs = shapley.with_shap(g, [players[:, : args.shap_rows]], "shap-exact")
    shap_per_row = (time.perf_counter() - start) / args.shap_rows
    gap = float((theirs - ours[:, : args.shap_rows]).abs().max())
    dense_gap = float((theirs - dense[:, : args.shap_rows]).abs().max())
    shap_total = shap_per_row * rows
    efficiency = float((ours.sum(0) - g(players.sum(0))).abs().max())
    print(f"shap Exact explainer: {shap_per_row:.1f} s per row (timed on {args.shap_rows} rows) -> "
          f"{shap_total:.0f} s for {rows} rows", flush=True)
    print(f"speed-up {shap_total / ours_seconds:.0f}x (torch engine {shap_total / dense_seconds:.0f}x); "
          f"max |ours - shap| {gap:.1e} (torch engine {dense_gap:.1e}); efficiency error {efficiency:.1e}")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "layer": args.layer, "n": args.n, "players": P,
                               "elements": elements, "ours_seconds": ours_seconds,
                               "first_call_seconds": first_call, "dense_seconds": dense_seconds,
                               "dense_max_abs_gap": dense_gap,
                               "shap_seconds_per_row": shap_per_row, "shap_rows_timed": args.shap_rows,
                               "shap_seconds_all_rows": shap_total, "speedup": shap_total / ours_seconds,
                               "max_abs_gap": gap, "efficiency_error": efficiency}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
