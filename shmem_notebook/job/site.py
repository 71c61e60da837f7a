"""A site's policy and admission: what a job may take on this server, checked before launch (client side).

An administrator writes one JSON file, ``$SHMEM_NOTEBOOK_SITE`` or ``/etc/shmem_notebook/site.json``
(docs/classroom.md)::

    {"max_pes": 4, "max_heap": "512M", "default_heap": "128M", "max_jobs": 2, "libraries": {...}}

``max_pes`` (per job), ``max_heap`` and ``default_heap`` (per PE), ``max_jobs`` (running jobs per user),
``libraries`` (entries as in libraries.json), and ``max_<option>`` for the other start options a site
may cap (:meth:`JobOptions.limits`: ``max_timeout``, ``max_nodes``, ``max_time``, ``max_spare``). The user's own
settings may ask for less, never for more: a start beyond a limit is refused in one sentence
(:func:`within_site`). A malformed file refuses every start, naming the file and the key.

:func:`admit` then checks that the heaps fit in what memory and ``/dev/shm`` have free, keeping
:data:`RESERVE` of each for the others on the server.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, cast

import psutil

from ..errors import LaunchError
from ..launcher.library import SITE_FILE, described
from ..launcher.shm import SHM_DIR
from ..rc import rc
from ..specs import check_heap, format_size, parse_size
from ..words import plural
from .heap_fit import PE_OVERHEAD, TOOL_RESERVE, TRANSPORT_SHM, check_heap_fits, largest_heap, node_memory, pes_per_node
from .options import declared, site_key
from .watchdog import OWNER, environment_values

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..launcher.library import Library
    from .options import JobOptions

__all__ = [
    "SITE_FILE",
    "KEYS",
    "LIMITS",
    "RESERVE",
    "HEAP_NOT_IN_SHM",
    "Policy",
    "policy",
    "within_site",
    "allowed",
    "heap_to_ask",
    "running_jobs",
    "admit",
    "admission",
]

#: the share of memory and of ``/dev/shm`` a start leaves free for others (other students' jobs
#: grow as they touch their heaps, notebook servers and kernels need memory too): 10%, at least 256 MiB
RESERVE = 0.10
MIN_RESERVE = 256 << 20
#: the built-in libraries whose heaps are not in ``/dev/shm`` (measured, 2 PEs on one node): OSHMEM's
#: are SysV segments, SOS's private anonymous memory; OSHMPI's is one MPI shared-memory window, an
#: unlinked ``/dev/shm/osc_sm.*`` file, and a site's library is counted there too, to be safe
HEAP_NOT_IN_SHM = ("oshmem", "sos")
#: the site key of each start option a site may cap (``max_<name>``, ``max_pes`` for ``n``: its ``Limit``)
KEYS = cast("dict[str, str]", {f.name: site_key(f.name, o) for f, o in declared() if o.limit})
#: the ``Limit`` of each option a site may cap (.options): its key, how it is written and said
LIMITS = {f.name: o.limit for f, o in declared() if o.limit}


class Policy:
    """A site's policy: ``limits`` (option name -> (number, as written)), ``default_heap``, ``max_jobs``,
    ``libraries`` (name -> Library); ``path`` is the file it was read from (``None``: no policy)."""

    def __init__(
        self,
        path: str | None = None,
        limits: dict[str, tuple[float, Any]] | None = None,
        default_heap: str | int | None = None,
        max_jobs: int | None = None,
        libraries: dict[str, Library] | None = None,
    ) -> None:
        self.path, self.limits, self.default_heap = path, limits or {}, default_heap
        self.max_jobs, self.libraries = max_jobs, libraries or {}

    def where(self, key: str) -> str:
        """``(site.json: max_pes)``: where a limit is set, for a refusal."""
        return f"({os.path.basename(self.path or SITE_FILE)}: {key})"


def policy() -> Policy:
    """The site's :class:`Policy` (an empty one when there is no file); a malformed file is one
    sentence naming the file and the key (:class:`LaunchError`), and no job starts."""
    path = os.environ.get("SHMEM_NOTEBOOK_SITE") or SITE_FILE
    if not os.path.exists(path):
        if os.environ.get("SHMEM_NOTEBOOK_SITE"):
            raise LaunchError(f"the site policy {path} (SHMEM_NOTEBOOK_SITE) does not exist; no job starts without it")
        return Policy()
    try:
        with open(path) as fh:
            text = json.load(fh)
    except (OSError, ValueError) as e:
        raise LaunchError(f"the site policy {path} cannot be read ({e}); no job starts until it is fixed") from None
    if not isinstance(text, dict):
        raise LaunchError(f'the site policy {path} must be a JSON object such as {{"max_pes": 4}}; no job starts')
    return _read(path, text)


def _read(path: str, text: dict[str, Any]) -> Policy:
    def bad(key: str, what: str) -> LaunchError:
        return LaunchError(f"the site policy {path} is malformed: {key} {what}; no job starts until it is fixed")

    known = {*KEYS.values(), "default_heap", "max_jobs", "libraries"}
    for key in text:
        if key not in known:
            raise bad(repr(key), f"is not a key (the keys are: {', '.join(sorted(known))})")
    limits: dict[str, tuple[float, Any]] = {}
    for name, key in KEYS.items():
        if key in text:
            value, limit = text[key], LIMITS[name]
            kind = int if limit.whole else (str, int, float)
            try:
                number = limit.measure(value) if isinstance(value, kind) and not isinstance(value, bool) else None
            except (ValueError, ArithmeticError):
                number = None
            if number is None or (number not in (0, 1) if limit.switch else number <= 0):  # max_spare 0 forbids
                said = "0 or 1" if limit.switch else "a positive integer" if limit.whole else "a positive value"
                raise bad(key, f"must be {said}, got {value!r}")
            limits[name] = (number, value)
    default_heap = text.get("default_heap")
    if default_heap is not None:
        try:
            check_heap(default_heap)
        except ValueError:
            raise bad("default_heap", f"must be a size such as '128M', got {default_heap!r}") from None
        if "heap" in limits and parse_size(default_heap) > limits["heap"][0]:
            raise bad("default_heap", f"({default_heap}) is larger than max_heap ({limits['heap'][1]})")
    max_jobs = text.get("max_jobs")
    if max_jobs is not None and (not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 1):
        raise bad("max_jobs", f"must be a positive integer, got {max_jobs!r}")
    libraries = text.get("libraries", {})
    if not isinstance(libraries, dict):
        raise bad("libraries", "must be an object of libraries as in libraries.json")
    return Policy(path, limits, default_heap, max_jobs, described(libraries, path, "libraries"))


def within_site(options: JobOptions, site: Policy | None = None) -> str | int:
    """The heap a job of ``options`` (:class:`JobOptions`) gets, once ``options`` are within the site's
    limits; else :class:`LaunchError` in one sentence naming the limit. A start without a heap (and no
    ``rc.heap``/``SHMEM_NOTEBOOK_HEAP`` of the user's) gets ``default_heap``, or the smaller of the tool's
    default and ``max_heap``."""
    site = policy() if site is None else site
    heap = options.heap if options.heap is not None else rc.heap
    if options.heap is None and rc.heap == rc._defaults["heap"]:  # the user chose no heap
        if site.default_heap is not None:
            heap = site.default_heap
        elif "heap" in site.limits and site.limits["heap"][0] < parse_size(heap):
            heap = site.limits["heap"][1]
    asked: dict[str, float] = {"heap": check_heap(heap)}  # a bad heap: one sentence now
    for name in site.limits.keys() - {"heap"}:
        value = getattr(options, name)
        with contextlib.suppress(ValueError, TypeError):  # a value unread here: the Job says why
            if value is not None:
                asked[name] = LIMITS[name].measure(value)
    for name, (most, written) in site.limits.items():
        if name in asked and asked[name] > most:
            said = LIMITS[name].asked(heap if name == "heap" else getattr(options, name))
            raise LaunchError(
                f"this site allows {LIMITS[name].said.format(written)} {site.where(KEYS[name])}; you asked for {said}"
            )
    if site.max_jobs is not None:
        mine = running_jobs()
        if len(mine) >= site.max_jobs:
            raise LaunchError(
                f"this site allows at most {plural(site.max_jobs, 'running job')} per user "
                f"{site.where('max_jobs')} and you have {len(mine)}: stop one (`%shmem stop` in its "
                f"notebook, or shut its kernel down) first"
            )
    return heap


def allowed(name: str, values: Iterable[Any], site: Policy | None = None) -> tuple[list[Any], str]:
    """``(kept, left_out)``: the ``values`` of start option ``name`` (``"n"``, ``"heap"``, ...) the site's
    limit allows, in their order, and one sentence saying what was left out ('' when nothing was):
    ``"8 PEs left out: this site allows at most 4 PEs per job (site.json: max_pes)"``. For a notebook
    that tries several sizes (a benchmark over PE counts): it asks only for what the site allows."""
    site = policy() if site is None else site
    if name not in LIMITS:
        raise ValueError(f"{name!r} is not a start option a site may cap; those are: {', '.join(LIMITS)}")
    if name not in site.limits:
        return list(values), ""
    most, written = site.limits[name]
    limit = LIMITS[name]
    kept = [v for v in values if limit.measure(v) <= most]
    out = [v for v in values if limit.measure(v) > most]
    if not out:
        return kept, ""
    said = ", ".join(limit.asked(v) for v in out)
    return kept, f"{said} left out: this site allows {limit.said.format(written)} {site.where(KEYS[name])}"


def running_jobs(uid: int | None = None) -> set[str]:
    """The tokens of this user's (``uid``'s) running jobs: every process a job starts (its watchdog
    first, which lives exactly as long as the job) carries ``SHMEM_NOTEBOOK_OWNER=<token>``."""
    return set(filter(None, environment_values(OWNER, os.getuid() if uid is None else uid).values()))


def admit(
    n: int,
    heap_bytes: int,
    hostfile: str | None = None,
    library: str = "oshmem",
    shm_dir: str = SHM_DIR,
    memory: tuple[int | None, int] | None = None,
) -> None:
    """Refuse in one sentence (:class:`LaunchError`) a job whose heaps do not fit, with room for others,
    in what this node's memory and ``shm_dir`` have free (after :func:`~.heap_fit.check_heap_fits`). The heaps
    count in ``shm_dir`` too except :data:`HEAP_NOT_IN_SHM`'s (measured: docs/oshmpi.md, "The heap").
    ``shm_dir`` and ``memory`` (``(free, total)`` bytes) are the test seam: a small directory, a small memory."""
    check_heap_fits(n, heap_bytes, hostfile, memory=memory and memory[0])  # no room at all: the largest heap
    if os.environ.get("SHMEM_NOTEBOOK_HEAP_CHECK", "on").lower() in ("off", "0", "no", "false") and not policy().path:
        return  # a user may switch the checks off where no site policy asks for them
    per_node = pes_per_node(n, hostfile)
    if memory is None:
        free, _ = node_memory()
        total = psutil.virtual_memory().total
    else:
        free, total = memory
    st = os.statvfs(shm_dir)
    admission(
        per_node,
        heap_bytes,
        free,
        total,
        st.f_bavail * st.f_frsize,
        st.f_blocks * st.f_frsize,
        shm_dir,
        heap_in_shm=library not in HEAP_NOT_IN_SHM,
    )


def admission(
    per_node: int,
    heap_bytes: int,
    free: int | None,
    total: int,
    shm_free: int,
    shm_size: int,
    shm_dir: str = SHM_DIR,
    heap_in_shm: bool = True,
) -> None:
    """The admission rule itself: ``per_node`` heaps (and their processes) must fit in ``free`` memory
    less :data:`RESERVE` of ``total``, and their transport files (and the heaps, ``heap_in_shm``) in
    ``shm_free`` less :data:`RESERVE` of ``shm_size``."""
    heaps = per_node * heap_bytes
    asked = f"{plural(per_node, 'PE')} x heap {format_size(heap_bytes)}"
    if free is not None:
        keep = max(int(RESERVE * total), MIN_RESERVE)
        needed = heaps + per_node * PE_OVERHEAD
        if needed > free - keep:
            raise LaunchError(
                f"not admitted: {asked} need {format_size(needed)} of memory (with the PE processes) but this server "
                f"has {format_size(free)} free, of which {format_size(keep)} is kept for others; ask for a smaller "
                f"heap or fewer PEs, or wait for others' jobs to end"
            )
    keep = max(int(RESERVE * shm_size), min(MIN_RESERVE, shm_size // 4))
    needed = heaps * heap_in_shm + per_node * TRANSPORT_SHM
    if needed > shm_free - keep:
        what = "the heaps and transport files" if heap_in_shm else "the transport files"
        raise LaunchError(
            f"not admitted: {asked} need {format_size(needed)} of {shm_dir} ({what}) but it has "
            f"{format_size(shm_free)} free, of which {format_size(keep)} is kept for others; ask for a smaller heap "
            f"or fewer PEs, or wait for others' jobs to end"
        )


def heap_to_ask(needed: int, n: int, hostfile: str | None = None, site: Policy | None = None) -> str:
    """Advice for a heap of at least ``needed`` bytes per PE: a round ``--heap`` that holds it, at most the
    ``site``'s ``max_heap`` (a :class:`Policy`; default: this server's), or why no heap that the site
    allows, or that this node can give, holds it."""
    mib = 1 << max(0, (int(needed * 1.25) - 1).bit_length() - 20)  # a power of two MiB, with room
    size = f"{mib >> 10}G" if mib >= 1024 else f"{mib}M"
    if site is None:
        try:
            site = policy()
        except LaunchError:  # a policy broken since the job started: the start will say so
            site = None
    limit, capped = site and site.limits.get("heap"), ""
    if limit and needed + TOOL_RESERVE > limit[0]:
        return (
            f"or declare smaller arrays: {format_size(needed)} per PE in all is more than the largest heap this "
            f"site allows, {limit[1]} {cast(Policy, site).where(KEYS['heap'])}; for more, ask the site's administrator"
        )
    if limit and mib << 20 > limit[0]:
        size, capped = limit[1], f", the largest this site allows {cast(Policy, site).where(KEYS['heap'])}"
    memory, _ = node_memory()
    per_node = pes_per_node(n, hostfile, os.environ)
    if memory is not None and per_node * (needed + PE_OVERHEAD) > memory:
        most = largest_heap(per_node, memory)
        return (
            f"no heap this node can give {per_node} PEs holds it (the largest is {most or 'none'} per PE): "
            f"declare a smaller array or use fewer PEs per node"
        )
    return f"or start with a larger heap (`%shmem stop`, then `%shmem start -n {n} --heap {size}`{capped})"
