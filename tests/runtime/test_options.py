"""Run options: per-device defaults, one-line refusals, and the run's batcher taking its batch limits from them."""
import pytest

from attrbench.errors import InputError
from attrbench.runtime.context import RunContext
from attrbench.runtime.options import DEFAULT_BATCH_TOKENS, DEFAULT_PAD_TOKENS, RunOptions


def test_batch_limits_default_by_device_and_reach_the_runs_batcher(tmp_path):
    options = RunOptions()
    assert (options.batch_tokens, options.pad_tokens) == (DEFAULT_BATCH_TOKENS["cpu"], DEFAULT_PAD_TOKENS["cpu"])
    batcher = RunContext(RunOptions(batch_tokens=512, pad_tokens=0), cache=tmp_path / "work.sqlite").batcher
    assert (batcher.batch_tokens, batcher.pad_tokens) == (512, 0)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_a_bad_padding_allowance_is_refused_in_one_line(bad):
    with pytest.raises(InputError, match="pad tokens must be a whole number of at least 0") as err:
        RunOptions(pad_tokens=bad)
    assert "\n" not in str(err.value)


def test_a_config_without_a_shard_size_gets_its_devices():
    from attrbench.runtime.config import read_config
    from attrbench.runtime.options import DEFAULT_SHARD_SIZE
    from attrbench.runtime.pipeline import config_pipeline

    full = read_config("full")
    assert full["shard_size"] is None  # the published comparison: as many examples per job as the device takes
    assert config_pipeline(full).shard_size == DEFAULT_SHARD_SIZE["cpu"] == 8
    assert DEFAULT_SHARD_SIZE["cuda"] >= 32  # a GPU batches a job's examples together
    assert config_pipeline(read_config("default")).shard_size == 2  # named: kept
