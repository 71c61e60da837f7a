#!/usr/bin/env bash
# Install what is missing (see scripts/setup.sh), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Sandia OpenSHMEM's tests run where it is built; CI builds it from the vendored tarball beside
# the checkout when there is one (a machine without it skips them, saying why)
SOS_TARBALL=${SOS_TARBALL:-../shared/vendor/SOS-1.5.3.tar.gz}
if [ -f "$SOS_TARBALL" ]; then
    scripts/setup.sh --install --with-sos "$SOS_TARBALL" || echo "== SOS did not build (see above): its tests are skipped"
else
    scripts/setup.sh --install
fi
# OSHMPI's likewise (OpenSHMEM over Open MPI's MPI), from ../shared/vendor/oshmpi-*.tar.gz when there is one
OSHMPI_TARBALL=${OSHMPI_TARBALL:-$(ls ../shared/vendor/oshmpi-*.tar.gz 2>/dev/null | tail -1 || true)}
if [ -n "$OSHMPI_TARBALL" ] && [ -f "$OSHMPI_TARBALL" ]; then
    scripts/build_oshmpi.sh "$OSHMPI_TARBALL" || echo "== OSHMPI did not build (see above): its tests are skipped"
fi
# the fast tier first (seconds): lint and types; the suite runs only when they pass (make lint)
.venv/bin/ruff check . || { echo "== ruff check failed (above): fix the code, then run the tests again" >&2; exit 1; }
.venv/bin/ruff format --check . || { echo "== ruff format --check failed (above): run .venv/bin/ruff format ." >&2; exit 1; }
.venv/bin/mypy || { echo "== mypy failed (above): fix the types, then run the tests again" >&2; exit 1; }
exec .venv/bin/python -m pytest -ra "$@"
