"""Comparison reports of a run, built from its store: tables, figures and the documents that hold them.

``tables`` (ranked leaderboard tables), ``figures`` (the figure kinds evaluations ask for) and
``documents`` (``leaderboard.md``, ``report.html``). What each evaluation shows is declared by the
evaluation itself; nothing here names one.
"""
from .documents import findings, model_line, write_report
from .figures import FIGURES, make_figures
from .tables import leaderboard_tables, markdown_table

__all__ = ["write_report", "model_line", "findings", "leaderboard_tables", "markdown_table", "make_figures", "FIGURES"]
