"""The OpenSHMEM libraries a job can run on, and what the PEs need from each (client side).

A library is its launcher (``oshrun``), the Python whose shmem4py was built against it (the PEs
may run another virtualenv's Python than the notebook's kernel) and its environment::

    start(4, library="sos")           %shmem start -n 4 --library sos      SHMEM_NOTEBOOK_LIBRARY=sos

Built in:

- ``oshmem`` (the default): Open MPI's OSHMEM (OpenSHMEM 1.4), ``oshrun`` on PATH
  (``rc.oshrun``), this Python.
- ``sos``: Sandia OpenSHMEM (OpenSHMEM 1.5) as ``scripts/setup.sh --with-sos TARBALL`` builds it
  into the project's ``.sos/`` (``.sos/install``, ``.sos/venv``); its ``oshrun`` runs MPICH's
  ``mpiexec.hydra``; PEs on one node share their heaps (``scripts/sos-cma.patch``), the rest goes
  over libfabric's sockets provider.
- ``oshmpi``: OSHMPI (OpenSHMEM 1.4 over MPI-3) as ``scripts/setup.sh --with-oshmpi TARBALL``
  builds it over Open MPI's MPI into ``.oshmpi/``; it has no ``oshrun``: Open MPI's ``mpirun``
  starts the PEs (docs/libraries.md).

A site adds its own in a JSON file, ``$SHMEM_NOTEBOOK_LIBRARIES`` or
``~/.config/shmem_notebook/libraries.json``::

    {"cray": {"oshrun": "/opt/cray/bin/oshrun", "python": "/home/me/venv-cray/bin/python",
              "launcher": "hydra", "env": {"SHMEM_SYMMETRIC_SIZE": "512M"}, "polls": false}}

``polls`` (default true) says whether its PEs poll while they wait for others: then the tool lets
long waits sleep (:mod:`shmem_notebook.job.governor`); false for a library that blocks in its waits.
``shares_heaps`` (default true) says whether the PEs of one node map each other's heaps (``shmem.ptr``).
``caution`` (default none), what is known wrong in the library, is said as a warning when a job starts.

``oshrun`` is whatever starts the PEs: an ``oshrun``, or the MPI's own launcher for a library built
over MPI (``mpirun``, ``mpiexec.hydra`` for OSHMPI).
``launcher`` says how to write the command line: ``"openmpi"`` (Open MPI's ``oshrun`` or ``mpirun``: ``-x NAME``
forwards the environment, ``--oversubscribe``, ``--hostfile``) or ``"hydra"`` (MPICH's
``mpiexec.hydra``: the environment goes along by itself, ``-f HOSTFILE``). A start whose PEs are
not one job (N one-PE jobs: SOS's ``oshrun`` without ``OSHRUN_LAUNCHER`` in ``env``) is refused
naming the cause (:meth:`Library.check_world`).
"""

import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, LaunchError
from ..rc import rc

__all__ = ["Library", "library", "known", "described", "SITE_FILE", "LIBRARIES_FILE", "SOS_DIR", "OSHMPI_DIR"]

#: where a site's libraries are described (``$SHMEM_NOTEBOOK_LIBRARIES`` wins)
#: the site policy (its "libraries" are a site's own; the rest: :mod:`shmem_notebook.job.site`)
SITE_FILE = "/etc/shmem_notebook/site.json"
LIBRARIES_FILE = os.path.join(os.path.expanduser("~"), ".config", "shmem_notebook", "libraries.json")
#: where ``scripts/setup.sh --with-sos`` builds SOS: ``.sos/`` beside the package, in a checkout
SOS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".sos")
#: where ``scripts/setup.sh --with-oshmpi`` builds OSHMPI: ``.oshmpi/`` beside the package, in a checkout
OSHMPI_DIR = os.path.join(os.path.dirname(SOS_DIR), ".oshmpi")
LAUNCHERS = ("openmpi", "hydra")
#: what Sandia OpenSHMEM's oshrun runs, the first found, when OSHRUN_LAUNCHER names none
SOS_SEARCH = ("yod", "mpirun", "mpiexec", "srun")


#: what the shared-heaps build of Sandia OpenSHMEM is known to get wrong (docs/libraries.md)
SHARED_HEAPS_CAUTION = (
    "this Sandia OpenSHMEM build (shared heaps, an option) can return wrong reduction results while its PEs "
    "take signals (the tool signals PEs at interrupts and when it looks for deadlocks), and loops of reductions "
    "at 3 PEs hung on it: check results against another library, or rebuild SOS without SOS_SHARED_HEAPS=1 "
    "(docs/libraries.md)"
)


@dataclass(frozen=True)
class Library:
    """What the PEs of one OpenSHMEM library need."""

    name: str
    oshrun: str
    python: str = sys.executable
    launcher: str = "openmpi"
    env: dict[str, str] = field(default_factory=dict)
    hint: str = ""  # how to get it, said when it is missing
    #: whether its PEs poll while they wait for others (a core each): the tool then lets long waits
    #: sleep (shmem_notebook.job.governor); Sandia OpenSHMEM over libfabric blocks in its waits itself
    polls: bool = True
    #: whether the PEs of one node map each other's heaps (``shmem.ptr`` gives a view, ``TEAM_SHARED``
    #: is the node); OSHMPI's and Sandia OpenSHMEM's over libfabric do not
    shares_heaps: bool = True
    #: said as a warning when a job starts: what is known wrong in this build (empty: nothing)
    caution: str = ""

    def check(self) -> None:
        """Fail in one sentence, before launch, when its ``oshrun`` or its Python is missing."""
        if shutil.which(self.oshrun) is None:
            raise LaunchError(f"{self.oshrun!r} ({self.name}'s oshrun) was not found; {self.hint}")
        if shutil.which(self.python) is None:
            raise LaunchError(f"{self.python!r} (the Python of {self.name}'s PEs) was not found; {self.hint}")

    def check_world(self, n: int, npes: Iterable[int]) -> None:
        """Fail in one sentence, at start, when the PEs of a job of ``n`` are not one OpenSHMEM job:
        ``npes`` holds each PE's ``n_pes()`` (N one-PE jobs: the launcher did not start them together)."""
        if set(npes) == {n}:
            return
        said = " and ".join(str(k) for k in sorted(set(npes)))
        chosen = self.env.get("OSHRUN_LAUNCHER") or os.environ.get("OSHRUN_LAUNCHER")
        if chosen:
            cause = (
                f"its OSHRUN_LAUNCHER={chosen} is not the launcher this library was built for "
                f"(mpiexec.hydra for Sandia OpenSHMEM built with PMI); {self.hint}"
            )
        else:
            cause = self.launcher_problem() or (
                f"{self.oshrun} is most likely not the launcher of the OpenSHMEM that {self.python}'s shmem4py "
                f"was built against; {self.hint}"
            )
        raise LaunchError(
            f"the {n} PEs of {self.name!r} are not one OpenSHMEM job: they report n_pes() == {said}, not {n}; {cause}"
        )

    def launcher_problem(self) -> str | None:
        """Why this library's ``oshrun`` may not start its PEs as one job, or None: Sandia OpenSHMEM's
        ``oshrun`` without ``OSHRUN_LAUNCHER`` runs whichever launcher it finds first."""
        if self.env.get("OSHRUN_LAUNCHER") or os.environ.get("OSHRUN_LAUNCHER") or not _picks_launcher(self.oshrun):
            return None
        found = next((shutil.which(name) for name in SOS_SEARCH if shutil.which(name)), None)
        runs = found or "the first of " + ", ".join(SOS_SEARCH)
        return (
            f"Sandia OpenSHMEM's oshrun without OSHRUN_LAUNCHER runs {runs}, most likely not the launcher it was "
            f'built for: add "OSHRUN_LAUNCHER": "mpiexec.hydra" to the "env" of {self.name!r} ({self.hint})'
        )

    def command(
        self, n: int, env_names: Iterable[str], oversubscribe: bool = False, hostfile: str = "", bind_to: str = ""
    ) -> list[str]:
        """The launcher's arguments before the program: ``oshrun -n N ...`` (``bind_to``: core, socket or none;
        "": the launcher's default)."""
        args = [self.oshrun, "-n", str(n)]
        if self.launcher == "hydra":  # mpiexec.hydra passes the whole environment and never refuses to oversubscribe
            return args + (["-f", hostfile] if hostfile else []) + (["-bind-to", bind_to] if bind_to else [])
        if oversubscribe:
            args.append("--oversubscribe")
        if bind_to:  # more PEs than cores bound to cores: Open MPI refuses unless told, Hydra puts two on one
            args += ["--bind-to", bind_to + (":overload-allowed" if oversubscribe and bind_to != "none" else "")]
        if hostfile:
            args += ["--hostfile", hostfile]
        for name in sorted(env_names):  # to PEs on other nodes as well
            args += ["-x", name]
        return args


def _picks_launcher(oshrun: str) -> bool:
    """Whether ``oshrun`` is a script that picks its launcher by ``OSHRUN_LAUNCHER`` (Sandia OpenSHMEM's)."""
    path = shutil.which(oshrun)
    if path is None:
        return False
    try:
        with open(path, "rb") as fh:
            return b"OSHRUN_LAUNCHER" in fh.read(16384)
    except OSError:
        return False


def _builtin() -> dict[str, Library]:
    sos = os.environ.get("SHMEM_NOTEBOOK_SOS_DIR", SOS_DIR)
    # built with SOS_SHARED_HEAPS=1 (scripts/build_sos.sh): the node's PEs share their heaps and poll in their
    # waits (yielding the core every 16 polls, sleeping after 64 yields), so the governor lets long ones sleep
    sos_shared = os.path.exists(os.path.join(sos, "install", ".cma-built"))
    oshmpi = os.environ.get("SHMEM_NOTEBOOK_OSHMPI_DIR", OSHMPI_DIR)
    return {
        "oshmem": Library(
            "oshmem", rc.oshrun, hint="install Open MPI's OpenSHMEM: apt-get install openmpi-bin libopenmpi-dev"
        ),
        "sos": Library(
            "sos",
            os.path.join(sos, "install", "bin", "oshrun"),
            os.path.join(sos, "venv", "bin", "python"),
            launcher="hydra",
            env={
                "OSHRUN_LAUNCHER": "mpiexec.hydra",
                "FI_PROVIDER": "sockets",
                # libfabric carries only what shared memory does not (other nodes, atomics then); its PSM
                # providers' crash files are turned off for every library (environment.platform_environment)
                # with shared heaps, SOS's linear sync (barrier_all, sync_all and team syncs below its crossover
                # size) hangs now and then: the root finds two arrivals where it waits for one (in C, 2 PEs:
                # within 1-2 million barriers). Its dissemination sync, atomics only, does not (docs/libraries.md)
                **({"SHMEM_BARRIER_ALGORITHM": "dissem"} if sos_shared else {}),
            },
            hint="build it with `scripts/setup.sh --with-sos SOS-1.5.3.tar.gz` (Sandia OpenSHMEM's source)",
            # over libfabric its waits block on libfabric's counters (0-1% of a core per waiting PE, measured);
            # stopping its PEs would stall the RMA others target them with (a get from a stopped PE: ~10 ms).
            # With shared heaps, RMA to a stopped PE's heap completes (loads and stores)
            polls=sos_shared,
            shares_heaps=sos_shared,
            caution=SHARED_HEAPS_CAUTION if sos_shared else "",
        ),
        "oshmpi": Library(
            "oshmpi",
            "mpirun.openmpi" if shutil.which("mpirun.openmpi") else "mpirun",  # Debian's name for Open MPI's
            os.path.join(oshmpi, "venv", "bin", "python"),
            hint=(
                "build it with `scripts/setup.sh --with-oshmpi /path/to/oshmpi-ee5cf11.tar.gz`, a tarball of "
                "https://github.com/pmodels/oshmpi at commit ee5cf11 (docs/oshmpi.md says how to make it)"
            ),
            shares_heaps=False,  # its heap is an MPI window: no PE can shmem_ptr another
        ),
    }


def _site() -> tuple[dict[str, Library], str]:
    path = os.environ.get("SHMEM_NOTEBOOK_LIBRARIES") or LIBRARIES_FILE
    if not os.path.isfile(path):
        return {}, path
    try:
        with open(path) as fh:
            entries = json.load(fh)
    except (OSError, ValueError) as e:  # ValueError: not JSON
        raise InputError(
            f"{path} does not describe libraries as expected ({e}); see shmem_notebook.launcher.library"
        ) from None
    return described(entries, path), path


def _site_policy() -> dict[str, Library]:
    """The libraries of the site policy (:data:`SITE_FILE`, ``$SHMEM_NOTEBOOK_SITE`` wins); a policy
    that is missing or not JSON has none here: :mod:`shmem_notebook.job.site` refuses the start, saying why."""
    path = os.environ.get("SHMEM_NOTEBOOK_SITE") or SITE_FILE
    try:
        with open(path) as fh:
            text = json.load(fh)
    except (OSError, ValueError):
        return {}
    entries = text.get("libraries", {}) if isinstance(text, dict) else {}
    return described(entries, path, "libraries") if isinstance(entries, dict) else {}


def described(entries: Mapping[str, Any], path: str, key: str = "") -> dict[str, Library]:
    """name -> :class:`Library` of ``entries`` (a libraries.json's object, read from ``path``, or its
    ``key``); a malformed one is one sentence naming ``path`` and ``key`` (:class:`InputError`)."""
    try:
        libraries = {}
        for name, d in entries.items():
            if d.get("launcher", "openmpi") not in LAUNCHERS:
                raise ValueError(f"launcher {d['launcher']!r} of {name!r} is not one of {', '.join(LAUNCHERS)}")
            libraries[name] = Library(
                name,
                d["oshrun"],
                d.get("python", sys.executable),
                d.get("launcher", "openmpi"),
                dict(d.get("env", {})),
                hint=f"fix its entry in {path}",
                polls=bool(d.get("polls", True)),
                shares_heaps=bool(d.get("shares_heaps", True)),
                caution=str(d.get("caution", "")),
            )
        return libraries
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        reason = f"an entry has no {e}" if isinstance(e, KeyError) else e
        raise InputError(
            f"{path} does not describe libraries as expected{f' in its {key!r}' if key else ''} "
            f"({reason}); no job starts until it is fixed (see shmem_notebook.launcher.library)"
        ) from None


def known() -> dict[str, "Library"]:
    """name -> :class:`Library`: the built-in ones, then the site policy's (:data:`SITE_FILE`),
    then the user's libraries.json (each may replace the ones before)."""
    return {**_builtin(), **_site_policy(), **_site()[0]}


def library(name: str | None = None) -> "Library":
    """The :class:`Library` called ``name`` (``None``: ``rc.library``, default ``"oshmem"``)."""
    name = name or rc.library
    libraries = known()
    if name not in libraries:
        raise InputError(
            f"unknown OpenSHMEM library {name!r}; use one of {', '.join(libraries)} (a site's own go in {_site()[1]})"
        )
    return libraries[name]
