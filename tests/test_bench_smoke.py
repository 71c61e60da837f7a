"""The benchmark suite at tiny sizes, so it cannot rot (a smoke run, not a timed test)."""

import json
import os
import signal
import subprocess
import sys

import pytest

from shmem_notebook.rc import rc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from run import SECTIONS  # noqa: E402  (the sections bench/run.py declares: each must be in its results)


def _quick(script, out, timeout):
    """``bench/SCRIPT --quick --out OUT`` run to its end (it must exit 0); the finished process. It runs in
    its own process group: past ``timeout`` the whole group is killed (the bench's jobs with it), so a
    bench slowed down by a loaded machine fails alone instead of leaving PEs that fail every later
    module's leftover check."""
    command = [sys.executable, os.path.join(ROOT, "bench", script), "--quick", "--out", str(out)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    ) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            pytest.fail(
                f"bench/{script} --quick did not end within {timeout} s (load average {os.getloadavg()[0]:.1f})"
            )
    proc = subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.pe
@pytest.mark.timeout(960)
def test_quick_benchmark_writes_every_section_and_the_plot(tmp_path):
    proc = _quick("run.py", tmp_path, timeout=900)  # 100-150 s alone, 370 s at load 20
    results = json.loads((tmp_path / "results.json").read_text())
    for section in SECTIONS + ["meta", "goals"]:
        assert section in results, f"results.json has no {section!r} section"
    assert results["meta"]["quick"] and results["meta"]["machine"]["cores"] >= 1
    assert results["startup"]["rows"] and results["dispatch"]["rows"] and results["datapath"]["rows"]
    assert results["memory"]["pe_rss_median_mib"] > 0
    assert {r["workload"] for r in results["races"]["rows"]} == {"puts", "stencil"}
    waits = results["races"]["waits"]  # the wait rules side by side: both find no race in the race-free protocols
    assert {r["workload"] for r in waits} == {"ping_pong", "credit_ring"}
    assert all(r["condition_races"] == 0 and r["observed_races"] == 0 and r["condition_s"] > 0 for r in waits)
    assert "Wait-heavy protocols" in proc.stdout
    assert results["inspector"]["rows"] or not results["inspector"]["available"]
    assert results["slurm"].get("rows") or not results["slurm"]["available"]
    libs = results["libraries"]
    assert libs["libraries"]["oshmem"]["built"] and not libs.get("errors"), libs.get("errors")
    for config in libs["configs"]:  # each built library: start, and the PEs' measurements
        assert libs["start"][config]["2"]["start"] > 0 and libs["pes"][config]["2"]["teams_sync"]["team_sync"]["us"] > 0
    assert libs["pes"]["oshmem"]["2"]["putget"]["put"]["8"]["us"] > 0
    student = results["student"]["summary"]  # every process of a 2-PE job, against a plain oshrun's
    assert student["cpu"] > student["floor_cpu"] > 0 and student["uss_mib"] > student["floor_uss_mib"] > 0
    forked = {"fork server": 1, "stub": 2} if rc.forkserver == "on" else {}  # a 2-PE job's PEs forked (job.forks)
    assert student["by_kind_processes"] == {"PE": 2, "controller": 1, "oshrun": 1, "watchdog": 1, **forked}
    assert {g["id"] for g in results["goals"]} >= {"student_cpu", "student_processes", "student_uss"}
    assert all(g["ok"] in (True, False, None) for g in results["goals"])
    assert (tmp_path / "results.png").stat().st_size > 0
    assert "Start to ready" in proc.stdout and "| goal |" in proc.stdout and "Library against library" in proc.stdout
    assert "One student's job" in proc.stdout


def test_slurm_phases_without_a_running_state_line_are_unknown_not_an_error():
    """On a quiet machine the PEs can be ready before the batch proxy process saw RUNNING."""
    from slurm import phases

    marks = [{"state": "SUBMITTED", "t": "100.5"}, {"state": "PENDING", "t": "101.0"}]
    got = phases(marks, t0_wall=100.0, total=3.0, stop=0.4)
    assert got == {"total": 3.0, "submit": 0.5, "queued": None, "pes": None, "stop": 0.4}
    marks.append({"state": "RUNNING", "t": "101.5"})
    got = phases(marks, t0_wall=100.0, total=3.0, stop=0.4)
    assert got["queued"] == 1.0 and got["pes"] == 1.5


@pytest.mark.pe
@pytest.mark.timeout(600)
def test_race_statements_prints_each_statement_three_ways_and_saves_json_and_plot(tmp_path):
    out = tmp_path / "race_statements.json"
    proc = _quick("race_statements.py", out, timeout=590)
    result = json.loads(out.read_text())["result"]
    assert set(result) >= {"stencil line", "stencil iteration", "put of one element"}
    for name, ways in result.items():
        assert set(ways) == {"untraced", "C", "Python"} and all(v > 0 for v in ways.values()), (name, ways)
        assert f"| {name} |" in proc.stdout
    assert (tmp_path / "race_statements.png").stat().st_size > 1000
