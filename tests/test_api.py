"""The Python API: the same results as the CLI, pandas out, saliency in HTML, DataFrames and parquet in, a
notebook's own method in every entry point, and the CLI's one-line errors for bad input."""
import functools
import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import attrbench
from attrbench.cli import EXPORT, main
from attrbench.errors import InputError
from attrbench.plugin import Method, MethodResult
from attrbench.registry import EVALS, METHODS
from attrbench.runtime.store import COMPACT, Store, export_compact


def test_attribute_equals_the_cli_and_shows_itself(capsys):
    a = attrbench.attribute("tiny-bert", ["the keys to the cabinet", "dogs run"], "alti,grad_l2", target="auto")
    assert a.methods == ["alti", "grad_l2"] and len(a.texts) == 2
    assert main(["attribute", "--model", "tiny-bert", "--method", "alti,grad_l2", "--text", "dogs run", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    for entry in cli:
        assert np.array_equal(a.scores(1)[entry["method"]], np.array(entry["scores"]))
    frame = a.to_pandas()
    assert len(frame) == 2 * (len(a.tokens(0)) + len(a.tokens(1)))
    assert set(frame.columns) >= {"text_index", "method", "position", "token", "score", "target", "explains"}
    assert frame.groupby(["text_index", "method"]).score.count().min() >= 4
    page = a._repr_html_()
    assert page.count("class='saliency'") == len(frame) and "grad_l2" in page
    figure = a.plot(0)
    assert len(figure.axes) == 2


def test_evaluate_takes_a_dataframe_with_a_column_mapping_and_equals_the_file(tmp_path):
    rows = [{"sentence": "the keys to the cabinet", "goal": "auto"}, {"sentence": "dogs run fast", "goal": "next"},
            {"sentence": "the author of the books", "goal": "auto"}]
    frame = pd.DataFrame(rows)
    from_frame = attrbench.evaluate("tiny-gpt2", ["alti", "grad_l2"], "erasure_aopc", frame,
                                    columns={"sentence": "text", "goal": "target"}, n=3, progress=False)
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"text": r["sentence"], "target": r["goal"]}) + "\n" for r in rows))
    from_file = attrbench.evaluate("tiny-gpt2", ["alti", "grad_l2"], "erasure_aopc", str(path), n=3, progress=False)
    a = from_frame.summary.set_index(["method", "metric"])["mean"]
    b = from_file.summary.set_index(["method", "metric"])["mean"]
    assert a.to_dict() == pytest.approx(b.to_dict(), abs=1e-12)
    assert len(from_frame.results) == 2 * 2 * 3  # methods x metrics x examples
    parquet = tmp_path / "mine.parquet"  # and the same rows as a parquet file on the CLI
    frame.rename(columns={"sentence": "text", "goal": "target"}).to_parquet(parquet)
    via_parquet = attrbench.evaluate("tiny-gpt2", ["alti", "grad_l2"], "erasure_aopc", str(parquet), n=3,
                                     progress=False)
    assert via_parquet.summary.set_index(["method", "metric"])["mean"].to_dict() == pytest.approx(b.to_dict(),
                                                                                                 abs=1e-12)


def test_bad_input_raises_the_clis_one_line_errors(tmp_path):
    cases = [
        (lambda: attrbench.attribute("tiny-bert", "dogs run", "nope"), "unknown method"),
        (lambda: attrbench.attribute("tiny-bert", "dogs run", "alti", target="class:7"), "language model"),
        (lambda: attrbench.attribute("tiny-bert", "   ", "alti"), "empty"),
        (lambda: attrbench.attribute("tiny-bert", [], "alti"), "no text"),
        (lambda: attrbench.attribute("tiny-bert", "dogs run", "atb"), "token-to-token maps"),
        (lambda: attrbench.attribute("tiny-bert", ["a", "b"], "alti", target=["auto"]), "1 targets for 2 texts"),
        (lambda: attrbench.evaluate("tiny-bert", "alti", "erasure_aopc", pd.DataFrame({"s": ["a b"]}),
                                    columns={"sentence": "text"}), "not a column"),
        (lambda: attrbench.evaluate("tiny-bert", "alti", "erasure_aopc", 42), "pandas DataFrame"),
        (lambda: attrbench.evaluate("tiny-bert", "alti", "nope", "sva-generated"), "unknown evaluation"),
        (lambda: attrbench.load_run(tmp_path), "not a run folder"),
    ]
    for call, words in cases:
        with pytest.raises(InputError) as err:
            call()
        message = str(err.value)
        assert words in message and "\n" not in message, message


def test_the_collections_a_notebook_holds_are_taken_as_lists():
    """A pandas Series or numpy array of texts, methods or evaluations, a tuple, and numpy integers (what
    ``df.text``, ``np.arange`` and ``len(...)`` arithmetic on arrays give) are the same call as plain lists."""
    texts = ["the keys to the cabinet", "dogs run"]
    plain = attrbench.attribute("tiny-bert", texts, ["alti", "grad_l2"], target="auto")
    for given_texts, given_methods in [(pd.Series(texts), np.array(["alti", "grad_l2"])),
                                       (tuple(texts), pd.Series(["alti", "grad_l2"]))]:
        again = attrbench.attribute("tiny-bert", given_texts, given_methods, target="auto")
        assert again.methods == plain.methods and again.texts == texts
        for i in range(2):
            for name in plain.methods:
                assert np.array_equal(again.scores(i)[name], plain.scores(i)[name])
    lists = attrbench.evaluate("tiny-gpt2", ["alti", "random"], ["erasure_aopc"], "sva-generated", n=3, seed=1,
                               progress=False)
    arrays = attrbench.evaluate("tiny-gpt2", np.array(["alti", "random"]), pd.Series(["erasure_aopc"]),
                                "sva-generated", n=np.int64(3), seed=np.int32(1), progress=False)
    pd.testing.assert_frame_equal(arrays.results, lists.results)
    for unordered_or_not_names in [{"alti", "grad_l2"}, np.array("alti"), {"alti": {}}, 3, b"alti"]:
        with pytest.raises(InputError, match="methods must be names"):
            attrbench.attribute("tiny-bert", texts, unordered_or_not_names, target="auto")
    for bad, words in [(dict(n=3.0), "whole number"), (dict(n=np.bool_(True)), "whole number"),
                       (dict(seed=-1), "whole number")]:
        with pytest.raises(InputError, match=words):
            attrbench.evaluate("tiny-gpt2", ["alti"], "erasure_aopc", "sva-generated", **{"n": 3, **bad})


def test_per_layer_values_are_not_read_as_per_example_even_when_as_many():
    """ln_outliers' correlation has one value per layer; with n = the number of layers its lengths match the
    examples', and only the record's ``values_per`` keeps it out of the per-example results."""
    model = attrbench.load_model("tiny-gpt2")
    scores = attrbench.evaluate(model, None, "ln_outliers", "sva-generated", n=model.n_layers, progress=False)
    layered = [r for r in scores.records if r["metric"] == "gamma_vs_ff_pearson"]
    assert layered and len(layered[0]["values"]) == len(layered[0]["example_ids"]) == model.n_layers
    assert set(scores.results.metric) == {"ff_change", "ff_change_without_bottom_gamma"}


def test_a_frame_that_cannot_be_a_dataset_is_one_line():
    cases = [(pd.DataFrame({"sentence": ["a b"], "text": ["c d"]}), {"sentence": "text"}, "two columns named 'text'"),
             (pd.DataFrame({"text": ["a b", 3]}), None, "one type")]
    for frame, columns, words in cases:
        with pytest.raises(InputError) as err:
            attrbench.as_dataset(frame, columns)
        assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


class Halves(Method):
    """A notebook's method: 1 on the first half of the tokens, 0 on the rest."""

    name, family, output = "halves", "notebook", "scores"
    description = "first half of the tokens"
    params = {}

    def run(self, adapter, texts, *, targets, layers, truncate):
        out = []
        for text in texts:
            ids = adapter.tokenizer(text)["input_ids"]
            values = (np.arange(len(ids)) < len(ids) / 2).astype(np.float64)
            out.append(MethodResult(self.name, adapter.name, adapter.tokenizer.convert_ids_to_tokens(ids), values,
                                    None))
        return out


def test_a_notebook_method_works_everywhere_and_reaches_the_leaderboard(tmp_path):
    attrbench.register(Halves)
    try:
        assert attrbench.attribute("tiny-gpt2", "the keys to the", "halves").scores()["halves"].tolist() == \
            [1.0, 1.0, 0.0, 0.0]
        unregistered = Halves()  # an instance works without registering, in attribute and evaluate
        unregistered.name = "halves_local"
        scores = attrbench.evaluate("tiny-gpt2", [unregistered, "alti"], "erasure_aopc", "sva-generated", n=3,
                                    progress=False)
        assert set(scores.summary.method) == {"halves_local", "alti"}
        config = {"name": "nb", "seed": 0, "shard_size": 2, "suite": [
            {"model": "tiny-gpt2", "dataset": "sva-generated", "n": 4, "methods": ["halves", "alti"],
             "evals": ["erasure_aopc", "timing"]}]}
        run = attrbench.run(config, tmp_path / "nb", progress=False)
        assert "halves" in set(run.results.method)
        board = next(frame for title, frame in run.leaderboard.items() if "erasure" in title.lower())
        assert "halves" in set(board.method)
        assert "halves" in (tmp_path / "nb" / "leaderboard.md").read_text()
    finally:
        METHODS.remove("halves")


def test_load_run_results_equal_the_leaderboards_means(tmp_path):
    config = {"name": "tiny", "seed": 1, "shard_size": 2, "suite": [
        {"model": "tiny-bert", "dataset": "sva-generated", "n": 5, "methods": ["alti", "grad_l2", "blank_out"],
         "evals": ["erasure_aopc", "faithfulness_corr"]}]}
    run = attrbench.run(config, tmp_path / "tiny", progress=False, report=False)
    loaded = attrbench.load_run(tmp_path / "tiny")
    means = loaded.results.groupby(["eval", "metric", "method"]).value.mean()
    for record in loaded.records:
        if record.get("mean") is not None:
            assert means[(record["eval"], record["metric"], record["method"])] == pytest.approx(record["mean"])
    for title, frame in loaded.leaderboard.items():  # every cell starts with the mean the results give
        for column in [c for c in frame.columns if c.endswith(("↑", "↓"))]:
            metric = column[:-2]
            eval_name = next(r["eval"] for r in loaded.records if r["metric"] == metric)
            for method, cell in zip(frame.method, frame[column]):
                assert cell.startswith(f"{means[(eval_name, metric, method)]:.3f}"), (title, method, cell)
    assert run.statistics and loaded.statistics.keys() == run.statistics.keys()
    paths = loaded.report()
    assert paths["leaderboard"].is_file()
    assert main(["report", str(tmp_path / "tiny"), "--export", "parquet", "--json"]) == 0
    exported = pd.read_parquet(tmp_path / "tiny" / EXPORT)
    pd.testing.assert_frame_equal(exported, loaded.results.reset_index(drop=True))
    # a compactly published folder's rows are its results.parquet: the export is written beside them
    published = tmp_path / "published"
    published.mkdir()
    with closing(Store(tmp_path / "tiny" / "store.sqlite", readonly=True)) as store:
        export_compact(store, published / COMPACT)
    assert main(["report", str(published), "--export", "parquet", "--json"]) == 0
    pd.testing.assert_frame_equal(attrbench.load_run(published).results, loaded.results)
    pd.testing.assert_frame_equal(pd.read_parquet(published / EXPORT), exported)


def test_a_report_says_which_library_kept_results_were_computed_under(tmp_path, capsys):
    """Results kept under another version of a library are computed again, and `attrbench report` says which
    library differs; written again under this one, they are used and nothing is said."""
    import gzip

    from attrbench.ops.reuse import FILE

    config = {"name": "tiny", "seed": 1, "shard_size": 2, "suite": [
        {"model": "tiny-bert", "dataset": "sva-generated", "n": 5, "methods": ["alti", "grad_l2", "blank_out"],
         "evals": ["erasure_aopc"]}]}
    attrbench.run(config, tmp_path / "tiny", progress=False)
    kept = tmp_path / "tiny" / FILE
    with gzip.open(kept, "rt") as f:
        stored = json.load(f)
    here = dict(part.split("=", 1) for part in stored["versions"].split(";"))["pandas"]
    stored["versions"] = stored["versions"].replace(f"pandas={here}", "pandas=0.0.1")
    with gzip.open(kept, "wt") as f:
        json.dump(stored, f)
    capsys.readouterr()
    assert main(["report", str(tmp_path / "tiny")]) == 0
    said = capsys.readouterr().out
    assert f"are of pandas 0.0.1 ({here} here)" in said and "the report computed its statistics" in said
    assert main(["report", str(tmp_path / "tiny")]) == 0
    assert "the report computed" not in capsys.readouterr().out


REPORTS = Path(__file__).parent.parent / "reports"


PUBLISHED = sorted(folder.name for folder in REPORTS.iterdir()
                   if (folder / "store.sqlite").is_file() or (folder / "results.parquet").is_file())


@functools.cache
def published(name: str) -> attrbench.RunResults:
    """A published folder loaded once for the tests that read it (reports/full's tables take about 20 s)."""
    return attrbench.load_run(REPORTS / name)


def test_the_default_and_the_full_comparison_are_published():
    assert PUBLISHED == ["default", "full"]


@pytest.mark.parametrize("name", PUBLISHED)
def test_a_published_run_loads_and_its_means_are_the_leaderboards(name):
    """reports/default (what README command 1 writes) and reports/full (published compactly), read back from
    their stores alone: the per-(method, metric) means of the results are those the committed leaderboard.md
    shows."""
    run = published(name)
    means = run.results.groupby(["model", "dataset", "eval", "metric", "method"]).value.mean()  # a model may have two
    markdown = (REPORTS / name / "leaderboard.md").read_text()
    checked = 0
    for record in run.records:
        if record.get("mean") is None or len(record.get("values", ())) != len(record.get("example_ids", ())):
            assert record.get("mean") is None or not ((run.results.eval == record["eval"]) &
                                                      (run.results.metric == record["metric"])).any()
            continue  # not per example (ln_outliers' per-layer correlation): no rows, never mislabelled ones
        # pandas and the report sum in different orders: float64 rounding, at most n ulps of the mean |value|
        values = np.abs(np.array([v for v in record["values"] if v is not None], dtype=np.float64))
        rounding = len(values) * np.finfo(np.float64).eps * float(values.mean()) if len(values) else 0.0
        assert means[(record["model"], record["dataset"], record["eval"], record["metric"], record["method"])] == \
            pytest.approx(record["mean"], abs=rounding)
        checked += 1
    assert checked > 100
    for title, frame in run.leaderboard.items():  # the tables as the committed document shows them
        for column in [c for c in frame.columns if c.endswith(("↑", "↓"))]:
            for cell in frame[column]:
                assert f"| {cell} |" in markdown, (title, column, cell)


@pytest.mark.parametrize("name", PUBLISHED)
def test_a_published_run_says_what_it_is_still_computing_as_its_report_does(name):
    """``still_computing`` is what the committed statistics.json lists, the report's provenance has a "still
    computing" line exactly when it lists something, and no table of ``leaderboard`` has a row of a method it lists
    for that table."""
    run = published(name)
    statistics = json.loads((REPORTS / name / "statistics.json").read_text())
    assert run.still_computing == statistics.get("still computing", {})
    said = "\n- still computing: " in (REPORTS / name / "leaderboard.md").read_text()
    assert said == bool(run.still_computing)
    for title, lagging in run.still_computing.items():
        if title in run.leaderboard:
            shown = {m.split(" (=")[0] for m in run.leaderboard[title]["method"]}
            assert not shown & set(lagging), (title, shown & set(lagging))


@pytest.mark.parametrize("name", PUBLISHED)
def test_every_published_value_lies_in_its_metrics_declared_range(name):
    """The ranges evaluations declare (``bounds``, to which a mean's interval is clipped) hold on every stored
    value of the published runs, and no interval reaches outside them."""
    checked = 0
    for record in published(name).records:
        if "values" not in record or "eval" not in record:
            continue
        low, high = EVALS.get(record["eval"]).bounds.get(record["metric"], (None, None))
        if low is None and high is None:
            continue
        values = [v for v in record["values"] if v is not None] + list(record.get("ci") or [])
        outside = [v for v in values if (low is not None and v < low - 1e-9) or (high is not None and v > high + 1e-9)]
        assert not outside, (record["eval"], record["metric"], record["method"], outside[:3])
        checked += len(values)
    assert checked > (100_000 if name == "full" else 5_000), checked


def test_a_run_shows_itself_in_one_line_and_a_published_folder_is_reported_elsewhere(tmp_path, monkeypatch):
    run = published("default")
    shown = repr(run)
    assert len(shown) < 400 and "\n" not in shown and "'default'" in shown, shown
    before = {path: path.read_bytes() for path in (REPORTS / "default").rglob("*") if path.is_file()}
    # the same rows give the same bytes: a second rendering, in another process (another order of its sets: a
    # hash seed of its own), changes nothing, figures and page included; it runs beside this one
    script = (f"import attrbench; attrbench.load_run({str(REPORTS / 'default')!r})"
              f".report(out={str(tmp_path / 'again')!r})")
    log = tmp_path / "again.log"
    with log.open("wb") as sink:
        other = subprocess.Popen([sys.executable, "-c", script], stdout=sink, stderr=subprocess.STDOUT,
                                 env={**os.environ, "PYTHONHASHSEED": "12345"})
        monkeypatch.chdir(tmp_path)
        paths = run.report()  # a published folder: its documents are left as they are
        assert other.wait() == 0, log.read_text()[-2000:]
    assert paths["leaderboard"].resolve() == (tmp_path / "attrbench-reports" / "default" / "leaderboard.md")
    assert {path: path.read_bytes() for path in (REPORTS / "default").rglob("*") if path.is_file()} == before
    here, again = paths["html"].parent, tmp_path / "again"
    first, second = (sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
                     for folder in (here, again))
    assert first == second and len([p for p in first if p.suffix == ".png"]) >= 6
    for name in first:
        assert (here / name).read_bytes() == (again / name).read_bytes(), name
