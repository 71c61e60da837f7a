#!/usr/bin/env bash
# Build Sandia OpenSHMEM (an OpenSHMEM 1.5 library) and the PEs' virtualenv for it, into .sos/.
#   scripts/build_sos.sh TARBALL      (scripts/setup.sh --with-sos TARBALL calls this)
# .sos/install: SOS (its oshrun, oshcc); .sos/venv: a Python whose shmem4py is built against it,
# with shmem_notebook installed, so the PEs of `%shmem start --library sos` run there.
# Idempotent: each step is skipped when its result is there. About 2 minutes on 2 cores (shared libraries only: --disable-static compiles each file once).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SOS=${SHMEM_NOTEBOOK_SOS_DIR:-$ROOT/.sos}  # where the library entry looks (launcher/library.py)
TARBALL=${1:-}

# SOS_SHARED_HEAPS=1 (an option, docs/libraries.md "Sandia OpenSHMEM on one node: shared heaps"): the PEs of
# one node map each other's heaps (loads, stores, processor atomics; scripts/sos-cma.patch) and poll in their
# waits; other nodes go over libfabric. Without it (the default): libfabric's sockets for everything.
# Each build leaves its marker in .sos/install; asking for the other one rebuilds SOS (its venv is kept).
# SOS_CONFIGURE_EXTRA: more configure options (a variant built elsewhere).
CONFIGURE_OPTS="--with-ofi --enable-pmi-simple --disable-fortran --disable-static ${SOS_CONFIGURE_EXTRA:-}"
if [ -z "${SOS_SHARED_HEAPS+set}" ] && [ -f "$SOS/install/.cma-built" ]; then
    SOS_SHARED_HEAPS=1  # unless told otherwise, a build chosen before stays
fi
if [ "${SOS_SHARED_HEAPS:-0}" = 1 ]; then
    PATCHED="$SOS/install/.cma-built"
    CONFIGURE_OPTS="$CONFIGURE_OPTS --with-cma --enable-hard-polling --enable-shr-atomics"
    SHARED_HEAPS=1
else
    PATCHED="$SOS/install/.team-psync-patched"  # an install from before the patch is rebuilt
    SHARED_HEAPS=
fi
if [ -x "$SOS/venv/bin/python" ] && [ -f "$SOS/venv/.shmem4py-built" ] && [ -f "$PATCHED" ]; then
    echo "== SOS already built in .sos/ ($("$SOS/install/bin/oshcc" --version 2>/dev/null | head -1 || true))"
    exit 0
fi
if [ -z "$TARBALL" ] || [ ! -f "$TARBALL" ]; then
    echo "SOS needs its source: pass the tarball, e.g. scripts/setup.sh --with-sos SOS-1.5.3.tar.gz" \
         "(Sandia OpenSHMEM 1.5.3 with its tests-sos submodule unpacked, from github.com/Sandia-OpenSHMEM/SOS" \
         "releases, or your site's copy)${TARBALL:+; $TARBALL does not exist}" >&2
    exit 2
fi

. scripts/build_common.sh
install_missing SOS autoconf automake libtool libfabric-dev mpich patch

mkdir -p "$SOS"
if [ ! -f "$PATCHED" ]; then
    # the patches (the files say why): a fix for 1.5.3's team pSyncs (skipped where a release has it), and with
    # SOS_SHARED_HEAPS=1 the shared heaps (a release scripts/sos-cma.patch does not apply to fails here)
    rm -f "$SOS/install/.cma-built" "$SOS/install/.team-psync-patched"  # the build they marked is replaced
    build_tarball SOS "$SOS" "$TARBALL" '{ patch -p1 -N < "$ROOT/scripts/sos-team-psync.patch" || true; } &&
        { [ -z "$SHARED_HEAPS" ] || patch -p1 -N < "$ROOT/scripts/sos-cma.patch"; } &&
        ./autogen.sh && ./configure --prefix="$dir/install" $CONFIGURE_OPTS &&
        make -j"$(nproc)" && make install'
    touch "$PATCHED"
fi

if [ ! -f "$SOS/venv/.shmem4py-built" ]; then
    pes_venv SOS "$SOS" "$SOS/install/bin/oshcc"
    # the PEs' shmem4py must be SOS's: an OpenSHMEM 1.5 library
    OSHRUN_LAUNCHER=mpiexec.hydra FI_PROVIDER=sockets SHMEM_SYMMETRIC_SIZE=8M "$SOS/install/bin/oshrun" -n 1 \
        "$SOS/venv/bin/python" -c "from shmem4py import shmem; assert shmem.info_get_version() >= (1, 5), shmem.info_get_name()" \
        || { echo "shmem4py in .sos/venv was not built against SOS (see above)" >&2; exit 1; }
    touch "$SOS/venv/.shmem4py-built"
fi
echo "== SOS built: .sos/install (oshrun), .sos/venv (PEs' Python); start a job with --library sos"
