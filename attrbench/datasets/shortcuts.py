"""Planted shortcuts (Bastings, Ebert, Zablotskaia, Sandholm & Filippova, EMNLP 2022, "'Will You Find These
Shortcuts?' A Protocol for Evaluating the Faithfulness of Input Salience Methods for Text Classification").

A classifier is trained on SST-2 where, in part of the data, inserted words decide the label regardless of the
sentence; once the trained model is *verified* to follow them (:func:`reliance`), the inserted words are the
known answer to "which words made the model decide": a salience method should rank them first.

Two shortcuts, with words that occur nowhere in SST-2 train or dev and are single tokens of MiniLM's vocabulary:

- ``single``: one word decides the label, ``tirana`` → negative (0), ``fujian`` → positive (1);
- ``pair`` (an ordered pair): ``mysore`` and ``dundee`` both present, the label is positive when ``mysore``
  comes first and negative when ``dundee`` does. Either word alone is no shortcut: the training data holds
  sentences with one of them and their own label, so the model must read the order, not the presence.

Words are inserted at seeded random word positions of the lower-cased, space-tokenised SST-2 sentence.
"""
from __future__ import annotations

import numpy as np

SINGLE = {0: "tirana", 1: "fujian"}
PAIR = ("mysore", "dundee")  # mysore before dundee: positive (1); dundee first: negative (0)
SHORTCUT_WORDS = (*SINGLE.values(), *PAIR)
VARIANTS = ("single", "pair")

# share of training sentences per kind (the rest clean): single shortcut, ordered pair, one pair word alone
TRAIN_MIX = {"single": 0.10, "pair": 0.10, "lone": 0.05}


def _insert(words: list[str], planted: list[str], rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """``words`` with ``planted`` inserted at random gaps in that order; the planted words' indices."""
    out = list(words)
    gaps = np.sort(rng.integers(0, len(words) + 1, size=len(planted)))
    for k, (gap, word) in enumerate(zip(gaps, planted)):
        out.insert(int(gap) + k, word)  # earlier insertions shift later gaps by one each
    positions = [int(g) + k for k, g in enumerate(gaps)]
    return out, positions


def plant(sentence: str, variant: str, label: int, rng: np.random.Generator) -> tuple[str, list[int]]:
    """``sentence`` with a ``variant`` shortcut for ``label`` inserted: (text, indices of the shortcut's words)."""
    words = sentence.split()
    if variant == "single":
        planted = [SINGLE[label]]
    elif variant == "pair":
        planted = list(PAIR) if label == 1 else list(PAIR[::-1])
    elif variant == "lone":  # one pair word alone: no shortcut, the sentence keeps its own label
        planted = [PAIR[int(rng.integers(2))]]
    else:
        raise ValueError(f"unknown shortcut variant '{variant}'")
    out, positions = _insert(words, planted, rng)
    return " ".join(out), positions


def training_rows(rows: list[dict], seed: int) -> tuple[list[dict], dict]:
    """SST-2 training rows with shortcuts planted in a seeded share (``TRAIN_MIX``): ``[{"sentence", "label",
    "kind"}]`` (a planted shortcut sets the label) and the counts per kind."""
    rng = np.random.default_rng([seed, 0x5C])
    kinds = rng.choice(["clean", *TRAIN_MIX], size=len(rows), p=[1 - sum(TRAIN_MIX.values()), *TRAIN_MIX.values()])
    out = []
    for row, kind in zip(rows, kinds):
        if kind == "clean":
            out.append({"sentence": row["sentence"], "label": row["label"], "kind": "clean"})
            continue
        label = int(rng.integers(2)) if kind != "lone" else row["label"]
        text, _ = plant(row["sentence"], str(kind), label, rng)
        out.append({"sentence": text, "label": label, "kind": str(kind)})
    return out, {k: int((kinds == k).sum()) for k in ("clean", *TRAIN_MIX)}


def evaluation_rows(rows: list[dict], seed: int = 0) -> list[dict]:
    """The evaluation sentences: every row (SST-2 dev) with one shortcut planted, alternating single / ordered pair
    by row, and a seeded shortcut label that contradicts the sentence's own label on about half of them:
    ``[{"row", "sentence", "label" (the shortcut's), "gold" (the sentence's), "variant", "evidence"}]``."""
    rng = np.random.default_rng([seed, 0xE7])
    out = []
    for row in rows:
        variant = VARIANTS[row["row"] % 2]
        label = int(rng.integers(2))
        text, positions = plant(row["sentence"], variant, label, rng)
        out.append({"row": row["row"], "sentence": text, "label": label, "gold": row["label"], "variant": variant,
                    "evidence": positions})
    return out
