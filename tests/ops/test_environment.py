"""The threads a CPU run takes on a shared machine: torch's default less the cores other work keeps busy."""
import subprocess
import sys
import time

import pytest
import torch

from attrbench.ops.environment import DEFAULT_THREADS, busy_elsewhere, free_threads
from attrbench.runtime.options import RunOptions


def test_free_threads_leave_the_busy_cores_and_keep_one():
    assert free_threads(cores=2, busy=0) == 2
    assert free_threads(cores=2, busy=1) == 1
    assert free_threads(cores=2, busy=5) == 1
    assert free_threads(cores=8, busy=3) == 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_spinning_process_beside_a_run_is_seen_and_its_core_left_to_it():
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert busy_elsewhere() >= 1
        RunOptions().apply()  # no threads asked for: the run takes the cores left free
        assert torch.get_num_threads() <= max(1, DEFAULT_THREADS - 1)
        RunOptions(threads=DEFAULT_THREADS).apply()  # asked for: taken as given
        assert torch.get_num_threads() == DEFAULT_THREADS
    finally:
        spin.kill()
        spin.wait()
        torch.set_num_threads(DEFAULT_THREADS)
