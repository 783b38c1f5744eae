import json

import pytest
import torch

from attrbench.datasets.lookup import examples_for
from attrbench.models import load_model
from attrbench.models.training.tasks import Recipe, build_task_model
from attrbench.ops.targets import Target, explained_row, head_kind, resolve


def test_training_records(task_models):
    sst2, sva = task_models["records"]["sst2"], task_models["records"]["sva"]
    assert sst2["trained_locally"] and sst2["train_examples"] == 512 and sst2["steps"] == 16
    assert 0 <= sst2["dev_accuracy"] <= 1 and sst2["dev_examples"] == 872 and len(sst2["data_sha256"]["train"]) == 64
    assert sva["split"]["test"] + sva["split"]["skipped_too_long"] <= 1123 and 0 <= sva["test_accuracy"] <= 1
    assert sva["train_examples"] == 512 and sva["steps"] == 16
    assert sum(v["n"] for v in sva["test_accuracy_by_attractors"].values()) == sva["split"]["test"]
    on_disk = json.loads((task_models["root"] / "sst2" / "training.json").read_text())
    assert on_disk["dev_accuracy"] == sst2["dev_accuracy"]


def test_fine_tuning_is_deterministic(task_models, tmp_path):
    again = build_task_model("tiny-bert", "sst2", tmp_path / "again", Recipe(train_size=512), progress=False)
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
