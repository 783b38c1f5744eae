"""What an input attribution explains: a class, a masked position's token, a causal LM's next token.

The target also fixes the output row whose rollout row is the explanation (DESIGN.md §4): the
[CLS] row for an encoder classifier, the masked position for a masked LM or probe, the last
position for a causal LM's next token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .errors import InputError

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
