"""README command 2 (the tests) as a new user runs it, timed and recorded: the figures the README quotes.

    python benchmarks/bench_readme_tests.py [--out benchmarks/results/readme-tests-cpu.json] [--commit HEAD]

A fresh clone of the commit in a temporary folder, a fresh virtual environment, empty pip and attrbench caches
(HOME, PIP_CACHE_DIR and ATTRBENCH_CACHE point into the folder), then the README's test command exactly as
``.ci/run`` takes it (the fenced block after ``<!-- test-command -->``), split at its ``python -m pytest`` into
installing and testing. The record names the processor (vendor, family, model, torch's CPU capability) and the
core count, so a reader knows which CPU the times are from; the README and getting-started.md quote it (tests/
test_docs.py reads the figures back).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_gelu import cpu_signature  # same folder: run as python benchmarks/bench_readme_tests.py

ROOT = Path(__file__).resolve().parents[1]


def test_command(readme: Path) -> str:
    """The README's test command, as .ci/run reads it."""
    text = readme.read_text(encoding="utf-8")
    block = text.split("<!-- test-command -->", 1)[1]
    command = re.search(r"```bash\n(.+?)\n```", block, re.DOTALL)[1].strip()
    return re.sub(r"\s*\\\n\s*", " ", command)  # lines continued with a backslash, joined


def head_commit(ref: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def fresh_clone(tmp: str, commit: str, shared: bool) -> tuple[Path, dict]:
    """A clone of ``commit`` in ``tmp`` (with ../shared beside it when ``shared``) and the environment of a new user
    there: HOME, the pip and attrbench caches in ``tmp``, no virtual environment active."""
    clone = Path(tmp) / "attrbench"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", commit], cwd=clone, check=True)
    if shared and (ROOT.parent / "shared").exists() and not (clone.parent / "shared").exists():
        os.symlink(ROOT.parent / "shared", clone.parent / "shared")
    env = {**os.environ, "HOME": str(Path(tmp) / "home"), "PIP_CACHE_DIR": str(Path(tmp) / "pip-cache"),
           "ATTRBENCH_CACHE": str(Path(tmp) / "attrbench-cache")}
    env.pop("VIRTUAL_ENV", None)
    return clone, env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "readme-tests-cpu.json"))
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args(argv)
    commit = head_commit(args.commit)
    with tempfile.TemporaryDirectory(prefix="attrbench-readme-") as tmp:
        clone, env = fresh_clone(tmp, commit, shared=True)
        command = test_command(clone / "README.md")
        install, _, tests = command.partition(" && python -m pytest")
        tests = "python -m pytest" + tests
        began = time.perf_counter()
        subprocess.run(["bash", "-euo", "pipefail", "-c", install], cwd=clone, env=env, check=True)
        installed = time.perf_counter()
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", f". .venv/bin/activate && {tests}"], cwd=clone,
                             env=env, capture_output=True, text=True)
        done = time.perf_counter()
    summary = [line for line in run.stdout.splitlines() if re.search(r"\d+ passed", line)]
    if run.returncode != 0 or not summary:
        sys.stdout.write(run.stdout[-5000:])
        raise SystemExit(f"the test command failed (exit {run.returncode}); nothing recorded")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|skipped|failed)", summary[-1])}
    install_s, tests_s = round(installed - began), round(done - installed)
    record = {"what": "README command 2 (the tests) as a new user runs it: a fresh clone, a fresh virtual "
                      "environment, empty pip and attrbench caches",
              "command": "python benchmarks/bench_readme_tests.py", "commit": commit, "cpu": cpu_signature(),
              "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
              "install_s": install_s, "tests_s": tests_s, "total_s": install_s + tests_s,
              "passed": counts.get("passed", 0), "skipped": counts.get("skipped", 0),
              "pytest_summary": summary[-1].strip("= ")}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
