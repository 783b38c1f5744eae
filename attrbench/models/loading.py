"""Loading a model by short name, folder or hub id, wrapped for decomposition; the list of what loads here."""
from __future__ import annotations

import os

import torch
import transformers as hf

from ..errors import InputError, ModelLoadError
from .adapter import TransformerAdapter
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


def load_model(name: str, dtype="float32") -> TransformerAdapter:
    """Load ``name``: an offline zoo name, a tiny random model, a local folder, or a hub id (org/name).

    Always with eager attention (SDPA returns no attention weights in transformers 5).
    """
    torch_dtype = _dtype(dtype)
    if name in ZOO:
        return _from_folder(model_folder(ZOO[name]), name, torch_dtype)
    if name in TASK_MODELS:
        return _from_folder(task_model_folder(name), name, torch_dtype)
    if name in TINY_MODELS:
        model, tokenizer = build_tiny(name)
        return TransformerAdapter(model.to(torch_dtype), tokenizer, name)
    if os.path.isdir(name) or "/" in name:
        return _from_folder(name, name, torch_dtype)
    raise ModelLoadError(f"unknown model '{name}'; offline models: "
                         f"{', '.join([*ZOO, *TASK_MODELS, *TINY_MODELS])}; "
                         "or give a local folder or a hub id (org/name)")


def list_models() -> list[dict]:
    rows = [{"name": e.name, "kind": "offline zoo", "source": e.requirement, "description": e.description}
            for e in ZOO.values()]
    rows += [{"name": t.name, "kind": "task (local)", "source": f"{t.base} trained here on {t.trained_on}",
              "description": t.description, "training": training_record(t.name)} for t in TASK_MODELS.values()]
    rows += [{"name": n, "kind": "random tiny", "source": "built from config",
              "description": f"randomly initialised {n[5:]} (2 layers, d 32) for tests"} for n in TINY_MODELS]
    return rows
