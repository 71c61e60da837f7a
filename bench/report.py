"""The Markdown tables (printed and put in docs/benchmarks.md) and the plot; the goals are ``goals.py``."""

import re

import goals
from goals import BY_ID, cell_vs_script, met, refresh_seconds

GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10


def size_text(n):
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


def f(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "**MISSED**")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


#: how `%shmem gather` moved a large array (Job.last_gather), as the report says it
GATHER_ROUTES = {
    "memory": "the client copies each PE's array straight from the PE's memory (OSHMEM's SysV heap segments "
    "attached here read-only; `process_vm_readv` for the other libraries): one copy, into the new result; "
    "nothing is copied on the PEs.",
    "file": "each PE writes its array, from symmetric memory, at its offset in one file in `/dev/shm` that the "
    "result maps: one copy, on the PEs.",
    "message": "ipyparallel's messages.",
}


# -- the tables --------------------------------------------------------------
def startup_tables(st):
    def ratio(r, key):
        return f"{r['shmem_notebook'] / r[key]:.2f}x" if r.get(key) else "-"

    rows = []
    for r in st["rows"]:
        rows.append(
            [
                r["n"],
                f(r["shmem_notebook"]),
                f(r["restart"]),
                f(r.get("restart_again")),
                f(r["stop"]),
                f(r["floor"]),
                f(r.get("ipp_local_tuned")),
                f(r.get("ipp_local_default")),
                f(r.get("ipp_mpi_tuned")),
                f(r.get("ipp_mpi_default")),
                f"{ratio(r, 'ipp_mpi_tuned')} / {ratio(r, 'ipp_mpi_default')}",
                ratio(r, "floor"),
            ]
        )
    text = [
        f"**Start to ready**, seconds, median of {st['repeats']} (every PE answered one round trip). "
        f"*tuned*: {st['tuned']}; *defaults*: {st['default']}. *the second restart*: the same job's, "
        f"{st.get('again_after', 2.0):g} s after its first (a job that restarted once forks the PEs of its later "
        "restarts from a fork server it started then: `job/forks.py`).\n",
        table(
            [
                "PEs",
                "`%shmem start`",
                "`%shmem restart`",
                "the second restart",
                "`%shmem stop`",
                "oshrun floor",
                "ipp local tuned",
                "ipp local defaults",
                "ipp MPI tuned",
                "ipp MPI defaults",
                "start / ipp MPI (tuned / defaults)",
                "start / floor",
            ],
            rows,
        ),
    ]
    idle = st["idle"]
    names = {
        "shmem_notebook": "shmem_notebook",
        "ipp_local_tuned": "ipp local tuned",
        "ipp_local_default": "ipp local defaults",
        "ipp_mpi_tuned": "ipp MPI tuned",
    }
    irows = [
        [label, f(idle[k]["cpu_percent"], 1), f(idle[k]["engine_rss_mib"], 1)]
        for k, label in names.items()
        if k in idle
    ]
    text += [
        f"\n**Idle**, {idle['n']} engines, {idle['seconds']:g} s: CPU of controller + launcher + engines "
        "(% of one core) and RSS of one idle engine.\n",
        table(["running job", "idle CPU %", "engine RSS MiB"], irows),
    ]
    prof = st["profile"]
    prows = [[f"start: {k}", f(v)] for k, v in prof["start"].items()]
    prows += [[f"restart: {k}", f(v)] for k, v in prof["restart"].items()]
    prows += [[f"stop: {k}", f(v)] for k, v in prof["stop"].items()]
    prows += [[f"plain: {k}", f(v)] for k, v in prof["plain_processes"].items()]
    prows += [[f"experiment: {k}", f(v)] for k, v in prof.get("experiments", {}).items()]
    text += [
        f"\n**Where `%shmem start` goes**, {prof['n']} PEs, median seconds per step (steps of the real "
        "code path, timed by wrapping them; *wait for controller files* is part of the step that calls it; "
        "*plain* = the same PEs without ipyparallel"
        + (
            "; *experiment* = start-to-ready of the same cluster with one change, side by side"
            if prof.get("experiments")
            else ""
        )
        + ").\n",
        table(["step", "seconds"], prows),
    ]
    return "\n".join(text)


def dispatch_table(dp):
    rows = [
        [
            r["n"],
            f(r["pxshmem_ms"]),
            f(r["px_ms"]),
            f"{r['ratio_magic']:.2f}x",
            f(r["job_run_ms"]),
            f(r["view_execute_ms"]),
            f"{r['ratio_api']:.2f}x",
            verdict(met("dispatch", r["ratio_magic"])),
            *([f(r["zmq_ms"]), f(r["zmq_ipython_ms"]), f"{r['ratio_zmq']:.1f}x"] if "zmq_ms" in r else []),
        ]
        for r in dp["rows"]
    ]
    zmq = "zmq_ms" in dp["rows"][0]
    return (
        f"**Dispatch**: a no-op cell, round trip in ms, median of {dp['cells']} (interleaved, same engines).\n\n"
        + table(
            [
                "PEs",
                "`%%pxshmem`",
                "`%%px`",
                "ratio",
                "`job.run`",
                "`view.execute`",
                "ratio",
                f"goal <= {BY_ID['dispatch'].limit}x (magics)",
                *(["bare ZeroMQ trip", "ZeroMQ + IPython `run_cell`", "`%%pxshmem` / bare"] if zmq else []),
            ],
            rows,
        )
        + (
            "\n\n*bare ZeroMQ trip*: this process's ROUTER to as many plain Python processes' DEALERs, each "
            "answering at once; *+ IPython `run_cell`*: each runs `run_cell('pass')` first (bench/dispatch.py).\n"
            if zmq
            else ""
        )
    )


def datapath_table(data):
    rows = []
    for row in data["rows"]:
        size = row["size"]
        for op in ("put", "get"):
            impls = ("cell", "script", "c", "ompidefault")
            if size == 8:
                cells = [
                    f"{row['seconds'][f'{impl}_{op}'] * 1e6:.2f} us"
                    for impl in impls
                    if f"{impl}_{op}" in row["seconds"]
                ]
                copies = [f"{row['seconds']['c_memcpy'] * 1e6:.3f} us", f"{row['seconds']['numpy_copy'] * 1e6:.3f} us"]
            else:
                cells = [f"{row['gbps'][f'{impl}_{op}']:.2f}" for impl in impls if f"{impl}_{op}" in row["gbps"]]
                copies = [f"{row['gbps']['c_memcpy']:.2f}", f"{row['gbps']['numpy_copy']:.2f}"]
            r = cell_vs_script(row, op, "cell")
            rows.append(
                [
                    op,
                    size_text(size),
                    *cells,
                    *copies,
                    f"{r:.2f}x",
                    f"{cell_vs_script(row, op, 'c'):.2f}x",
                    verdict(met("datapath", r)),
                ]
            )
    return (
        "**Data path**, PE 0 -> PE 1 of 2 PEs: latency at 8 B (us per operation), else bandwidth in GB/s "
        f"(10^9 B/s); put = put + quiet; median over {data['rounds']} interleaved rounds x {data['repeats']} "
        "repeats. Script and C run with the environment the launcher gives the PEs; *script, Open MPI "
        "defaults* without its transport settings. memcpy and NumPy copies are local: the machine's limit.\n\n"
        + table(
            [
                "op",
                "size",
                "`%%pxshmem` cell",
                "plain oshrun script",
                "C (oshcc)",
                *(["script, Open MPI defaults"] if "ompidefault_put" in data["rows"][0]["seconds"] else []),
                "memcpy (C)",
                "NumPy copy",
                "cell / script",
                "C / script",
                f"goal >= {BY_ID['datapath'].limit}x",
            ],
            rows,
        )
    )


def inspector_table(insp):
    if not insp.get("available"):
        return "**Inspector**: inspector: not available"
    rows = []
    for r in insp["rows"]:
        rows.append(
            [
                size_text(r["array_bytes"]),
                f(r.get("refresh_s")),
                f(r["gather_snapshot_s"]),
                f"{r['payload_bytes'] / KiB:.0f} KiB",
                f(r["gather_s"]),
                size_text(r["gather_bytes"]),
                verdict(
                    met("inspector_payload", r["payload_bytes"] / MiB)
                    and (r["array_bytes"] != 8 * MiB or met("inspector_refresh", refresh_seconds(r)))
                ),
            ]
        )
    return (
        f"**Inspector**, {insp['n']} PEs, one float64 array per PE, median of {insp['repeats']}: "
        "one widget refresh (gather + redraw), the gathering alone and the bytes the PEs sent, against "
        "`%shmem gather` of the whole array.\n\n"
        + table(
            [
                "array per PE",
                "refresh s",
                "gather_snapshot s",
                "payload",
                "`%shmem gather` s",
                "gather moves",
                f"goal (<= {BY_ID['inspector_payload'].limit} MiB; < {BY_ID['inspector_refresh'].limit} s at 8 MiB)",
            ],
            rows,
        )
    )


def memory_table(mem, startup=None):
    rows = [[f"idle PE ({mem['n']} PEs), median", f(mem["pe_rss_median_mib"], 1)]]
    if startup and "ipp_local_tuned" in startup["idle"]:
        rows.append(
            [
                "idle ipyparallel engine (local, no OpenSHMEM)",
                f(startup["idle"]["ipp_local_tuned"]["engine_rss_mib"], 1),
            ]
        )
    rows += [
        ["client (IPython shell) before `%shmem start`", f(mem["client_rss_before_start_mib"], 1)],
        ["client after start", f(mem["client_rss_after_start_mib"], 1)],
        [f"client after {mem['cells']} `%%pxshmem` cells", f(mem["client_rss_after_cells_mib"], 1)],
        ["client growth per `%%pxshmem` cell (KiB)", f(mem["client_growth_per_cell_kib"], 1)],
    ]
    if "px_growth_per_cell_kib" in mem:
        rows.append(["client growth per `%%px` cell, same cells (KiB)", f(mem["px_growth_per_cell_kib"], 1)])
    return "**Memory**, RSS in MiB.\n\n" + table(["what", "RSS"], rows)


PYTHON_RATIO = (
    "*ratio, Python*: the same ratio in a job whose PEs record in Python (`SHMEM_NOTEBOOK_NATIVE=no-record`), "
    "the baseline of the recording's C hot path (`native_record`). *paired ratio*: the median of each traced run "
    "over the untraced run just before it, with its quartiles: a drift of the machine's speed during the runs "
    "moves it less than the ratio of the medians, and the goals are checked on it."
)


def _python_ratio(row):
    return f"{row['python_ratio']:.2f}x" if "python_ratio" in row else "-"


def races_table(races):
    names = {
        "puts": f"(a) {races['puts']:,} 8-byte puts + barrier",
        "stencil": f"(b) 1-D stencil, {races['size']:,} elements per PE, halo puts, {races['sweeps']} sweeps",
    }
    rows = [
        [
            names[r["workload"]],
            f(r["untraced_s"], 3),
            f(r["traced_s"], 3),
            f"{r['ratio']:.2f}x",
            goals.paired(r) or "-",
            _python_ratio(r),
            f(r["untraced_loop_s"] * 1e3, 1),
            f(r["traced_loop_s"] * 1e3, 1),
            f"{r['loop_ratio']:.1f}x",
        ]
        for r in races["rows"]
    ]
    return (
        f"**Race check**, {races['n']} PEs, median of {races['repeats']} interleaved runs: the whole `job.run` "
        f"(s) with and without `race=True`, and the loop alone timed inside the cell (ms). The put loop's "
        f"{races['put_loop_ops']:,} recorded operations came back as {races['put_loop_events']} events "
        f"({races['put_loop_payload_bytes']:,} bytes) after summarising by ranges. {PYTHON_RATIO}\n\n"
        + table(
            [
                "cell",
                "untraced s",
                "traced s",
                "ratio",
                "paired ratio",
                "ratio, Python",
                "loop untraced ms",
                "loop traced ms",
                "loop ratio",
            ],
            rows,
        )
        + loops_table(races)
    )


def loops_table(races):
    """The issue-20 loops: untraced vs traced side by side, the analysis alone, the verdict."""
    if not races.get("loops"):
        return ""
    rows = []
    for r in races["loops"]:
        name = (
            f"1-D stencil, halo exchange, {r['iterations']} iterations"
            if r["workload"] == "stencil_loop"
            else f"{r['per_pe']:,} scattered puts per PE"
        )
        rows.append(
            [
                name,
                str(r["n"]),
                f(r["untraced_s"], 2),
                f(r["traced_s"], 2),
                f"{r['ratio']:.1f}x",
                goals.paired(r) or "-",
                _python_ratio(r),
                f(r["analysis_s"], 2),
                f(r["analysis_cpu_s"], 2),
                f"{r['events']:,}",
                r["verdict"],
            ]
        )
    load = ", ".join(f"{r['load_average_1min']}" for r in races["loops"] if "load_average_1min" in r)
    stencil = next((r for r in races["loops"] if r["workload"] == "stencil_loop" and r.get("repeats")), None)
    return (
        "\n\nThe loops of issue 20, median of interleaved runs"
        + (f" ({stencil['repeats']} of the stencil)" if stencil else "")
        + ": the whole `job.run` untraced and traced, their ratio (of the medians, and the median of each traced "
        "run over the untraced run before it), the "
        "analysis alone on the same cell's traces (wall and CPU s), the events the PEs sent and the traced cell's "
        f"verdict (1-minute load average after each row: {load or '-'}"
        + (f"; measured {races['loops_date']}, apart from the rest of the section" if races.get("loops_date") else "")
        + ").\n\n"
        + table(
            [
                "cell",
                "PEs",
                "untraced s",
                "traced s",
                "ratio",
                "paired ratio",
                "ratio, Python",
                "analysis s",
                "analysis CPU s",
                "events",
                "verdict",
            ],
            rows,
        )
        + "".join(
            f"\n\nThe worst case of the same puts, every put its own event (no summary): {r['events']:,} events "
            f"analysed in {r['analysis_s']:.2f} s ({r['analysis_cpu_s']:.2f} s CPU)."
            for r in races.get("synthetic", [])[-1:]
        )
        + waits_table(races.get("waits"))
    )


def waits_table(rows):
    """Wait-heavy protocols: the analysis alone, the condition rule beside the observed-value rule."""
    if not rows:
        return ""
    names = {"ping_pong": "flag ping-pong (set, wait ==)", "credit_ring": "two-slot credit ring (counters, wait >=)"}
    body = [
        [
            names[r["workload"]],
            f"{r['rounds']:,}",
            f(r["condition_s"], 3),
            f(r["observed_s"], 3),
            f"{r['observed_s'] / r['condition_s']:.2f}",
            f"{r['condition_races']} / {r['observed_races']}",
        ]
        for r in rows
    ]
    return (
        "\n\nWait-heavy protocols (`bench/race_traces.py`, race-free), the analysis alone, median of 3: the rule "
        "that orders a wait after the writes its condition requires, beside the rule it replaced (after the writes "
        "whose values the wait saw: the same traces without the waits' conditions).\n\n"
        + table(
            [
                "protocol",
                "rounds",
                "condition rule s",
                "observed-value rule s",
                "observed / condition",
                "races found (condition / observed)",
            ],
            body,
        )
    )


def scale_table(sc):
    failed = [r for r in sc["rows"] if "error" in r]
    sc = dict(sc, rows=[r for r in sc["rows"] if "error" not in r])
    cols = [r["n"] for r in sc["rows"]]

    def line(label, key, fmt=f, scale=1.0):
        return [label] + [fmt(r.get(key) * scale) if r.get(key) is not None else "-" for r in sc["rows"]]

    def ratio(label, a, b):
        return [label] + [f"{r[a] / r[b]:.2f}x" if r.get(a) and r.get(b) else "-" for r in sc["rows"]]

    rows = [
        line("`%shmem start` s", "start"),
        line("`%shmem restart` s", "restart"),
        line("restart after a crash s", "restart_crash"),
        line("`--spare`: restart s", "restart_spare"),
        line("`--spare`: restart after a crash s", "restart_crash_spare"),
        line("oshrun floor s", "floor"),
        line("ipp MPI launcher (tuned) s", "ipp_mpi"),
        ratio("start / floor", "start", "floor"),
        ratio("restart / start", "restart", "start"),
        ratio("restart after crash / start", "restart_crash", "start"),
        ratio("`--spare`: restart / start", "restart_spare", "start"),
        ratio("`--spare`: restart after crash / start", "restart_crash_spare", "start"),
        line("no-op `%%pxshmem` ms", "pxshmem_ms"),
        line("`DirectView.execute` ms", "view_execute_ms"),
        ratio("`%%pxshmem` / execute", "pxshmem_ms", "view_execute_ms"),
        line(f"`%shmem gather` {size_text(sc['curve_gather_bytes'])}/PE ms", "gather_s", scale=1e3),
        line("`DirectView.pull` + stack ms", "pull_s", scale=1e3),
        ratio("gather / pull", "gather_s", "pull_s"),
    ]
    when = f" (measured {sc['measured']}, in a run of its own)" if sc.get("measured") else ""
    text = (
        f"**Scale**{when}, 1 to {max(cols)} PEs in one run: medians of {sc['repeats']} at up to 4 PEs, of 2 above "
        f"(no-op cells: median of {sc['cells']}). Floor = `oshrun -n N python -c 'from shmem4py import shmem; "
        "shmem.barrier_all()'`; ipp MPI = ipyparallel's `Cluster(engines='mpi')` with our heartbeat, to one "
        "round trip. More PEs than 2 cores are oversubscribed.\n\n" + table(["PEs", *map(str, cols)], rows)
    )
    for r in failed:
        text += f"\n\nAt {r['n']} PEs nothing could be measured: {r['error']}"
    g, o = sc.get("gather"), sc.get("output")
    if g:
        text += (
            f"\n\n`%shmem gather` of {size_text(g['bytes_per_pe'])} per PE at {g['n']} PEs: {g['ours_s']:.2f} s = "
            f"{g['ours_gbps']:.2f} GB/s (`DirectView.pull` + `np.stack`: {g['pull_gbps']:.2f} GB/s; NumPy copy in "
            f"the client: {g['numpy_copy_gbps']:.2f} GB/s into memory already touched"
            + (
                f", {g['numpy_fresh_copy_gbps']:.2f} GB/s for `.copy()` of all {g['n']} PEs' bytes into new memory, "
                "as any gather's result is, timed after each gather (medians of 5)"
                if "numpy_fresh_copy_gbps" in g
                else ""
            )
            + f"). Route taken: {GATHER_ROUTES.get(g.get('route'), g.get('route', 'file'))}"
            + (
                f" The file route (`SHMEM_NOTEBOOK_GATHER=file`: each PE writes its array, from symmetric "
                f"memory, at its offset in one file in `/dev/shm` that the result maps; one copy, into new tmpfs "
                f"pages): {g['file_s']:.2f} s = {g['file_gbps']:.2f} GB/s."
                if "file_s" in g
                else ""
            )
            + " `SHMEM_NOTEBOOK_GATHER=pickle`, the message path, copies on the PE, in zmq's receive in the "
            "controller and the client, and in `np.stack`: about the `DirectView.pull` figure."
        )
    if o:
        text += (
            f"\n\n{o['lines']:,} printed lines per PE at {o['n']} PEs (median of {o.get('repeats', 1)}): "
            f"`%%pxshmem` {o['pxshmem_s']:.2f} s, "
            f"`%%px` {o['px_s']:.2f} s; every line arrived in order per PE: {'yes' if o['complete'] else 'NO'}"
            + (
                f" (`%%px` showed as few as {o['px_fewest_lines']:,} of the {o['lines'] * o['n']:,} lines whole: it "
                "shows output in chunks as they come, and a chunk can end mid-line, the line's rest following "
                "under the same PE's next header, after other PEs' output)"
                if o.get("px_fewest_lines", o["lines"] * o["n"]) < o["lines"] * o["n"]
                else ""
            )
            + "."
        )
    return text


def slurm_table(sl):
    if not sl.get("available"):
        return f"**Slurm**: not measured ({sl.get('reason', 'unavailable')})."
    rows = [
        [
            r["nodes"],
            f(r["total"]),
            f(r["submit"]),
            f(r["queued"]),
            f(r["pes"]),
            f(r["stop"]),
            f(sl["local_start"]),
            f"{r['total'] / sl['local_start']:.2f}x",
        ]
        for r in sl["rows"]
    ]
    first = sl["first_job"]
    return (
        f"**Slurm: submission to ready**, {sl['n']} PEs in a batch job (`start(n={sl['n']}, slurm=True, "
        f"nodes=K)`), median of {sl['repeats']}, seconds, on a private Slurm whose nodes n1, n2 are this host "
        f"(`tests/slurm_cluster.py`). *sbatch*: the local batch proxy process starting and submitting; *queued*: "
        f"until it saw RUNNING (it asks `squeue` once a second); *PEs*: the PEs starting and registering "
        f"(`-` where every repeat was ready before RUNNING was seen). "
        f"The first job after `slurmctld` started took {f(first['total'])} s ({f(first['queued'])} s queued).\n\n"
        + table(["nodes", "submit to ready", "sbatch", "queued", "PEs", "stop", "same PEs on this host", "ratio"], rows)
    )


#: column labels of the library comparison: configuration -> label
LIBRARY_LABELS = {
    "oshmem": "`oshmem` (Open MPI)",
    "sos": "`sos` (Sandia OpenSHMEM)",
    "oshmpi": "`oshmpi` (OSHMPI over MPI)",
    "sos_emulated": "`sos`, teams emulated",
}
#: the libraries side by side, in column order, each compared with the first
COMPARED = ("oshmem", "sos", "oshmpi")


def compared(lib):
    """The libraries of :data:`COMPARED` the run knows (a run from before OSHMPI has two)."""
    return [c for c in COMPARED if c in lib["libraries"]]


def us(x):
    """Microseconds, as many digits as they mean."""
    return "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}")


def _library_cells(lib, config, n, value, fmt):
    """One cell of the comparison: the value, or why there is none (not built, failed)."""
    name = config.split("_")[0]
    if not lib["libraries"][name]["built"]:
        return "not built"
    if str(n) in lib.get("errors", {}).get(config, {}):
        return "failed"
    return fmt(value)


def library_rows(lib):
    """``[(what, PEs, {config: value})]`` of the comparison, in table order: seconds, or the PEs'
    statistics of a call (``{"us": median, "min_us": fastest, ...}``); None or {}: not measured."""
    rows, pes, names = [], lib["pes"], compared(lib)
    for n in lib["ns"]:
        for key, what in (("start", "start to ready, s"), ("stop", "stop, s"), ("floor", "oshrun floor, s")):
            rows.append((what, n, {c: lib["start"].get(c, {}).get(str(n), {}).get(key) for c in names}))
    for op in ("put", "get"):
        for size in lib["sizes"]:
            got = {c: pes.get(c, {}).get("2", {}).get("putget", {}).get(op, {}).get(str(size), {}) for c in names}
            rows.append((f"{op} {size_text(size)}, us", 2, got))
    cases = ["barrier_all"] + [f"{coll}/{b}" for b in lib["blocks"] for coll in ("fcollect", "alltoall")]
    for case in cases:
        coll, _, block = case.partition("/")
        what = f"{coll} {size_text(int(block))}/PE, us" if block else "barrier_all, us"
        for n in lib["ns"]:
            rows.append(
                (what, n, {c: pes.get(c, {}).get(str(n), {}).get("collectives", {}).get(case, {}) for c in names})
            )
    return rows


def median_and_fastest(stats):
    """``median (fastest)`` microseconds of one measurement."""
    return f"{us(stats['us'])} ({us(stats['min_us'])})" if stats else "-"


def libraries_tables(lib):
    """The library comparison: one table of the libraries side by side (each against Open MPI's OSHMEM),
    one of team sync native vs emulated."""
    names = compared(lib)
    heads = []
    for config in names:
        spec = next((p["spec"] for p in lib["pes"].get(config, {}).values()), None)
        shared = config == "sos" and lib["libraries"][config].get("shares_heaps")  # SOS built with shared heaps
        heads.append(
            LIBRARY_LABELS[config] + (f", OpenSHMEM {spec}" if spec else "") + (", shared heaps" if shared else "")
        )
    ratios = [f"{c} / {names[0]}" for c in names[1:]]
    rows = []
    for what, n, values in library_rows(lib):
        seconds = what.endswith(", s")
        fmt = f if seconds else median_and_fastest
        plain = {c: values[c] if seconds else values[c] and values[c]["us"] for c in names}
        base = plain[names[0]]
        rows.append(
            [
                what,
                n,
                *(_library_cells(lib, c, n, values[c], fmt) for c in names),
                *(f"{plain[c] / base:.2f}x" if base and plain[c] else "-" for c in names[1:]),
            ]
        )
    said = {"oshmem": "Open MPI's OSHMEM", "sos": "Sandia OpenSHMEM", "oshmpi": "OSHMPI (over Open MPI's MPI)"}
    text = (
        f"**Library against library**: {', '.join(said[c] for c in names[:-1])} and {said[names[-1]]} "
        f"through jobs the tool starts "
        f"(`Job(n, library=...)`, heap {lib['heap']}), interleaved. Start, stop and the floor (the library's "
        f"launcher running `python -c 'from shmem4py import shmem; shmem.barrier_all()'`): median of "
        f"{lib['repeats']}, seconds. Inside the PEs (shmem4py, OSU style: barrier, warm-up, each call timed, "
        f"the median, and in brackets the fastest call): put (+ quiet) and get PE 0 -> PE 1 of 2 PEs, "
        f"up to {lib['iters']:,} calls per size; "
        f"collectives on TEAM_WORLD as a cell calls them, up to {lib['coll_iters']:,} calls (fewer when they "
        f"took more than {lib['budget']:g} s), the mean over the PEs of each PE's median. More PEs than "
        f"cores are oversubscribed; a median far above the fastest call is time spent waiting (for a core, "
        f"for a progress thread), not moving data. On `oshmem` a cell's `alltoall` includes the "
        f"`barrier_all` the teams emulation puts before it (Open MPI 4.1.4 loses blocks without it). "
        f"{', '.join(f'*{r}*' for r in ratios)} compare the medians.\n\n"
        + table(["measured", "PEs", *heads, *ratios], rows)
    )
    for name, d in lib["libraries"].items():
        if not d["built"]:
            text += f"\n\n`{name}` is not built here: {d['reason']}"
    for config, per_n in lib.get("errors", {}).items():
        for n, error in per_n.items():
            text += f"\n\n`{config}` at {n} PEs failed: {error}"
    configs = [c for c in LIBRARY_LABELS if c.split("_")[0] in names]
    trows = []
    for n in lib["ns"]:
        got = {c: lib["pes"].get(c, {}).get(str(n), {}) for c in configs}
        sync = {c: g.get("teams_sync", {}).get("team_sync", {}) for c, g in got.items()}
        world = {c: g.get("teams_sync", {}).get("sync_all", {}) for c, g in got.items()}
        cells = [
            _library_cells(lib, c, n, sync[c], median_and_fastest)
            + (f", {got[c]['teams']}" if got[c].get("teams") else "")
            for c in configs
        ]
        native = sync.get("sos") and sync.get("sos_emulated")
        trows.append(
            [
                n,
                *cells,
                f"{sync['sos_emulated']['us'] / sync['sos']['us']:.2f}x" if native else "-",
                *(_library_cells(lib, c, n, world[c], median_and_fastest) for c in names),
            ]
        )
    text += (
        "\n\n**Team sync, native against emulated**: `Team.sync()` on a copy of TEAM_WORLD "
        "(`split_strided(0, 1, npes)`), us, the mean over the PEs of each PE's median (fastest call); "
        "emulated on OSHMEM and OSHMPI "
        "(OpenSHMEM 1.4 has no teams), native on SOS, and on SOS once more with `SHMEM_NOTEBOOK_TEAMS=emulated`; "
        "`sync_all()` beside it.\n\n"
        + table(
            [
                "PEs",
                *(f"{LIBRARY_LABELS[c]}: team sync" for c in configs),
                "`sos` emulated / native",
                *(f"`{c}`: sync_all" for c in names),
            ],
            trows,
        )
    )
    return text


def goals_table(gs):
    return "**Goals**\n\n" + table(
        ["goal", "measured", "result"], [[g["goal"], g["measured"], verdict(g["ok"])] for g in gs]
    )


def markdown(results):
    m = results["meta"]["machine"]
    parts = [
        f"Measured {results['meta']['date']} on {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, "
        f"Open MPI {m['openmpi']}, Python {m['python']}, ipyparallel {m['ipyparallel']}, NumPy {m['numpy']}; "
        f"load average {m['load_average_1min']} at the start (other jobs were running: read ratios, not "
        f"absolute times). `make bench` took {results['meta']['seconds'] / 60:.1f} min"
        + (" (--quick)" if results["meta"]["quick"] else "")
        + (
            f" for {', '.join(results['meta']['only'])} only; the other sections come from an earlier run"
            if results["meta"].get("only")
            else ""
        )
        + ".",
        goals_table(results["goals"]),
    ]
    if "startup" in results:
        parts.append(startup_tables(results["startup"]))
    if "dispatch" in results:
        parts.append(dispatch_table(results["dispatch"]))
    if "datapath" in results:
        parts.append(datapath_table(results["datapath"]))
    if "inspector" in results:
        parts.append(inspector_table(results["inspector"]))
    if "memory" in results:
        parts.append(memory_table(results["memory"], results.get("startup")))
    if "races" in results:
        parts.append(races_table(results["races"]))
    if "scale" in results:
        parts.append(scale_table(results["scale"]))
    if "slurm" in results:
        parts.append(slurm_table(results["slurm"]))
    if "libraries" in results:
        parts.append(libraries_tables(results["libraries"]))
    if "polite" in results:
        import polite  # bench/polite.py, beside this module

        intro = "**Polite waiting** (docs/waiting.md): 2 PEs, on and off in turns\n\n"
        parts.append(intro + polite.table(results["polite"]))
    if "student" in results and "summary" in results["student"]:
        import student_cost  # bench/student_cost.py, beside this module

        intro = "**One student's job**: every process of a 2-PE job, `start()` to its first cell's answer\n\n"
        parts.append(intro + student_cost.table(results["student"]["summary"]))
    return "\n\n".join(parts) + "\n"


def page_block(results, image):
    """The generated part of docs/benchmarks.md: the tables, the plot at ``image`` and why goals are missed."""
    missed = [g for g in results["goals"] if g["ok"] is False]
    reasons = {}  # one bullet per reason, naming every goal it explains
    for g in missed:
        reasons.setdefault(goals.why(g, results), []).append(g["goal"])
    why = "\n".join(f"- **{'; '.join(names)}**: {text}" for text, names in reasons.items())
    return (
        f"`make bench` (= `.venv/bin/python bench/run.py --update-docs`) measures shmem_notebook side by "
        f"side with what one would otherwise use, writes `bench/results.json` and `bench/results.png`, and "
        f"rewrites this section of `docs/benchmarks.md`. `--quick` is the smoke run of the test suite.\n\n"
        f"{markdown(results)}\n![benchmark results]({image})\n"
        + (f"\n**Why goals are missed**\n\n{why}\n" if missed else "")
    )


def update_page(path, block):
    """Put ``block`` between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` of the page at ``path``."""
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    with open(path) as fh:
        text = fh.read()
    if start not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n## Results\n\n{start}\n{end}\n"
    text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: f"{start}\n{block}{end}", text, flags=re.S)
    with open(path, "w") as fh:
        fh.write(text)


# -- the plot ----------------------------------------------------------------
def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(5, 3, figsize=(16, 22.5))
    m = results["meta"]["machine"]
    fig.suptitle(
        f"shmem_notebook benchmarks, {results['meta']['date']}: {m['cores']} cores, {m['cpu']}, Open MPI {m['openmpi']}"
    )
    st = results.get("startup")
    ax = axes[0, 0]
    if st:
        keys = [
            ("shmem_notebook", "%shmem start"),
            ("restart", "%shmem restart"),
            ("floor", "oshrun floor"),
            ("ipp_local_tuned", "ipp local tuned"),
            ("ipp_local_default", "ipp local defaults"),
            ("ipp_mpi_tuned", "ipp MPI tuned"),
            ("ipp_mpi_default", "ipp MPI defaults"),
        ]
        x = np.arange(len(st["rows"]))
        w = 0.8 / len(keys)
        for i, (k, label) in enumerate(keys):
            ax.bar(x + i * w, [r.get(k, 0) for r in st["rows"]], w, label=label)
        ax.set_xticks(x + 0.4 - w / 2, [f"{r['n']} PEs" for r in st["rows"]])
        ax.set_ylabel("seconds to ready")
        ax.set_ylim(0, 1.4 * max(r.get(k, 0) for r in st["rows"] for k, _ in keys))
        ax.legend(fontsize=7, ncol=3, loc="upper center")
    ax.set_title("Start to ready (median)")
    ax = axes[0, 1]
    if st:
        prof = st["profile"]["start"]
        steps = {k: v for k, v in prof.items() if k not in ("total", "wait for controller files") and v > 0.005}
        left = 0.0
        for i, (k, v) in enumerate(steps.items()):
            ax.barh(["%shmem start"], [v], left=left, color=f"C{i}", label=f"{k}: {v:.2f} s")
            left += v
        short = {
            "oshrun /bin/true": "oshrun true",
            "oshrun python -c pass": "+ python",
            "oshrun python + shmem_init (the floor)": "+ shmem_init\n(floor)",
            "floor + a PE's imports": "+ PE imports",
        }
        plain = st["profile"]["plain_processes"]
        ax.barh([short.get(k, k) for k in plain], list(plain.values()), color="grey")
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlim(0, 2.1 * max([left, *plain.values()]))  # room for the legend
        ax.legend(fontsize=7, loc="center right")
        ax.set_xlabel("seconds (grey: the same PEs without ipyparallel)")
    ax.set_title(f"Where start goes ({st['profile']['n'] if st else '-'} PEs)")
    dp = results.get("dispatch")
    ax = axes[0, 2]
    if dp:
        x = np.arange(len(dp["rows"]))
        for i, (k, label) in enumerate(
            [
                ("pxshmem_ms", "%%pxshmem"),
                ("px_ms", "%%px"),
                ("job_run_ms", "job.run"),
                ("view_execute_ms", "view.execute"),
            ]
        ):
            ax.bar(x + i * 0.2, [r[k] for r in dp["rows"]], 0.2, label=label)
        ax.set_xticks(x + 0.3, [f"{r['n']} PEs" for r in dp["rows"]])
        ax.set_ylabel("ms per no-op cell")
        ax.legend(fontsize=7)
    ax.set_title("Dispatch (median)")
    data = results.get("datapath")
    ax = axes[1, 0]
    if data:
        sizes = [r["size"] for r in data["rows"] if r["size"] > 8]
        rows = [r for r in data["rows"] if r["size"] > 8]
        for impl, label, style in [("cell", "cell", "-o"), ("script", "script", "--s"), ("c", "C", ":^")]:
            for op, colour in (("put", "C0"), ("get", "C1")):
                ax.plot(sizes, [r["gbps"][f"{impl}_{op}"] for r in rows], style, color=colour, label=f"{op} {label}")
        ax.plot(sizes, [r["gbps"]["c_memcpy"] for r in rows], "-", color="grey", label="memcpy")
        ax.plot(sizes, [r["gbps"]["numpy_copy"] for r in rows], "-.", color="black", label="NumPy copy")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [size_text(s) for s in sizes])
        ax.set_ylabel("GB/s")
        ax.legend(fontsize=7, ncol=2)
    ax.set_title("Data path bandwidth, PE 0 -> PE 1")
    ax = axes[1, 1]
    if data:
        row = next(r for r in data["rows"] if r["size"] == 8)
        labels = ["put cell", "put script", "put C", "get cell", "get script", "get C"]
        keys = ["cell_put", "script_put", "c_put", "cell_get", "script_get", "c_get"]
        ax.bar(labels, [row["seconds"][k] * 1e6 for k in keys], color=["C0", "C0", "C2", "C1", "C1", "C2"])
        ax.set_ylabel("us per operation")
        ax.tick_params(axis="x", labelsize=8, labelrotation=30)
    ax.set_title("Latency at 8 B")
    insp = results.get("inspector")
    ax = axes[1, 2]
    if insp and insp.get("available"):
        labels = [size_text(r["array_bytes"]) for r in insp["rows"]]
        x = np.arange(len(labels))
        key = "refresh_s" if insp["rows"] and "refresh_s" in insp["rows"][0] else "gather_snapshot_s"
        ax.bar(x - 0.2, [r[key] for r in insp["rows"]], 0.4, label="inspector refresh (s)")
        ax.bar(x + 0.2, [r["gather_s"] for r in insp["rows"]], 0.4, label="%shmem gather (s)")
        ax.set_xticks(x, labels)
        ax.set_ylabel("seconds")
        ax2 = ax.twinx()
        ax2.plot(x, [r["payload_bytes"] / MiB for r in insp["rows"]], "k-o", label="inspector payload (MiB)")
        ax2.plot(x, [r["gather_bytes"] / MiB for r in insp["rows"]], "r--s", label="gather bytes (MiB)")
        ax2.set_yscale("log")
        ax2.set_ylabel("MiB moved")
        ax.legend(fontsize=7, loc="upper left")
        ax2.legend(fontsize=7, loc="lower right")
    else:
        ax.text(0.5, 0.5, "inspector: not available", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(f"Inspector, {insp['n'] if insp and insp.get('available') else '-'} PEs")
    plot_scale(results.get("scale"), axes[2])
    plot_races(results.get("races"), axes[3])
    plot_libraries(results.get("libraries"), axes[4])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_races(races, axes):
    """Fourth row: the race check's loops, untraced beside traced, and the analysis alone."""
    import numpy as np

    loops = (races or {}).get("loops") or []
    ax, bx = axes[0], axes[1]
    axes[2].axis("off")
    if not loops:
        for a in (ax, bx):
            a.text(0.5, 0.5, "race loops: not measured", ha="center", va="center", transform=a.transAxes)
        return
    labels = [
        f"stencil x{r['iterations']}\n{r['n']} PEs"
        if r["workload"] == "stencil_loop"
        else f"{r['per_pe']:,} puts\nper PE"
        for r in loops
    ]
    x = np.arange(len(loops))
    ax.bar(x - 0.2, [r["untraced_s"] for r in loops], 0.4, label="untraced")
    ax.bar(x + 0.2, [r["traced_s"] for r in loops], 0.4, label="race=True")
    ax.set_xticks(x, labels)
    ax.set_yscale("log")
    ax.set_ylabel("whole job.run (s)")
    ax.set_title("Race check: the same cell untraced and traced")
    ax.legend()
    bx.bar(x - 0.2, [r["analysis_s"] for r in loops], 0.4, label="analysis, wall")
    bx.bar(x + 0.2, [r["analysis_cpu_s"] for r in loops], 0.4, label="analysis, CPU")
    bx.axhline(goals.BY_ID["race_scattered"].limit, color="k", ls="--", lw=1, label="goal at 60,000 puts per PE")
    bx.set_xticks(x, labels)
    bx.set_ylabel("s")
    bx.set_title("Race analysis alone (events analysed: " + ", ".join(f"{r['events']:,}" for r in loops) + ")")
    bx.legend()


def plot_scale(sc, axes):
    """Third row: cost against PEs, log-log, ours (solid) beside the baselines (dashed)."""
    panels = [
        (
            "Start and restart vs PEs",
            "seconds",
            [
                ("start", "%shmem start", "-o"),
                ("restart", "%shmem restart", "-s"),
                ("restart_crash", "restart after a crash", "-^"),
                ("floor", "oshrun floor", "--x"),
                ("ipp_mpi", "ipp MPI launcher", "--d"),
            ],
            1,
        ),
        (
            "No-op cell vs PEs",
            "ms",
            [("pxshmem_ms", "%%pxshmem", "-o"), ("view_execute_ms", "DirectView.execute", "--d")],
            1,
        ),
        (
            "Gather vs PEs",
            "ms",
            [("gather_s", "%shmem gather", "-o"), ("pull_s", "DirectView.pull + stack", "--d")],
            1e3,
        ),
    ]
    for ax, (title, unit, series, scale) in zip(axes, panels):
        if not sc:
            ax.set_title(title)
            continue
        sc = dict(sc, rows=[r for r in sc["rows"] if "error" not in r])
        ns = [r["n"] for r in sc["rows"]]
        for key, label, style in series:
            ax.plot(ns, [r.get(key, float("nan")) * scale for r in sc["rows"]], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("PEs (log)")
        ax.set_ylabel(f"{unit} (log)")
        ax.legend(fontsize=7)
        if "gather" in title:
            title += f" ({size_text(sc['curve_gather_bytes'])} per PE)"
        ax.set_title(title)


def plot_libraries(lib, axes):
    """Fourth row: the libraries side by side (latency, collectives and team sync, start to ready)."""
    import numpy as np

    titles = ["Libraries: put/get latency, 2 PEs", "Libraries: collectives and team sync", "Libraries: start to ready"]
    for ax, title in zip(axes, titles):
        ax.set_title(title)
    if not lib:
        return
    styles = {"oshmem": "C0", "sos": "C3", "oshmpi": "C2", "sos_emulated": "C1"}
    ax = axes[0]
    for config in compared(lib):
        putget = lib["pes"].get(config, {}).get("2", {}).get("putget")
        for op, style in (("put", "-o"), ("get", "--s")):
            if putget:
                ax.plot(
                    lib["sizes"],
                    [putget[op][str(s)]["us"] for s in lib["sizes"]],
                    style,
                    color=styles[config],
                    label=f"{op} {config}",
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lib["sizes"], [size_text(s) for s in lib["sizes"]], fontsize=7)
    ax.set_ylabel("us per operation (median)")
    ax.legend(fontsize=7)
    ax = axes[1]
    cases = ["barrier_all", f"fcollect/{lib['blocks'][0]}", f"alltoall/{lib['blocks'][0]}", "team_sync"]
    groups = [(case, n) for n in lib["ns"] for case in cases]
    x = np.arange(len(groups))
    for i, config in enumerate(LIBRARY_LABELS):
        got = lib["pes"].get(config, {})
        values = []
        for case, n in groups:
            p = got.get(str(n), {})
            v = (
                p.get("teams_sync", {}).get("team_sync", {})
                if case == "team_sync"
                else p.get("collectives", {}).get(case, {})
            ).get("us")
            values.append(v or 0)
        if any(values):
            ax.bar(x + (i - 1.5) * 0.2, values, 0.2, color=styles[config], label=config)
    ax.set_xticks(
        x,
        [f"{c.replace('/', ' ')} B\n{n} PEs" if "/" in c else f"{c}\n{n} PEs" for c, n in groups],
        fontsize=6,
        rotation=45,
    )
    ax.set_yscale("log")
    ax.set_ylabel("us per call (median, mean over PEs)")
    ax.legend(fontsize=7)
    ax = axes[2]
    x = np.arange(len(lib["ns"]))
    for i, config in enumerate(compared(lib)):
        per_n = lib["start"].get(config, {})
        for key, hatch, shift in (("start", None, 0.0), ("floor", "//", 0.2)):
            ax.bar(
                x + i * 0.27 + shift * 0.65 - 0.4,
                [per_n.get(str(n), {}).get(key) or 0 for n in lib["ns"]],
                0.13,
                color=styles[config],
                hatch=hatch,
                alpha=1.0 if key == "start" else 0.5,
                label=f"{config}: {'start to ready' if key == 'start' else 'oshrun floor'}",
            )
    ax.set_xticks(x, [f"{n} PEs" for n in lib["ns"]])
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=7)
