"""Why integrated gradients needs an adaptive path on SmolLM2: fixed Gauss-Legendre rules against the adaptive one.

    python benchmarks/bench_ig_convergence.py [--n 20] [--steps 16,50,200] [--baselines pad,unk]
                                              [--parts fixed,adaptive,path,float64,norm] [--json OUT.json]

On the first ``--n`` examples of sva-linzen in the leaderboards' seeded order (seed 0; contrasts of one token with
itself passed over), as ``smollm2-135m`` reads them (logit(correct) - logit(wrong) for the next token), this
records per example the completeness gap |sum IG - (F(e) - F(e'))| / |F(e) - F(e')|:

- of a fixed rule: ``integrated_gradients`` with ``n_steps = max_steps`` (one segment), per token baseline and
  number of steps, and of captum's ``IntegratedGradients`` from the zero embedding (``--zero-steps``);
- of the adaptive rule (the method's defaults), with the gradient evaluations it spent and whether it converged;
- the total variation of F along the straight path from the pad baseline, sum |F(a_k+1) - F(a_k)| over
  ``--points`` equally spaced a, over |F(e) - F(e')|, on the first ``--tv-examples`` examples (``path``), and again
  with the model in float64 (``float64``: the largest relative difference from float32's);
- the smallest mean square of an interpolated embedding along that path, relative to the token's own and to the
  model's RMSNorm eps, over every token of the ``--n`` examples (``norm``: is the path near RMSNorm's zero?).

Each part (``--parts``) writes its own keys into the record, so a part can be rerun alone.

docs/methods.md and the method's docstring quote the summary this prints and writes to the JSON record.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "ig-convergence-smollm2-cpu.json"


def path_probe(points: int, zero_steps: tuple[int, ...]):
    """An unregistered gradient method whose 'attribution' is zero and whose metadata hold the path's total variation
    (pad baseline) and the gaps of captum's IG from the zero embedding."""
    from attrbench.plugin import GradientMethod, captum_attr
    from attrbench.plugin.internal import baseline_ids

    class PathProbe(GradientMethod):
        name, description = "path_probe", "the score along integrated gradients' straight path"

        def attribute(self, forward, layer, input_ids, attention_mask, adapter):
            end = layer(input_ids).detach()
            start = layer(baseline_ids(adapter, input_ids, "pad")).detach()
            alphas = torch.linspace(0, 1, points, dtype=end.dtype, device=end.device)[:, None, None]
            with torch.no_grad():
                along = torch.cat([forward(start + a * (end - start), attention_mask).double()
                                   for a in alphas.split(64)])
                zero = forward(torch.zeros_like(end), attention_mask).double()
            change = float(along[-1] - along[0])
            meta = {"total_variation": float(along.diff().abs().sum()) / abs(change)}
            engine = captum_attr().IntegratedGradients(forward)
            for steps in zero_steps:
                attributions = engine.attribute(end, baselines=torch.zeros_like(end),
                                                additional_forward_args=(attention_mask,), n_steps=steps,
                                                method="gausslegendre")
                explained = float(along[-1] - zero)
                meta[f"zero_{steps}"] = abs(float(attributions.double().sum()) - explained) / abs(explained)
            return np.zeros(input_ids.shape[1]), meta

    return PathProbe()


def smallest_mean_square(adapter, texts: list[str], points: int) -> dict:
    """Along the straight path from the pad baseline, the smallest mean square of an interpolated token embedding,
    over every non-special token of ``texts``: relative to the token's own embedding and to RMSNorm's eps."""
    from attrbench.plugin.internal import baseline_ids

    layer = adapter.model.get_input_embeddings()
    alphas = torch.linspace(0, 1, points, dtype=torch.float64)[:, None, None]
    ratio, over_eps = np.inf, np.inf
    eps = adapter.model.config.rms_norm_eps
    with torch.no_grad():
        for text in texts:
            ids = adapter.encode([text]).input_ids
            pad = baseline_ids(adapter, ids, "pad")
            end, start, changed = layer(ids)[0].double(), layer(pad)[0].double(), (ids != pad)[0]
            square = ((start + alphas * (end - start)) ** 2).mean(-1)[:, changed]  # (points, tokens)
            ratio = min(ratio, float((square / square[-1]).min()))
            over_eps = min(over_eps, float(square.min()) / eps)
    return {"points": points, "texts": len(texts), "relative_to_token": ratio, "over_rms_norm_eps": over_eps,
            "rms_norm_eps": eps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--steps", default="16,50,200")
    parser.add_argument("--baselines", default="pad,unk")
    parser.add_argument("--zero-steps", default="50,200")
    parser.add_argument("--tv-examples", type=int, default=6)
    parser.add_argument("--points", type=int, default=1001)
    parser.add_argument("--parts", default="fixed,adaptive,path,float64,norm")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=str(OUT))
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.threads:
        torch.set_num_threads(args.threads)

    import attrbench
    from attrbench.datasets.lookup import examples_for, sample
    from attrbench.models import load_model
    from attrbench.ops.targets import same_contrast

    adapter = load_model("smollm2-135m")
    examples = sample(examples_for(adapter, "sva-linzen")[0], args.n, 0, lambda e: not same_contrast(adapter, e.target))
    texts, targets = [e.text for e in examples], [e.target for e in examples]
    out = Path(args.json)
    record = json.loads(out.read_text()) if out.exists() else {}
    if record and record.get("examples") != [e.id for e in examples]:
        raise SystemExit(f"{out} holds other examples: write the parts of another --n to another --json")
    record.update({
        "what": "integrated gradients' completeness gap on SmolLM2-135M: fixed Gauss-Legendre rules, the adaptive "
                "rule, the zero baseline, the total variation of the score along the straight path (float32 and "
                "float64) and how near the path's embeddings come to RMSNorm's zero",
        "model": "smollm2-135m", "dataset": "sva-linzen", "examples": [e.id for e in examples],
        "machine": "AMD EPYC VM, 2 CPU cores, no GPU", "torch": torch.__version__, "python": platform.python_version(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip()})
    seconds = record.setdefault("seconds", {})  # per part

    def metas(params: dict, method="integrated_gradients", on=None, model=adapter) -> list[dict]:
        chosen = on or len(texts)
        named = isinstance(method, str)
        result = attrbench.attribute(model, texts[:chosen], method if named else [method], target=targets[:chosen],
                                     params={"integrated_gradients": params} if named else None)
        return [r[getattr(method, "name", method)].meta for r in result.results]

    if "fixed" in parts:
        began, fixed = time.perf_counter(), {}
        for baseline in args.baselines.split(","):
            for steps in map(int, args.steps.split(",")):
                gaps = [m["relative_delta"] for m in metas({"n_steps": steps, "max_steps": steps,
                                                            "baseline": baseline})]
                fixed[f"{baseline}_{steps}"] = {"median_gap": float(np.median(gaps)),
                                                "within_5_percent": int(sum(g <= 0.05 for g in gaps)), "gaps": gaps}
                print(f"fixed rule, {baseline} baseline, {steps} steps: median gap {np.median(gaps):.2f}, "
                      f"{fixed[f'{baseline}_{steps}']['within_5_percent']} of {len(gaps)} within 5 %", flush=True)
        record["fixed"], seconds["fixed"] = fixed, round(time.perf_counter() - began, 1)
    if "adaptive" in parts:
        began, adaptive = time.perf_counter(), metas({})
        used = [m["n_steps"] for m in adaptive]
        record["adaptive"] = {"converged": int(sum(m["converged"] for m in adaptive)), "evaluations_min": min(used),
                              "evaluations_max": max(used), "evaluations_mean": float(np.mean(used)),
                              "relative_delta_max": max(m["relative_delta"] for m in adaptive), "evaluations": used}
        seconds["adaptive"] = round(time.perf_counter() - began, 1)
        print(f"adaptive rule: {record['adaptive']['converged']} of {len(used)} converged, {min(used)} to "
              f"{max(used)} evaluations (mean {np.mean(used):.0f})", flush=True)
    if "path" in parts:
        began, zero_steps = time.perf_counter(), tuple(map(int, args.zero_steps.split(",")))
        probes = metas({}, path_probe(args.points, zero_steps), on=args.tv_examples)
        variation = [m["total_variation"] for m in probes]
        zero = {steps: [m[f"zero_{steps}"] for m in probes] for steps in zero_steps}
        record["zero_baseline"] = {str(s): {"median_gap": float(np.median(v)), "gaps": v} for s, v in zero.items()}
        record["total_variation"] = {"examples": len(variation), "points": args.points, "min": min(variation),
                                     "max": max(variation), "values": variation}
        seconds["path"] = round(time.perf_counter() - began, 1)
        print(f"total variation / |F(e) - F(e')| on {len(variation)} examples: {min(variation):.1f} to "
              f"{max(variation):.1f}; zero baseline median gap " +
              ", ".join(f"{np.median(v):.2f} at {s} steps" for s, v in zero.items()), flush=True)
    if "float64" in parts:
        began, float32 = time.perf_counter(), record["total_variation"]
        wide = load_model("smollm2-135m", "float64")
        variation = [m["total_variation"] for m in metas({}, path_probe(float32["points"], ()),
                                                         on=float32["examples"], model=wide)]
        record["total_variation_float64"] = {
            "values": variation, "max_relative_difference": max(abs(a - b) / b for a, b in
                                                                zip(variation, float32["values"]))}
        seconds["float64"] = round(time.perf_counter() - began, 1)
        print(f"float64 total variation: {min(variation):.1f} to {max(variation):.1f}, at most "
              f"{record['total_variation_float64']['max_relative_difference']:.1g} from float32's", flush=True)
    if "norm" in parts:
        record["mean_square"] = smallest_mean_square(adapter, texts, args.points)
        print(f"smallest mean square along the path: {record['mean_square']['relative_to_token']:.2f} of the "
              f"token's, {record['mean_square']['over_rms_norm_eps']:.0f} times RMSNorm's eps", flush=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
