"""Property-based fuzzing of the public surfaces (hypothesis): CLI commands, run configs, data files, the Python API.

Invariant for every generated case: exit 0 with a well-formed result (every number finite, one score
per token), or exit 2 with exactly one line on stderr that starts with "error:"; never a traceback
(any other exception fails the test) and never a partial result file or store row.

Tiny models keep it fast: CI runs 100 derandomised (repeatable) cases per surface, about 30 s.
``ATTRBENCH_FUZZ_EXAMPLES=N`` runs N fresh random cases per surface instead, and
``ATTRBENCH_FUZZ_REPORT=FILE`` writes how many were tried per surface and which errors they gave.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import transformers as hf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attrbench.cli import main
from attrbench.models.tiny import VOCAB, build_tiny
from attrbench.ops.targets import KINDS, Target
from attrbench.registry import EVALS, METHODS

EXAMPLES = int(os.environ.get("ATTRBENCH_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize="ATTRBENCH_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=list(HealthCheck))
OUTCOMES: dict[str, Counter] = defaultdict(Counter)  # surface -> {"ok": k, "error": k}
MESSAGES: dict[str, Counter] = defaultdict(Counter)  # surface -> {error message start: k}

DATA = Path(__file__).resolve().parents[1] / "attrbench" / "datasets" / "data"
MODELS = ["tiny-bert", "tiny-roberta", "tiny-distilbert", "tiny-gpt2", "tiny-opt", "tiny-llama"]
SCORE_METHODS = sorted(m.name for m in METHODS.all() if m.output == "scores")
MAP_METHODS = sorted(m.name for m in METHODS.all() if m.output == "maps")
SPECIAL_STRINGS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<|endoftext|>", "<s>", "</s>", "***mask***"]
ODD_STRINGS = ["", " ", "\t\n", "\x00", "\x1b[31m", "\u200b", "🙂😀🚀", "你好世界", "مرحبا", "Ωμέγα", "é" * 3,
               "\ud7ff", "-", "--json", "NaN", "1e309", "'\"", "\\"]


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    if os.environ.get("ATTRBENCH_FUZZ_REPORT"):
        Path(os.environ["ATTRBENCH_FUZZ_REPORT"]).write_text(json.dumps(
            {"outcomes": OUTCOMES, "errors": {k: dict(c.most_common(12)) for k, c in MESSAGES.items()}}, indent=1))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> str:
    """A local folder holding a randomly initialised 3-class BERT classifier (class:K targets); beside it,
    ``<folder>-binary`` a 2-class one (the SST-2 evaluations take any binary classifier)."""
    base, tok = build_tiny("tiny-bert")
    root = tmp_path_factory.mktemp("classifiers")
    for folder, labels in ((root / "c", 3), (root / "c-binary", 2)):
        hf.BertForSequenceClassification(hf.BertConfig(**{**base.config.to_dict(), "num_labels": labels})
                                         ).save_pretrained(folder)
        tok.save_pretrained(folder)
    return str(root / "c")


# -- strategies ------------------------------------------------------------------------------
words = st.sampled_from(VOCAB[5:] + SPECIAL_STRINGS + ODD_STRINGS + ["unknownword", "keys,", "cabinet."])
texts = st.one_of(
    st.lists(words, min_size=0, max_size=12).map(" ".join),
    st.text(max_size=24),
    st.sampled_from(ODD_STRINGS + SPECIAL_STRINGS),
    st.integers(60, 80).map(lambda n: " ".join(["film"] * n)),  # longer than the tiny models' 64 positions
)
arg = st.one_of(st.integers(-70, 70).map(str), words, st.text(max_size=6))
targets = st.one_of(
    st.sampled_from(["auto", "cls", "mask", "next", "class:0", "class:1", "class:2", "class:3", "position:0",
                     "position:-1", "token:the", "token:keys", "contrast:is/are", "contrast:are/is"]),
    st.builds(lambda k, a: f"{k}:{a}", st.sampled_from(KINDS), arg),
    st.builds(lambda a, b: f"contrast:{a}/{b}", arg, arg),
    st.text(max_size=12),
)
dtypes = st.sampled_from(["float32"] * 8 + ["float64"] * 3 + ["float16", ""])  # mostly valid: reach the code
layer_lists = st.one_of(st.none(), st.lists(st.integers(-3, 3), max_size=3).map(lambda v: ",".join(map(str, v))),
                        st.sampled_from(["0-1", "1-0", "0-9", "a", "0,,1", "-1", " "]), st.text(max_size=5))


def plugin_list(names: list[str], min_size: int = 1):
    """Comma-separated plugin names, mostly known ones."""
    return st.lists(st.sampled_from(names * 8 + ["nope", "", "ALL", "all"]), min_size=min_size,
                    max_size=3).map(",".join)


# -- invariant -------------------------------------------------------------------------------
def run_cli(surface: str, argv: list[str]) -> tuple[int, str]:
    """Run the CLI in-process; return (exit code, stdout). Fails on a traceback or a malformed error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse
            code = exit_.code
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code in (0, 2), f"{argv}: exit {code}\n{err.getvalue()}"
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{argv}: not a one-line error:\n{err.getvalue()}"
    OUTCOMES[surface]["ok" if code == 0 else "error"] += 1
    if code == 2:
        MESSAGES[surface][re.sub(r"/tmp/\S+", "FILE", lines[0])[:70]] += 1
    return code, out.getvalue()


def assert_finite(value, where: str) -> None:
    """Every number in a JSON value is finite (None marks an undefined value and is allowed)."""
    if isinstance(value, float):
        assert math.isfinite(value), f"{where}: non-finite number {value}"
    elif isinstance(value, dict):
        for k, v in value.items():
            assert_finite(v, f"{where}.{k}")
    elif isinstance(value, list):
        for k, v in enumerate(value):
            assert_finite(v, f"{where}[{k}]")


def loads_strict(text: str):
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite {c} in the JSON output"))


def files_under(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


# -- CLI: attribute, decompose ---------------------------------------------------------------
@FUZZ
@given(model=st.sampled_from(MODELS + ["classifier"]), methods=plugin_list(SCORE_METHODS + MAP_METHODS[:1]),
       text=texts, target=targets, dtype=dtypes, truncate=st.booleans())
def test_fuzz_attribute(classifier, model, methods, text, target, dtype, truncate):
    argv = ["attribute", "--model", classifier if model == "classifier" else model, f"--method={methods}",
            f"--text={text}", f"--target={target}", f"--dtype={dtype}", "--json"] + (["--truncate"] if truncate else [])
    code, out = run_cli("attribute", argv)
    if code == 0:
        payload = loads_strict(out)
        for result in payload if isinstance(payload, list) else [payload]:
            assert len(result["scores"]) == len(result["tokens"]) > 0
            assert_finite(result, "attribute")
            assert result["target"] == str(Target.parse(target))
            assert isinstance(result["row"], int) and 0 <= result["row"] < len(result["tokens"])


@FUZZ
@given(model=st.sampled_from(MODELS), text=st.lists(texts, min_size=1, max_size=2),
       scopes=st.one_of(st.none(), plugin_list(MAP_METHODS)), layers=layer_lists, dtype=dtypes,
       value_bias=st.sampled_from(["token"] * 4 + ["bias", "both"]),
       ff=st.sampled_from(["ig"] * 4 + ["shapley-exact", "x"]),
       truncate=st.booleans())
def test_fuzz_decompose(model, text, scopes, layers, dtype, value_bias, ff, truncate):
    argv = ["decompose", "--model", model, f"--dtype={dtype}", f"--value-bias={value_bias}",
            f"--ff-attribution={ff}", "--json"] + [f"--text={t}" for t in text]
    argv += ([f"--scopes={scopes}"] if scopes is not None else []) + ([f"--layers={layers}"] if layers is not None
                                                                       else []) + (["--truncate"] if truncate else [])
    code, out = run_cli("decompose", argv)
    if code == 0:
        payload = loads_strict(out)
        for dec in payload if isinstance(payload, list) else [payload]:
            n = len(dec["tokens"])
            assert n > 0 and dec["maps"]
            for scope, maps in dec["maps"].items():
                assert all(len(grid) == n and all(len(row) == n for row in grid) for grid in maps), scope
            assert_finite(dec, "decompose")


# -- CLI: eval, score ------------------------------------------------------------------------
datasets = st.sampled_from(["sva-generated"] * 6 + ["sva-linzen"] * 2 + ["sst2"] * 2 + ["nope", ""])


@FUZZ
@given(model=st.sampled_from(["tiny-bert", "tiny-gpt2", "tiny-llama", "classifier"]), dataset=datasets,
       evals=plugin_list(sorted(EVALS.names())), methods=plugin_list(SCORE_METHODS, 0),
       n=st.sampled_from([1, 2, 3, 3, 0, -2]),
       seed=st.one_of(st.integers(-3, 3), st.just(2 ** 40)), split=st.sampled_from([None, "dev", "test", "val", "x"]))
def test_fuzz_eval(tmp_path_factory, classifier, model, dataset, evals, methods, n, seed, split):
    if model == "classifier" and dataset == "sst2":  # a 3-class classifier is no SST-2 model: a binary one is
        model = "binary"
    out_dir = tmp_path_factory.mktemp("eval")
    folder = {"classifier": classifier, "binary": classifier + "-binary"}.get(model, model)
    argv = ["eval", "--model", folder, f"--dataset={dataset}",
            f"--eval={evals}", f"--method={methods}", f"--n={n}", f"--seed={seed}", "--out", str(out_dir), "--json"]
    code, out = run_cli("eval", argv + ([f"--split={split}"] if split else []))
    written = files_under(out_dir)
    if code == 0:
        records = loads_strict(out)
        assert records and len(written) == 2  # the results JSON and its CSV
        assert_finite(records, "eval")
        for record in records:
            assert len(record["values"]) == record["n"] + record["n_undefined"] or record["eval"] in ("timing",)
    else:
        assert not written, f"an error left files behind: {written}"


def _attribution_lines(seed: int) -> list[str]:
    """Well-formed external attributions for tiny-bert on sva-generated (computed by attrbench itself)."""
    from attrbench import load_model
    from attrbench.datasets.lookup import examples_for, sample

    adapter = load_model("tiny-bert")
    examples = sample(examples_for(adapter, "sva-generated")[0], 3, seed)
    lines = []
    for e in examples:
        ids = adapter.tokenizer(e.text)["input_ids"]
        scores = [float(k % 3) for k in range(len(ids))]
        lines.append(json.dumps({"id": e.id, "tokens": adapter.tokenizer.convert_ids_to_tokens(ids), "scores": scores}))
    return lines


GOOD_LINES = None


def _mutate(line: str, how: str, data) -> bytes:
    obj = json.loads(line)
    if how == "truncate":
        return line.encode()[:data.draw(st.integers(0, len(line)))]
    if how == "drop":
        obj.pop(data.draw(st.sampled_from(sorted(obj))))
    elif how == "retype":
        key = data.draw(st.sampled_from(sorted(obj)))
        obj[key] = data.draw(st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=4),
                                       st.lists(st.integers(), max_size=3), st.booleans()))
    elif how == "scores":
        obj["scores"] = data.draw(st.lists(st.one_of(st.floats(), st.integers(), st.text(max_size=2)),
                                           max_size=len(obj["scores"]) + 1))
    elif how == "bad_utf8":
        raw = line.encode()
        cut = data.draw(st.integers(0, len(raw)))
        return raw[:cut] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + raw[cut:]
    elif how == "text":
        obj.pop("id")
        obj["text"] = data.draw(texts)
    return json.dumps(obj).encode()


@FUZZ
@given(data=st.data(), how=st.lists(st.sampled_from(["keep"] * 12 + ["truncate", "drop", "retype", "scores",
                                                                   "bad_utf8", "text", "blank"]),
                                    min_size=0, max_size=3),
       evals=st.sampled_from(["faithfulness_corr"] * 3 + ["erasure_aopc", "faithfulness_corr,erasure_aopc",
                                                          "timing", ""]))
def test_fuzz_score(tmp_path_factory, data, how, evals):
    global GOOD_LINES
    GOOD_LINES = GOOD_LINES or _attribution_lines(0)
    lines = [b"" if h == "blank" else _mutate(GOOD_LINES[k % len(GOOD_LINES)], h, data) if h != "keep"
             else GOOD_LINES[k % len(GOOD_LINES)].encode() for k, h in enumerate(how)]
    folder = tmp_path_factory.mktemp("score")
    path = folder / "attributions.jsonl"
    path.write_bytes(b"\n".join(lines))
    out_dir = folder / "out"
    code, out = run_cli("score", ["score", "--attributions", str(path), "--model", "tiny-bert", f"--eval={evals}",
                                  "--dataset=sva-generated", "--out", str(out_dir), "--json"])
    if code == 0:
        records = loads_strict(out)
        assert records and len(files_under(out_dir)) == 2
        assert_finite(records, "score")
    else:
        assert not files_under(out_dir)


# -- run configs (TOML and YAML) ------------------------------------------------------------
CHEAP_EVALS = ["faithfulness_corr", "erasure_aopc", "mixing_ratio", "timing"]
value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                  st.text(max_size=6), st.lists(st.integers(0, 2), max_size=2),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=1))
valid_suite = st.fixed_dictionaries(
    {"model": st.sampled_from(["tiny-bert", "tiny-gpt2"]), "dataset": st.just("sva-generated"),
     "evals": st.lists(st.sampled_from(CHEAP_EVALS), min_size=1, max_size=2, unique=True),
     "n": st.integers(1, 2), "methods": st.lists(st.sampled_from(["attn_rollout", "grad_l2", "alti"]), min_size=1,
                                                  max_size=2, unique=True)},
    optional={"method_params": st.sampled_from([{"grad_l2": {}}, {"alti": {"value_bias": "bias"}}]),
              "eval_params": st.sampled_from([{"faithfulness_corr": {"rank": "dense"}}])})
fuzzed_suite = st.fixed_dictionaries(
    {"model": st.sampled_from(["tiny-bert", "tiny-gpt2", "nope"]),
     "dataset": st.sampled_from(["sva-generated", "sst2", "x"]),
     "evals": st.lists(st.sampled_from(CHEAP_EVALS + ["nope"]), min_size=0, max_size=2, unique=True)},
    optional={"n": st.one_of(st.integers(-1, 2), value), "methods": st.one_of(
                  st.just("all"), st.just("some"), value,
                  st.lists(st.sampled_from(["attn_rollout", "grad_l2", "nope"]), max_size=2, unique=True)),
              "split": st.sampled_from(["dev", "x"]), "method_params": st.sampled_from([
                  {}, {"integrated_gradients": {"n_steps": 4}}, {"integrated_gradients": {"n_steps": 0}},
                  {"grad_l2": {"x": 1}}, {"alti": "no"}, {"attn_rollout": {"value_bias": "x"}}]),
              "eval_params": st.one_of(value, st.sampled_from([{}, {"faithfulness_corr": {"rank": "dense"}},
                                                               {"faithfulness_corr": {"rank": 3}}])),
              "more": value})
valid_top = st.fixed_dictionaries({}, optional={"name": st.just("fuzz"), "seed": st.integers(0, 2),
                                                "dtype": st.sampled_from(["float32", "float64"]),
                                                "shard_size": st.integers(1, 3), "device": st.just("cpu"),
                                                "budget": st.sampled_from(["10m", "1h", 600]),
                                                "batch_tokens": st.integers(64, 4096)})
fuzzed_top = st.fixed_dictionaries({}, optional={"name": st.one_of(st.text("abcxyz-_ /.", max_size=8), value),
                                                 "seed": st.one_of(st.integers(-2, 2), value),
                                                 "dtype": st.sampled_from(["float32", "half", 3]),
                                                 "shard_size": st.one_of(st.integers(-1, 3), value), "bogus": value,
                                                 "device": st.one_of(st.sampled_from(["cpu", "auto", "cuda", "cuda:7",
                                                                                      "mps", "tpu"]), value),
                                                 "budget": st.one_of(st.text("0123456789smh.- ", max_size=5), value),
                                                 "batch_tokens": st.one_of(st.integers(-2, 2), value)})


@FUZZ
@given(top=st.one_of(valid_top, valid_top, fuzzed_top),
       suites=st.lists(st.one_of(valid_suite, valid_suite, fuzzed_suite), min_size=0, max_size=2),
       fmt=st.sampled_from(["toml", "toml", "yaml", "garbage"]))
def test_fuzz_run_config(tmp_path_factory, top, suites, fmt):
    """Leaderboard configs: random keys, types and values; a valid one runs on tiny models (n <= 2)."""
    import yaml

    folder = tmp_path_factory.mktemp("run")
    config = {**{k: v for k, v in top.items() if v is not None},
              "suite": [{k: v for k, v in s.items() if v is not None} for s in suites]}
    path = folder / f"config.{'yml' if fmt == 'yaml' else 'toml'}"
    if fmt == "yaml":
        path.write_text(yaml.safe_dump(config))
    elif fmt == "toml":
        path.write_text(_toml(config))
    else:
        path.write_bytes(_toml(config).encode()[: len(_toml(config)) // 2] + b"\xff[[")
    code, out = run_cli("run config", ["run", str(path), "--out", str(folder / "runs"), "--json"])
    for store in (folder / "runs").rglob("store.sqlite"):  # whatever was stored is whole and finite
        with sqlite3.connect(store) as db:
            for (payload,) in db.execute("SELECT payload FROM results"):
                assert_finite(loads_strict(payload), "store")
    for cache in (folder / "runs").rglob("work.sqlite"):  # and so is the shared-work cache beside it
        with sqlite3.connect(cache) as db:
            for (payload,) in db.execute("SELECT payload FROM attributions"):
                assert_finite(loads_strict(payload), "work cache")
            for (value,) in db.execute("SELECT value FROM forward"):
                assert_finite(value, "work cache")
    if code == 0:
        summary = loads_strict(out)
        assert Path(summary["leaderboard"]).is_file() and Path(summary["html"]).is_file()


def _toml(config: dict) -> str:
    """A small TOML writer for the generated configs (values: scalars, lists, one-level tables)."""
    def literal(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(literal(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {literal(x)}" for k, x in v.items()) + "}"
        raise TypeError(v)

    lines = [f"{k} = {literal(v)}" for k, v in config.items() if k != "suite" and v is not None]
    for entry in config["suite"]:
        lines.append("[[suite]]")
        lines += [f"{k} = {literal(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


# -- data files (the shipped TSV layouts through --data-dir) ---------------------------------
@FUZZ
@given(data=st.data(), how=st.lists(st.sampled_from(["keep"] * 6 + ["truncate", "drop_column", "retype", "bad_utf8",
                                                     "empty", "extra_tab", "crlf"]), min_size=1, max_size=3),
       model=st.sampled_from(["tiny-bert", "tiny-gpt2"]))
def test_fuzz_data_files(tmp_path_factory, data, how, model):
    folder = tmp_path_factory.mktemp("data")
    source = (DATA / "sva" / "generated_en.tsv").read_bytes().splitlines()
    rows = [source[0]] + source[1:40]
    for h in how:
        k = data.draw(st.integers(0, len(rows) - 1))
        if h == "truncate":
            rows[k] = rows[k][:data.draw(st.integers(0, len(rows[k])))]
        elif h == "drop_column":
            cells = rows[k].split(b"\t")
            del cells[data.draw(st.integers(0, len(cells) - 1))]
            rows[k] = b"\t".join(cells)
        elif h == "retype":
            cells = rows[k].split(b"\t")
            cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(
                st.sampled_from([b"", b"x", b"-1", b"99", b"1.5"]))
            rows[k] = b"\t".join(cells)
        elif h == "bad_utf8":
            rows[k] = rows[k][:5] + b"\xff\xfe" + rows[k][5:]
        elif h == "empty":
            rows = rows[:1] if data.draw(st.booleans()) else []
        elif h == "extra_tab":
            rows[k] = rows[k] + b"\tmore"
        elif h == "crlf":
            rows[k] = rows[k] + b"\r"
        if not rows:
            break
    (folder / "sva").mkdir()
    (folder / "sva" / "generated_en.tsv").write_bytes(b"\n".join(rows))
    out_dir = folder / "out"
    code, out = run_cli("data file", ["eval", "--model", model, "--dataset=sva-generated", "--eval=faithfulness_corr",
                                      "--method=attn_rollout", "--n=2", f"--data-dir={folder}", "--out", str(out_dir),
                                      "--json"])
    if code == 0:
        assert_finite(loads_strict(out), "eval on a data file")
    else:
        assert not files_under(out_dir)


# -- your own data files (JSONL, CSV, TSV through --dataset PATH) ------------------------------
field_value = st.one_of(texts, targets, st.integers(-3, 70), st.booleans(), st.none(), st.floats(allow_nan=True),
                        st.lists(st.integers(-2, 12), max_size=5), st.lists(st.sampled_from([0, 1, 2]), max_size=8),
                        st.sampled_from(["negative", "positive", "LABEL_0", "0 1", "[1, 2]", "1,x"]))
vocab_words = st.lists(st.sampled_from(VOCAB[5:]), min_size=2, max_size=9)


def _likely_row(target: str, ws: list[str], marks: list[int]) -> dict:
    """A well-formed row whose target fits some of the models: these reach the scoring code."""
    return {"text": " ".join(ws + (["[MASK]"] if target in ("mask", "contrast:is/are") else [])), "target": target,
            **({"rationale": sorted({m % len(ws) for m in marks})} if marks else {})}


likely_file = st.builds(lambda target, rows: [_likely_row(target, *r) for r in rows],
                        st.sampled_from(["next", "auto", "class:1", "mask", "token:the", "contrast:is/are"]),
                        st.lists(st.tuples(vocab_words, st.lists(st.integers(0, 8), max_size=3)), min_size=1,
                                 max_size=4))
own_row = st.one_of(
    st.fixed_dictionaries({"text": texts}, optional={
        "label": st.one_of(st.integers(-1, 3), st.sampled_from(["negative", "positive", "LABEL_1", "2", "x"])),
        "target": targets, "id": st.one_of(st.integers(0, 3), st.text(max_size=3)),
        "rationale": st.one_of(st.lists(st.integers(-1, 8), max_size=4), st.sampled_from(["0 2", "[1]", "a"])),
        "rationale_mask": st.lists(st.integers(0, 2), max_size=8), "extra": field_value}),
    st.fixed_dictionaries({"sentence_good": texts, "sentence_bad": texts}, optional={"id": st.integers(0, 3)}),
    st.builds(lambda ws, k, w: {"sentence_good": " ".join(ws), "sentence_bad": " ".join(ws[:k] + [w] + ws[k + 1:])},
              st.lists(words, min_size=1, max_size=8), st.integers(0, 7), words),
    st.dictionaries(st.sampled_from(["text", "label", "target", "sentence_good", "sentence_bad", "rationale", "id"]),
                    field_value, max_size=4),
)


def _own_file(rows: list[dict], fmt: str) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows).encode()
    if fmt == "parquet":
        import pandas as pd

        def clean(v):  # parquet holds UTF-8 only: lone surrogates as a spreadsheet export would write them
            return v.encode("utf-8", "replace").decode() if isinstance(v, str) else v

        frame = pd.DataFrame([{k: clean(v) for k, v in r.items()} for r in rows])
        buffer = io.BytesIO()
        try:
            frame.to_parquet(buffer)
        except Exception:  # a column of mixed types has no parquet type: written as text, as pandas users do
            buffer = io.BytesIO()
            frame.astype(str).to_parquet(buffer)
        return buffer.getvalue()
    import csv

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for r in rows for k in r)) or ["text"],
                            delimiter="," if fmt == "csv" else "\t")
    writer.writeheader()
    writer.writerows([{k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows])
    return buffer.getvalue().encode("utf-8", "surrogatepass")


@FUZZ
@given(rows=st.one_of(likely_file, st.lists(own_row, min_size=0, max_size=4)),
       fmt=st.sampled_from(["jsonl", "csv", "tsv", "parquet"]),
       damage=st.sampled_from([None] * 6 + ["truncate", "bad_utf8", "blank_lines", "bom"]),
       model=st.sampled_from(["tiny-bert", "tiny-gpt2", "binary"]),
       evals=st.sampled_from(["erasure_aopc", "plausibility", "faithfulness_corr", "plausibility,erasure_aopc"]))
def test_fuzz_own_data_files(tmp_path_factory, classifier, rows, fmt, damage, model, evals):
    folder = tmp_path_factory.mktemp("own")
    raw = _own_file(rows, fmt)
    if damage == "truncate":
        raw = raw[: len(raw) * 2 // 3]
    elif damage == "bad_utf8":
        raw = raw[: len(raw) // 2] + b"\xff" + raw[len(raw) // 2:]
    elif damage == "blank_lines":
        raw = raw.replace(b"\n", b"\n\n")
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    path = folder / f"mine.{fmt}"
    path.write_bytes(raw)
    out_dir = folder / "out"
    argv = ["eval", "--model", classifier + "-binary" if model == "binary" else model, f"--dataset={path}",
            f"--eval={evals}", "--method=grad_l2,attn_rollout", "--n=3", "--out", str(out_dir), "--json"]
    if "faithfulness" in evals:  # on your own data the reference is named, never guessed
        argv += ["--param", "faithfulness_corr.reference_method=blank_out"]
    code, out = run_cli("own data file", argv)
    if code == 0:
        records = loads_strict(out)
        assert records and len(files_under(out_dir)) == 2
        assert_finite(records, "eval on your own file")
        assert all(r["data_file"] == str(path.resolve()) and len(r["file_sha256"]) == 64 for r in records)
    else:
        assert not files_under(out_dir)


# -- the Python API ------------------------------------------------------------------------------------
def call_api(surface: str, function, *args, **kwargs):
    """Call the Python API; return its result, or None after attrbench's one-line error (the CLI's, which it shows
    as "error: ..."). Anything else fails."""
    from attrbench.errors import AttrbenchError

    try:
        out = function(*args, **kwargs)
    except AttrbenchError as err:
        assert "\n" not in str(err) and str(err), f"{surface}: not a one-line error: {err!r}"
        OUTCOMES[surface]["error"] += 1
        MESSAGES[surface][re.sub(r"/tmp/\S+", "FILE", str(err))[:70]] += 1
        return None
    OUTCOMES[surface]["ok"] += 1
    return out


API_VALID = {  # per argument, values that reach the computation, and values that must be refused in one line
    "model": (st.sampled_from(["tiny-bert", "tiny-gpt2", "tiny-llama", "classifier"]),
              st.sampled_from(["nope", "", None, 3])),
    "methods": (st.one_of(plugin_list(SCORE_METHODS), st.lists(st.sampled_from(SCORE_METHODS), min_size=1, max_size=3)),
                st.one_of(plugin_list(MAP_METHODS[:1] + ["nope"]), st.none(), st.integers(-1, 2), st.just([3]))),
    "text": (st.one_of(vocab_words.map(" ".join), st.lists(vocab_words.map(" ".join), min_size=1, max_size=3)),
             st.one_of(texts, st.none(), st.integers(0, 3), st.just([]), st.just([1]))),
    "target": (st.sampled_from(["auto", "auto", "auto", "next", "class:1"]),
               st.one_of(targets, st.lists(targets, min_size=2, max_size=3), st.none(), st.integers(0, 3))),
    "dtype": (st.sampled_from(["float32", "float64"]), st.sampled_from(["float16", "", None, 32])),
    "device": (st.sampled_from(["cpu", "auto"]), st.sampled_from(["cuda:3", "tpu", "", None])),
    "params": (st.sampled_from([None, {}]), st.sampled_from([{"alti": {"x": 1}}, {"nope": {}}, {"grad_l2": 3},
                                                             "steps=4", [1]])),
    "evaluations": (st.lists(st.sampled_from(["erasure_aopc", "timing", "faithfulness_corr", "soft_erasure", "naopc",
                                              "plausibility"]), min_size=1, max_size=2).map(",".join),
                    st.one_of(plugin_list(["nope", "mixing_ratio"]), st.none(), st.integers(0, 2), st.just([1]))),
    "dataset": (st.sampled_from(["sva-generated", "sva-linzen", "sst2", "frame", "frame-mapped"]),
                st.sampled_from(["nope", "", None, 2, "frame-unmapped"])),
    "n": (st.integers(1, 3), st.sampled_from([0, -1, "2", 2.5, True])),
    "seed": (st.integers(0, 2), st.sampled_from([-1, "x", None])),
}


def api_arguments(data, names: list[str]) -> dict:
    """Valid values for ``names``, with at most one of them (half the time) drawn from its refused values."""
    broken = data.draw(st.sampled_from([None] * len(names) + names), label="broken")
    return {name: data.draw(API_VALID[name][name == broken], label=name) for name in names}


@FUZZ
@given(data=st.data())
def test_fuzz_api_attribute(classifier, data):
    import attrbench

    a = api_arguments(data, ["model", "text", "methods", "target", "dtype", "device", "params"])
    model = classifier if a["model"] == "classifier" else a["model"]
    out = call_api("api attribute", attrbench.attribute, model, a["text"], a["methods"], target=a["target"],
                   dtype=a["dtype"], device=a["device"], params=a["params"])
    if out is not None:
        frame = out.to_pandas()
        assert len(frame) and frame.score.map(math.isfinite).all()
        for k in range(len(out.texts)):
            assert all(len(values) == len(out.tokens(k)) for values in out.scores(k).values())


@FUZZ
@given(data=st.data())
def test_fuzz_api_evaluate(classifier, data):
    import pandas as pd

    import attrbench

    a = api_arguments(data, ["model", "methods", "evaluations", "dataset", "n", "seed"])
    model = classifier + "-binary" if a["model"] == "classifier" else a["model"]
    dataset, columns = a["dataset"], None
    if isinstance(dataset, str) and dataset.startswith("frame"):
        column = "text" if dataset == "frame" else "sentence"
        dataset, columns = pd.DataFrame({column: ["a good film", "the keys are", "dull"], "label": [1, 0, 1]}), \
            {"sentence": "text"} if a["dataset"] == "frame-mapped" else None
    out = call_api("api evaluate", attrbench.evaluate, model, a["methods"], a["evaluations"], dataset, n=a["n"],
                   seed=a["seed"], columns=columns, progress=False)
    if out is not None:
        assert_finite(out.records, "api evaluate")
        assert out.results.value.dropna().map(math.isfinite).all()


def test_fuzz_invariant_catches_a_traceback(monkeypatch):
    """The harness itself can fail: a bad input that raises a plain exception is reported, not passed."""
    import attrbench.ops.targets

    def broken(text):
        raise ValueError("deliberate")

    monkeypatch.setattr(attrbench.ops.targets.Target, "parse", classmethod(lambda cls, text: broken(text)))
    with pytest.raises(ValueError, match="deliberate"):
        run_cli("self-check", ["attribute", "--model", "tiny-bert", "--method", "grad_l2", "--text", "a film",
                               "--target", "class:9"])
