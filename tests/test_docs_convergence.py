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
                     r"F\(x\) − F\(x′\) \(([\d.]+) at 200 steps; from the unk or the zero baseline it stays above "
                     r"([\d.]+) too\), because the score along the straight path oscillates steeply \(total variation "
                     r"up to (\d+) times the change; `benchmarks/bench_ig_convergence.py`",
                     page(ROOT / "docs" / "methods.md"))
    assert said, "docs/methods.md no longer gives the fixed rules' gaps on SmolLM2"
    fixed, zero = rec["fixed"], rec["zero_baseline"]
    assert int(said[1]) == len(rec["examples"])
    assert shown(fixed["pad_50"]["median_gap"], said[2]) and shown(fixed["pad_200"]["median_gap"], said[3])
    others = [fixed[f"unk_{s}"]["median_gap"] for s in (50, 200)] + [zero[s]["median_gap"] for s in ("50", "200")]
    assert above(min(others), said[4])
    assert shown(rec["total_variation"]["max"], said[5])
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
    said = re.search(r"On SmolLM2-135M \((\d+) sva-linzen contrasts, pad baseline\) 50 Gauss-Legendre steps leave a "
                     r"median gap of ([\d.]+) times F\(e\) - F\(e'\), and 200 steps ([\d.]+); (\d+) to (\d+) of \d+ "
                     r"examples are within 5 % at (\d+), (\d+) or (\d+) steps, from the unk baseline as from pad\. "
                     r"The score along the straight path is smooth but steep and oscillating: its total variation is "
                     r"([\d.]+) to (\d+) times \|F\(e\) - F\(e'\)\| \((\d+) examples\), the same in float64 \(to "
                     r"([\d.e-]+)\)\. Interpolated embeddings never come near zero norm with a token baseline \(their "
                     r"mean square stays above ([\d.]+) times the token's, (\d+) times RMSNorm's eps\); with a zero "
                     r"baseline they do, the score jumps at a -> 0, and more steps make the gap larger \(median "
                     r"([\d.]+) at 50 steps, (\d+) at 200\)\. These figures are "
                     r"benchmarks/results/ig-convergence-smollm2-cpu\.json's", docstring())
    assert said, "integrated_gradients' docstring no longer gives the account of SmolLM2"
    assert int(said[1]) == len(rec["examples"])
    assert shown(fixed["pad_50"]["median_gap"], said[2]) and shown(fixed["pad_200"]["median_gap"], said[3])
    steps = [int(s) for s in said.groups()[5:8]]
    within = [fixed[f"{b}_{s}"]["within_5_percent"] for b in ("pad", "unk") for s in steps]
    assert (min(within), max(within)) == (int(said[4]), int(said[5]))
    variation, wide = rec["total_variation"], rec["total_variation_float64"]
    assert shown(variation["min"], said[9]) and shown(variation["max"], said[10])
    assert variation["examples"] == int(said[11]) == len(wide["values"])
    assert wide["max_relative_difference"] <= float(said[12]) < 10 * wide["max_relative_difference"]
    square = rec["mean_square"]
    assert square["texts"] == len(rec["examples"])
    assert above(square["relative_to_token"], said[13]) and above(square["over_rms_norm_eps"], said[14])
    zero = rec["zero_baseline"]
    assert zero["200"]["median_gap"] > zero["50"]["median_gap"]
    assert shown(zero["50"]["median_gap"], said[15]) and shown(zero["200"]["median_gap"], said[16])
    said = re.search(r"On SmolLM2 all (\d+) examples meet 5 % with (\d+) to (\d+) evaluations \(mean (\d+)\)",
                     docstring())
    assert said, "integrated_gradients' docstring no longer says what the adaptive rule spends on SmolLM2"
    adaptive = rec["adaptive"]
    assert adaptive["converged"] == int(said[1]) and adaptive["relative_delta_max"] <= 0.05
    recorded = (adaptive["evaluations_min"], adaptive["evaluations_max"], round(adaptive["evaluations_mean"]))
    assert recorded == tuple(map(int, said.groups()[1:4]))
