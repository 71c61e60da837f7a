#!/usr/bin/env bash
# Build OSHMPI (OpenSHMEM 1.4 over MPI-3 one-sided communication) over Open MPI's MPI, and the PEs'
# virtualenv for it, into .oshmpi/.
#   scripts/build_oshmpi.sh TARBALL      (scripts/setup.sh --with-oshmpi TARBALL calls this)
# .oshmpi/install: OSHMPI (its oshcc; it has no oshrun: the PEs start under Open MPI's mpirun);
# .oshmpi/venv: a Python whose shmem4py is built against it, with shmem_notebook installed, so the PEs
# of `%shmem start --library oshmpi` run there. The MPI is Debian's Open MPI 4.1.4 (openmpi-bin,
# libopenmpi-dev), which scripts/setup.sh installs; docs/libraries.md says how to build over MPICH.
# Idempotent: each step is skipped when its result is there. About 2 minutes on 2 cores (shared libraries only: --disable-static compiles each file once).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OSHMPI=${SHMEM_NOTEBOOK_OSHMPI_DIR:-$ROOT/.oshmpi}  # where the library entry looks (launcher/library.py)
TARBALL=${1:-}

BUILT="$OSHMPI/install/.built"
if [ -x "$OSHMPI/venv/bin/python" ] && [ -f "$OSHMPI/venv/.shmem4py-built" ] && [ -f "$BUILT" ]; then
    echo "== OSHMPI already built in ${OSHMPI#"$ROOT"/}/" \
         "(over $(mpirun.openmpi --version 2>/dev/null | head -1 || echo "Open MPI"))"
    exit 0
fi
if [ ! -f "$BUILT" ] && { [ -z "$TARBALL" ] || [ ! -f "$TARBALL" ]; }; then
    echo "OSHMPI needs its source: pass the tarball, e.g. scripts/setup.sh --with-oshmpi oshmpi-ee5cf11.tar.gz" \
         "(pmodels/oshmpi with its src/openpa submodule and ./autogen.sh run, or your site's copy)" \
         "${TARBALL:+; $TARBALL does not exist}" >&2
    exit 2
fi

. scripts/build_common.sh
install_missing OSHMPI openmpi-bin libopenmpi-dev

mkdir -p "$OSHMPI"
if [ ! -f "$BUILT" ]; then
    # Open MPI: the default window type (win_creates) is right; an MPICH before 4.1 with UCX needs
    # --enable-win-type=dynamic_win (docs/oshmpi.md)
    build_tarball OSHMPI "$OSHMPI" "$TARBALL" '{ [ -x ./configure ] || ./autogen.sh; } &&
        ./configure --prefix="$dir/install" CC=mpicc.openmpi CXX=mpicxx.openmpi --disable-cxx --disable-static &&
        make -j"$(nproc)" && make install'
    touch "$BUILT"
fi

if [ ! -f "$OSHMPI/venv/.shmem4py-built" ]; then
    pes_venv OSHMPI "$OSHMPI" "$OSHMPI/install/bin/oshcc"
    # the PEs' shmem4py must be OSHMPI's, and two PEs must be one job
    RUN_AS_ROOT=""; [ "$(id -u)" -eq 0 ] && RUN_AS_ROOT="--allow-run-as-root"
    OMPI_MCA_osc=^rdma mpirun.openmpi $RUN_AS_ROOT --oversubscribe -n 2 "$OSHMPI/venv/bin/python" -c \
        "from shmem4py import shmem; assert 'OSHMPI' in shmem.info_get_name() and shmem.n_pes() == 2" \
        || { echo "shmem4py in $OSHMPI/venv was not built against OSHMPI (see above)" >&2; exit 1; }
    touch "$OSHMPI/venv/.shmem4py-built"
fi
echo "== OSHMPI built: ${OSHMPI#"$ROOT"/}/install (oshcc), ${OSHMPI#"$ROOT"/}/venv (PEs' Python);" \
     "start a job with --library oshmpi"
