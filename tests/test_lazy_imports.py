"""PEs and the controller import only the parts of ipyparallel and jupyter_client they use
(shmem_notebook.lazy_imports); the rest of both packages still comes on first use."""

import io
import subprocess
import sys

from conftest import job_fixture

CLIENT_SIDE = ("ipyparallel.client", "ipyparallel.cluster", "jupyter_client.manager", "jupyter_client.provisioning")


def _python(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()


def test_an_engine_and_a_controller_import_no_client_side_and_the_rest_comes_on_first_use():
    out = _python(
        "import sys\n"
        "from shmem_notebook import lazy_imports\n"
        "lazy_imports.install()\n"
        "lazy_imports.hold_back('debugpy')\n"
        "from ipyparallel.engine.app import IPEngine\n"
        "import ipyparallel, jupyter_client, ipykernel.debugger\n"
        f"print(sorted(m for m in {CLIENT_SIDE!r} if m in sys.modules))\n"
        "from ipyparallel.controller.app import IPController\n"  # its task scheduler takes AsyncResult
        f"print(sorted(m for m in {CLIENT_SIDE[1:]!r} if m in sys.modules))\n"
        "print(ipykernel.debugger._is_debugpy_available,\n"
        "      ipyparallel.__version__ == __import__('ipyparallel._version').__version__)\n"
        "lazy_imports.release('debugpy')\n"
        "import debugpy\n"
        "print(ipyparallel.Client.__name__, jupyter_client.KernelManager.__name__,\n"
        "      'ipyparallel.client' in sys.modules)\n"
        "from ipyparallel import *\n"
        "print(DirectView.__name__)\n"
    )
    assert out == ["[]", "[]", "False True", "Client KernelManager True", "DirectView"]


def test_install_leaves_a_package_that_is_imported_already():
    out = _python(
        "import sys, ipyparallel\n"
        "from shmem_notebook import lazy_imports\n"
        "real = sys.modules['ipyparallel']\n"
        "lazy_imports.install()\n"
        "print(sys.modules['ipyparallel'] is real, hasattr(real, 'Client'))\n"
    )
    assert out == ["True True"]


job = job_fixture(1, heap="8M")


def test_a_running_pe_has_no_client_side_yet_a_cell_may_use_it_all(job):
    code = (  # AsyncResult comes with the first request (ipyparallel's canning imports `dependent`)
        "import sys\n"
        f"print(sorted(m for m in {CLIENT_SIDE[1:]!r} if m in sys.modules))\n"
        "import debugpy, ipyparallel as ipp\n"
        "print(ipp.Client.__name__)"
    )
    assert job.run(code, stdout=io.StringIO()).stdout[0] == "[]\nClient\n"


def test_preload_imports_in_a_thread_and_leaves_a_failing_module_to_its_importer():
    out = _python(
        "import sys\n"
        "from shmem_notebook import lazy_imports\n"
        "thread = lazy_imports.preload(['colorsys', 'no_such_module_anywhere', 'fractions'])\n"
        "thread.join()\n"
        "print(thread.daemon, [m in sys.modules for m in ('colorsys', 'no_such_module_anywhere', 'fractions')])\n"
    )
    assert out == ["True [True, False, True]"]


def test_the_watchdog_imports_neither_ipyparallel_nor_numpy():
    """Every job starts a watchdog process: importing the client side made it 0.5 CPU-s of a
    2-PE job's 2.5-3 (a class of thirty starts thirty); its job package and options are light."""
    out = _python(
        "import sys\n"
        "from shmem_notebook.job.watchdog import main\n"
        "import shmem_notebook.launcher.shm\n"  # what main() imports when it runs
        "print(sorted(m for m in ('ipyparallel', 'numpy', 'IPython', 'zmq') if m in sys.modules))\n"
        "import shmem_notebook.job as job\n"
        "print(job.Job.__name__, job.JobOptions.__name__, job.start.__signature__.parameters['heap'].default)"
    )
    assert out == ["[]", "Job JobOptions None"]
