"""Model adapter: a loaded HF model + tokenizer, checked, encoded, and its forward pass captured.

The real forward pass is read through forward hooks at every scope boundary of every layer
(layer input, attention output, both norms' inputs and outputs, FF output, layer output), so the
decomposition can be checked against it. Attention probabilities come from
``output_attentions=True``, which needs eager attention in transformers 5.
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Callable, Iterator, Optional, Sequence

import torch
from torch import nn

from ..errors import InputError, ModelLoadError
from ..ops.tokens import pad_ids
from .architectures import ARCHITECTURES, architecture_of, final_norm_of, no_reader_reason
from .generic import check_readable, find_blocks, is_causal
from .spec import LayerSpec
from .training.lora import state_hash


@dataclass
class Batch:
    """Token ids right-padded to the longest sequence; ``lengths`` are the real lengths."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    lengths: list[int]
    tokens: list[list[str]]
    truncated: list[bool]


@dataclass
class LayerCapture:
    """The real tensors at one layer's scope boundaries, (B, n, ...) or sliced to one sequence.

    An identity norm's input and output are its neighbours' (OLMo 2: the layer input before attention, the
    attention's residual stream before the FF); ``attn_res`` is the residual stream after attention, the FF norm's
    input in a serial block and ``x + attn_out`` in a parallel one."""

    x: torch.Tensor  # layer input
    attn_probs: torch.Tensor  # (B, H, n, n)
    attn_out: torch.Tensor  # what attention adds to the residual stream (o-proj with bias; post-norm if any)
    ln1_in: torch.Tensor
    ln1_out: torch.Tensor
    ln2_in: torch.Tensor
    ln2_out: torch.Tensor
    ff_out: torch.Tensor  # what the FF adds to the residual stream (post-norm if any)
    out: torch.Tensor  # layer output
    attn_res: torch.Tensor  # x + attn_out
    attn_post_in: Optional[torch.Tensor] = None  # the attention output before its post-norm (sandwich blocks)
    ff_post_in: Optional[torch.Tensor] = None  # the FF output before its post-norm
    expert_ids: Optional[torch.Tensor] = None  # (B, n, k) each token's routed experts (a mixture of experts)
    expert_weights: Optional[torch.Tensor] = None  # (B, n, k) their router weights, as the forward pass used them

    def sequence(self, b: int, n: int) -> "LayerCapture":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values = {k: (None if v is None else v[b, :, :n, :n] if k == "attn_probs" else v[b, :n])
                  for k, v in values.items()}
        return LayerCapture(**values)


def state_dict_hash(model: nn.Module) -> str:
    """sha256 of a model's weights as float32 (``training.lora.state_hash``): the identity of weights in memory."""
    return state_hash({k: v.detach().to(torch.float32).cpu().numpy() for k, v in model.state_dict().items()})


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


@contextmanager
def forward_hooks(hooks: Sequence[tuple[nn.Module, Callable]]) -> Iterator[None]:
    """Register (module, hook) forward hooks for the duration of a block, and remove them after it."""
    handles = [module.register_forward_hook(hook) for module, hook in hooks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class TransformerAdapter:
    """One call shape over every Hugging Face encoder or decoder: ``encode`` texts, run the head, and, for a family
    with a layer reader (``architectures.py``), ``capture`` the forward pass at every scope boundary.

    A model without a reader has ``layers == []``: the methods and evaluations that need only the embeddings and
    the logits run on it, and those that decompose the layers say why not (``no_reader_reason``). Whether the
    model is causal is read from the model itself (``generic.is_causal``), not from its family's name.
    """

    def __init__(self, model: nn.Module, tokenizer, name: str, source: Optional[str] = None):
        impl = getattr(model.config, "_attn_implementation", None)
        if impl != "eager":
            raise ModelLoadError(
                f"model '{name}' uses attn_implementation='{impl}', which returns no attention weights in "
                "transformers 5; load it with attn_implementation='eager'")
        check_readable(model, name)
        self.architecture = architecture_of(model)  # None: no layer reader
        self.model = model.eval()
        if hasattr(model.config, "use_cache"):
            model.config.use_cache = False  # nothing is generated: a cache only costs memory (and recurrent
            # hybrids, e.g. Jamba or Qwen3-Next, refuse to start one from a plain forward pass)
        self.tokenizer = tokenizer
        self.name = name
        self.source = source or name
        self._weights_sha256: Optional[str] = None
        for pname, param in model.named_parameters():
            if not torch.isfinite(param).all():
                raise ModelLoadError(f"model '{name}' has NaN/inf in weight '{pname}'; the weights are corrupt: "
                                     "re-download or rebuild them")
        self.layers: list[LayerSpec] = self._read_layers()
        self.blocks: list[nn.Module] = [s.layer for s in self.layers] or find_blocks(model)
        self.causal: bool = is_causal(model)
        # transformers' causal LMs can compute the head at chosen rows only (see row_logits)
        self._logits_to_keep = self.causal and "logits_to_keep" in inspect.signature(model.forward).parameters
        self._check_activation()
        if tokenizer.pad_token is None:  # decoders: padding is masked out, any id will do
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        tokenizer.padding_side = "right"

    # -- facts -------------------------------------------------------------------------------
    @property
    def weights_sha256(self) -> str:
        """The identity of the weights: set by ``load_model`` (the zoo file's or a task model's recorded hash),
        else the hash of the weights themselves as float32, computed on first use."""
        if self._weights_sha256 is None:
            self._weights_sha256 = state_dict_hash(self.model)
        return self._weights_sha256

    @weights_sha256.setter
    def weights_sha256(self, value: str) -> None:
        self._weights_sha256 = value

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def device(self) -> torch.device:
        """Where the model's weights are: every tensor the adapter makes for it goes there too."""
        return next(self.model.parameters()).device

    @property
    def norm_first(self) -> bool:
        return self.layers[0].norm_first

    @property
    def final_norm(self) -> Optional[nn.Module]:
        """The norm after the last layer (Pre-LN decoders), or None."""
        return final_norm_of(self.architecture, self.model, self.blocks)

    @property
    def n_layers(self) -> int:
        """The number of transformer blocks (read by the layer reader, or found in the module tree)."""
        return len(self.blocks)

    def _read_layers(self) -> list[LayerSpec]:
        if self.architecture is None:
            return []
        return self.architecture.read_layers(self.model.base_model, self.model.config)

    @property
    def max_positions(self) -> int:
        config = self.model.config
        limit = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
        limit = limit if limit and limit > 0 else None  # XLNet says -1: no limit
        embeddings = getattr(self.model.base_model, "embeddings", None)
        if limit and getattr(embeddings, "padding_idx", None) is not None and hasattr(embeddings,
                                                                                       "position_embeddings"):
            limit -= embeddings.padding_idx + 1  # RoBERTa-style positions start after padding_idx
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        if tok_limit and tok_limit < 1_000_000:
            limit = min(limit, tok_limit) if limit else tok_limit
        return int(limit) if limit else 1_000_000  # no stated limit (a model with relative positions only)

    def _check_activation(self) -> None:
        zero = torch.zeros(1, dtype=self.dtype, device=self.device)
        for spec in self.layers:
            if spec.ff.activation(zero).abs().item() != 0.0:
                raise ModelLoadError(
                    f"FF activation {type(spec.ff.activation).__name__} has g(0) != 0; the zero-baseline "
                    "IG decomposition needs g(0) = 0")

    def to(self, dtype: Optional[torch.dtype] = None, device: Optional[torch.device | str] = None
           ) -> "TransformerAdapter":
        """Move the model to another dtype and/or device (the layer specs are read again: they hold its tensors)."""
        dtype = dtype or self.dtype
        device = torch.device(device) if device is not None else self.device
        if dtype != self.dtype or device != self.device:
            self.model.to(device=device, dtype=dtype)
            self.layers = self._read_layers()
        return self

    # -- input -------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], truncate: bool = False) -> Batch:
        if isinstance(texts, str):
            texts = [texts]
        if not texts:
            raise InputError("no text given: pass at least one non-empty text")
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise InputError("empty text: give at least one word of text")
        limit = self.max_positions
        ids = [self.tokenizer(t, truncation=False)["input_ids"] for t in texts]
        truncated = [len(i) > limit for i in ids]
        if any(truncated) and not truncate:
            longest = max(len(i) for i in ids)
            raise InputError(f"text is {longest} tokens but '{self.name}' takes at most {limit}: shorten it "
                             "or pass truncate=True (--truncate) to cut it explicitly")
        ids = [i[:limit] for i in ids]
        if any(len(i) == 0 for i in ids):
            raise InputError("a text tokenised to no tokens: give at least one word of text")
        return self.encode_ids(ids, truncated)

    def encode_ids(self, ids: Sequence[Sequence[int]], truncated: Optional[list[bool]] = None) -> Batch:
        """A batch of token-id sequences already tokenised (e.g. perturbed copies of a text)."""
        input_ids, mask = pad_ids(ids, self.tokenizer.pad_token_id, self.device)
        tokens = [self.tokenizer.convert_ids_to_tokens(list(seq)) for seq in ids]
        return Batch(input_ids, mask, [len(i) for i in ids], tokens, truncated or [False] * len(ids))

    # -- forward -----------------------------------------------------------------------------
    @property
    def pads_embeddings(self) -> bool:
        """Whether input embeddings of different lengths may share a pass, right-padded with an attention mask: a
        causal LM read at its own rows (no position attends to a later one), and an encoder (its mask hides the
        padding from every key, and its row, a head's first token or a masked word, does not move), as token ids are
        padded. A decoder read by a sequence-classification head finds its last token from the ids, which embeddings
        do not carry, so it is read at one length at a time."""
        return bool(self._logits_to_keep) or not self.causal

    def row_logits(self, rows: Sequence[int] | int, **inputs) -> torch.Tensor:
        """(B, classes or vocabulary) logits of each sequence at its row (a sequence classifier has one row).

        A causal LM computes its head only at the rows asked for (``logits_to_keep``): the unembedding
        of a 49k-token vocabulary is about a fifth of SmolLM2's weights (28 M of 135 M), Gemma 3's 262k-token one
        168 M multiply-adds per row, more than its 18 layers per token, and every gradient and perturbation pass
        needs one row of it. ``logits_to_keep`` keeps the same positions of every sequence, so a batch of
        right-padded texts whose rows differ would pay for the head at each of its distinct rows in every
        sequence; a pre-hook on the head gives it each sequence's own row alone (any post-processing of the
        logits, Gemma 2's soft-capping say, is element-wise and follows unchanged).
        """
        batch = next(v for v in inputs.values() if v is not None).shape[0]
        rows = torch.as_tensor([rows] * batch if isinstance(rows, int) else list(rows), dtype=torch.long,
                               device=self.device)
        every = torch.arange(batch, device=self.device)
        if self._logits_to_keep:
            keep, where = torch.unique(rows, return_inverse=True)

            def own_row(module, args):  # (B, len(keep), d) hidden states -> (B, 1, d), each sequence's row
                if args and torch.is_tensor(args[0]) and args[0].shape[:2] == (batch, len(keep)):
                    return (args[0][every, where].unsqueeze(1), *args[1:])
                return None

            head = self.model.get_output_embeddings()
            handle = head.register_forward_pre_hook(own_row) if head is not None else None
            try:
                logits = self.model(**inputs, logits_to_keep=keep).logits  # (B, 1, V), or (B, len(keep), V)
            finally:
                if handle is not None:
                    handle.remove()
            return logits[:, 0] if logits.shape[1] == 1 else logits[every, where]
        logits = self.model(**inputs).logits
        return logits if logits.ndim == 2 else logits[every, rows]

    def _hooks(self, store: list[dict]):
        """Hooks that keep every layer's tensors at its scope boundaries in ``store[layer]``."""
        def keep(i, key, which):
            def hook(module, args, output):
                store[i][key] = (_first(args) if which == "in" else _first(output)).detach()
            return hook

        def route(i):  # the experts' call: (token states, expert ids, router weights), tokens flattened
            def hook(module, args, output):
                store[i]["expert_ids"], store[i]["expert_weights"] = args[1].detach(), args[2].detach()
            return hook

        hooks = []
        for i, spec in enumerate(self.layers):
            points = [(spec.layer, "x", "in"), (spec.layer, "out", "out"),
                      (spec.attn_out_module, "attn_out", "out"),
                      (spec.ln1.module, "ln1_in", "in"), (spec.ln1.module, "ln1_out", "out"),
                      (spec.ln2.module, "ln2_in", "in"), (spec.ln2.module, "ln2_out", "out"),
                      (spec.ff_out_module, "ff_out", "out")]
            for norm, key in ((spec.attn_post_norm, "attn_post_in"), (spec.ff_post_norm, "ff_post_in")):
                if norm is not None:
                    points.append((norm.module, key, "in"))
            hooks += [(module, keep(i, key, which)) for module, key, which in points
                      if module is not None and not isinstance(module, nn.Identity)]
            if spec.experts_module is not None:
                hooks.append((spec.experts_module, route(i)))
        return forward_hooks(hooks)

    @staticmethod
    def _fill(spec: LayerSpec, tensors: dict) -> dict:
        """The boundaries no module's hook sees: identity norms' (their neighbours) and the attention's residual
        stream where no norm reads it (parallel blocks, OLMo 2)."""
        if spec.ln1.kind == "identity":
            tensors["ln1_in"] = tensors["ln1_out"] = tensors["x"]
        serial_reader = spec.norm_first and not spec.parallel and spec.ln2.kind != "identity"
        tensors["attn_res"] = (tensors["ln2_in"] if serial_reader else tensors["ln1_in"] if not spec.norm_first
                               else tensors["x"] + tensors["attn_out"])
        if spec.ln2.kind == "identity":
            tensors["ln2_in"] = tensors["ln2_out"] = tensors["x"] if spec.parallel else tensors["attn_res"]
        return tensors

    @torch.no_grad()
    def capture(self, batch: Batch) -> list[LayerCapture]:
        """Run the unmodified model once and return the real tensors at every scope boundary."""
        if not self.layers:
            raise InputError(f"'{self.name}' cannot be decomposed: {no_reader_reason(self)}")
        store: list[dict] = [{} for _ in self.layers]
        with self._hooks(store):
            output = self.model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                           output_attentions=True)
        attentions = getattr(output, "attentions", None)
        if not attentions or len(attentions) != len(self.layers) or any(a is None for a in attentions):
            raise ModelLoadError(f"model '{self.name}' returned no attention weights; load it with "
                                 "attn_implementation='eager'")
        captures = []
        for spec, layer_store, probs in zip(self.layers, store, attentions):
            shape = layer_store["x"].shape  # OPT flattens tokens inside its FF: restore (B, n, d)
            tensors = self._fill(spec, {k: v.reshape(*shape[:2], -1) if k.startswith("expert_") else v.reshape(shape)
                                        for k, v in layer_store.items()})
            captures.append(LayerCapture(attn_probs=probs.detach(), **tensors))
        for i, cap in enumerate(captures):
            mask = batch.attention_mask.bool()
            if not torch.isfinite(cap.out[mask]).all():
                raise InputError(f"the forward pass of '{self.name}' produced NaN/inf at layer {i}; "
                                 "use dtype float32 or float64")
        return captures


def supported_architectures() -> dict[str, str]:
    return {name: arch.description for name, arch in ARCHITECTURES.items()}
