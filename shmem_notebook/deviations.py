"""Where each OpenSHMEM library (and shmem4py) departs from the specification, and what the tool does.

One table, :data:`DEVIATIONS`, read by the PE-side shims that repair a deviation (their ``applies``
asks :func:`affects`), by the race recording of plain scripts (a deviation the runner reports
instead of repairing, :data:`LATE_ZEROING`) and by the documentation: ``python -m
shmem_notebook.deviations`` prints the Markdown table of ``docs/libraries.md`` (``--write`` puts it
there; a test checks that the page holds today's table). Pure data: importable on both sides.

A deviation found by the conformance suite (``tests/conformance/``) or a test gets an entry here,
with what the tool does about it: a **shim** restores the specified behaviour, a **refusal** ends
the call in one sentence before the library sees it, a **race report** names it where the user's
program meets it, **launch** settings avoid it, a **build** patch fixes the library's source.
"""

import sys
from dataclasses import dataclass

__all__ = [
    "Deviation",
    "DEVIATIONS",
    "LATE_ZEROING",
    "CTX_INVALID",
    "MULTI_WAITS",
    "affects",
    "by_key",
    "library_of",
    "markdown",
]


@dataclass(frozen=True)
class Deviation:
    """One departure from the specification: in ``library`` (a name of
    :mod:`shmem_notebook.launcher.library`, or ``shmem4py``) at ``versions``."""

    key: str
    library: str
    versions: str
    what: str
    reference: str
    remedy: str  # shim, refusal, race report, launch, build
    does: str  # what the tool does, in words


#: the keys the PE side acts on
LATE_ZEROING, CTX_INVALID, MULTI_WAITS = "late_zeroing", "ctx_invalid", "multi_waits"

DEVIATIONS = (
    Deviation(
        LATE_ZEROING,
        "oshmem",
        "Open MPI 4.1.4 (every release to date)",
        "`shmem_calloc` (shmem4py's `zeros`, `alloc(clear=True)`, `new_lock`, declared arrays) zeroes the block "
        "after the barrier that ends the allocation, so a put from a PE that left first can be wiped "
        "by a PE still zeroing (4 PEs under load: wrong values in most runs)",
        "`oshmem/shmem/c/shmem_alloc.c`: `shmem_calloc` calls `_shmalloc` (its barrier), then `memset`; "
        "OpenSHMEM 1.5 §9.3.3 puts the barrier on exit",
        "shim",
        "shim `late_zeroing`: allocate, zero, then `shmem_sync_all` before any PE returns, in cells, "
        "jobs and exported scripts; `shmem-race` on a plain script does not repair it but reports the race "
        "between the late zeroing and the remote write",
    ),
    Deviation(
        CTX_INVALID,
        "oshmem",
        "Open MPI 4.1.4",
        "`shmem_ctx_quiet`/`shmem_ctx_fence` on `SHMEM_CTX_INVALID` (`shmem.CTX_INVALID.quiet()`, what a "
        "team program does on PEs outside a team) dereference the handle: the PE dies with SIGSEGV",
        "OpenSHMEM 1.5 §9.4.1: operations on `SHMEM_CTX_INVALID` do nothing; OSHMEM 1.4 predates it",
        "shim",
        "shim `ctx_invalid`: `quiet()`, `fence()` and `destroy()` of an invalid context do nothing; a put, "
        "get or atomic given one is refused in one sentence",
    ),
    Deviation(
        "cswap32",
        "oshmem",
        "Open MPI < 4.1.5",
        "`atomic_compare_swap` on a 32-bit integer aborts the PE ('stack smashing detected'): "
        "the UCX atomic component writes 8 bytes into a 4-byte result",
        "open-mpi/ompi#11257, fixed in 4.1.5 and 5.0",
        "refusal",
        "refused before the library sees it (`LibraryBugError`: use a 64-bit array)",
    ),
    Deviation(
        "fetch_bitwise",
        "oshmem",
        "Open MPI 4.1.0-4.1.4 over UCX shared memory",
        "`atomic_fetch_and/_or/_xor` store `old OP old` instead of `old OP value`",
        "measured with plain C programs (`oshcc`); fixed version unknown",
        "shim",
        "shim `pitfalls`: uint64 through a compare-and-swap loop (correct, atomic); uint32 refused "
        "(its compare-and-swap is `cswap32`)",
    ),
    Deviation(
        "finalize_segfault",
        "oshmem",
        "Open MPI < 4.1.6",
        "every process segfaults in `shmem_finalize`, and now and then one at start under load (a UCX "
        "component unloaded at start leaves its memory-release hook registered)",
        "open-mpi/ompi#11604, #10765, #11620, fixed in 4.1.6",
        "launch",
        "the launcher sets `OMPI_MCA_opal_common_ucx_opal_mem_hooks=0` (no such hook) and `OMPI_MCA_osc=^rdma` "
        "unless you set them",
    ),
    Deviation(
        "heap_variable",
        "oshmem",
        "Open MPI 4.1.4",
        "the heap size is read from `SMA_SYMMETRIC_SIZE`; OpenSHMEM 1.4's `SHMEM_SYMMETRIC_SIZE` is ignored",
        "OpenSHMEM 1.4 §B (environment variables)",
        "launch",
        "`--heap` sets both",
    ),
    Deviation(
        "team_psync",
        "sos",
        "Sandia OpenSHMEM 1.5.3",
        "a team's second pSync is the next team's first: two teams with common PEs running collectives "
        "at once (a row and a column of `split_2d`) signal each other's pSync and deadlock",
        "`src/shmem_team.c`: `shmem_internal_team_choose_psync`",
        "build",
        "`scripts/build_sos.sh` applies `scripts/sos-team-psync.patch`",
    ),
    Deviation(
        "early_collective_write",
        "sos",
        "Sandia OpenSHMEM 1.5.3",
        "a collective writes a PE's destination before that PE has entered it (allowed: OpenSHMEM 1.5 "
        "wants the destination ready on every PE before any PE calls), so a PE still writing or zeroing "
        "its destination loses the data",
        "OpenSHMEM 1.5 §9.9 (collectives)",
        "race report",
        "the race check's model lets a collective write its destination at the earliest member's arrival "
        "and reports an access not ordered before every member's call",
    ),
    Deviation(
        "window_alignment",
        "oshmpi",
        "OSHMPI over Debian's MPICH 4.0.2 with UCX 1.13",
        "puts to global or static symmetric variables land 8 bytes early: MPICH shifts RMA on a window "
        "whose base is not 16-byte aligned (OSHMPI's data-segment window starts at `__data_start`)",
        "pmodels/mpich#6140",
        "build",
        "`scripts/build_oshmpi.sh` configures OSHMPI with `--enable-win-type=dynamic_win` over MPICH; "
        "shmem4py's arrays come from `shmem_malloc`, right either way",
    ),
    Deviation(
        MULTI_WAITS,
        "oshmpi",
        "OSHMPI ee5cf11",
        "the multi-word waits and tests of OpenSHMEM 1.4 (`wait_until_all/any/some`, `test_all/any/some` and "
        "their `_vector` forms) abort the whole job (exit status 255)",
        "`src/shmem/p2p_typed.c`: each is `OSHMPI_ASSERT(0)`; found by `tests/conformance/`",
        "refusal",
        "refused in one sentence before OSHMPI sees them (`UnsupportedError`: loop over the elements with "
        "`shmem.wait_until` / `shmem.test`)",
    ),
    Deviation(
        "numpy2_array",
        "shmem4py",
        "shmem4py 1.0.0 under NumPy 2",
        "`shmem.array()` fails ('Unable to avoid copy'); code of the NumPy 1 era passes 1-element arrays "
        "where numbers are expected",
        "shmem4py 1.0.0 `shmem.py` (`np.array(obj, copy=False)`)",
        "shim",
        "shims `numpy2_array` and `numpy2_scalars`",
    ),
    Deviation(
        "array_locks",
        "shmem4py",
        "shmem4py 1.0.0",
        "`set_lock`, `test_lock` and `clear_lock` document their lock as a symmetric scalar or an array of "
        "length 1, but a NumPy array (a declared `lock=int64[1]`) fails in cffi ('initializer for ctype "
        "'long *' must be a cdata pointer')",
        "shmem4py 1.0.0 `shmem.py` (`lib.shmem_set_lock(lock)`)",
        "shim",
        "shim `locks`: a symmetric one-element int64 array is passed as a pointer to its element; any other "
        "array is refused in one sentence that says what a lock is",
    ),
)


def by_key(key: str) -> Deviation:
    """The :class:`Deviation` named ``key``."""
    return next(d for d in DEVIATIONS if d.key == key)


def library_of(vendor: str | None) -> str | None:
    """The library's name (``oshmem``, ``sos``, ``oshmpi``) from ``shmem.info_get_name()``, or None."""
    vendor = (vendor or "").lower()
    for needle, name in (("open-mpi", "oshmem"), ("sandia", "sos"), ("oshmpi", "oshmpi")):
        if needle in vendor:
            return name
    return None


def affects(key: str, vendor: str | None) -> bool:
    """Whether the deviation ``key`` is in the library that calls itself ``vendor`` (its
    ``shmem.info_get_name()``). Every version of that library counts: a shim on a fixed release
    costs one synchronisation, a missing one a wrong value."""
    return library_of(vendor) == by_key(key).library


def markdown() -> str:
    """The table of ``docs/libraries.md``: library and version, what differs, reference, what the tool does."""
    rows = ["| library | what differs | reference | what the tool does |", "| --- | --- | --- | --- |"]
    for d in DEVIATIONS:
        cells = (f"`{d.library}`: {d.versions}", d.what, d.reference, f"**{d.remedy}**: {d.does}")
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


#: the markers around the generated table in docs/libraries.md
BEGIN, END = "<!-- deviations: python -m shmem_notebook.deviations --write -->", "<!-- end of deviations -->"


def _write(path: str) -> None:
    with open(path) as f:
        text = f.read()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not rest:
        sys.exit(f"{path} has no line {BEGIN!r}: add it (and {END!r}) where the table goes")
    with open(path, "w") as f:
        f.write(f"{head}{BEGIN}\n{markdown()}{END}{tail}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        _write(sys.argv[2] if len(sys.argv) > 2 else "docs/libraries.md")
    else:
        sys.stdout.write(markdown())
