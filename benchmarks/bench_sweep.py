"""Every architecture transformers builds for causal LM, masked LM or sequence classification, as a tiny random model.

    python benchmarks/bench_sweep.py [--out benchmarks/results/sweep-cpu.json] [--types a,b,...]

Each model type in transformers' three auto mappings (``MODEL_FOR_MASKED_LM``, ``MODEL_FOR_CAUSAL_LM``,
``MODEL_FOR_SEQUENCE_CLASSIFICATION``; the first that has it, in that order) is built from its own config class by
one generic rule (``attrbench.models.tiny.shrunk_config``: 2 layers, width 32, 4 heads, the tiny vocabulary), every
parameter randomised, eager attention, in float64 (so that what the conformance check finds is the model's handling
of padding or the method's, not float32's rounding of a random model's large activations), and then:

- ``loads``: ``TransformerAdapter`` accepts it (token embeddings, no encoder-decoder, it runs on input ids);
- ``runs``: ``attrbench.attribute`` with a gradient method (``grad_x_input``) and a perturbation method
  (``occlusion``), and ``erasure_aopc`` on the same text, give finite values, and both methods pass the conformance
  check (``attrbench.plugin.check_method``);
- ``decomposes``: the family has a layer reader (``attrbench.models.architectures.ARCHITECTURES``) and every scope
  of every layer sums to the unmodified forward pass within the default tolerance (``attrbench.decompose``; a
  reader that misreads a configuration of its family raises there, recorded with why).

A type that does not build is recorded with the first line of transformers' error (the rule does not fit every
config: a few validate their own field combinations); one that builds and fails is recorded with attrbench's. Each
chunk of types runs in a fresh process, so one model's memory is not the next one's. docs/own-data.md quotes the
counts; tests/models/test_sweep.py checks a fixed sample in CI and reads the counts back.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = {True: "the keys to the cabinet are", False: "the keys to the cabinet [MASK] on the table"}


def model_types() -> dict[str, str]:
    """{model type: head}, every type of the three mappings with the first head it has (masked, causal, classifier)."""
    from transformers.models.auto import modeling_auto as auto

    heads = {}
    for head, mapping in (("masked_lm", auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
                          ("causal_lm", auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
                          ("classifier", auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)):
        for model_type in mapping:
            heads.setdefault(model_type, head)
    return dict(sorted(heads.items()))


def _line(err: BaseException) -> str:
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"


def check_type(model_type: str, head: str) -> dict:
    """Build one tiny model of ``model_type`` and run what every family runs on it; what happened, with why."""
    import numpy as np
    import transformers

    import attrbench
    from attrbench.models import TransformerAdapter
    from attrbench.models.architectures import ARCHITECTURES
    from attrbench.datasets.base import Example
    from attrbench.models.tiny import build_family
    from attrbench.plugin import EvalContext, check_method
    from attrbench.runtime.workspace import Workspace
    from attrbench.registry import EVALS, METHODS

    transformers.logging.set_verbosity_error()
    began = time.perf_counter()
    out = {"type": model_type, "head": head, "decomposes": False}
    try:
        model, tokenizer = build_family(model_type, head)
        model = model.double()  # float64: a batched run that differs from one-by-one is padding, not rounding
    except Exception as err:  # noqa: BLE001 - the config's own validation, recorded as why it does not build
        return {**out, "status": "does not build", "why": _line(err)}
    try:
        adapter = TransformerAdapter(model, tokenizer, f"tiny-{model_type}")
        out["causal"] = adapter.causal
        text = TEXTS[adapter.causal]
        target = "class:1" if head == "classifier" else "contrast:are/is"
        scores = attrbench.attribute(adapter, text, ["grad_x_input", "occlusion"], target=target).to_pandas()
        assert np.isfinite(scores.score).all(), "non-finite scores"
        for name in ("grad_x_input", "occlusion"):
            check_method(METHODS.get(name), adapter, texts=(text, "the dogs run"))
        example = Example(id="sweep:0", text=text, target=target)
        records = EVALS.get("erasure_aopc")(adapter, [METHODS.get("grad_x_input")], [example],
                                            EvalContext("sweep", progress=False, shared=Workspace()))
        assert records and all(np.isfinite(v) for r in records for v in r["values"] if v is not None), "erasure"
        if adapter.layers:
            try:
                attrbench.decompose(adapter, [text, "the dogs run"])
                out["decomposes"] = True
            except Exception as err:  # noqa: BLE001 - a reader that misreads this configuration: recorded
                out["decomposes_why"] = _line(err)
        elif model_type in ARCHITECTURES:
            out["decomposes_why"] = "its reader refuses this configuration"
    except Exception as err:  # noqa: BLE001 - recorded: attrbench's one-line reason, or the model's own error
        return {**out, "status": "loads, does not run" if "causal" in out else "does not load", "why": _line(err),
                "seconds": round(time.perf_counter() - began, 2)}
    return {**out, "status": "runs", "seconds": round(time.perf_counter() - began, 2)}


def _chunk_main(types: list[str]) -> None:
    """In a fresh process: one JSON line per type."""
    heads = model_types()
    for model_type in types:
        print(json.dumps(check_type(model_type, heads[model_type])), flush=True)


def _run_chunk(part: list[str]) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run([sys.executable, __file__, "--chunk", ",".join(part)], capture_output=True, text=True,
                          cwd=ROOT, timeout=3600)
    return {r["type"]: r for r in (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))}, done


def sweep(types: list[str], chunk: int = 25) -> list[dict]:
    rows = []
    for start in range(0, len(types), chunk):
        part = types[start:start + chunk]
        got, _ = _run_chunk(part)
        for model_type in part:
            if model_type not in got:  # its chunk's process died (memory): alone, so one type's end is its own
                alone, done = _run_chunk([model_type])
                got[model_type] = alone.get(model_type) or {
                    "type": model_type, "status": "does not build",
                    "why": f"its process ended ({done.returncode}) building it: "
                           + (done.stderr.strip().splitlines() or [""])[-1][:200]}
            rows.append(got[model_type])
        print(f"{min(start + chunk, len(types))} of {len(types)} types", file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sweep-cpu.json"))
    parser.add_argument("--types", help="comma-separated model types (default: all)")
    parser.add_argument("--chunk", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.chunk:
        _chunk_main(args.chunk.split(","))
        return 0
    import transformers

    from attrbench.models.architectures import ARCHITECTURES

    types = args.types.split(",") if args.types else list(model_types())
    began = time.perf_counter()
    rows = sweep(types)
    counts = {status: sum(r["status"] == status for r in rows)
              for status in ("runs", "loads, does not run", "does not load", "does not build")}
    record = {"what": "every transformers architecture with a causal-LM, masked-LM or classification head, tiny and "
                      "random: does it build, load and run the model-agnostic methods and an erasure metric",
              "command": "python benchmarks/bench_sweep.py", "transformers": transformers.__version__,
              "types": len(rows), "counts": counts,
              "decomposes": sorted(r["type"] for r in rows if r.get("decomposes")),
              "readers": sorted(ARCHITECTURES),
              "seconds": round(time.perf_counter() - began, 1), "processor": platform.processor() or platform.machine(),
              "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
