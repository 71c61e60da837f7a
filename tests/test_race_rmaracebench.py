"""The RMARaceBench ports (tests/race_rmaracebench.py) are well formed: no PEs, the set is scored by
bench/race_rmaracebench.py. Every cell compiles, is named as its C test, carries the test's label, marks
both racing lines on a racy case and none on a race-free one, and says when it needs OpenSHMEM 1.5."""

import ast
import re

import pytest
from race_rmaracebench import CASES, SPLIT_TEAM_CONTEXTS, for_library

NAME = re.compile(r"^\d{3}-shmem-(conflict|atomic|sync|misc)-[a-z_-]+-(local|remote)-(yes|no)$")

#: shmem4py routines of OpenSHMEM 1.5 (a 1.4 library refuses them)
ROUTINES_15 = ("put_signal", "signal_fetch", "signal_wait_until", "create_ctx", "_nbi(")
NBI_14 = ("put_nbi(", "get_nbi(")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_is_valid_python(case):
    ast.parse(case.code, case.name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_name_and_label_are_the_tests(case):
    match = NAME.match(case.name)
    assert match, f"{case.name!r} is not a RMARaceBench file stem"
    assert case.race == (match.group(3) == "yes"), f"{case.name}: race={case.race} against its label"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_markers(case):
    marks = [m for line in case.code.splitlines() for m in re.findall(r"#\s*([AB])\s*$", line)]
    if case.race:
        assert sorted(marks) == ["A", "B"], f"{case.name}: a racy case marks its two lines once each, got {marks}"
        assert len(set(case.lines)) == 2
    else:
        assert marks == [], f"{case.name}: a race-free case has no racing lines to mark"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_needs_15_exactly_when_a_15_routine_is_called(case):
    code = case.code
    for nbi in NBI_14:
        code = code.replace(nbi, "")
    calls_15 = any(r in code for r in ROUTINES_15)
    assert (case.needs == "1.5") == calls_15, f"{case.name}: needs={case.needs!r}, calls a 1.5 routine: {calls_15}"


def test_every_folder_but_hybrid_is_ported():
    folders = {c.name.split("-")[2] for c in CASES}
    assert folders == {"conflict", "atomic", "sync", "misc"}
    assert len({c.name for c in CASES}) == len(CASES) == 96


def test_a_split_teams_context_is_refused_as_each_14_library_refuses_it():
    """OSHMEM's emulated teams refuse its context with a TeamError, OSHMPI any context with an
    UnsupportedError; a 1.5 library runs it; no other case changes."""
    assert SPLIT_TEAM_CONTEXTS <= {c.name for c in CASES}
    for library, spec, error in (
        ("oshmem", "1.4", "TeamError"),
        ("oshmpi", "1.4", "UnsupportedError"),
        ("sos", "1.5", None),
    ):
        cases = for_library(CASES, library)
        assert [c.name for c in cases] == [c.name for c in CASES]
        for case, original in zip(cases, CASES):
            if case.name in SPLIT_TEAM_CONTEXTS:
                assert case.error_on(spec) == error, (library, case.error_on(spec))
            else:
                assert case is original
