"""A task model's trained part as low-rank adapters plus the few tensors trained whole, merged bit-exactly.

Training (``attrbench prepare --retrain``) fine-tunes LoRA adapters (Hu et al. 2022, with ``peft``) on
the encoder's linear layers, and trains the head, the norms and the biases whole. What ships is that
trained part alone (``adapter.safetensors``, a few MB): for an adapted weight ``W`` (out, in) the
factors ``A`` (r, in) and ``B`` (out, r) and the scale ``s``; for the rest, the trained tensors.

The merge ``W' = W + s B A`` must give the same bits on every CPU and BLAS, so that a model's weights
hash is one number everywhere (a published result names the weights it was computed with). A matmul
does not promise that (its summation order and FMA use vary), so the product is accumulated in
float64 one rank at a time, ``acc += B[:, k] ⊗ A[k, :]`` for k = 0 .. r-1: every step is an
elementwise IEEE multiply or add, correctly rounded in any order of elements. The float32 factors'
products are exact in float64 (24 + 24 < 53 bits); ``W + s acc`` is formed in float64 and rounded once
to float32 (round half to even).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from ...errors import ModelLoadError

LORA_A, LORA_B, WHOLE = "lora_A.", "lora_B.", "whole."


def merge_lora(weight: np.ndarray, a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    """``float32(W + scale * B @ A)``, the product summed in float64 one rank at a time (see the module doc)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1] or (b.shape[0], a.shape[1]) != weight.shape:
        raise ModelLoadError(f"adapter factors {b.shape} x {a.shape} do not fit a weight of shape {weight.shape}")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    product = np.zeros(weight.shape, dtype=np.float64)
    for k in range(a64.shape[0]):
        product += np.multiply.outer(b64[:, k], a64[k, :])
    return (weight.astype(np.float64) + scale * product).astype(np.float32)


def apply_adapter(base: dict[str, np.ndarray], adapter: dict[str, np.ndarray], scales: dict[str, float]
                  ) -> dict[str, np.ndarray]:
    """The merged state dict: ``base`` with every adapted weight merged and every whole tensor replaced or added."""
    merged = dict(base)
    for key, tensor in adapter.items():
        if key.startswith(WHOLE):
            merged[key[len(WHOLE):]] = tensor.astype(np.float32)
        elif key.startswith(LORA_A):
            name = key[len(LORA_A):]
            if name not in base:
                raise ModelLoadError(f"the adapter adapts '{name}', which the base model does not have")
            merged[name] = merge_lora(base[name], tensor, adapter[LORA_B + name], scales[name])
    return merged


def state_hash(state: dict[str, np.ndarray]) -> str:
    """sha256 of a state dict: names, dtypes, shapes and bytes, in name order (independent of file layout)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        array = np.ascontiguousarray(state[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def save_adapter(path: Path, adapter: dict[str, np.ndarray], scales: dict[str, float]) -> None:
    save_file({k: np.ascontiguousarray(v) for k, v in adapter.items()}, str(path),
              metadata={"lora_scales": json.dumps(scales, sort_keys=True)})


def load_adapter(path: Path) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    with safe_open(str(path), framework="numpy") as f:
        scales = json.loads((f.metadata() or {}).get("lora_scales", "{}"))
    return load_file(str(path)), scales


def extract_adapter(peft_model) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The trained part of a ``peft`` LoRA model, named after the base model's own parameters.

    LoRA layers give ``lora_A.<weight>`` (r, in) and ``lora_B.<weight>`` (out, r) with their scale;
    every other trainable tensor (the head and the norms as ``modules_to_save``, the biases) is kept
    whole as ``whole.<parameter>``.
    """
    config = peft_model.peft_config["default"]
    scale = config.lora_alpha / (config.r ** 0.5 if config.use_rslora else config.r)
    adapter, scales = {}, {}
    prefix = "base_model.model."
    for name, param in peft_model.named_parameters():
        if not param.requires_grad:
            continue
        name = name[len(prefix):] if name.startswith(prefix) else name
        array = param.detach().to(torch.float32).cpu().numpy()
        for part, kind in ((".lora_A.default.weight", LORA_A), (".lora_B.default.weight", LORA_B)):
            if name.endswith(part):
                weight = name[: -len(part)] + ".weight"
                adapter[kind + weight] = array
                scales[weight] = scale
                break
        else:
            plain = name.replace(".modules_to_save.default.", ".").replace(".base_layer.", ".")
            adapter[WHOLE + plain] = array
    return adapter, scales
