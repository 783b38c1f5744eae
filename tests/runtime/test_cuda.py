"""On a CUDA GPU (skipped without one): every method, metric and analysis gives the CPU's results, and a
leaderboard run with ``device = "cuda"`` stores the CPU run's rows. Without a GPU, test_runs.py checks on the CPU
that no tensor is tied to a fixed device (default device and dtype moved away from the model's).

float64 on both devices for the metrics: their orderings of near-tied scores would otherwise flip on float32
noise and move an erasure curve by more than any fixed tolerance; float32 for the attributions themselves, the
dtype runs use. Each test lists every mismatch at once, so one run on a lent GPU says all there is to fix."""
import json
import math
import sqlite3

import numpy as np
import pytest
import torch

from attrbench.datasets.lookup import examples_for, sample
from attrbench.models import load_model
from attrbench.ops.measure import timed
from attrbench.registry import EVALS, METHODS
from attrbench.runtime.config import read_config
from attrbench.runtime.pipeline import evaluate, run_leaderboard
from attrbench.runtime.store import Store
from tests.conftest import payload_parts

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GPU = "cuda"

MODELS = ["tiny-bert", "tiny-gpt2", "tiny-llama"]
# the scoring evaluations, less those needing words sva-generated lacks (rationales, evidence)
SCORING = [name for name in EVALS.names() if EVALS.get(name).needs_methods
           and name not in ("timing", "plausibility", "ground_truth")]
ANALYSES = [name for name in EVALS.names() if not EVALS.get(name).needs_methods]


def _close(a, b, tol: float) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= tol * (1 + np.abs(b)))))


def _mismatches(cpu: list[dict], gpu: list[dict], tol: float) -> list[str]:
    by_key = {(r["method"], r["metric"]): r for r in gpu}
    assert set(by_key) == {(r["method"], r["metric"]) for r in cpu}
    return [f"{r['method']}/{r['metric']}: cpu {np.round(r['values'], 6)} cuda "
            f"{np.round(by_key[r['method'], r['metric']]['values'], 6)}"
            for r in cpu if not _close(r["values"], by_key[r["method"], r["metric"]]["values"], tol)]


@pytest.mark.parametrize("model", ["tiny-bert", "tiny-gpt2"])  # an encoder and a decoder (tiny-llama: below)
def test_every_metric_and_analysis_on_cuda_equals_cpu(model):
    rows = {}
    for device in ("cpu", GPU):
        adapter = load_model(model, dtype="float64", device=device)
        rows[device] = (evaluate(adapter, "all", SCORING, "sva-generated", n=2, seed=1, progress=False)
                        + evaluate(adapter, [], ANALYSES, "sva-generated", n=2, seed=1, progress=False))
    bad = _mismatches(rows["cpu"], rows[GPU], 1e-6)
    assert not bad, f"{len(bad)} of {len(rows['cpu'])} differ on {model}:\n" + "\n".join(bad)


@pytest.mark.parametrize("model", MODELS)
def test_every_method_on_cuda_equals_cpu_in_float32(model):
    """The attributions a run stores: same seed, same draws (made on the CPU), float32 arithmetic apart."""
    cpu, gpu = load_model(model), load_model(model, device=GPU)
    examples = sample(examples_for(cpu, "sva-generated")[0], 1, 1)
    bad = []
    noisy = {"gradient_shap+noise": METHODS.get("gradient_shap").with_params(noise=0.1)}  # its default draws none
    for name, method in [(name, METHODS.get(name)) for name in METHODS.names()] + list(noisy.items()):
        if method.supports(cpu):  # a scope the architecture lacks
            continue
        for example in examples:
            a = method(cpu, [example.text], target=example.target)[0].values
            b = method(gpu, [example.text], target=example.target)[0].values
            scale = max(float(np.max(np.abs(a))), 1e-12)
            error = float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) / scale if len(a) == len(b) else math.inf
            if not error <= 1e-3:
                bad.append(f"{name} on '{example.text}': largest difference {error:.2e} of the largest score")
    assert not bad, f"{len(bad)} attributions differ on {model}:\n" + "\n".join(bad)


@pytest.mark.parametrize("model", MODELS)
def test_batched_methods_on_cuda_equal_one_text_at_a_time_on_the_cpu(model):
    """Padded, length-sorted CUDA batches (CUDA's budget and padding), each text with its own target, give what
    each text gets alone on the CPU."""
    cpu, gpu = load_model(model), load_model(model, device=GPU)
    texts = ["the keys to the cabinet are on the table .", "dogs run", "a wonderful film about the sea", "the dog"]
    targets = [f"position:{min(k + 1, len(cpu.tokenizer(t)['input_ids']) - 1)}" for k, t in enumerate(texts)]
    bad = []
    for method in [m for m in METHODS.all() if m.batched and m.supports(cpu) is None]:
        together = method(gpu, texts, target=targets)
        for text, target, batched in zip(texts, targets, together):
            (alone,) = method(cpu, [text], target=target)
            scale = max(float(np.abs(alone.values).max()), 1e-12)
            error = (float(np.abs(np.asarray(batched.values) - alone.values).max()) / scale
                     if batched.tokens == alone.tokens else math.inf)
            if not error <= 1e-3:
                bad.append(f"{method.name} on '{text}': largest difference {error:.2e} of the largest score")
    assert not bad, f"{len(bad)} batched attributions differ on {model}:\n" + "\n".join(bad)


def test_leaderboard_run_on_cuda_stores_the_cpu_rows(tmp_path):
    suite = ('[[suite]]\nmodel = "tiny-gpt2"\ndataset = "sva-generated"\nn = 3\n'
             'methods = ["alti", "smooth_grad", "lime", "attention_flow", "decompx", "random"]\n'
             'evals = ["naopc", "soft_erasure", "erasure_aopc", "abpc", "faithfulness_corr", "mixing_ratio"]\n')
    rows = {}
    for folder, device in (("cpu", "cpu"), ("gpu", GPU)):
        path = tmp_path / f"{folder}.toml"
        path.write_text(f'name = "devices"\nseed = 2\ndtype = "float64"\nshard_size = 2\ndevice = "{device}"\n{suite}')
        run_leaderboard(read_config(str(path)), tmp_path / folder, progress=False)
        db = sqlite3.connect(tmp_path / folder / "store.sqlite")
        rows[folder] = dict(db.execute("SELECT key, payload FROM results ORDER BY key").fetchall())
        db.close()
        store = Store(tmp_path / folder / "store.sqlite", readonly=True)
        assert store.meta("device_kind") == device
        threads = torch.get_num_threads() if device == "cpu" else 1  # CPU seconds are wall x threads, GPU ones wall
        assert store.meta("cpu_hours") * 3600 == pytest.approx(store.meta("last_run")["seconds"] * threads,
                                                               abs=0.2 * threads)
        store.close()
    assert rows["cpu"].keys() == rows["gpu"].keys()  # the same rows, under keys that name no device
    bad = []
    for key, payload in rows["cpu"].items():
        a, b = payload_parts(json.loads(payload)), payload_parts(json.loads(rows["gpu"][key]))
        words = ([x for x in a if not isinstance(x, float)], [y for y in b if not isinstance(y, float)])
        numbers = ([x for x in a if isinstance(x, float)], [y for y in b if isinstance(y, float)])
        if words[0] != words[1] or not _close(*numbers, 1e-6):
            bad.append(key)
    assert not bad, f"{len(bad)} of {len(rows['cpu'])} rows differ, e.g. {bad[:3]}"


def test_peak_memory_counts_what_a_call_allocates_on_the_gpu():
    torch.zeros(1, device=GPU)  # CUDA's context made first, as a loaded model has (it is resident memory)
    _, _, peak_mb = timed(lambda: torch.ones(256 * 2**20, dtype=torch.uint8, device=GPU).max(), GPU)  # no promotion
    assert 256 <= peak_mb < 288  # the 256 MB, and little resident memory
    kept = torch.ones(64 * 2**20, dtype=torch.uint8, device=GPU)  # held before the call: not the call's
    _, _, peak_mb = timed(lambda: kept.max(), GPU)
    assert peak_mb < 32
