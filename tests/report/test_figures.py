"""Figures of a report: what a reader must be able to read in them."""
from types import SimpleNamespace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attrbench.report import figures
from attrbench.report.tables import Table


@pytest.mark.filterwarnings("error:Tight layout")  # a figure tight_layout cannot fit
@pytest.mark.parametrize("cd", [2.4, 10.0])  # within the ranks' span, and wider than it (few examples)
def test_the_critical_difference_bar_and_its_label_overlap_no_tick_label_and_stay_in_the_figure(cd, tmp_path,
                                                                                               monkeypatch):
    methods = ["alti", "decompx", "lime", "random", "saliency", "occlusion"]
    ranks = dict(zip(methods, [1.4, 2.1, 2.9, 4.8, 5.0, 5.3]))
    pairs = {f"{a} vs {b}": (0.01 if abs(ranks[a] - ranks[b]) > 2 else 0.5)
             for i, a in enumerate(methods) for b in methods[i + 1:]}
    statistics = {"verdict": "ranked", "k": len(methods), "order": methods, "alpha": 0.05, "metric": "aopc", "n": 30,
                  "mean_rank": {"verdict": "ranked", "nemenyi": pairs, "average_rank": ranks, "cd": cd}}
    table = Table("minilm-l6-sst2", "sst2", SimpleNamespace(name="erasure_aopc"), [], None, "", statistics)
    drawn = []
    save = figures.save_figure  # laid out and saved as a report does, and kept to be measured
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, title: drawn.append(fig) or save(fig, path, title))
    assert len(figures.critical_difference(table, tmp_path)) == 1
    canvas = FigureCanvasAgg(drawn[0])
    canvas.draw()
    renderer, fig = canvas.get_renderer(), drawn[0]
    ax = fig.axes[0]
    label = next(t for t in ax.texts if t.get_text().strip().startswith("CD ="))
    bar = next(line for line in ax.lines if abs(abs(line.get_xdata()[-1] - line.get_xdata()[0]) - cd) < 1e-9)
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    assert ticks
    for artist in (label, bar):
        box = artist.get_window_extent(renderer)
        assert not any(box.overlaps(tick) for tick in ticks), artist
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), artist
    assert label.get_text().strip() == f"CD = {cd:.2g}"


def test_the_cost_figures_labels_never_overlap_and_stay_inside(tmp_path, monkeypatch):
    """Methods crowded near the front: every label the figure draws fits without overlapping another."""
    import numpy as np

    rng = np.random.default_rng(0)
    methods = [f"method_{k}" for k in range(24)]
    group = [{"method": m, "metric": "naopc", "mean": float(0.5 + 0.01 * rng.normal()), "ci": None}
             for m in methods]
    cost = {m: [float(0.1 * (1 + 0.05 * k))] for k, m in enumerate(methods)}
    statistics = {"metric": "naopc", "higher_is_better": True, "top": methods[:6], "floor_summary": {"mean": 0.45}}
    table = Table("minilm-l6-sst2", "sst2", SimpleNamespace(name="naopc"), group, None, "", statistics)
    drawn = []
    save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, title: drawn.append(fig) or save(fig, path, title))
    assert len(figures.faithfulness_vs_cost(table, cost, tmp_path)) == 1
    canvas = FigureCanvasAgg(drawn[0])
    canvas.draw()
    renderer, ax = canvas.get_renderer(), drawn[0].axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) >= 3  # the front and the top group get labels where they fit
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)


@pytest.mark.parametrize("scale", [1e-4, 1.0, 3e4])
def test_a_metrics_bars_have_tick_labels_that_do_not_overlap(scale, tmp_path, monkeypatch):
    """Means of any size (an axiom residual of 1e-5, a score, a count): the x tick labels stay apart."""
    group = [{"method": "integrated_gradients", "metric": "passes", "mean": 1.0, "ci": [1.0, 1.0]},  # as published
             {"method": "integrated_gradients", "metric": "residual", "mean": 1.25 * scale, "ci": [0.7 * scale,
                                                                                             1.9 * scale]}]
    drawn = []
    save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, title: drawn.append(fig) or save(fig, path, title))
    figures.bars(group, tmp_path, "axioms", "a · b · axioms")
    canvas = FigureCanvasAgg(drawn[0])
    canvas.draw()
    for ax in drawn[0].axes:
        ticks = [t.get_window_extent(canvas.get_renderer()) for t in ax.get_xticklabels()
                 if t.get_visible() and t.get_text()]
        assert len(ticks) >= 2
        assert not any(a.overlaps(b) for i, a in enumerate(ticks) for b in ticks[i + 1:])


def test_a_method_still_computing_redraws_no_verdict_or_mean_rank_figure_and_a_changed_mean_does(tmp_path):
    """A provisional method changes a table's note, its statistics' ``provisional`` entry and its records, not
    what the verdict and mean-rank figures draw (the ranked methods): both are kept. A ranked method's mean is
    drawn, so changing it draws the verdict figure again (the mean-rank view does not show means: kept)."""
    from attrbench.ops.reuse import reusing

    methods = ["alti", "decompx", "lime"]
    ranks = dict(zip(methods, [1.2, 2.0, 2.8]))
    statistics = {"verdict": "ranked", "k": 3, "order": methods, "alpha": 0.05, "metric": "aopc", "n": 30,
                  "higher_is_better": True, "pair_n": [30, 30], "tier": {"alti": 1, "decompx": 2, "lime": 2},
                  "floor": {m: {"verdict": "better"} for m in methods}, "floor_summary": {"mean": 0.1},
                  "mean_rank": {"verdict": "ranked", "nemenyi": {"alti vs decompx": 0.5, "alti vs lime": 0.01,
                                                                 "decompx vs lime": 0.5}, "average_rank": ranks}}
    group = [{"method": m, "metric": "aopc", "mean": 0.5 - 0.1 * k, "ci": [0.4 - 0.1 * k, 0.6 - 0.1 * k]}
             for k, m in enumerate(methods)]
    evaluation = SimpleNamespace(name="erasure_aopc")

    def draw(table, folder):
        with reusing(folder) as reuse:
            paths = figures.verdicts(table, folder) + figures.critical_difference(table, folder)
        return reuse.computed, [p.read_bytes() for _, p in paths]

    published = Table("minilm-l6-sst2", "sst2", evaluation, group, None, "published", statistics)
    computed, drawn = draw(published, tmp_path)
    assert computed == 2 and len(drawn) == 2
    placed = Table("minilm-l6-sst2", "sst2", evaluation,
                   group + [{"method": "mine", "metric": "aopc", "mean": 0.9, "ci": [0.8, 1.0]}], None,
                   "published; still computing: mine (30 of 872 examples)",
                   {**statistics, "provisional": {"mine": {"n": 30, "comparisons": 4}}})
    assert draw(placed, tmp_path) == (0, drawn)
    moved = Table("minilm-l6-sst2", "sst2", evaluation, [{**group[0], "mean": 0.55}, *group[1:]], None, "published",
                  statistics)
    computed, again = draw(moved, tmp_path)
    assert computed == 1 and again[0] != drawn[0] and again[1] == drawn[1]
