"""The start options are declared once (shmem_notebook/job/options.py): Job(), start(), the
%shmem start parser, %shmem export --slurm and a site policy read that one declaration."""

import dataclasses
import inspect

import pytest

import shmem_notebook
from conftest import ipython_shell
from shmem_notebook.job import options
from shmem_notebook.job.options import JobOptions, declared, flag, option, signature, slurm_seconds
from shmem_notebook.magics.shmem_magics import PARSERS, _parser, _start_args


def _dests(parser):
    return {action.dest: action for action in parser._actions}


def test_job_start_and_the_parser_take_every_declared_option_and_no_other():
    names = [f.name for f in dataclasses.fields(JobOptions)]
    assert list(inspect.signature(shmem_notebook.Job).parameters) == names
    assert list(inspect.signature(shmem_notebook.start).parameters) == names
    start = _dests(PARSERS["start"])
    for f, said in declared():
        assert f.name in start and flag(f) in start[f.name].option_strings, f.name
        assert start[f.name].help == said.help
    assert set(_dests(PARSERS["export"])) >= {f.name for f, _ in declared(batch=True)}
    # the defaults the parser gives are those the Python API has (lists for the repeatable ones)
    args = PARSERS["start"].parse_args(["-n", "3"])
    assert {f.name: getattr(args, f.name) for f, _ in declared()} == dict(
        dataclasses.asdict(JobOptions(n=3)), sbatch_args=[], sbatch_prologue=[]
    )


def test_an_unknown_option_is_one_sentence():
    with pytest.raises(shmem_notebook.InputError, match=r"^'hep' is not a start option; the options are: n, heap, "):
        shmem_notebook.Job(2, hep="1G")
    with pytest.raises(shmem_notebook.InputError, match="'hep' is not a start option"):
        shmem_notebook.start(2, hep="1G")


def test_a_policy_reads_which_options_are_limits_and_measures_them():
    limited = {f.name for f, o in declared() if o.limit}
    assert limited == {"n", "heap", "timeout", "time", "nodes", "spare"}
    given = JobOptions(n=8, heap="1G", timeout=30, slurm=True, time="1-00:30:00", nodes=2)
    assert given.limits() == {"n": 8, "heap": 1 << 30, "timeout": 30.0, "time": 88200, "nodes": 2, "spare": 0}
    assert {f.name: o.rc for f, o in declared() if o.rc} == {
        "heap": "heap",
        "timeout": "timeout",
        "ip": "ip",
        "library": "library",
    }
    for text, expected in (("30", 1800), ("30:15", 1815), ("1:00:00", 3600), ("2-12", 216000), ("2-12:30", 217800)):
        assert slurm_seconds(text) == expected, text
    with pytest.raises(shmem_notebook.InputError, match="a Slurm time limit looks like"):
        slurm_seconds("soon")


def test_export_refuses_batch_options_without_slurm_by_their_flags():
    shell = ipython_shell()
    old = shmem_notebook.job._current
    shmem_notebook.job._current = shmem_notebook.Job(2)  # never started: export needs none of its PEs
    try:
        with pytest.raises(Exception, match=r"%shmem export: --sbatch-arg, --sbatch-prologue only apply with --slurm"):
            shell.run_line_magic("shmem", "export x.py --sbatch-arg=--qos=low --sbatch-prologue 'module load x'")
    finally:
        shmem_notebook.job._current = old


@dataclasses.dataclass(frozen=True)
class _Wider(JobOptions):
    """The declaration with one option more, as a site would add it: one field."""

    quota: int = option(None, "the PEs' share of the site's quota", metavar="Q", parse=int, limit=int)


@pytest.mark.pe
def test_an_option_added_once_reaches_job_start_and_the_magic(monkeypatch):
    monkeypatch.setattr(options, "JobOptions", _Wider)
    assert "quota" in signature().parameters and "quota" in signature(method=True).parameters
    assert shmem_notebook.Job(2, quota=3).options.quota == 3
    monkeypatch.setitem(PARSERS, "start", _parser("%shmem start", _start_args))  # as importing the magics builds it
    assert "--quota Q" in PARSERS["start"].format_usage()
    shell = ipython_shell()
    old = shmem_notebook.job._current
    shmem_notebook.job._current = None
    try:
        shell.run_line_magic("shmem", "start -n 2 --heap 8M --quota 5")
        job = shmem_notebook.job.current_job()
        assert job.state == "running" and job.options.quota == 5 and job.options.limits()["quota"] == 5
    finally:
        if shmem_notebook.job.current_job() is not None:
            shmem_notebook.job.current_job().stop()
        shmem_notebook.job._current = old
