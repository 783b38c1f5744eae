"""Read each supported architecture's layers into :class:`LayerSpec` (weights + hook points).

One reader per family, keyed by ``config.model_type``. The models are the unmodified
``transformers`` classes: nothing here patches a forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from torch import nn

from ..errors import ModelLoadError
from .spec import FeedForwardSpec, LayerSpec, Linear, NormSpec


def linear_spec(module: nn.Module) -> Linear:
    """``nn.Linear`` keeps (out, in); GPT-2's ``Conv1D`` already keeps (in, out)."""
    if isinstance(module, nn.Linear):
        return Linear(module.weight.T, module.bias)
    return Linear(module.weight, module.bias)


def norm_spec(module: nn.Module) -> NormSpec:
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
            ln1=norm_spec(layer.attention.output.LayerNorm), ln2=norm_spec(layer.output.LayerNorm),
            value=linear_spec(layer.attention.self.value), value_module=layer.attention.self.value,
            query_module=layer.attention.self.query, key_module=layer.attention.self.key,
            out_proj=linear_spec(layer.attention.output.dense),
            attn_out_module=layer.attention.output.dense,
            ff=FeedForwardSpec(linear_spec(layer.intermediate.dense), None, linear_spec(layer.output.dense),
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
            ln1=norm_spec(layer.sa_layer_norm), ln2=norm_spec(layer.output_layer_norm),
            value=linear_spec(layer.attention.v_lin), value_module=layer.attention.v_lin,
            query_module=layer.attention.q_lin, key_module=layer.attention.k_lin,
            out_proj=linear_spec(layer.attention.out_lin),
            attn_out_module=layer.attention.out_lin,
            ff=FeedForwardSpec(linear_spec(layer.ffn.lin1), None, linear_spec(layer.ffn.lin2), layer.ffn.activation),
            ff_out_module=layer.ffn,
            n_heads=config.n_heads, n_kv_heads=config.n_heads,
        )
        for i, layer in enumerate(base.transformer.layer)
    ]


def _gpt2_layers(base, config) -> list[LayerSpec]:
    d = config.n_embd
    specs = []
    for i, layer in enumerate(base.h):
        qkv = linear_spec(layer.attn.c_attn)  # (d, 3d): queries, keys, values side by side
        value = Linear(qkv.weight[:, 2 * d:], None if qkv.bias is None else qkv.bias[2 * d:])
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True,
            ln1=norm_spec(layer.ln_1), ln2=norm_spec(layer.ln_2),
            value=value, value_module=layer.attn.c_attn, value_columns=slice(2 * d, 3 * d),
            query_module=layer.attn.c_attn, query_columns=slice(0, d),
            key_module=layer.attn.c_attn, key_columns=slice(d, 2 * d),
            out_proj=linear_spec(layer.attn.c_proj), attn_out_module=layer.attn.c_proj,
            ff=FeedForwardSpec(linear_spec(layer.mlp.c_fc), None, linear_spec(layer.mlp.c_proj), layer.mlp.act),
            ff_out_module=layer.mlp,
            n_heads=config.n_head, n_kv_heads=config.n_head,
        ))
    return specs


def _opt_layers(base, config) -> list[LayerSpec]:
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=config.do_layer_norm_before,
            ln1=norm_spec(layer.self_attn_layer_norm), ln2=norm_spec(layer.final_layer_norm),
            value=linear_spec(layer.self_attn.v_proj), value_module=layer.self_attn.v_proj,
            query_module=layer.self_attn.q_proj, key_module=layer.self_attn.k_proj,
            out_proj=linear_spec(layer.self_attn.out_proj),
            attn_out_module=layer.self_attn.out_proj,
            ff=FeedForwardSpec(linear_spec(layer.fc1), None, linear_spec(layer.fc2), layer.activation_fn),
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
            ln1=norm_spec(layer.input_layernorm), ln2=norm_spec(layer.post_attention_layernorm),
            value=linear_spec(layer.self_attn.v_proj), value_module=layer.self_attn.v_proj,
            query_module=layer.self_attn.q_proj, key_module=layer.self_attn.k_proj,
            out_proj=linear_spec(layer.self_attn.o_proj),
            attn_out_module=layer.self_attn.o_proj,
            ff=FeedForwardSpec(linear_spec(layer.mlp.gate_proj), linear_spec(layer.mlp.up_proj),
                               linear_spec(layer.mlp.down_proj), layer.mlp.act_fn),
            ff_out_module=layer.mlp, ff_product_module=layer.mlp.down_proj,
            n_heads=config.num_attention_heads,
            n_kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        )
        for i, layer in enumerate(base.layers)
    ]


@dataclass(frozen=True)
class Architecture:
    description: str
    read_layers: Callable
    float32_internals: str = ""  # what the HF model computes in float32 even when run in float64
    final_norm: Callable = lambda base: None  # the norm after the last layer (Pre-LN decoders), or None


_LLAMA = Architecture("Pre-LN decoder, RMSNorm, SwiGLU, GQA, RoPE", _llama_layers,
                      float32_internals="RMSNorm and softmax", final_norm=lambda base: base.norm)
ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture("Post-LN encoder", _bert_layers),
    "roberta": Architecture("Post-LN encoder", _bert_layers),
    "distilbert": Architecture("Post-LN encoder", _distilbert_layers),
    "gpt2": Architecture("Pre-LN decoder, LayerNorm", _gpt2_layers, final_norm=lambda base: base.ln_f),
    "opt": Architecture("Pre-LN decoder, LayerNorm (Post-LN if do_layer_norm_before=False)", _opt_layers,
                        float32_internals="softmax",
                        final_norm=lambda base: base.decoder.final_layer_norm),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen2": _LLAMA,
}


def architecture_of(model: nn.Module) -> Optional[Architecture]:
    """The layer reader of ``model``'s family, or None: a model without one runs every method and evaluation that
    needs only its embeddings and logits (see :func:`no_reader_reason`)."""
    return ARCHITECTURES.get(model.config.model_type)


def no_reader_reason(adapter) -> Optional[str]:
    """Why a method or analysis that decomposes the layers cannot run on ``adapter`` (None when it can)."""
    if adapter.layers:
        return None
    return (f"it decomposes the layers, and architecture '{adapter.model.config.model_type}' has no layer reader "
            f"(readers: {', '.join(sorted(ARCHITECTURES))}); the gradient, perturbation and erasure methods run on "
            "it (`attrbench methods --model ...` lists them)")
