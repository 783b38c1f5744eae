"""Soft comprehensiveness and soft sufficiency (Zhao & Aletras 2023, "Incorporating Attribution
Importance for Improving Faithfulness Metrics", ACL).

Hard erasure deletes the top-k tokens and ignores how much more important one token is than
another. The soft metrics perturb every token in proportion to its score instead: each dimension of
token i's input embedding is kept with probability q_i (Bernoulli masks), where q_i is the
method's score rescaled to [0, 1] over the example's non-special tokens, ``q_i = max(s_i, 0) / max_j
max(s_j, 0)`` (negative evidence counts as unimportant):

    soft comprehensiveness = p(target | x) − E[p(target | e ⊙ M)],  M_id ~ Bernoulli(1 − q_i)   (higher: better)
    soft sufficiency       = p(target | x) − E[p(target | e ⊙ M)],  M_id ~ Bernoulli(q_i)       (lower: better)

e are the word embeddings (``inputs_embeds``; positions are added by the model as usual); special
tokens are never masked. The expectation is the mean over ``samples`` masks, seeded per example
and shared by every method (common random numbers, so paired tests compare methods on the same
masks). With all-equal scores q = 1: soft comprehensiveness is the drop when every non-special
embedding is zeroed, and soft sufficiency is 0 (a test). Undefined where no score is positive.
"""
import zlib

import numpy as np
import torch

from attrbench.plugin import Evaluation, InputError, Param, register, resolve_text, special_mask

METRICS = ("soft_comprehensiveness", "soft_sufficiency")


def embeddings_reason(adapter):
    """Why the word embeddings of a model cannot be fed back as ``inputs_embeds`` (None if they can)."""
    try:
        embed = adapter.model.get_input_embeddings()
    except (NotImplementedError, AttributeError):
        embed = None
    if not isinstance(embed, torch.nn.Embedding):
        return f"'{adapter.name}' has no word-embedding layer to mask (get_input_embeddings)"
    return None


def keep_probabilities(scores: np.ndarray, special: np.ndarray):
    """q_i in [0, 1] from the scores (specials: 1, never masked); None when no non-special score is positive."""
    positive = np.clip(np.where(special, 0.0, scores), 0.0, None)
    top = positive.max()
    if top <= 0:
        return None
    return np.where(special, 1.0, positive / top)


@torch.no_grad()
def soft_drops(adapter, ids: list[int], resolved, q: np.ndarray, special: np.ndarray, samples: int,
               seed: int) -> tuple[float, float]:
    """(soft comprehensiveness, soft sufficiency) of one example for keep probabilities ``q``."""
    model = adapter.model
    tokens = torch.tensor([ids])
    embeds = model.get_input_embeddings()(tokens)  # (1, n, d)
    p_full = float(resolved.probability(adapter.row_logits(resolved.row, input_ids=tokens,
                                                           attention_mask=torch.ones_like(tokens)))[0])
    rng = np.random.default_rng(seed)
    uniform = torch.from_numpy(rng.random((samples, len(ids), embeds.shape[-1])))
    out = []
    for keep in (1.0 - q, q):  # comprehensiveness: important tokens are dropped; sufficiency: kept
        keep = torch.from_numpy(np.where(special, 1.0, keep))[None, :, None]
        masks = (uniform < keep).to(embeds.dtype)
        logits = adapter.row_logits(resolved.row, inputs_embeds=embeds * masks,
                                    attention_mask=torch.ones(samples, len(ids), dtype=torch.long))
        out.append(p_full - float(resolved.probability(logits).mean()))
    return out[0], out[1]


class SoftErasure(Evaluation):
    name, family = "soft_erasure", "faithfulness"
    description = "soft comprehensiveness and sufficiency: embeddings masked in proportion to the scores"
    reference = "Zhao & Aletras 2023, Incorporating Attribution Importance for Improving Faithfulness Metrics"
    primary_metric = "soft_comprehensiveness"
    higher_is_better = {"soft_comprehensiveness": True, "soft_sufficiency": False}
    params = {"samples": Param(20, "Bernoulli mask samples per example (the expectation's sample size)", minimum=1)}

    def check(self, adapter, methods, context):
        reason = embeddings_reason(adapter)
        if reason:
            raise InputError(f"evaluation 'soft_erasure' cannot run on '{adapter.name}': {reason}; use "
                             "erasure_aopc or naopc (token deletion) instead")
        super().check(adapter, methods, context)

    def run(self, adapter, methods, examples, context):
        samples = self.get_params()["samples"]
        records = []
        for method in methods:
            values = {metric: [] for metric in METRICS}
            for example, result in zip(examples, context.attributions(adapter, method, examples)):
                ids = adapter.tokenizer.convert_tokens_to_ids(result.tokens)
                special = special_mask(adapter, ids)
                q = keep_probabilities(result.values, special)
                drops = (None, None) if q is None else soft_drops(
                    adapter, ids, resolve_text(adapter, ids, example.target), q, special, samples,
                    seed=zlib.crc32(f"{context.seed}:{example.id}".encode()))
                for metric, value in zip(METRICS, drops):
                    values[metric].append(value)
            for metric in METRICS:
                records.append(self.record(adapter, context, method, metric, values[metric], examples,
                                           samples=samples))
        return records


register(SoftErasure)
