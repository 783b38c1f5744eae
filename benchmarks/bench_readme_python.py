"""How long the README's Python block takes as written: the block is taken from README.md and run in a fresh
interpreter from the repository root (the models already merged in the cache, as after README command 1), timed
whole, wall seconds.

    python benchmarks/bench_readme_python.py [--repeats 1] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_block() -> str:
    """The README's Python block (the one that starts with ``import attrbench``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return next(block for block in re.findall(r"```python\n(.+?)```", text, re.DOTALL)
                if block.startswith("import attrbench"))


def cpu_model() -> str:
    """The CPU's model name where Linux gives it, else the platform's machine type."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def write_record(path, record: dict) -> None:
    """``record`` as indented JSON at ``path``, with the processor, its cores, Python and the commit measured."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    record = {**record, "processor": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
              "commit": commit.stdout.strip()}
    Path(path).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    code = readme_block()
    seconds = []
    for _ in range(args.repeats):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
        seconds.append(time.perf_counter() - began)
        print(f"README Python block: {seconds[-1]:.1f} s")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    out = {"what": "the README's Python block, run whole in a fresh interpreter, models cached",
           "commit": commit.stdout.strip(), "cores": len(os.sched_getaffinity(0)),
           "processor": cpu_model(), "seconds": seconds}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
