"""The inspector against real OpenSHMEM jobs: snapshot data, widget traits, fallbacks, the tour notebook.

Every value checked here was written by the PEs in a real ``oshrun`` job and
read back through the inspector's own gathering path.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import psutil
import pytest
from nbclient import NotebookClient

import shmem_notebook
from conftest import job_fixture, quiet
from shmem_notebook import InputError, NoJobError
from shmem_notebook.analysis.figures import figure_png
from shmem_notebook.inspector import Inspector, gather_snapshot, inspect, plots, tables

ROOT = Path(__file__).parent.parent
ARTIFACTS = Path(__file__).parent / "artifacts"
MiB = 1 << 20
TIMEOUT = 120
PNG = b"\x89PNG"


def record(key, value):
    """Keep a measured number in tests/artifacts/inspector_numbers.json (for the report)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "inspector_numbers.json"
    numbers = json.loads(path.read_text()) if path.exists() else {}
    numbers[key] = value
    path.write_text(json.dumps(numbers, indent=1, sort_keys=True))


#: a real 4-PE job with room for a 64 MiB array
job4 = job_fixture(4, heap="200M", timeout=TIMEOUT)


@pytest.fixture
def clean(job4):
    """The job with no arrays left over from the test (declared or bound to names)."""
    yield job4
    if job4.state == "running":
        for name in list(job4.specs):
            job4.free(name)
        quiet(
            job4,
            "for _n in [n for n, v in list(globals().items()) if isinstance(v, np.ndarray) and n.strip('_')]:\n"
            "    del globals()[_n]\nimport gc; gc.collect()",
        )


# -- snapshot data -----------------------------------------------------------------
def test_values_equal_what_the_pes_wrote(clean):
    job = clean
    job.alloc("A=int64[16]", "M=float32[3,5]")
    quiet(job, "A[:] = np.arange(16) * (me + 1)\nM[:] = np.arange(15).reshape(3, 5) + 0.5 * me")
    snap = gather_snapshot(job)
    assert snap.is_exact("A") and snap.is_exact("M")
    expected_a = np.stack([np.arange(16) * (pe + 1) for pe in range(4)])
    np.testing.assert_array_equal(snap.values("A"), expected_a)
    np.testing.assert_array_equal(snap.values("A"), job.gather("A"))  # same as the independent gather path
    np.testing.assert_array_equal(
        snap.values("M"), np.stack([np.arange(15).reshape(3, 5) + 0.5 * pe for pe in range(4)])
    )
    assert snap.values("M").dtype == np.float32
    for p in snap.pes:
        assert p["state"] == "idle" and p["reachable"]
        assert (
            p["arrays"]["A"]["declared"] and p["arrays"]["A"]["dtype"] == "int64" and p["arrays"]["A"]["shape"] == (16,)
        )
        assert p["pid"] == job.pes[p["pe"]]["pid"] and p["rss"] > 10 * MiB
        assert p["heap"]["size"] == 200 * MiB and p["heap"]["used"] == p["heap"]["size"] - p["heap"]["free"]
        assert p["last_cell"]["outcome"] == "ok" and p["last_cell"]["seconds"] >= 0


def test_arrays_allocated_directly_with_shmem4py_appear(clean):
    job = clean
    quiet(
        job,
        "D = shmem.zeros((3, 5), dtype='float32')\nD[...] = me\n"
        "E = shmem.array(np.arange(7.0) + me)\n"
        "alias = E\n"
        "_hidden = shmem.zeros(10, dtype='int16')\n",
    )
    snap = gather_snapshot(job)
    assert {"D", "E"} <= set(snap.names()) and "alias" not in snap.names()
    for p in snap.pes:
        d, e = p["arrays"]["D"], p["arrays"]["E"]
        assert (d["dtype"], d["shape"], d["bytes"], d["declared"]) == ("float32", (3, 5), 60, False)
        assert (e["dtype"], e["shape"], e["bytes"], e["aliases"]) == ("float64", (7,), 56, ["alias"])
        unnamed = [b for b in p["blocks"] if b["name"] is None]
        assert [b["bytes"] for b in unnamed] == [20]  # _hidden: allocated, but no public name
    np.testing.assert_array_equal(snap.values("D"), np.stack([np.full((3, 5), pe, np.float32) for pe in range(4)]))
    np.testing.assert_array_equal(snap.values("E"), np.stack([np.arange(7.0) + pe for pe in range(4)]))


def test_offsets_are_consistent_with_sizes_and_addresses(clean):
    job = clean
    job.alloc("A=int64[100]")
    quiet(job, "B = shmem.zeros(1000, dtype='int8')\nC = shmem.zeros((4, 4), dtype='complex128')")
    snap = gather_snapshot(job)
    layouts = []
    for p in snap.pes:
        blocks = sorted(p["blocks"], key=lambda b: b["offset"])
        assert blocks[0]["offset"] >= 0
        for a, b in zip(blocks, blocks[1:]):
            assert a["offset"] + a["bytes"] <= b["offset"], f"PE {p['pe']}: {a} overlaps {b}"
        assert blocks[-1]["offset"] + blocks[-1]["bytes"] <= p["heap"]["size"] + 4 * MiB
        assert sum(b["bytes"] for b in blocks) == p["heap"]["used"]
        layouts.append([(b["name"], b["offset"], b["bytes"]) for b in blocks])
    assert all(layout == layouts[0] for layout in layouts), "symmetric offsets must match on every PE"
    # independent check: the distances between the arrays' addresses, as the PEs see them
    out = quiet(job, "print(B.ctypes.data - A.ctypes.data, C.ctypes.data - A.ctypes.data)").stdout
    for pe in range(4):
        arrays = snap.pes[pe]["arrays"]
        assert out[pe].split() == [
            str(arrays["B"]["offset"] - arrays["A"]["offset"]),
            str(arrays["C"]["offset"] - arrays["A"]["offset"]),
        ]


def test_diff_marks_exactly_the_differing_elements(clean):
    job = clean
    job.alloc("X=float64[40]", "Y=int32[5,6]")
    quiet(
        job,
        "X[:] = np.arange(40.0)\nY[:] = 7\n"
        "if me == 2: X[[3, 17]] = -1\n"
        "if me == 0: X[5] = np.nan\n"
        "if me == 1: Y[4, 0] = 8\n",
    )
    snap = gather_snapshot(job)
    expected = np.zeros((4, 40), bool)
    expected[2, [3, 17]] = expected[0, 5] = True
    np.testing.assert_array_equal(snap.diff("X"), expected)
    assert snap.differing("X") == {0: 1, 2: 2}
    against_2 = np.zeros((4, 40), bool)
    against_2[[0, 1, 3]] = np.isin(np.arange(40), [3, 17])
    against_2[0, 5] = True
    np.testing.assert_array_equal(snap.diff("X", reference=2), against_2)
    y = snap.diff("Y")
    assert y.shape == (4, 5, 6) and np.argwhere(y).tolist() == [[1, 4, 0]]
    # NaN equals NaN: two PEs holding NaN at the same place agree
    quiet(job, "X[5] = np.nan")
    assert snap.differing("X") != gather_snapshot(job).differing("X") == {2: 2}
    with pytest.raises(InputError, match="reference must be a PE number 0..3"):
        snap.diff("X", reference=4)


def test_no_majority_is_said_not_hidden(clean):
    job = clean
    job.alloc("M=int64[4]")
    quiet(job, "M[:] = 1\nif me >= 2: M[0] = me")  # element 0 holds 1, 1, 2, 3: no value on most PEs
    text = gather_snapshot(job).describe_diff("M")
    assert text.startswith("M: no majority: no value is held by more than half of the PEs at 1 of 4 elements")
    assert "choose a reference PE" in text
    quiet(job, "M[:] = 1\nif me == 3: M[0] = 5")
    assert gather_snapshot(job).describe_diff("M") == "M: PE 3 differs from the consensus at 1 of 4 elements"
    job.free("M")


def test_an_outlier_does_not_paint_the_heatmap_one_colour(clean):
    from matplotlib.figure import Figure

    from shmem_notebook.inspector.plots import colour_range, plot_values

    job = clean
    job.alloc("O=float64[16]")
    quiet(job, "O[:] = np.arange(16.0) + me\nif me == 3: O[5] = 1e9")
    artists = plot_values(gather_snapshot(job), "O", ax=Figure().subplots())
    image = artists[0]
    assert (image.norm.vmin, image.norm.vmax) == (0.0, 18.0)  # the bulk spans the colours; 1e9 saturates
    title = image.axes.get_title(loc="left")
    assert "true min 0, max 1e+09" in title and "outliers saturate" in title
    assert colour_range(np.arange(10.0)) == (0.0, 9.0, "")  # no outlier: the full range, no note
    assert colour_range(np.array([0.0] * 30 + [1e9]))[:2] == (0.0, 1e9)  # only two values: both visible
    job.free("O")


def test_summaries_are_exact_block_statistics_and_the_diff_finds_the_block(clean):
    job = clean
    n = 1 << 20  # 8 MiB of float64
    job.alloc(f"BIG=float64[{n}]", "G=float32[300,500]")
    quiet(
        job,
        "BIG[:] = np.arange(BIG.size, dtype=np.float64) * (3 if me == 2 else 1)\n"
        "G[:] = np.arange(G.size, dtype=np.float32).reshape(G.shape) % 97\n"
        "if me == 3: BIG[123456] += 1\n"
        "if me == 1: BIG[[1000, 1001]] = BIG[[1001, 1000]]   # a swap keeps min, max and mean\n"
        "if me == 2: G[100, 7] = -5\n",
    )
    snap = gather_snapshot(job)
    assert not snap.is_exact("BIG") and not snap.is_exact("G")
    info = snap.pes[0]["arrays"]["BIG"]["summary"]
    _, bc = info["block"]
    gc = info["grid"][1]
    assert gc * bc >= n > (gc - 1) * bc
    means = snap.values("BIG")
    mins, maxs = snap.values("BIG", "min"), snap.values("BIG", "max")
    base = np.arange(n, dtype=np.float64)
    for pe, factor in ((0, 1), (2, 3)):  # PEs without a changed element: the exact block statistics
        data = base * factor
        starts = np.arange(0, n, bc)
        np.testing.assert_allclose(means[pe], np.add.reduceat(data, starts) / np.diff(np.append(starts, n)))
        np.testing.assert_array_equal(mins[pe], data[starts])
        np.testing.assert_array_equal(maxs[pe], np.maximum.reduceat(data, starts))
    mask = snap.diff("BIG", reference=0)
    assert mask[3].sum() == 1 and mask[3, 123456 // bc]
    assert mask[1].sum() == len({1000 // bc, 1001 // bc})
    np.testing.assert_array_equal(mask[1].nonzero()[0], sorted({1000 // bc, 1001 // bc}))
    assert not mask[0].any() and mask[2].sum() == gc  # PE 2 holds BIG * 3: every block differs from PE 0
    br2, bc2 = snap.pes[0]["arrays"]["G"]["summary"]["block"]
    g = snap.diff("G")
    assert np.argwhere(g).tolist() == [[2, 100 // br2, 7 // bc2]]
    assert snap.values("G", "min")[2, 100 // br2, 7 // bc2] == -5


@pytest.mark.parametrize("mib", [1 / 1024, 8, 64], ids=["1KiB", "8MiB", "64MiB"])
def test_payload_stays_bounded(clean, mib):
    job = clean
    n = int(mib * MiB) // 8
    job.alloc(f"P=float64[{n}]", "small=int64[8]")
    quiet(job, "P[:] = np.sin(np.arange(P.size) * 0.001 * (me + 1))\nsmall[:] = me")
    snap = gather_snapshot(job)
    assert 0 < snap.payload_bytes <= snap.budget == MiB, f"{snap.payload_bytes} bytes for {mib} MiB"
    assert snap.is_exact("small") and snap.is_exact("P") == (mib < 1)
    if mib >= 1:
        assert snap.payload_bytes > MiB // 2, "a large array should use most of the budget for detail"
    record(f"payload_bytes_{'1KiB' if mib < 1 else f'{mib}MiB'}", snap.payload_bytes)


def test_payload_stays_bounded_with_thousands_of_arrays(clean):
    job = clean
    quiet(
        job,
        "_keep = [shmem.zeros(8) for _ in range(1500)]\n"
        "for _i, _a in enumerate(_keep[:1200]): globals()[f'x{_i}'] = _a\n",
    )
    try:
        snap = gather_snapshot(job, timeout=60)
        assert snap.payload_bytes <= MiB
        for p in snap.pes:
            listed = len(p["blocks"])
            assert listed + p["omitted"]["count"] == 1500 and p["omitted"]["bytes"] == 64 * p["omitted"]["count"] > 0
            assert all(b["name"] for b in p["blocks"]), "named arrays are listed before unnamed ones"
        assert f"(+{snap.pes[0]['omitted']['count']} more)" in tables.arrays_table(snap)
    finally:
        quiet(job, "del _keep, _i, _a")


def test_refresh_4_pes_by_8_mib(clean):
    """Gathering and a widget refresh of 4 PEs x 8 MiB work; how long they take is measured by
    bench/inspector.py against the 1 s goal (make bench), not here."""
    job = clean
    job.alloc(f"W=float64[{MiB}]")
    quiet(job, "W[:] = np.random.default_rng(me).random(W.size)")
    snap = gather_snapshot(job)
    assert snap.names() == ["W"] and not snap.is_exact("W") and snap.seconds > 0
    insp = Inspector(job)
    assert insp.refresh().names() == ["W"] and insp.refreshes == 2 and insp.array == "W"
    insp.close()
    record("payload_bytes_4pe_8MiB", snap.payload_bytes)


def test_unknown_names_and_bad_arguments_get_one_sentence_errors(clean, monkeypatch):
    job = clean
    job.alloc("A=int64[4]")
    snap = gather_snapshot(job)
    with pytest.raises(InputError, match=r"no symmetric array named 'nope'.*arrays: A"):
        snap.values("nope")
    with pytest.raises(InputError, match="stat must be"):
        snap.values("A", stat="median")
    with pytest.raises(InputError, match="budget must be"):
        gather_snapshot(job, budget=10)
    with pytest.raises(InputError, match=r"no symmetric array named 'nope'"):
        inspect(job, array="nope")
    with pytest.raises(InputError, match="reference must be a PE number"):
        inspect(job, reference=7)
    monkeypatch.setattr(shmem_notebook.job, "_current", None)
    with pytest.raises(NoJobError, match="no OpenSHMEM job is running for the inspector"):
        inspect()


def test_client_and_pe_sides_import_only_what_they_need(clean):
    code = (
        "import sys, shmem_notebook.inspector as i\n"
        "i.Inspector, i.static_figure, i.state_table\n"
        "assert 'shmem4py' not in sys.modules, 'the client imported shmem4py'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    gather_snapshot(clean)
    out = quiet(clean, "import sys\nprint('matplotlib' in sys.modules, 'ipywidgets' in sys.modules)").stdout
    assert set(out.values()) == {"False False\n"}, "gathering must not load plotting or widgets on the PEs"


# -- widget -----------------------------------------------------------------------
def test_widget_traits_follow_the_data(clean):
    job = clean
    job.alloc("A=int64[6]", "T=float64[4,4]")
    quiet(job, "A[:] = me\nT[:] = 1.0\nif me == 1: T[2, 3] = 9")
    insp = Inspector(job)
    try:
        assert insp.array == "A" and insp.reference is None and insp.auto is False
        assert insp.array_select.options == ("A", "T") and insp.array_select.value == "A"
        for img in (insp.heap_image, insp.values_image, insp.diff_image):
            assert bytes(img.value).startswith(PNG) and len(img.value) > 5000
        state = insp.state_html.value
        assert "shmem-pe-state" in state and state.count(">idle<") == 4
        assert all(str(job.pes[pe]["pid"]) in state for pe in range(4))
        assert "A" in insp.arrays_html.value and "declared" in insp.arrays_html.value
        # every PE holds something else: there is no majority, and the summary says so
        # A[:] = me: different data by design, one pattern (value = b[pe]); nothing painted red
        assert (
            "A: PEs hold different data by design, all in one pattern (value = a[i] + b[pe]); no element breaks it"
            in insp.diff_html.value
        )
        before = insp.values_image.value
        insp.array_select.value = "T"  # as the front end does
        assert insp.array == "T" and bytes(insp.values_image.value) != bytes(before)
        assert "T: PE 1 differs from the consensus at 1 of 16 elements" in insp.diff_html.value
        assert "shmem-values" in insp.values_html.value
        insp.reference = 1
        assert (
            insp.reference_select.value == "1"
            and "(PE 0 at 1, PE 2 at 1, PE 3 at 1 of 16 elements)" in insp.diff_html.value
        )
        insp.reference_select.value = "consensus"
        assert insp.reference is None
        with pytest.raises(InputError, match="no symmetric array named 'zz'"):
            insp.array = "zz"
        with pytest.raises(InputError, match="reference must be a PE number 0..3"):
            insp.reference = 4
        # a new array appears after a refresh; the chosen array stays
        quiet(job, "Z = shmem.zeros(3)")
        assert "Z" not in insp.array_select.options
        insp.refresh()
        assert "Z" in insp.array_select.options and insp.array == "T"
        assert insp.refreshes == 2 and "refresh 2" in insp.title.value
    finally:
        insp.auto = False
        insp.close()


def test_auto_refresh_after_every_cell(clean):
    job = clean
    job.alloc("C=int64[4]")
    insp = inspect(job, auto=True, array="C")
    try:
        assert insp.auto_box.value is True and insp._on_cell in job.cell_callbacks
        first = insp.snapshot
        quiet(job, "C[:] = 10 + me")
        assert insp.snapshot is not first
        np.testing.assert_array_equal(insp.snapshot.values("C"), [[10 + pe] * 4 for pe in range(4)])
        insp.auto_box.value = False  # the checkbox, as clicked
        assert insp.auto is False and insp._on_cell not in job.cell_callbacks
        second = insp.snapshot
        quiet(job, "C[:] = 0")
        assert insp.snapshot is second
    finally:
        insp.auto = False
        insp.close()


def test_every_dtype_and_shape_renders(clean):
    job = clean
    quiet(
        job,
        "flags = shmem.zeros(5, dtype=bool); flags[me] = True\n"
        "z = shmem.zeros((3, 2), dtype='complex128'); z[:] = 1j * me\n"
        "scalar = shmem.zeros((), dtype='int64'); scalar[()] = 7\n"
        "cube = shmem.zeros((2, 3, 4), dtype='uint8'); cube[:] = me\n"
        "bigz = shmem.zeros(1 << 17, dtype='complex64'); bigz[:] = 1 + 1j\n"
        "bigb = shmem.zeros((1000, 600), dtype=bool); bigb[me::7] = True\n",
    )
    insp = Inspector(job)
    try:
        snap = insp.snapshot
        assert snap.values("scalar").tolist() == [7] * 4 and snap.values("cube").shape == (4, 2, 3, 4)
        assert snap.differing("flags") == {0: 1, 1: 1, 2: 1, 3: 1}  # per element, 3 PEs hold False
        assert np.argwhere(snap.diff("flags")).tolist() == [[pe, pe] for pe in range(4)]
        assert not snap.is_exact("bigz") and not snap.differing("bigz")
        assert snap.values("bigz", "max").max() == pytest.approx(abs(1 + 1j))
        assert not snap.is_exact("bigb") and set(snap.differing("bigb")) == {1, 2, 3}
        for name in snap.names():
            insp.array = name
            assert bytes(insp.values_image.value).startswith(PNG) and bytes(insp.diff_image.value).startswith(PNG)
    finally:
        insp.close()


def test_a_name_bound_to_different_arrays_is_reported_not_fatal(clean):
    job = clean
    quiet(
        job,
        "a1 = shmem.zeros(4)\nmixed = shmem.zeros(6, dtype='int32')\n"
        "if me % 2: mixed = mixed.view('int16')   # the same memory, seen differently on odd PEs",
    )
    insp = Inspector(job, array="a1")
    try:
        with pytest.raises(InputError, match="array 'mixed' has a different dtype, shape or summary on different PEs"):
            insp.snapshot.values("mixed")
        insp.array = "mixed"
        assert "different dtype, shape" in insp.diff_html.value and len(insp.values_image.value) == 0
        assert "mixed" in insp.arrays_html.value
    finally:
        insp.close()


def test_static_fallbacks_carry_the_figure_and_the_tables(clean):
    job = clean
    job.alloc("S=int16[5]")
    quiet(job, "S[:] = 3\nif me == 2: S[1] = 4")
    insp = Inspector(job, array="S")
    try:
        bundle = insp._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        html = bundle["text/html"]
        assert 'src="data:image/png;base64,' in html and "shmem-pe-state" in html and "shmem-values" in html
        assert "S: PE 2 differs from the consensus at 1 of 5 elements" in html
        text = bundle["text/plain"]
        assert "OpenSHMEM inspector" in text and text.count(" idle ") == 4 and "S: PE 2 differs" in text
        fig = plots.static_figure(insp.snapshot, "S")
        assert len(fig.axes) >= 4 and figure_png(fig).startswith(PNG)
    finally:
        insp.close()


def test_magic_inspect(clean, monkeypatch):
    from shmem_notebook.magics import ShmemMagics

    job = clean
    job.alloc("A=int64[4]")
    monkeypatch.setattr(shmem_notebook.job, "_current", job)
    magics = ShmemMagics(shell=None)  # the %shmem line magic itself, without touching IPython's global shell
    insp = magics.shmem("inspect --array A --reference 2")
    try:
        assert isinstance(insp, Inspector) and insp.array == "A" and insp.reference == 2 and not insp.auto
    finally:
        insp.close()
    with pytest.raises(InputError, match="no symmetric array named 'B'"):
        magics.shmem("inspect --array B")
    live = magics.shmem("inspect --auto")
    try:
        assert live.auto and live._on_cell in job.cell_callbacks
    finally:
        live.auto = False
        live.close()


# -- PEs that are busy, hung or dead --------------------------------------------------
@pytest.mark.pe
def test_hung_and_dead_pes_do_not_break_the_inspector():
    job = shmem_notebook.Job(3, heap="32M").start()
    try:
        job.alloc("A=int64[4]", "W=int64[1]")
        quiet(job, "A[:] = me", timeout=TIMEOUT)
        with pytest.raises(shmem_notebook.JobStateError):  # blocked in OpenSHMEM for PEs that finished: paused
            quiet(job, "print('working', me)\nif me == 1: shmem.wait_until(W, shmem.CMP.EQ, 99)", timeout=2)
        started = time.monotonic()
        snap = gather_snapshot(job, timeout=2)
        assert time.monotonic() - started < 10, "a stuck PE must not block the refresh"
        states = [(p["state"], p["reachable"]) for p in snap.pes]
        assert states == [("idle", True), ("hung", False), ("idle", True)]
        assert "no answer within 2 s" in snap.pes[1]["note"] and snap.pes[1]["last_cell"]["outcome"] == "stranded"
        assert snap.pes[0]["output_tail"] == "working 0"
        values = snap.values("A")
        assert values[0].tolist() == [0] * 4 and values[2].tolist() == [2] * 4 and np.isnan(values[1]).all()
        assert plots.diff_labels(snap, "A")[1] == ("PE 1 (no data)", plots.NO_DATA)  # not "PE 1 (0)": agreeing
        assert snap.describe_diff("A").endswith("; PE 1 has no data (hung)")
        insp = Inspector(job, timeout=2)
        assert "no data" in insp.static_text() and "stranded" in insp.state_html.value
        insp.close()
        os.kill(job.pes[2]["pid"], 9)
        deadline = time.monotonic() + 30
        while not job.dead_pes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert job.dead_pes(), "PE 2 was killed but the job does not see it"
        snap = gather_snapshot(job, timeout=2)
        assert snap.pes[2]["state"] == "dead" and not snap.pes[2]["reachable"]
        assert "dead" in tables.state_table(snap) and figure_png(plots.heap_figure(snap)).startswith(PNG)
    finally:
        job.stop()


# -- where widgets cannot render --------------------------------------------------------
@pytest.mark.pe
def test_terminal_ipython_prints_tables(tmp_path):
    script = tmp_path / "inspect.ipy"
    script.write_text(
        "%load_ext shmem_notebook\n"
        "import io, shmem_notebook\n"
        "try:\n"
        "    %shmem start -n 2 --heap 32M\n"
        "    shmem_notebook.current_job().run('T = shmem.zeros(3); T[:] = me', stdout=io.StringIO())\n"
        "    %shmem inspect\n"
        "finally:\n"
        "    %shmem stop\n"
    )
    env = dict(os.environ, MPLBACKEND="agg")
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--quick", "--no-banner", "--colors=NoColor", str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OpenSHMEM inspector: 2 PEs" in out, out[-2000:]
    assert "T          float64" in out or "T  " in out
    assert out.count(" idle ") == 2 and "OpenSHMEM job stopped" in out


# -- the tour notebook -------------------------------------------------------------------
def _descendants():
    try:
        return {p.pid: p for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return {}


def _running(p):
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(p):
    try:
        p.kill()
    except psutil.Error:
        pass


@pytest.mark.pe
def test_tour_notebook(tmp_path, every_library):
    nb = nbformat.read(ROOT / "notebooks" / "02-inspector.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    before = set(_descendants())  # e.g. the module's own job: not the notebook's
    seen = {}
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.on_cell_executed = lambda **kw: seen.update(
        {pid: p for pid, p in _descendants().items() if pid not in before}
    )
    try:
        client.execute()
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        nbformat.write(nb, ARTIFACTS / "02-inspector.ipynb")
        _, alive = psutil.wait_procs(list(seen.values()), timeout=30)  # the kernel and the job end
        left = [f"{p.pid} {' '.join(p.cmdline())[:100]}" for p in alive if _running(p)]
        for p in alive:
            _kill(p)
    assert not left, f"the notebook left processes behind: {left}"
    cells = {c.source.splitlines()[0]: c for c in nb.cells if c.cell_type == "code"}
    for source, cell in cells.items():
        expected = "raises-exception" in cell.metadata.get("tags", [])
        assert any(o.output_type == "error" for o in cell.outputs) == expected, source

    def data(first_line, kind):
        return [o.data[kind] for o in cells[first_line].outputs if kind in o.get("data", {})]

    shown = cells["insp = %shmem inspect --array squares"].outputs
    assert len(shown) == 1 and shown[0].output_type == "display_data", "the inspector is displayed exactly once"
    html = shown[0].data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in shown[0].data
    assert 'src="data:image/png;base64,' in html and html.count(">idle<") == 4
    assert "squares: PE 3 differs from the consensus at 1 of 12 elements" in html
    assert data(
        "insp.snapshot.differing('squares')   # PE -> number of elements that differ from the consensus", "text/plain"
    ) == ["{3: 1}"]
    assert data("live.snapshot.differing('squares')", "text/plain") == ["{}"]
    offsets = data(
        "[(a['name'], a['dtype'], a['shape'], hex(a['offset'])) for a in insp.snapshot.pes[0]['arrays'].values()]",
        "text/plain",
    )[0]
    for name in ("grid", "halo", "ring", "squares"):
        assert f"('{name}'" in offsets
    bare = cells["%shmem inspect --array ring --reference 0"].outputs
    assert [o.output_type for o in bare] == ["display_data"], "a bare %shmem inspect shows one inspector, not two"
    assert "ring: PE 1-3 differ from PE 0 (PE 1 at 8, PE 2 at 8, PE 3 at 8 of 8 elements)" in bare[0].data["text/html"]
    # who is stuck: PE 0 waits in a barrier nobody else enters; the inspector shows it hung (job/states.py)
    hung = cells["%%pxshmem --timeout 30 stop=int64[1]"].outputs
    said = "PE 1-3 finished the cell; PE 0 waits in shmem.wait_until() at line 2 for a value that no PE will write now"
    assert said in hung[-1].evalue
    assert "paused (no CPU)" in hung[-1].evalue
    stuck = cells["stuck = %shmem inspect --array squares"].outputs[0].data["text/html"]
    assert stuck.count(">hung<") == 1 and stuck.count(">idle<") == 3
    assert data("[(p['pe'], p['state']) for p in stuck.snapshot.pes]", "text/plain") == [
        "[(0, 'hung'), (1, 'idle'), (2, 'idle'), (3, 'idle')]"
    ]
    assert "OpenSHMEM job restarted: 4 PEs" in "".join(o.get("text", "") for o in cells["%shmem restart"].outputs)
    printed = "".join(o.get("text", "") for o in cells["print(insp.snapshot.describe_diff('squares'))"].outputs)
    assert printed.splitlines() == [
        "squares: PE 3 differs from the consensus at 1 of 12 elements",
        "ring: PE 1-3 differ from PE 0 (PE 1 at 8, PE 2 at 8, PE 3 at 8 of 8 elements)",
    ]


#: 8 PEs holding different data by design (issue 23 item 7)
job8 = job_fixture(8, heap="16M", timeout=TIMEOUT)


def test_data_different_by_design_singles_out_the_element_that_breaks_the_pattern(job8):
    job8.alloc("P=int64[16]")
    try:
        quiet(job8, "P[:] = 100 * me + np.arange(16)\nif me == 3: P[5] = 10**9")
        snap = gather_snapshot(job8)
        assert np.argwhere(snap.diff("P")).tolist() == [[3, 5]]  # not PE 1-7 painted red
        assert snap.describe_diff("P") == (
            "P: PEs hold different data by design (value = a[i] + b[pe] fits the rest); "
            "PE 3 breaks the shared pattern at 1 of 16 elements: [5]"
        )
        assert tables.values_table(snap, "P").count('class="diff') == 1
        assert snap.differing("P", reference=0)[1] == 16  # a chosen reference still compares element by element
        quiet(job8, "P[:] = 100 * me + np.arange(16)")
        assert (
            gather_snapshot(job8)
            .describe_diff("P")
            .endswith("all in one pattern (value = a[i] + b[pe]); no element breaks it")
        )
        quiet(job8, "P[:] = np.random.default_rng(me).integers(0, 10**6, 16)")  # no pattern: say so, invent nothing
        text = gather_snapshot(job8).describe_diff("P")
        assert text.startswith("P: no majority") and "breaks the shared pattern" not in text
    finally:
        job8.free("P")


def test_the_pattern_fit_alone():
    from shmem_notebook.inspector.pattern import breaks_pattern

    values = np.array([[100 * pe + i for i in range(16)] for pe in range(8)])
    values[3, 5] = 10**9
    assert np.argwhere(breaks_pattern(values)).tolist() == [[3, 5]]
    assert np.argwhere(breaks_pattern(values * 0.1)).tolist() == [[3, 5]]  # floats, within a relative tolerance
    assert breaks_pattern(np.random.default_rng(0).random((8, 16))) is None  # nothing explains random data
    assert breaks_pattern(values[:2]) is None  # two PEs: no pattern to speak of
