"""As an ordinary user, built the way repo2docker builds binder/ (issue 9, item 13).

HPC users and binder's ``jovyan`` are not root. When the suite runs as root, the set-up
creates the user ``shmemnb`` and runs everything below through ``runuser``; when it runs as
an ordinary user already, it runs as that user. The build follows repo2docker: the packages
of ``binder/apt.txt`` must be installed, the Python of ``binder/runtime.txt`` gets a fresh
virtualenv owned by the user, ``binder/postBuild`` runs as the user in a copy of the repository
the user owns, then every notebook is executed. To stay lean (seconds, not a rebuild of
shmem4py and JupyterLab), the fresh virtualenv sees the test virtualenv's site-packages
through a ``.pth`` line, so postBuild's ``pip install -e ".[pe,lab]"`` finds its requirements
met and installs only the package itself.
"""

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
USER = "shmemnb"


def _user():
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name, []
    try:
        pwd.getpwnam(USER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("running as root and useradd is missing: cannot make an ordinary user")
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return USER, [runuser, "-u", USER, "--"]


def _python_for(prefix):
    """A Python of this version the user can execute (the test venv's base may sit under /root)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/python{version}"):
        if (
            os.path.exists(candidate)
            and subprocess.run([*prefix, candidate, "-c", "pass"], capture_output=True).returncode == 0
        ):
            return candidate
    pytest.skip(f"no Python {version} that the ordinary user may run")


class UserEnv:
    def __init__(self, name, prefix, work):
        self.name, self.prefix, self.work = name, prefix, Path(work)
        self.home = pwd.getpwnam(name).pw_dir
        self.repo, self.venv = self.work / "repo", self.work / "venv"

    def run(self, *cmd, timeout=600, cwd=None):
        env = {
            k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH")
        }
        env.update(HOME=self.home, USER=self.name, PATH=f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin")
        return subprocess.run(
            [*self.prefix, *cmd], cwd=cwd or self.repo, env=env, capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="module")
def user_env():
    name, prefix = _user()
    work = tempfile.mkdtemp(prefix="shmemnb-user-")
    uid = pwd.getpwnam(name).pw_uid
    try:
        env = UserEnv(name, prefix, work)
        # the repository as the user gets it: a copy they own (repo2docker copies it into the image)
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\0")
        for rel in filter(None, files):
            src = REPO / rel
            if src.is_file():
                (env.repo / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, env.repo / rel)
        for dirpath, _dirnames, filenames in os.walk(work):
            for entry in [dirpath] + [os.path.join(dirpath, f) for f in filenames]:
                os.chown(entry, uid, -1)
        python = _python_for(prefix)
        t0 = time.monotonic()
        made = env.run(python, "-m", "venv", str(env.venv), cwd=work)
        assert made.returncode == 0, made.stderr
        site = Path(
            subprocess.run(
                [env.venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        pth = site / "zz_reuse_test_site_packages.pth"
        pth.write_text(sysconfig.get_paths()["purelib"] + "\n")
        os.chown(pth, uid, -1)
        built = env.run("bash", "binder/postBuild")
        env.postbuild_seconds = time.monotonic() - t0
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
        yield env
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_binder_files_match_this_platform():
    apt = (REPO / "binder/apt.txt").read_text().split()
    for package in ("openmpi-bin", "libopenmpi-dev"):  # oshrun, and oshcc to build shmem4py
        assert package in apt
    for package in apt:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        assert status.stdout.endswith("installed"), f"{package} (binder/apt.txt) is not installed"
    runtime = (REPO / "binder/runtime.txt").read_text().strip()
    assert runtime == f"python-{sys.version_info[0]}.{sys.version_info[1]}", runtime


@pytest.mark.pe
def test_notebooks_run_as_an_ordinary_user_after_postbuild(user_env):
    who = user_env.run("python", "-c", "import os, shmem_notebook; print(os.geteuid(), shmem_notebook.__file__)")
    uid, where = who.stdout.split()
    assert int(uid) != 0 and where.startswith(str(user_env.repo)), who.stdout + who.stderr
    print(f"venv + postBuild as {user_env.name}: {user_env.postbuild_seconds:.1f} s")
    out = user_env.work / "executed"
    for notebook in sorted((user_env.repo / "notebooks").glob("*.ipynb")):
        ran = user_env.run("python", "scripts/run_notebook.py", str(notebook), str(out / notebook.name))
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    quickstart = nbformat.read(out / "01-quickstart.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in quickstart.cells for o in c.get("outputs", []))
    assert "OpenSHMEM job ready: 4 PEs" in text and "[PE 0-3] squares of all PE numbers: [0 1 4 9]" in text


CYCLE = """
import io, os, shmem_notebook
from shmem_notebook import PEDiedError
job = shmem_notebook.Job(2, heap="16M").start()
assert job.run("import os; print(os.geteuid())", stdout=io.StringIO()).stdout[0].strip() != "0"
try:
    job.run("if me == 1:\\n    import os; os._exit(3)\\nimport time; time.sleep(20)",
            stdout=io.StringIO(), stderr=io.StringIO())
except PEDiedError as exc:
    print("crash:", str(exc).split(" while")[0])
job.restart()
print("after restart:", job.run("print(me)", stdout=io.StringIO()).stdout)
job.stop()
print("stopped:", job.state)
"""


@pytest.mark.pe
def test_crash_and_restart_as_an_ordinary_user(user_env):
    script = user_env.work / "cycle.py"
    script.write_text(CYCLE)
    ran = user_env.run("python", str(script), timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [
        "crash: PE 1 died of exit code 3",
        "after restart: {0: '0\\n', 1: '1\\n'}",
        "stopped: stopped",
    ], ran.stdout + ran.stderr
