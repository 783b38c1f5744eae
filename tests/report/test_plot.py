"""Writing figures: apart from the report's statistics, the same files."""
import os
import pickle
import pickletools
import signal

import matplotlib
import pytest

from attrbench.ops.reuse import reusing
from attrbench.report import figures
from attrbench.report.plot import _pickled, new_figure, writing_apart

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="figures are written apart in forked processes only")

# a known answer most methods find on every example (mean 1, interval [1, 1]) and a few short of it: limits that
# matplotlib settles only when the figure is drawn
MEANS = {f"method_{i}": 1.0 if i < 8 else 1.0 - 0.1 * (i - 7) for i in range(12)}
GROUP = [{"method": method, "metric": metric, "mean": mean, "ci": [mean, 1.0] if mean == 1.0 else
          [mean - 0.05, min(1.0, mean + 0.05)]} for metric in ("mrr", "pointing_game") for method, mean in MEANS.items()]


def test_a_figure_written_apart_is_the_same_file_and_its_cache_entry_is_complete(tmp_path):
    (_, here), = figures.bars(GROUP, tmp_path / "here", "bars", "title")  # no report: written at once
    with reusing(tmp_path / "cache") as reuse, writing_apart(workers=1) as writer:
        assert writer is not None
        (_, apart), = figures.bars(GROUP, tmp_path / "apart", "bars", "title")
        assert reuse.computed == 1 and writer.apart == 1
    assert apart.read_bytes() == here.read_bytes()
    apart.unlink()  # the next rendering finds the file gone: drawn again, from a complete entry's digest
    with reusing(tmp_path / "cache") as reuse, writing_apart(workers=1):
        figures.bars(GROUP, tmp_path / "apart", "bars", "title")
    assert reuse.computed == 1 and apart.read_bytes() == here.read_bytes()
    with reusing(tmp_path / "cache") as reuse, writing_apart(workers=1):  # the file as drawn: kept
        figures.bars(GROUP, tmp_path / "apart", "bars", "title")
    assert (reuse.computed, reuse.reused) == (0, 1)


def test_a_figure_that_fails_apart_fails_the_block_and_keeps_nothing(tmp_path):
    (tmp_path / "apart" / "bars.png").mkdir(parents=True)  # a folder where the file goes: the worker cannot write
    with pytest.raises(IsADirectoryError):
        with reusing(tmp_path / "cache"), writing_apart(workers=1):
            figures.bars(GROUP, tmp_path / "apart", "bars", "title")
    assert not (tmp_path / "cache").exists()


def test_matplotlib_settings_changed_after_the_workers_start_are_the_ones_drawn_with(tmp_path):
    """A worker is forked once; settings the report changes later (a library's style, margins) still apply."""
    with reusing(tmp_path / "cache"), writing_apart(workers=1):
        figures.bars(GROUP, tmp_path / "first", "bars", "title")  # the worker starts with these settings
        with matplotlib.rc_context({"axes.xmargin": 0.3, "font.size": 13}):
            (_, apart), = figures.bars(GROUP[::-1], tmp_path / "apart", "bars", "title")
    with matplotlib.rc_context({"axes.xmargin": 0.3, "font.size": 13}):
        (_, here), = figures.bars(GROUP[::-1], tmp_path / "here", "bars", "title")
    assert apart.read_bytes() == here.read_bytes()


def test_figures_drawn_apart_do_not_depend_on_which_child_draws_them_or_in_which_order(tmp_path):
    """Each figure is drawn by a fresh child of one drawing process: two at a time, in either order, each is the
    file drawn here."""
    cases = {"one": (GROUP, "title"), "two": (GROUP[::-1], "another title")}
    here = {name: figures.bars(group, tmp_path / "here", name, title)[0][1].read_bytes()
            for name, (group, title) in cases.items()}
    for names in (["one", "two"], ["two", "one"]):
        with writing_apart(workers=2) as writer:
            drawn = {name: figures.bars(cases[name][0], tmp_path / "apart", name, cases[name][1])[0][1]
                     for name in names}
            assert writer.apart == 2
        assert {name: path.read_bytes() for name, path in drawn.items()} == here


def test_figures_drawn_more_at_a_time_once_the_report_waits_are_the_same_files(tmp_path):
    """A report waiting for its figures lends its core: the drawing process, told so by a frame, draws two at a time
    from then on, and each figure is still the file drawn here."""
    from attrbench.report import plot

    groups = {f"f{i}": (GROUP[i:] + GROUP[:i], f"title {i}") for i in range(4)}
    here = {name: figures.bars(group, tmp_path / "here", name, title)[0][1].read_bytes()
            for name, (group, title) in groups.items()}
    writer = plot.FigureWriter(1, waiting=2)
    token = plot._WRITER.set(writer)
    try:
        drawn = {name: figures.bars(group, tmp_path / "apart", name, title)[0][1]
                 for name, (group, title) in groups.items()}
        writer.wait()
        assert writer._waiting is None  # the frame went once
    finally:
        plot._WRITER.reset(token)
        writer.close()
    assert {name: path.read_bytes() for name, path in drawn.items()} == here


def test_a_figure_is_pickled_as_matplotlib_alone():
    """The drawing process unpickles figures without importing attrbench (and torch)."""
    figure, axes = new_figure((2, 2))
    axes.plot([0, 1])
    names = [str(argument) for op, argument, _ in pickletools.genops(_pickled(figure))
             if op.name in ("GLOBAL", "SHORT_BINUNICODE", "BINUNICODE")]
    assert names and not any(name.startswith("attrbench") for name in names)
    assert type(pickle.loads(_pickled(figure))).__name__ == "Figure"


def test_a_drawing_process_that_dies_fails_the_block_rather_than_hanging(tmp_path):
    with pytest.raises(RuntimeError, match="figure-drawing process ended"):
        with writing_apart(workers=1) as writer:
            os.killpg(writer._process.pid, signal.SIGKILL)
            writer._process.wait()
            figures.bars(GROUP, tmp_path / "apart", "bars", "title")
    assert not (tmp_path / "apart" / "bars.png").exists()


def test_a_block_left_by_an_error_ends_the_drawing_process_at_once(tmp_path):
    with pytest.raises(KeyError):
        with writing_apart(workers=1) as writer:
            figures.bars(GROUP, tmp_path / "apart", "bars", "title")
            raise KeyError("the report failed")
    assert writer._process.poll() is not None
