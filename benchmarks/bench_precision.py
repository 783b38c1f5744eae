"""Precision of the decomposition on the tiny random models: the figures docs/architecture.md prints.

    python benchmarks/bench_precision.py [--out benchmarks/results/precision-cpu.json] [--threads 1]

Each figure is the largest gap (or the range) over what it names, measured with the product's own APIs against
the references the tests use:

- ``completeness``: the relative residual of every scope of every tiny model (both value-bias modes, the three
  test texts, all layers) against the real forward pass, ``Decomposition.residuals``. In float64, OPT's and
  LLaMA's scopes that follow an operation their Hugging Face code runs in float32 (the softmax when b_V is
  moved to the bias; LLaMA's RMSNorm before the FF) are kept apart from the rest.
- ``ig_vs_captum``: the engine's FF parts (closed-form IG) against the paper's formulation, captum's
  IntegratedGradients per row with 256 Gauss-Legendre steps on unfactored projections
  (``attrbench.decompose.reference``), largest gap relative to the largest part, every layer, float64; plain FFs
  (GELU, GELU-tanh, ReLU) and gated ones (SwiGLU: tiny-llama; GeGLU: tiny-llama with a GELU gate).
- ``shapley_vs_shap``: the exact Shapley values of layer 0's FF activation (players: the token parts and the bias
  of the FF pre-activation) from ``shapley.exact`` (the fused numba kernel in float32) against shap's Exact
  explainer (``shapley.with_shap``) on the same players, largest absolute gap.
- ``ig_vs_shapley_spearman``: Spearman's correlation (scipy) of the IG and exact-Shapley maps of the FF scope,
  every layer, float64.
- ``printed_res2``: the paper's printed RES2 (Eq. 53/57, only the j = i attention part added) against the real
  layer output, relative to it, largest over a layer's rows; the complete form's gap beside it.
- ``batched_vs_single``: maps of a padded batch of six texts (the test texts and three of 33 to 61 words) against
  each text alone, float64, largest gap relative to max(1, largest map entry).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from bench_readme_python import cpu_model  # same folder: run as python benchmarks/bench_precision.py
from scipy.stats import spearmanr

import attrbench
from attrbench.decompose import shapley
from attrbench.decompose.reference import ff_parts_reference
from attrbench.models import TransformerAdapter, load_model
from attrbench.models.tiny import TINY_MODELS, build_tiny

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "AMD EPYC VM, 2 CPU cores, no GPU"
TEXTS = ["the keys to the cabinet are on the table .", "a wonderful film", "dogs run"]  # tests/conftest.py's
TEXT = "the keys to the cabinet are on the table"
SHORT_TEXT = "the keys to the cabinet"
STORY = "the old man sees the boys near the house and the dogs run to the table because they like the story".split()
# the test texts and three long ones (61 words: 63 tokens with an encoder's specials, under the 64 positions)
BATCH_TEXTS = TEXTS + [" ".join(STORY[k % len(STORY)] for k in range(n)) for n in (33, 47, 61)]
FLOAT32_LN2 = {"atb_ln", "atb_ln_ff", "atb_ln_ff_res"}  # Pre-LN scopes after the norm before the FF


def after_float32_ops(adapter, scope: str, value_bias: str) -> bool:
    """Whether a float64 scope follows an operation the model's own code runs in float32."""
    internals = adapter.architecture.float32_internals
    return ("RMSNorm" in internals and scope in FLOAT32_LN2) or ("softmax" in internals and value_bias == "bias")


def ff_scopes(adapter) -> tuple[str, str]:
    """(the FF's input scope, its output scope)."""
    return ("atb_ln", "atb_ln_ff") if adapter.norm_first else ("atb", "atb_ff")


def completeness(models: dict) -> dict:
    groups: dict[str, list[float]] = {"float64": [], "float64_before_float32_ops": [],
                                      "float64_after_float32_ops": [], "float32": []}
    per_model: dict[str, dict[str, float]] = {}
    for (name, dtype), adapter in models.items():
        for value_bias in ("token", "bias"):
            for dec in attrbench.decompose(adapter, TEXTS, value_bias=value_bias, tolerance=1.0):
                for scope, residual in dec.residuals.items():
                    key = f"{dtype} {value_bias}"
                    model = per_model.setdefault(name, {})
                    model[key] = max(model.get(key, 0.0), residual)
                    if dtype == "float32":
                        groups["float32"].append(residual)
                    elif not adapter.architecture.float32_internals:
                        groups["float64"].append(residual)
                    elif after_float32_ops(adapter, scope, value_bias):
                        groups["float64_after_float32_ops"].append(residual)
                    else:
                        groups["float64_before_float32_ops"].append(residual)
    return {"what": "max relative completeness residual, every scope and layer, value_bias token and bias, "
                    "the three test texts",
            "models": list(TINY_MODELS),
            "float64_models": [n for n in TINY_MODELS if not models[(n, "float64")].architecture.float32_internals],
            "float32_internals_models": [n for n in TINY_MODELS
                                         if models[(n, "float64")].architecture.float32_internals],
            **{f"max_{group}": max(values) for group, values in groups.items()},
            "max_per_model": per_model}


def geglu_llama() -> TransformerAdapter:
    model, tokenizer = build_tiny("tiny-llama", {"hidden_act": "gelu"})
    return TransformerAdapter(model.double(), tokenizer, "tiny-llama-geglu")


def ig_vs_captum(models: dict) -> dict:
    adapters = {name: models[(name, "float64")] for name in TINY_MODELS}
    adapters["tiny-llama-geglu"] = geglu_llama()
    rows = {}
    for name, adapter in adapters.items():
        ff_in, ff_out = ff_scopes(adapter)
        dec = attrbench.decompose(adapter, [TEXT], scopes=[ff_in, ff_out], keep_parts=True)[0]
        gap = 0.0
        for layer, parts in enumerate(dec.parts):
            ref_parts, ref_bias = ff_parts_reference(adapter.layers[layer].ff, *parts[ff_in], steps=256)
            ours, ours_bias = parts[ff_out]
            largest = max(float((ref_parts - ours).abs().max()), float((ref_bias.detach() - ours_bias).abs().max()))
            gap = max(gap, largest / float(ours.abs().max()))
        ff = adapter.layers[0].ff
        rows[name] = {"activation": type(ff.activation).__name__, "gated": ff.gated, "max_relative_gap": gap}
    return {"what": "engine FF parts (closed-form IG) vs captum IntegratedGradients, 256 Gauss-Legendre steps, "
                    "per row on unfactored projections; max |gap| / max |part| over layers, float64",
            "text": TEXT, "steps": 256,
            "max_plain": max(r["max_relative_gap"] for r in rows.values() if not r["gated"]),
            "max_gated": max(r["max_relative_gap"] for r in rows.values() if r["gated"]),
            "models": rows}


def ff_players(adapter, text: str, layer: int = 0) -> list[torch.Tensor]:
    """(P, rows, d') players per FF projection (gate and up for a gated FF): the token parts and the bias of the
    pre-activation, from the engine's parts of the FF input."""
    ff_in = ff_scopes(adapter)[0]
    parts, bias = attrbench.decompose(adapter, text, scopes=[ff_in], layers=[layer], keep_parts=True)[0].parts[0][ff_in]
    ff = adapter.layers[layer].ff
    return [torch.cat([(parts @ proj.weight).transpose(0, 1), proj(bias)[None]]).detach()
            for proj in ([ff.w_in] + ([ff.up] if ff.gated else []))]


def shapley_vs_shap(models: dict) -> dict:
    rows: dict[str, dict] = {}
    for dtype in ("float64", "float32"):
        for name in ("tiny-bert", "tiny-gpt2", "tiny-opt", "tiny-llama"):
            adapter = models[(name, dtype)]
            g = adapter.layers[0].ff.activation
            players = ff_players(adapter, SHORT_TEXT)
            ours, theirs = shapley.exact(g, players), shapley.with_shap(g, players, "shap-exact")
            rows.setdefault(name, {"activation": type(g).__name__, "players": players[0].shape[0],
                                   "rows": players[0].shape[1], "elements": players[0].shape[2]})
            rows[name][f"{dtype}_max_abs_gap"] = float((ours.double() - theirs.double()).abs().max())
            rows[name][f"{dtype}_max_abs_value"] = float(theirs.abs().max())
    return {"what": "shapley.exact (float32: the fused numba kernel) vs shap's Exact explainer on the same players "
                    "(layer 0's FF pre-activation: token parts and the bias), max absolute gap",
            "text": SHORT_TEXT,
            "max_float64": max(r["float64_max_abs_gap"] for r in rows.values()),
            "max_float32": max(r["float32_max_abs_gap"] for r in rows.values()),
            "models": rows}


def ig_vs_shapley(models: dict) -> dict:
    rows = {}
    for name in TINY_MODELS:
        adapter = models[(name, "float64")]
        ig, sv = (attrbench.decompose(adapter, TEXT, ff_attribution=f)[0] for f in ("ig", "shapley-exact"))
        scope = ff_scopes(adapter)[1]
        rows[name] = {"scope": scope,
                      "spearman": float(spearmanr(ig.maps[scope].ravel(), sv.maps[scope].ravel()).statistic)}
    rho = [r["spearman"] for r in rows.values()]
    return {"what": "Spearman correlation of the FF scope's IG and exact-Shapley maps, every layer, float64",
            "text": TEXT, "min": min(rho), "max": max(rho), "models": rows}


def printed_res2(models: dict) -> dict:
    rows = {}
    for name in TINY_MODELS:
        adapter = models[(name, "float64")]
        ff_out, res_scope = ff_scopes(adapter)[1], "atb_ln_ff_res" if adapter.norm_first else "atb_ff_res"
        dec = attrbench.decompose(adapter, TEXTS[:1], scopes=["atb", ff_out, res_scope], keep_parts=True)[0]
        printed_gaps, complete_gaps = [], []
        for parts in dec.parts:
            (atb, atb_bias), (ff, ff_bias), (res, res_bias) = (parts[s] for s in ("atb", ff_out, res_scope))
            real = res.sum(1) + res_bias
            idx = torch.arange(len(atb))
            printed = ff.clone()
            printed[idx, idx] += atb[idx, idx]
            printed_gaps.append(float(((printed.sum(1) + ff_bias + atb_bias - real).norm(dim=-1)
                                       / real.norm(dim=-1)).max()))
            complete_gaps.append(float(((ff + atb).sum(1) + ff_bias + atb_bias - real).abs().max()
                                       / real.abs().max()))
        rows[name] = {"scope": res_scope, "printed_relative_error_per_layer": printed_gaps,
                      "complete_relative_error": max(complete_gaps)}
    printed = [e for r in rows.values() for e in r["printed_relative_error_per_layer"]]
    return {"what": "the paper's printed RES2 (only the j = i attention part added) vs the real layer output: "
                    "max over rows of |error| / |output| per layer; the complete form's max gap beside it, float64",
            "text": TEXTS[0], "min": min(printed), "max": max(printed),
            "complete_max": max(r["complete_relative_error"] for r in rows.values()), "models": rows}


def batched_vs_single(models: dict) -> dict:
    rows = {}
    for name in TINY_MODELS:
        adapter = models[(name, "float64")]
        gap = 0.0
        for text, dec in zip(BATCH_TEXTS, attrbench.decompose(adapter, BATCH_TEXTS)):
            single = attrbench.decompose(adapter, [text])[0]
            for scope in dec.maps:
                scale = max(1.0, float(np.abs(dec.maps[scope]).max()))
                gap = max(gap, float(np.abs(single.maps[scope] - dec.maps[scope]).max()) / scale)
        rows[name] = {"float32_internals": adapter.architecture.float32_internals, "max_relative_gap": gap}
    return {"what": "maps of a padded batch vs each text alone, every scope and layer, float64, "
                    "max |gap| / max(1, max |map|)",
            "texts": BATCH_TEXTS,
            "max_float64_models": max(r["max_relative_gap"] for r in rows.values() if not r["float32_internals"]),
            "max_float32_internals_models": max(r["max_relative_gap"] for r in rows.values()
                                                if r["float32_internals"]),
            "models": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "precision-cpu.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the figures do not depend on it)")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    began, cpu = time.perf_counter(), time.process_time()
    models = {(name, dtype): load_model(name, dtype) for name in TINY_MODELS for dtype in ("float64", "float32")}
    figures = {}
    for key, measure in (("completeness", completeness), ("ig_vs_captum", ig_vs_captum),
                         ("shapley_vs_shap", shapley_vs_shap), ("ig_vs_shapley_spearman", ig_vs_shapley),
                         ("printed_res2", printed_res2), ("batched_vs_single", batched_vs_single)):
        start = time.perf_counter()
        figures[key] = measure(models)
        shown = {k: v for k, v in figures[key].items() if isinstance(v, float)}
        print(f"{key} ({time.perf_counter() - start:.1f} s): " + ", ".join(f"{k} {v:.2g}" for k, v in shown.items()),
              flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    record = {"what": "precision figures of docs/architecture.md, measured on the tiny random models",
              "command": "python benchmarks/bench_precision.py", "machine": MACHINE, "processor": cpu_model(),
              "cores": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
              "torch": torch.__version__, "commit": commit.stdout.strip(),
              "seconds": round(time.perf_counter() - began, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
              **figures}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({record['seconds']} s, {record['cpu_seconds']} s of CPU)")


if __name__ == "__main__":
    main()
