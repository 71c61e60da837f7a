#!/usr/bin/env bash
# Set up shmem_notebook on Debian (bookworm) and run the main job.
#   scripts/setup.sh            install everything, then execute notebooks/01-quickstart.ipynb
#   scripts/setup.sh --install  install everything, run nothing (the test command uses this)
#   scripts/setup.sh --with-sos TARBALL   also build Sandia OpenSHMEM (OpenSHMEM 1.5) into .sos/
#                               from its source tarball (scripts/build_sos.sh), for --library sos
#   scripts/setup.sh --with-oshmpi TARBALL   also build OSHMPI (OpenSHMEM 1.4 over Open MPI's MPI) into
#                               .oshmpi/ from its source tarball (scripts/build_oshmpi.sh), for --library oshmpi
# A class on one server (docs/classroom.md): JupyterHub comes with the [hub] extra into .venv, its proxy
# (configurable-http-proxy, from npm) into .hub/ (Debian's nodejs and npm are installed when missing).
# Idempotent: Debian packages are installed only when missing; the virtualenv is .venv/.
set -euo pipefail
cd "$(dirname "$0")/.."

INSTALL_ONLY=""; SOS_TARBALL=""; WITH_SOS=""; OSHMPI_TARBALL=""; WITH_OSHMPI=""
while [ $# -gt 0 ]; do
    case "$1" in
        --install) INSTALL_ONLY=1 ;;
        --with-sos) WITH_SOS=1; if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then SOS_TARBALL=$2; shift; fi ;;
        --with-oshmpi) WITH_OSHMPI=1; if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then OSHMPI_TARBALL=$2; shift; fi ;;
        *) echo "scripts/setup.sh: unknown option $1; use --install, --with-sos TARBALL and/or --with-oshmpi TARBALL" >&2
           exit 2 ;;
    esac
    shift
done

APT_PACKAGES="openmpi-bin libopenmpi-dev chromium chromium-driver slurmctld slurmd slurm-client munge gdb"
PYTHON=${PYTHON:-python3}

missing=""
for pkg in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if ! "$PYTHON" -c "import venv, ensurepip" 2>/dev/null; then missing="$missing python3-venv python3-dev"
# C extensions (shmem4py's, the race recording's) need Python's headers
elif ! "$PYTHON" -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" 2>/dev/null; then
    missing="$missing python3-dev"
fi
command -v node >/dev/null || missing="$missing nodejs"  # JupyterHub's proxy runs on Node.js
command -v npm >/dev/null || missing="$missing npm"
if [ -n "$missing" ]; then
    echo "== installing Debian packages:$missing"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$PYTHON" -m venv .venv
fi
# shmem4py builds against Open MPI's OpenSHMEM (oshcc)
if ! .venv/bin/pip install -q -e ".[test]" ; then
    echo "pip install failed: see the messages above" >&2; exit 1
fi
# JupyterHub's proxy, local to the checkout (.hub/ is ignored by git); the hub finds it there (shmem_notebook/hub)
CHP_VERSION=4.6.3
if [ "$(.hub/node_modules/.bin/configurable-http-proxy --version 2>/dev/null)" != "$CHP_VERSION" ]; then
    echo "== installing configurable-http-proxy $CHP_VERSION into .hub/"
    npm install --prefix .hub --no-fund --no-audit --loglevel=error "configurable-http-proxy@$CHP_VERSION" \
        || { echo "npm install of configurable-http-proxy failed: see the messages above" >&2; exit 1; }
fi
echo "== installed: $(.venv/bin/python -c 'import shmem_notebook, ipyparallel, numpy; print("shmem_notebook", shmem_notebook.__version__, "ipyparallel", ipyparallel.__version__, "numpy", numpy.__version__)')"

if [ -n "$WITH_SOS" ]; then scripts/build_sos.sh "$SOS_TARBALL"; fi
if [ -n "$WITH_OSHMPI" ]; then scripts/build_oshmpi.sh "$OSHMPI_TARBALL"; fi
if [ -n "$INSTALL_ONLY" ]; then exit 0; fi

echo "== running the main job: notebooks/01-quickstart.ipynb (4 PEs)"
mkdir -p notebooks/executed
.venv/bin/python scripts/run_notebook.py notebooks/01-quickstart.ipynb notebooks/executed/01-quickstart.ipynb
echo "== done: the executed notebook is notebooks/executed/01-quickstart.ipynb"
echo "   open the notebooks in JupyterLab with: .venv/bin/jupyter lab notebooks/"
