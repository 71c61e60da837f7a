"""The benchmark goals: one table (:data:`GOALS`), each threshold written once.

Every goal names the section of ``results.json`` it reads, its limit and which way is better,
and a function that turns the section into measurements. :func:`evaluate` feeds the goals table,
:func:`met` the per-row verdicts of the section tables (``report.py``), and :func:`why` the
docs/benchmarks.md's paragraph on a missed goal, which quotes only numbers of the same run. A goal whose
section was not measured is listed as "not measured", never as met.
"""

from collections import namedtuple

__all__ = ["Goal", "Measurement", "GOALS", "BY_ID", "met", "evaluate", "why"]

MiB = 1 << 20

#: ``better``: "lower" (met when value <= limit), "below" (value < limit), "higher" (value >= limit)
Goal = namedtuple("Goal", "id section wording limit better measure")
#: one measured value of a goal: ``suffix`` is added to the goal's id, ``fields`` fill its wording
Measurement = namedtuple("Measurement", "suffix fields value text")


def met(goal, value):
    """Whether ``value`` meets ``goal`` (a :class:`Goal` or its id); ``None`` when not measured."""
    goal = BY_ID[goal] if isinstance(goal, str) else goal
    if value is None:
        return None
    return {"lower": value <= goal.limit, "below": value < goal.limit, "higher": value >= goal.limit}[goal.better]


def _size(n):
    for unit, name in ((1 << 30, "GiB"), (MiB, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


# -- measurements, one function per goal ---------------------------------------------------
def _start_vs_ipp_mpi(st):
    big = max(st["rows"], key=lambda r: r["n"])
    for key, label in (("ipp_mpi_tuned", "its heartbeat = ours"), ("ipp_mpi_default", "its defaults")):
        if key in big:
            r = big["shmem_notebook"] / big[key]
            yield Measurement(
                key[len("ipp_mpi") :],
                {"n": big["n"], "label": label},
                r,
                f"{big['shmem_notebook']:.2f} s vs {big[key]:.2f} s = {r:.2f}x",
            )


def _start_vs_floor(st):
    big = max(st["rows"], key=lambda r: r["n"])
    r = big["shmem_notebook"] / big["floor"]
    yield Measurement("", {"n": big["n"]}, r, f"{big['shmem_notebook']:.2f} s vs {big['floor']:.2f} s = {r:.2f}x")


def _restart_vs_start(st, key="restart"):
    """The worst ``key`` (a restart's seconds) / start over N (rows without it, from older runs, are left out)."""
    rows = [r for r in st["rows"] if r.get(key)]
    if rows:
        worst = max(rows, key=lambda r: r[key] / r["shmem_notebook"])
        r = worst[key] / worst["shmem_notebook"]
        first = f" (its first restart {worst['restart']:.2f} s)" if key != "restart" else ""
        text = f"worst at {worst['n']} PEs: {worst[key]:.2f} s vs {worst['shmem_notebook']:.2f} s = {r:.2f}x{first}"
        yield Measurement("", {}, r, text)


def _restart_again_vs_start(st):
    return _restart_vs_start(st, "restart_again")


def _idle_cpu(st):
    idle = st["idle"].get("shmem_notebook")
    if idle:
        yield Measurement("", {"n": st["idle"]["n"]}, idle["cpu_percent"], f"{idle['cpu_percent']:.1f}% of one core")


def _dispatch(dp):
    worst = max(dp["rows"], key=lambda r: r["ratio_magic"])
    yield Measurement(
        "",
        {},
        worst["ratio_magic"],
        f"worst at {worst['n']} PEs: {worst['pxshmem_ms']:.1f} ms vs "
        f"{worst['px_ms']:.1f} ms = {worst['ratio_magic']:.2f}x",
    )


def _dispatch_zmq(dp):
    rows = [r for r in dp["rows"] if "ratio_zmq" in r]
    if rows:
        worst = max(rows, key=lambda r: r["ratio_zmq"])
        yield Measurement(
            "",
            {},
            worst["ratio_zmq"],
            f"worst at {worst['n']} PEs: {worst['pxshmem_ms']:.1f} ms vs {worst['zmq_ms']:.2f} ms = "
            f"{worst['ratio_zmq']:.1f}x (with IPython's `run_cell` in each process: {worst['zmq_ipython_ms']:.1f} ms)",
        )


def cell_vs_script(row, op, impl="cell", base="script"):
    """Performance of ``impl`` relative to ``base`` (>1: faster) for one data-path row."""
    return row["seconds"][f"{base}_{op}"] / row["seconds"][f"{impl}_{op}"]


def _datapath(data):
    r, op, size = min((cell_vs_script(row, op), op, row["size"]) for row in data["rows"] for op in ("put", "get"))
    row = next(row for row in data["rows"] if row["size"] == size)
    rounds = [row.get(k, {}).get(op) for k in ("cell_vs_script_by_round", "script_vs_itself_by_round")]
    noise = (
        f"; per round, cell / script {min(rounds[0]):.2f}-{max(rounds[0]):.2f}x, the script against itself "
        f"{min(rounds[1]):.2f}-{max(rounds[1]):.2f}x"
        if all(rounds)
        else ""
    )
    yield Measurement("", {}, r, f"worst: {op} {_size(size)} at {r:.2f}x{noise}")


def refresh_seconds(row):
    """One inspector refresh (gather + redraw); older runs timed the gathering alone."""
    return row.get("refresh_s", row["gather_snapshot_s"])


def _inspector_payload(insp):
    worst = max(insp["rows"], key=lambda r: r["payload_bytes"])
    yield Measurement(
        "",
        {},
        worst["payload_bytes"] / MiB,
        f"largest {worst['payload_bytes'] / MiB:.2f} MiB (at {_size(worst['array_bytes'])})",
    )


def _inspector_refresh(insp):
    for row in insp["rows"]:
        if row["array_bytes"] == 8 * MiB:
            yield Measurement("", {}, refresh_seconds(row), f"{refresh_seconds(row):.2f} s")


def _race_puts(races):
    row = next(r for r in races["rows"] if r["workload"] == "puts")
    yield Measurement(
        "",
        {"puts": races["puts"]},
        row.get("paired_ratio", row["ratio"]),
        f"{row['traced_s']:.2f} s vs {row['untraced_s']:.2f} s = {row['ratio']:.2f}x" + _paired(row),
    )


def _loops(races, keep):
    return [r for r in races.get("loops", []) if keep(r)]


def _race_stencil(races):
    for r in _loops(races, lambda r: r["workload"] == "stencil_loop"):
        yield Measurement(
            "",
            {"iterations": r["iterations"], "n": r["n"]},
            r.get("paired_ratio", r["ratio"]),
            f"{r['traced_s']:.2f} s vs {r['untraced_s']:.2f} s = {r['ratio']:.2f}x" + _paired(r),
        )


def paired(row):
    """``1.76x (quartiles 1.33-1.82)``: the row's paired ratio (the goal is checked on it: see
    bench/races.py), or None where it was not measured."""
    if "paired_ratio" not in row:
        return None
    low, high = row["paired_quartiles"]
    return f"{row['paired_ratio']:.2f}x (quartiles {low:.2f}-{high:.2f})"


def _paired(row):
    text = paired(row)
    return f"; paired {text}" if text else ""


def _race_scattered(races):
    for r in _loops(races, lambda r: r["workload"] == "scattered" and r["per_pe"] == 60_000):
        yield Measurement(
            "",
            {"puts": r["per_pe"]},
            r["analysis_s"],
            f"{r['analysis_s']:.2f} s ({r['analysis_cpu_s']:.2f} s CPU) for {r['events']:,} events",
        )


def _race_million(races):
    for r in _loops(races, lambda r: r["workload"] == "scattered" and r["per_pe"] >= 1_000_000):
        clear = r["capped"] and "in what was checked" in r["verdict"]
        yield Measurement(
            "", {"puts": r["per_pe"]}, float(clear), f"finished in {r['traced_s']:.1f} s: {r['verdict']!r}"
        )


def _measured(sc):
    return [r for r in sc["rows"] if "error" not in r]


def _scale_every_n(sc):
    failed = [r for r in sc["rows"] if "error" in r]
    yield Measurement(
        "",
        {},
        len(failed),
        "; ".join(f"{r['n']} PEs: {r['error']}" for r in failed)
        or f"all of {', '.join(str(r['n']) for r in sc['rows'])} PEs",
    )


def _scale_start(keep):
    return lambda sc: _scale_start_rows(sc, keep)


def _scale_start_rows(sc, keep):
    for r in _measured(sc):
        if r["n"] in (1, 4, 16, 32) and keep(r["n"]):
            x = r["start"] / r["floor"]
            cpu = (
                f"; CPU per PE to ready {r['pe_cpu']:.2f} s vs the floor's {r['floor_cpu']:.2f} s"
                if r.get("pe_cpu") and r.get("floor_cpu")
                else ""
            )
            yield Measurement(
                f"_{r['n']}", {"n": r["n"]}, x, f"{r['start']:.2f} s vs {r['floor']:.2f} s = {x:.2f}x{cpu}"
            )


def _scale_restart(spare):
    """The worst restart / start over N, of jobs started without or (``spare``) with ``--spare``."""
    healthy, crashed = ("restart_spare", "restart_crash_spare") if spare else ("restart", "restart_crash")

    def measure(sc):
        rows = [r for r in _measured(sc) if healthy in r]
        if rows:
            worst = max(rows, key=lambda r: max(r[healthy], r[crashed]) / r["start"])
            x = max(worst[healthy], worst[crashed]) / worst["start"]
            yield Measurement(
                "",
                {},
                x,
                f"worst at {worst['n']} PEs: restart {worst[healthy]:.2f} s, after a crash "
                f"{worst[crashed]:.2f} s, start {worst['start']:.2f} s ({x:.2f}x)",
            )

    return measure


def _scale_dispatch(keep):
    def measure(sc):
        for r in _measured(sc):
            if keep(r["n"]):
                x = r["pxshmem_ms"] / r["view_execute_ms"]
                yield Measurement(
                    f"_{r['n']}",
                    {"n": r["n"]},
                    x,
                    f"{r['pxshmem_ms']:.1f} ms vs {r['view_execute_ms']:.1f} ms = {x:.2f}x",
                )

    return measure


def _scale_gather(sc):
    g = sc.get("gather")
    if g:
        x = g["ours_gbps"] / g["numpy_copy_gbps"]
        yield Measurement(
            "",
            {"size": _size(g["bytes_per_pe"]), "n": g["n"]},
            x,
            f"{g['ours_gbps']:.2f} GB/s vs {g['numpy_copy_gbps']:.2f} GB/s = {x:.2f}x",
        )


def _scale_gather_fresh(sc):
    g = sc.get("gather")
    if g and g.get("numpy_fresh_copy_gbps"):
        x = g["ours_gbps"] / g["numpy_fresh_copy_gbps"]
        yield Measurement(
            "",
            {"size": _size(g["bytes_per_pe"]), "n": g["n"]},
            x,
            f"{g['ours_gbps']:.2f} GB/s vs {g['numpy_fresh_copy_gbps']:.2f} GB/s = {x:.2f}x",
        )


def _scale_output(sc):
    o = sc.get("output")
    if o:
        x = o["pxshmem_s"] / o["px_s"]
        complete = "every line in order" if o["complete"] else "LINES MISSING OR OUT OF ORDER"
        # lines missing or out of order miss the goal whatever the time
        yield Measurement(
            "",
            {"lines": o["lines"], "n": o["n"]},
            x if o["complete"] else float("inf"),
            f"{o['pxshmem_s']:.2f} s vs {o['px_s']:.2f} s = {x:.2f}x; {complete}",
        )


def _libraries_every_measure(lib):
    failed = [
        f"{config} at {n} PEs: {error}" for config, per_n in lib.get("errors", {}).items() for n, error in per_n.items()
    ]
    built = [name for name, d in lib["libraries"].items() if d["built"]]
    if built:
        yield Measurement(
            "",
            {},
            len(failed),
            "; ".join(failed)
            or f"{', '.join(built)} at {', '.join(map(str, lib['ns']))} PEs"
            + "".join(f"; {name} not built" for name, d in lib["libraries"].items() if not d["built"]),
        )


def _sos_vs_oshmem(lib):
    """SOS / OSHMEM, each row of issue 46's target: put and get 8 B-1 MiB at 2 PEs, barrier_all and
    fcollect 8 B at every N; measured only on an SOS built with shared heaps (the other build is libfabric's
    sockets: a network's library on one node, by design 100-1,000x slower)."""
    sos, pes = lib["libraries"].get("sos", {}), lib.get("pes", {})
    if not sos.get("built") or "sos" not in pes or "oshmem" not in pes:
        return
    if not sos.get("shares_heaps"):
        yield Measurement(
            "",
            {},
            None,
            "not measured: SOS here is built over libfabric's sockets "
            "(SOS_SHARED_HEAPS=1 scripts/build_sos.sh builds the one-node one)",
        )
        return
    ratios = []
    for op in ("put", "get"):
        for size in map(str, lib["sizes"]):
            a, b = (
                pes[c].get("2", {}).get("putget", {}).get(op, {}).get(size, {}).get("us") for c in ("sos", "oshmem")
            )
            if a and b:
                ratios.append((a / b, f"{op} {_size(int(size))} at 2 PEs", a, b))
    for n in map(str, lib["ns"]):
        for case, what in (("barrier_all", "barrier_all"), ("fcollect/8", "fcollect 8 B")):
            a, b = (pes[c].get(n, {}).get("collectives", {}).get(case, {}).get("us") for c in ("sos", "oshmem"))
            if a and b:
                ratios.append((a / b, f"{what} at {n} PEs", a, b))
    if ratios:
        worst = max(ratios)
        text = f"worst: {worst[1]}, {worst[2]:.2f} us vs {worst[3]:.2f} us = {worst[0]:.2f}x"
        yield Measurement("", {}, worst[0], text + f"; all {len(ratios)} rows {min(ratios)[0]:.2f}-{worst[0]:.2f}x")


#: every goal of the benchmarks, in the order the goals table lists them
def _student(key, unit, floor_key=None):
    def measure(st):
        s = st["summary"]
        value = s[key]
        text = f"{value:.2f}{unit}" if isinstance(value, float) and key == "cpu" else f"{value:.0f}{unit}"
        if floor_key:
            text += f" vs a plain oshrun's {s[floor_key]:.2f}{unit} = {value / s[floor_key]:.1f}x"
        yield Measurement("", {}, value, text + f" (median of {len(st['rows'])}, load {s['load']:.0f})")

    return measure


GOALS = [
    Goal(
        "start_vs_ipp_mpi",
        "startup",
        "start, {n} PEs: <= {limit}x ipyparallel's MPI launcher ({label})",
        0.5,
        "lower",
        _start_vs_ipp_mpi,
    ),
    Goal(
        "start_vs_floor", "startup", "start, {n} PEs: <= {limit}x the bare oshrun floor", 1.5, "lower", _start_vs_floor
    ),
    Goal(
        "restart_vs_start",
        "startup",
        "restart faster than a cold start (every N): < {limit}x",
        0.7,
        "below",
        _restart_vs_start,
    ),
    Goal(
        "restart_again_vs_start",
        "startup",
        "a job's second restart faster than a cold start (every N): < {limit}x",
        0.7,
        "below",
        _restart_again_vs_start,
    ),
    Goal(
        "idle_cpu", "startup", "idle CPU of a running {n}-PE job ~0% (<= {limit}% of one core)", 5, "lower", _idle_cpu
    ),
    Goal("dispatch", "dispatch", "no-op `%%pxshmem` <= {limit}x no-op `%%px` (every N)", 1.1, "lower", _dispatch),
    Goal(
        "noop_vs_zmq",
        "dispatch",
        "no-op `%%pxshmem` <= {limit}x a bare ZeroMQ round trip to as many processes (every N)",
        5,
        "lower",
        _dispatch_zmq,
    ),
    Goal(
        "datapath",
        "datapath",
        "put/get from a cell >= {limit}x the plain script (every size)",
        0.95,
        "higher",
        _datapath,
    ),
    Goal(
        "inspector_payload",
        "inspector",
        "inspector payload about 1 MiB at every array size (<= {limit} MiB)",
        1.1,
        "lower",
        _inspector_payload,
    ),
    Goal(
        "inspector_refresh", "inspector", "inspector refresh under {limit} s at 8 MiB", 1, "below", _inspector_refresh
    ),
    Goal(
        "race_puts",
        "races",
        "race check on {puts:,} 8-byte puts + barrier: <= {limit}x the untraced cell",
        1.5,
        "lower",
        _race_puts,
    ),
    Goal(
        "race_stencil",
        "races",
        "race check on the 1-D stencil, {iterations} iterations, {n} PEs: <= {limit}x the untraced cell",
        1.5,
        "lower",
        _race_stencil,
    ),
    Goal(
        "race_scattered", "races", "{puts:,} scattered puts per PE analysed in < {limit} s", 2, "below", _race_scattered
    ),
    Goal(
        "race_million",
        "races",
        "a cell of {puts:,} puts per PE finishes with a clear (partial) report",
        1,
        "higher",
        _race_million,
    ),
    Goal(
        "scale_every_n", "scale", "every scale measurement at every N (failures <= {limit})", 0, "lower", _scale_every_n
    ),
    Goal(
        "start_few_pes",
        "scale",
        "start to ready, {n} PEs: <= {limit}x the oshrun floor",
        1.5,
        "lower",
        _scale_start(lambda n: n <= 4),
    ),
    Goal(
        "scale_start",
        "scale",
        "start to ready, {n} PEs: <= {limit}x the oshrun floor",
        2,
        "lower",
        _scale_start(lambda n: n > 4),
    ),
    Goal(
        "scale_restart",
        "scale",
        "restart faster than start at every N (healthy and after a crash): < {limit}x",
        0.7,
        "below",
        _scale_restart(spare=False),
    ),
    Goal(
        "restart_with_spare",
        "scale",
        "restart of a job started with --spare, at every N (healthy and after a crash): < {limit}x start",
        0.7,
        "below",
        _scale_restart(spare=True),
    ),
    Goal(
        "scale_dispatch_few",
        "scale",
        "no-op `%%pxshmem`, {n} PEs: <= {limit}x `DirectView.execute`",
        1.1,
        "lower",
        _scale_dispatch(lambda n: n <= 4),
    ),
    Goal(
        "scale_dispatch_many",
        "scale",
        "no-op `%%pxshmem`, {n} PEs: <= {limit}x `DirectView.execute`",
        0.6,
        "lower",
        _scale_dispatch(lambda n: n >= 16),
    ),
    Goal(
        "scale_gather",
        "scale",
        "`%shmem gather` {size} per PE at {n} PEs: >= {limit}x NumPy copy bandwidth",
        0.25,
        "higher",
        _scale_gather,
    ),
    Goal(
        "gather_vs_fresh_copy",
        "scale",
        "`%shmem gather` {size} per PE at {n} PEs: >= {limit}x a NumPy copy into new memory",
        0.8,
        "higher",
        _scale_gather_fresh,
    ),
    Goal(
        "scale_output",
        "scale",
        "{lines:,} lines per PE at {n} PEs: every line, in order, <= {limit}x `%%px`",
        2,
        "lower",
        _scale_output,
    ),
    Goal(
        "libraries_every_measure",
        "libraries",
        "every library comparison measurement on every built library (failures <= {limit})",
        0,
        "lower",
        _libraries_every_measure,
    ),
    Goal(
        "sos_vs_oshmem",
        "libraries",
        "Sandia OpenSHMEM with shared heaps: put/get 8 B-1 MiB, barrier_all, fcollect 8 B at 2 and 4 PEs: "
        "<= {limit}x OSHMEM",
        3,
        "lower",
        _sos_vs_oshmem,
    ),
]
GOALS += [
    Goal(
        "student_cpu",
        "student",
        "a 2-PE job to its first cell's answer: <= {limit} CPU-seconds in all its processes, client included",
        1.5,
        "lower",
        _student("cpu", " s", "floor_cpu"),
    ),
    Goal(
        "student_processes",
        "student",
        "a 2-PE job: <= {limit} processes beside the kernel",
        6,
        "lower",
        _student("processes", "", "floor_processes"),
    ),
    Goal(
        "student_uss",
        "student",
        "a 2-PE job at its first cell's answer: <= {limit} MiB unique memory (USS) beside the kernel",
        120,
        "lower",
        _student("uss_mib", " MiB", "floor_uss_mib"),
    ),
]
BY_ID = {g.id: g for g in GOALS}


class _Placeholder(str):
    """``N`` whatever the format spec (``{puts:,}``)."""

    def __format__(self, spec):
        return str(self)


class _Unknown(dict):
    """The fields of a wording that a section not measured cannot give: ``start, N PEs``."""

    def __missing__(self, key):
        return _Placeholder("N")


def _unavailable(section):
    return not section or section.get("available") is False


def evaluate(results):
    """``[{id, goal, measured, ok}]``: every goal, measured in ``results`` or listed as not measured."""
    out = []
    for goal in GOALS:
        section = results.get(goal.section)
        found = [] if _unavailable(section) else list(goal.measure(section))
        if not found:
            reason = section.get("reason") if section and section.get("available") is False else None
            out.append(
                {
                    "id": goal.id,
                    "goal": goal.wording.format_map(_Unknown(limit=goal.limit)),
                    "measured": f"not measured ({reason})" if reason else "not measured",
                    "ok": None,
                }
            )
            continue
        for m in found:
            out.append(
                {
                    "id": goal.id + m.suffix,
                    "goal": goal.wording.format(limit=goal.limit, **m.fields),
                    "measured": m.text,
                    "ok": met(goal, m.value),
                }
            )
    return out


# -- why a goal is missed (docs) -----------------------------------------------------------
def _f(x):
    return "-" if x is None else f"{x:.2f}"


def _startup_why(results):
    prof = results.get("startup", {}).get("profile", {})
    start, plain = prof.get("start", {}), prof.get("plain_processes", {})
    floor, imports = plain.get("oshrun python + shmem_init (the floor)"), plain.get("floor + a PE's imports")
    return (
        f"Of `%shmem start`'s {_f(start.get('total'))} s at {prof.get('n')} PEs, "
        f"{_f(start.get('PEs start, import, register'))} s "
        f"are the PEs starting, importing and registering after the controller is up (its start, "
        f"{_f(start.get('wait for controller files'))} s, runs while the PEs initialise OpenSHMEM). The PEs' own "
        f"imports (ipyparallel, IPython, ipykernel, zmq: {_f(imports)} s for the floor plus imports against "
        f"{_f(floor)} s for the floor) and OpenSHMEM's initialisation (floor {_f(floor)} s against "
        f"{_f(plain.get('oshrun python -c pass'))} s for `python -c pass`) are CPU-bound, and "
        f"{prof.get('n')} PEs share {results['meta']['machine']['cores']} cores."
    )


def _scale_restart_why(results):
    st = results.get("startup", {}).get("rows", [])
    same = "".join(
        f" The startup section of the same run, in its own repeats, measured restart {r['restart']:.2f} s "
        f"against start {r['shmem_notebook']:.2f} s at {r['n']} PEs."
        for r in st[-1:]
    )
    return (
        "restart keeps the controller and the watchdog, kills the old PEs (their `shmem_finalize` is not "
        "waited for) and reaps that oshrun later: it is the new PEs' start alone. A cold start hides the "
        "controller's start behind the PEs', so the two differ by the controller's CPU, shared by the cores; "
        "with few repeats that difference is within the spread of single starts." + same + " A job started with "
        "`--spare` has its next PEs started ahead (the next goal)."
    )


def _scale_failed_why(results):
    load = results["meta"]["machine"].get("load_average_1min")
    return (
        f"the PEs did not all register within the start timeout (load average {_f(load)} at the start of the run); "
        "raise it with SHMEM_NOTEBOOK_START_TIMEOUT on busy login nodes."
    )


def _restart_why(results):
    prof = results.get("startup", {}).get("profile", {})
    start, restart = prof.get("start", {}), prof.get("restart", {})
    pes = "PEs start, import, register"
    return (
        f"restart keeps the controller and the watchdog, kills the old PEs and starts the new ones at once. At "
        f"{prof.get('n')} PEs the new PEs' start (process, `shmem_init`, imports, registration) took "
        f"{_f(restart.get(pes))} s of restart's {_f(restart.get('total'))} s, and {_f(start.get(pes))} s of a cold "
        f"start's {_f(start.get('total'))} s: "
        "what restart skips, the controller's start, runs beside the PEs' in a cold start. A new OpenSHMEM job "
        "needs new processes (`shmem_init` once per process): `--spare` keeps a second set of PEs started ahead, "
        "imports done (twice the processes, not the heaps), and a restart takes it (the scale section measures it). "
        "A healthy job with no more PEs than cores has no fork server until its first restart, which starts one: "
        "a student who never restarts does not pay for it, and the later restarts fork their PEs (the next row). "
        "A job whose PEs died or hung starts its server then, and its restart forks (about half a start)."
    )


def _dispatch_zmq_why(results):
    rows = [r for r in results["dispatch"]["rows"] if "zmq_ms" in r]
    r = max(rows, key=lambda r: r["ratio_zmq"])
    return (
        f"the bare trip only passes a message. A cell runs in IPython on every PE (`run_cell` with its hooks, "
        f"history and output capture) and each PE sends back its outcome; the client checks the PEs and merges "
        f"their output in order. At {r['n']} PEs IPython's `run_cell('pass')` behind the same ZeroMQ trip "
        f"took {_f(r['zmq_ipython_ms'])} ms, the bare trip {_f(r['zmq_ms'])} ms, `%%pxshmem` {_f(r['pxshmem_ms'])} ms "
        "and `job.run` "
        f"{_f(r['job_run_ms'])} ms; with more PEs than cores every PE's CPU adds up."
    )


def _gather_fresh_why(results):
    g = results["scale"]["gather"]
    return (
        "each byte is copied once, into the new result: with Open MPI's OSHMEM by NumPy from the PEs' SysV heap "
        "segments, attached here at the first gather (which maps their pages); with the other libraries by "
        "`process_vm_readv`, which pins the PEs' pages a few at a time and walks their page tables. "
        f"Measured: {_f(g['ours_gbps'])} GB/s against {_f(g['numpy_fresh_copy_gbps'])} GB/s for the fresh copy; "
        f"the /dev/shm route (the PEs write, the result maps the file) {_f(g['file_gbps'])} GB/s."
    )


def _race_puts_why(results):
    r = next(r for r in results["races"]["rows"] if r["workload"] == "puts")
    python = f" ({_f(r['python_ratio'])}x with the recording in Python)" if "python_ratio" in r else ""
    return (
        f"recording costs less than the put now{python}: the wrapper that finds the call's cell line and the "
        "handler that merges the put into the last event of that line are C (`native_record`), and so are the hooks "
        "of the loop's slice and names. What is left is done through CPython's object API for every put: looking up "
        "the two arrays' addresses, building the merge key, counting the operation."
    )


def _student_why(results, measure):
    s = results["student"]["summary"]
    cpu, uss = s["by_kind_cpu"], s["by_kind_uss_mib"]
    if measure == "cpu":
        return (
            f"the PEs took {_f(cpu.get('PE'))} CPU-s of the job's {_f(s['cpu'])}, against {_f(s['floor_cpu'])} for "
            "the floor's whole `oshrun`: each PE is an ipyparallel engine that imports and builds an IPython shell, "
            f"ipykernel's kernel and ipyparallel's registration. The client took {_f(cpu.get('client'))}, the "
            f"controller {_f(cpu.get('controller'))}. The CPU-seconds follow the machine's speed of the day "
            f"and its load (load average {_f(s['load'])} during this run) as much as the job: the floor's CPU "
            "moves with them (see *The CPU goal and this machine* above)."
        )
    return (
        f"the two PEs hold {_f(uss.get('PE'))} MiB of the {_f(s['uss_mib'])}: each imports NumPy, IPython, ipykernel, "
        f"zmq, tornado and ipyparallel's engine; the controller {_f(uss.get('controller'))} MiB, `oshrun` "
        f"{_f(uss.get('oshrun'))} MiB, the watchdog {_f(uss.get('watchdog'))} MiB (see *One student's job* above)."
    )


def _race_stencil_why(results):
    r = next((r for r in results["races"].get("loops", []) if r["workload"] == "stencil_loop"), {})
    python = f" ({_f(r['python_ratio'])}x with the recording in Python)" if "python_ratio" in r else ""
    return (
        f"the traced loop is recorded in C (`native_record`){python}, but an iteration still notes each of its "
        f"calls, slices and loads, and with {r.get('n')} PEs on {results['meta']['machine']['cores']} "
        "cores every microsecond one PE spends recording is waited for by the others at the next barrier, spinning "
        "on the cores the recording PE needs. The analysis after the cell is a small part (its column). The runs "
        "are bimodal (a third of them, traced or not, take twice as long), and an A/B against the commit before "
        "issue 48's changes gave the same ratio: see *The stencil's race check, measured apart* above."
    )


#: goal id prefix -> a function of the results giving the paragraph on why it is missed
WHY = {
    "start_vs_ipp_mpi": lambda res: (
        "ipyparallel's MPI launcher starts the same kind of engine (Python, ipyparallel, a kernel) under `mpiexec`; "
        "with the same heartbeat period both are bound by that start-up (ours runs without the nanny process each "
        "engine otherwise spawns), so half of it is out of reach while PEs are ipyparallel engines. "
        + _startup_why(res)
    ),
    "start_vs_floor": lambda res: "the floor only starts Python and initialises OpenSHMEM. " + _startup_why(res),
    "restart_vs_start": lambda res: _restart_why(res),
    "restart_again_vs_start": lambda res: (
        "the second restart forks its PEs from the fork server the first one started; a server that is still "
        "importing when the restart comes (less than a second after the first) makes it wait, and with more PEs "
        "than cores the new PEs' `shmem_init` and registration need the cores one after another. " + _restart_why(res)
    ),
    "idle_cpu": lambda res: (
        "the heartbeat wakes the controller and every engine at each beat; `SHMEM_NOTEBOOK_HEARTBEAT_MS` trades "
        "idle CPU against start-up time."
    ),
    "noop_vs_zmq": lambda res: _dispatch_zmq_why(res),
    "gather_vs_fresh_copy": lambda res: _gather_fresh_why(res),
    "dispatch": lambda res: (
        "`%%pxshmem` goes through `Job.run` (process checks, declared arrays, output merging, the wait for every "
        "line of output) where `%%px` only waits on the AsyncResult; on a no-op cell of a few ms that bookkeeping "
        "shows."
    ),
    "datapath": lambda res: (
        "the cell runs the same shmem4py code in the same kind of process with the same environment, behind the "
        "tool's argument checks (a PE that does not exist, mismatched dtypes or lengths, a remote buffer that is "
        "not symmetric: one sentence instead of a dead job), ten times what a wrapper that only passes the call "
        "on costs (docs/benchmarks.md measures both): a tenth of an 8-byte put and its quiet, nothing at 64 KiB "
        "and above. Otherwise a miss is noise from the other processes on this machine: per round (the "
        "goals table), the plain script run twice differs from itself as much as the cell differs from it."
    ),
    "inspector_payload": lambda res: "the snapshot exceeded its budget at this size.",
    "sos_vs_oshmem": lambda res: (
        "SOS's waits poll and give their core away (a yield every 16 polls, a sleep after 64 yields), OSHMEM's "
        "spin: with more PEs than cores, or other work on the machine, a PE SOS waits for may not get a core for a "
        "while. On a quiet machine every row was within 2x (docs/benchmarks.md, *Sandia OpenSHMEM with shared "
        "heaps*); binding the PEs (`bind_to='core'`) steadies the 4-PE barrier."
    ),
    "inspector_refresh": lambda res: "most of a refresh is summarising arrays on the PEs and redrawing the figures.",
    "race_puts": lambda res: _race_puts_why(res),
    "race_stencil": lambda res: _race_stencil_why(res),
    "student_cpu": lambda res: _student_why(res, "cpu"),
    "student_uss": lambda res: _student_why(res, "uss"),
    "student_processes": lambda res: (
        "the job's processes are the watchdog, the controller, the launcher and one per PE; "
        "a count above that is a helper process that should be a thread."
    ),
    "race_scattered": lambda res: (
        "the analysis is linear in the events (one simulation step and one shadow lookup each); on a loaded "
        "machine its wall time exceeds its CPU time, shown next to it."
    ),
    "race_million": lambda res: "the traced cell did not end with a report saying what was checked.",
    "scale_every_n": _scale_failed_why,
    "scale_start": lambda res: (
        "every PE is an ipyparallel engine: a Python process that imports ipyparallel's engine, IPython, ipykernel, "
        "tornado and zmq (in a thread, while `shmem_init` waits) and builds an IPython shell; the CPU per PE "
        "measured above is that against the floor's. With more PEs than cores the CPU adds up PE by PE, so the "
        "ratio tends to the CPU ratio, and the wait the imports overlap is no longer idle. What is left is the "
        "engine itself, which goes only if PEs stop being ipyparallel engines (docs/benchmarks.md, *Start, "
        "restart, dispatch and gather against their limits*)."
    ),
    "start_few_pes": lambda res: WHY["scale_start"](res),
    "scale_restart": _scale_restart_why,
    "restart_with_spare": lambda res: (
        "the spare PEs still run `shmem_init` and register after the restart asks them: on 2 cores the N new "
        "PEs' initialisation shares the CPU with the old PEs' end and the next spare set's imports."
    ),
    "scale_dispatch": lambda res: (
        "cells go to the PEs over the job's own channel, not through the controller; what is left per PE is "
        "IPython's `run_cell` and the messages of each PE, and with more PEs than cores their CPU adds up."
    ),
    "scale_gather": lambda res: (
        "one copy per byte is left, into the result, whose pages are new and faulted in as they are written, "
        "while the baseline copies into memory already mapped; the first gather of a job also maps the PEs' "
        "heap pages here (OSHMEM), and with the other libraries `process_vm_readv` walks each PE's page tables."
    ),
    "libraries_every_measure": lambda res: (
        "a job on that library did not start or a measurement in its PEs raised; the error is listed under the "
        "library table."
    ),
    "scale_output": lambda res: (
        "each PE gathers output into one message per 10 ms; the kernel merges the lines across PEs and writes "
        "them in rounds."
    ),
}


def why(goal, results):
    """One paragraph on why ``goal`` (a row of :func:`evaluate`) is missed, from this run's numbers."""
    for prefix in sorted(WHY, key=len, reverse=True):
        if goal["id"].startswith(prefix):
            return WHY[prefix](results)
    return ""
