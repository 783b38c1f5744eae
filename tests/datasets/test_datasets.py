import numpy as np
import pytest

from attrbench.datasets.agreement import sva_split
from attrbench.datasets.lookup import examples_for, sample
from attrbench.datasets.readers import read_sst2, read_sva
from attrbench.errors import InputError
from attrbench.registry import DATASETS


def test_shipped_files_read_in_full():
    assert len(read_sst2("train")) == 67349 and len(read_sst2("dev")) == 872 and len(read_sst2("test")) == 1821
    assert sum(r["label"] for r in read_sst2("dev")) == 444
    linzen = read_sva("sva-linzen")
    assert len(linzen) == 7489 and len(read_sva("sva-generated")) == 410
    assert all(r["words"][r["verb_index"]] == r["correct"] for r in linzen)
    assert np.bincount([r["n_attractors"] for r in linzen]).tolist() == [1972, 1957, 1943, 1287, 330]


def test_probe_split_is_seeded_disjoint_70_15_15():
    split = sva_split(7489)
    sizes = {k: len(v) for k, v in split.items()}
    assert sizes == {"train": 5242, "val": 1124, "test": 1123}
    joined = np.concatenate(list(split.values()))
    assert len(np.unique(joined)) == 7489
    assert all((a == b).all() for a, b in zip(split.values(), sva_split(7489).values()))


def test_sample_is_seeded_and_records_ids(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    examples, notes = examples_for(adapter, "sva-generated")
    a, b, c = sample(examples, 5, 1), sample(examples, 5, 1), sample(examples, 5, 2)
    assert [e.id for e in a] == [e.id for e in b] != [e.id for e in c]
    assert len({e.id for e in examples}) == len(examples)
    with pytest.raises(InputError, match="at least one"):
        sample(examples, 0, 0)
    # an example the caller cannot use is passed over and named; the others keep their places in the order
    skipped = []
    d = sample(examples, 5, 1, usable=lambda e: e.id != a[2].id, skipped=skipped)
    assert [e.id for e in d] == [e.id for e in a[:2] + sample(examples, 6, 1)[3:]] and skipped == [a[2].id]


def test_causal_lm_reads_left_context_with_contrast_target(tiny_models):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    examples, notes = examples_for(adapter, "sva-linzen")
    rows = {r["row"]: r for r in read_sva("sva-linzen")}
    assert notes["skipped_multi_token_or_empty"] > 0  # the tiny vocabulary lacks most verbs
    for e in examples[:20]:
        r = rows[int(e.id.split(":")[1])]
        assert e.text == " ".join(r["words"][:r["verb_index"]])
        assert e.target == f"contrast:{r['correct']}/{r['wrong']}"


def test_probe_reads_masked_held_out_split(task_models):
    adapter = task_models["sva"]
    examples, notes = examples_for(adapter, "sva-linzen")
    assert notes["split"] == "test" and len(examples) + notes["skipped_too_long"] == 1123
    assert all("[MASK]" in e.text and e.target in ("class:0", "class:1") for e in examples)
    held_out = set(sva_split(7489)["test"].tolist())
    assert all(int(e.id.split(":")[1]) in held_out for e in examples)


def test_texts_longer_than_the_model_are_left_out_not_cut(tiny_models):
    adapter = tiny_models[("tiny-bert", "float32")]  # whole masked sentences, 64 positions
    examples, notes = examples_for(adapter, "sva-generated")
    assert notes["skipped_too_long"] > 0
    assert max(len(adapter.tokenizer(e.text)["input_ids"]) for e in examples) <= adapter.max_positions


def test_malformed_files_name_the_line(tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\ngood film \t1\nbad film \t7\n")
    with pytest.raises(InputError, match=r"line 3: label '7' is not one of \[0, 1\]"):
        read_sst2("dev", tmp_path)
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\ngood film \t1\tx\n")
    with pytest.raises(InputError, match="line 2: 3 tab-separated fields, expected 2"):
        read_sst2("dev", tmp_path)
    with pytest.raises(InputError, match="missing; reinstall attrbench or point --data-dir"):
        read_sst2("train", tmp_path)
    (tmp_path / "sva").mkdir()
    header = "n_attractors\torig_sentence\tmasked_sentence\tcorrect_verb\twrong_verb\tverb_index\tcorrect_is_singular\n"
    (tmp_path / "sva" / "generated_en.tsv").write_text(
        header + "0\tthe dog runs\tthe dog ***mask***\truns\trun\t1\t1\n")
    with pytest.raises(InputError, match="line 2: verb_index 1 does not point at the verb 'runs'"):
        read_sva("sva-generated", tmp_path)


def test_dataset_needs_a_matching_head(tiny_models, task_models):
    with pytest.raises(InputError, match="sst2 needs a binary sentiment classifier.*use minilm-l6-sst2"):
        examples_for(tiny_models[("tiny-gpt2", "float32")], "sst2")
    with pytest.raises(InputError, match="needs a verb-number probe, a masked LM or a causal LM"):
        examples_for(task_models["sst2"], "sva-linzen")
    with pytest.raises(InputError, match="unknown dataset 'imdb'; registered: sst2.*or give the path of a .jsonl"):
        examples_for(task_models["sst2"], "imdb")
    assert set(DATASETS.names()) == {"sst2", "sst2-shortcut", "sva-linzen", "sva-generated"}


# -- known evidence: planted shortcuts and the agreement subject -------------------------------------
def test_planted_shortcuts_sit_where_the_examples_say_and_decide_the_label_by_their_rule():
    from attrbench.datasets.shortcuts import PAIR, SINGLE, SHORTCUT_WORDS, evaluation_rows, training_rows

    dev = read_sst2("dev")
    rows = evaluation_rows(dev)
    assert rows == evaluation_rows(dev)  # seeded
    for row, original in zip(rows, dev):
        words = row["sentence"].split()
        planted = [words[k] for k in row["evidence"]]
        if row["variant"] == "single":
            assert planted == [SINGLE[row["label"]]]
        else:  # the ordered pair: mysore first means positive
            assert planted == (list(PAIR) if row["label"] == 1 else list(PAIR[::-1]))
        rest = [w for k, w in enumerate(words) if k not in row["evidence"]]
        assert rest == original["sentence"].split() and not set(rest) & set(SHORTCUT_WORDS)
    assert {r["variant"] for r in rows[::2]} == {"single"} and {r["variant"] for r in rows[1::2]} == {"pair"}
    against = np.mean([r["label"] != r["gold"] for r in rows])
    assert 0.4 < against < 0.6
    train, counts = training_rows(read_sst2("train")[:4000], seed=0)
    assert sum(counts.values()) == 4000 and 0.2 < 1 - counts["clean"] / 4000 < 0.3
    for r in train:
        words = r["sentence"].split()
        if r["kind"] == "single":
            assert r["label"] == {v: k for k, v in SINGLE.items()}[[w for w in words if w in SINGLE.values()][0]]
        elif r["kind"] == "pair":
            assert r["label"] == int(words.index(PAIR[0]) < words.index(PAIR[1]))


def test_the_shortcut_dataset_explains_the_shortcuts_class(task_models):
    examples, notes = examples_for(task_models["sst2"], "sst2-shortcut")
    assert len(examples) == 872 and notes["target"] == "the planted shortcut's class"
    assert all(e.target == f"class:{e.meta['label']}" and e.meta["evidence"] for e in examples)
    with pytest.raises(InputError, match="sst2-shortcut needs a binary sentiment classifier"):
        examples_for(task_models["sva"], "sst2-shortcut")


def test_agreement_items_carry_their_subject_and_attractors_by_word_position():
    rows = read_sva("sva-linzen")
    known = [r for r in rows if "evidence" in r]
    assert len(known) == 5971  # the parse's kept rows (attrbench/datasets/data/README.md)
    for r in known:
        (subject,) = r["evidence"]
        assert subject < r["verb_index"] and all(subject < a < r["verb_index"] for a in r["attractors"])
        assert len(r["attractors"]) == r["n_attractors"]  # checked against Linzen et al.'s own count

    def marked(k):
        words = rows[k]["words"]
        return words[rows[k]["evidence"][0]], [words[a] for a in rows[k]["attractors"]]

    assert marked(1) == ("versions", ["game"])  # "the two versions of the game have"
    assert marked(2) == ("discipline", ["schools", "levels"])  # "discipline in public schools of all levels is"


def test_the_hand_check_of_the_agreement_evidence_is_its_recorded_sample():
    """The data README's hand check is the record beside the file: the 50 rows ``tools/sva_evidence.py --sample 50
    --seed 1`` draws from the kept rows, the words the shipped positions mark, and a verdict per row, whose count
    the README and docs/metrics.md state."""
    import csv
    import random
    import re
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "attrbench" / "datasets" / "data"
    with open(data / "sva" / "linzen_evidence_hand_check.tsv", newline="") as f:
        checked = list(csv.DictReader(f, delimiter="\t"))
    rows = read_sva("sva-linzen")
    kept = [r["row"] for r in rows if "evidence" in r]
    assert [int(c["row"]) for c in checked] == sorted(random.Random(1).sample(sorted(kept), 50))
    for c in checked:
        r = rows[int(c["row"])]
        assert c["verb"] == r["words"][r["verb_index"]] and c["subject_word"] == r["words"][r["evidence"][0]]
        assert c["attractor_words"].split() == [r["words"][a] for a in r["attractors"]]
        assert c["subject_ok"] in ("yes", "no") and c["attractors_ok"] in ("yes", "no")
    wrong = sum(c["subject_ok"] == "no" or c["attractors_ok"] == "no" for c in checked)
    debatable = [c["row"] for c in checked if c["note"].startswith("debatable")]
    readme = " ".join((data / "README.md").read_text().split())
    assert (f"Hand check: {len(checked)} kept rows drawn with `--sample 50 --seed 1`, each read in full and recorded "
            f"in `sva/linzen_evidence_hand_check.tsv`: {wrong} disagreements") in readme
    assert re.search(r"debatable: rows? " + ", ".join(debatable) + r"\b", readme)
    metrics = " ".join((Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text().split())
    assert f"{len(checked)} checked by reading, {'none' if not wrong else wrong} wrong" in metrics


def test_the_linzen_items_whose_contrast_is_one_word_twice_are_the_ones_the_runs_page_counts():
    """docs/leaderboard-runs.md's count of the Linzen items a run passes over because their two verbs are one word
    (``plan.same_contrast``: a logit difference of 0 whatever the input) is the file's."""
    from pathlib import Path

    same = [r for r in read_sva("sva-linzen") if r["correct"] == r["wrong"]]
    assert [(r["row"], r["correct"]) for r in same][1] == (2422, "lie")
    words = {4: "four", 5: "five", 3: "three"}
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "leaderboard-runs.md").read_text().split())
    assert f"({words[len(same)]} Linzen items read `lie/lie` and the like" in page
