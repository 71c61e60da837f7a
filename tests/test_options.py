"""The start options are declared once (shmem_notebook/launcher/start_options.py): Job(), start(), their
types, the %shmem start parser, %shmem export --slurm, the oshrun launcher, a site policy and the docs'
table read that one declaration."""

import dataclasses
import inspect
import os
import pathlib
import re
import tomllib
import typing

import psutil
import pytest

import shmem_notebook
from conftest import ipython_shell
from shmem_notebook.job import options
from shmem_notebook.job.options import (
    DOCS_BEGIN,
    DOCS_END,
    JobOptions,
    Limit,
    StartOptions,
    declared,
    docs_table,
    flag,
    launcher_settings,
    listed,
    option,
    signature,
    slurm_seconds,
    typed_source,
)
from shmem_notebook.launcher import OshrunEngineSetLauncher, start_options
from shmem_notebook.launcher.start_options import launcher_traits
from shmem_notebook.magics.shmem_magics import PARSERS, _parser, _start_args

ROOT = pathlib.Path(__file__).resolve().parent.parent


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


def test_what_is_written_from_the_declaration_is_current():
    """StartOptions (the typed keywords) and docs/api.md's table: `python -m shmem_notebook.job.options`."""
    source = pathlib.Path(options.__file__).read_text()
    assert typed_source() in source, "run python -m shmem_notebook.job.options"
    assert list(typing.get_type_hints(StartOptions)) == [f.name for f, _ in declared() if f.name != "n"]
    docs = (ROOT / "docs" / "api.md").read_text()
    assert docs.split(DOCS_BEGIN)[1].split(DOCS_END)[0].strip() == docs_table().strip(), (
        "run python -m shmem_notebook.job.options"
    )
    assert typed_source(_Wider).endswith("    quota: int | None\n    display_map: bool\n")


def test_the_type_checker_refuses_a_misspelt_or_mistyped_option(tmp_path):
    """mypy with the project's settings and cache (warm after `make lint`: about 15 s, else a minute)."""
    api = pytest.importorskip("mypy.api")
    program = tmp_path / "uses_start.py"
    program.write_text(
        "import shmem_notebook\n"
        "from shmem_notebook.job import Job\n"
        'shmem_notebook.start(4, heep="1G")\n'
        'Job(2, heap="8M", timout=3)\n'
        'shmem_notebook.start(4, slurm="yes")\n'
        'shmem_notebook.start(4, heap="8M", library="sos", sbatch_args=["--qos=x"], nodes=None, timeout=2)\n'
    )
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    out, err, _ = api.run([*config, "--no-error-summary", str(program)])
    ours = [re.match(r".*uses_start\.py:(\d+): error: (.*)", line) for line in out.splitlines()]
    errors = {int(m[1]): m[2] for m in ours if m}
    assert set(errors) == {3, 4, 5}, out + err
    assert 'Unexpected keyword argument "heep" for "start"' in errors[3]
    assert 'Unexpected keyword argument "timout" for "Job"' in errors[4]
    assert 'Argument "slurm" to "start" has incompatible type "str"; expected "bool"' in errors[5]


def test_the_launcher_takes_its_options_from_the_declaration():
    launched = {f.name for f, o in declared() if o.launch or o.oshrun}
    assert launched == {"heap", "oversubscribe", "hostfile", "bind_to", "library", "slurm", "partition", "time"} | {
        "nodes",
        "account",
        "sbatch_args",
        "sbatch_prologue",
    }
    traits = OshrunEngineSetLauncher.class_traits(config=True)
    for f, o in declared():
        if f.name in launched:
            assert traits[f.name].help.startswith(o.help), f.name
    # what a job hands the launcher is what its traits take, and reads back as given
    given = JobOptions(n=2, heap="8M", oversubscribe=True, hostfile="hosts", library="sos", slurm=True, time=30)
    settings = launcher_settings(dataclasses.replace(given, nodes=2, sbatch_args=("--qos=x",)))
    launcher = OshrunEngineSetLauncher(**settings)
    assert {name: getattr(launcher, name) for name in settings} == dict(
        settings, heap="8M", time="30", nodes=2, partition="", sbatch_args=["--qos=x"], sbatch_prologue=[]
    )
    assert launcher_settings(JobOptions(n=2))["oversubscribe"] is None  # the launcher decides


def test_listed_gives_names_flags_and_choices_for_completion():
    rows = {row.name: row for row in listed()}
    assert list(rows) == [f.name for f, _ in declared()]
    assert rows["n"].flag == "-n" and rows["sbatch_args"].flag == "--sbatch-arg"
    assert rows["spare"].metavar is None and rows["heap"].metavar == "SIZE"
    assert {"oshmem", "sos", "oshmpi"} <= set(rows["library"].choices)
    assert rows["n"].site_key == "max_pes" and rows["ip"].site_key is None
    assert [row.name for row in listed(batch=True)] == [f.name for f, _ in declared(batch=True)]


def test_py_typed_is_shipped():
    assert (pathlib.Path(shmem_notebook.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["shmem_notebook"]


@dataclasses.dataclass(frozen=True)
class _Wider(JobOptions):
    """The declaration with two options more, as a site would add them: one field each."""

    quota: int | None = option(
        None, "the PEs' share of the site's quota", metavar="Q", parse=int, limit=Limit(int, "a quota of at most {}")
    )
    display_map: bool = option(
        False, "oshrun --display-map: where each PE runs", action="store_true", oshrun="--display-map"
    )


class _WiderLauncher(OshrunEngineSetLauncher):
    """The launcher as it is built from the wider declaration (at import, from the declaration there)."""

    vars().update({k: v for k, v in launcher_traits(_Wider).items() if k in ("quota", "display_map")})


@pytest.mark.pe
def test_an_option_added_once_reaches_job_start_the_magic_and_oshrun(monkeypatch):
    monkeypatch.setattr(start_options, "JobOptions", _Wider)
    monkeypatch.setattr(shmem_notebook.job.job, "OshrunEngineSetLauncher", _WiderLauncher)
    assert "quota" in signature().parameters and "display_map" in signature(method=True).parameters
    assert shmem_notebook.Job(2, quota=3).options.quota == 3
    monkeypatch.setitem(PARSERS, "start", _parser("%shmem start", _start_args))  # as importing the magics builds it
    assert "--quota Q" in PARSERS["start"].format_usage() and "--display-map" in PARSERS["start"].format_usage()
    shell = ipython_shell()
    old = shmem_notebook.job._current
    shmem_notebook.job._current = None
    try:
        shell.run_line_magic("shmem", "start -n 2 --heap 8M --quota 5 --display-map")
        job = shmem_notebook.job.current_job()
        assert job.state == "running" and job.options.quota == 5 and job.options.limits()["quota"] == 5
        oshrun = job._engine_set().process  # the oshrun that runs the PEs was given the flag
        assert "--display-map" in psutil.Process(oshrun.pid).cmdline()
        assert os.path.basename(psutil.Process(oshrun.pid).cmdline()[0]).startswith(("oshrun", "mpirun", "orterun"))
    finally:
        if shmem_notebook.job.current_job() is not None:
            shmem_notebook.job.current_job().stop()
        shmem_notebook.job._current = old
