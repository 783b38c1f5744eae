"""Comparison reports of a run, built from its store: tables, figures and the documents that hold them.

``tables`` (ranked leaderboard tables), ``figures`` (the figure kinds evaluations ask for) and
``documents`` (``leaderboard.md``, ``report.html``). What each evaluation shows is declared by the
evaluation itself; nothing here names one.
"""
import matplotlib

matplotlib.use("Agg")  # files only, never a window: before any submodule imports pyplot

from .documents import findings, model_line, write_report  # noqa: E402
from .figures import FIGURES, make_figures  # noqa: E402
from .tables import leaderboard_tables, markdown_table  # noqa: E402

__all__ = ["write_report", "model_line", "findings", "leaderboard_tables", "markdown_table", "make_figures", "FIGURES"]
