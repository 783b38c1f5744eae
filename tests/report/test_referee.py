"""A referee who recomputes a leaderboard from its rows agrees with every verdict it prints: the headline's top
group, what the top method beats, each method against the random floor, every pair in statistics.json, and
the aliases; on a fresh run and on the published reports."""
import json
from pathlib import Path

import pytest

from attrbench.report import write_report
from attrbench.runtime.config import read_config
from attrbench.runtime.pipeline import collect, run_leaderboard
from tests.report import referee
from tests.report.test_documents import REPORT_CONFIG

ROOT = Path(__file__).resolve().parents[2]


def findings_of(leaderboard: str) -> list[str]:
    section = leaderboard.split("## Findings", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def check(run_dir: Path, headline_eval: str = "naopc", metric: str = "naopc_comprehensiveness") -> int:
    """Recompute every suite's headline verdicts from the rows and compare; returns how many suites were checked."""
    records, _ = collect(run_dir)
    statistics = json.loads((run_dir / "statistics.json").read_text())
    findings = findings_of((run_dir / "leaderboard.md").read_text())
    checked = 0
    for title, table in statistics.items():
        if not title.endswith(f" · {headline_eval}") or table.get("metric") != metric:
            continue
        model, dataset, _ = title.split(" · ")
        same = referee.aliases(records, model, dataset)
        assert set(same) == {m for names in table.get("aliases", {}).values() for m in names}
        leave_out = {referee.FLOOR, table.get("reference"), *same}
        values = referee.table_values(records, model, dataset, metric, leave_out)
        floor = referee.table_values(records, model, dataset, metric).get(referee.FLOOR)
        ruling = referee.verdicts(values, table["higher_is_better"], floor)
        for pair in table.get("pairs", {}).values():  # every pair of the table, not only the ones a sentence names
            assert pair["better"] == ruling["separated"][frozenset(pair["pair"])], pair["pair"]
        claims = referee.headline_sentences(findings, f"{model} · {dataset}")
        if table["verdict"] == "ranked":
            assert claims["top"] == ruling["top"] == set(table["top"])
            if "beats" in claims:
                [best] = claims["top"]
                assert claims["beats"] == ruling["beats"][best]
        if floor is not None and table["verdict"] == "ranked":
            assert claims["floor_better"] == sum(v == "better" for v in ruling["floor"].values())
            assert claims["floor_level"] == {m for m, v in ruling["floor"].items() if v == "not separated"}
            assert claims["floor_worse"] == {m for m, v in ruling["floor"].items() if v == "worse"}
        checked += 1
    return checked


def test_a_referee_agrees_with_a_fresh_runs_findings(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(REPORT_CONFIG)
    run_leaderboard(read_config(path), tmp_path / "run", progress=False)
    write_report(tmp_path / "run")
    assert check(tmp_path / "run") >= 1


@pytest.mark.parametrize("name", ["default", "full"])
def test_a_referee_agrees_with_the_published_reports(name):
    """The committed statistics and sentences equal what the committed rows give (no model is loaded)."""
    assert check(ROOT / "reports" / name) == 3
