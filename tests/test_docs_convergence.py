"""The account of integrated gradients on SmolLM2 in docs/methods.md and in the method's docstring is
benchmarks/results/ig-convergence-smollm2-cpu.json's (``python benchmarks/bench_ig_convergence.py``): the fixed
rules' median gaps and how many examples they bring within 5 %, the adaptive rule's evaluations, the total
variation of the score along the path (float32 and float64), the path's distance from RMSNorm's zero and the zero
baseline's gaps. A figure is the recorded one as the page rounds it."""
from __future__ import annotations

import re

from attrbench.methods import integrated_gradients
from attrbench.registry import METHODS
from tests.test_docs_performance import ROOT, page, record

CONVERGENCE = "ig-convergence-smollm2-cpu.json"


def shown(value: float, figure: str) -> bool:
    """Whether ``figure`` is ``value`` with the significant digits the page gives it (2.8, 0.97, 136, 3e-06)."""
    if "e" in figure:
        return f"{value:.0e}".replace("e-0", "e-") == figure.replace("e-0", "e-")
    digits = len(figure.replace(".", "").lstrip("0"))
    return float(f"{value:.{digits}g}") == float(figure)


def above(value: float, figure: str) -> bool:
    """Whether "above ``figure``" is ``value`` rounded down in the page's last digit (0.27 for 0.274 or 0.279)."""
    unit = 10.0 ** -len(figure.split(".")[1]) if "." in figure else 1.0
    return float(figure) <= value < float(figure) + unit


def docstring() -> str:
    return re.sub(r"\s+", " ", integrated_gradients.__doc__)


def test_the_record_says_where_and_how_it_was_measured():
    rec = record(CONVERGENCE)
    assert rec["machine"] == "AMD EPYC VM, 2 CPU cores, no GPU" and re.fullmatch(r"[0-9a-f]{7,40}", rec["commit"])
    assert rec["model"] == "smollm2-135m" and rec["dataset"] == "sva-linzen" and len(rec["examples"]) == 20
    defaults = METHODS.get("integrated_gradients").get_params()
    assert (defaults["tolerance"], defaults["max_steps"], defaults["baseline"]) == (0.05, 1600, "pad")


def test_the_methods_page_is_the_record():
    rec = record(CONVERGENCE)
    said = re.search(r"with 50 Gauss-Legendre steps the median gap on (\d+) Linzen contrasts is ([\d.]+) times "
                     r"F\(x\) − F\(x′\) \(([\d.]+) at 200 steps; from the unk baseline ([\d.]+) and ([\d.]+), from "
                     r"the zero embedding ([\d.]+) and (\d+) on (\d+) of them\), because the score along the "
                     r"straight path oscillates steeply \(total variation up to (\d+) times the change; "
                     r"`benchmarks/bench_ig_convergence.py`",
                     page(ROOT / "docs" / "methods.md"))
    assert said, "docs/methods.md no longer gives the fixed rules' gaps on SmolLM2"
    fixed, zero = rec["fixed"], rec["zero_baseline"]
    assert int(said[1]) == len(rec["examples"])
    assert shown(fixed["pad_50"]["median_gap"], said[2]) and shown(fixed["pad_200"]["median_gap"], said[3])
    assert shown(fixed["unk_50"]["median_gap"], said[4]) and shown(fixed["unk_200"]["median_gap"], said[5])
    assert shown(zero["50"]["median_gap"], said[6]) and shown(zero["200"]["median_gap"], said[7])
    assert int(said[8]) == rec["total_variation"]["examples"] == len(zero["50"]["gaps"])
    assert shown(rec["total_variation"]["max"], said[9])
    said = re.search(r"On SmolLM2 all (\d+) examples converge, with (\d+) to (\d+) evaluations \(mean (\d+), ([\d.]+) "
                     r"times a fixed 50-step rule\)", page(ROOT / "docs" / "methods.md"))
    assert said, "docs/methods.md no longer says what the adaptive rule spends on SmolLM2"
    adaptive = rec["adaptive"]
    assert adaptive["converged"] == len(rec["examples"]) == int(said[1])
    assert (adaptive["evaluations_min"], adaptive["evaluations_max"]) == (int(said[2]), int(said[3]))
    assert round(adaptive["evaluations_mean"]) == int(said[4])
    assert shown(adaptive["evaluations_mean"] / 50, said[5])


def test_the_docstring_is_the_record():
    rec = record(CONVERGENCE)
    fixed = rec["fixed"]
    said = re.search(r"On SmolLM2-135M \((?P<n>\d+) sva-linzen contrasts, pad baseline\) 50 Gauss-Legendre steps leave "
                     r"a median gap of (?P<gap50>[\d.]+) times F\(e\) - F\(e'\), and 200 steps (?P<gap200>[\d.]+); "
                     r"(?P<low>\d+) to (?P<high>\d+) of (?P<of>\d+) examples are within 5 % at (?P<s1>\d+), "
                     r"(?P<s2>\d+) or (?P<s3>\d+) steps, from the unk baseline as from pad\. The score along the "
                     r"straight path is smooth but steep and oscillating: its total variation is (?P<tv_min>[\d.]+) "
                     r"to (?P<tv_max>\d+) times \|F\(e\) - F\(e'\)\| \((?P<tv_n>\d+) examples\), the same with "
                     r"the weights in float64 \(to (?P<wide>[\d.e-]+); Hugging Face runs LLaMA's RMSNorm in float32 "
                     r"even then\)\. Interpolated embeddings never come near zero norm from the pad baseline \(their "
                     r"mean square stays above (?P<square>[\d.]+) times the token's, (?P<eps>\d+) times RMSNorm's "
                     r"eps\); from the zero embedding they do, and more steps make the median gap larger \(on "
                     r"(?P<zero_n>\d+) examples: (?P<zero50>[\d.]+) at 50 steps, (?P<zero200>\d+) at 200\)\. These "
                     r"figures are benchmarks/results/ig-convergence-smollm2-cpu\.json's", docstring())
    assert said, "integrated_gradients' docstring no longer gives the account of SmolLM2"
    assert int(said["n"]) == int(said["of"]) == len(rec["examples"])
    assert shown(fixed["pad_50"]["median_gap"], said["gap50"]) and shown(fixed["pad_200"]["median_gap"], said["gap200"])
    within = [fixed[f"{b}_{said[s]}"]["within_5_percent"] for b in ("pad", "unk") for s in ("s1", "s2", "s3")]
    assert (min(within), max(within)) == (int(said["low"]), int(said["high"]))
    variation, wide = rec["total_variation"], rec["total_variation_float64"]
    assert shown(variation["min"], said["tv_min"]) and shown(variation["max"], said["tv_max"])
    assert variation["examples"] == int(said["tv_n"]) == len(wide["values"])
    assert wide["max_relative_difference"] <= float(said["wide"]) < 10 * wide["max_relative_difference"]
    square = rec["mean_square"]
    assert square["texts"] == len(rec["examples"])
    assert above(square["relative_to_token"], said["square"]) and above(square["over_rms_norm_eps"], said["eps"])
    zero = rec["zero_baseline"]
    assert zero["200"]["median_gap"] > zero["50"]["median_gap"] and len(zero["50"]["gaps"]) == int(said["zero_n"])
    assert shown(zero["50"]["median_gap"], said["zero50"]) and shown(zero["200"]["median_gap"], said["zero200"])
    said = re.search(r"On SmolLM2 all (\d+) examples meet 5 % with (\d+) to (\d+) evaluations \(mean (\d+)\)",
                     docstring())
    assert said, "integrated_gradients' docstring no longer says what the adaptive rule spends on SmolLM2"
    adaptive = rec["adaptive"]
    assert adaptive["converged"] == int(said[1]) and adaptive["relative_delta_max"] <= 0.05
    recorded = (adaptive["evaluations_min"], adaptive["evaluations_max"], round(adaptive["evaluations_mean"]))
    assert recorded == tuple(map(int, said.groups()[1:4]))
