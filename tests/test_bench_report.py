"""bench/goals.py and bench/report.py on results of a real run (bench/results.json), no PEs: each
goal's limit is written once and drives its wording, its verdict and the section tables' verdicts;
a section not measured is listed as such; the prose on misses quotes only the run's own numbers."""

import copy
import json
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import goals  # noqa: E402
import report  # noqa: E402


@pytest.fixture
def results():
    with open(os.path.join(ROOT, "bench", "results.json")) as fh:
        return json.load(fh)


def with_limit(monkeypatch, goal_id, limit):
    """Change one goal's limit where every consumer reads it."""
    new = goals.BY_ID[goal_id]._replace(limit=limit)
    monkeypatch.setitem(goals.BY_ID, goal_id, new)
    monkeypatch.setattr(goals, "GOALS", [new if g.id == goal_id else g for g in goals.GOALS])


def row(rows, goal_id):
    (found,) = [r for r in rows if r["id"] == goal_id]
    return found


def test_a_limit_changes_the_wording_the_verdict_and_the_section_table(results, monkeypatch):
    worst = max(r["ratio_magic"] for r in results["dispatch"]["rows"])
    for limit, ok in ((round(worst * 2, 2), True), (round(worst / 2, 2), False)):
        with_limit(monkeypatch, "dispatch", limit)
        got = row(goals.evaluate(results), "dispatch")
        assert got["goal"] == f"no-op `%%pxshmem` <= {limit}x no-op `%%px` (every N)" and got["ok"] is ok
        table = report.dispatch_table(results["dispatch"])
        assert f"goal <= {limit}x (magics)" in table
        assert ("**MISSED**" in table) is (not ok)


@pytest.mark.parametrize("goal_id", [g.id for g in goals.GOALS])
def test_every_goal_flips_with_its_limit_alone(results, monkeypatch, goal_id):
    goal = goals.BY_ID[goal_id]
    measured = [m.value for m in goal.measure(results[goal.section])]
    assert measured, f"{goal_id}: the run in bench/results.json measured nothing for it"
    lenient = max(measured) + 1 if goal.better != "higher" else min(measured) - 1
    strict = min(measured) - 1 if goal.better != "higher" else max(measured) + 1
    for limit, ok in ((lenient, True), (strict, False)):
        with_limit(monkeypatch, goal_id, limit)
        rows = [r for r in goals.evaluate(results) if r["id"].startswith(goal_id)]
        assert rows and all(r["ok"] is ok for r in rows), (limit, rows)


def test_a_section_not_measured_is_listed_as_not_measured_never_as_met(results):
    partial = {k: results[k] for k in ("meta", "dispatch")}
    partial["slurm"] = {"available": False, "reason": "no slurmctld"}
    rows = goals.evaluate(partial)
    measured = {g.id for g in goals.GOALS if g.section == "dispatch"}
    assert all(row(rows, goal_id)["ok"] is not None for goal_id in measured)
    others = [r for r in rows if r["id"] not in measured]
    assert {r["id"] for r in others} == {g.id for g in goals.GOALS} - measured
    assert all(r["ok"] is None and r["measured"] == "not measured" for r in others)
    assert row(rows, "start_vs_floor")["goal"] == "start, N PEs: <= 1.5x the bare oshrun floor"
    assert row(rows, "race_puts")["goal"] == "race check on N 8-byte puts + barrier: <= 1.5x the untraced cell"
    partial["goals"] = rows
    text = report.markdown(partial)
    assert "| start, N PEs: <= 0.5x ipyparallel's MPI launcher (N) | not measured | - |" in text
    assert "**Slurm**: not measured (no slurmctld)." in text


def test_the_prose_on_missed_goals_quotes_only_numbers_of_the_run(results, monkeypatch):
    for goal in goals.GOALS:  # every goal missed: every paragraph is written
        with_limit(monkeypatch, goal.id, float("inf") if goal.better == "higher" else -1)
    results["goals"] = goals.evaluate(results)
    assert all(g["ok"] is False for g in results["goals"])
    block = report.page_block(results, "results.png")
    prose = block.split("**Why goals are missed**")[1]
    assert prose.count("\n- **") == len({goals.why(g, results) for g in results["goals"]})

    def numbers(value):
        if isinstance(value, dict):
            return {n for v in value.values() for n in numbers(v)}
        if isinstance(value, list):
            return {n for v in value for n in numbers(v)}
        return {f"{value:.2f}"} if isinstance(value, float) else {str(value)}

    measured = numbers({k: v for k, v in results.items() if k != "goals"})
    quoted = set(re.findall(r"\d+\.\d+", prose))
    assert quoted and quoted <= measured, sorted(quoted - measured)


def test_a_missed_measurement_at_scale_is_a_missed_goal(results):
    broken = copy.deepcopy(results)
    broken["scale"]["rows"][1] = {"n": 4, "error": "the PEs did not all register within 60 s"}
    rows = goals.evaluate(broken)
    got = row(rows, "scale_every_n")
    assert got["ok"] is False and got["measured"] == "4 PEs: the PEs did not all register within 60 s"
    assert "start_few_pes_4" not in {r["id"] for r in rows} and row(rows, "scale_start_16")["ok"] is not None


def test_a_library_not_built_is_reported_as_not_built_not_as_a_failure(results):
    lib = copy.deepcopy(results["libraries"])
    lib["libraries"]["sos"] = {"built": False, "reason": "'/nowhere/oshrun' (sos's oshrun) was not found"}
    lib["configs"] = ["oshmem"]
    for key in ("start", "samples", "pes"):
        lib[key] = {c: v for c, v in lib[key].items() if c == "oshmem"}
    text = report.libraries_tables(lib)
    assert "| start to ready, s | 2 |" in text
    start = next(line for line in text.splitlines() if line.startswith("| start to ready, s | 2 |")).split("|")
    assert float(start[3]) > 0 and start[4].strip() == "not built" and start[5].strip() == "-"
    assert "`sos` is not built here: '/nowhere/oshrun' (sos's oshrun) was not found" in text
    got = row(goals.evaluate({"libraries": lib}), "libraries_every_measure")
    assert got["ok"] is True and got["measured"].endswith("; sos not built")
    lib["errors"] = {"oshmem": {"4": "LaunchError: the PEs did not all register"}}
    got = row(goals.evaluate({"libraries": lib}), "libraries_every_measure")
    assert got["ok"] is False and got["measured"] == "oshmem at 4 PEs: LaunchError: the PEs did not all register"
    assert "| barrier_all, us | 4 | failed |" in report.libraries_tables(lib)
