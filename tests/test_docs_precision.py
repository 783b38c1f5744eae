"""Every precision figure of docs/architecture.md is benchmarks/results/precision-cpu.json's measurement
(``python benchmarks/bench_precision.py``, on the tiny random models), read from the page with its whitespace
normalised so that a figure may wrap across lines. How the page states a figure decides the check:

- "about X": X is the recorded value's nearest power of ten (on a log scale: 7e-16 and 2e-15 are about 1e-15);
- "to X" (a bound, printed with as many significant digits as X has): X is at least the recorded value rounded to
  those digits (3e-9 holds 2.6e-9) and less than 10 times it, so a bound that is no longer met, and one that is
  loose by an order of magnitude or more, both fail;
- "more than X" (a lower bound): X is at most the recorded value and more than a tenth of it;
- a range "a–b": the recorded smallest and largest values rounded half up to the digits the page shows;
- "float32 precision": the recorded gap is within a factor of 10 of float32's machine epsilon (2^-23).

The float32 Shapley figure is of a MiniLM layer: it is held to benchmarks/results/shapley-cpu.json the same way, and
the tiny models' gap must lie within it.
"""
from __future__ import annotations

import math
import re

import pytest

from tests.test_docs_performance import ROOT, fixed, page, record

pytestmark = pytest.mark.numerics  # float tolerances: CI runs these under the portable kernels too (tests/precision.py)

ARCHITECTURE = ROOT / "docs" / "architecture.md"
PRECISION = "precision-cpu.json"
NUMBER = r"(\d+(?:\.\d+)?e-\d+)"
FLOAT32_EPSILON = 2.0 ** -23


def stated(pattern: str) -> tuple[str, ...]:
    """The figures the page states where ``pattern`` (NUMBER marks each) matches; fails if it does not."""
    found = re.search(pattern, page(ARCHITECTURE))
    assert found, f"docs/architecture.md no longer says: {pattern}"
    return found.groups()


def about(figure: str, recorded: float) -> None:
    mantissa, exponent = figure.split("e")
    assert mantissa == "1", f"'about {figure}' is not a power of ten"
    assert round(math.log10(recorded)) == int(exponent), f"recorded {recorded:.2g} is not about {figure}"


def bound(figure: str, recorded: float) -> None:
    digits = len(figure.split("e")[0].replace(".", ""))
    rounded = float(f"{recorded:.{digits - 1}e}")
    assert float(figure) >= rounded, f"'to {figure}' but {recorded:.2g} was recorded"
    assert float(figure) < 10 * recorded, f"'to {figure}' is loose by 10x or more: {recorded:.2g} was recorded"


def lower_bound(figure: str, recorded: float) -> None:
    assert recorded / 10 < float(figure) <= recorded, f"'more than {figure}' but {recorded:.2g} was recorded"


def test_the_record_says_where_and_how_it_was_measured():
    rec = record(PRECISION)
    assert rec["machine"] == "AMD EPYC VM, 2 CPU cores, no GPU" and rec["cores"] == 2
    assert rec["torch"] and re.fullmatch(r"[0-9a-f]{7,40}", rec["commit"])
    assert rec["command"] == "python benchmarks/bench_precision.py"
    assert (ROOT / "benchmarks" / "bench_precision.py").exists()
    assert "by `python benchmarks/bench_precision.py` (`benchmarks/results/precision-cpu.json`)" in page(ARCHITECTURE)


def test_the_completeness_residuals_are_the_recorded_ones():
    rec = record(PRECISION)["completeness"]
    float64, float32 = stated(rf"Residuals are about {NUMBER} relative in float64 and {NUMBER} in float32\.")
    about(float64, rec["max_float64"])
    about(float32, rec["max_float32"])


def test_the_float64_runs_of_opt_and_llama_are_the_recorded_ones():
    rec = record(PRECISION)["completeness"]
    assert rec["float32_internals_models"] == ["tiny-opt", "tiny-llama"]
    (after,) = stated(rf"those float64 runs are exact to about {NUMBER} after those ops\.")
    (before,) = stated(rf"everything before them is exact to about {NUMBER}\.")
    about(after, rec["max_float64_after_float32_ops"])
    about(before, rec["max_float64_before_float32_ops"])


def test_the_closed_form_ig_matches_captum_as_recorded():
    rec = record(PRECISION)["ig_vs_captum"]
    assert rec["steps"] == 256 and {r["gated"] for r in rec["models"].values()} == {False, True}
    (plain,) = stated(rf"It matches captum's IG with {rec['steps']} Gauss-Legendre steps to {NUMBER}\.")
    (gated,) = stated(rf"so completeness is exact \(matches captum to {NUMBER}\)\.")
    bound(plain, rec["max_plain"])
    bound(gated, rec["max_gated"])


def test_the_shapley_engine_matches_shap_as_recorded():
    rec, minilm = record(PRECISION)["shapley_vs_shap"], record("shapley-cpu.json")
    float64, float32 = stated(rf"Ours equals shap's Exact explainer to {NUMBER} in float64 and {NUMBER} in float32 "
                              rf"\(on a MiniLM layer")
    bound(float64, rec["max_float64"])
    assert minilm["model"] == "minilm-l6"
    bound(float32, minilm["max_abs_gap"])
    assert rec["max_float32"] <= float(float32), "the tiny models' float32 gap exceeds the page's"


def test_the_ig_and_shapley_maps_agree_as_recorded():
    rec = record(PRECISION)["ig_vs_shapley_spearman"]
    low, high = stated(r"the IG and Shapley FF maps agree to a Spearman correlation of (\d\.\d+)–(\d\.\d+)\.")
    assert (low, high) == (fixed(rec["min"], len(low) - 2), fixed(rec["max"], len(high) - 2))


def test_the_printed_res2_misses_by_the_recorded_error():
    rec = record(PRECISION)["printed_res2"]
    (error,) = stated(rf"on the tiny models it misses the layer output by more than {NUMBER} \(relative\)\.")
    lower_bound(error, rec["min"])
    assert rec["complete_max"] < 1e-12  # the complete form does reconstruct it


def test_batches_equal_one_by_one_as_recorded():
    rec = record(PRECISION)["batched_vs_single"]
    (float64,) = stated(rf"Padded batches give the one-by-one results to about {NUMBER} in float64, and to float32 "
                        r"precision for OPT and the LLaMA family\.")
    about(float64, rec["max_float64_models"])
    inside = sorted(name for name, row in rec["models"].items() if row["float32_internals"])
    assert inside == ["tiny-llama", "tiny-opt"]
    gap = rec["max_float32_internals_models"]
    assert FLOAT32_EPSILON / 10 < gap < 10 * FLOAT32_EPSILON, f"{gap:.2g} is not float32 precision"
