"""What writing a report costs when it reuses the last rendering's results (reuse.json.gz) and figures, and when it
does not: reports/full's report written three ways, each in a process of its own, side by side in one run.

    python benchmarks/bench_render.py [--published reports/full] [--place PLACED_RUN_FOLDER] [--json OUT.json]

- ``nothing kept``: a copy of the published folder without its reuse.json.gz and figures (every statistic computed
  and every figure drawn, as before reuse);
- ``published kept``: the published folder written into a new folder (what a placement's first report starts from);
- ``again``: that folder written once more, nothing changed.
``--place``: also the first report of a run folder that extended the published one (``attrbench run --extend``), as
the run writes it at its end (from the published folder's results and figures), and with nothing kept. Each line:
wall seconds of the whole process (imports and reading the rows included), the seconds reading the rows, results
reused and computed, and whether the documents equal the published ones byte for byte.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("leaderboard.md", "report.html", "statistics.json")

SCRIPT = """
import json, sys, time
began = time.perf_counter()
import attrbench.report.documents as documents
read = documents.collect
spent = {}
def collect(*args):
    start = time.perf_counter()
    out = read(*args)
    spent["rows"] = time.perf_counter() - start
    return out
documents.collect = collect
out = documents.write_report(sys.argv[1], sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - began, "reading_rows_seconds": spent["rows"],
                  "reused": out["reused"], "computed": out["computed"]}))
"""


def render(source: Path, out: Path) -> dict:
    line = subprocess.run([sys.executable, "-c", SCRIPT, str(source), str(out)], check=True, capture_output=True,
                          text=True, cwd=ROOT).stdout.strip().splitlines()[-1]
    entry = json.loads(line)
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in entry.items()}


def same_documents(a: Path, b: Path) -> bool:
    return all((a / name).read_bytes() == (b / name).read_bytes() for name in DOCUMENTS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", default="reports/full")
    parser.add_argument("--place", default=None)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "render-full-cpu.json"))
    args = parser.parse_args()
    published = (ROOT / args.published).resolve()
    from attrbench.ops.reuse import FILE
    import attrbench

    lines = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bare = tmp / "bare"
        shutil.copytree(published, bare, ignore=shutil.ignore_patterns(FILE, "figures"))
        lines["nothing kept"] = {**render(bare, tmp / "bare-out"),
                                 "same_documents": same_documents(published, tmp / "bare-out")}
        lines["published kept"] = {**render(published, tmp / "out"), "same_documents": same_documents(published,
                                                                                                     tmp / "out")}
        lines["again"] = {**render(published, tmp / "out"), "same_documents": same_documents(published, tmp / "out")}
        if args.place:  # the placed rows' first report, as at the end of `attrbench run --extend`: from the
            # published folder's results and figures, and with nothing kept
            place = Path(args.place).resolve()
            for name, kept in (("placement, published kept", True), ("placement, nothing kept", False)):
                folder = tmp / name.replace(", ", "-").replace(" ", "-")
                shutil.copytree(place, folder, ignore=shutil.ignore_patterns(FILE, "figures", *DOCUMENTS))
                if kept:
                    shutil.copyfile(published / FILE, folder / FILE)
                    shutil.copytree(published / "figures", folder / "figures")
                lines[name] = render(folder, folder)
    record = {"benchmark": "bench_render", "published": args.published, "attrbench": attrbench.__version__,
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(),
              "cpu": platform.processor() or platform.machine(), "cores": __import__("os").cpu_count(),
              "date": time.strftime("%Y-%m-%d"), "renderings": lines}
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    for name, entry in lines.items():
        print(f"{name:>18}: {entry['seconds']:6.1f} s ({entry['reading_rows_seconds']:.1f} s reading rows), "
              f"{entry['reused']} reused, {entry['computed']} computed"
              + ("" if "same_documents" not in entry else f", same documents: {entry['same_documents']}"))


if __name__ == "__main__":
    main()
