"""Laying out and writing a figure, and the process that does it apart from a report.

A report hands its figures, pickled, to one process started for it from a fresh interpreter (``python`` running
this file, which imports matplotlib, numpy and PIL only, never the package or the caller's script). That process
forks a child for each figure, so every figure is drawn by a copy of the same untouched process: the same pickle
gives the same bytes whichever worker draws it, in whichever order, beside whatever the report's own process
holds. (Drawn in workers forked from the report's process, about one rendering in eight of a report with ninety
figures drew one of them a few pixels differently, although the drawing process got the same pickle.)

The protocol, over the process's stdin and stdout: frames of an 8-byte length and a pickle; in, ``(job, figure
pickle, matplotlib settings, path)``, or ``("workers", n)`` to draw at most ``n`` at a time from then on (a report
waiting for its figures lends its own core); out, ``(job, error)`` with ``error`` the pickled exception or None.
End of input: the process finishes the figures it has and ends.
"""
from __future__ import annotations

import gc
import io
import os
import pickle
import selectors
import struct
import sys
import traceback
from collections import deque
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

HEADER = struct.Struct("<Q")


def lay_out_and_write(fig, path) -> None:
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


def draw_pickled(figure: bytes, settings: dict, path: str) -> None:
    with matplotlib.rc_context(settings):  # matplotlib's settings as the caller has them
        lay_out_and_write(pickle.loads(figure), Path(path))


def frame(value) -> bytes:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _error(exc: BaseException) -> bytes:
    try:
        return pickle.dumps(exc)
    except Exception:  # an exception that does not pickle: its text
        return pickle.dumps(RuntimeError("".join(traceback.format_exception_only(type(exc), exc)).strip()))


def _draw_in_child(job: tuple) -> tuple[int, int]:
    """Fork a child that draws ``job``; the read end of the pipe its error (if any) comes back on."""
    _, figure, settings, path = job
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: draw, say what failed, and leave without running anything of the parent's
        status = 0
        gc.disable()  # a child draws one figure and ends: nothing to collect
        try:
            os.close(read)
            draw_pickled(figure, settings, path)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            status = 1
            try:
                _write_all(write, _error(exc))
            except OSError:
                pass
        os._exit(status)
    os.close(write)
    return read, pid


def _warm_up() -> None:
    """Draw and write a small figure of text, lines, markers and bars once, so that each child starts with the fonts
    loaded and matplotlib's and PIL's lazy imports done; then keep what is here out of the garbage collector's way
    (``gc.freeze``), so that a child neither collects nor copies it: a child then costs about 40 ms more than
    drawing the same figure in one long-lived process, rather than about 80 ms (91 figures of a report, alternated)."""
    figure = Figure(figsize=(2, 1.5))
    axes = figure.subplots()
    axes.errorbar([0, 1], [1, 2], yerr=[0.1, 0.2], fmt="o", capsize=2, label="a")
    axes.barh([0, 1], [1, 2])
    axes.set_title("title", fontsize=10)
    axes.set_xlabel("label")
    axes.legend()
    figure.suptitle("warm", fontweight="bold")
    lay_out_and_write(figure, io.BytesIO())
    gc.collect()
    gc.freeze()


def serve(workers: int) -> None:
    """Draw the jobs read on stdin, at most ``workers`` at a time (until a frame says otherwise), each in a child
    forked from this process."""
    _warm_up()
    out = os.dup(1)
    os.dup2(2, 1)  # anything a drawing prints goes to stderr, not into the answers
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    pending, running, buffer, ended = deque(), {}, bytearray(), False
    while not (ended and not pending and not running):
        while pending and len(running) < workers:
            job = pending.popleft()
            read, pid = _draw_in_child(job)
            running[read] = (job[0], pid, [])
            selector.register(read, selectors.EVENT_READ)
        for key, _ in selector.select():
            if key.fd == 0:
                data = os.read(0, 1 << 20)
                if not data:
                    ended = True
                    selector.unregister(0)
                buffer += data
                while len(buffer) >= HEADER.size and len(buffer) >= HEADER.size + HEADER.unpack_from(buffer)[0]:
                    size = HEADER.unpack_from(buffer)[0]
                    item = pickle.loads(bytes(buffer[HEADER.size:HEADER.size + size]))
                    del buffer[:HEADER.size + size]
                    if item[0] == "workers":
                        workers = item[1]
                    else:
                        pending.append(item)
                continue
            data = os.read(key.fd, 1 << 16)
            job, pid, chunks = running[key.fd]
            if data:
                chunks.append(data)
                continue
            selector.unregister(key.fd)
            os.close(key.fd)
            del running[key.fd]
            _, status = os.waitpid(pid, 0)
            error = b"".join(chunks) or None
            if error is None and status != 0:
                error = pickle.dumps(RuntimeError(f"the process drawing a figure ended with status {status}"))
            _write_all(out, frame((job, error)))


if __name__ == "__main__":
    serve(int(sys.argv[1]))
