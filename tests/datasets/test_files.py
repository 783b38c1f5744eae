"""Your own data: JSONL/CSV/TSV files as datasets, minimal pairs, rationales and the plausibility evaluation."""
import contextlib
import csv
import io
import json

import numpy as np
import pytest
import torch

from attrbench.cli import main
from attrbench.datasets.lookup import examples_for
from attrbench.datasets.readers import read_sst2
from attrbench.errors import InputError
from attrbench.ops.targets import resolve_text
from attrbench.ops.tokens import word_tokens
from attrbench.plugin.evaluation import EvalContext
from attrbench.registry import EVALS
from attrbench.runtime.config import read_config
from attrbench.runtime.context import RunContext
from attrbench.runtime.external import Precomputed
from attrbench.runtime.pipeline import evaluate, run_leaderboard
from attrbench.runtime.records import collect

PAIRS = [  # (good, bad, what a causal LM makes of it, what a masked LM makes of it)
    ("the keys to the cabinet are on the table .", "the keys to the cabinet is on the table .", "ok", "ok"),
    ("the dog runs .", "the dogs runs .", "ok", "ok"),
    ("dogs run .", "dogs runs .", "ok", "ok"),
    ("the zebra is here .", "the zebras are here .", "not_one_word_difference", "not_one_word_difference"),
    ("is the dog here ?", "are the dog here ?", "no_left_context", "ok"),
    ("the cat sleeps .", "the cat sleep .", "multi_token", "multi_token"),  # not in the tiny vocabulary
    ("the boys see the cat.", "the boys see the cats.", "ok", "ok"),  # punctuation is a word of its own
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def write_table(path, rows, delimiter):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


# -- the same scores as the shipped dataset -------------------------------------------------
@pytest.mark.parametrize("layout", ["tsv", "csv", "jsonl-names"])
def test_sst2_rows_in_a_file_score_as_the_shipped_dataset(task_models, tmp_path, layout):
    adapter = task_models["sst2"]
    methods, evals = ["alti", "grad_x_input"], ["faithfulness_corr", "erasure_aopc"]
    shipped = evaluate(adapter, methods, evals, "sst2", n=4, seed=3, progress=False,
                       dataset_params={"target": "label"})  # the file's rows give the gold label
    ids = shipped[0]["example_ids"]
    dev = read_sst2("dev")
    rows = [{"id": i.split(":")[-1], "text": dev[int(i.split(":")[-1])]["sentence"],
             "label": dev[int(i.split(":")[-1])]["label"]} for i in ids]
    if layout == "jsonl-names":  # labels by name, as the model's id2label has them
        path = write_jsonl(tmp_path / "mine.jsonl",
                           [{**r, "label": ["negative", "positive"][r["label"]]} for r in rows])
    else:
        path = write_table(tmp_path / f"mine.{layout}", rows, "\t" if layout == "tsv" else ",")
    mine = evaluate(adapter, methods, evals, path, n=None, progress=False,
                    eval_params={"faithfulness_corr": {"reference_method": "grad_l2"}})
    assert [(r["method"], r["metric"]) for r in mine] == [(r["method"], r["metric"]) for r in shipped]
    for a, b in zip(shipped, mine):
        assert sorted(b["example_ids"]) == sorted(f"mine:{i.split(':')[-1]}" for i in a["example_ids"])
        by_id = dict(zip(b["example_ids"], b["values"]))
        assert [by_id[f"mine:{i.split(':')[-1]}"] for i in a["example_ids"]] == pytest.approx(a["values"], abs=1e-6)
        assert (b["file_sha256"] != a["file_sha256"]
                and b["data_file"] == str((tmp_path / f"mine.{path[-5:].split('.')[-1]}").resolve()))


# -- minimal pairs ----------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_minimal_pairs_read_as_a_contrast_at_the_differing_word(tiny_models, tmp_path, model):
    adapter = tiny_models[(model, "float64")]
    path = write_jsonl(tmp_path / "pairs.jsonl", [{"sentence_good": g, "sentence_bad": b} for g, b, *_ in PAIRS])
    examples, notes = examples_for(adapter, path)
    expected = [p[2 if adapter.causal else 3] for p in PAIRS]
    kept = [k for k, e in enumerate(expected) if e == "ok"]
    assert [e.id for e in examples] == [f"pairs:{k + 1}" for k in kept]
    for reason in ("not_one_word_difference", "no_left_context", "multi_token"):
        assert notes[f"skipped_{reason}"] == expected.count(reason)
    first = examples[0]
    assert first.target == "contrast:are/is"
    assert first.text == ("the keys to the cabinet" if adapter.causal
                          else "the keys to the cabinet [MASK] on the table .")
    assert examples[-1].target == "contrast:cat/cats"
    # the explained score is the real logit difference at the row the model reads
    ids = adapter.tokenizer(first.text)["input_ids"]
    resolved = resolve_text(adapter, ids, first.target)
    with torch.no_grad():
        logits = adapter.model(input_ids=torch.tensor([ids])).logits
    vocab = adapter.tokenizer.convert_tokens_to_ids  # word-level tiny vocabulary: the words are the tokens
    assert float(resolved.logit(logits)[0]) == pytest.approx(
        float(logits[0, resolved.row, vocab("are")] - logits[0, resolved.row, vocab("is")]))
    assert resolved.row == (len(ids) - 1 if adapter.causal else ids.index(adapter.tokenizer.mask_token_id))
    # and the evaluations score them, the skipped items counted in every record
    records = evaluate(adapter, ["alti", "blank_out"], ["erasure_aopc", "faithfulness_corr"], path, n=None,
                       progress=False, eval_params={"faithfulness_corr": {"reference_method": "blank_out"}})
    assert {r["sample_size"] for r in records} == {len(kept)}
    assert all(r["skipped_not_one_word_difference"] == 1 and r["layout"] == "minimal pairs" for r in records)
    assert all(np.isfinite([v for v in r["values"] if v is not None]).all() for r in records)


def test_minimal_pairs_need_a_language_model(task_models, tmp_path):
    path = write_jsonl(tmp_path / "pairs.jsonl",
                       [{"sentence_good": "the dog runs .", "sentence_bad": "the dogs runs ."}])
    with pytest.raises(InputError, match=r"pairs.jsonl line 1: minimal pairs .* needs a masked or causal LM; .* is a "
                                         "sequence classifier"):
        examples_for(task_models["sst2"], path)


# -- bad input: one line, naming the file and line ----------------------------------------------
BAD_FILES = [  # (file name, content, expected message)
    ("bad.jsonl", '{"text": "a good film", "label": 1}\n{"text": "a bad film", "label": 0\n',
     r"bad.jsonl line 2: not valid JSON"),
    ("bad.jsonl", '{"text": "a good film", "label": 1}\n["a bad film", 0]\n',
     r"bad.jsonl line 2: each line must be a JSON object"),
    ("bad.csv", 'text,label\na good film,1\n"a bad, bad film",0\na bad, bad film,0\n',
     r"bad.csv line 4: 3 fields, but the header has 2"),
    ("bad.tsv", "text\tlabel\na good film\tupbeat\n",
     r"bad.tsv line 2: label 'upbeat' is not one of .*: 0 \(negative\), 1 \(positive\)"),
    ("bad.tsv", "text\tlabel\na good film\t7\n", r"bad.tsv line 2: label 7 does not exist: .* has classes 0..1"),
    ("bad.jsonl", '{"text": "a good film", "label": 1, "rationale": [1, 3]}\n',
     r"bad.jsonl line 1: rationale index 3 is outside the 3 words of text"),
    ("bad.csv", 'text,label,rationale_mask\na good film,1,"0 1"\n',
     r"bad.csv line 2: rationale_mask must be 3 values of 0 or 1"),
    ("bad.jsonl", '{"text": "a good film", "label": 1, "rationale": "good"}\n',
     r"line 1: rationale must be a list of integers"),
    ("bad.jsonl", "", r"bad.jsonl has no rows"),
    ("bad.csv", "", r"bad.csv is empty; expected a header row"),
    ("bad.csv", "text,label\n", r"bad.csv has no rows"),
    ("bad.csv", "sentence,label\na good film,1\n", r"bad.csv line 2: needs a text field .*found label, sentence"),
    ("bad.jsonl", '{"text": "a good film"}\n', r"line 1: no target: give label .* or target"),
    ("bad.jsonl", '{"text": "a good [MASK]", "target": "token:film"}\n',
     r"line 1: .* is a classifier: use target class:K"),
    ("bad.jsonl", '{"text": "a good film", "target": "class:x"}\n', r"line 1: target 'class:x' is not understood"),
    ("bad.jsonl", '{"id": 1, "text": "a good film", "label": 1}\n{"id": "1", "text": "a film", "label": 0}\n',
     r"line 2: id '1' is already used on line 1"),
    ("bad.jsonl", '{"text": "a film", "sentence_good": "a film", "sentence_bad": "a films", "label": 0}\n',
     r"line 1: give text or sentence_good/sentence_bad, not both"),
    ("bad.tsv", "text\tlabel\na good \xe9 film\t1\n".encode("latin-1"), r"bad.tsv line 2: not UTF-8 text"),
    ("bad.txt", "a good film\n",
     r"unknown dataset .*bad.txt'.*or give the path of a .jsonl, .csv, .tsv or .parquet file"),
    ("missing.jsonl", None, r"dataset file .*missing.jsonl does not exist"),
]


@pytest.mark.parametrize("name,content,message", BAD_FILES, ids=[f"{k}-{b[0]}" for k, b in enumerate(BAD_FILES)])
def test_a_bad_file_is_a_one_line_error_naming_its_line(task_models, tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError, match=message):
        examples_for(task_models["sst2"], str(path))
    out = tmp_path / "out"
    code, err = cli(["eval", "--model", str(task_models["root"] / "sst2"), "--dataset", str(path), "--eval",
                     "erasure_aopc", "--method", "grad_l2", "--out", str(out)])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and not out.exists()


def test_a_label_needs_a_classifier_and_all_skipped_pairs_say_why(tiny_models, tmp_path):
    gpt2 = tiny_models[("tiny-gpt2", "float32")]
    labelled = write_jsonl(tmp_path / "l.jsonl", [{"text": "a good film", "label": 1}])
    with pytest.raises(InputError, match=r"line 1: a label \(class target\) needs a classifier or a probe; 'tiny-gpt2' "
                                         "is a causal LM: give target instead"):
        examples_for(gpt2, labelled)
    skipped = write_jsonl(tmp_path / "s.jsonl", [{"sentence_good": g, "sentence_bad": b} for g, b, c, _ in PAIRS
                                                 if c != "ok"])
    with pytest.raises(InputError, match=r"no usable row for 'tiny-gpt2': all 3 minimal pairs were skipped \(1 multi "
                                         r"token, 1 not one word difference, 1 no left context\)"):
        examples_for(gpt2, skipped)
    with pytest.raises(InputError, match="is one file and has no split 'dev'"):
        examples_for(gpt2, write_jsonl(tmp_path / "t.jsonl", [{"text": "a good film", "target": "next"}]), "dev")


def test_texts_longer_than_the_model_are_skipped_and_counted(tiny_models, tmp_path):
    path = write_jsonl(tmp_path / "long.jsonl", [{"text": "a good film", "target": "next"},
                                                 {"text": " ".join(["film"] * 80), "target": "next"}])
    examples, notes = examples_for(tiny_models[("tiny-gpt2", "float32")], path)
    assert len(examples) == 1 and notes["skipped_too_long"] == 1


# -- rationales and plausibility ------------------------------------------------------------------
RATIONALE_ROWS = [
    {"id": "a", "text": "a wonderful! film", "target": "next", "rationale": [1]},  # "wonderful!" is two tokens
    {"id": "b", "text": "the movie was very boring", "target": "next", "rationale_mask": [0, 0, 0, 1, 1]},
    {"id": "c", "text": "the best and the worst film of all", "target": "next", "rationale": "1 4"},
    {"id": "d", "text": "no rationale here", "target": "next"},
]


def oracle(adapter, examples, sign: float) -> Precomputed:
    """Scores that are exactly the rationale (sign 1), or its reverse (sign -1): every rationale token ranked
    below every other, without ties (tied scores are one block for average precision)."""
    table = {}
    for e in examples:
        ids = adapter.tokenizer(e.text)["input_ids"]
        marked = word_tokens(adapter, e.text, e.meta.get("rationale", [])).astype(float)
        table[e.text] = (adapter.tokenizer.convert_ids_to_tokens(ids),
                         marked if sign > 0 else -marked + 0.01 * np.arange(len(ids))[::-1])
    return Precomputed("oracle" if sign > 0 else "reverse", table)


def test_word_rationales_map_to_the_tokens_that_cover_them(tiny_models, tmp_path):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    path = write_table(tmp_path / "r.csv", [{k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()}
                                            for r in RATIONALE_ROWS[:3]], ",")
    examples, notes = examples_for(adapter, path)
    assert [e.meta["rationale"] for e in examples] == [[1], [3, 4], [1, 4]] and notes["with_rationale"] == 3
    tokens = adapter.tokenizer.convert_ids_to_tokens(adapter.tokenizer(examples[0].text)["input_ids"])
    marked = word_tokens(adapter, examples[0].text, [1])
    assert tokens == ["a", "wonderful", "!", "film"] and marked.tolist() == [False, True, True, False]


def test_evidence_columns_are_read_checked_and_scored_by_ground_truth(tiny_models, tmp_path):
    adapter = tiny_models[("tiny-gpt2", "float32")]
    rows = [{"text": "the keys to the cabinet", "target": "next", "evidence": [1], "attractors": "4"},
            {"text": "a wonderful! film", "target": "next", "evidence": "1"}]
    examples, notes = examples_for(adapter, write_jsonl(tmp_path / "e.jsonl", rows))
    assert [e.meta.get("evidence") for e in examples] == [[1], [1]] and examples[0].meta["attractors"] == [4]
    assert notes["with_evidence"] == 2
    table = {e.text: (adapter.tokenizer.convert_ids_to_tokens(adapter.tokenizer(e.text)["input_ids"]),
                      word_tokens(adapter, e.text, e.meta["evidence"]).astype(float)) for e in examples}
    records = EVALS.get("ground_truth")(adapter, [Precomputed("oracle", table)], examples,
                                        EvalContext("e.jsonl", shared=RunContext()))
    by_metric = {r["metric"]: r["values"] for r in records}
    assert by_metric["mrr"] == by_metric["pointing_game"] == by_metric["mass_accuracy"] == [1.0, 1.0]
    assert by_metric["above_attractors"] == [1.0, None]
    with pytest.raises(InputError, match=r"e2.jsonl line 1: evidence index 7 is outside the 3 words of text"):
        examples_for(adapter, write_jsonl(tmp_path / "e2.jsonl", [{"text": "a b c", "target": "next",
                                                                    "evidence": [7]}]))


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_plausibility_of_the_rationale_is_one_and_of_its_reverse_the_minimum(tiny_models, tmp_path, model):
    adapter = tiny_models[(model, "float32")]
    rows = RATIONALE_ROWS if adapter.causal else [  # an encoder explains a masked word
        {**r, "text": r["text"] + " [MASK]", "target": "mask",
         **({"rationale_mask": r["rationale_mask"] + [0]} if "rationale_mask" in r else {})} for r in RATIONALE_ROWS]
    examples, notes = examples_for(adapter, write_jsonl(tmp_path / "r.jsonl", rows))
    evaluation, context = EVALS.get("plausibility"), EvalContext("r.jsonl", shared=RunContext())
    best = {r["metric"]: r for r in evaluation(adapter, [oracle(adapter, examples, 1.0)], examples, context)}
    worst = {r["metric"]: r for r in evaluation(adapter, [oracle(adapter, examples, -1.0)], examples, context)}
    for metric in ("auprc", "token_f1", "token_iou"):
        assert best[metric]["values"][:3] == [1.0, 1.0, 1.0] and best[metric]["values"][3] is None
        assert best[metric]["n_undefined"] == 1
    assert worst["token_f1"]["values"][:3] == [0.0, 0.0, 0.0] and worst["token_iou"]["values"][:3] == [0.0] * 3
    for example, value in zip(examples, worst["auprc"]["values"]):  # positives ranked last: the least AP there is
        if "rationale" not in example.meta:
            continue
        ids = adapter.tokenizer(example.text)["input_ids"]
        n = len(ids) - int(sum(t in adapter.tokenizer.all_special_ids for t in ids))
        k = int(word_tokens(adapter, example.text, example.meta["rationale"]).sum())
        assert value == pytest.approx(np.mean([j / (n - k + j) for j in range(1, k + 1)]))


def test_plausibility_by_hand_and_refused_without_rationales(task_models):
    from attrbench.evals.plausibility import agreement

    auprc, f1, iou = agreement(np.array([0.9, 0.1, 0.8, 0.2]), np.array([True, False, False, True]))
    assert auprc == pytest.approx((1 / 1 + 2 / 3) / 2) and f1 == 0.5 and iou == pytest.approx(1 / 3)
    assert agreement(np.array([1.0, 1.0, 0.0]), np.array([False, True, False]))[1] == 0.0  # ties: earlier first
    with pytest.raises(InputError, match="'plausibility' needs human rationales, and none of these 2 examples has one"):
        evaluate(task_models["sst2"], ["grad_l2"], ["plausibility"], "sst2", n=2, progress=False)


# -- leaderboard configs --------------------------------------------------------------------------
def test_a_config_reads_a_file_next_to_it_and_notices_when_it_changes(tmp_path):
    data = tmp_path / "cfg" / "data"
    data.mkdir(parents=True)
    rows = [{"id": k, "text": t, "target": "next", "rationale": [0]} for k, t in
            enumerate(["a wonderful film", "the keys to the cabinet", "dogs run", "the movie was very boring"])]
    write_jsonl(data / "mine.jsonl", rows)
    config_path = tmp_path / "cfg" / "run.toml"
    config_path.write_text('name = "mine"\n[[suite]]\nmodel = "tiny-gpt2"\ndataset = "data/mine.jsonl"\nn = 3\n'
                           'methods = ["alti", "grad_l2"]\nevals = ["plausibility", "erasure_aopc"]\n')
    config = read_config(config_path)
    assert config["suite"][0]["dataset"] == str((data / "mine.jsonl").resolve())
    summary = run_leaderboard(config, tmp_path / "runs" / "mine", progress=False)
    per_example = (1 + 2) + (1 + 3)  # plausibility: shared + 2 methods; erasure: shared + 2 methods + random
    assert summary["rows"] == 3 * per_example
    report = (tmp_path / "runs" / "mine" / "leaderboard.md")
    from attrbench.report import write_report

    stale = tmp_path / "runs" / "mine" / "figures" / "renamed-long-ago.png"
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(b"")
    paths = write_report(tmp_path / "runs" / "mine")
    text = report.read_text()
    assert "## tiny-gpt2 · mine.jsonl · plausibility" in text  # a config's absolute path, shown by its name
    assert "Published numbers" not in text  # no published value for a file of your own
    assert not stale.exists() and len(list(stale.parent.glob("*.png"))) == paths["figures"]
    sampled = [e[0] for e in collect(tmp_path / "runs" / "mine")[1]["plan"][0]["examples"]]
    edited = int(sampled[0].split(":")[1])  # an edited row is another example: its rows are computed anew
    write_jsonl(data / "mine.jsonl", [{**r, "text": "a bad film"} if r["id"] == edited else r for r in rows])
    again = run_leaderboard(read_config(config_path), tmp_path / "runs" / "mine", progress=False)
    assert again["rows"] == per_example
    config_path.write_text(config_path.read_text().replace("data/mine.jsonl", "data/other.jsonl"))
    with pytest.raises(InputError, match=r"suite\[0\].dataset': file .*other.jsonl does not exist \(a relative path is "
                                         "read from the config file's folder\\)"):
        read_config(config_path)


def test_cli_params_reach_the_plugins(tiny_models, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"sentence_good": g, "sentence_bad": b} for g, b, *_ in PAIRS])
    out = tmp_path / "out"
    code, err = cli(["eval", "--model", "tiny-gpt2", "--dataset", path, "--eval", "faithfulness_corr", "--method",
                     "alti", "--out", str(out)])
    assert code == 2 and "set its reference_method, e.g. --param faithfulness_corr.reference_method=blank_out" in err
    code, err = cli(["eval", "--model", "tiny-gpt2", "--dataset", path, "--eval", "faithfulness_corr",
                     "--method", "alti",
                     "--param", "faithfulness_corr.reference_method=blank_out", "--param", "alti.value_bias=bias",
                     "--out", str(out), "--json"])
    assert code == 0, err
    record = json.loads(next(out.glob("*.json")).read_text())["records"][0]
    # a contrast target of a causal LM: blank_out's signed form is the reference, named with its sign
    assert record["reference"] == "blank_out(signed=True)" and record["method_params"] == {"value_bias": "bias"}
    assert record["eval_params"]["reference_sign"] == "signed"
    for bad, message in (("x", "is not PLUGIN.NAME=VALUE"),
                         ("nope.x=1", "'nope' is not a method, evaluation or dataset"),
                         ("naopc.max_beam_width=2",
                          "parameters given for evaluation 'naopc', which is not among those run"),
                         ("faithfulness_corr.reference_method=nope",
                          "faithfulness_corr reference_method: unknown method")):
        code, err = cli(["eval", "--model", "tiny-gpt2", "--dataset", path, "--eval", "faithfulness_corr", "--method",
                         "alti", "--param", bad, "--out", str(tmp_path / "o2")])
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_the_readme_example_files_read(task_models):
    """examples/: the reviews (labels by name, rationales) on an SST-2 classifier, the agreement prefixes with their
    subjects as known evidence, and the config that runs them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    reviews, notes = examples_for(task_models["sst2"], str(root / "reviews.jsonl"))
    assert len(reviews) == notes["with_rationale"] == 8 and {e.target for e in reviews} == {"class:0", "class:1"}
    assert reviews[1].meta["rationale"] == [4, 9] and reviews[1].text.split()[9] == "flat."
    config = read_config(root / "own-data.toml")
    assert [s["dataset"] for s in config["suite"]] == [str(root / name) for name in
                                                       ("reviews.jsonl", "pairs.jsonl", "agreement.jsonl")]
    rows = [json.loads(line) for line in (root / "agreement.jsonl").read_text().splitlines()]  # SmolLM2's, in CI
    subjects = [row["text"].split()[i] for row in rows for i in row["evidence"]]
    assert subjects == ["keys", "author", "pictures", "label", "friends", "manager", "roads", "smell"]
    assert all(row["target"].startswith("contrast:") and len(row["attractors"]) == 1 for row in rows)


def test_score_reads_attributions_for_a_file_of_your_own(tiny_models, tmp_path):
    """`attrbench score --dataset FILE`: another tool's scores, matched by the ids a file gives its rows."""
    from attrbench.runtime.pipeline import score_attributions

    adapter = tiny_models[("tiny-gpt2", "float32")]
    data = write_jsonl(tmp_path / "mine.jsonl", RATIONALE_ROWS[:3])
    lines = []
    for row in RATIONALE_ROWS[:3]:
        ids = adapter.tokenizer(row["text"])["input_ids"]
        lines.append(json.dumps({"id": f"mine:{row['id']}", "tokens": adapter.tokenizer.convert_ids_to_tokens(ids),
                                 "scores": [float(k) for k in range(len(ids))]}))
    (tmp_path / "theirs.jsonl").write_text("\n".join(lines))
    records = score_attributions(adapter, tmp_path / "theirs.jsonl", ["plausibility"], data, progress=False)
    assert {r["metric"] for r in records} == {"auprc", "token_f1", "token_iou"}
    assert all(r["n"] == 3 and r["example_ids"] == ["mine:a", "mine:b", "mine:c"] for r in records)


def test_oversized_files_and_lines_are_refused_before_they_are_read_whole(tiny_models, tmp_path, monkeypatch):
    """A file or a JSON line above the limits is a one-line error, never read into memory whole."""
    from attrbench.datasets import text
    from attrbench.runtime.pipeline import evaluate

    adapter = tiny_models[("tiny-gpt2", "float32")]
    path = tmp_path / "big.jsonl"
    path.write_text('{"text": "the keys", "target": "next"}\n{"text": "' + "a " * 600 + '", "target": "next"}\n')
    monkeypatch.setattr(text, "MAX_LINE_CHARS", 1000)
    with pytest.raises(InputError, match="line 2: 1,2.. characters, more than the 1,000"):
        evaluate(adapter, ["alti"], ["erasure_aopc"], str(path), n=1, progress=False)
    monkeypatch.setattr(text, "MAX_FILE_BYTES", 100)
    with pytest.raises(InputError, match="takes at most"):
        evaluate(adapter, ["alti"], ["erasure_aopc"], str(path), n=1, progress=False)
    parquet = tmp_path / "broken.parquet"
    parquet.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable parquet file"):
        evaluate(adapter, ["alti"], ["erasure_aopc"], str(parquet), n=1, progress=False)
