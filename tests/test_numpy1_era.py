"""shmem4py programs of the NumPy 1 era run in a cell (issue 23 item 2): a pipeline written with the
Parallel Research Kernels' idioms passes 1-element arrays where numbers are expected
(``shmem.wait_until(flag[j:j+1], shmem.CMP.EQ, true)`` with ``true = shmem.array([1], dtype='i')``).
The same program as a plain ``oshrun`` script fails under NumPy 2: the shim is what makes it run."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

from conftest import job_fixture, quiet
from shmem_notebook.engine.shims import scalars
from shmem_notebook.launcher import local_slots, platform_environment

#: a pipeline over PEs in the PRK's p2p style (not its code): each stage adds its PE number
PIPELINE = """
import numpy
n = 16
data = shmem.zeros(n, dtype='d')
flag = shmem.zeros(n, dtype='i')
true = shmem.array([1], dtype='i')
total = shmem.zeros(1, dtype='i8')
shmem.barrier_all()
out = numpy.zeros(n)
for j in range(n):
    if me > 0:
        shmem.wait_until(flag[j:j+1], shmem.CMP.EQ, true)   # NumPy 1 era: an array as the value
    value = data[j:j+1] + me if me > 0 else numpy.array([float(j)])
    if me < npes - 1:
        shmem.put(data[j:j+1], value, me + 1)
        shmem.fence()
        shmem.put(flag[j:j+1], true, me + 1)
    out[j] = value[0]
shmem.atomic_add(total, numpy.array([2], dtype='i8'), 0)          # and as an atomic's value
shmem.barrier_all()
expected = numpy.arange(n) + sum(range(npes))
if me == npes - 1:
    print('Solution validates' if numpy.array_equal(out, expected) else f'ERROR {out}')
if me == 0:
    print('total', total[0])
shmem.free(data); shmem.free(flag); shmem.free(true); shmem.free(total)
"""

job = job_fixture(2, 4, heap="16M", timeout=120)


@pytest.mark.pe
def test_a_numpy1_era_pipeline_runs_in_a_cell(job):
    out = quiet(job, PIPELINE).stdout
    assert f"total {2 * job.n}\n" in out[0]
    assert out[job.n - 1].endswith("Solution validates\n"), out


@pytest.mark.pe
def test_the_same_program_as_a_plain_script_fails_under_numpy2(tmp_path):
    """Without the tool's shim, shmem4py 1.0.0 refuses the idiom: proof that the shim makes it run."""
    script = tmp_path / "pipeline.py"
    # shmem.array itself also fails under NumPy 2 (the other shim): made with zeros here, so
    # that the only NumPy 1 idiom left is the 1-element array passed as a number
    code = PIPELINE.replace("shmem.array([1], dtype='i')", "shmem.zeros(1, dtype='i'); true[0] = 1")
    script.write_text("from shmem4py import shmem\nme, npes = shmem.my_pe(), shmem.n_pes()\n" + code)
    env = {**os.environ, **platform_environment(heap="16M", local_only=True)}
    over = ["--oversubscribe"] if 2 > local_slots() else []
    proc = subprocess.run(
        ["oshrun", "-n", "2", *over, sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert proc.returncode != 0
    assert "only 0-dimensional arrays can be converted to Python scalars" in proc.stderr + proc.stdout


def test_only_one_element_arrays_become_numbers_and_undo_restores():
    calls = []
    fake = types.ModuleType("fake_shmem")

    def wait_until(ivar, cmp, value):
        calls.append(value)

    def put(target, source, pe):
        calls.append(source)

    fake.wait_until, fake.put = wait_until, put
    undo = scalars.install(fake)
    flag = np.zeros(4, dtype="i")
    fake.wait_until(flag[0:1], 0, np.array([1], dtype="i"))
    fake.wait_until(flag[0:1], 0, value=np.array([[7]]))
    fake.wait_until(flag[0:1], 0, 3)
    fake.put(flag, flag, 1)  # no number parameter: not wrapped, arrays pass
    assert calls[:3] == [1, 7, 3] and all(type(v) is int for v in calls[:3])
    assert calls[3] is flag and fake.put is put
    with pytest.raises(TypeError):  # several elements are not a number: shmem4py's own error stays
        int(scalars.as_scalar(np.array([1, 2])))
    undo()
    assert fake.wait_until is wait_until
