"""How far the fused Shapley kernel's float32 GELU and torch's own float32 GELU are from float64 GELU, on this CPU.

    python benchmarks/bench_gelu.py [--out benchmarks/results/gelu-cpu.json]

Both are approximations, and which is the closer depends on the CPU (torch's vectorised erf differs between
processors, beyond what ``ATEN_CPU_CAPABILITY`` selects), so the record names the processor it was measured on
(vendor, family, model and torch's CPU capability) and docs/performance.md quotes it as that CPU's figures. What
holds on every CPU, both within float32's bound for the formula, is what tests/decompose/test_shapley.py checks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
POINTS = 2 ** 22 + 1  # evenly spaced on [-12, 12]


def cpu_signature() -> dict:
    """The processor as /proc/cpuinfo names it (vendor, family, model, model name) and torch's CPU capability."""
    fields = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "model name": "model_name"}
    found: dict = {}
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        key, _, value = line.partition(":")
        if key.strip() in fields and fields[key.strip()] not in found:
            found[fields[key.strip()]] = value.strip()
    return {**found, "torch_capability": torch.backends.cpu.get_cpu_capability()}


def kernel_gelu(x: np.ndarray) -> np.ndarray:
    """The fused kernel's GELU (Abramowitz & Stegun 7.1.28 for erf), element by element, as the kernel runs it."""
    from numba import njit

    from attrbench.decompose.shapley.fused import _gelu

    @njit
    def run(values):
        out = np.empty_like(values)
        for i in range(values.size):
            out[i] = _gelu(values[i])
        return out

    return run(x)


def measure() -> dict:
    """The largest absolute error of each float32 GELU against float64 on the points, and where it falls."""
    x = np.linspace(-12, 12, POINTS).astype(np.float32)
    exact = torch.nn.functional.gelu(torch.from_numpy(x).double()).numpy()
    errors = {"torch_float32": np.abs(torch.nn.functional.gelu(torch.from_numpy(x)).double().numpy() - exact),
              "kernel_float32": np.abs(kernel_gelu(x).astype(np.float64) - exact)}
    return {"points": POINTS, "interval": [-12, 12],
            **{name: {"max_abs_error": float(e.max()), "at": float(x[e.argmax()])} for name, e in errors.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gelu-cpu.json"))
    args = parser.parse_args(argv)
    record = {"what": "largest |float32 GELU - float64 GELU| of the fused kernel's and torch's, docs/performance.md",
              "command": "python benchmarks/bench_gelu.py", "cpu": cpu_signature(), "torch": torch.__version__,
              **measure()}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    json.dump(record, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
