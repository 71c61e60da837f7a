#!/usr/bin/env bash
# Build Sandia OpenSHMEM (an OpenSHMEM 1.5 library) and the PEs' virtualenv for it, into .sos/.
#   scripts/build_sos.sh TARBALL      (scripts/setup.sh --with-sos TARBALL calls this)
# .sos/install: SOS (its oshrun, oshcc); .sos/venv: a Python whose shmem4py is built against it,
# with shmem_notebook installed, so the PEs of `%shmem start --library sos` run there.
# Idempotent: each step is skipped when its result is there. About 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SOS="$ROOT/.sos"
TARBALL=${1:-}

PATCHED="$SOS/install/.team-psync-patched"  # an install from before the patch is rebuilt
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

APT_PACKAGES="autoconf automake libtool libfabric-dev mpich patch"
missing=""
for pkg in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "== installing Debian packages for SOS:$missing"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

mkdir -p "$SOS"
if [ ! -f "$PATCHED" ]; then
    echo "== building SOS from $TARBALL into .sos/install"
    rm -rf "$SOS/src" && mkdir -p "$SOS/src"
    tar xzf "$TARBALL" -C "$SOS/src" --strip-components=1
    (
        cd "$SOS/src"
        # a fix for 1.5.3's team pSyncs (the file says why); skipped where a release has it
        patch -p1 -N < "$ROOT/scripts/sos-team-psync.patch" > "$SOS/build.log" 2>&1 || true
        ./autogen.sh >> "$SOS/build.log" 2>&1
        ./configure --prefix="$SOS/install" --with-ofi --enable-pmi-simple --disable-fortran >> "$SOS/build.log" 2>&1
        make -j"$(nproc)" >> "$SOS/build.log" 2>&1
        make install >> "$SOS/build.log" 2>&1
    ) || { echo "SOS did not build: see the end of .sos/build.log" >&2; tail -20 "$SOS/build.log" >&2; exit 1; }
    rm -rf "$SOS/src"
    touch "$PATCHED"
fi

PYTHON=${PYTHON:-python3}
if [ ! -x "$SOS/venv/bin/python" ]; then
    echo "== creating .sos/venv (the PEs' Python for SOS)"
    "$PYTHON" -m venv "$SOS/venv"
fi
if [ ! -f "$SOS/venv/.shmem4py-built" ]; then
    echo "== building shmem4py against SOS's oshcc"
    "$SOS/venv/bin/pip" install -q numpy cffi setuptools wheel
    # shmem4py compiles with $SHMEMCC (else the first oshcc on PATH, which may be Open MPI's)
    PATH="$SOS/install/bin:$PATH" SHMEMCC="$SOS/install/bin/oshcc" CC="$SOS/install/bin/oshcc" \
        "$SOS/venv/bin/pip" install -q --no-cache-dir --no-binary shmem4py --no-build-isolation \
        --force-reinstall --no-deps "shmem4py==1.0.0"
    "$SOS/venv/bin/pip" install -q -e "$ROOT"
    # the PEs' shmem4py must be SOS's: an OpenSHMEM 1.5 library
    OSHRUN_LAUNCHER=mpiexec.hydra FI_PROVIDER=sockets SHMEM_SYMMETRIC_SIZE=8M "$SOS/install/bin/oshrun" -n 1 \
        "$SOS/venv/bin/python" -c "from shmem4py import shmem; assert shmem.info_get_version() >= (1, 5), shmem.info_get_name()" \
        || { echo "shmem4py in .sos/venv was not built against SOS (see above)" >&2; exit 1; }
    touch "$SOS/venv/.shmem4py-built"
fi
echo "== SOS built: .sos/install (oshrun), .sos/venv (PEs' Python); start a job with --library sos"
