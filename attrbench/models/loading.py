"""Loading a model by short name, folder or hub id, wrapped for decomposition; the list of what loads here."""
from __future__ import annotations

import os
from pathlib import Path

import torch
import transformers as hf

from ..errors import InputError, ModelLoadError
from ..ops.environment import resolve_device
from ..ops.hashing import file_sha256, text_sha256
from .adapter import TransformerAdapter, state_dict_hash
from .architectures import ARCHITECTURES
from .tiny import TINY_MODELS, build_tiny
from .training.tasks import TASK_MODELS, task_model_folder, training_record
from .zoo import ZOO, model_folder

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if dtype not in DTYPES:
        raise InputError(f"dtype '{dtype}' is not supported: use float32 or float64")
    return DTYPES[dtype]


def folder_weights_hash(path: Path) -> str:
    """sha256 over a model folder's weight files (names and contents), in name order."""
    files = sorted(f for pattern in ("*.safetensors", "*.bin", "*.gguf") for f in Path(path).glob(pattern))
    if not files:
        return "unhashed"
    return text_sha256("\n".join(f"{f.name}:{file_sha256(f)}" for f in files))


def _from_folder(path, name: str, dtype: torch.dtype) -> TransformerAdapter:
    try:
        config = hf.AutoConfig.from_pretrained(path)
    except OSError as err:
        raise ModelLoadError(f"could not load '{name}': {str(err).splitlines()[0]}") from None
    if config.model_type not in ARCHITECTURES:
        raise ModelLoadError(f"architecture '{config.model_type}' of '{name}' is not supported; "
                             f"supported: {', '.join(sorted(ARCHITECTURES))}")
    arch = (config.architectures or [None])[0]
    cls = getattr(hf, arch, None) if arch else None
    model = (cls or hf.AutoModel).from_pretrained(path, attn_implementation="eager", dtype=dtype)
    tokenizer = hf.AutoTokenizer.from_pretrained(path)
    return TransformerAdapter(model, tokenizer, name, source=str(path))


def load_model(name: str, dtype="float32", device: str = "cpu") -> TransformerAdapter:
    """Load ``name``: an offline zoo name, a task model, a tiny random model, a local folder, or a hub id (org/name).

    Always with eager attention (SDPA returns no attention weights in transformers 5). The adapter's
    ``weights_sha256`` names the weights it holds, whatever they were loaded from: the zoo's source
    file, a task model's merged weights (as recorded), or a hash of the weights themselves. ``device``:
    ``auto``, ``cpu``, ``cuda[:N]`` or ``mps`` (checked to exist first).
    """
    torch_dtype, device = _dtype(dtype), resolve_device(device)
    if name in ZOO:
        adapter = _from_folder(model_folder(ZOO[name]), name, torch_dtype)
        adapter.weights_sha256 = ZOO[name].sha256
    elif name in TASK_MODELS:
        adapter = _from_folder(task_model_folder(name), name, torch_dtype)
        adapter.weights_sha256 = training_record(name)["merged_sha256"]
    elif name in TINY_MODELS:
        model, tokenizer = build_tiny(name)
        digest = state_dict_hash(model)  # of the float32 weights, whatever dtype they are used in
        adapter = TransformerAdapter(model.to(torch_dtype), tokenizer, name)
        adapter.weights_sha256 = digest
    elif os.path.isdir(name) or "/" in name:
        adapter = _from_folder(name, name, torch_dtype)
        if Path(adapter.source).is_dir():
            adapter.weights_sha256 = folder_weights_hash(Path(adapter.source))
    else:
        raise ModelLoadError(f"unknown model '{name}'; offline models: "
                             f"{', '.join([*ZOO, *TASK_MODELS, *TINY_MODELS])}; "
                             "or give a local folder or a hub id (org/name)")
    return adapter.to(device=device)


def list_models() -> list[dict]:
    rows = [{"name": e.name, "kind": "offline zoo", "source": e.requirement, "description": e.description}
            for e in ZOO.values()]
    rows += [{"name": t.name, "kind": "task", "source": f"{t.base} + shipped adapters trained on {t.trained_on}",
              "description": t.description, "training": training_record(t.name)} for t in TASK_MODELS.values()]
    rows += [{"name": n, "kind": "random tiny", "source": "built from config",
              "description": f"randomly initialised {n[5:]} (2 layers, d 32) for tests"} for n in TINY_MODELS]
    return rows
