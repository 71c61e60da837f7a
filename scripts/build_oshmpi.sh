#!/usr/bin/env bash
# Build OSHMPI (OpenSHMEM 1.4 over MPI-3 one-sided communication) over Open MPI's MPI, and the PEs'
# virtualenv for it, into .oshmpi/.
#   scripts/build_oshmpi.sh TARBALL      (scripts/setup.sh --with-oshmpi TARBALL calls this)
# .oshmpi/install: OSHMPI (its oshcc; it has no oshrun: the PEs start under Open MPI's mpirun);
# .oshmpi/venv: a Python whose shmem4py is built against it, with shmem_notebook installed, so the PEs
# of `%shmem start --library oshmpi` run there. The MPI is Debian's Open MPI 4.1.4 (openmpi-bin,
# libopenmpi-dev), which scripts/setup.sh installs; docs/libraries.md says how to build over MPICH.
# Idempotent: each step is skipped when its result is there. About 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OSHMPI="$ROOT/.oshmpi"
TARBALL=${1:-}

BUILT="$OSHMPI/install/.built"
if [ -x "$OSHMPI/venv/bin/python" ] && [ -f "$OSHMPI/venv/.shmem4py-built" ] && [ -f "$BUILT" ]; then
    echo "== OSHMPI already built in .oshmpi/ (over $(mpirun.openmpi --version 2>/dev/null | head -1 || echo "Open MPI"))"
    exit 0
fi
if [ ! -f "$BUILT" ] && { [ -z "$TARBALL" ] || [ ! -f "$TARBALL" ]; }; then
    echo "OSHMPI needs its source: pass the tarball, e.g. scripts/setup.sh --with-oshmpi oshmpi-ee5cf11.tar.gz" \
         "(pmodels/oshmpi with its src/openpa submodule and ./autogen.sh run, or your site's copy)" \
         "${TARBALL:+; $TARBALL does not exist}" >&2
    exit 2
fi

APT_PACKAGES="openmpi-bin libopenmpi-dev"
missing=""
for pkg in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "== installing Debian packages for OSHMPI:$missing"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

mkdir -p "$OSHMPI"
if [ ! -f "$BUILT" ]; then
    echo "== building OSHMPI from $TARBALL into .oshmpi/install (over Open MPI's MPI)"
    rm -rf "$OSHMPI/src" && mkdir -p "$OSHMPI/src"
    tar xzf "$TARBALL" -C "$OSHMPI/src" --strip-components=1
    (
        cd "$OSHMPI/src"
        [ -x ./configure ] || ./autogen.sh > "$OSHMPI/build.log" 2>&1
        # Open MPI: the default window type (win_creates) is right; an MPICH before 4.1 needs
        # --enable-win-type=dynamic_win (docs/libraries.md)
        ./configure --prefix="$OSHMPI/install" CC=mpicc.openmpi CXX=mpicxx.openmpi --disable-cxx >> "$OSHMPI/build.log" 2>&1
        make -j"$(nproc)" >> "$OSHMPI/build.log" 2>&1
        make install >> "$OSHMPI/build.log" 2>&1
    ) || { echo "OSHMPI did not build: see the end of .oshmpi/build.log" >&2; tail -20 "$OSHMPI/build.log" >&2; exit 1; }
    rm -rf "$OSHMPI/src"
    touch "$BUILT"
fi

PYTHON=${PYTHON:-python3}
if [ ! -x "$OSHMPI/venv/bin/python" ]; then
    echo "== creating .oshmpi/venv (the PEs' Python for OSHMPI)"
    "$PYTHON" -m venv "$OSHMPI/venv"
fi
if [ ! -f "$OSHMPI/venv/.shmem4py-built" ]; then
    echo "== building shmem4py against OSHMPI's oshcc"
    "$OSHMPI/venv/bin/pip" install -q numpy cffi setuptools wheel
    # shmem4py compiles with $OSHCC / $SHMEMCC (else the first oshcc on PATH, which is Open MPI's OSHMEM)
    PATH="$OSHMPI/install/bin:$PATH" OSHCC="$OSHMPI/install/bin/oshcc" SHMEMCC="$OSHMPI/install/bin/oshcc" \
        CC="$OSHMPI/install/bin/oshcc" \
        "$OSHMPI/venv/bin/pip" install -q --no-cache-dir --no-binary shmem4py --no-build-isolation \
        --force-reinstall --no-deps "shmem4py==1.0.0"
    "$OSHMPI/venv/bin/pip" install -q -e "$ROOT"
    # the PEs' shmem4py must be OSHMPI's, and two PEs must be one job
    RUN_AS_ROOT=""; [ "$(id -u)" -eq 0 ] && RUN_AS_ROOT="--allow-run-as-root"
    OMPI_MCA_osc=^rdma mpirun.openmpi $RUN_AS_ROOT --oversubscribe -n 2 "$OSHMPI/venv/bin/python" -c \
        "from shmem4py import shmem; assert 'OSHMPI' in shmem.info_get_name() and shmem.n_pes() == 2, shmem.info_get_name()" \
        || { echo "shmem4py in .oshmpi/venv was not built against OSHMPI (see above)" >&2; exit 1; }
    touch "$OSHMPI/venv/.shmem4py-built"
fi
echo "== OSHMPI built: .oshmpi/install (oshcc), .oshmpi/venv (PEs' Python); start a job with --library oshmpi"
