"""What an input attribution explains: a class, a masked position's token, a causal LM's next token.

The target also fixes the output row whose rollout row is the explanation (Ferrando et al. 2022, §4, Fig. 5): the
[CLS] row for an encoder classifier, the masked position for a masked LM or probe, the last
position for a causal LM's next token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ..errors import InputError

KINDS = ("auto", "cls", "position", "mask", "next", "class", "token", "contrast")
SYNTAX = "auto, cls, mask, next, position:N, class:K, token:WORD, contrast:GOOD/BAD"


@dataclass(frozen=True)
class Target:
    kind: str = "auto"
    position: Optional[int] = None
    label: Optional[int] = None  # class index
    token: Optional[str] = None  # token whose probability/logit is explained
    contrast: Optional[str] = None  # the wrong continuation for contrast targets

    @classmethod
    def parse(cls, text: Optional[str]) -> "Target":
        if not text or text == "auto":
            return cls()
        kind, _, arg = text.partition(":")
        try:
            if kind in ("cls", "mask", "next") and not arg:
                return cls(kind)
            if kind == "position":
                return cls(kind, position=int(arg))
            if kind == "class":
                return cls(kind, label=int(arg))
            if kind == "token" and arg:
                return cls(kind, token=arg)
            if kind == "contrast" and "/" in arg:
                good, bad = arg.split("/", 1)
                return cls(kind, token=good, contrast=bad)
        except ValueError:
            pass
        raise InputError(f"target '{text}' is not understood; write one of: {SYNTAX}")

    def __str__(self) -> str:
        arg = {"position": self.position, "class": self.label, "token": self.token,
               "contrast": f"{self.token}/{self.contrast}"}.get(self.kind)
        return self.kind if arg is None else f"{self.kind}:{arg}"


def explained_row(adapter, input_ids: list[int], target: Target) -> int:
    """The output position whose representation the target reads."""
    n = len(input_ids)
    mask_id = adapter.tokenizer.mask_token_id
    has_mask = mask_id is not None and mask_id in input_ids
    if target.kind in ("auto", "class") and getattr(adapter.model.config, "attrbench_read_at", None) == "mask":
        target = Target("mask")  # a probe read at the masked word (minilm-l6-sva)
    if target.kind == "position":
        if not -n <= target.position < n:
            raise InputError(f"target position {target.position} is outside the {n} tokens of the text")
        return target.position % n
    if target.kind == "mask" or (target.kind in ("token", "contrast", "auto") and not adapter.causal and has_mask):
        if mask_id is None:
            raise InputError(f"'{adapter.name}' has no mask token; use --target position:N")
        if not has_mask:
            raise InputError(f"the text has no {adapter.tokenizer.mask_token} token; put it where the word to "
                             "explain goes, or use --target position:N")
        return input_ids.index(mask_id)
    if target.kind in ("token", "contrast") and not adapter.causal:
        raise InputError(f"a token target on encoder '{adapter.name}' needs a {adapter.tokenizer.mask_token} "
                         "token in the text")
    if target.kind == "next" and not adapter.causal:
        raise InputError(f"'{adapter.name}' is not a causal LM: next-token targets need a decoder")
    # cls / class / auto: encoders read [CLS] (position 0), decoders (and their classifiers) the last token
    return n - 1 if adapter.causal else 0


def head_kind(adapter) -> Optional[str]:
    """'classifier', 'token_classifier', 'masked_lm', 'causal_lm', or None for a bare encoder/decoder."""
    name = type(adapter.model).__name__
    for suffix, kind in (("ForSequenceClassification", "classifier"), ("ForTokenClassification", "token_classifier"),
                         ("ForMaskedLM", "masked_lm"),
                         ("ForCausalLM", "causal_lm"), ("LMHeadModel", "causal_lm")):
        if name.endswith(suffix):
            return kind
    return None


def no_head_reason(adapter) -> Optional[str]:
    if head_kind(adapter) is None:
        return (f"'{adapter.name}' ({type(adapter.model).__name__}) has no output head to explain; gradient and "
                "erasure methods need a classifier, masked-LM or causal-LM model (e.g. minilm-l6-sst2, "
                "minilm-l6-sva or smollm2-135m)")
    return None


@dataclass(frozen=True)
class ResolvedTarget:
    """A target made concrete for one text: the row read and the logit (or logit difference) explained.

    ``head`` is None for a model without an output head: only the row is defined then, which is all
    that row-reading methods (rollouts, maps) use.
    """

    head: Optional[str]
    row: int  # the position whose output is read (classifiers: the row rollouts use)
    index: Optional[int] = None  # class index or vocabulary id (None: the model has no head)
    contrast_index: Optional[int] = None
    target: Target = Target()  # as written
    explains: str = ""  # what the index means, for people: "class 1 (positive)", "'Ġare' - 'Ġis'"

    def logit(self, logits):
        """(B, ...) model logits, or (B, V) logits at the row (``adapter.row_logits``) -> (B,) explained score
        (a logit, or a logit difference)."""
        at = self._at(logits)
        score = at[:, self.index]
        return score if self.contrast_index is None else score - at[:, self.contrast_index]

    def probability(self, logits):
        """(B,) the scored probability: of the explained class/token, or for a contrast A/B the same contrast as a
        probability, σ(logit A − logit B) = p(A | {A, B})."""
        at = self._at(logits)
        if self.contrast_index is None:
            return at.softmax(-1)[:, self.index]
        return torch.sigmoid(at[:, self.index] - at[:, self.contrast_index])

    def _at(self, logits):
        if self.head is None:
            raise InputError(f"target '{self.target}' reads no logit: the model has no output head")
        return logits if self.head == "classifier" or logits.ndim == 2 else logits[:, self.row]

    def meta(self) -> dict:
        """What every result records about its target."""
        return {"target": str(self.target), "row": self.row, "index": self.index, "contrast_index": self.contrast_index,
                "explains": self.explains}


def _token_ids(adapter, word: str) -> list[int]:
    text = word if word.startswith(" ") or not adapter.causal else " " + word  # continuation after a word
    return adapter.tokenizer(text, add_special_tokens=False)["input_ids"]


def same_contrast(adapter, target: Target | str) -> bool:
    """Whether ``target`` is a contrast whose two words are one token for ``adapter`` (a data error, e.g. four
    Linzen items read 'lie/lie'): the logit difference it explains is 0 whatever the input."""
    target = Target.parse(target) if isinstance(target, str) else target
    return target.kind == "contrast" and _token_ids(adapter, target.token) == _token_ids(adapter, target.contrast)


def _token_id(adapter, word: str) -> int:
    ids = _token_ids(adapter, word)
    if len(ids) != 1:
        raise InputError(f"'{word}' is {len(ids)} tokens for '{adapter.name}'; a token target must be one token")
    if ids[0] == adapter.tokenizer.unk_token_id:
        raise InputError(f"'{word}' is not in the vocabulary of '{adapter.name}' (it reads as "
                         f"{adapter.tokenizer.unk_token}); a token target must be a known token")
    return ids[0]


def _class_name(adapter, label: int) -> str:
    name = (getattr(adapter.model.config, "id2label", None) or {}).get(label)
    return f"class {label}" + (f" ({name})" if name and name != f"LABEL_{label}" else "")


def resolve(adapter, input_ids: list[int], target: Target, logits=None, predict: bool = True) -> ResolvedTarget:
    """Validate a target against the model and one text, and fix the class/token it refers to.

    The one place targets are checked: every method, evaluation, leaderboard unit and ``score``
    comes through here, so a target that does not fit the model is the same error everywhere.
    ``logits`` (of the unperturbed text) give predictions; it may be a tensor or a function
    returning one, called only for targets that need the model's prediction (auto, cls, mask, next).
    ``predict=False`` only validates: such targets then come back with ``index`` None.
    """
    def predicted(at_row: bool) -> Optional[int]:
        if not predict:
            return None
        values = logits() if callable(logits) else logits
        return int((values[0, row] if at_row else values[0]).argmax())

    head = head_kind(adapter)
    row = explained_row(adapter, input_ids, target)
    if head is None:
        if target.kind in ("class", "token", "contrast"):
            raise InputError(f"target '{target}' needs an output head, and '{adapter.name}' "
                             f"({type(adapter.model).__name__}) has none: use auto, cls or position:N")
        return ResolvedTarget(None, row, target=target, explains=f"row {row} (no output head)")
    if head in ("classifier", "token_classifier"):
        if target.kind in ("token", "contrast", "next") or (head == "classifier" and target.kind == "mask"):
            raise InputError(f"'{adapter.name}' is a classifier: use --target class:K or auto (predicted class)")
        n_classes = adapter.model.config.num_labels
        if target.label is not None and not 0 <= target.label < n_classes:
            raise InputError(f"class {target.label} does not exist: '{adapter.name}' has classes 0..{n_classes - 1}")
        label = target.label if target.label is not None else predicted(at_row=head != "classifier")
        return ResolvedTarget(head, row, label, target=target,
                              explains="predicted class" if label is None else _class_name(adapter, label))
    if target.kind == "class":
        raise InputError(f"'{adapter.name}' is a language model: use --target token:WORD, contrast:A/B or auto")
    token = _token_id(adapter, target.token) if target.kind in ("token", "contrast") else predicted(at_row=True)
    contrast = _token_id(adapter, target.contrast) if target.kind == "contrast" else None
    if contrast is not None and contrast == token:
        raise InputError(f"target '{target}': both words are the token {target.token!r} for '{adapter.name}', so "
                         "their logit difference is 0 for any input; a contrast needs two different tokens")
    if token is None:
        return ResolvedTarget(head, row, None, None, target, "predicted token")
    names = adapter.tokenizer.convert_ids_to_tokens([token] + ([] if contrast is None else [contrast]))
    return ResolvedTarget(head, row, token, contrast, target, " - ".join(repr(n) for n in names))


@torch.no_grad()
def resolve_text(adapter, input_ids: list[int], target: Target | str | None) -> ResolvedTarget:
    """:func:`resolve` on one tokenised text; the model runs only if the target needs its prediction."""
    target = target if isinstance(target, Target) else Target.parse(target)
    ids = torch.tensor([input_ids], device=adapter.device)
    return resolve(adapter, input_ids, target,
                   lambda: adapter.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits)
