"""Blank-out erasure: how much the target's probability moves when one token is blanked.

``s_j = |p(target | x) - p(target | x with token j replaced by a blank)|``, or with ``signed=True``
``s_j = p(target | x) - p(target | x with token j blanked)``: positive when token j supports the
target, negative when it works against it. The blank is the mask token (or ``blank_token``).
Causal LMs have no mask token; they get a bare space token (``Ġ`` / ``▁``) when the vocabulary has
one, because their unk/eos token (``<|endoftext|>``) starts a new document and would wipe out the
whole left context; otherwise unk, then eos. All n variants go through the model in batches
(``batch_size``), in token-id space (never decoded and re-tokenised), each read at the target's row; a batch of
texts pools its texts' variants into batches of one length.

The probability read is the target's readout: p(class) or p(token) (a softmax), and for a contrast
``A/B`` σ(logit A − logit B). σ is monotone, so for a contrast the signed scores rank the tokens
exactly as the change of the logit difference logit A − logit B does, which is what the methods
explain; for a class or token target p is a softmax over all classes/tokens: it moves with the
explained logit relative to the others, so its change need not rank tokens as that logit's own change.

The unsigned form is the SVA reference of the ALTI paper (Ferrando et al. 2022) and the default
(``signed`` is left out of the key at False, so rows stored before it existed keep theirs). The
signed form is the leave-one-out erasure baseline of ALTI-Logit (Ferrando et al. 2023), the
yardstick of ``faithfulness_corr`` for the logit and contrast targets of language models: signed
attributions (grad × input, ALTI-Logit, LRP) correlated with an unsigned change compare a direction
with a magnitude.
"""
import numpy as np

from attrbench.plugin import InputError, Method, MethodResult, Param, Readout, no_head_reason, register
from attrbench.plugin.internal import target_probabilities


class BlankOut(Method):
    name, family, output = "blank_out", "erasure", "scores"
    batched = True  # every text's variants pooled into batches of one length
    description = ("|p(target) change| (signed=True: p(x) - p(x blanked)) when each token is replaced by the mask "
                   "(or a neutral) token")
    reference = "Ferrando et al. 2022 (SVA reference); Ferrando et al. 2023 (signed); Li et al. 2016 (erasure)"
    params = {"blank_token": Param(None, "the token put in place of each token (default: mask, bare space, unk, eos)",
                                   kind=(str, type(None))),
              "batch_size": Param(64, "variants per forward pass", minimum=1),
              "signed": Param(False, "p(x) - p(x with token j blanked) (positive: token j supports the target) "
                                     "instead of its absolute value", legacy=False)}

    def supports(self, adapter):
        return no_head_reason(adapter)

    def _blank_id(self, adapter) -> int:
        tok, blank_token = adapter.tokenizer, self.get_params()["blank_token"]
        if blank_token is not None:
            blank = tok.convert_tokens_to_ids(blank_token)
            if blank is None or blank == tok.unk_token_id and blank_token != tok.unk_token:
                raise InputError(f"blank token '{blank_token}' is not in the vocabulary of '{adapter.name}'")
            return blank
        space = None
        if tok.mask_token_id is None and adapter.causal:
            vocab = tok.get_vocab()
            space = next((vocab[s] for s in ("Ġ", "▁") if s in vocab), None)
        for candidate in (tok.mask_token_id, space, tok.unk_token_id, tok.eos_token_id):
            if candidate is not None:
                return candidate
        raise InputError(f"'{adapter.name}' has no mask, unk or eos token: give blank_token")

    def run(self, adapter, texts, *, targets, layers, truncate) -> list[MethodResult]:
        batch = adapter.encode(texts, truncate=truncate)
        blank = self._blank_id(adapter)
        variants, rows, readouts = [], [], []
        for b, (n, resolved) in enumerate(zip(batch.lengths, targets)):
            ids = batch.input_ids[b, :n].tolist()
            variants += [ids] + [ids[:j] + [blank] + ids[j + 1:] for j in range(n)]  # row j + 1: token j blanked
            rows += [resolved.row] * (n + 1)
            readouts += [Readout.of(resolved)] * (n + 1)
        probs = target_probabilities(adapter, readouts, variants, rows, self.get_params()["batch_size"],
                                     equal_lengths=True)
        results, start = [], 0
        for b, n in enumerate(batch.lengths):
            own, start = probs[start:start + n + 1], start + n + 1
            change = own[0] - own[1:]  # p(x) - p(x with token j blanked)
            values = change if self.get_params()["signed"] else np.abs(change)
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], values, None,
                                        {"blank_id": blank, "p_target": float(own[0]),
                                         "truncated": batch.truncated[b]}))
        return results


register(BlankOut)
