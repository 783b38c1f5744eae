"""Maintainers: train the task models from scratch and put their trained parts into the package.

    python tools/ship_task_models.py [NAME ...]

Each model is trained as ``attrbench prepare --retrain`` does, scored on its merged weights, and its
trained part (``adapter.safetensors``, ``config.json``, ``training.json`` with the merged weights'
sha256) is copied to ``attrbench/models/training/shipped/NAME/``. Every later first use merges that
part into the base weights and checks the recorded hash.
"""
import shutil
import sys

from attrbench.models.training.tasks import ADAPTER, READY, SHIPPED, TASK_MODELS, retrain

for name in sys.argv[1:] or list(TASK_MODELS):
    folder, record = retrain(name)
    target = SHIPPED / name
    target.mkdir(parents=True, exist_ok=True)
    for file in (ADAPTER, "config.json", READY):
        shutil.copyfile(folder / file, target / file)
    accuracy = record.get("dev_accuracy", record.get("test_accuracy"))
    print(f"{name}: accuracy {accuracy:.4f}, adapter {record['adapter_bytes'] / 2**20:.2f} MB, "
          f"merged sha256 {record['merged_sha256'][:12]}…, {record['train_seconds']:.0f} s of training")
