"""Read each supported architecture's layers into :class:`LayerSpec` (weights + hook points).

One reader per family, keyed by ``config.model_type``. The models are the unmodified
``transformers`` classes: nothing here patches a forward pass.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

from ..errors import ModelLoadError
from .generic import find_final_norm
from .spec import FeedForwardSpec, LayerSpec, Linear, NormSpec


def linear_spec(module: nn.Module) -> Linear:
    """``nn.Linear`` keeps (out, in); GPT-2's ``Conv1D`` already keeps (in, out)."""
    if isinstance(module, nn.Linear):
        return Linear(module.weight.T, module.bias)
    return Linear(module.weight, module.bias)


_GAIN_OFFSET: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()


@torch.no_grad()
def _gain_is_offset(module: nn.Module, eps: float) -> bool:
    """Whether an RMSNorm multiplies by ``1 + weight`` (Gemma, Qwen3-Next) rather than ``weight``: read from the
    module's own output on one probe vector (its ``forward``, so no hook runs), once per module."""
    if module not in _GAIN_OFFSET:
        w = module.weight
        x = torch.linspace(-1.0, 2.0, w.shape[-1], dtype=w.dtype, device=w.device)[None]
        unit = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        out = module.forward(x)
        _GAIN_OFFSET[module] = bool((out - unit * (1 + w)).abs().max() < (out - unit * w).abs().max())
    return _GAIN_OFFSET[module]


def norm_spec(module: nn.Module) -> NormSpec:
    """The norm a module computes: LayerNorm (with or without bias), RMSNorm (gain ``w`` or ``1 + w``) or
    ``nn.Identity`` (ModernBERT's first layer)."""
    if isinstance(module, nn.Identity):
        return NormSpec.identity()
    if isinstance(module, nn.LayerNorm):
        return NormSpec(module, "layer", module.weight, module.bias, module.eps)
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if eps is None or getattr(module, "weight", None) is None:
        raise ModelLoadError(f"normalisation module {type(module).__name__} is not supported (LayerNorm or RMSNorm)")
    gamma = 1 + module.weight if _gain_is_offset(module, eps) else module.weight
    return NormSpec(module, "rms", gamma, None, eps)


def _split_columns(linear: Linear, *widths: int) -> list[Linear]:
    """A fused projection (q|k|v, gate|up) as its parts, side by side in its output columns."""
    out, start = [], 0
    for width in widths:
        cols = slice(start, start + width)
        out.append(Linear(linear.weight[:, cols], None if linear.bias is None else linear.bias[cols]))
        start += width
    return out


def _kv_heads(config) -> int:
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def _bert_layers(base, config, q: str = "query", k: str = "key", v: str = "value") -> list[LayerSpec]:
    """BERT and the encoders of its shape under other names: RoBERTa, XLM-R, CamemBERT, ELECTRA, DeBERTa-v2/v3
    (``query_proj``...; its disentangled attention changes only the probabilities, read from the forward pass)."""
    return [
        LayerSpec(
            index=i, layer=layer, norm_first=False,
            ln1=norm_spec(layer.attention.output.LayerNorm), ln2=norm_spec(layer.output.LayerNorm),
            value=linear_spec(getattr(layer.attention.self, v)), value_module=getattr(layer.attention.self, v),
            query_module=getattr(layer.attention.self, q), key_module=getattr(layer.attention.self, k),
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
    """LLaMA family: RMSNorm, SwiGLU, grouped-query attention (RoPE only touches queries/keys). Qwen3's q/k norms
    and Gemma's ``1 + w`` gains change nothing here: the former act on queries and keys only (the probabilities are
    the forward pass's), the latter is read by :func:`norm_spec`."""
    return [_llama_layer(i, layer, config) for i, layer in enumerate(base.layers)]


def _llama_layer(i: int, layer: nn.Module, config, **fields) -> LayerSpec:
    attn, mlp = layer.self_attn, layer.mlp
    spec = dict(
        index=i, layer=layer, norm_first=True,
        ln1=fields.pop("ln1", None) or norm_spec(layer.input_layernorm),
        ln2=fields.pop("ln2", None) or norm_spec(layer.post_attention_layernorm),
        value=linear_spec(attn.v_proj), value_module=attn.v_proj,
        query_module=attn.q_proj, key_module=attn.k_proj,
        out_proj=linear_spec(attn.o_proj), attn_out_module=attn.o_proj,
        ff=fields.pop("ff", None) or FeedForwardSpec(linear_spec(mlp.gate_proj), linear_spec(mlp.up_proj),
                                                     linear_spec(mlp.down_proj), mlp.act_fn),
        ff_out_module=mlp, ff_product_module=fields.pop("ff_product_module", getattr(mlp, "down_proj", None)),
        n_heads=config.num_attention_heads, n_kv_heads=_kv_heads(config),
    )
    return LayerSpec(**{**spec, **fields})


def _gemma2_layers(base, config) -> list[LayerSpec]:
    """Gemma 2/3: a norm before and after each sublayer (the post-norm on the sublayer's output, before the
    residual add), gains ``1 + w``; Gemma 3's q/k norms and local/global attention change only the probabilities."""
    return [_llama_layer(i, layer, config, ln2=norm_spec(layer.pre_feedforward_layernorm),
                         attn_post_norm=norm_spec(layer.post_attention_layernorm),
                         ff_post_norm=norm_spec(layer.post_feedforward_layernorm),
                         attn_out_module=layer.post_attention_layernorm, ff_out_module=layer.post_feedforward_layernorm)
            for i, layer in enumerate(base.layers)]


def _olmo2_layers(base, config) -> list[LayerSpec]:
    """OLMo 2: no norm before a sublayer, one after each (on its output, before the residual add)."""
    return [_llama_layer(i, layer, config, ln1=NormSpec.identity(), ln2=NormSpec.identity(),
                         attn_post_norm=norm_spec(layer.post_attention_layernorm),
                         ff_post_norm=norm_spec(layer.post_feedforward_layernorm),
                         attn_out_module=layer.post_attention_layernorm, ff_out_module=layer.post_feedforward_layernorm)
            for i, layer in enumerate(base.layers)]


def _experts(module: nn.Module) -> list[FeedForwardSpec]:
    """transformers 5's fused experts (``gate_up_proj`` (E, 2f, d), ``down_proj`` (E, d, f)), one gated FF each."""
    f = module.down_proj.shape[-1]
    return [FeedForwardSpec(Linear(w[:f].T, None), Linear(w[f:].T, None), Linear(down.T, None), module.act_fn)
            for w, down in zip(module.gate_up_proj, module.down_proj)]


def _moe_layers(base, config) -> list[LayerSpec]:
    """Mixtral, OLMoE, Qwen3-MoE: LLaMA-shaped attention (OLMoE's and Qwen3's q/k norms change only the
    probabilities), the FF a sum over each token's top-k experts weighted by the router; Qwen3-MoE's dense layers
    (``mlp_only_layers``) are read as LLaMA's."""
    specs = []
    for i, layer in enumerate(base.layers):
        module = getattr(layer.mlp, "experts", None)
        if module is None:
            specs.append(_llama_layer(i, layer, config))
            continue
        experts = _experts(module)
        specs.append(_llama_layer(i, layer, config, ff=experts[0], experts=experts, experts_module=module,
                                  ff_product_module=None))
    return specs


def _phi3_layers(base, config) -> list[LayerSpec]:
    """Phi-3: LLaMA-shaped with fused projections, ``qkv_proj`` (q | k | v) and ``gate_up_proj`` (gate | up)."""
    specs = []
    for i, layer in enumerate(base.layers):
        attn, mlp = layer.self_attn, layer.mlp
        H, kv, dh = config.num_attention_heads, _kv_heads(config), attn.head_dim
        _, _, value = _split_columns(linear_spec(attn.qkv_proj), H * dh, kv * dh, kv * dh)
        gate, up = _split_columns(linear_spec(mlp.gate_up_proj), *[mlp.down_proj.in_features] * 2)
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True,
            ln1=norm_spec(layer.input_layernorm), ln2=norm_spec(layer.post_attention_layernorm),
            value=value, value_module=attn.qkv_proj, value_columns=slice((H + kv) * dh, (H + 2 * kv) * dh),
            query_module=attn.qkv_proj, query_columns=slice(0, H * dh),
            key_module=attn.qkv_proj, key_columns=slice(H * dh, (H + kv) * dh),
            out_proj=linear_spec(attn.o_proj), attn_out_module=attn.o_proj,
            ff=FeedForwardSpec(gate, up, linear_spec(mlp.down_proj), mlp.activation_fn),
            ff_out_module=mlp, ff_product_module=mlp.down_proj, n_heads=H, n_kv_heads=kv,
        ))
    return specs


def _interleaved(H: int, dh: int, which: int) -> torch.Tensor:
    """Columns of the ``which``-th of (q, k, v) in GPT-NeoX's ``query_key_value``: per head ``[q_h | k_h | v_h]``."""
    return (torch.arange(H)[:, None] * 3 * dh + which * dh + torch.arange(dh)[None]).flatten()


def _gpt_neox_layers(base, config) -> list[LayerSpec]:
    """GPT-NeoX / Pythia: parallel attention and FF (``use_parallel_residual``, serial otherwise), two LayerNorms,
    and q, k, v fused per head in ``query_key_value``."""
    specs = []
    for i, layer in enumerate(base.layers):
        attn, mlp = layer.attention, layer.mlp
        H = config.num_attention_heads
        dh = config.hidden_size // H
        qkv = linear_spec(attn.query_key_value)
        v_cols = _interleaved(H, dh, 2).to(qkv.weight.device)
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True, parallel=bool(config.use_parallel_residual),
            ln1=norm_spec(layer.input_layernorm), ln2=norm_spec(layer.post_attention_layernorm),
            value=Linear(qkv.weight[:, v_cols], None if qkv.bias is None else qkv.bias[v_cols]),
            value_module=attn.query_key_value, value_columns=v_cols,
            query_module=attn.query_key_value, query_columns=_interleaved(H, dh, 0).to(v_cols.device),
            key_module=attn.query_key_value, key_columns=_interleaved(H, dh, 1).to(v_cols.device),
            out_proj=linear_spec(attn.dense), attn_out_module=attn.dense,
            ff=FeedForwardSpec(linear_spec(mlp.dense_h_to_4h), None, linear_spec(mlp.dense_4h_to_h), mlp.act),
            ff_out_module=mlp, n_heads=H, n_kv_heads=H,
        ))
    return specs


def _gptj_phi_layers(base, config) -> list[LayerSpec]:
    """GPT-J and Phi-1/2: one LayerNorm read by attention and FF in parallel (``x + A(LN x) + F(LN x)``)."""
    specs = []
    for i, layer in enumerate(getattr(base, "h", None) or base.layers):
        attn = getattr(layer, "attn", None) or layer.self_attn
        norm = norm_spec(getattr(layer, "ln_1", None) or layer.input_layernorm)
        out = getattr(attn, "out_proj", None) or attn.dense
        mlp = layer.mlp
        w_in, w_out = (mlp.fc_in, mlp.fc_out) if hasattr(mlp, "fc_in") else (mlp.fc1, mlp.fc2)
        act = getattr(mlp, "act", None) or mlp.activation_fn
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True, parallel=True, ln1=norm, ln2=norm,
            value=linear_spec(attn.v_proj), value_module=attn.v_proj,
            query_module=attn.q_proj, key_module=attn.k_proj,
            out_proj=linear_spec(out), attn_out_module=out,
            ff=FeedForwardSpec(linear_spec(w_in), None, linear_spec(w_out), act),
            ff_out_module=mlp, n_heads=config.num_attention_heads, n_kv_heads=_kv_heads(config),
        ))
    return specs


def _modernbert_layers(base, config) -> list[LayerSpec]:
    """ModernBERT: a Pre-LN encoder (no norm before the first layer's attention), fused ``Wqkv`` (q | k | v),
    GeGLU in ``Wi`` (input | gate), local and global attention (the probabilities are the forward pass's)."""
    specs = []
    d = config.hidden_size
    for i, layer in enumerate(base.layers):
        attn, mlp = layer.attn, layer.mlp
        _, _, value = _split_columns(linear_spec(attn.Wqkv), d, d, d)
        gate, up = _split_columns(linear_spec(mlp.Wi), *[mlp.Wo.in_features] * 2)
        specs.append(LayerSpec(
            index=i, layer=layer, norm_first=True,
            ln1=norm_spec(layer.attn_norm), ln2=norm_spec(layer.mlp_norm),
            value=value, value_module=attn.Wqkv, value_columns=slice(2 * d, 3 * d),
            query_module=attn.Wqkv, query_columns=slice(0, d), key_module=attn.Wqkv, key_columns=slice(d, 2 * d),
            out_proj=linear_spec(attn.Wo), attn_out_module=attn.Wo,
            ff=FeedForwardSpec(gate, up, linear_spec(mlp.Wo), mlp.act),
            ff_out_module=mlp, ff_product_module=mlp.Wo,
            n_heads=config.num_attention_heads, n_kv_heads=config.num_attention_heads,
        ))
    return specs


def _no_final_norm(base) -> None:
    return None


@dataclass(frozen=True)
class Architecture:
    description: str
    read_layers: Callable
    float32_internals: str = ""  # what the HF model computes in float32 even when run in float64
    # the norm after the last layer (Pre-LN), or None; by default found by transformers' names for it
    final_norm: Optional[Callable] = None
    refuses: Callable = lambda config: None  # a configuration of the family the reader does not read: why


def _deberta_refuses(config) -> Optional[str]:
    if getattr(config, "conv_kernel_size", 0):
        return "its convolution after the first layer (conv_kernel_size > 0) is not read"
    return None


_LLAMA = Architecture("Pre-LN decoder, RMSNorm, SwiGLU, GQA, RoPE", _llama_layers,
                      float32_internals="RMSNorm and softmax", final_norm=lambda base: base.norm)
_BERT = Architecture("Post-LN encoder", _bert_layers, final_norm=_no_final_norm)
_SANDWICH = Architecture("Pre-LN decoder with a norm after each sublayer too, RMSNorm (1 + w), GeGLU, GQA",
                         _gemma2_layers, float32_internals="RMSNorm and softmax")
_PARALLEL = Architecture("Pre-LN decoder, attention and FF in parallel on one LayerNorm", _gptj_phi_layers,
                         float32_internals="softmax")
_MOE = Architecture("Pre-LN decoder, RMSNorm, a mixture of SwiGLU experts, GQA", _moe_layers,
                    float32_internals="RMSNorm, softmax and the router's weights")
_OLMO2 = Architecture("decoder with a norm after each sublayer only, RMSNorm, SwiGLU, q/k norms", _olmo2_layers,
                      float32_internals="RMSNorm and softmax")
ARCHITECTURES: dict[str, Architecture] = {
    "bert": _BERT, "roberta": _BERT, "xlm-roberta": _BERT, "camembert": _BERT, "electra": _BERT,
    "deberta-v2": Architecture("Post-LN encoder, disentangled attention",
                               lambda base, config: _bert_layers(base, config, "query_proj", "key_proj", "value_proj"),
                               final_norm=_no_final_norm, float32_internals="softmax", refuses=_deberta_refuses),
    "distilbert": Architecture("Post-LN encoder", _distilbert_layers, final_norm=_no_final_norm),
    "gpt2": Architecture("Pre-LN decoder, LayerNorm", _gpt2_layers, final_norm=lambda base: base.ln_f),
    "opt": Architecture("Pre-LN decoder, LayerNorm (Post-LN if do_layer_norm_before=False)", _opt_layers,
                        float32_internals="softmax",
                        final_norm=lambda base: base.decoder.final_layer_norm),
    "llama": _LLAMA, "mistral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "gemma": _LLAMA, "smollm3": _LLAMA,
    "phi3": Architecture("Pre-LN decoder, RMSNorm, SwiGLU, fused qkv and gate|up projections", _phi3_layers,
                         float32_internals="RMSNorm and softmax"),
    "gemma2": _SANDWICH, "gemma3_text": _SANDWICH,
    "olmo2": _OLMO2, "olmo3": _OLMO2,
    "gpt_neox": Architecture("Pre-LN decoder, parallel attention and FF, fused per-head qkv", _gpt_neox_layers,
                             float32_internals="softmax"),
    "gptj": _PARALLEL, "phi": _PARALLEL,
    "mixtral": _MOE, "olmoe": _MOE, "qwen3_moe": _MOE,
    "modernbert": Architecture("Pre-LN encoder, GeGLU, fused qkv, local and global attention", _modernbert_layers,
                               float32_internals="softmax"),
}


def architecture_of(model: nn.Module) -> Optional[Architecture]:
    """The layer reader of ``model``'s family, or None: a model without one runs every method and evaluation that
    needs only its embeddings and logits (see :func:`no_reader_reason`)."""
    architecture = ARCHITECTURES.get(model.config.model_type)
    if architecture is None or architecture.refuses(model.config):
        return None
    return architecture


def final_norm_of(architecture: Optional[Architecture], model: nn.Module, blocks: list) -> Optional[nn.Module]:
    """The norm after the last block: the reader's, or found by transformers' names for it."""
    if architecture is not None and architecture.final_norm is not None:
        return architecture.final_norm(model.base_model)
    return find_final_norm(model, blocks)


def no_reader_reason(adapter) -> Optional[str]:
    """Why a method or analysis that decomposes the layers cannot run on ``adapter`` (None when it can)."""
    if adapter.layers:
        return None
    architecture = ARCHITECTURES.get(adapter.model.config.model_type)
    refused = architecture.refuses(adapter.model.config) if architecture else None
    if refused:
        return (f"it decomposes the layers, and the layer reader of '{adapter.model.config.model_type}' does not read "
                f"this model: {refused}; the gradient, perturbation and erasure methods run on it")
    return (f"it decomposes the layers, and architecture '{adapter.model.config.model_type}' has no layer reader "
            f"(readers: {', '.join(sorted(ARCHITECTURES))}); the gradient, perturbation and erasure methods run on "
            "it (`attrbench methods --model ...` lists them)")
