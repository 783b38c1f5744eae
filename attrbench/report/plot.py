"""Figures: side-by-side heatmaps of one layer's maps (as Kobayashi et al. 2024, Fig. 9-10)."""
from __future__ import annotations

import io
import multiprocessing
import os
import pickle
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from ..decompose import Decomposition
from ..errors import InputError

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
    _lay_out_and_write(fig, path)
    return path


def _lay_out_and_write(fig, path: Path) -> None:
    """Lay out ``fig`` and write it with 256 colours: a plot is flat colours and their anti-aliased edges, which a
    palette keeps to the eye at about a third of the bytes of matplotlib's RGBA PNG (the published reports' figures
    would otherwise be most of their size). The pixels come from the Agg canvas at the figure's 110 dpi, as
    ``savefig`` draws them, without encoding and decoding a PNG in between (the same file, a fifth less time)."""
    fig.tight_layout()
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(110)
    canvas.draw()
    drawn = Image.fromarray(np.asarray(canvas.buffer_rgba()), "RGBA")
    drawn.convert("RGB").quantize(256).save(path, format="PNG", optimize=True)


def _write_pickled(figure: bytes, settings: dict, path: str) -> str:
    with matplotlib.rc_context(settings):  # matplotlib's settings changed since the fork, as the caller has them
        _lay_out_and_write(pickle.loads(figure), Path(path))
    return path


_NOT_SET = {"backend", "backend_fallback"}  # the worker's own: not a drawing's


class FigureWriter:
    """Lays out and writes pickled figures in worker processes (a figure pickled gives the same PNG bytes), while
    the report goes on computing its tables; :meth:`wait` calls each file's callbacks once it is written."""

    def __init__(self, workers: int):
        # forked: a worker starts in milliseconds with matplotlib loaded, and never runs the caller's script again
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        self._pending: list[Future] = []
        self._settings = dict(matplotlib.rcParams)  # what a worker starts with; a figure sends what changed since
        self._after: dict[Path, list[Callable[[Path], None]]] = {}

    def submit(self, fig, path: Path) -> None:
        for ax in fig.axes:  # limits still to be autoscaled are settled here, as a drawing here would settle them
            ax.get_xlim(), ax.get_ylim()
        try:
            figure = pickle.dumps(fig)
        except (pickle.PicklingError, TypeError, AttributeError):  # an artist that does not pickle: written here
            _lay_out_and_write(fig, path)
            return
        settings = {key: value for key, value in matplotlib.rcParams.items()
                    if key not in _NOT_SET and self._settings.get(key) != value}
        self._pending.append(self._pool.submit(_write_pickled, figure, settings, str(path)))
        self._after.setdefault(Path(path), [])

    def after(self, path: Path, callback: Callable[[Path], None]) -> bool:
        """Call ``callback(path)`` once ``path`` is written; False (nothing kept) where it is not being written."""
        if Path(path) not in self._after:
            return False
        self._after[Path(path)].append(callback)
        return True

    def wait(self) -> None:
        """Every submitted figure written (the first failure raised), then their callbacks called."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()
        after, self._after = self._after, {}
        for path, callbacks in after.items():
            for callback in callbacks:
                callback(path)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


_WRITER: ContextVar[Optional[FigureWriter]] = ContextVar("figure_writer", default=None)


@contextmanager
def writing_apart(workers: Optional[int] = None) -> Iterator[Optional[FigureWriter]]:
    """Within this block :func:`save_figure` hands each figure to ``workers`` processes (default: one fewer than the
    CPUs this process may use, at least one, at most four) and returns; every file is written when it ends, or
    at :meth:`FigureWriter.wait`; where processes cannot be forked, as they come. A report draws dozens of figures:
    their layout and rasterising, most of a figure's cost, then run beside its statistics."""
    if workers is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = min(4, max(1, cpus - 1))
    if "fork" not in multiprocessing.get_all_start_methods():  # Windows: written as they come
        yield None
        return
    writer = FigureWriter(workers)
    token = _WRITER.set(writer)
    try:
        yield writer
        writer.wait()
    finally:
        _WRITER.reset(token)
        writer.close()


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
