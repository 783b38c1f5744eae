import json
import shutil

import numpy as np
import pytest
import torch

from attrbench.datasets.lookup import examples_for
from attrbench.models import load_model
from attrbench.models.training import tasks
from attrbench.models.training.lora import apply_adapter, load_adapter, merge_lora, state_hash
from attrbench.models.training.tasks import Recipe, build_task_model, merge_part, weights_state_hash
from attrbench.ops.targets import Target, explained_row, head_kind, resolve


def test_training_records(task_models):
    sst2, sva = task_models["records"]["sst2"], task_models["records"]["sva"]
    assert sst2["trained_here"] and sst2["train_examples"] == 512 and sst2["steps"] == 16
    assert 0 <= sst2["dev_accuracy"] <= 1 and sst2["dev_examples"] == 872 and len(sst2["data_sha256"]["train"]) == 64
    assert sva["split"]["test"] + sva["split"]["skipped_too_long"] <= 1123 and 0 <= sva["test_accuracy"] <= 1
    assert sva["train_examples"] == 512 and sva["steps"] == 16
    assert sum(v["n"] for v in sva["test_accuracy_by_attractors"].values()) == sva["split"]["test"]
    on_disk = json.loads((task_models["root"] / "sst2" / "training.json").read_text())
    assert on_disk["dev_accuracy"] == sst2["dev_accuracy"]


def test_fine_tuning_is_deterministic(task_models, tmp_path):
    """Bit for bit, whatever torch threads the process has set: training runs on its own fixed count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1 if before != 1 else 3)
    try:
        again = build_task_model("tiny-bert", "sst2", tmp_path / "again", Recipe(train_size=512), progress=False)
        assert torch.get_num_threads() == (1 if before != 1 else 3)  # the process's setting is given back
    finally:
        torch.set_num_threads(before)
    assert again["torch_threads"] == tasks.TRAINING_THREADS
    assert again["dev_accuracy"] == task_models["records"]["sst2"]["dev_accuracy"]
    a, b = task_models["sst2"].model.state_dict(), load_model(str(tmp_path / "again")).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sva_head_reads_the_mask_and_reproduces_its_accuracy(task_models):
    """Reloaded from disk, the token classifier read at the mask gives the recorded held-out accuracy."""
    adapter = task_models["sva"]
    assert head_kind(adapter) == "token_classifier" and adapter.model.config.attrbench_task == "sva"
    examples, _ = examples_for(adapter, "sva-linzen")
    correct = 0
    for e in examples:
        ids = adapter.tokenizer(e.text)["input_ids"]
        with torch.no_grad():
            logits = adapter.model(input_ids=torch.tensor([ids])).logits
        row = explained_row(adapter, ids, Target.parse(e.target))
        assert ids[row] == adapter.tokenizer.mask_token_id
        correct += int(logits[0, row].argmax()) == int(e.target[-1])
    record = task_models["records"]["sva"]
    assert correct / len(examples) == pytest.approx(record["test_accuracy"], abs=1e-9)


def test_classifier_target_resolution(task_models):
    adapter = task_models["sst2"]
    ids = adapter.tokenizer("a wonderful film")["input_ids"]
    logits = adapter.model(input_ids=torch.tensor([ids])).logits
    resolved = resolve(adapter, ids, Target.parse("auto"), logits)
    assert resolved.index == int(logits[0].argmax()) and resolved.row == 0
    with pytest.raises(Exception, match=r"class 2 does not exist.*classes 0..1"):
        resolve(adapter, ids, Target.parse("class:2"), logits)


def test_merge_is_exact_in_a_fixed_order():
    """W + s B A summed in float64 one rank at a time, rounded once: equal to a by-hand loop over elements, and
    within one float32 rounding of the float64 matmul."""
    rng = np.random.default_rng(0)
    w, a, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((5, 7), (3, 7), (5, 3)))
    merged = merge_lora(w, a, b, 2.0)
    by_hand = np.empty_like(w)
    for i in range(5):
        for j in range(7):
            total = 0.0  # Python floats are float64
            for k in range(3):
                total += float(b[i, k]) * float(a[k, j])
            by_hand[i, j] = np.float32(float(w[i, j]) + 2.0 * total)
    assert np.array_equal(merged, by_hand)
    reference = w.astype(np.float64) + 2.0 * (b.astype(np.float64) @ a.astype(np.float64))
    assert np.abs(merged - reference).max() <= np.spacing(np.abs(reference).max().astype(np.float32))
    with pytest.raises(Exception, match="do not fit"):
        merge_lora(w, a.T, b, 1.0)


def test_trained_part_rebuilds_the_model(task_models, tmp_path):
    """The merged model is the base plus the trained part alone: merging again gives the same weights and hash,
    and the adapters hold the LoRA factors of every linear layer plus the head, norms and biases."""
    root = task_models["root"] / "sst2"
    record = task_models["records"]["sst2"]
    assert weights_state_hash(root) == record["merged_sha256"]
    adapter, scales = load_adapter(root / "adapter.safetensors")
    assert {k.split(".")[0] for k in adapter} == {"lora_A", "lora_B", "whole"}
    assert any(k.startswith("whole.classifier") for k in adapter) and set(scales.values()) == {2.0}
    base = tasks.base_folder("tiny-bert", tmp_path)
    assert merge_part(base, root, tmp_path / "again") == record["merged_sha256"]
    lora_free = apply_adapter({}, {k: v for k, v in adapter.items() if k.startswith("whole.")}, {})
    assert state_hash(lora_free) != record["merged_sha256"]  # the adapters do change the weights


def test_damaged_task_model_cache_is_rebuilt(task_models, tmp_path, monkeypatch, capsys):
    """A cached task model whose weights fail their recorded hash is rebuilt from the shipped part with a warning."""
    shipped = tmp_path / "shipped" / "minilm-l6-sst2"
    shipped.parent.mkdir()
    shutil.copytree(task_models["root"] / "sst2", shipped, ignore=shutil.ignore_patterns("model.safetensors"))
    monkeypatch.setattr(tasks, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(tasks, "TASK_MODELS", {"minilm-l6-sst2": tasks.TaskModel(
        "minilm-l6-sst2", "tiny-bert", "sst2", Recipe(train_size=512), "test")})
    monkeypatch.setattr(tasks, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(tasks, "_VERIFIED", {})
    folder = tasks.task_model_folder("minilm-l6-sst2")
    expected = task_models["records"]["sst2"]["merged_sha256"]
    assert weights_state_hash(folder) == expected
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01  # one flipped bit in the last tensor
    weights.write_bytes(bytes(data))
    monkeypatch.setattr(tasks, "_VERIFIED", {})
    assert tasks.task_model_folder("minilm-l6-sst2") == folder
    assert "does not match its recorded weights" in capsys.readouterr().err
    assert weights_state_hash(folder) == expected


def test_the_shortcut_models_reliance_is_what_its_dataset_shows(tmp_path):
    """The training record's reliance (dev sentences whose planted shortcut contradicts their label, per variant)
    equals the share of those sst2-shortcut examples on which the reloaded model predicts the shortcut's class."""
    record = build_task_model("tiny-bert", "sst2-shortcut", tmp_path / "m", Recipe(train_size=512), progress=False)
    assert record["train_mix"]["clean"] + record["train_mix"]["single"] + record["train_mix"]["pair"] \
        + record["train_mix"]["lone"] == 512
    adapter = load_model(str(tmp_path / "m"))
    assert adapter.model.config.attrbench_shortcuts == "bastings2022"
    examples, _ = examples_for(adapter, "sst2-shortcut")
    for variant in ("single", "pair"):
        against = [e for e in examples if e.meta["variant"] == variant and e.meta["label"] != e.meta["sentence_label"]]
        follows = []
        for e in against:
            with torch.no_grad():
                logits = adapter.model(input_ids=torch.tensor([adapter.tokenizer(e.text)["input_ids"]])).logits
            follows.append(int(logits[0].argmax()) == e.meta["label"])
        assert record["reliance"][variant] == {"follows_shortcut": pytest.approx(np.mean(follows), abs=1e-12),
                                               "n": len(against)}


def test_the_shipped_shortcut_model_relies_on_its_shortcuts():
    record = tasks.shipped_record("minilm-l6-sst2-shortcut")
    clean = tasks.shipped_record("minilm-l6-sst2")["dev_accuracy"]
    assert all(v["follows_shortcut"] >= 0.95 and v["n"] > 200 for v in record["reliance"].values())
    assert abs(record["dev_accuracy"] - clean) <= 0.01
