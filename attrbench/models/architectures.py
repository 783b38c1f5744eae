"""Read each supported architecture's layers into :class:`LayerSpec` (weights + hook points).

One reader per family, keyed by ``config.model_type``. The models are the unmodified
``transformers`` classes: nothing here patches a forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from ..errors import ModelLoadError
from .spec import FeedForwardSpec, LayerSpec, Linear, NormSpec


def _linear(module: nn.Module) -> Linear:
    """``nn.Linear`` keeps (out, in); GPT-2's ``Conv1D`` already keeps (in, out)."""
    if isinstance(module, nn.Linear):
        return Linear(module.weight.T, module.bias)
    return Linear(module.weight, module.bias)


def _norm(module: nn.Module) -> NormSpec:
    if isinstance(module, nn.LayerNorm):
        return NormSpec(module, "layer", module.weight, module.bias, module.eps)
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if eps is None or not hasattr(module, "weight"):
        raise ModelLoadError(f"normalisation module {type(module).__name__} is not supported (LayerNorm or RMSNorm)")
    return NormSpec(module, "rms", module.weight, None, eps)


def _bert_layers(base, config) -> list[LayerSpec]:
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=False,
            ln1=_norm(layer.attention.output.LayerNorm), ln2=_norm(layer.output.LayerNorm),
            value=_linear(layer.attention.self.value), value_module=layer.attention.self.value,
            out_proj=_linear(layer.attention.output.dense),
            attn_out_module=layer.attention.output.dense,
            ff=FeedForwardSpec(_linear(layer.intermediate.dense), None, _linear(layer.output.dense),
                               layer.intermediate.intermediate_act_fn),
            ff_out_module=layer.output.dense,
            n_heads=config.num_attention_heads, n_kv_heads=config.num_attention_heads,
        )
        for i, layer in enumerate(base.encoder.layer)
    ]


def _distilbert_layers(base, config) -> list[LayerSpec]:
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=False,
            ln1=_norm(layer.sa_layer_norm), ln2=_norm(layer.output_layer_norm),
            value=_linear(layer.attention.v_lin), value_module=layer.attention.v_lin,
            out_proj=_linear(layer.attention.out_lin),
            attn_out_module=layer.attention.out_lin,
            ff=FeedForwardSpec(_linear(layer.ffn.lin1), None, _linear(layer.ffn.lin2), layer.ffn.activation),
            ff_out_module=layer.ffn,
            n_heads=config.n_heads, n_kv_heads=config.n_heads,
        )
        for i, layer in enumerate(base.transformer.layer)
    ]


def _gpt2_layers(base, config) -> list[LayerSpec]:
    d = config.n_embd
    specs = []
    for i, layer in enumerate(base.h):
        qkv = _linear(layer.attn.c_attn)  # (d, 3d): queries, keys, values side by side
        value = Linear(qkv.weight[:, 2 * d:], None if qkv.bias is None else qkv.bias[2 * d:])
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True,
            ln1=_norm(layer.ln_1), ln2=_norm(layer.ln_2),
            value=value, value_module=layer.attn.c_attn, value_columns=slice(2 * d, 3 * d),
            out_proj=_linear(layer.attn.c_proj), attn_out_module=layer.attn.c_proj,
            ff=FeedForwardSpec(_linear(layer.mlp.c_fc), None, _linear(layer.mlp.c_proj), layer.mlp.act),
            ff_out_module=layer.mlp,
            n_heads=config.n_head, n_kv_heads=config.n_head,
        ))
    return specs


def _opt_layers(base, config) -> list[LayerSpec]:
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=config.do_layer_norm_before,
            ln1=_norm(layer.self_attn_layer_norm), ln2=_norm(layer.final_layer_norm),
            value=_linear(layer.self_attn.v_proj), value_module=layer.self_attn.v_proj,
            out_proj=_linear(layer.self_attn.out_proj),
            attn_out_module=layer.self_attn.out_proj,
            ff=FeedForwardSpec(_linear(layer.fc1), None, _linear(layer.fc2), layer.activation_fn),
            ff_out_module=layer.fc2,
            n_heads=config.num_attention_heads, n_kv_heads=config.num_attention_heads,
        )
        for i, layer in enumerate(base.decoder.layers)
    ]


def _llama_layers(base, config) -> list[LayerSpec]:
    """LLaMA family: RMSNorm, SwiGLU, grouped-query attention (RoPE only touches queries/keys)."""
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=True,
            ln1=_norm(layer.input_layernorm), ln2=_norm(layer.post_attention_layernorm),
            value=_linear(layer.self_attn.v_proj), value_module=layer.self_attn.v_proj,
            out_proj=_linear(layer.self_attn.o_proj),
            attn_out_module=layer.self_attn.o_proj,
            ff=FeedForwardSpec(_linear(layer.mlp.gate_proj), _linear(layer.mlp.up_proj),
                               _linear(layer.mlp.down_proj), layer.mlp.act_fn),
            ff_out_module=layer.mlp,
            n_heads=config.num_attention_heads,
            n_kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        )
        for i, layer in enumerate(base.layers)
    ]


@dataclass(frozen=True)
class Architecture:
    description: str
    read_layers: Callable
    causal: bool
    float32_internals: str = ""  # what the HF model computes in float32 even when run in float64
    final_norm: Callable = lambda base: None  # the norm after the last layer (Pre-LN decoders), or None


_LLAMA = Architecture("Pre-LN decoder, RMSNorm, SwiGLU, GQA, RoPE", _llama_layers, causal=True,
                      float32_internals="RMSNorm and softmax", final_norm=lambda base: base.norm)
ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture("Post-LN encoder", _bert_layers, causal=False),
    "roberta": Architecture("Post-LN encoder", _bert_layers, causal=False),
    "distilbert": Architecture("Post-LN encoder", _distilbert_layers, causal=False),
    "gpt2": Architecture("Pre-LN decoder, LayerNorm", _gpt2_layers, causal=True, final_norm=lambda base: base.ln_f),
    "opt": Architecture("Pre-LN decoder, LayerNorm (Post-LN if do_layer_norm_before=False)", _opt_layers,
                        causal=True, float32_internals="softmax",
                        final_norm=lambda base: base.decoder.final_layer_norm),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen2": _LLAMA,
}


def architecture_of(model: nn.Module) -> Architecture:
    kind = model.config.model_type
    if kind not in ARCHITECTURES:
        raise ModelLoadError(
            f"architecture '{kind}' is not supported; supported: {', '.join(sorted(ARCHITECTURES))}")
    return ARCHITECTURES[kind]
