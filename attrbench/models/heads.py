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


def _electra_mlm(model, final_norm) -> list[HeadStep]:
    p = model.generator_predictions
    return [linear_spec(p.dense), Activation(p.activation), norm_spec(p.LayerNorm),
            linear_spec(model.generator_lm_head)]


def _modernbert_mlm(model, final_norm) -> list[HeadStep]:  # the base model's output is after its final norm
    h = model.head
    return [norm_spec(final_norm), linear_spec(h.dense), Activation(h.act), norm_spec(h.norm),
            linear_spec(model.decoder)]


def _deberta_mlm(model, final_norm) -> list[HeadStep]:
    if model.legacy:  # BERT's head under DeBERTa's names
        return _bert_mlm(model, final_norm)
    h = model.lm_predictions.lm_head  # its logits are the word embeddings' products, plus a bias
    return [linear_spec(h.dense), Activation(h.transform_act_fn), norm_spec(h.LayerNorm),
            Linear(model.get_input_embeddings().weight.T, h.bias)]


def _roberta_classifier(model, final_norm) -> list[HeadStep]:  # <s> through dense, tanh, out_proj
    c = model.classifier
    return [linear_spec(c.dense), Activation(torch.tanh), linear_spec(c.out_proj)]


def _bert_classifier(model, final_norm) -> list[HeadStep]:  # the pooler reads [CLS]; dropout is off in eval
    pooler = model.bert.pooler
    return [linear_spec(pooler.dense), Activation(pooler.activation), linear_spec(model.classifier)]


def _token_classifier(model, final_norm) -> list[HeadStep]:
    return [linear_spec(model.classifier)]


HEADS: dict[str, Callable] = {
    "GPT2LMHeadModel": _causal_lm, "OPTForCausalLM": _causal_lm,
    "BertForMaskedLM": _bert_mlm, "RobertaForMaskedLM": _roberta_mlm, "DistilBertForMaskedLM": _distilbert_mlm,
    "XLMRobertaForMaskedLM": _roberta_mlm, "CamembertForMaskedLM": _roberta_mlm, "ElectraForMaskedLM": _electra_mlm,
    "ModernBertForMaskedLM": _modernbert_mlm, "DebertaV2ForMaskedLM": _deberta_mlm,
    "BertForSequenceClassification": _bert_classifier, "BertForTokenClassification": _token_classifier,
    "RobertaForSequenceClassification": _roberta_classifier, "XLMRobertaForSequenceClassification": _roberta_classifier,
}
# config fields of causal LMs whose logits are not ``final_norm(h) @ W_U`` (a cap, a scale): their heads are not read
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def _plain_causal_lm(model) -> bool:
    """A ``...ForCausalLM`` whose logits are the final norm and one linear unembedding (LLaMA, Qwen, Gemma 3,
    Pythia, Phi, OLMo 2...): not a model that caps or scales its logits (Gemma 2's soft-capping)."""
    config = model.config
    return (type(model).__name__.endswith("ForCausalLM") and isinstance(model.get_output_embeddings(), torch.nn.Linear)
            and not any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS))


def head_steps(adapter) -> Optional[list[HeadStep]]:
    """The head of ``adapter``'s model as steps (the last one linear, onto the logits), or None if not listed."""
    read = HEADS.get(type(adapter.model).__name__)
    if read is None and _plain_causal_lm(adapter.model):
        read = _causal_lm
    return None if read is None else read(adapter.model, adapter.final_norm)


def no_readout_reason(adapter) -> Optional[str]:
    """Why a method that reads the head as steps cannot run on ``adapter`` (None when it can)."""
    if head_steps(adapter) is None:
        return (f"its head ({type(adapter.model).__name__}) has no readout; supported heads: causal LMs whose logits "
                f"are the final norm and one linear map, {', '.join(sorted(HEADS))}")
    return None
