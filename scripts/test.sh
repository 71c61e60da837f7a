#!/usr/bin/env bash
# Install what is missing (see scripts/setup.sh), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --install
# The optional libraries' tests run where they are built. CI builds them from the vendored tarballs
# beside the checkout when they are there (a machine without them skips their tests, saying why):
# Sandia OpenSHMEM and OSHMPI side by side (their configure steps run on one core each), each one's
# messages shown when it is done; a build that fails skips its tests.
SOS_TARBALL=${SOS_TARBALL:-../shared/vendor/SOS-1.5.3.tar.gz}
OSHMPI_TARBALL=${OSHMPI_TARBALL:-$(ls ../shared/vendor/oshmpi-*.tar.gz 2>/dev/null | tail -1 || true)}
builds=()
optional_build() {  # optional_build NAME SCRIPT TARBALL: in the background, its messages kept in a file
    local log
    log=$(mktemp)
    { "$2" "$3" || echo "== $1 did not build (see above): its tests are skipped"; } > "$log" 2>&1 &
    builds+=("$!:$log")
}
if [ -f "$SOS_TARBALL" ]; then optional_build SOS scripts/build_sos.sh "$SOS_TARBALL"; fi
if [ -n "$OSHMPI_TARBALL" ] && [ -f "$OSHMPI_TARBALL" ]; then
    optional_build OSHMPI scripts/build_oshmpi.sh "$OSHMPI_TARBALL"
fi
for build in ${builds[@]+"${builds[@]}"}; do
    wait "${build%%:*}" || true
    cat "${build#*:}" && rm -f "${build#*:}"
done
# the fast tier first (seconds): lint and types; the suite runs only when they pass (make lint)
.venv/bin/ruff check . || { echo "== ruff check failed (above): fix the code, then run the tests again" >&2; exit 1; }
.venv/bin/ruff format --check . || { echo "== ruff format --check failed (above): run .venv/bin/ruff format ." >&2; exit 1; }
.venv/bin/mypy || { echo "== mypy failed (above): fix the types, then run the tests again" >&2; exit 1; }
# three workers (pytest-xdist) on 2 cores: the suite waits more than it computes (docs/install.md); each
# takes whole modules (their jobs are module-scoped), the slowest first
exec .venv/bin/python -m pytest -ra --durations=15 -n 3 --dist loadfile "$@"  # and the 15 slowest tests
