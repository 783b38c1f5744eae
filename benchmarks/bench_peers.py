"""The same attribution job by attrbench and by its peers, on one device, side by side: SST-2's dev sentences
explained by gradient × input, integrated gradients and LIME.

    python benchmarks/bench_peers.py [--classifier minilm-l6-sst2] [--lm smollm2-135m] [--n 872] [--device cuda]
                                     [--peer-seconds 30] [--peer-batch 32] [--json OUT.json]

Two jobs, one per peer, each on a model that peer explains:

- ``ferret`` (Attanasio et al. 2023; ferret-xai 0.4.2) explains a sequence classifier: ``--classifier``, class 1's
  logit, one sentence per call (its explainers take one text), with the batch sizes its explainers take set to
  ``--peer-batch`` (IG: captum's internal batch, which ferret's forward splits into its fixed batches of 8; LIME:
  its samples per pass);
- ``inseq`` (Sarti et al. 2023; inseq 0.7.1) explains a generative model: ``--lm``, the logit of the token " good"
  after each sentence, ``--peer-batch`` sentences per call (it batches sentences itself).

attrbench runs each job as a leaderboard does: all ``--n`` sentences in one ``attrbench.attribute`` call (its
own length-sorted, token-budgeted batches). Both run the same algorithm with the same settings (IG: 50 steps, no
refinement; LIME: 200 samples), on the same loaded model, after one warm-up call each. A peer runs until
``--peer-seconds`` have passed (whole calls), so its rate is measured on the sentences it reached; the speed-up
compares seconds per sentence. Where both explain the same sentence, ``r`` is the mean Pearson correlation of
the two engines' token scores: ≈ 1 for the deterministic methods shows the job is the same; LIME's draws differ
(lime's sampler vs captum's), so its r is only indicative.

The peers are imported without their package's top level (ferret's pulls its benchmark datasets, pinned to
transformers < 5); a peer that cannot be imported is reported and skipped.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import platform
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attrbench  # noqa: E402
from attrbench.datasets.lookup import examples_for  # noqa: E402
from attrbench.models import load_model  # noqa: E402

STEPS, SAMPLES, WORD = 50, 200, " good"
OURS = {"grad_x_input": {}, "integrated_gradients": {"n_steps": STEPS, "max_steps": STEPS, "baseline": "pad"},
        "lime": {"n_samples": SAMPLES}}


def synced(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def ours(adapter, texts: list[str], method: str, target: str, device: str, baseline: str):
    params = {method: {**OURS[method], **({"baseline": baseline} if "baseline" in OURS[method] else {})}}
    attrbench.attribute(adapter, texts[:2], method, target=target, params=params)  # warm-up
    synced(device)
    began = time.perf_counter()
    result = attrbench.attribute(adapter, texts, method, target=target, params=params)
    synced(device)
    seconds = time.perf_counter() - began
    return [np.asarray(r[method].values, dtype=float) for r in result.results], seconds


@functools.cache
def _ferret_explainers():
    """ferret's explainer modules, without ``ferret/__init__`` (which imports its datasets and benchmark)."""
    spec = importlib.util.find_spec("ferret")
    if spec is None:
        raise ImportError("ferret-xai is not installed (pip install --no-deps ferret-xai==0.4.2 lime==0.2.0.1)")
    package = types.ModuleType("ferret")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["ferret"] = package
    if importlib.util.find_spec("cv2") is None:  # gradient.py imports cv2.multiply and never uses it
        sys.modules["cv2"] = types.SimpleNamespace(multiply=None)
    from ferret.explainers.gradient import GradientExplainer, IntegratedGradientExplainer
    from ferret.explainers.lime import LIMEExplainer

    return {"grad_x_input": (GradientExplainer, {"multiply_by_inputs": True}, {}),
            "integrated_gradients": (IntegratedGradientExplainer, {"multiply_by_inputs": True},
                                     {"call_args": {"n_steps": STEPS}}),
            "lime": (LIMEExplainer, {}, {"call_args": {"num_samples": SAMPLES}})}


def ferret(adapter, texts, method, seconds, batch, device):
    kind, init, args = _ferret_explainers()[method]
    if method == "integrated_gradients":
        args = {"call_args": {**args["call_args"], "internal_batch_size": batch}}
    if method == "lime":
        args = {"call_args": {**args["call_args"], "batch_size": batch}}
    explainer = kind(adapter.model, adapter.tokenizer, **init)
    explainer(texts[0], 1, **args)  # warm-up
    synced(device)
    began, scores = time.perf_counter(), []
    for text in texts:
        scores.append(np.asarray(explainer(text, 1, **args).scores, dtype=float))
        if time.perf_counter() - began > seconds:
            break
    synced(device)
    return scores, time.perf_counter() - began


def inseq(adapter, texts, method, seconds, batch, device):
    import inseq as peer

    name = {"grad_x_input": "input_x_gradient", "integrated_gradients": "integrated_gradients", "lime": "lime"}[method]
    extra = {"integrated_gradients": {"n_steps": STEPS, "internal_batch_size": batch * STEPS},
             "lime": {"n_samples": SAMPLES}}.get(method, {})
    model = peer.load_model(adapter.model, name, tokenizer=adapter.tokenizer)

    def call(chunk):
        out = model.attribute(chunk, [t + WORD for t in chunk], attributed_fn="logit", batch_size=batch,
                              show_progress=False, device=device, **extra)
        rows = []
        for attribution in out.sequence_attributions:
            raw = attribution.target_attributions  # (prompt + 1, 1[, d]): the prompt's tokens explain the word
            raw = raw.sum(-1) if raw.ndim == 3 else raw
            rows.append(raw[:-1, 0].double().numpy())
        return rows

    call(texts[:2])  # warm-up
    synced(device)
    began, scores = time.perf_counter(), []
    for start in range(0, len(texts), batch):
        scores += call(texts[start:start + batch])
        if time.perf_counter() - began > seconds:
            break
    synced(device)
    return scores, time.perf_counter() - began


def agreement(a: list[np.ndarray], b: list[np.ndarray]) -> float | None:
    rs = [np.corrcoef(x, y)[0, 1] for x, y in zip(a, b) if len(x) == len(y) > 2 and x.std() > 0 and y.std() > 0]
    return float(np.mean(rs)) if rs else None


def compare(adapter, texts, method, target, baseline, peer, run_peer, args) -> dict:
    """One method's job by attrbench and by ``peer``: seconds per sentence, speed-up, agreement."""
    mine, my_seconds = ours(adapter, texts, method, target, args.device, baseline)
    row = {"job": f"{Path(adapter.name).name} · {target}", "method": method, "peer": peer,
           "attrbench sentences": len(texts), "attrbench s": round(my_seconds, 3),
           "attrbench s per sentence": my_seconds / len(texts)}
    try:
        theirs, their_seconds = run_peer(adapter, texts, method, args.peer_seconds, args.peer_batch, args.device)
    except Exception as error:  # a peer that fails is reported, the others still run
        row["peer error"] = f"{type(error).__name__}: {error}"[:300]
        print(row, flush=True)
        return row
    per = their_seconds / len(theirs)
    row.update({"peer sentences": len(theirs), "peer s": round(their_seconds, 3), "peer s per sentence": per,
                "speed-up": per / row["attrbench s per sentence"], "r": agreement(mine[:len(theirs)], theirs)})
    print(f"{row['job']:<32} {method:<21} attrbench {len(texts):>4} in {my_seconds:7.2f} s "
          f"({1e3 * row['attrbench s per sentence']:7.2f} ms each) | {peer} {len(theirs):>4} in "
          f"{their_seconds:7.2f} s ({1e3 * per:8.2f} ms each) | {row['speed-up']:6.1f}x  r = "
          f"{row['r'] if row['r'] is None else round(row['r'], 4)}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--classifier", default="minilm-l6-sst2", help="model name or folder (ferret's job)")
    parser.add_argument("--lm", default="smollm2-135m", help="model name or folder (inseq's job)")
    parser.add_argument("--n", type=int, default=872, help="SST-2 dev sentences (872: all of them)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--methods", default=",".join(OURS))
    parser.add_argument("--peers", default="ferret,inseq")
    parser.add_argument("--peer-seconds", type=float, default=30.0, help="each peer's time per method")
    parser.add_argument("--peer-batch", type=int, default=32)
    parser.add_argument("--json")
    args = parser.parse_args()
    # IG's baseline as each peer builds it: ferret keeps [CLS]/[SEP] and pads the rest, inseq puts unk everywhere
    jobs = {"ferret": (args.classifier, "class:1", "pad", ferret),
            "inseq": (args.lm, f"token:{WORD.strip()}", "unk", inseq)}
    card = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else platform.processor() or "cpu"
    texts = [e.text for e in examples_for(load_model(args.classifier), "sst2")[0][:args.n]]
    rows = []
    for peer in args.peers.split(","):
        model_name, target, baseline, run_peer = jobs[peer]
        adapter = load_model(model_name, device=args.device)
        for method in args.methods.split(","):
            rows.append(compare(adapter, texts, method, target, baseline, peer, run_peer, args))
            if args.json:  # after every row: a run stopped by a time limit keeps what it measured
                Path(args.json).write_text(json.dumps({"device": args.device, "card": card, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
