"""Figures: side-by-side heatmaps of one layer's maps (as Kobayashi et al. 2024, Fig. 9-10)."""
from __future__ import annotations

import io
import os
import pickle
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from ..decompose import Decomposition
from ..errors import InputError
from . import drawer
from .drawer import lay_out_and_write

# no "Software" text chunk (matplotlib's version): the same figure gives the same bytes under any matplotlib
PNG_METADATA = {"Software": None}


class NotebookFigure(Figure):
    """A figure made without pyplot (no backend, no window, nothing left open in pyplot's list) that a
    notebook still shows: as a PNG of itself, whichever matplotlib backend the kernel runs."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=110, metadata=PNG_METADATA)
        return buffer.getvalue()


def new_figure(figsize: tuple[float, float], rows: int = 1, cols: int = 1, **subplots):
    """``(figure, axes)`` as ``pyplot.subplots`` gives them, outside pyplot."""
    figure = NotebookFigure(figsize=figsize)
    return figure, figure.subplots(rows, cols, **subplots)


def plot_maps(dec: Decomposition, path: str | Path, layer: int | None = None,
              scopes: Sequence[str] | None = None, title: str | None = None) -> Path:
    """Write a PNG with one heatmap per scope for ``layer`` (default: the last decomposed layer)."""
    layer = dec.layers[-1] if layer is None else layer % (max(dec.layers) + 1)
    if layer not in dec.layers:
        raise InputError(f"layer {layer} was not decomposed; decomposed layers: {dec.layers}")
    scopes = list(scopes or dec.maps)
    missing = [s for s in scopes if s not in dec.maps]
    if missing:
        raise InputError(f"scope(s) {', '.join(missing)} not decomposed; have {', '.join(dec.maps)}")
    index = dec.layers.index(layer)
    n = len(dec.tokens)
    # Two panels a row, sized so the figure shows at its own size in a page ~1,200 px wide (110 dpi):
    # labels keep the font size they were drawn with (tested in the report by headless Chromium).
    cols = min(2, len(scopes))
    rows = -(-len(scopes) // cols)
    size = 5.3
    label_pt = float(np.clip(0.8 * 72 * (size - 1.6) / n, 4.5, 9))  # one label per cell, never overlapping
    fig, axes = new_figure((size * cols, (size + 0.3) * rows + 0.5), rows, cols, squeeze=False)
    labels = [t.replace("Ġ", "_") for t in dec.tokens]
    for ax in axes.flat[len(scopes):]:
        ax.axis("off")
    for ax, scope in zip(axes.flat, scopes):
        data = dec.maps[scope][index]
        im = ax.imshow(data, cmap="Reds", vmin=0, vmax=float(np.max(data)) or 1.0)
        residual = dec.residuals.get(scope)
        ax.set_title(scope + ("" if residual is None else f"\nresidual {residual:.0e}"), fontsize=9)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=label_pt)
        ax.set_yticks(range(n), labels, fontsize=label_pt)
        ax.set_xlabel("input token j", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    for row in axes:
        row[0].set_ylabel("output token i", fontsize=8)
    return save_figure(fig, path, title or f"{dec.model} — layer {layer} ({dec.dtype}, value bias: {dec.value_bias})")


def save_figure(fig, path: str | Path, title: str) -> Path:
    """Title, lay out and write ``fig`` as a PNG at ``path``; within :func:`writing_apart` the layout and the
    writing happen in a worker process and ``path`` is returned at once."""
    fig.suptitle(title, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = _WRITER.get()
    if writer is not None:
        writer.submit(fig, path)
        return path
    lay_out_and_write(fig, path)
    return path


_NOT_SET = {"backend", "backend_fallback"}  # the drawing process's own: not a drawing's
_RUN_FILE = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


class _PlainFigures(pickle.Pickler):
    """Pickles a :class:`NotebookFigure` as the matplotlib ``Figure`` it draws as: the drawing process then
    unpickles it with matplotlib alone, without importing this package (and torch) for a method it never calls."""

    def reducer_override(self, obj):
        if type(obj) is NotebookFigure:  # object.__new__(Figure), then its state, as copyreg's reduction does
            _, _, *rest = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
            return (object.__new__, (Figure,), *rest)
        return NotImplemented


def _pickled(fig) -> bytes:
    buffer = io.BytesIO()
    _PlainFigures(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(fig)
    return buffer.getvalue()


class FigureWriter:
    """Lays out and writes pickled figures in a drawing process (:mod:`attrbench.report.drawer`: a fresh
    interpreter that forks a child per figure, so the same figure gives the same bytes), while the report goes on
    computing its tables; :meth:`wait` calls each file's callbacks once it is written."""

    def __init__(self, workers: int, waiting: Optional[int] = None):
        # ``-c``: the file runs as a script without importing this package or putting its folder on the path; a
        # fixed hash seed: the drawing process is the same process on every run
        self._process = subprocess.Popen(
            [sys.executable, "-c", _RUN_FILE, drawer.__file__, str(workers)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env={**os.environ, "PYTHONHASHSEED": "0"}, start_new_session=True)
        self.apart = 0  # figures handed to the drawing process
        self._waiting = waiting  # figures drawn at a time while the caller waits for them
        self._jobs: dict[int, Future] = {}
        self._ended: Optional[str] = None  # why the drawing process takes no more figures
        self._lock = threading.Lock()
        self._pending: list[Future] = []
        self._after: dict[Path, list[Callable[[Path], None]]] = {}
        self._answers = threading.Thread(target=self._read_answers, daemon=True)  # the pipe never fills
        self._answers.start()

    def _read_answers(self) -> None:
        stream = self._process.stdout
        while True:
            header = stream.read(drawer.HEADER.size)
            if len(header) < drawer.HEADER.size:
                break
            job, error = pickle.loads(stream.read(drawer.HEADER.unpack(header)[0]))
            future = self._jobs.pop(job)
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(pickle.loads(error))
        code = self._process.wait()
        with self._lock:
            self._ended = f"the figure-drawing process ended (exit code {code}) before writing every figure"
            left, self._jobs = list(self._jobs.values()), {}
        for future in left:
            future.set_exception(RuntimeError(self._ended))

    def submit(self, fig, path: Path) -> None:
        for ax in fig.axes:  # limits still to be autoscaled are settled here, as a drawing here would settle them
            ax.get_xlim(), ax.get_ylim()
        try:
            figure = _pickled(fig)
        except (pickle.PicklingError, TypeError, AttributeError):  # an artist that does not pickle: written here
            lay_out_and_write(fig, path)
            return
        settings = {key: value for key, value in matplotlib.rcParams.items() if key not in _NOT_SET}
        future: Future = Future()
        job = len(self._pending)
        with self._lock:
            if self._ended is not None:
                raise RuntimeError(self._ended)
            self._jobs[job] = future
        self._pending.append(future)
        self._send((job, figure, settings, str(path)))
        self._after.setdefault(Path(path), [])
        self.apart += 1

    def _send(self, item: tuple) -> None:
        try:
            self._process.stdin.write(drawer.frame(item))
            self._process.stdin.flush()
        except BrokenPipeError:  # ended since: its answers say why
            pass

    def after(self, path: Path, callback: Callable[[Path], None]) -> bool:
        """Call ``callback(path)`` once ``path`` is written; False (nothing kept) where it is not being written."""
        if Path(path) not in self._after:
            return False
        self._after[Path(path)].append(callback)
        return True

    def wait(self) -> None:
        """Every submitted figure written (the first failure raised), then their callbacks called. While waiting,
        the drawing process draws ``waiting`` figures at a time, on the core the caller leaves idle."""
        if self._waiting is not None and any(not future.done() for future in self._pending):
            self._send(("workers", self._waiting))
            self._waiting = None
        for future in self._pending:
            future.result()
        after, self._after = self._after, {}
        for path, callbacks in after.items():
            for callback in callbacks:
                callback(path)

    def close(self, finish: bool = True) -> None:
        """End the drawing process: once it has drawn what it has (``finish``) or at once."""
        if not finish:  # the figures being drawn too: nothing of an abandoned report is written later
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self._process.stdin.close()
        except BrokenPipeError:
            pass
        self._answers.join()


_WRITER: ContextVar[Optional[FigureWriter]] = ContextVar("figure_writer", default=None)


@contextmanager
def writing_apart(workers: Optional[int] = None) -> Iterator[Optional[FigureWriter]]:
    """Within this block :func:`save_figure` hands each figure to the drawing process, which draws ``workers`` at
    a time (default: one fewer than the CPUs this process may use, at least one, at most four; once this process
    waits for them, one more, at most four), and returns; every file is written when it ends, or at
    :meth:`FigureWriter.wait`; where processes cannot be forked, as they come. A report draws dozens of figures:
    their layout and rasterising, most of a figure's cost, then run beside its statistics."""
    waiting = None
    if workers is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers, waiting = min(4, max(1, cpus - 1)), min(4, max(1, cpus))
        waiting = waiting if waiting > workers else None
    if not hasattr(os, "fork") or not sys.executable:  # Windows, an embedded interpreter: written as they come
        yield None
        return
    writer = FigureWriter(workers, waiting)
    token = _WRITER.set(writer)
    finished = False
    try:
        yield writer
        writer.wait()
        finished = True
    finally:
        _WRITER.reset(token)
        writer.close(finish=finished)


def pending_writer() -> Optional[FigureWriter]:
    return _WRITER.get()


def plot_scores(tokens: Sequence[str], scores: dict[str, np.ndarray], path: str | Path,
                title: str | None = None) -> Path:
    """Token-saliency strips, one row per method (each row scaled to its own maximum |score|), saved to ``path``."""
    return save_figure(scores_figure(tokens, scores), path, title or "input attributions")


def scores_figure(tokens: Sequence[str], scores: dict[str, np.ndarray], title: str | None = None):
    """The figure of :func:`plot_scores`, not saved (a notebook shows it)."""
    labels = [t.replace("Ġ", "_") for t in tokens]
    names = list(scores)
    fig, axes = new_figure((max(4.0, 0.55 * len(tokens) + 1.5), 0.75 * len(names) + 0.9), len(names), 1,
                           squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        values = np.asarray(scores[name], dtype=float)
        scale = float(np.abs(values).max()) or 1.0
        ax.imshow(values[None, :] / scale, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        for j, v in enumerate(values):
            ax.text(j, 0, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(v) / scale > 0.6 else "black")
        ax.set_yticks([0], [name], fontsize=8)
        ax.set_xticks([])
    axes[-1, 0].set_xticks(range(len(tokens)), labels, rotation=60, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
