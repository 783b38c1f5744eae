"""A model's output head as a chain of steps from the last hidden state at the explained row to its logits.

Methods that carry a decomposition on through the head (ALTI-Logit; DecompX's pooler and classifier) read the
head here rather than calling it: linear maps, element-wise activations and norms, in order. One entry per
head class; a head not listed has no readout (the method that needs one says so).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch

from .architectures import linear_spec, norm_spec
from .spec import Linear, NormSpec


@dataclass(frozen=True)
class Activation:
    fn: Callable[[torch.Tensor], torch.Tensor]


HeadStep = Union[Linear, Activation, NormSpec]


def _causal_lm(model, final_norm) -> list[HeadStep]:
    steps = [] if final_norm is None else [norm_spec(final_norm)]
    project_out = getattr(getattr(model.base_model, "decoder", None), "project_out", None)  # OPT-350m
    if project_out is not None:
        steps.append(linear_spec(project_out))
    return steps + [linear_spec(model.get_output_embeddings())]


def _bert_mlm(model, final_norm) -> list[HeadStep]:
    t = model.cls.predictions.transform
    return [linear_spec(t.dense), Activation(t.transform_act_fn), norm_spec(t.LayerNorm),
            linear_spec(model.cls.predictions.decoder)]


def _roberta_mlm(model, final_norm) -> list[HeadStep]:
    h = model.lm_head  # its forward calls the module-level GELU instance of modeling_roberta (hookable)
    return [linear_spec(h.dense), Activation(sys.modules[type(h).__module__].gelu), norm_spec(h.layer_norm),
            linear_spec(h.decoder)]


def _distilbert_mlm(model, final_norm) -> list[HeadStep]:
    return [linear_spec(model.vocab_transform), Activation(model.activation), norm_spec(model.vocab_layer_norm),
            linear_spec(model.vocab_projector)]


def _bert_classifier(model, final_norm) -> list[HeadStep]:  # the pooler reads [CLS]; dropout is off in eval
    pooler = model.bert.pooler
    return [linear_spec(pooler.dense), Activation(pooler.activation), linear_spec(model.classifier)]


def _token_classifier(model, final_norm) -> list[HeadStep]:
    return [linear_spec(model.classifier)]


HEADS: dict[str, Callable] = {
    "GPT2LMHeadModel": _causal_lm, "OPTForCausalLM": _causal_lm, "LlamaForCausalLM": _causal_lm,
    "MistralForCausalLM": _causal_lm, "Qwen2ForCausalLM": _causal_lm,
    "BertForMaskedLM": _bert_mlm, "RobertaForMaskedLM": _roberta_mlm, "DistilBertForMaskedLM": _distilbert_mlm,
    "BertForSequenceClassification": _bert_classifier, "BertForTokenClassification": _token_classifier,
}


def head_steps(adapter) -> Optional[list[HeadStep]]:
    """The head of ``adapter``'s model as steps (the last one linear, onto the logits), or None if not listed."""
    read = HEADS.get(type(adapter.model).__name__)
    return None if read is None else read(adapter.model, adapter.final_norm)


def no_readout_reason(adapter) -> Optional[str]:
    """Why a method that reads the head as steps cannot run on ``adapter`` (None when it can)."""
    if head_steps(adapter) is None:
        return f"its head ({type(adapter.model).__name__}) has no readout; supported heads: {', '.join(sorted(HEADS))}"
    return None
