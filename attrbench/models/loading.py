"""Loading a model by short name, folder or hub id, wrapped for decomposition; the list of what loads here."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import torch
import transformers as hf

from ..errors import InputError, ModelLoadError
from ..ops.environment import resolve_device
from ..ops.hashing import file_sha256, text_sha256
from .adapter import TransformerAdapter, state_dict_hash
from .architectures import ARCHITECTURES
from .generic import refuse_encoder_decoder
from .tiny import FAMILIES, TINY_MODELS, build_family, build_tiny
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


def _gguf_location(path) -> tuple[str, Optional[str]]:
    """(folder, GGUF file name or None): a ``.gguf`` file, or a folder holding one GGUF and no config.json."""
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), path.name
    ggufs = sorted(path.glob("*.gguf")) if path.is_dir() else []
    if path.is_dir() and not (path / "config.json").exists() and len(ggufs) == 1:
        return str(path), ggufs[0].name
    return str(path), None


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def _from_folder(path, name: str, dtype: torch.dtype) -> TransformerAdapter:
    """Any transformers encoder or decoder from a folder, a hub id or a GGUF file; the class is the one its config
    names (its head), else the bare model. Refused in one line before the weights load: an encoder-decoder."""
    folder, gguf = _gguf_location(path)
    extra = {"gguf_file": gguf} if gguf else {}
    try:
        config = hf.AutoConfig.from_pretrained(folder, **extra)
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"could not load '{name}': {_first_line(err)}") from None
    refuse_encoder_decoder(config, name)
    arch = (config.architectures or [None])[0]
    cls = getattr(hf, arch, None) if arch else None
    if cls is None and gguf:
        cls = hf.AutoModelForCausalLM  # a GGUF holds a language model
    try:
        # eager experts: a mixture of experts' grouped matmul takes no float64, and the loop is exact per token
        model = (cls or hf.AutoModel).from_pretrained(folder, attn_implementation="eager",
                                                      experts_implementation="eager", dtype=dtype, **extra)
        tokenizer = hf.AutoTokenizer.from_pretrained(folder, **extra)
    except (OSError, ValueError, KeyError, NotImplementedError, TypeError) as err:
        hint = ("; a GGUF is read by transformers' GGUF loader (pip install gguf), which dequantises the types it "
                "knows (F32, F16, BF16, Q2_K-Q8_0): convert other quantisations to one of those") if gguf else ""
        raise ModelLoadError(f"could not load '{name}': {_first_line(err)}{hint}") from None
    if gguf and getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None  # dequantised on load: plain float weights now
    return TransformerAdapter(model, tokenizer, name, source=str(path))


def load_model(name: str, dtype="float32", device: str = "cpu") -> TransformerAdapter:
    """Load ``name``: an offline zoo name, a task model, a tiny random model, a local folder, a GGUF file, or a hub
    id (org/name). Any transformers encoder or decoder loads; its head (sequence or token classification, masked
    or causal LM) is the class its config names.

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
    elif name in TINY_MODELS or name in FAMILIES:
        model, tokenizer = build_tiny(name) if name in TINY_MODELS else build_family(*FAMILIES[name])
        digest = state_dict_hash(model)  # of the float32 weights, whatever dtype they are used in
        adapter = TransformerAdapter(model.to(torch_dtype), tokenizer, name)
        adapter.weights_sha256 = digest
    elif os.path.isdir(name) or os.path.isfile(name) or "/" in name:
        adapter = _from_folder(name, name, torch_dtype)
        source = Path(adapter.source)
        if source.is_dir():
            adapter.weights_sha256 = folder_weights_hash(source)
        elif source.is_file():
            adapter.weights_sha256 = file_sha256(source)
    else:
        raise ModelLoadError(f"unknown model '{name}'; offline models: "
                             f"{', '.join([*ZOO, *TASK_MODELS, *TINY_MODELS, *FAMILIES])}; "
                             "or give a local folder or a hub id (org/name)")
    return adapter.to(device=device)


def _reader_words(model_type: str) -> str:
    """What a family's layer reader reads, or that it has none (then only the methods that need no decomposition)."""
    architecture = ARCHITECTURES.get(model_type)
    if architecture is None:
        return "no layer reader: the gradient, perturbation and erasure methods"
    return f"layer reader: {architecture.description}"


def list_models() -> list[dict]:
    rows = [{"name": e.name, "kind": "offline zoo", "source": e.requirement, "description": e.description}
            for e in ZOO.values()]
    rows += [{"name": t.name, "kind": "task", "source": f"{t.base} + shipped adapters trained on {t.trained_on}",
              "description": t.description, "training": training_record(t.name)} for t in TASK_MODELS.values()]
    rows += [{"name": n, "kind": "random tiny", "source": "built from config",
              "description": f"randomly initialised {n[5:]} (2 layers, d 32) for tests"} for n in TINY_MODELS]
    rows += [{"name": n, "kind": "random tiny", "source": "built from config",
              "description": f"randomly initialised {model_type} with a {head.replace('_', '-')} head (2 layers, "
                            f"d 32; {_reader_words(model_type)})"}
             for n, (model_type, head) in FAMILIES.items()]
    return rows
