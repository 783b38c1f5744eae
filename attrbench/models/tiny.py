"""Randomly initialised small models of every supported architecture, built from configs.

Encoders come with a masked-LM head and decoders with a causal-LM head, so every method,
gradient and erasure baselines included, has an output to explain.

For tests and quick tries with no weights at hand. Every parameter (biases and norm gains
included) is randomised with a fixed seed, so a decomposition that drops a bias or a gamma fails
completeness instead of passing on HF's zero/one initialisation.
"""
from __future__ import annotations

import torch
import transformers as hf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from ..errors import ModelLoadError
from .generic import is_causal

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = """the a an this that these those of to in on at with for from by and or but not no is are was
were be been has have had do does it they he she we you i my your their our film movie story plot actor
actors key keys cabinet cabinets dog dogs cat cats boy boys girl girls man men woman women author
authors book books table tables house is are good bad great terrible funny boring dull wonderful awful
best worst very too quite rather really so more most less well never always still even just only one
two three all some many much little big small new old long short high young first last other same
near next here there when while because if than then as like about over under after before runs run
sees see likes like makes make plays play was were . , ! ? ' - ( )""".split()
VOCAB = list(dict.fromkeys(SPECIAL + WORDS))
MAX_POSITIONS = 64


def tiny_tokenizer(encoder: bool) -> hf.PreTrainedTokenizerFast:
    """Word-level tokenizer over VOCAB (unknown words -> [UNK]); encoders wrap in [CLS] ... [SEP]."""
    vocab = {tok: i for i, tok in enumerate(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if encoder:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return hf.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=MAX_POSITIONS)


def _configs() -> dict[str, hf.PretrainedConfig]:
    v, d, L, H, ff, P = len(VOCAB), 32, 2, 4, 64, MAX_POSITIONS
    return {
        "tiny-bert": hf.BertConfig(vocab_size=v, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                                   intermediate_size=ff, max_position_embeddings=P, pad_token_id=0),
        "tiny-roberta": hf.RobertaConfig(vocab_size=v, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                                         intermediate_size=ff, max_position_embeddings=P + 2, pad_token_id=0,
                                         bos_token_id=2, eos_token_id=3),
        "tiny-distilbert": hf.DistilBertConfig(vocab_size=v, dim=d, n_layers=L, n_heads=H, hidden_dim=ff,
                                               max_position_embeddings=P, pad_token_id=0),
        "tiny-gpt2": hf.GPT2Config(vocab_size=v, n_embd=d, n_layer=L, n_head=H, n_inner=ff, n_positions=P,
                                   bos_token_id=2, eos_token_id=3, pad_token_id=0),
        "tiny-opt": hf.OPTConfig(vocab_size=v, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                                 ffn_dim=ff, max_position_embeddings=P, word_embed_proj_dim=d,
                                 bos_token_id=2, eos_token_id=3, pad_token_id=0),
        "tiny-llama": hf.LlamaConfig(vocab_size=v, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                                     num_key_value_heads=2, intermediate_size=ff, max_position_embeddings=P,
                                     bos_token_id=2, eos_token_id=3, pad_token_id=0),
    }


TINY_MODELS = tuple(_configs())
ENCODERS = ("tiny-bert", "tiny-roberta", "tiny-distilbert")


def randomise(model: torch.nn.Module, seed: int = 0, scale: float = 0.2) -> torch.nn.Module:
    """Fill every parameter with seeded noise; norm gains around 1."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float64).to(param.dtype)
            is_gain = param.ndim == 1 and ("norm" in name.lower() or "ln_" in name) and name.endswith("weight")
            param.copy_(1.0 + scale * noise if is_gain else scale * noise)
    return model


def build_tiny(name: str, config_overrides: dict | None = None, seed: int = 0):
    """(model, tokenizer) for a tiny model name; ``config_overrides`` edits the config (tests)."""
    config = _configs()[name]
    for key, value in (config_overrides or {}).items():
        setattr(config, key, value)
    cls = hf.AutoModelForCausalLM if name not in ENCODERS else hf.AutoModelForMaskedLM
    torch.manual_seed(seed)
    model = cls.from_config(config, attn_implementation="eager")
    return randomise(model, seed).eval(), tiny_tokenizer(encoder=name in ENCODERS)


def tiny_classifier(kind: str = "bert", layers: int = 2, labels: int = 3, seed: int = 0,
                    dtype: torch.dtype = torch.float64):
    """(model, tokenizer): a random sequence classifier (``kind`` "bert" or "roberta"), for methods that read a
    classification head (the pooler and classifier of BERT; RoBERTa's head, which has no readout)."""
    common = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                  intermediate_size=64, num_labels=labels)
    config = (hf.BertConfig(max_position_embeddings=MAX_POSITIONS, **common) if kind == "bert" else
              hf.RobertaConfig(max_position_embeddings=MAX_POSITIONS + 2, **common))
    torch.manual_seed(seed)
    model = hf.AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    return randomise(model, seed).to(dtype).eval(), tiny_tokenizer(encoder=True)


# --- any architecture transformers builds, shrunk by one rule ---------------------------------------------------
# The standard names (PretrainedConfig.attribute_map maps them to each family's own) and the other size fields
# transformers' configs use; each is set only where the config has it.
SHRINK = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 8, "intermediate_size": 64, "ffn_dim": 64, "n_inner": 64, "d_ff": 64, "ffn_hidden_size": 64,
          "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 32, "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4,
          "num_experts_per_tok": 2, "max_position_embeddings": 2 * MAX_POSITIONS, "n_positions": 2 * MAX_POSITIONS,
          "sliding_window": 16, "global_attn_every_n_layers": 2, "embedding_size": 32, "rotary_dim": 4,
          "partial_rotary_factor": 0.5, "kv_lora_rank": 8, "q_lora_rank": 8, "qk_rope_head_dim": 8,
          "qk_nope_head_dim": 8, "v_head_dim": 8, "encoder_layers": 2, "decoder_layers": 2,
          "encoder_attention_heads": 4, "decoder_attention_heads": 4, "num_kv_heads": 2, "pad_token_id": 0,
          "bos_token_id": 2, "eos_token_id": 3, "vocab_size": len(VOCAB), "type_vocab_size": 2}


def shrunk_config(model_type: str, **overrides) -> hf.PretrainedConfig:
    """transformers' default config of ``model_type`` with every size field it has set small (``SHRINK``), so a model
    of any family builds in milliseconds: 2 layers, width 32, 4 heads of 8, FF 64, the tiny vocabulary."""
    cls = hf.CONFIG_MAPPING[model_type]
    return cls(**{**_shrunk_fields(cls), **overrides})


def _shrunk_fields(cls) -> dict:
    """The ``SHRINK`` values under ``cls``'s own field names, for the fields it has and can set; a sub-config
    (``text_config``) is shrunk the same way."""
    default = cls()
    names = {std: default.attribute_map.get(std, std) for std in SHRINK}
    values = {names[std]: v for std, v in SHRINK.items()
              if (hasattr(default, std) or hasattr(default, names[std]))
              and not isinstance(getattr(cls, names[std], None), property)}  # derived: it follows the others
    if getattr(default, "head_dim", None) is None:
        values.pop("head_dim", None)  # a family that derives it from the width
    text = getattr(default, "text_config", None)
    if isinstance(text, hf.PretrainedConfig):
        values["text_config"] = _shrunk_fields(type(text))
    return values


def build_family(model_type: str, head: str = "causal_lm", seed: int = 0, **overrides):
    """(model, tokenizer): a random ``model_type`` with ``head`` (causal_lm, masked_lm or classifier), shrunk by
    :func:`shrunk_config`, eager attention, every parameter randomised (``randomise``)."""
    auto = {"causal_lm": hf.AutoModelForCausalLM, "masked_lm": hf.AutoModelForMaskedLM,
            "classifier": hf.AutoModelForSequenceClassification}[head]
    config = shrunk_config(model_type, **overrides)
    if head == "classifier":
        config.num_labels = 2
    torch.manual_seed(seed)
    model = randomise(auto.from_config(config, attn_implementation="eager", experts_implementation="eager"), seed)
    # an encoder's texts are wrapped in [CLS] ... [SEP], a decoder's (a decoder classifier's too) are not; a model
    # the probe cannot run is left to the adapter, which says why it cannot read it
    try:
        encoder = config.is_encoder_decoder or not is_causal(model.eval())
    except ModelLoadError:
        encoder = True
    return model.eval(), tiny_tokenizer(encoder=encoder)


# The families researchers study in 2025-26, as tiny random models (load_model names), one per block shape the
# readers know (sandwich norms, post-norms only, parallel blocks, fused projections, mixtures of experts, Pre-LN and
# disentangled encoders, BERT's shape under other names): every method runs on each (tests/models/test_generic.py).
FAMILIES: dict[str, tuple[str, str]] = {
    "tiny-gemma2": ("gemma2", "causal_lm"), "tiny-gemma3": ("gemma3_text", "causal_lm"),
    "tiny-pythia": ("gpt_neox", "causal_lm"), "tiny-gptj": ("gptj", "causal_lm"), "tiny-phi2": ("phi", "causal_lm"),
    "tiny-phi3": ("phi3", "causal_lm"), "tiny-qwen3": ("qwen3", "causal_lm"), "tiny-olmo2": ("olmo2", "causal_lm"),
    "tiny-mixtral": ("mixtral", "causal_lm"), "tiny-olmoe": ("olmoe", "causal_lm"),
    "tiny-qwen3-moe": ("qwen3_moe", "causal_lm"), "tiny-modernbert": ("modernbert", "masked_lm"),
    "tiny-deberta-v2": ("deberta-v2", "masked_lm"), "tiny-xlm-roberta": ("xlm-roberta", "masked_lm"),
    "tiny-electra": ("electra", "masked_lm"),
}
