"""Task models trained here, because no SST-2 classifier or masked-LM head can be downloaded (README "Task models").

- ``minilm-l6-sst2``: MiniLM-L6 with a [CLS] classification head (``BertForSequenceClassification``),
  fine-tuned on a seeded 45k-phrase sample of SST-2 train (word embeddings frozen, length-bucketed
  batches), scored on SST-2 dev.
- ``minilm-l6-sva``: a verb-number head (``BertForTokenClassification``, singular/plural) read at
  the masked verb position, fine-tuned with the encoder on the train part of a seeded 70/15/15
  split of the Linzen set and scored on the held-out 15 %. A linear probe on the frozen
  sentence-embedding model reached only 69 % (57 % without attractors): its last layer keeps
  little token-level number, so the encoder is fine-tuned too.

Both are plain, unmodified HF models saved with ``save_pretrained``; their config carries
``attrbench_task`` and their folder a ``training.json`` record (data hash, seed, steps, accuracy).
They are built on first use or by ``attrbench prepare``, seeded and deterministic, cached under the
user cache dir next to the zoo models, and written atomically.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import transformers as hf
from tqdm.auto import tqdm

from ...datasets.agreement import SVA_SPLIT, SVA_SPLIT_SEED, sva_split
from ...datasets.readers import read_sst2, read_sva, sst2_file, sva_file
from ...errors import InputError, ModelLoadError
from ...ops.environment import library_versions
from ...ops.hashing import file_sha256
from ..adapter import pad_ids
from ..tiny import TINY_MODELS, build_tiny
from ..zoo import ZOO, cache_dir, model_folder

READY = "training.json"


@dataclass(frozen=True)
class Recipe:
    """Fine-tuning recipe (AdamW, linear warm-up and decay, length-bucketed batches)."""

    seed: int = 0
    train_size: Optional[int] = None  # None: the whole training set
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-4
    warmup: float = 0.06
    weight_decay: float = 0.01
    max_length: int = 64  # SST-2 only; SVA rows longer than the model are left out, never cut
    freeze_embeddings: bool = True  # 30k x 384 word embeddings: much of Adam's work, little of the accuracy


SST2_RECIPE = Recipe(train_size=45_000)  # 1,407 steps: ~6 min on 2 cores, 88.2 % dev accuracy
SVA_RECIPE = Recipe(epochs=2)  # 5,242 sentences, 328 steps


@dataclass(frozen=True)
class TaskModel:
    name: str
    base: str
    task: str  # "sst2" or "sva"
    recipe: object
    description: str
    trained_on: str = ""
    build_time: str = ""  # measured on 2 CPU cores


TASK_MODELS = {
    "minilm-l6-sst2": TaskModel(
        "minilm-l6-sst2", "minilm-l6", "sst2", SST2_RECIPE,
        "MiniLM-L6 + [CLS] sentiment head, fine-tuned here on SST-2 train (trained locally)",
        "45,000 phrases of SST-2 train (GLUE), seeded sample", "about 6 min"),
    "minilm-l6-sva": TaskModel(
        "minilm-l6-sva", "minilm-l6", "sva", SVA_RECIPE,
        "MiniLM-L6 + verb-number head read at the masked verb, fine-tuned here (trained locally)",
        "70 % of the Linzen et al. 2016 agreement set (seeded split)", "about 3 min"),
}


def base_folder(base: str, workdir: Path) -> Path:
    """A from_pretrained folder for the base encoder: a zoo model, a tiny random model, or a folder."""
    if base in ZOO:
        return model_folder(ZOO[base])
    if base in TINY_MODELS:
        model, tokenizer = build_tiny(base)
        out = workdir / "base"
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        return out
    if Path(base).is_dir():
        return Path(base)
    raise ModelLoadError(f"unknown base model '{base}' for a task model")


def _length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Seeded shuffle, sort by length inside windows of 50 batches, shuffle the batches: little padding."""
    order = rng.permutation(len(lengths))
    window = batch_size * 50
    batches = []
    for start in range(0, len(order), window):
        chunk = order[start:start + window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    return [batches[k] for k in rng.permutation(len(batches))]


def _mask_rows(input_ids: torch.Tensor, mask_id: int) -> torch.Tensor:
    return (input_ids == mask_id).int().argmax(-1)


def _logits(model, input_ids, mask, read_at_mask: Optional[int]):
    """(B, classes): a sequence classifier's logits, or a token classifier's at each text's mask token."""
    logits = model(input_ids=input_ids, attention_mask=mask).logits
    if read_at_mask is None:
        return logits
    return logits[torch.arange(len(logits)), _mask_rows(input_ids, read_at_mask)]


def _fine_tune(model, ids: list[list[int]], labels: torch.Tensor, recipe: Recipe, pad_id: int,
               rng: np.random.Generator, desc: str, progress: bool, read_at_mask: Optional[int] = None) -> dict:
    if recipe.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.ndim > 1], "weight_decay": recipe.weight_decay},
                                   {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}], lr=recipe.lr)
    lengths = np.array([len(s) for s in ids])
    plan = [b for _ in range(recipe.epochs) for b in _length_batches(lengths, recipe.batch_size, rng)]
    scheduler = hf.get_linear_schedule_with_warmup(optimizer, int(recipe.warmup * len(plan)), len(plan))
    model.train()
    start = time.perf_counter()
    bar = tqdm(plan, desc=desc, unit="step", disable=not progress)
    for step, batch in enumerate(bar):
        input_ids, mask = pad_ids([ids[i] for i in batch], pad_id)
        loss = torch.nn.functional.cross_entropy(_logits(model, input_ids, mask, read_at_mask), labels[batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 20 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    model.eval()
    return {"steps": len(plan), "train_examples": len(ids), "train_seconds": round(time.perf_counter() - start, 1)}


@torch.no_grad()
def _predict(model, ids: list[list[int]], pad_id: int, read_at_mask: Optional[int] = None) -> np.ndarray:
    order = np.argsort([len(s) for s in ids], kind="stable")
    predictions = np.zeros(len(ids), dtype=np.int64)
    for k in range(0, len(order), 64):
        chunk = order[k:k + 64]
        input_ids, mask = pad_ids([ids[i] for i in chunk], pad_id)
        predictions[chunk] = _logits(model, input_ids, mask, read_at_mask).argmax(-1).numpy()
    return predictions


def _load_for_training(base: Path, auto_class: str, labels: dict, seed: int):
    torch.manual_seed(seed)  # the new head's initialisation and dropout
    tokenizer = hf.AutoTokenizer.from_pretrained(base)
    # SDPA trains faster; the saved model is loaded with eager attention for attribution
    model = getattr(hf, auto_class).from_pretrained(
        base, num_labels=len(labels), id2label=labels, label2id={v: k for k, v in labels.items()},
        attn_implementation="sdpa", dtype=torch.float32)
    return model, tokenizer


def train_sst2(base: Path, out: Path, recipe: Recipe, data_dir=None, progress: bool = True) -> dict:
    """Fine-tune ``base`` with a [CLS] head on SST-2 train; save the HF classifier to ``out``."""
    rng = np.random.default_rng(recipe.seed)
    model, tokenizer = _load_for_training(base, "AutoModelForSequenceClassification",
                                          {0: "negative", 1: "positive"}, recipe.seed)
    train = read_sst2("train", data_dir)
    if recipe.train_size is not None and recipe.train_size < len(train):
        train = [train[k] for k in np.sort(rng.choice(len(train), recipe.train_size, replace=False))]
    ids = tokenizer([r["sentence"] for r in train], truncation=True, max_length=recipe.max_length)["input_ids"]
    fit = _fine_tune(model, ids, torch.tensor([r["label"] for r in train]), recipe, tokenizer.pad_token_id, rng,
                     "fine-tune SST-2", progress)
    dev = read_sst2("dev", data_dir)
    dev_ids = tokenizer([r["sentence"] for r in dev], truncation=True, max_length=recipe.max_length)["input_ids"]
    accuracy = float((_predict(model, dev_ids, tokenizer.pad_token_id) == [r["label"] for r in dev]).mean())
    model.config.attrbench_task = "sst2"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"task": "sst2", "recipe": asdict(recipe), **fit, "read_at": "[CLS] (BERT pooler + linear head)",
            "dev_accuracy": accuracy, "dev_examples": len(dev),
            "data_sha256": {s: file_sha256(sst2_file(s, data_dir)) for s in ("train", "dev")}}


def train_sva(base: Path, out: Path, recipe: Recipe, data_dir=None, progress: bool = True) -> dict:
    """Fine-tune ``base`` with a singular/plural head read at the masked verb, on the probe's train split."""
    rng = np.random.default_rng(recipe.seed)
    model, tokenizer = _load_for_training(base, "AutoModelForTokenClassification", {0: "plural", 1: "singular"},
                                          recipe.seed)
    if tokenizer.mask_token is None:
        raise ModelLoadError("the SVA head reads the masked verb position; the base tokenizer has no mask token")
    rows = read_sva("sva-linzen", data_dir)
    ids = tokenizer([r["masked"].replace("***mask***", tokenizer.mask_token) for r in rows])["input_ids"]
    limit = min(tokenizer.model_max_length, model.config.max_position_embeddings)
    fits = np.array([len(s) <= limit for s in ids])  # longer rows are left out, never cut (the mask could go)
    split = {k: v[fits[v]] for k, v in sva_split(len(rows)).items()}
    y = np.array([r["singular"] for r in rows])
    train = split["train"]
    if recipe.train_size is not None and recipe.train_size < len(train):
        train = np.sort(rng.choice(train, recipe.train_size, replace=False))
    fit = _fine_tune(model, [ids[k] for k in train], torch.tensor(y[train]), recipe, tokenizer.pad_token_id, rng,
                     "fine-tune SVA head", progress, read_at_mask=tokenizer.mask_token_id)
    accuracy = {}
    for part in ("val", "test"):
        pred = _predict(model, [ids[k] for k in split[part]], tokenizer.pad_token_id, tokenizer.mask_token_id)
        accuracy[part] = pred == y[split[part]]
    attractors = np.array([rows[k]["n_attractors"] for k in split["test"]])
    by_attractors = {int(a): {"accuracy": float(accuracy["test"][attractors == a].mean()),
                              "n": int((attractors == a).sum())} for a in np.unique(attractors)}
    model.config.attrbench_task = "sva"
    model.config.attrbench_read_at = "mask"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"task": "sva", "recipe": asdict(recipe), **fit, "read_at": "the masked verb position (last layer)",
            "split": {"seed": SVA_SPLIT_SEED, "fractions": SVA_SPLIT, **{k: len(v) for k, v in split.items()},
                      "skipped_too_long": int((~fits).sum())},
            "val_accuracy": float(accuracy["val"].mean()), "test_accuracy": float(accuracy["test"].mean()),
            "test_accuracy_by_attractors": by_attractors,
            "data_sha256": file_sha256(sva_file("sva-linzen", data_dir))}


TRAINERS: dict[str, Callable] = {"sst2": train_sst2, "sva": train_sva}


def build_task_model(base: str, task: str, out: Path, recipe=None, data_dir=None, progress: bool = True,
                     name: Optional[str] = None) -> dict:
    """Train a task model on ``base`` into ``out`` (atomically); return its training record."""
    if task not in TRAINERS:
        raise InputError(f"unknown task '{task}'; known: {', '.join(TRAINERS)}")
    recipe = recipe or {"sst2": SST2_RECIPE, "sva": SVA_RECIPE}[task]
    hf.logging.set_verbosity_error()  # the expected "head newly initialised" load report
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staging = Path(tmp) / "model"
        start = time.perf_counter()
        record = TRAINERS[task](base_folder(base, Path(tmp)), staging, recipe, data_dir, progress)
        record = {"name": name or out.name, "base": base, "base_sha256": ZOO[base].sha256 if base in ZOO else None,
                  "trained_locally": True, **record, "build_seconds": round(time.perf_counter() - start, 1),
                  "built": time.strftime("%Y-%m-%d %H:%M:%S"), "versions": library_versions()}
        (staging / READY).write_text(json.dumps(record, indent=1))
        try:
            staging.rename(out)
        except OSError:  # built concurrently by another process
            if not (out / READY).exists():
                raise
    return record


def task_model_folder(name: str, progress: bool = True) -> Path:
    """The cached folder of a task model, trained now if it is not cached yet."""
    entry = TASK_MODELS[name]
    folder = cache_dir() / "tasks" / name
    if not (folder / READY).exists():
        print(f"attrbench: building task model '{name}' once, {entry.build_time} on 2 CPU cores "
              f"({entry.description}) ...", file=sys.stderr)
        build_task_model(entry.base, entry.task, folder, entry.recipe, progress=progress, name=name)
    return folder


def training_record(name: str) -> Optional[dict]:
    """The training record of a cached task model (None if not built yet)."""
    path = cache_dir() / "tasks" / name / READY
    return json.loads(path.read_text()) if path.exists() else None
