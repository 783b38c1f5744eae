"""What attrbench reads from any Hugging Face model, with no layer reader: its blocks, final norm and causality.

The gradient and perturbation methods, the erasure metrics, the known answers, the axioms and the sanity check
need only the token embeddings, the logits and (the sanity check) which modules are the blocks and the head. These
are found here from the module tree and the model's own behaviour, so they hold for any architecture transformers
builds; what needs the layers' weights (the decomposition family) needs a reader (``architectures.py``).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..errors import ModelLoadError

# names transformers gives the norm after the last block (LLaMA/Gemma/Qwen "norm", GPT-2 "ln_f", OPT and
# GPT-NeoX "final_layer_norm", Phi "final_layernorm", ModernBERT "final_norm", Falcon "ln_f", MPT "norm_f")
FINAL_NORM_NAMES = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "final_norm", "norm_f")


def refuse_encoder_decoder(config, name: str) -> None:
    """Raise in one line if ``config`` is an encoder-decoder's: checked on the config, before any weight loads."""
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"'{name}' is an encoder-decoder model ({config.model_type}); attrbench explains encoders and decoders "
            "(e.g. BERT, RoBERTa, ModernBERT, GPT-2, LLaMA, Gemma, Qwen3): load one of those")


def check_readable(model: nn.Module, name: str) -> None:
    """Raise in one line if ``model`` is outside what attrbench reads: an encoder-decoder, or no token embeddings."""
    refuse_encoder_decoder(model.config, name)
    try:
        embeddings = model.get_input_embeddings()
    except (NotImplementedError, AttributeError):
        embeddings = None
    if not isinstance(embeddings, nn.Embedding):
        raise ModelLoadError(f"'{name}' ({type(model).__name__}) has no token-embedding module "
                             "(get_input_embeddings()); attrbench attributes to token embeddings: load a text model")


def find_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's transformer blocks, in order: the ``nn.ModuleList`` inside the base model holding the most
    parameters (its length is ``num_hidden_layers`` where the config has one)."""
    base = model.base_model
    expected = getattr(model.config, "num_hidden_layers", None)
    lists = [m for m in base.modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    if expected:
        lists = [m for m in lists if len(m) == expected] or lists
    if not lists:
        return []
    best = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
    return list(best)


def find_final_norm(model: nn.Module, blocks: list[nn.Module]) -> Optional[nn.Module]:
    """The norm after the last block (Pre-LN decoders), found by transformers' names for it, or None: the last one
    registered outside the blocks (ModernBERT's embeddings have a ``norm`` too, before its ``final_norm``)."""
    inside = {id(m) for block in blocks for m in block.modules()}
    found = None
    for path, module in model.base_model.named_modules():
        if path and path.rsplit(".", 1)[-1] in FINAL_NORM_NAMES and id(module) not in inside and hasattr(
                module, "weight"):
            found = module
    return found


@torch.no_grad()
def is_causal(model: nn.Module) -> bool:
    """Whether position 0's last hidden state ignores a later token: read from the model, not from its name.

    Two short inputs differing only in their last token; a causal model (a decoder, or a decoder read by a
    classification head) gives position 0 the same state in both, a bidirectional encoder does not. The base model
    alone runs (one pass of 2 x 3 tokens): a head adds nothing to the answer and may be most of the cost (Gemma's
    262,144-word unembedding).
    """
    vocab = model.get_input_embeddings().num_embeddings
    device = next(model.parameters()).device
    ids = torch.tensor([[1, 2, 3], [1, 2, 4]], dtype=torch.long, device=device) % vocab
    mask = torch.ones_like(ids)
    try:
        out = model.base_model(input_ids=ids, attention_mask=mask)
    except Exception as err:  # noqa: BLE001 - the model's own error, reported as why it cannot be read
        raise ModelLoadError(f"{type(model).__name__} did not run on a 3-token input ({type(err).__name__}: "
                             f"{(str(err).splitlines() or [''])[0][:160]}); attrbench needs a model that takes "
                             "input_ids")
    state = getattr(out, "last_hidden_state", None)
    state = out[0] if state is None and isinstance(out, (tuple, list)) else state
    if not isinstance(state, torch.Tensor) or state.ndim != 3:  # a base model that is not the text model (Llama 4)
        states = getattr(model(input_ids=ids, attention_mask=mask, output_hidden_states=True), "hidden_states", None)
        state = states[-1] if states else None
    if not isinstance(state, torch.Tensor) or state.ndim != 3:
        raise ModelLoadError(f"{type(model).__name__}'s base model returns no hidden states per token; attrbench "
                             "needs them to read the model")
    first = state[:, 0].double()
    scale = float(first.abs().max()) or 1.0
    return float((first[0] - first[1]).abs().max()) <= 1e-5 * scale
