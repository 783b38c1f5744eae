"""Every sentence of a report's findings, read back and recomputed from the stored rows by the referee
(:mod:`tests.report.referee`: scipy, statsmodels and baycomp, nothing from attrbench.ops or attrbench.report). Each
kind of sentence the report prints has a rule here; a sentence that no rule reads fails, so a new kind of claim
cannot be published without a referee for it. What the referee takes from the registry is what a config or a
plugin declares, not what is computed: metric names, directions, ranges, ROPEs, the voting metrics."""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np

from attrbench.ops.stats import RESAMPLES
from attrbench.registry import EVALS
from attrbench.runtime.records import collect
from tests.report import referee

FLOOR = referee.FLOOR
NAME = r"[\w.-]+"  # a method's name
NUMBER = r"-?\d+(?:\.\d+)?"
# where a text names Wilcoxon's test, the verdicts the sign test decided (more than half their examples tied)
SIGN = r"(?:, the sign test on (?:the )?\d+ (?:pairs?|methods?) tied on more than half (?:its|their) examples)?"


def _signs(body: str) -> int:
    """How many verdicts a sentence says the sign test decided (0 where it names none)."""
    said = re.search(r", the sign test on (?:the )?(\d+) ", body)
    return int(said[1]) if said else 0


def _short(name: str) -> str:
    return Path(name).name if Path(name).is_absolute() else name


def _p(p: float) -> str:
    return "< 1e-300" if p < 1e-300 else f"{p:.2g}"


def _shared(a: dict[str, dict], b: dict[str, dict]) -> list:
    """The examples on which two metrics ({method: {example: value}}) both have a value for some method."""
    return sorted({i for v in a.values() for i in v} & {i for v in b.values() for i in v})


def _names(listing: str) -> list[str]:
    """The items of "a (x, y), b, c (z)": commas inside parentheses do not split."""
    return [item for item in re.split(r", (?![^()]*\))", listing) if item]


class Report:
    """A published or fresh run folder as the referee reads it: its complete rows and its findings."""

    def __init__(self, run_dir: Path):
        raw, meta = collect(run_dir)
        self.raw = raw
        self.records = referee.complete(raw)
        self.seed = (meta.get("config") or {}).get("seed", 0)
        self.resamples = (meta.get("config") or {}).get("bootstrap_resamples", RESAMPLES)  # the report's bootstraps
        self.statistics = json.loads((run_dir / "statistics.json").read_text())
        text = (run_dir / "leaderboard.md").read_text()
        section = text.split("## Findings", 1)[1].split("\n## ", 1)[0]
        self.lines = [line[2:] for line in section.splitlines() if line.startswith("- ")]
        self.suites = {f"{_short(r['model'])} · {_short(r['dataset'])}": (r["model"], r["dataset"]) for r in raw}
        self.metric_names = {}
        for evaluation in EVALS.all():
            for key in evaluation.higher_is_better:
                self.metric_names.setdefault((evaluation.metric_names or {}).get(key, key), (evaluation, key))
        self._aliases: dict = {}
        self._rulings: dict = {}

    # -- the rows of one metric of one suite -------------------------------------------------------------------
    def aliases(self, suite: str) -> dict[str, str]:
        if suite not in self._aliases:
            self._aliases[suite] = referee.aliases(self.records, *self.suites[suite])
        return self._aliases[suite]

    def metric(self, suite: str, name: str):
        """(evaluation, metric key, higher is better) of a metric as a sentence names it (" (derived)" dropped)."""
        evaluation, key = self.metric_names[name.removesuffix(" (derived)")]
        model, dataset = self.suites[suite]
        higher = next(r["higher_is_better"] for r in self.records if (r["model"], r["dataset"], r["eval"],
                                                                       r["metric"]) == (model, dataset,
                                                                                        evaluation.name, key))
        return evaluation, key, higher

    def values(self, suite: str, evaluation, key: str, leave_out=()) -> tuple[dict, dict | None]:
        """Per method {example: value} of a table's metric, the reference, the floor and aliases left out; and
        the floor's."""
        reference = self.statistics.get(f"{suite} · {evaluation.name}", {}).get("reference")
        rows = referee.table_values(self.records, *self.suites[suite], key)
        skip = {FLOOR, reference, *self.aliases(suite), *leave_out}
        return {m: v for m, v in rows.items() if m not in skip}, rows.get(FLOOR)

    def ruling(self, suite: str, name: str) -> dict:
        """The referee's verdicts on a metric (pairs, top group, the floor), once per suite and metric."""
        if (suite, name) not in self._rulings:
            evaluation, key, higher = self.metric(suite, name)
            values, floor = self.values(suite, evaluation, key)
            self._rulings[(suite, name)] = {**referee.verdicts(values, higher, floor), "values": values,
                                            "floor_values": floor, "higher": higher, "evaluation": evaluation,
                                            "key": key}
        return self._rulings[(suite, name)]

    def votes(self, suite: str) -> list[str]:
        """The suite's voting metrics (declared by the evaluations), as sentences name them."""
        return [self.name_of(e["metric"]) for e in self.statistics.get(f"{suite} · robustness", []) if e["vote"]]

    def name_of(self, key: str) -> str:
        return next(name for name, (_, k) in self.metric_names.items() if k == key)

    # -- the sentences -------------------------------------------------------------------------------------------
    def read(self) -> Counter:
        """Every finding checked by the one rule that reads it; returns how many of each kind."""
        kinds: Counter = Counter()
        rules = [getattr(self, name) for name in dir(self) if name.startswith("rule_")]
        for line in self.lines:
            suite = next((s for s in sorted(self.suites, key=len, reverse=True) if line.startswith(s + ":")
                          or line.startswith(s + " against ")), None)
            assert suite is not None, f"a finding about no suite of the rows: {line}"
            body = line[len(suite):]
            read = [rule.__name__ for rule in rules if rule(suite, body)]
            assert len(read) == 1, f"no referee reads this finding (or more than one: {read}): {line}"
            kinds[read[0][5:]] += 1
        return kinds

    def rule_waiting(self, suite: str, body: str) -> bool:
        found = re.fullmatch(r": (.+?) not computed yet by (.+?); there the verdicts are among the methods that are\.",
                             body)
        if not found:
            return False
        model, dataset = self.suites[suite]
        for eval_name in found[2].split(", "):
            held = self.statistics["still computing"][f"{suite} · {eval_name}"]
            waiting = sorted(m for m, e in held.items() if not e["examples"] and m != FLOOR)
            assert found[1] == (", ".join(waiting) if len(waiting) <= 3 else f"{len(waiting)} planned methods")
            assert not any((r["model"], r["dataset"], r["eval"]) == (model, dataset, eval_name) and r["method"]
                           in waiting for r in self.raw), f"{suite}: {eval_name} has rows of a method said waiting"
        return True

    def _n(self, ruling: dict) -> str:
        low, high = min(ruling["pair_n"]), max(ruling["pair_n"])
        return f"{high:,}" if low == high else f"{low:,}–{high:,} per pair"

    def rule_known_answer(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": by the known answer \((.+?), n = (.+?); Wilcoxon signed-rank{SIGN}, Holm over "
                             r"(\d+) pairs\) the top group is (.+)\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        k = len(ruling["values"])
        assert ruling["evaluation"].family == "ground truth"
        assert (found[2], int(found[3])) == (self._n(ruling), k * (k - 1) // 2)
        assert _signs(body) == ruling["sign_pairs"], suite
        assert set(found[4].split(", ")) == ruling["top"]
        return True

    def rule_provisional(self, suite: str, body: str) -> bool:
        """A method short of the headline's examples, placed against the published methods and the floor on their
        common examples, Holm over its own comparisons, recomputed from its rows (which no complete table holds)."""
        found = re.fullmatch(r": provisional, by (.+?) \(n = ([\d,]+) of ([\d,]+)\): (\w+) beats (\d+), is beaten by "
                             r"(\d+) and is not separated from (\d+) of the (\d+) published methods(?:, and is (better "
                             r"than|worse than|not separated from) the random floor \(n = ([\d,]+)\))? \(a family of "
                             r"its own on the common examples, Holm over its (\d+) comparisons\); it may change as n "
                             r"grows\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        method, published, floor = found[4], ruling["values"], ruling["floor_values"]
        mine = referee.table_values(self.raw, *self.suites[suite], ruling["key"]).get(method)
        assert mine is not None and method not in published, f"{suite}: {method} is no method short of the table"
        assert len(mine) == int(found[2].replace(",", "")), (suite, method)
        assert len(mine) < max(len(v) for v in published.values()) <= int(found[3].replace(",", ""))
        against = [referee.test_pair(mine, published[m], ruling["higher"]) for m in published]
        if floor is not None:
            against.append(referee.test_pair(mine, floor, ruling["higher"]))
        adjusted = referee.holm_adjusted([p for p, *_ in against], 0.05)
        said = ["better" if p < 0.05 and d > 0 else "worse" if p < 0.05 and d < 0 else "not separated"
                for (_, d, *_), p in zip(against, adjusted)]
        vs = said[:len(published)]
        assert [int(x) for x in found.groups()[4:8]] == [vs.count("better"), vs.count("worse"),
                                                          vs.count("not separated"), len(published)], (suite, method)
        assert int(found[11]) == len(against)
        if floor is None:
            assert found[9] is None
        else:
            assert found[9].removesuffix(" than").removesuffix(" from") == said[-1], (suite, method)
            assert int(found[10].replace(",", "")) == against[-1][2]
        entry = self.statistics[f"{suite} · {ruling['evaluation'].name}"]["provisional"][method]
        assert [entry["vs"][m]["verdict"] for m in published] == vs, (suite, method)
        return True

    def rule_floor(self, suite: str, body: str) -> bool:
        found = re.fullmatch(
            r": against the random floor \(the expected (.+?) of a random attribution on each example, n = (\d+); "
            rf"Wilcoxon signed-rank{SIGN}, Holm over (\d+) methods\), (\d+) of (\d+) methods (?:is|are) better"
            r"(?: \(([\w., -]+)\))?(?:; not separated from it: (.+?))?(?:; worse than it: (.+?))?\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        assert _signs(body) == ruling["floor_sign"], suite
        verdict = ruling["floor"]
        k = len(ruling["values"])
        assert int(found[2]) == max(ruling["floor_n"].values()) and int(found[3]) == int(found[5]) == k
        better = {m for m, v in verdict.items() if v == "better"}
        assert int(found[4]) == len(better) and (found[6] is None or set(found[6].split(", ")) == better)
        level = {re.sub(r" \(.*", "", item): item for item in _names(found[7] or "")}
        worse = {re.sub(r" \(.*", "", item): item for item in _names(found[8] or "")}
        assert set(level) == {m for m, v in verdict.items() if v == "not separated"}
        assert set(worse) == {m for m, v in verdict.items() if v == "worse"}
        not_better = self._not_better_counts(suite, [*level, *worse])
        for method, item in {**level, **worse}.items():
            counted = re.search(r"not better under (\d+) of (\d+) metrics", item)
            if counted:  # the headline's floor sentence: under how many of the suite's voting metrics it holds
                assert (int(counted[1]), int(counted[2])) == not_better[method], (suite, method)
        for method, item in worse.items():
            said = re.match(rf"{NAME} \((\d+)% wins, p = ([^,)]+)", item)
            assert int(said[1]) == round(100 * ruling["floor_win_rate"][method]), (suite, method)
            assert said[2] == _p(ruling["floor_p_holm"][method]), (suite, method)
        return True

    def _not_better_counts(self, suite: str, methods: list[str]) -> dict[str, tuple[int, int]]:
        """Per method, of the suite's voting metrics with the examples to separate a method from the floor at all,
        under how many it is not better than the floor, and how many there are."""
        counted = []
        for name in self.votes(suite):
            ruling = self.ruling(suite, name)
            if ruling["floor_values"] is None:
                continue
            if max(ruling["floor_n"].values(), default=0) >= referee.fewest_examples(len(ruling["values"])):
                counted.append(ruling["floor"])
        return {m: (sum(1 for floor in counted if floor.get(m) in ("not separated", "worse")), len(counted))
                for m in methods}

    def rule_floor_too_few(self, suite: str, body: str) -> bool:
        found = re.fullmatch(r": (\d+) examples are too few to separate any of (\d+) methods from the random floor "
                             r"by (.+?) \((\d+) methods need n ≥ (\d+)\)\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[3])
        k = len(ruling["values"])
        assert int(found[1]) == max(ruling["floor_n"].values()) and int(found[2]) == int(found[4]) == k
        assert int(found[5]) == referee.fewest_examples(k) > int(found[1])
        return True

    def rule_pairs_too_few(self, suite: str, body: str) -> bool:
        found = re.fullmatch(r": at most (\d+) examples per pair are too few to separate any of (\d+) methods by "
                             r"(.+?) \((\d+) methods need n ≥ (\d+)\)\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[3])
        k = len(ruling["values"])
        assert int(found[1]) == max(ruling["pair_n"], default=0) and int(found[2]) == int(found[4]) == k
        assert int(found[5]) == referee.fewest_examples(k * (k - 1) // 2) > int(found[1])
        return True

    def rule_no_difference(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": no pair of methods is separated by (.+?) \(n = (.+?); Wilcoxon signed-rank{SIGN}, "
                             r"Holm\)\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        assert _signs(body) == ruling["sign_pairs"], suite
        assert not any(ruling["separated"].values()) and found[2] == self._n(ruling)
        return True

    def rule_aliases(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": (.+) and ({NAME}) give the same scores \(to ([\d.e-]+) relative, float32's "
                             rf"precision\) on every example and metric of this suite: one behaviour, one row "
                             rf"\(({NAME})\)\.", body)
        if not found:
            return False
        assert found[2] == found[4]
        kept = {m for m, k in referee.aliases(self.records, *self.suites[suite], float(found[3])).items()
                if k == found[4]}
        assert set(found[1].split(", ")) == kept, (suite, found[3])
        return True

    def rule_top_group(self, suite: str, body: str) -> bool:
        found = re.fullmatch(
            rf": by (.+?) \(n = (.+?)\), (?:({NAME}) alone is in the top group: no method beats it, and it beats "
            rf"(?:each of the other (\d+)|(\d+) of the other (\d+))|the top group, which no method beats pair by "
            rf"pair, is (.+?)) \(Wilcoxon signed-rank on each pair's common examples{SIGN}, Holm over (\d+) pairs\)"
            rf"(?:; ({NAME}) has the best mean in (\d+)% of 1,000 bootstrap resamples)?\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        assert _signs(body) == ruling["sign_pairs"], suite
        k = len(ruling["values"])
        assert found[2] == self._n(ruling) and int(found[8]) == k * (k - 1) // 2
        if found[3]:
            assert ruling["top"] == {found[3]}
            assert ruling["beats"][found[3]] == int(found[4] or found[5]) and int(found[4] or found[6]) == k - 1
        else:
            assert ruling["top"] == set(found[7].split(", "))
        if found[9]:
            means = referee.means(ruling["values"], ruling["higher"])
            assert found[9] == max(means, key=means.get)
            assert abs(int(found[10]) / 100 - self._best_share(ruling, found[9])) <= 0.04, (suite, found[10])
        return True

    def _best_share(self, ruling: dict, method: str, resamples: int = 1000) -> float:
        """How often ``method`` has the best mean over bootstrap resamples of the examples every method has."""
        names = list(ruling["values"])
        ids = [i for i in ruling["values"][names[0]] if all(i in ruling["values"][m] for m in names)]
        matrix = np.array([[ruling["values"][m][i] for m in names] for i in ids]) * (1 if ruling["higher"] else -1)
        rng = np.random.default_rng(2024)
        wins = 0.0
        for _ in range(resamples):
            means = matrix[rng.integers(0, len(ids), len(ids))].mean(0)
            best = np.flatnonzero(means == means.max())
            wins += (names.index(method) in best) / len(best)
        return wins / resamples

    def rule_robustness(self, suite: str, body: str) -> bool:
        claimed = referee.robustness_sentence([suite + body], suite)
        if claimed is None:
            return False
        headline = re.match(r": the top group by (.+?) shares", body)[1]
        top = self.ruling(suite, headline)["top"]
        for name in claimed["agree"]:
            assert self.ruling(suite, name)["top"] & top, name
        for name, said in claimed["others"].items():
            other = self.ruling(suite, name)
            if said:
                assert not other["top"] & top and said == other["top"], name
            else:  # "no method is separated from another"
                assert not any(other["separated"].values()), name
        assert claimed["counts"] == (len(claimed["agree"]), len(claimed["agree"]) + len(claimed["others"]))
        assert claimed["agree"] | set(claimed["others"]) | claimed["short"] == set(self.votes(suite))
        return True

    def rule_adjacent(self, suite: str, body: str) -> bool:
        found = re.fullmatch(
            rf": ({NAME}) against ({NAME}) \(first and second by mean\) by (.+?): mean difference ({NUMBER})"
            rf"(?: \[({NUMBER}), ({NUMBER})\])?, (separated|not separated) pair by pair "
            rf"\((?:({NAME}) better, )?Holm p = (.+?)\)"
            rf"(?:; the interval of the mean difference \(95 %, not corrected for the (\d+) pairs?\) (holds 0: the "
            rf"signed ranks of the differences separate them, their mean does not|excludes 0, the Holm-corrected test "
            rf"does not))?; "
            rf"Bayesian signed-rank \(ROPE ±({NUMBER}), ([\d,]+) posterior draws\): P\(\1 better\) = ({NUMBER}), "
            rf"P\(equivalent\) = ({NUMBER}), P\(\2 better\) = ({NUMBER}), each the posterior probability that this "
            rf"outcome is the most probable of the three(; separated, and yet equivalence within ±({NUMBER}) is the "
            rf"most probable outcome \(P\(equivalent\) ≥ 0\.95\): ({NAME}) leads consistently, by a margin the "
            rf"posterior most often puts within the ROPE)?\.", body)
        if not found:
            return False
        import baycomp
        from scipy import stats

        a, b = found[1], found[2]
        ruling = self.ruling(suite, found[3])
        means = referee.means(ruling["values"], ruling["higher"])
        assert [a, b] == sorted(means, key=means.get, reverse=True)[:2], (suite, a, b)
        x, y = ruling["values"][a], ruling["values"][b]
        d = np.array([x[i] - y[i] for i in x if i in y]) * (1 if ruling["higher"] else -1)
        assert found[4] == f"{d.mean():.4f}"
        low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d)) if d.std() > 0 \
            else (d[0], d[0])
        bounds = ruling["evaluation"].bounds.get(ruling["key"])
        if bounds and None not in bounds:  # the metric's range: no difference beyond ±(high - low)
            low, high = max(low, bounds[0] - bounds[1]), min(high, bounds[1] - bounds[0])
        if found[5] is None:
            assert len(d) < 2
        else:
            assert (found[5], found[6]) == (f"{low:.4f}", f"{high:.4f}"), suite
        pair = frozenset((a, b))
        separated = found[7] == "separated"
        assert found[8] == ruling["separated"][pair] and separated == (found[8] is not None)
        assert found[9] == _p(ruling["p_holm"][pair])
        k = len(ruling["values"])
        crossed = low <= 0 <= high if found[5] is not None else None
        # the caveat where the uncorrected interval of the mean and the Holm-corrected signed-rank verdict differ
        assert (found[11] is not None) == (crossed is not None and separated == crossed), body
        if found[11]:
            assert int(found[10]) == k * (k - 1) // 2 and found[11].startswith("holds 0") == separated
        rope = float(found[12])
        assert rope == ruling["evaluation"].rope.get(ruling["key"], 0.01)
        said = np.array([float(found[14]), float(found[15]), float(found[16])])
        if len(d) <= 300:  # baycomp itself, with the report's draws: the same three numbers
            got = baycomp.SignedRankTest.probs(d, np.zeros(len(d)), rope=rope, nsamples=int(found[13].replace(",", "")),
                                               random_state=self.seed)
            assert [f"{p:.3f}" for p in got] == [found[14], found[15], found[16]], suite
            said = np.array(got)
        else:  # baycomp is slow beyond a few hundred examples: other draws, fewer, agree within their noise
            got = baycomp.SignedRankTest.probs(d, np.zeros(len(d)), rope=rope, nsamples=500, random_state=self.seed + 1)
            assert np.abs(np.array(got) - said).max() <= 0.1, (suite, got, said)
        assert (found[17] is not None) == (separated and said[1] >= 0.95), body
        assert found[17] is None or (float(found[18]), found[19]) == (rope, found[8])
        return True

    def _independent_tables(self, suite: str) -> list[tuple[str, object, str]]:
        """The suite's ranked faithfulness tables that are not derived: (metric name, evaluation, its metric)."""
        out = []
        for title, table in self.statistics.items():
            if not title.startswith(suite + " · ") or not isinstance(table, dict) or "verdict" not in table:
                continue
            eval_name = title[len(suite) + 3:]
            if eval_name in EVALS.names():
                evaluation = EVALS.get(eval_name)
                if evaluation.family == "faithfulness" and not evaluation.derived:
                    out.append((self.name_of(table["metric"]), evaluation, table["metric"]))
        return out

    def _oriented(self, suite: str, evaluation, key: str, leave_out=()) -> dict:
        values, _ = self.values(suite, evaluation, key, leave_out)
        sign = 1 if evaluation.higher_is_better.get(key, True) else -1
        return {m: {i: sign * v for i, v in vs.items()} for m, vs in values.items()}

    def rule_metrics_disagree(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": the metrics disagree most between (.+?) and (.+?) \(Kendall tau of the method orders "
                             rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]\)\.", body)
        if not found:
            return False
        tables = {name: self._oriented(suite, evaluation, key, ("random",))
                  for name, evaluation, key in self._independent_tables(suite)}
        taus = {}
        for i, a in enumerate(tables):
            for b in list(tables)[i + 1:]:
                ids = _shared(tables[a], tables[b])
                taus[(a, b)] = (referee.kendall_of_means(tables[a], tables[b], ids, ids), ids)
        pair = (found[1], found[2])
        assert pair in taus, (suite, pair)
        tau, ids = taus[pair]
        assert found[3] == f"{tau:.2f}" and f"{min(t for t, _ in taus.values()):.2f}" == found[3], (suite, taus)
        self._interval_agrees(referee.bootstrap_tau(tables[pair[0]], tables[pair[1]], ids), found[4], found[5])
        return True

    @staticmethod
    def _interval_agrees(mine: tuple[float, float], low: str, high: str, tolerance: float = 0.06) -> None:
        """A bootstrap interval against the referee's own (other draws): the same within their noise."""
        assert abs(mine[0] - float(low)) <= tolerance and abs(mine[1] - float(high)) <= tolerance, (mine, low, high)

    def rule_cheapest(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": the cheapest method of the top group by (.+?)(, better than the random floor)?, "
                             rf"({NAME}), takes ({NUMBER}) s per example(?:, (\d+) forward passes' time)?\.", body)
        if not found:
            return False
        ruling = self.ruling(suite, found[1])
        candidates = ruling["top"]
        if found[2]:
            candidates = {m for m in candidates if ruling["floor"][m] == "better"}
        model, dataset = self.suites[suite]
        cost = {role: {r["method"]: [v for v in r["values"] if v is not None] for r in self.records
                       if (r["model"], r["dataset"]) == (model, dataset) and r["eval"] in EVALS.names()
                       and r["metric"] == EVALS.get(r["eval"]).cost_metrics.get(role)}
                for role in ("seconds", "forward_passes")}
        priced = {m: float(np.median(cost["seconds"][m])) for m in candidates if cost["seconds"].get(m)}
        cheapest = min(priced, key=priced.get)
        assert (found[3], found[4]) == (cheapest, f"{priced[cheapest]:.3f}"), suite
        if found[5]:
            assert found[5] == f"{np.median(cost['forward_passes'][cheapest]):.0f}"
        return True

    def rule_sanity(self, suite: str, body: str) -> bool:
        found = re.fullmatch(rf": the sanity check `(\w+)` \((.+?): median \|(.+?)\|, flagged at ≥ ({NUMBER}); n = "
                             rf"(.+?)\) flags (?:none of the (\d+) methods checked|(.+?) as insensitive to the model; "
                             rf"(\d+) of (\d+) pass(?:; flagged and in the top group by (.+?): (.+?))?)"
                             rf"(?:; no value for (.+?) examples \(undefined where (.+?)\))?\.", body)
        if not found:
            return False
        evaluation = EVALS.get(found[1])
        assert float(found[4]) == evaluation.threshold and found[2] == evaluation.reference
        model, dataset = self.suites[suite]
        checked = {r["method"]: [abs(v) for v in r["values"] if v is not None] for r in self.records
                   if (r["model"], r["dataset"], r["eval"], r["metric"])
                   == (model, dataset, evaluation.name, evaluation.primary_metric)
                   and r["method"] not in self.aliases(suite)}  # one behaviour, counted once
        most = max(len(v) for v in checked.values())
        short = sorted(((m, most - len(v)) for m, v in checked.items() if len(v) < most), key=lambda x: (-x[1], x[0]))
        said = [] if found[12] is None else [re.fullmatch(rf"({NAME}) on (\d+) of (\d+)", part).groups()
                                              for part in found[12].split(", ")]
        assert [(m, int(k)) for m, k, _ in said] == short and {int(of) for *_, of in said} <= {most}, (suite, short)
        assert (found[13] is None) == (not short)
        assert found[13] in (None, evaluation.undefined_when[evaluation.primary_metric])
        checked = {m: v for m, v in checked.items() if v}
        flagged = sorted(m for m, v in checked.items() if np.median(v) >= evaluation.threshold)
        counts = sorted({len(v) for v in checked.values()})
        assert found[5] == (str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}")
        if found[6]:
            assert not flagged and int(found[6]) == len(checked)
            return True
        more = re.fullmatch(r"(.+) and (\d+) more", found[7])
        assert (more[1].split(", ") + flagged[8:] if more else found[7].split(", ")) == flagged
        assert (int(found[8]), int(found[9])) == (len(checked) - len(flagged), len(checked))
        if found[10]:
            assert set(found[11].split(", ")) == set(flagged) & self.ruling(suite, found[10])["top"]
        return True

    def rule_own_axiom(self, suite: str, body: str) -> bool:
        """Each method's own axiom: the share of its examples that meet it (a check's primary metric, 1 or 0 per
        example), against the check's declared bar."""
        later = r"(?:; still computing: (.+?))?"
        every = re.fullmatch(rf": (?:each of the (\d+) methods that claim an axiom meets it|({NAME}) meets its own "
                             rf"axiom) within its tolerance on at least (\d+)% of the examples checked \(n = (.+?)\)"
                             rf"{later}\.", body)
        some = re.fullmatch(r": (.+): below (\d+)%, (?:its scores here are not what the method defines and its place "
                            r"in the verdicts is no verdict on it|their scores here are not what the methods define "
                            r"and their places in the verdicts are no verdict on them)(?:; the other (?:method that "
                            rf"claims an axiom meets it|(\d+) methods that claim an axiom meet it) on at least "
                            rf"(\d+)%)?{later}\.", body)
        if not (every or some):
            return False
        model, dataset = self.suites[suite]
        evaluation = next(e for e in EVALS.all() if e.check_share is not None)
        met, residual, claim = {}, {}, {}
        for r in self.records:
            if (r["model"], r["dataset"], r["eval"]) != (model, dataset, evaluation.name):
                continue
            values = [v for v in r["values"] if v is not None]
            if r["metric"] == evaluation.primary_metric:
                met[r["method"]] = (int(sum(values)), len(values))
                claim[r["method"]] = (r["axiom"], r["tolerance"])
            elif evaluation.higher_is_better[r["metric"]] is False:
                residual[r["method"]] = float(np.median(values))
        failing = {m for m, (k, n) in met.items() if k < evaluation.check_share * n}
        # what the rows plan and have not complete: a method of the check with no complete row, by the stored plan
        waiting = set(self.statistics.get("still computing", {}).get(f"{suite} · {evaluation.name}", {}))
        later = (every or some)[5]
        assert set(later.split(", ") if later else ()) == waiting, (suite, waiting)
        if every:
            counts = sorted({n for _, n in met.values()})
            assert not failing and int(every[3]) == round(100 * evaluation.check_share)
            assert (int(every[1]) if every[1] else 1) == len(met) and every[2] in (None, *met)
            assert every[4] == (f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}–{counts[-1]:,}")
            return True
        assert int(some[2]) == int(some[4] or some[2]) == round(100 * evaluation.check_share)
        said = {}
        for part in _names(some[1]):
            clause = re.fullmatch(rf"({NAME}) meets its (\w+) axiom(?: \(tolerance ([\d.e+-]+)\))? on ([\d,]+) of "
                                  rf"([\d,]+) examples(?: \(median residual (.+?)\))?", part)
            assert clause, part
            m = clause[1]
            assert m in met, f"{suite}: {m} has no complete {evaluation.name} rows"
            said[m] = clause
            assert (int(clause[4].replace(",", "")), int(clause[5].replace(",", ""))) == met[m], (suite, m)
            assert clause[2] == claim[m][0] and float(clause[3]) == float(f"{claim[m][1]:g}")
            assert clause[6] == f"{residual[m]:.2g}", (suite, m, residual[m])
        assert set(said) == failing, (suite, failing)
        assert int(some[3] or (1 if some[4] else 0)) == len(met) - len(failing)
        return True

    def rule_metric_validity(self, suite: str, body: str) -> bool:
        said = rf"(.+?) \(Kendall tau ({NUMBER}) \[({NUMBER}), ({NUMBER})\], n = (\d+)\)"
        lead = (rf"(?:; it (?:(?P<leads>leads) (?:the other|each of the other (?P<ahead>\d+))|is not separated from "
                rf"(?P<close>.+?)) \(paired "
                rf"bootstrap of the difference in tau, (?P<level>[\d.]+)% intervals, Bonferroni over (?P<k>\d+)"
                rf"(?:; lead over (?P<runner>.+?) (?P<lead>{NUMBER}) \[(?P<low>{NUMBER}), (?P<high>{NUMBER})\], "
                rf"n = (?P<n>\d+))?(?:; within the bootstrap's Monte-Carlo error of the level \(another seed may "
                rf"reverse the verdict\): (?P<edge>.+?))?\))?")
        found = re.fullmatch(rf": of the faithfulness metrics, the method order of {said} agrees best with (.+?)"
                             rf"(, and its interval holds 0: no metric agrees clearly)?{lead}"
                             rf"(?:; least(?P<tied>, tied)?: (?P<least>.+))?\.", body)
        if not found:
            return False
        known = self.ruling(suite, found[6])["values"]
        listed = self.statistics[f"{suite} · metric validity"]
        assert set(self.votes(suite)) <= {self.name_of(e["metric"].split(".", 1)[1]) for e in listed}
        taus, stored = {}, {}
        for entry in listed:
            eval_name, key = entry["metric"].split(".", 1)
            evaluation = EVALS.get(eval_name)
            values = self._oriented(suite, evaluation, key)
            methods = [m for m in known if m in values]
            ids = _shared({m: known[m] for m in methods}, {m: values[m] for m in methods})
            name = self.name_of(key)  # a sentence names ABPC without its table's " (derived)"
            taus[name] = (referee.kendall_of_means({m: known[m] for m in methods}, values, ids, ids), ids, values)
            stored[name] = entry
        order = sorted(taus, key=lambda name: taus[name][0], reverse=True)
        best = found.groups()[:5]
        least = [re.fullmatch(said, part).groups() for part in _names(found["least"])] if found["least"] else []
        # the least: every metric at the lowest tau, and "tied" where there are several
        lowest = [name for name in order[1:] if abs(taus[name][0] - taus[order[-1]][0]) <= 1e-12]
        assert [row[0] for row in least] in ([], lowest) and bool(found["tied"]) == (len(least) > 1), (suite, lowest)
        for (name, tau, low, high, n), which in [(best, order[0])] + [(row, order[-1]) for row in least]:
            assert f"{taus[name][0]:.2f}" == tau == f"{taus[which][0]:.2f}", (suite, name, which)
            assert int(n) == len(taus[name][1]), (suite, name, n, len(taus[name][1]))
            self._interval_agrees(referee.bootstrap_tau(known, taus[name][2], taus[name][1]), low, high)
        assert (found[7] is not None) == (float(found[3]) <= 0) and (not least) == (len(taus) == 1)
        assert (found["k"] is None) == (len(taus) == 1), (suite, "the lead over the others is said where there are any")
        if found["k"] is None:
            return True
        # the lead of the best over each other metric: the referee's own paired bootstrap at the stated level
        others = [name for name in taus if name != best[0]]
        confidence = 1 - 0.05 / len(others)
        assert int(found["k"]) == len(others) and found["level"] == f"{100 * confidence:.4g}", (suite, found["level"])
        close = set()
        edges = {}  # what the sentence says sits within the bootstrap's Monte-Carlo error of the level
        for part in _names(found["edge"] or ""):
            said = re.fullmatch(r"(.+?) \(([\d.]+)% of resampled leads at or beyond 0, the level allows ([\d.]+)%\)",
                                part)
            assert said, part
            edges[said[1]] = float(said[2]) / 100
            assert said[3] == f"{100 * (1 - confidence) / 2:.2f}", (suite, said[3])
        tail = (1 - confidence) / 2
        sd = math.sqrt(tail * (1 - tail) / self.resamples)  # of the report's share, from its resamples
        for name in others:
            both = sorted(set(taus[best[0]][1]) & set(taus[name][1]))
            entry = stored[name]["behind_best"]
            assert entry["n"] == len(both), (suite, name, entry["n"], len(both))
            if entry["ci"] is None:  # a resample with a constant order has no tau: no interval, nothing separated
                assert not entry["separated"] and name != found["runner"], (suite, name)
                close.add(name)
                continue
            # a Bonferroni level's tails hold a few of the draws (10 of 2,000 at 99 %): each bound is checked
            # against the band its own Monte-Carlo noise allows, from 20,000 draws of the referee's
            bands = referee.bootstrap_lead(known, taus[best[0]][2], taus[name][2], both, confidence, self.resamples)
            for bound, (low, high) in zip(entry["ci"], bands):
                assert low - 0.02 <= bound <= high + 0.02, (suite, name, entry["ci"], bands)
            assert entry["separated"] == (entry["ci"][0] > 0 or entry["ci"][1] < 0)
            # within Monte-Carlo error of the level: the bound's band (the referee's draws' quantiles at the tail
            # ± k SDs of the report's resamples) has values on both sides of where the verdict turns
            mine = referee.lead_draws(known, taus[best[0]][2], taus[name][2], both)
            ahead = (referee.kendall_of_means(known, taus[best[0]][2], both, both)
                     - referee.kendall_of_means(known, taus[name][2], both, both)) > 0

            def straddles(k: float) -> bool:
                levels = np.clip([tail - k * sd, tail + k * sd], 0, 1)
                low, high = np.quantile(mine, levels if ahead else 1 - levels[::-1])
                return bool(low <= 0 < high) if ahead else bool(low < 0 <= high)

            if name in edges:  # the stated share is the referee's within their noise, and the band wide enough
                share = float(np.mean(mine <= 0) if ahead else np.mean(mine >= 0))
                assert abs(share - edges[name]) <= 4 * sd + 1e-3 and straddles(4), (suite, name, edges[name], share)
            else:  # a bound the referee finds at the turn itself is one the report must call at the edge
                assert not straddles(0.5), (suite, name)
            if not entry["separated"]:
                close.add(name)
            if name == found["runner"]:
                point = (referee.kendall_of_means(known, taus[best[0]][2], both, both)
                         - referee.kendall_of_means(known, taus[name][2], both, both))
                assert f"{point:.2f}" == found["lead"] and int(found["n"]) == len(both), (suite, point, found["lead"])
                assert [f"{x:.2f}" for x in entry["ci"]] == [found["low"], found["high"]]
        assert found["runner"] == max(others, key=lambda name: taus[name][0]) or (
            f"{taus[found['runner']][0]:.2f}" == f"{max(taus[o][0] for o in others):.2f}"), (suite, found["runner"])
        everyone = "the other" if len(others) == 1 else f"any of the other {len(others)}"
        if found["leads"]:
            assert not close and int(found["ahead"] or 1) == len(others), (suite, close)
        elif found["close"] == everyone:
            assert close == set(others), (suite, close)
        else:
            assert set(_names(found["close"])) == close and close != set(others), (suite, found["close"], close)
        return True

    def rule_split(self, suite: str, body: str) -> bool:
        found = re.fullmatch(
            rf" against (.+?) by (.+?): Kendall tau of the (\d+) methods' means ({NUMBER}) \[({NUMBER}), ({NUMBER})\] "
            rf"\(n = ([\d,]+) on (.+?), ([\d,]+) on (.+?)\)(?:, against ({NUMBER}) \[({NUMBER}), ({NUMBER})\] between "
            rf"random halves of the pooled examples \(permutation p = (.+?)\))?; (?:no pair separated on one is "
            rf"separated the other way on the other|(\d+) pairs separated one way on one and the other way on the "
            rf"other \((.+?)\)); (.+)\.", body)
        if not found:
            return False
        base = found[1]
        here, there = self.ruling(suite, found[2]), self.ruling(base, found[2])
        methods = [m for m in there["values"] if m in here["values"]]
        sign = 1 if here["higher"] else -1
        first, other = ({m: {i: sign * v for i, v in side["values"][m].items()} for m in methods}
                        for side in (there, here))
        ids = [sorted({i for v in side.values() for i in v}) for side in (first, other)]
        tau = referee.kendall_of_means(first, other, ids[0], ids[1])
        assert (int(found[3]), found[4]) == (len(methods), f"{tau:.2f}")
        assert (int(found[7].replace(",", "")), int(found[9].replace(",", ""))) == (len(ids[1]), len(ids[0]))
        self._interval_agrees(referee.bootstrap_tau(first, other, ids[0], ids[1]), found[5], found[6])
        reversed_ = {pair for pair, winner in there["separated"].items() if winner and here["separated"].get(pair)
                     not in (None, winner)}
        said = {frozenset(p.split(" vs ")) for p in found[16].split(", ")} if found[15] else set()
        assert said == reversed_ and int(found[15] or 0) == len(reversed_)
        both = re.fullmatch(r"top group (.+) on both", found[17])
        if both:
            assert set(both[1].split(", ")) == there["top"] == here["top"]
        else:
            side = r"(?:top group (.+?)|no top group) on {}(?: \((.+?)\))?"
            sides = re.fullmatch(side.format(re.escape(found[10])) + ", " + side.format(re.escape(found[8])), found[17])
            for top, verdict, ruling in ((sides[1], sides[2], there), (sides[3], sides[4], here)):
                if top:
                    assert set(top.split(", ")) == ruling["top"], (body, ruling["top"])
                else:  # a table too small to rank: no pair could be separated on its examples at all
                    k = len(ruling["values"])
                    assert verdict == "n too small to rank", body
                    assert max(ruling["pair_n"]) < referee.fewest_examples(k * (k - 1) // 2)
        if found[11]:  # the pooled examples dealt at random into two samples of these sizes: the referee's own deals
            pooled = {m: {**{("a", i): v for i, v in first[m].items()}, **{("b", i): v for i, v in other[m].items()}}
                      for m in methods}
            keys = [("a", i) for i in ids[0]] + [("b", i) for i in ids[1]]
            rng = np.random.default_rng(7)
            null = []
            for _ in range(2000):
                dealt = [keys[j] for j in rng.permutation(len(keys))]
                null.append(referee.kendall_of_means(pooled, pooled, dealt[:len(ids[0])], dealt[len(ids[0]):]))
            null = np.array([t for t in null if math.isfinite(t)])
            self._interval_agrees((np.percentile(null, 2.5), np.percentile(null, 97.5)), found[12], found[13])
            p = (1 + np.sum(null <= tau)) / (1 + len(null))
            assert abs(p - float(found[14].lstrip("< "))) <= 0.03 + 0.3 * p, (p, found[14])
        return True
