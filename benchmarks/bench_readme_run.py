"""README command 1 (the default leaderboard) as a new user runs it, timed and recorded: the figures the README quotes.

    python benchmarks/bench_readme_run.py [--out benchmarks/results/readme-run-cpu.json] [--commit HEAD] [--publish]

A fresh clone of the commit in a temporary folder, a fresh virtual environment, empty pip and attrbench caches
(HOME, PIP_CACHE_DIR and ATTRBENCH_CACHE point into the folder), then the README's command (the fenced block after
``<!-- run-command -->``), split at its ``attrbench run`` into installing and running. The record names the processor
and the core count. ``--publish`` replaces reports/default with the folder the run wrote, so the published run is the
timed one (its leaderboard.md, report.html, figures, statistics.json and stores); the README, getting-started.md and
leaderboard-runs.md quote the record and that run (tests/test_docs.py reads both back).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_gelu import cpu_signature  # same folder: run as python benchmarks/bench_readme_run.py
from bench_readme_tests import fresh_clone, head_commit

ROOT = Path(__file__).resolve().parents[1]


def run_command(readme: Path) -> str:
    """The README's command 1, as written after its marker."""
    block = readme.read_text(encoding="utf-8").split("<!-- run-command -->", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", block, re.DOTALL)[1].strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "readme-run-cpu.json"))
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--publish", action="store_true", help="replace reports/default with the run it timed")
    args = parser.parse_args(argv)
    commit = head_commit(args.commit)
    with tempfile.TemporaryDirectory(prefix="attrbench-readme-") as tmp:
        clone, env = fresh_clone(tmp, commit, shared=False)  # a user of command 1 has no ../shared
        command = run_command(clone / "README.md")
        install, sep, run = command.rpartition(" && attrbench run")
        if not sep:
            raise SystemExit("README command 1 does not end in `attrbench run`; nothing recorded")
        began = time.perf_counter()
        subprocess.run(["bash", "-euo", "pipefail", "-c", install], cwd=clone, env=env, check=True)
        installed = time.perf_counter()
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", f". .venv/bin/activate && attrbench run{run}"],
                              cwd=clone, env=env, capture_output=True, text=True)
        finished = time.perf_counter()
        folder = clone / "attrbench-runs" / "default"
        if done.returncode != 0 or not (folder / "leaderboard.md").exists():
            sys.stdout.write(done.stdout[-5000:] + done.stderr[-5000:])
            raise SystemExit(f"README command 1 failed (exit {done.returncode}); nothing recorded")
        install_s, run_s = round(installed - began), round(finished - installed)
        record = {"what": "README command 1 (the default leaderboard) as a new user runs it: a fresh clone, a fresh "
                          "virtual environment, empty pip and attrbench caches",
                  "command": "python benchmarks/bench_readme_run.py" + (" --publish" if args.publish else ""),
                  "commit": commit, "cpu": cpu_signature(),
                  "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                  "install_s": install_s, "run_s": run_s, "total_s": install_s + run_s,
                  "published": "reports/default" if args.publish else None,
                  "printed": done.stdout.strip().splitlines()[-12:]}
        if args.publish:
            published = ROOT / "reports" / "default"
            shutil.rmtree(published, ignore_errors=True)
            shutil.copytree(folder, published, ignore=shutil.ignore_patterns(".lock", "*.lock", "*-journal"))
    Path(args.out).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(record, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
