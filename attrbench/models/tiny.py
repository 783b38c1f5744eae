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
