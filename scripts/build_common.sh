# Sourced by scripts/build_sos.sh and scripts/build_oshmpi.sh (ROOT: the checkout): the steps every
# optional library's build shares.

# install_missing WHAT PACKAGE...: install the Debian packages not installed yet (sudo when not root)
install_missing() {
    local what=$1 missing="" pkg
    shift
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
    done
    [ -z "$missing" ] && return 0
    echo "== installing Debian packages for $what:$missing"
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
}

# build_tarball WHAT DIR TARBALL STEPS: unpack TARBALL into DIR/src, run the shell STEPS there
# (configure, make, make install into DIR/install) with their output in DIR/build.log, then drop
# the sources; on failure show the log's end and exit
build_tarball() {
    local what=$1 dir=$2 tarball=$3 steps=$4
    echo "== building $what from $tarball into $dir/install"
    rm -rf "$dir/src" && mkdir -p "$dir/src"
    tar xzf "$tarball" -C "$dir/src" --strip-components=1
    ( cd "$dir/src" && eval "$steps" ) > "$dir/build.log" 2>&1 \
        || { echo "$what did not build: see the end of $dir/build.log" >&2; tail -20 "$dir/build.log" >&2; exit 1; }
    rm -rf "$dir/src"
}

# pes_venv WHAT DIR OSHCC: DIR/venv, the PEs' Python: shmem4py compiled with OSHCC (shmem4py takes
# $OSHCC, $SHMEMCC, else the first oshcc on PATH, which may be Open MPI's) and this package
pes_venv() {
    local what=$1 dir=$2 oshcc=$3
    if [ ! -x "$dir/venv/bin/python" ]; then
        echo "== creating $dir/venv (the PEs' Python for $what)"
        "${PYTHON:-python3}" -m venv "$dir/venv"
    fi
    echo "== building shmem4py against $what's oshcc"
    "$dir/venv/bin/pip" install -q numpy cffi setuptools wheel
    PATH="$(dirname "$oshcc"):$PATH" OSHCC="$oshcc" SHMEMCC="$oshcc" CC="$oshcc" \
        "$dir/venv/bin/pip" install -q --no-cache-dir --no-binary shmem4py --no-build-isolation \
        --force-reinstall --no-deps "shmem4py==1.0.0"
    # the editable install writes its metadata into the checkout: one build at a time (they may run side by side)
    flock "$ROOT/pyproject.toml" "$dir/venv/bin/pip" install -q -e "$ROOT"
}
