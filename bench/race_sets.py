"""Scoring a labelled set of race cells, one job per library and PE count: what ``bench/race_heldout.py`` and
``bench/race_rmaracebench.py`` share.

Each job has a heap of 8M; every case is run with ``race=True`` and scored as
``tests/test_races.py::test_catalogue`` scores the catalogue (the shared runner: tests/race_score.py).
:func:`main` prints per library and PE count the cases, tp/fp/tn/fn, precision, recall and accuracy, and
every wrong case with what the detector said, and writes the rows as JSON.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import shmem_notebook  # noqa: E402
from race_score import run_cases  # noqa: E402

__all__ = ["SPEC", "score", "line", "main"]

#: the OpenSHMEM version each library implements (its 1.5 cases end in UnsupportedError below 1.5)
SPEC = {"oshmem": "1.4", "sos": "1.5", "oshmpi": "1.4"}


def score(library, npes, cases, arrays, reset):
    """One job of ``npes`` PEs on ``library``: the scores of ``cases`` (a list, or library -> list), the wrong
    cases and the seconds."""
    job = shmem_notebook.Job(npes, heap="8M", library=library).start()
    try:
        started = time.perf_counter()
        chosen = cases(library) if callable(cases) else cases
        rows, scores = run_cases(job, chosen, arrays, reset, SPEC[library])
        seconds = time.perf_counter() - started
    finally:
        job.stop()
    wrong = [
        {"case": case.name, "race": case.race, "lines": list(case.lines), "detail": detail}
        for case, ok, detail in rows
        if ok is False
    ]
    return {"library": library, "pes": npes, "cases": len(rows), "seconds": round(seconds, 1), **scores, "wrong": wrong}


def line(row):
    """The row's scores in one line."""
    return (
        f"{row['library']} at {row['pes']} PEs: {row['cases']} cases in {row['seconds']} s; "
        f"tp {row['tp']}, fp {row['fp']}, tn {row['tn']}, fn {row['fn']}; precision {row['precision']:.2f}, "
        f"recall {row['recall']:.2f}, accuracy {row['accuracy']:.2f}"
    )


def main(description, out, cases, arrays, reset, argv=None):
    """The command line of a set's bench script: ``--libraries``, ``--pes``, ``--out`` (default ``out``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--libraries", nargs="+", default=["oshmem", "sos"], choices=sorted(SPEC))
    parser.add_argument("--pes", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--out", default=out)
    args = parser.parse_args(argv)
    rows = []
    for library in args.libraries:
        for npes in args.pes:
            row = score(library, npes, cases, arrays, reset)
            rows.append(row)
            print(line(row), flush=True)
            for w in row["wrong"]:
                print(f"  WRONG {w['case']} (race={w['race']}, lines={tuple(w['lines'])}): {w['detail']}", flush=True)
    with open(args.out, "w") as fh:
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
        json.dump({"date": stamp + " UTC", "load_average_1min_end": os.getloadavg()[0], "rows": rows}, fh, indent=1)
    return rows
