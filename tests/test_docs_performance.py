"""Every measured figure of docs/performance.md (and the placement cost in docs/leaderboard-runs.md) that restates a
file in benchmarks/results/ is that file's number, rounded half up to the digits the page shows.
"""
from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PERFORMANCE = ROOT / "docs" / "performance.md"
LEADERBOARD_RUNS = ROOT / "docs" / "leaderboard-runs.md"

SUITES = {"minilm-l6-sst2 · sst2": "MiniLM · SST-2", "minilm-l6-sva · sva-linzen": "MiniLM · Linzen",
          "smollm2-135m · sva-linzen": "SmolLM2 · Linzen"}


def page(path: Path | None = None) -> str:
    """The page with its whitespace normalised, so that a figure may wrap across lines."""
    return " ".join((path or PERFORMANCE).read_text(encoding="utf-8").split())


def record(name: str):
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def fixed(x: float, places: int = 0, thousands: bool = False) -> str:
    """x as the page prints it: rounded half up (3.25 → 3.3) from the number the file records."""
    d = Decimal(repr(x)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{d:,}" if thousands else str(d)


def sci(x: float, places: int = 1) -> str:
    """x in the page's scientific notation: 4.8e-7."""
    mantissa, exponent = f"{x:.{places}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def joined(values, places: int = 0) -> str:
    return " / ".join(fixed(v, places) for v in values)


def test_the_machines_drift_is_the_recorded_run():
    """The identical batches' fastest and slowest seconds on the otherwise idle 2-core VM are
    benchmarks/results/drift-cpu.json."""
    rec = record("drift-cpu.json")
    assert rec["model"] == "minilm-l6-sst2" and rec["device"] == "cpu" and rec["cpus"] == 2
    assert rec["threads"] == 2 and rec["busy elsewhere"] == 0 and rec["note"] == "machine otherwise idle"
    assert rec["batches"] == len(rec["seconds"]) == 14
    fastest, slowest = min(rec["seconds"]), max(rec["seconds"])
    assert (fastest, slowest) == (rec["fastest s"], rec["slowest s"])
    assert ("Its speed varies: on the otherwise idle machine fourteen identical batches of "
            f"{rec['inputs']} MiniLM inputs of {rec['tokens']} tokens took {fixed(fastest, 2)} to {fixed(slowest, 2)} "
            "s in one run (`python benchmarks/bench_drift.py`; `benchmarks/results/drift-cpu.json`)") in page()


def test_a_short_pass_is_the_recorded_cpu_cost():
    """SmolLM2's seconds for one pass of 1 x 2 tokens, and the tokens of a full batch that cost as much, are
    benchmarks/results/batching-smollm2-cpu.json (2 threads, the machine otherwise idle); the padding a CPU batch may
    carry (``RunOptions.pad_tokens``) is about that many tokens."""
    from attrbench.runtime.options import DEFAULT_PAD_TOKENS

    (rec,) = record("batching-smollm2-cpu.json")
    assert rec["model"] == "smollm2-135m" and rec["device"] == "cpu" and rec["cpus"] == 2
    assert rec["threads"] == 2 and rec["busy elsewhere"] == 0 and rec["note"] == "machine otherwise idle"
    first = rec["grid"][0]
    assert (first["rows"], first["seconds"]) == (1, rec["pass s"])
    assert first["length"] == min(cell["length"] for cell in rec["grid"])
    best = max(rec["grid"], key=lambda cell: cell["tokens/s vs best"])
    assert best["rows"] * best["length"] == max(cell["rows"] * cell["length"] for cell in rec["grid"])
    assert rec["pass / token"] == round(rec["pass s"] / rec["token s"])
    assert 0.5 <= rec["pass / token"] / DEFAULT_PAD_TOKENS["cpu"] <= 2
    assert (f"a forward pass of a few tokens costs what about {round(rec['pass / token'], -1)} tokens more cost on 2 "
            "cores, since the weights are read all the same (`benchmarks/bench_batching.py`, SmolLM2: "
            f"{fixed(rec['pass s'], 3)} s for 1 × {first['length']} tokens, what {rec['pass / token']} tokens cost "
            f"in a full batch of {best['rows']} × {best['length']}; `benchmarks/results/batching-smollm2-cpu.json`)"
            ) in page()


def test_the_decomposition_table_is_the_recorded_run():
    """Each row of the engine's size table and the comparison with the paper's formulation are
    benchmarks/results/decompose-cpu.json."""
    text, rec = page(), record("decompose-cpu.json")
    machine = rec["machine"]
    assert f"on the same shape ({fixed(machine['matmul_gflops'])} GFLOP/s). {machine['cores']} CPU cores:" in text
    for size in rec["sizes"]:
        seconds = fixed(size["seconds"], 3 if size["seconds"] < 1 else 2 if size["seconds"] < 10 else 1)
        row = (f"| {size['n']} | {seconds} | {fixed(size['peak_rss_mb'])} MB | {fixed(size['gflops'])} | "
               f"{fixed(100 * size['fraction_of_matmul'])} % |")
        assert row in text, row
    largest = max(size["max_residual"] for size in rec["sizes"])
    assert largest <= 2e-6 and f"at most {sci(largest, 0)} relative" in text
    ref = rec["reference"]
    assert (f"at n = {ref['n']}: the reference takes {fixed(ref['reference_ff_only_seconds'], 2)} s for the FF maps "
            f"alone, the engine {fixed(ref['engine_all_scopes_seconds'], 3)} s for all scopes, "
            f"{fixed(ref['speedup'])}× faster, and their FF maps agree to {sci(ref['max_relative_map_gap'])} "
            "relative") in text


def test_the_leaderboard_breakdown_is_the_recorded_run():
    """The per-suite table, the repeats, forward-to-floor ratios, leftover seconds and the added method's cost are
    benchmarks/results/leaderboard-bench-cpu.json."""
    text, rec = page(), record("leaderboard-bench-cpu.json")
    suites = rec["suites"]
    assert [s["suite"] for s in suites] == list(SUITES)
    assert {(s["n"], s["repeats"], s["methods"]) for s in suites} == {(6, 2, 34)}
    assert "at n = 6 (`--suites 0,1,2`), all 34 methods" in text and "fastest of 2 runs on 2 CPU cores" in text
    for s in suites:
        model = s["suite"].split(" · ")[0]
        label = f"`{model}` · " + SUITES[s["suite"]].split(" · ")[1]
        row = (f"| {label} | {s['requested']:,} | {s['distinct']:,} | {s['sent']:,} | {fixed(s['forward s'], 1)} | "
               f"{fixed(s['floor s'], 1)} | {fixed(s['attribution s'], 1)} | {fixed(s['computing s'], 1)} | "
               f"**{fixed(s['computing × (attribution + floor)'], 2)}** |")
        assert row in text, row
    repeats = joined(100 * (1 - s["distinct"] / s["requested"]) for s in suites)
    assert f"Of the inputs the metrics asked for, {repeats} % were repeats" in text
    assert f"at the floor:** {joined((s['forward s'] / s['floor s'] for s in suites), 2)}× it" in text
    left = joined((s["computing s"] - s["attribution s"] - s["floor s"] for s in suites), 1)
    assert f"beyond attribution and floor: {left} s" in text and f"({suites[0]['methods']} per model)" in text
    (added,) = rec["additions"]
    assert added["suite"] == suites[0]["suite"]
    assert (f"(`{added['method added']}` to the {added['n']}-example SST-2 run): {fixed(added['addition s'], 1)} s "
            f"for its {added['rows computed']} rows ({added['model inputs sent']} model inputs, "
            f"{added['attributions']} attributions), against {fixed(added['whole run s'])} s for the whole run") in text


def test_placing_a_method_is_the_recorded_cost():
    """Both pages' costs of placing a method on reports/default are benchmarks/results/place-method-default-cpu.json,
    and docs/leaderboard-runs.md's NAOPC bounds per example are benchmarks/results/naopc-floor-full-cpu.json."""
    rec = record("place-method-default-cpu.json")
    cheap, sampled = rec["methods"]
    assert rec["published"] == "reports/default" and rec["threads"] == 2
    examples = {suite["examples"] for m in rec["methods"] for suite in m["suites"].values()}
    assert examples == {14} and {len(m["suites"]) for m in rec["methods"]} == {3}
    assert cheap["examples"] == sampled["examples"] == 3 * 14
    assert (f"measured when it had {cheap['examples']} examples on three models: "
            f"{fixed(cheap['computing_seconds_per_example'], 2)} s of computing per example for gradient × input, "
            f"{fixed(sampled['computing_seconds_per_example'], 2)} s for LIME") in page()

    guide = page(ROOT / "docs" / "writing-a-plugin.md")
    assert (f"when reports/default had {cheap['examples']} examples on three models): the whole command took "
            f"{fixed(cheap['wall_seconds'])} s for a method of gradient × input's cost and "
            f"{fixed(sampled['wall_seconds'])} s for one of LIME's") in guide
    text = page(LEADERBOARD_RUNS)
    assert "(`python benchmarks/bench_place.py`, 2 CPU cores," in text
    medians = joined((suite["method_median_s"] for suite in sampled["suites"].values()), 2)
    assert ("measured when reports/default had three suites of 14 examples each: placing a cheap method "
            f"(gradient × input under another name: one forward and one backward pass) on those {cheap['examples']} "
            f"examples took {fixed(cheap['wall_seconds'])} s for the whole command (loading the three models, "
            f"{fixed(cheap['computing_seconds'])} s of computing = {fixed(cheap['computing_seconds_per_example'], 2)} "
            f"s per example, writing the report), {cheap['rows']} rows; a sampled one (captum's LIME with its "
            f"defaults) took {fixed(sampled['wall_seconds'])} s ({fixed(sampled['computing_seconds'])} s of computing "
            f"= {fixed(sampled['computing_seconds_per_example'], 2)} s per example; the method itself {medians} s per "
            "example on the three suites, medians)") in text
    naopc = record("naopc-floor-full-cpu.json")["suites"]
    assert {s["naopc_beam_width"] for s in naopc} == {2}
    bounds = joined((s["bounds_s_per_example"] for s in naopc), 1)
    assert (f"NAOPC bounds ({bounds} s per example on SST-2 / Linzen / SmolLM2, measured with a beam width of "
            f"{naopc[0]['naopc_beam_width']};") in text


def test_the_naopc_bounds_are_the_recorded_count():
    """The distinct texts and seconds per example of NAOPC's bounds are benchmarks/results/naopc-floor-full-cpu.json,
    whose suites are SST-2, Linzen and SmolLM2 in that order."""
    rec = record("naopc-floor-full-cpu.json")
    suites = rec["suites"]
    assert [s["model"] for s in suites] == ["minilm-l6-sst2", "minilm-l6-sva", "smollm2-135m"]
    assert len({s["sampled"] for s in suites}) == len({s["naopc_beam_width"] for s in suites}) == 1
    texts = " / ".join(fixed(s["texts_per_example"], thousands=True) for s in suites)
    assert (f"`python benchmarks/bench_forward_floor.py {rec['config']}` counts and times the distinct perturbed "
            f"inputs they need for {suites[0]['sampled']} sampled examples per suite "
            f"(`benchmarks/results/naopc-floor-full-cpu.json`, measured with a beam width of "
            f"{suites[0]['naopc_beam_width']}): {texts} distinct texts per example on SST-2 / Linzen / SmolLM2, "
            f"{joined((s['bounds_s_per_example'] for s in suites), 1)} s per example on 2 CPU cores") in page()


def test_the_mirrored_soft_floor_is_the_recorded_comparison():
    """The mirrored floor's inputs and seconds against the unmirrored one are
    benchmarks/results/soft-floor-mirrored-cpu.json, and both runs drew the same comprehensiveness masks."""
    text = page()
    mirrored, unmirrored = record("soft-floor-mirrored-cpu.json")
    assert mirrored["label"] == "soft_erasure" and unmirrored["label"] == "soft_erasure (unmirrored)"
    assert mirrored["draws"] == unmirrored["draws"] and mirrored["eval"] == unmirrored["eval"]
    samples = re.search(r"samples=(\d+)", mirrored["eval"]).group(1)
    assert f"the floor sends its {mirrored['draws']} draws' {samples} masks once" in text
    n = len(mirrored["in a run"]["features"])
    assert f"--suite {mirrored['model']} --evals {mirrored['label']} --n {n}`" in text
    assert f"on the first {n} agreement items" in text
    a, b = mirrored["in a run"], unmirrored["in a run"]
    assert (f"{fixed(a['outputs_per_example'], thousands=True)} model inputs and {fixed(a['seconds_per_example'], 1)} "
            f"s per example mirrored, {fixed(b['outputs_per_example'], thousands=True)} and "
            f"{fixed(b['seconds_per_example'], 1)} s not, with the same comprehensiveness draws") in text
    comprehensiveness = "soft_comprehensiveness_raw"
    assert a["values"][comprehensiveness] == b["values"][comprehensiveness]


def test_the_sampler_speed_ups_are_the_recorded_timings():
    """The perturbation samplers' before and after milliseconds and ratios are benchmarks/results/samplers-cpu.json,
    in which every score matched to the last bit."""
    text, rec = page(), record("samplers-cpu.json")
    assert (f"measures it on `{rec['model']}` (forward passes nearly free), {rec['n']} SST-2 dev sentences, one "
            f"thread, fastest of {rec['repeat']}, {rec['cpus']} CPU cores") in text
    assert f"`benchmarks/results/samplers-cpu.json`, against {rec['before']})" in text
    names = {"lime": "LIME", "kernel_shap": "KernelSHAP", "shapley_sampling": "Shapley sampling",
             "occlusion": "occlusion"}
    assert [row["method"] for row in rec["rows"]] == list(names)
    parts = [f"{names[row['method']]} {fixed(row['before ms per sentence'], 1)} → "
             f"{fixed(row['after ms per sentence'], 1)} ms{' per sentence' if not k else ''} "
             f"({fixed(row['before / after'], 2)}×)" for k, row in enumerate(rec["rows"])]
    assert ", ".join(parts) + ", every score the same to the last bit" in text
    assert {row["largest difference"] for row in rec["rows"]} == {0.0}


PROXIES = ("proxy-cpu.json", "proxy-gpu-geometry-cpu.json", "proxy-gpu-geometry-n24-cpu.json",
           "proxy-gpu-geometry-n96-cpu.json")


def test_the_proxy_table_is_the_recorded_runs():
    """Each row of the proxy table (model calls and seconds per example, before and after, and rows differing) and
    the largest differences below it are the benchmarks/results/proxy-*.json file of that run."""
    text = page()
    runs = [record(name) for name in PROXIES]
    assert {run["before"] for run in runs} == {"0e1404e"} and {run["cpus"] for run in runs} == {2}
    assert {run.get("device", "cpu") for run in runs} == {"cpu"}
    assert ("(0e1404e), on 2 CPU cores (AMD EPYC; `benchmarks/results/proxy-*.json`; none of these runs is on a "
            "GPU)") in text
    budgets = {"cpu": "CPU", "gpu": "CUDA"}

    def calls_shown(calls: float) -> str:
        return fixed(calls, 0 if calls >= 20 else 1)

    for run in runs:
        before, after = run["fastest"]["before"], run["fastest"]["after"]
        label = f"n = {run['n']}, shard {run['shard']}, {budgets[run['geometry']]} batch budget"
        if run["repeat"] > 1:
            label += f" (fastest of {run['repeat']})"
        calls = before["model calls per example"], after["model calls per example"]
        seconds = before["computing s per example"], after["computing s per example"]
        row = (f"| {label} | {calls_shown(calls[0])} → {calls_shown(calls[1])} ({fixed(calls[0] / calls[1], 1)}×) | "
               f"{fixed(seconds[0], 2)} → {fixed(seconds[1], 2)} ({fixed(seconds[0] / seconds[1], 2)}×) | "
               f"{run['rows']['rows differing']} of {run['rows']['rows compared']:,} |")
        assert row in text, row
    small, large = runs[:3], runs[3]
    assert [run["n"] for run in small] == [6, 6, 24] and {run["rows"]["rows differing"] for run in small} == {0}
    largest = max(run["rows"]["largest difference"] for run in small)
    assert f"the largest difference was {sci(largest)} in the runs of 6 and 24 examples" in text
    assert large["rows"]["rows differing"] == 1
    (cell,) = large["rows"]["differing cells"]
    assert cell.startswith("soft_erasure(") and "/ decompx(" in cell
    assert (f"In the run of {large['n']} one row differed by {sci(large['rows']['largest difference'])}: DecompX's "
            "soft erasure") in text


def test_the_n96_proxy_breakdown_is_its_run():
    """The model calls, methods' seconds and metrics' forward seconds quoted for the run of 96 examples are
    benchmarks/results/proxy-gpu-geometry-n96-cpu.json."""
    text, run = page(), record("proxy-gpu-geometry-n96-cpu.json")
    before, after = run["fastest"]["before"], run["fastest"]["after"]
    n = run["n"]
    assert after["examples"] == n == 96
    assert (f"(the methods' own seconds {fixed(before['attribution s'], 1)} → {fixed(after['attribution s'], 1)}, "
            f"{fixed(before['attribution s'] / after['attribution s'], 2)}×)") in text
    assert f"What remains at n = {n} is {after['model calls']:,} model calls, among them" in text
    assert (f"the metrics' own forward passes took {fixed(after['forward s'], 1)} of the "
            f"{fixed(after['computing s'], 1)} s at n = {n} ({fixed(after['forward s'] / n, 2)} s per example)") in text
    assert (f"a five-fold cut of the {fixed(before['computing s per example'], 2)} s per example the engine without "
            f"batched attributions took would leave {fixed(before['computing s per example'] / 5, 2)} s per "
            "example") in text


def test_the_stand_ins_table_is_the_recorded_runs():
    """The H200 and 2-core seconds per example, their ratio, and the forward, computing and attribution seconds below
    the table are benchmarks/results/leaderboard-stand-ins-{cuda-h200,cpu}.json."""
    text = page()
    gpu = record("leaderboard-stand-ins-cuda-h200.json")["suites"]
    cpu = record("leaderboard-stand-ins-cpu.json")["suites"]
    assert [s["suite"] for s in gpu] == [s["suite"] for s in cpu] == list(SUITES)
    assert {s["device"] for s in gpu} == {"cuda"} and {s["device"] for s in cpu} == {"cpu"}
    assert {(s["n"], s["methods"]) for s in gpu + cpu} == {(2, 34)}
    assert "all 34) and scoring metrics" in text and "no analyses), n = 2 per suite" in text
    for g, c in zip(gpu, cpu):
        g_s, c_s = g["computing s per example"], c["computing s per example"]
        row = f"| {SUITES[g['suite']]} | {fixed(g_s, 1)} | {fixed(c_s, 1)} | {fixed(c_s / g_s)}× |"
        assert row in text, row
    assert (f"forward passes are most of the time ({joined(s['forward s'] for s in cpu)} s of "
            f"{joined(s['computing s'] for s in cpu)} s of computing); on the GPU they are not "
            f"({joined((s['forward s'] for s in gpu), 1)} s of {joined((s['computing s'] for s in gpu), 1)} s): "
            f"attributions took {joined((s['attribution s'] for s in gpu), 1)} s") in text
    # the full comparison's examples per suite, at these rates
    assert "on 872 / 1,123 / 300 examples" in text
    sizes = (872, 1123, 300)
    hours = sum(k * s["computing s per example"] for k, s in zip(sizes, gpu)) / 3600
    assert f"the full comparison's {sum(sizes):,} examples would take about {fixed(hours)} hours on one H200" in text


def test_the_batching_figures_are_the_recorded_grid():
    """The tokens one short pass costs, and the largest grid point still raising throughput, are
    benchmarks/results/batching-cuda-h200.json."""
    text = page()
    minilm, smollm2 = record("batching-cuda-h200.json")
    assert (minilm["model"], smollm2["model"]) == ("minilm-l6-sst2", "smollm2-135m")
    bests = set()
    for model in (minilm, smollm2):
        first = model["grid"][0]
        assert (first["rows"], first["length"], first["seconds"]) == (1, 8, model["pass s"])
        best = max(model["grid"], key=lambda cell: cell["tokens/s vs best"])
        assert (best["rows"], best["length"]) == (max(c["rows"] for c in model["grid"]),
                                                  max(c["length"] for c in model["grid"]))
        bests.add((best["rows"], best["length"]))
    ((rows, length),) = bests
    assert (f"a pass of one 8-token input costs what {minilm['pass / token']:,} (MiniLM) / "
            f"{smollm2['pass / token']:,} (SmolLM2) tokens cost in the best-filled batch") in text
    assert 3200 <= min(minilm["pass / token"], smollm2["pass / token"]) and "up to 3,200 tokens of padding" in text
    assert f"Throughput still rises up to {rows:,} rows × {length} tokens" in text


def test_the_batched_cuda_tests_are_the_recorded_log():
    """The count of passed CUDA tests, the engine revision and the software versions are
    benchmarks/results/cuda-tests-batched-h200.log, whose two failures are the `ground_truth` planning error."""
    text = page()
    log = (RESULTS / "cuda-tests-batched-h200.log").read_text(encoding="utf-8")
    failed, passed = map(int, re.search(r"^(\d+) failed, (\d+) passed", log, re.MULTILINE).groups())
    assert f"`tests/runtime/test_cuda.py`: {passed} of {passed + failed} passed" in text
    assert failed == 2 and "The other two stopped at planning" in text
    assert log.count("InputError: evaluation 'ground_truth' needs the evidence words") == failed
    engine = re.search(r"^engine: (\w+)$", log, re.MULTILINE).group(1)
    assert f"({engine} and, for the second IG figure," in text
    versions = dict(re.findall(r"(torch|transformers|captum) (\d+\.\d+)", log))
    assert (f"(torch {versions['torch']}, transformers {versions['transformers']}, captum {versions['captum']})"
            in text)


def test_the_peers_table_is_the_recorded_runs():
    """Each peer row (sentences and seconds on both sides, the speed-up and the correlation) is
    benchmarks/results/peers-cuda-h200.json, with the second integrated-gradients figures from its rerun file; the
    rerun holds no LIME row, so LIME's only GPU timing is the first file's."""
    text = page()
    first, rerun = record("peers-cuda-h200.json"), record("peers-cuda-h200-rerun.json")
    assert first["card"] == rerun["card"] == "NVIDIA H200" and first["device"] == rerun["device"] == "cuda"
    jobs = {"minilm-l6-sst2 · class:1": "MiniLM classifier, class 1",
            "smollm2-135m · token:good": 'SmolLM2, the logit of " good"'}
    methods = {"grad_x_input": "gradient × input", "integrated_gradients": "integrated gradients", "lime": "LIME"}
    again = {(r["job"], r["method"], r["peer"]): r for r in rerun["rows"]}
    assert set(again) <= {(r["job"], r["method"], r["peer"]) for r in first["rows"]}
    assert {r["attrbench sentences"] for r in first["rows"] + rerun["rows"]} == {872}
    assert "SST-2's 872 dev sentences" in text

    def seconds(s: float) -> str:
        return fixed(s, 2 if s < 1 else 1 if s < 100 else 0)

    for r in first["rows"]:
        ours = f"{r['attrbench sentences']} in {seconds(r['attrbench s'])} s"
        peer = f"{r['peer']}: {r['peer sentences']} in {fixed(r['peer s'], 1)} s"
        speed = f"{fixed(r['speed-up'], 1 if r['speed-up'] < 10 else 0)}×"
        agree = "—" if r["r"] is None else fixed(r["r"], 1)
        if (r["job"], r["method"], r["peer"]) in again:
            s = again[r["job"], r["method"], r["peer"]]
            ours += f"; {seconds(s['attrbench s'])} s"
            peer += f"; {s['peer sentences']} in {fixed(s['peer s'], 1)} s"
            speed += f"; {fixed(s['speed-up'])}×"
            assert fixed(s["r"], 1) == agree
        row = f"| {jobs[r['job']]} | {methods[r['method']]} | {ours} | {peer} | {speed} | {agree} |"
        assert row in text, row
    assert "lime" not in {r["method"] for r in rerun["rows"]}
    smollm2 = {r["method"] for r in first["rows"] + rerun["rows"] if r["job"].startswith("smollm2-135m")}
    assert not smollm2 & {"integrated_gradients", "lime"}
    assert ("The SmolLM2 jobs for integrated gradients and LIME did not finish within the check's time limit."
            ) in text
    assert ("They sample on the CPU and send only the model's batches to the GPU; that has not been timed on a "
            "GPU.") in text


def test_the_n8_table_is_the_recorded_run():
    """The 8-example leaderboard's table and the floor, ratio and attribution figures after it are
    benchmarks/results/leaderboard-stand-ins-n8-cuda-h200.json."""
    text = page()
    suites = record("leaderboard-stand-ins-n8-cuda-h200.json")["suites"]
    assert [s["suite"] for s in suites] == list(SUITES)[:2]
    assert {(s["device"], s["n"], s["methods"]) for s in suites} == {("cuda", 8, 34)}
    assert "`bench_leaderboard.py --device cuda --n 8`" in text and "the `full` config's 34 methods" in text
    assert "8 examples per suite" in text
    for s in suites:
        row = (f"| {SUITES[s['suite']]} | {fixed(s['computing s per example'], 2)} | {fixed(s['forward s'], 1)} "
               f"({fixed(s['floor s'], 1)}) | {fixed(s['attribution s'], 1)} | "
               f"{fixed(s['distinct'] / s['n'], thousands=True)} |")
        assert row in text, row
    sst2, sva = suites

    def both(key: str, places: int, per_example: bool = True) -> str:
        return " and ".join(fixed(s[key] / (s["n"] if per_example else 1), places) for s in (sst2, sva))

    assert f"The metrics' own forward passes cost {both('floor s', 2)} s per example at the floor" in text
    assert f"Computing is {both('computing × (attribution + floor)', 2, False)} times attribution plus floor" in text
    assert f"mostly the attributions ({both('attribution s', 1)} s per example)" in text


def test_the_shapley_table_is_the_recorded_run():
    """The Shapley table, the speed-up, the gaps to shap and the kernel's load time are
    benchmarks/results/shapley-cpu.json; the float64 gap is the largest of benchmarks/results/precision-cpu.json's."""
    text, rec = page(), record("shapley-cpu.json")
    assert (f"one MiniLM layer at n = {rec['n']} tokens: {rec['players']} players (tokens plus the bias), {rec['n']} "
            f"rows, and {rec['elements']:,} activation elements per row") in text
    assert f"| ours (`shapley-exact`, fused numba kernel) | {fixed(rec['ours_seconds'], 3)} |" in text
    assert f"| ours, torch engine (`exact_dense`) | {fixed(rec['dense_seconds'], 2)} |" in text
    assert (f"| shap Exact explainer | {fixed(rec['shap_seconds_all_rows'])} ({fixed(rec['shap_seconds_per_row'], 1)} "
            f"s per row, timed on {rec['shap_rows_timed']} rows) |") in text
    assert abs(rec["speedup"] - rec["shap_seconds_all_rows"] / rec["ours_seconds"]) < 1e-6 * rec["speedup"]
    assert f"A **{fixed(rec['speedup'])}× speed-up**" in text
    float64 = record("precision-cpu.json")["shapley_vs_shap"]["max_float64"]
    assert (f"agree with shap's to {sci(rec['max_abs_gap'])} in float32 (the torch engine: "
            f"{sci(rec['dense_max_abs_gap'])}) and to {sci(float64)} in float64 on the tiny models' layers") in text
    assert f"− g(0)) is {sci(rec['efficiency_error'])}." in text
    assert f"the first call in a process loads it in {fixed(rec['first_call_seconds'], 2)} s" in text


def test_attention_flows_costs_are_the_recorded_ones():
    """attention_flow's docstring gives benchmarks/results/attention-flow-cpu.json's seconds per text at each
    length, and networkx's at the shortest; the record's flows equal networkx's to float32 precision."""
    from attrbench.methods import attention_flow

    doc = re.sub(r"\s+", " ", attention_flow.__doc__)
    said = re.search(r"a text takes ([\d.]+) s at (\d+) tokens, ([\d.]+) s at (\d+) and ([\d.]+) s at (\d+), the "
                     r"model's forward pass included, where networkx's Edmonds-Karp takes ([\d.]+) s at (\d+) "
                     r"\(benchmarks/results/attention-flow-cpu.json", doc)
    assert said, "attention_flow's docstring no longer gives its costs"
    rows = record("attention-flow-cpu.json")["rows"]
    pairs = said.groups()[:6]  # seconds, tokens; three times
    assert [(f"{r['seconds']:.3f}", str(r["tokens"])) for r in rows] == list(zip(pairs[::2], pairs[1::2]))
    assert (f"{rows[0]['networkx_seconds']:.1f}", str(rows[0]["tokens"])) == (said[7], said[8])
    assert rows[0]["largest_difference"] < 1e-6


def test_the_shared_machine_figures_are_the_drift_records():
    """The shared-machine paragraph's seconds and threads are benchmarks/results/drift-*.json: beside one spinning
    process on 1 and 2 threads and with the threads a run takes, and alone on 2 threads."""
    one, two, default, alone = (record(f"{name}-cpu.json") for name in (
        "drift-spinner-1-thread", "drift-spinner-2-threads", "drift-spinner-default", "drift"))
    assert all(r["spinner"] and r["busy elsewhere"] >= 1 for r in (one, two, default))
    assert (one["threads"], two["threads"], alone["threads"], alone["busy elsewhere"]) == (1, 2, 2, 0)
    assert all((r["inputs"], r["tokens"]) == (132, 31) for r in (one, two, default, alone))
    assert one["fastest s"] < two["fastest s"]  # the point of free_threads
    text = page()
    assert (f"where a batch took {fixed(one['fastest s'], 2)} s on 1 thread and {fixed(two['fastest s'], 2)} s on 2 "
            f"(the fastest of {one['batches']};") in text
    assert f"against {fixed(alone['fastest s'], 2)} s on 2 threads alone" in text
    assert (f"beside the spinning process it took {default['threads']} thread, and {fixed(default['fastest s'], 2)} "
            "s") in text


def test_the_recomputed_rows_are_the_recorded_comparisons():
    """The recomputation paragraph's rows and largest differences are benchmarks/results/recompute-rows-*.json, and
    no row differed."""
    minilm, others = record("recompute-rows-minilm-cpu.json"), record("recompute-rows-smollm2-shortcut-cpu.json")
    assert (minilm["suites"], minilm["examples"], others["suites"], others["examples"]) == ([0, 1], 2, [2, 3], 1)
    for rec in (minilm, others):
        assert rec["differing"] == 0 and rec["stored again"] == rec["rows"]

    def largest(rec) -> str:
        return "0" if rec["largest difference"] == 0 else sci(rec["largest difference"])

    text = page()
    assert (f"No row differed: {minilm['rows']} rows of the two MiniLM suites (largest difference {largest(minilm)}) "
            f"and {others['rows']} of the SmolLM2 and shortcut suites (largest difference {largest(others)}") in text


def test_batched_and_one_at_a_time_on_real_weights_are_the_recorded_run():
    """The real-weights batching paragraph is benchmarks/results/batched-methods-minilm-sst2-cpu.json: batched
    within the method's padding (the run's divided by its rows per text) against one at a time, the whole budget
    and no bound; batching changes no score beyond float32 rounding."""
    rec = record("batched-methods-minilm-sst2-cpu.json")
    rows = {r["method"]: r for r in rec["rows"]}
    assert rec["pad tokens"] == 64 and all(r["largest relative difference"] < 1e-5 for r in rows.values())
    text = page()
    names = {"grad_x_input": "gradient × input took", "integrated_gradients": "integrated gradients",
             "smooth_grad": "SmoothGrad", "gradient_shap": "GradientShap", "shapley_sampling": "Shapley sampling"}
    for name, words in names.items():
        r = rows[name]
        assert f"{words} {fixed(r['batched s'], 2)} / {fixed(r['one at a time s'], 2)} s" in text, name
    padded = [rows[name] for name in ("integrated_gradients", "smooth_grad", "gradient_shap")]
    assert (f"integrated gradients took {fixed(padded[0]['whole padding budget s'], 2)} s, SmoothGrad "
            f"{fixed(padded[1]['whole padding budget s'], 2)} s and GradientShap "
            f"{fixed(padded[2]['whole padding budget s'], 2)} s") in text
    longer = [r["whole padding budget s"] / r["one at a time s"] - 1 for r in padded]
    assert f"{round(100 * min(longer))} to {round(100 * max(longer))} % longer than one at a time" in text
    assert f"padded to the longest text {', '.join(fixed(r['padded to the longest s'], 2) for r in padded[:2])} " \
           f"and {fixed(padded[2]['padded to the longest s'], 2)} s" in text
    assert all(r["batched s"] < r["whole padding budget s"] < r["padded to the longest s"] for r in padded)
    assert (rows["integrated_gradients"]["rows per text"], rows["smooth_grad"]["rows per text"]) == (50, 128)
    assert f"({rows['shapley_sampling']['texts']} sentences)" in text


def test_the_block_shapes_table_is_the_recorded_run():
    """Each family's row against its reference, and the bound the text states, are
    benchmarks/results/families-cpu.json."""
    text, rec = page(), record("families-cpu.json")
    names = {"gemma3_text": "Gemma 3", "gemma2": "Gemma 2", "olmo2": "OLMo 2", "qwen3": "Qwen3", "phi3": "Phi-3",
             "gpt_neox": "GPT-NeoX", "gptj": "GPT-J", "phi": "Phi-2", "mixtral": "Mixtral", "olmoe": "OLMoE",
             "qwen3_moe": "Qwen3-MoE", "modernbert": "ModernBERT", "deberta-v2": "DeBERTa-v2", "xlm-roberta": "XLM-R",
             "electra": "ELECTRA"}
    for row in rec["rows"]:
        reference = {"llama": "LLaMA", "bert": "BERT"}[row["reference"]]
        line = (f"| {names[row['family']]} | {row['shape']} | {reference} | {fixed(row['seconds'], 3)} | "
                f"{fixed(row['reference_seconds'], 3)} | {fixed(row['ratio'], 2)} |")
        assert line in text, line
        assert abs(row["ratio"] - row["seconds"] / row["reference_seconds"]) < 5e-3
    plain = [r["ratio"] for r in rec["rows"] if r["shape"] in ("sandwich", "pre-ln", "post-ln")
             and r["family"] != "modernbert"]
    experts = [r["ratio"] for r in rec["rows"] if r["shape"] == "experts"]
    assert f"families are within {fixed(max(plain), 2)}× of their reference" in text
    assert f"costs {fixed(min(experts), 2)}–{fixed(max(experts), 2)}× its dense reference" in text
    assert f"n = {rec['rows'][0]['n']}) side by side" in text and f"alternating the two {rec['repeats']} times" in text


NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def ranked_suites(folder: Path) -> list[str]:
    """The suites of a report folder with a ranked headline table (NAOPC's), as the placement benchmark names them."""
    statistics = json.loads((folder / "statistics.json").read_text())
    return sorted(title.rsplit(" · ", 1)[0] for title, table in statistics.items()
                  if title.endswith(" · naopc") and isinstance(table, dict) and "mean" in table)


def test_placing_a_method_on_the_full_comparison_is_the_recorded_cost():
    """docs/leaderboard-runs.md's and the plugin guide's costs of placing a method on reports/full are
    benchmarks/results/place-method-full-cpu.json: a 2-minute budget places it provisionally on every suite's
    headline, and the whole placement is set against its measured floor (the ratios recomputed here)."""
    rec = record("place-method-full-cpu.json")
    assert rec["published"] == "reports/full" and rec["threads"] == 2
    ranked = ranked_suites(ROOT / "reports" / "full")
    budgeted = next(m for m in rec["methods"] if m["method"] == "my_grad_x_input")
    whole = next(m for m in rec["whole"] if m["method"] == "my_grad_x_input")
    assert budgeted["budget"] == "2m"
    first = list(budgeted["headline"].values())
    assert sorted(budgeted["headline"]) == ranked and {h["verdict"] for h in first} == {"provisional"}
    assert sorted(whole["headline"]) == ranked and {h["verdict"] for h in whole["headline"].values()} == {"complete"}
    floor = sum(s["floor_seconds"] for s in whole["floor_by_suite"].values())
    assert abs(floor - whole["floor_seconds"]) < 0.2
    assert whole["wall_over_floor"] == round(whole["wall_seconds"] / floor, 2)
    assert whole["wall_over_floor_and_attribution"] == round(whole["wall_seconds"] /
                                                            (floor + whole["attribution_seconds"]), 2) <= 1.3
    ns = ", ".join(str(h["n"]) for h in first[:-1]) + f" and {first[-1]['n']}"
    minutes = fixed(whole["wall_seconds"] / 60, 1)
    text = page(LEADERBOARD_RUNS)
    assert (f"took {fixed(budgeted['wall_seconds'])} s for the whole command and placed it provisionally on the "
            f"headline of every suite (n = {ns} examples; its report {fixed(budgeted['report_seconds'], 1)} s); "
            "placed on everything (every suite, metric, check and "
            f"example: {whole['rows']:,} rows, {whole['model_rows']:,} model outputs) the command took {minutes} min, "
            f"{whole['wall_over_floor']} times its floor of {fixed(floor, 1, thousands=True)} s") in text
    assert (f"and {whole['wall_over_floor_and_attribution']} times floor plus its own "
            f"{fixed(whole['attribution_seconds'], 1)} s of attribution") in text
    forward = whole["forward_seconds"]
    assert (f"the forward passes themselves took {fixed(forward, 1, thousands=True)} s, "
            f"{fixed(forward / floor, 2)} times the floor, and its report {fixed(whole['report_seconds'], 1)} s") in text
    guide = page(ROOT / "docs" / "writing-a-plugin.md")
    assert (f"with `--budget 2m` the whole command took {fixed(budgeted['wall_seconds'])} s and placed the method "
            f"provisionally on every suite's headline (n = {ns}); on everything ({whole['rows']:,} rows) it took "
            f"{minutes} min, {whole['wall_over_floor_and_attribution']} times the floor of its model inputs plus its "
            "own attribution time") in guide
    # a sampled method (LIME's cost): the same command, its own attribution most of the time
    lime = next(m for m in rec["whole"] if m["method"] == "my_lime")
    lime_budgeted = next(m for m in rec["methods"] if m["method"] == "my_lime")
    lime_floor = sum(s["floor_seconds"] for s in lime["floor_by_suite"].values())
    assert {h["verdict"] for h in lime["headline"].values()} == {"complete"}
    assert lime["wall_over_floor_and_attribution"] == round(lime["wall_seconds"] /
                                                           (lime_floor + lime["attribution_seconds"]), 2) <= 1.3
    placed = [h["n"] for h in lime_budgeted["headline"].values() if h["verdict"] == "provisional"]
    assert sorted(lime_budgeted["headline"]) == ranked and len(placed) == len(ranked)  # each first shard alone
    assert lime_budgeted["budget"] == "2m"
    # LIME's whole placement was measured before Gemma 3's suite joined reports/full: the docs say on which suites
    lime_suites = sorted(lime["headline"])
    assert set(lime_suites) <= set(ranked)
    where = ""
    if lime_suites != ranked:
        left = [s for s in ranked if s not in lime_suites]
        where = (f"measured when reports/full had {NUMBER_WORDS[len(lime_suites)]} suites, before "
                 f"{' and '.join(s.split(' · ')[0] for s in left)}'s joined it")
    assert (f"`--budget 2m` took {fixed(lime_budgeted['wall_seconds'])} s and placed it provisionally on the "
            f"headline of every suite (n = {', '.join(map(str, placed[:-1]))} and {placed[-1]} examples)") in text
    assert (f"placed on everything{f' ({where})' if where else ''} the command took "
            f"{fixed(lime['wall_seconds'] / 60, 1)} min, "
            f"{lime['wall_over_floor_and_attribution']} times floor plus its own "
            f"{fixed(lime['attribution_seconds'], 1, thousands=True)} s of attribution (a floor of "
            f"{fixed(lime_floor, 1)} s; the forward passes {fixed(lime['forward_seconds'] / lime_floor, 2)} times it), "
            f"its report {fixed(lime['report_seconds'], 1)} s") in text
    assert (f"a method of LIME's cost reached every suite's headline within `--budget 2m` "
            f"({fixed(lime_budgeted['wall_seconds'])} s for the whole command) and took "
            f"{fixed(lime['wall_seconds'] / 60, 1)} min on everything, "
            f"{lime['wall_over_floor_and_attribution']} times its floor plus its own attribution time "
            f"({fixed(lime['attribution_seconds'] / 60)} min of it LIME's own{f'; {where}' if where else ''})") in guide
